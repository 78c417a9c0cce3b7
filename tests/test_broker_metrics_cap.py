"""The cap on the per-replica series of a broker's ``/metrics`` (``--metrics-replica-series-max``): all of them or
none, ``pykraft_broker_replica_series_omitted`` saying how many were left out, and ``/metrics/replicas`` always
listing every replica — through the collector, the WSGI app and a real HTTP server on loopback."""

from __future__ import annotations

import argparse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from metrics_helpers import Scrape
from prometheus_client import CollectorRegistry, generate_latest

from pykraft import broker
from pykraft.broker_metrics import (
    BrokerCollector,
    broker_metrics_app,
    broker_registry,
    replicas_registry,
    serve_broker_metrics,
)
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import MESSAGE_BYTES, BrokerState, Partition, PartitionMetadata, ReplicaConfig
from pykraft.testing import free_ports
from quorum.log.message import Uuid

T = Uuid.random()
BROKER = {"broker_id": "1"}
OMITTED = "pykraft_broker_replica_series_omitted"
SERIES = ("kafka_log_log_size", "kafka_log_log_end_offset")


def manager(partitions: int = 3) -> ReplicaManager:
    """Broker 1 holding ``partitions`` replicas of topic "t": it leads the even ones (partition 0 with broker 3 out
    of the ISR), follows broker 2 on the odd ones; partition i's log ends at offset 10 * (i + 1)."""
    m = ReplicaManager(1, ReplicaConfig(), lambda: 0, lambda: 11)
    brokers = {b: BrokerState(10 + b, False, False, None) for b in (1, 2, 3)}
    m.apply_metadata(
        [
            PartitionMetadata(T, "t", i, 1 if i % 2 == 0 else 2, 0, 0, (1, 2, 3), (1, 2) if i == 0 else (1, 2, 3))
            for i in range(partitions)
        ],
        brokers,
    )
    for (_, i), p in m.partitions.items():
        p.start_log(10 * (i + 1))
    return m


def scrape(registry: CollectorRegistry) -> Scrape:
    return Scrape(generate_latest(registry).decode())


def replica_samples(s: Scrape) -> dict[tuple[str, str], float]:
    """(series, partition) -> value for every kafka_log_* sample of topic t on broker 1."""
    return {
        (x.name, x.labels["partition"]): x.value
        for x in s.samples
        if x.name in SERIES and x.labels.get("topic") == "t" and x.labels.get("broker_id") == "1"
    }


def expected(partitions: int) -> dict[tuple[str, str], float]:
    return {
        **{("kafka_log_log_end_offset", str(i)): 10.0 * (i + 1) for i in range(partitions)},
        **{("kafka_log_log_size", str(i)): 10.0 * (i + 1) * MESSAGE_BYTES for i in range(partitions)},
    }


def assert_aggregates(s: Scrape, partitions: int) -> None:
    """The counts come from the scrape's one pass over the replicas, capped or not."""
    assert s.value("kafka_server_replicamanager_partition_count", **BROKER) == partitions
    assert s.value("kafka_server_replicamanager_leader_count", **BROKER) == (partitions + 1) // 2
    assert s.value("kafka_server_replicamanager_under_replicated_partitions", **BROKER) == 1


@pytest.fixture
def peeks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the replicas whose log end a scrape reads (Partition.peek_leo, called once per replica listed)."""
    calls: list[int] = []
    original = Partition.peek_leo

    def counting(self: Partition, now_ms: int) -> int:
        calls.append(self.index)
        return original(self, now_ms)

    monkeypatch.setattr(Partition, "peek_leo", counting)
    yield calls


def test_under_the_cap_every_replica_is_listed_and_none_omitted(peeks: list[int]) -> None:
    s = scrape(broker_registry(manager(3), replica_series_max=3))  # the cap is inclusive
    assert replica_samples(s) == expected(3)
    assert s.value(OMITTED, **BROKER) == 0
    assert sorted(peeks) == [0, 1, 2]
    assert_aggregates(s, 3)


def test_over_the_cap_none_is_listed_and_all_are_on_the_replicas_path(peeks: list[int]) -> None:
    m = manager(5)
    s = scrape(broker_registry(m, replica_series_max=4))
    assert replica_samples(s) == {}
    assert not s.names & set(SERIES)  # not even another broker's or topic's: no subset at all
    assert s.value(OMITTED, **BROKER) == 5
    assert peeks == []  # no replica's series were even built
    assert_aggregates(s, 5)
    full = scrape(replicas_registry(m))
    assert replica_samples(full) == expected(5)
    assert OMITTED not in full.names and "kafka_server_replicamanager_partition_count" not in full.names


def test_cap_zero_lists_no_replica_and_tells_capped_from_empty() -> None:
    s = scrape(broker_registry(manager(2), replica_series_max=0))
    assert replica_samples(s) == {}
    assert s.value(OMITTED, **BROKER) == 2
    empty = scrape(broker_registry(manager(0), replica_series_max=0))
    assert empty.value(OMITTED, **BROKER) == 0
    assert empty.value("kafka_server_replicamanager_partition_count", **BROKER) == 0


def test_the_cap_follows_the_replicas_held() -> None:
    """Replicas coming and going move a broker across the cap between two scrapes of the same registry."""
    m = manager(2)
    registry = broker_registry(m, replica_series_max=2)
    assert scrape(registry).value(OMITTED, **BROKER) == 0
    m.apply_delta([PartitionMetadata(T, "t", 2, 1, 0, 0, (1, 2, 3), (1, 2, 3))], [])
    s = scrape(registry)
    assert s.value(OMITTED, **BROKER) == 3 and replica_samples(s) == {}
    m.apply_delta([], [(T, 2)])
    assert replica_samples(scrape(registry)) == expected(2)


def test_a_negative_cap_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        BrokerCollector(manager(0), -1)


def test_the_broker_option_parses_and_refuses_negatives(capsys: pytest.CaptureFixture[str]) -> None:
    p = argparse.ArgumentParser(prog="pykraft broker")
    broker.add_arguments(p)
    required = ["--broker-id", "1", "--bootstrap-server", "127.0.0.1:1"]
    assert p.parse_args(required).metrics_replica_series_max == 10_000
    assert p.parse_args([*required, "--metrics-replica-series-max", "0"]).metrics_replica_series_max == 0
    with pytest.raises(SystemExit):
        p.parse_args([*required, "--metrics-replica-series-max", "-1"])
    assert "--metrics-replica-series-max: must be at least 0, got -1" in capsys.readouterr().err


def call(app: Any, path: str) -> tuple[str, str]:
    """A GET of ``path`` through the WSGI app in process: (status, body)."""
    status: list[str] = []
    body = app(
        {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": ""},
        lambda s, headers, exc_info=None: status.append(s),
    )
    return status[0], b"".join(body).decode()


def test_the_app_dispatches_by_path() -> None:
    m = manager(3)
    app = broker_metrics_app(broker_registry(m, replica_series_max=1), replicas_registry(m))
    for path in ("/metrics", "/", "/metrics/other"):
        status, text = call(app, path)
        assert status == "200 OK"
        assert Scrape(text).value(OMITTED, **BROKER) == 3 and replica_samples(Scrape(text)) == {}, path
    for path in ("/metrics/replicas", "/metrics/replicas/"):
        status, text = call(app, path)
        assert status == "200 OK" and replica_samples(Scrape(text)) == expected(3), path


def test_both_paths_over_http() -> None:
    m = manager(3)
    [port] = free_ports(1)
    server = serve_broker_metrics(m, "127.0.0.1", port, replica_series_max=2)

    def get(path: str) -> Scrape:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return Scrape(r.read().decode())

    try:
        main, replicas = get("/metrics"), get("/metrics/replicas")
    finally:
        server.shutdown()
        server.server_close()
    assert main.value(OMITTED, **BROKER) == 3 and replica_samples(main) == {}
    assert replica_samples(replicas) == expected(3)
