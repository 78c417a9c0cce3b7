"""Brokers leaving in bounded steps (controller/departures.py). A stale broker: the partitions it leads move first,
every committed step keeps ISRs and leaders on unfenced brokers, places it took meanwhile are caught by the last
step, and a heartbeat before the end stops the fencing. A broker in controlled shutdown: marked first, its places
moved in steps, told to shut down once they are gone."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from ctl_helpers import SharedLog, active_cluster, quiet_settings, settle

from controller import quorum_controller
from controller.cluster_control import HeartbeatRequest
from controller.event_queue import Event
from controller.partition_change import PartitionRegistration
from controller.quorum_controller import QuorumController
from controller.records import BrokerRegistrationChangeRecord, PartitionChangeRecord, deserialize
from controller.replication_control import NewTopic

THREE = [(1, None, False), (2, None, False), (3, None, False)]
# Broker 1 leads a0, b0, c0 and d0 (their first replica), and is in the ISRs of a1, a2 and b1 besides.
TOPICS = [
    NewTopic("a", assignments=((0, (1, 2, 3)), (1, (2, 1, 3)), (2, (3, 1, 2)))),
    NewTopic("b", assignments=((0, (1, 3)), (1, (2, 1)))),
    NewTopic("c", assignments=((0, (1,)), (1, (3,)))),
    NewTopic("d", assignments=((0, (1, 2)), (1, (3, 2)))),
]


async def step(ctl: QuorumController) -> object:
    """One fencing step, run now on the event queue. Returns the step's answer once committed."""
    answer = await asyncio.wait_for(ctl.queue.append(Event("brokerDepartures", ctl._step_departures)), 5)
    await settle()
    return answer


def drive_steps_by_hand(ctl: QuorumController) -> None:
    """Drop the follow-up each step schedules (at once, after whatever is queued), so the test runs every step."""
    schedule = ctl.queue.schedule

    def without_fencing(tag: str, at: float, event: Event) -> None:
        if tag != "broker-departures":
            schedule(tag, at, event)

    ctl.queue.schedule = without_fencing  # type: ignore[method-assign]


def places(ctl: QuorumController, broker_id: int) -> dict[tuple[str, int], PartitionRegistration]:
    names = {t.id: t.name for t in ctl.replication.topics.values()}
    return {
        (names[topic_id], index): p for (topic_id, index), p in ctl.replication.partitions.items() if broker_id in p.isr
    }


def assert_consistent(ctl: QuorumController) -> None:
    """The invariants every committed offset must keep: ISRs never empty; a leader is an unfenced ISR member;
    a multi-member ISR holds only unfenced brokers."""
    for key, p in ctl.replication.partitions.committed().items():
        assert p.isr, key
        if p.leader != -1:
            assert p.leader in p.isr and ctl.cluster.active(p.leader), (key, p)
        if len(p.isr) > 1:
            assert all(ctl.cluster.active(b) for b in p.isr), (key, p)


async def stale_cluster(log: SharedLog, chunk: int) -> tuple[QuorumController, dict[int, int]]:
    ctl, _, epochs = await active_cluster(
        log, THREE, quiet_settings(session_timeout_ms=150, departure_chunk_partitions=chunk), topics=TOPICS
    )
    drive_steps_by_hand(ctl)
    await asyncio.sleep(0.3)
    for b in (2, 3):  # 2 and 3 keep their sessions; 1 has been silent too long
        await ctl.broker_heartbeat(HeartbeatRequest(b, epochs[b], ctl.committed_offset))
    return ctl, epochs


def written(log: SharedLog, since: int) -> list[object]:
    return [deserialize(r).message for batch in log.batches[since:] for r in batch.records]


async def test_a_stale_broker_is_fenced_in_steps_leaderships_first(log: SharedLog) -> None:
    ctl, _ = await stale_cluster(log, chunk=2)
    assert len(places(ctl, 1)) == 7
    assert len(ctl.replication.elections.isr_places(1)) == 7
    moved_per_step = []
    for _ in range(10):
        start = len(log.batches)
        answer = await step(ctl)
        records = written(log, start)
        moved_per_step.append(sum(isinstance(r, PartitionChangeRecord) for r in records))
        assert_consistent(ctl)
        if answer == [1]:
            assert isinstance(records[-1], BrokerRegistrationChangeRecord) and records[-1].fenced == 1
            break
        assert answer == [] and not ctl.cluster.brokers[1].fenced
        assert all(isinstance(r, PartitionChangeRecord) for r in records)
        if len(moved_per_step) == 2:  # the leaderships went first
            assert not any(p.leader == 1 for p in ctl.replication.partitions.values())
    assert ctl.cluster.brokers[1].fenced
    # 7 places in steps of at most 2, then the fence (the final scan finds nothing left to move).
    assert moved_per_step == [2, 2, 2, 1, 0], moved_per_step
    assert {k: (p.leader, p.isr) for k, p in places(ctl, 1).items()} == {("c", 0): (-1, (1,))}  # ISR never emptied
    assert not any(p.leader == 1 for p in ctl.replication.partitions.values())
    assert await step(ctl) is None  # nothing more to fence


async def test_the_stepped_fencing_ends_where_one_event_ends(log: SharedLog) -> None:
    ctl, _ = await stale_cluster(log, chunk=2)
    while await step(ctl) != [1]:
        pass
    stepped = {k: (p.leader, p.isr) for k, p in places(ctl, 2).items()} | {
        k: (p.leader, p.isr) for k, p in places(ctl, 3).items()
    }
    other = SharedLog()
    whole, _ = await stale_cluster(other, chunk=1000)
    assert await step(whole) == [1]
    assert len(other.batches[-1].records) == 8  # one event: 7 moves and the fence
    at_once = {k: (p.leader, p.isr) for k, p in places(whole, 2).items()} | {
        k: (p.leader, p.isr) for k, p in places(whole, 3).items()
    }
    assert stepped == at_once


async def test_a_place_taken_meanwhile_moves_with_the_fence(log: SharedLog) -> None:
    ctl, _ = await stale_cluster(log, chunk=3)
    assert await step(ctl) == []  # the three leaderships moved; broker 1 is still unfenced
    [r] = await ctl.create_topics([NewTopic("late", assignments=((0, (1, 2)),))])  # it may still take places
    assert not r.error.failed, r.error
    assert ("late", 0) in places(ctl, 1) and places(ctl, 1)[("late", 0)].leader == 1
    while (answer := await step(ctl)) == []:
        assert_consistent(ctl)
    assert answer == [1]
    late = ctl.replication.partitions[(ctl.replication.topics_by_name["late"], 0)]
    assert (late.leader, late.isr) == (2, (2,))
    assert_consistent(ctl)


async def test_a_heartbeat_before_the_end_stops_the_fencing(log: SharedLog) -> None:
    ctl, epochs = await stale_cluster(log, chunk=2)
    assert await step(ctl) == []
    assert len(places(ctl, 1)) == 5
    await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset))
    start = len(log.batches)
    assert await step(ctl) is None  # abandoned: no records, and nobody else is stale
    assert len(log.batches) == start
    assert not ctl.departures.in_progress and not ctl.cluster.brokers[1].fenced
    assert len(places(ctl, 1)) == 5  # what it lost comes back through its leaders' AlterPartition
    assert_consistent(ctl)


async def test_a_new_active_controller_forgets_a_fencing_under_way(log: SharedLog) -> None:
    ctl, _ = await stale_cluster(log, chunk=2)
    assert await step(ctl) == []
    assert ctl.departures.in_progress
    log.elect(2, 2)
    await settle()
    assert not ctl.active and not ctl.departures.in_progress


async def test_a_large_write_names_the_event_that_made_it(log: SharedLog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_controller, "LARGE_WRITE_RECORDS", 8)
    ctl, _ = await stale_cluster(log, chunk=1000)
    with structlog.testing.capture_logs() as logs:
        assert await step(ctl) == [1]
    large = [e for e in logs if e["event"] == "large_write"]
    assert [(e["during"], e["records"]) for e in large] == [("brokerDepartures", 8)], logs


async def test_a_controlled_shutdown_moves_the_places_in_steps_then_says_shut_down(
    log: SharedLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, quiet_settings(departure_chunk_partitions=2), topics=TOPICS)
    drive_steps_by_hand(ctl)
    listings: list[int] = []  # a listing scans every partition: the heartbeat's serves the first step
    isr_places = ctl.replication.elections.isr_places
    monkeypatch.setattr(ctl.replication.elections, "isr_places", lambda b: listings.append(b) or isr_places(b))
    shutdown = HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_shutdown=True)
    start = len(log.batches)
    first = await ctl.broker_heartbeat(shutdown)
    assert first.in_controlled_shutdown and not first.should_shut_down
    # Only the mark: seven places are more than a step, so they move in the steps that follow.
    assert [type(r).__name__ for r in written(log, start)] == ["BrokerRegistrationChangeRecord"]
    assert ctl.departures.leaving(1) and len(places(ctl, 1)) == 7
    moved = []
    while ctl.departures.leaving(1):
        start = len(log.batches)
        assert await step(ctl) == []  # a shutdown fences nothing in its steps
        moved.append(len(written(log, start)))
        again = await ctl.broker_heartbeat(shutdown)
        assert again.should_shut_down == (not ctl.departures.leaving(1))
    assert moved == [2, 2, 2, 1, 0], moved
    assert listings == [1, 1]  # the heartbeat's, and the final scan for places taken meanwhile
    assert not any(p.leader == 1 for p in ctl.replication.partitions.values())
    assert {k: (p.leader, p.isr) for k, p in places(ctl, 1).items()} == {("c", 0): (-1, (1,))}
    done = await ctl.broker_heartbeat(shutdown)
    assert done.should_shut_down and ctl.cluster.brokers[1].fenced
