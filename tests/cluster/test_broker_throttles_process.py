"""One short process-level check of the broker wiring: two ``pykraft broker`` agents with --initial-partition-bytes
and --metrics-port (producing 5 messages/s, so a paused follower falls behind) against a one-voter controller. Their
replicas start at the given size (DescribeReplicas over the real listener); throttle configs set through
IncrementalAlterConfigs — a cluster-wide default rate and a topic's throttled replicas — reach the brokers through
their config polls once a paused follower leaves the ISR, and show in DescribeReplicas and the metrics. The rates
themselves are tested on a virtual clock (test_replication_throttles.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource, ConfigResourceType
from pykraft.client import AdminClient, NewTopic
from pykraft.replica.data_plane import describe_replicas
from pykraft.replica.manager import ReplicaInfo
from pykraft.testing import Cluster, free_ports

MIB = 1 << 20


class Broker:
    def __init__(self, broker_id: int, bootstrap: str, root: Path) -> None:
        self.broker_id = broker_id
        self.port, self.metrics_port = free_ports(2)
        self.log_path = root / f"broker-{broker_id}.log"
        args = [
            sys.executable, "-m", "pykraft", "broker", "--broker-id", str(broker_id), "--bootstrap-server", bootstrap,
            "--listener", f"127.0.0.1:{self.port}", "--metrics-port", str(self.metrics_port),
            "--initial-partition-bytes", str(MIB), "--heartbeat-interval-ms", "500",
            "--replica-lag-time-max-ms", "1000", "--replica-fetch-wait-max-ms", "100", "--produce-rate", "5",
        ]  # fmt: skip
        with self.log_path.open("ab") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    @property
    def endpoint(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[tuple[Cluster, dict[int, Broker]]]:
    cluster = Cluster(root=tmp_path, size=1)
    started: dict[int, Broker] = {}
    try:
        cluster.start()
        bootstrap = ",".join(n.address for n in cluster.nodes.values())
        for b in (101, 102):
            started[b] = Broker(b, bootstrap, tmp_path)
        yield cluster, started
    finally:
        for b in started.values():
            b.stop()
        cluster.stop()
        for node in cluster.nodes.values():
            node.kill()


async def until(what: str, check: Callable[[], Awaitable[bool]], logs: Callable[[], str], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if await check():
                return
        except Exception:  # not up yet
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s\n{logs()[-4000:]}")


async def test_brokers_start_sized_and_read_throttle_configs(brokers: tuple[Cluster, dict[int, Broker]]) -> None:
    cluster, procs = brokers
    await cluster.wait_for_leader(timeout=30)
    logs = lambda: "\n".join(f"--- {b}\n{p.log()[-2000:]}" for b, p in procs.items())  # noqa: E731
    bootstrap = ",".join(n.address for n in cluster.nodes.values())
    async with AdminClient(bootstrap) as admin:

        async def unfenced() -> bool:
            return sum(not b.fenced for b in (await admin.describe_cluster()).brokers) == 2

        await until("brokers unfenced", unfenced, logs)
        created = await admin.create_topics([NewTopic("t", replica_assignment={0: [101, 102]})])
        created["t"].raise_for_error()
        replicas: dict[int, list[ReplicaInfo]] = {}

        async def sized() -> bool:
            for b, p in procs.items():
                replicas[b] = await describe_replicas(p.endpoint)
            return all(len(r) == 1 and r[0].in_isr for r in replicas.values())

        await until("replicas at their initial size", sized, logs)
        assert {(r[0].broker_id, r[0].is_leader) for r in replicas.values()} == {(101, True), (102, False)}
        assert all(MIB <= r[0].size_bytes < MIB + 200 * 1024 for r in replicas.values())  # 5 messages/s more
        set_ = AlterConfigOp.SET
        results = await admin.incremental_alter_configs(
            [
                AlterConfigsResource(
                    ConfigResourceType.BROKER,
                    "",
                    (AlterableConfig("leader.replication.throttled.rate", set_, "1000000"),),
                ),
                AlterConfigsResource(
                    ConfigResourceType.TOPIC,
                    "t",
                    (AlterableConfig("leader.replication.throttled.replicas", set_, "0:101"),),
                ),
            ]
        )
        assert not any(r.error.failed for r in results)
        procs[102].proc.send_signal(signal.SIGUSR1)  # pause broker 102's fetching: it leaves the ISR

        async def throttled() -> bool:
            [r] = await describe_replicas(procs[101].endpoint)
            return r.throttled

        await until("the leader throttles the paused follower", throttled, logs)
        text = procs[101].metrics()
        assert 'kafka_server_replication_throttled_partitions{broker_id="101",side="leader"} 1.0' in text
        assert 'kafka_server_replication_throttle_rate_bytes{broker_id="101",side="leader"} 1e+06' in text
        assert 'kafka_server_replicamanager_under_replicated_partitions{broker_id="101"} 1.0' in text
        assert 'kafka_log_log_size{broker_id="101",partition="0",topic="t"}' in text
        log = procs[101].log()
        assert "replication_throttle_rate_changed" in log and "replication_throttled_replicas_changed" in log
