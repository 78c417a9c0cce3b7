"""The node's Prometheus histograms and gauges: request time by API and Kafka error, commit and event-queue time
(a deferred event waits only from its time on), election time, offline and imbalanced partitions, the applied
offset's lag, per-voter lag, the peer streams, process_* / python_* and pykraft_build_info — scraped from a real node
over HTTP, and the pieces they are built from checked on their own."""

from __future__ import annotations

import asyncio
import importlib.metadata
import time
from pathlib import Path
from types import SimpleNamespace

import grpc
import pytest
from metrics_helpers import Scrape, live_node, unfenced_brokers
from prometheus_client import generate_latest

from broker.observer import MetadataObserver
from controller.event_queue import Event, EventQueue
from controller.partition_change import PartitionRegistration
from pykraft.broker_metrics import broker_registry
from pykraft.client import NewTopic
from pykraft.metrics import RECOUNT_ALWAYS_BELOW, PartitionHealth, peer_transport_metrics
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import ReplicaConfig
from pykraft.testing import free_ports
from quorum.errors import Errors, KafkaError
from quorum.histogram import LATENCY_BUCKETS_S, Histogram
from quorum.raft.config import VoterAddress
from quorum.raft.messages import BeginQuorumEpochRequest, Envelope
from quorum.raft.roles import Leader
from quorum.sim.faults import Faults
from quorum.sim.harness import Simulation
from quorum.transport.peer import PeerTransport

LE = [*map(str, LATENCY_BUCKETS_S), "+Inf"]


def buckets(scrape: Scrape, name: str, **labels: str) -> list[float]:
    """A histogram's cumulative bucket counts, in the order of LE (asserting every bound is there)."""
    by_le = {
        s.labels["le"]: s.value
        for s in scrape.samples
        if s.name == f"{name}_bucket" and labels.items() <= s.labels.items()
    }
    assert {float(le) for le in by_le} == {float(le) for le in LE}, by_le
    return [by_le[le] for le in sorted(by_le, key=float)]


def check_histogram(scrape: Scrape, name: str, **labels: str) -> float:
    """Buckets cumulative, +Inf equal to _count; returns the count."""
    counts = buckets(scrape, name, **labels)
    assert counts == sorted(counts), counts
    count = scrape.value(f"{name}_count", **labels)
    assert counts[-1] == count
    assert scrape.value(f"{name}_sum", **labels) >= 0
    return count


# -- the histogram itself ------------------------------------------------------------------------------------------


def test_observations_land_in_the_first_bucket_at_or_above_them() -> None:
    h = Histogram()
    for v in (0.00005, 0.0001, 0.0002, 0.001, 0.7, 30.0, 31.0):
        h.observe(v)
    cumulative, total = h.cumulative()
    by_le = dict(cumulative)
    assert by_le["0.0001"] == 2  # "less than or equal": 0.0001 itself counts in le=0.0001
    assert by_le["0.00025"] == 3 and by_le["0.001"] == 4 and by_le["0.5"] == 4 and by_le["1.0"] == 5
    assert by_le["30.0"] == 6 and by_le["+Inf"] == 7 == h.count
    assert total == pytest.approx(0.00005 + 0.0001 + 0.0002 + 0.001 + 0.7 + 30.0 + 31.0)


# -- event queue: from ready, not from enqueued ---------------------------------------------------------------------


async def test_a_deferred_event_waits_from_its_time_not_from_when_it_was_scheduled() -> None:
    queue = EventQueue("deferred")
    queue.start()
    try:
        event = Event("later", lambda: "ran")
        queue.schedule("later", time.monotonic() + 0.5, event)
        assert await asyncio.wait_for(event.future, 5) == "ran"
        blocked = queue.append(Event("slow", lambda: time.sleep(0.05)))
        behind = queue.append(Event("behind", lambda: "ok"))
        await asyncio.wait_for(asyncio.gather(blocked, behind), 5)
    finally:
        await queue.close(KafkaError("closed", Errors.NOT_CONTROLLER))
    h = queue.stats.queue_time
    assert h.count == 3
    # The deferred event's 0.5 s delay is no wait; "behind" waited ~50 ms for "slow" to finish.
    assert 0.04 <= h.sum < 0.4, h.sum
    assert queue.stats.queue_time_total_s == pytest.approx(h.sum)
    assert queue.stats.process_time.count == 3 and queue.stats.process_time.sum >= 0.04


# -- elections: from the first pre-vote to a leader known -----------------------------------------------------------


def test_election_time_runs_from_the_pre_vote_to_a_leader() -> None:
    sim = Simulation(3, 3, faults=Faults.none())

    def leader() -> int | None:
        ids = [i for i, n in sim.nodes.items() if n.core is not None and isinstance(n.core.role, Leader)]
        return ids[0] if ids else None

    assert sim.run_until(lambda: leader() is not None, 10_000)
    first = leader()
    assert first is not None
    won = sim.nodes[first].core.metrics.election_seconds  # type: ignore[union-attr]
    assert won.count == 1 and won.sum > 0  # pre-vote and vote round trips take simulated time
    before = {
        i: (n.core.metrics.election_seconds.count, n.core.metrics.election_seconds.sum)
        for i, n in sim.nodes.items()
        if i != first
    }  # type: ignore[union-attr]
    crashed_at = sim.now
    sim.crash(first)
    assert sim.run_until(lambda: leader() not in (None, first), 20_000)
    second = leader()
    h = sim.nodes[second].core.metrics.election_seconds  # type: ignore[union-attr]
    count, total = before[second]
    assert h.count == count + 1
    took = h.sum - total
    # It started after the crash and ended when this node won (the run stops right then).
    assert 0 < took <= (sim.now - crashed_at) / 1000


# -- partition health -----------------------------------------------------------------------------------------------


def fake_controller(partitions: dict[tuple[str, int], PartitionRegistration], offset: int) -> SimpleNamespace:
    committed = SimpleNamespace(committed=lambda: partitions)
    return SimpleNamespace(replication=SimpleNamespace(partitions=committed), committed_offset=offset)


def test_offline_and_imbalanced_partitions_are_counted_when_something_committed() -> None:
    parts = {
        ("a", 0): PartitionRegistration((1, 2), (1, 2), 1),  # led by its preferred replica
        ("a", 1): PartitionRegistration((2, 1), (2, 1), 1),  # imbalanced
        ("a", 2): PartitionRegistration((3,), (3,), -1),  # offline, and so not led by its preferred replica
    }
    health = PartitionHealth()
    assert health.count(fake_controller(parts, 10)) == (1, 2)  # type: ignore[arg-type]
    parts[("a", 1)] = PartitionRegistration((2, 1), (2, 1), 2)
    assert health.count(fake_controller(parts, 10)) == (1, 2)  # type: ignore[arg-type]  # nothing new committed
    assert health.count(fake_controller(parts, 11)) == (1, 1)  # type: ignore[arg-type]


def test_a_large_image_is_recounted_at_most_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    offline = PartitionRegistration((1,), (1,), -1)
    parts = {("big", i): offline for i in range(RECOUNT_ALWAYS_BELOW)}
    health = PartitionHealth()
    assert health.count(fake_controller(parts, 1)) == (len(parts), len(parts))  # type: ignore[arg-type]
    parts[("big", 0)] = PartitionRegistration((1,), (1,), 1)
    assert health.count(fake_controller(parts, 2)) == (len(parts), len(parts))  # type: ignore[arg-type]
    monkeypatch.setattr(time, "monotonic", lambda: health.counted_at[1] + 31)  # type: ignore[index]
    assert health.count(fake_controller(parts, 2)) == (len(parts) - 1, len(parts) - 1)  # type: ignore[arg-type]


# -- a real node, scraped -------------------------------------------------------------------------------------------


async def test_a_scrape_after_create_topics_has_request_histograms_process_metrics_and_build_info(
    tmp_path: Path,
) -> None:
    async with live_node(tmp_path) as live:
        await unfenced_brokers(live.admin, [101, 102])
        results = await live.admin.create_topics([NewTopic("orders", 4, 1)])
        assert results["orders"].error_code == Errors.NONE
        with pytest.raises(KafkaError) as refused:
            await live.controller.elect_leaders(7, None)  # no such election type: refused as a whole
        assert refused.value.code == Errors.INVALID_REQUEST
        scrape = await live.scrape()

    name = "kafka_controller_request_time_seconds"
    assert scrape.families[name] == "histogram"
    created = check_histogram(scrape, name, api="createTopics", error="NONE")
    assert created >= 1
    assert check_histogram(scrape, name, api="electLeaders", error="INVALID_REQUEST") == 1
    # Every request counted by the existing counter is in exactly one (api, error) histogram.
    for api in ("createTopics", "registerBroker", "brokerHeartbeat", "electLeaders"):
        assert sum(scrape.values(f"{name}_count", api=api)) == scrape.value("kafka_controller_requests_total", api=api)
    assert check_histogram(scrape, "kafka_controller_commit_time_seconds") >= 4  # activation, 2 registrations, topic
    assert check_histogram(scrape, "kafka_controller_event_queue_wait_seconds") == scrape.value(
        "kafka_controller_events_processed_total"
    ) + scrape.value("kafka_controller_events_timed_out_total")
    assert check_histogram(scrape, "kafka_raft_election_latency_seconds", node_id="1") == 1
    for metric in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"):
        assert scrape.value(metric) > 0
    assert scrape.names >= {"python_info", "python_gc_collections_total", "pykraft_gc_pauses_total"}
    (info,) = [s for s in scrape.samples if s.name == "pykraft_build_info"]
    assert info.value == 1 and info.labels["role"] == "controller"
    assert info.labels["version"] == importlib.metadata.version("pykraft")
    assert info.labels["python"].count(".") == 2


async def test_partition_gauges_and_lags_follow_the_metadata(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live:
        epochs = await unfenced_brokers(live.admin, [101, 102])
        await live.admin.create_topics([NewTopic("orders", 6, 1)])
        healthy = await live.scrape()
        on_102 = sum(1 for p in live.controller.replication.partitions.values() if p.replicas == (102,))
        assert 0 < on_102 < 6
        # A controlled shutdown of 102: its partitions have no other replica to move to, and go offline.
        async with asyncio.timeout(10):
            while not (await live.admin.heartbeat(102, epochs[102], 1 << 40, want_shutdown=True)).should_shut_down:
                await asyncio.sleep(0.02)
        offline = await live.scrape()
        end = live.node.log.end_offset

    assert healthy.value("kafka_controller_global_partition_count") == 6
    assert healthy.value("kafka_controller_offline_partitions_count") == 0
    assert healthy.value("kafka_controller_preferred_replica_imbalance_count") == 0
    assert offline.value("kafka_controller_offline_partitions_count") == on_102
    assert offline.value("kafka_controller_preferred_replica_imbalance_count") == on_102
    # Applied: everything committed (a standalone leader's high watermark is its log end).
    applied = offline.value("pykraft_metadata_last_applied_offset", node_id="1")
    assert applied == offline.value("kafka_controller_last_applied_record_offset", node_id="1")
    assert applied == offline.value("kafka_raft_high_watermark", node_id="1") - 1 <= end - 1
    assert offline.value("pykraft_metadata_last_applied_offset_lag", node_id="1") == 0
    # The only voter leads: its own lag is 0, at its log end.
    assert offline.value("kafka_raft_voter_lag", node_id="1", voter_id="1") == 0
    assert offline.value("kafka_raft_voter_log_end_offset", node_id="1", voter_id="1") == offline.value(
        "kafka_raft_log_end_offset", node_id="1"
    )


async def test_a_broker_observer_serves_its_raft_metrics_and_applied_offset(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live:
        await unfenced_brokers(live.admin, [101])
        await live.admin.create_topics([NewTopic("orders", 3, 1)])
        observer = MetadataObserver(201, live.voters, "metrics", tmp_path / "broker-201")  # Kafka's timeouts
        assert not observer.node.transport.dial_frames  # an observer fetches over gRPC (broker/observer.py says why)
        observer.start()
        try:
            async with asyncio.timeout(10):
                while not observer.caught_up:
                    await asyncio.sleep(0.02)
            manager = ReplicaManager(201, ReplicaConfig(), lambda: 0, lambda: 1)
            scrape = Scrape(generate_latest(broker_registry(manager, observer)).decode())
            leader = await live.scrape()
        finally:
            await observer.close()

    applied = scrape.value("pykraft_metadata_last_applied_offset", node_id="201")
    assert applied == observer.current_metadata_offset > 0
    assert scrape.value("kafka_server_metadata_last_applied_offset", node_id="201") == applied
    assert scrape.value("pykraft_metadata_last_applied_offset_lag", node_id="201") == 0
    assert scrape.value("kafka_raft_current_leader", node_id="201") == 1
    assert scrape.value("kafka_raft_log_end_offset", node_id="201") >= applied + 1
    assert scrape.values("kafka_raft_voter_lag") == []  # an observer leads nothing
    assert scrape.value("kafka_server_replicamanager_partition_count", broker_id="201") == 0
    assert scrape.value("process_resident_memory_bytes") > 0
    (info,) = [s for s in scrape.samples if s.name == "pykraft_build_info"]
    assert info.labels["role"] == "broker"
    # The leader lists its voters only: the observer is no voter.
    assert [s.labels["voter_id"] for s in leader.samples if s.name == "kafka_raft_voter_lag"] == ["1"]


async def test_peer_stream_metrics_say_how_each_stream_runs_and_what_was_dropped() -> None:
    port_1, port_2 = free_ports(2)
    voters = {1: VoterAddress(1, "127.0.0.1", port_1), 2: VoterAddress(2, "127.0.0.1", port_2)}
    received: list[Envelope] = []
    one = PeerTransport(1, voters, lambda env: None, lambda peer: None)
    two = PeerTransport(2, voters, received.append, lambda peer: None)
    server = grpc.aio.server()
    two.add_to_server(server)
    server.add_insecure_port(f"127.0.0.1:{port_2}")
    await two.listen_frames("127.0.0.1", 0)
    await server.start()

    def samples() -> dict[tuple[str, ...], float]:
        return {
            (s.name, *s.labels.values()): s.value
            for family in peer_transport_metrics(one, ["node_id"], ["1"])
            for s in family.samples
        }

    try:
        before = samples()
        assert before[("pykraft_peer_stream_wire", "1", "2", "frames")] == 0  # not started: no stream yet
        assert before[("pykraft_peer_messages_dropped_total", "1")] == 0
        one.start()
        one.send(Envelope(1, 2, BeginQuorumEpochRequest("c", 1, 1, correlation_id=1)))
        one.send(Envelope(1, 3, BeginQuorumEpochRequest("c", 1, 1, correlation_id=2)))  # no such peer: dropped
        async with asyncio.timeout(5):
            while not received:
                await asyncio.sleep(0.01)
        after = samples()
        assert after[("pykraft_peer_stream_wire", "1", "2", "frames")] == 1
        assert after[("pykraft_peer_stream_wire", "1", "2", "grpc")] == 0
        assert after[("pykraft_peer_messages_dropped_total", "1")] == 1
        for name in ("refused", "undecodable", "ended_for_room"):
            assert after[(f"pykraft_peer_streams_{name}_total", "1")] == 0
        assert after[("pykraft_peer_frame_connections_turned_away_total", "1")] == 0
    finally:
        await one.close()
        await two.close()
        await server.stop(None)
