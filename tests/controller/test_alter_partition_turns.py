"""A large AlterPartition is applied a turn at a time (QuorumController.alter_partition): the same answers as one
event, in request order; requests that arrive meanwhile run between the turns; a partition named twice is refused
across turns; a turn refused as a whole refuses the request. And a slow request says where its time went."""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace

import pytest
import structlog
from ctl_helpers import SharedLog, active_cluster, register
from test_controller import THREE, manual, partitions_of

from controller import quorum_controller
from controller.event_queue import Event
from controller.quorum_controller import QuorumController, split_turns
from controller.records import PartitionChangeRecord, TopicRecord
from controller.replication_control import NewTopic
from controller.requests import AlterPartitionData, AlterPartitionTopic
from quorum.errors import Errors
from quorum.log.message import Uuid

TURN = 3
LAYOUT = {"t": 4, "u": 3}  # 7 partitions: turns of 3 cut topic t


@pytest.fixture(autouse=True)
def small_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quorum_controller, "ALTER_PARTITION_TURN", TURN)


async def cluster(log: SharedLog) -> tuple[QuorumController, dict[int, int]]:
    topics = [manual(name, *[(1, 2, 3)] * n) for name, n in LAYOUT.items()]
    ctl, _, epochs = await active_cluster(log, THREE, topics=topics)
    return ctl, epochs


async def shrink_all(
    ctl: QuorumController, epochs: dict[int, int], twice: int | None = None
) -> list[AlterPartitionTopic]:
    """Every partition's ISR shrunk to (1, 2), topic by topic; ``twice``: that partition of u
    named again at the end."""
    topics = []
    for name in LAYOUT:
        parts = await partitions_of(ctl, name)
        data = [
            AlterPartitionData(i, p.leader_epoch, ((1, epochs[1]), (2, epochs[2])), p.partition_epoch, 0)
            for i, p in sorted(parts.items())
        ]
        if twice is not None and name == "u":
            data.append(replace(data[0], partition_index=twice))
        topics.append(AlterPartitionTopic(ctl.replication.topics_by_name[name], tuple(data)))
    return topics


def test_turns_cut_the_request_in_order() -> None:
    a, b = Uuid.random(), Uuid.random()
    data = tuple(AlterPartitionData(i, 0, (), 0, 0) for i in range(5))
    turns = split_turns([AlterPartitionTopic(a, data[:4]), AlterPartitionTopic(b, data[:1])], 2)
    flat = [[(t.topic_id, tuple(d.partition_index for d in t.partitions)) for t in turn] for turn in turns]
    assert flat == [[(a, (0, 1))], [(a, (2, 3))], [(b, (0,))]]
    assert split_turns([AlterPartitionTopic(a, data[:2])], 2) == [[AlterPartitionTopic(a, data[:2])]]


async def test_a_request_in_turns_answers_every_partition_in_request_order(log: SharedLog) -> None:
    ctl, epochs = await cluster(log)
    first = len(log.batches)
    reply = await ctl.alter_partition(1, epochs[1], await shrink_all(ctl, epochs))
    assert reply.error.code == Errors.NONE
    got = [(r.topic_id, r.partition_index, r.error.code, r.isr) for r in reply.partitions]
    ids = ctl.replication.topics_by_name
    assert got == [(ids[n], i, Errors.NONE, (1, 2)) for n, count in LAYOUT.items() for i in range(count)]
    assert len(log.batches) - first == 3  # one append per turn: 3 + 3 + 1 partitions
    for name in LAYOUT:
        assert all(p.isr == (1, 2) for p in (await partitions_of(ctl, name)).values())


async def test_a_request_that_arrives_meanwhile_runs_between_the_turns(log: SharedLog) -> None:
    ctl, epochs = await cluster(log)
    first = len(log.records(0))
    alter = asyncio.create_task(ctl.alter_partition(1, epochs[1], await shrink_all(ctl, epochs)))
    create = asyncio.create_task(ctl.create_topics([NewTopic("meanwhile", 1, 3)]))
    reply, [created] = await asyncio.gather(alter, create)
    assert reply.error.code == Errors.NONE and not created.error.failed
    kinds = [
        "topic" if isinstance(r, TopicRecord) else "change"
        for r in log.records(first)
        if isinstance(r, (TopicRecord, PartitionChangeRecord))
    ]
    assert kinds == ["change"] * TURN + ["topic"] + ["change"] * (sum(LAYOUT.values()) - TURN)


async def test_a_partition_named_twice_in_different_turns_is_refused_the_second_time(log: SharedLog) -> None:
    ctl, epochs = await cluster(log)
    reply = await ctl.alter_partition(1, epochs[1], await shrink_all(ctl, epochs, twice=0))
    *_, last = reply.partitions
    assert last.partition_index == 0 and last.error.code == Errors.INVALID_REQUEST
    assert "appears more than once" in last.error.message
    assert [r.error.code for r in reply.partitions[:-1]] == [Errors.NONE] * sum(LAYOUT.values())


async def test_a_broker_epoch_gone_stale_between_turns_refuses_the_request(log: SharedLog) -> None:
    ctl, epochs = await cluster(log)
    alter = asyncio.create_task(ctl.alter_partition(1, epochs[1], await shrink_all(ctl, epochs)))
    again = asyncio.create_task(register(ctl, 1))  # queued behind the first turn: a new incarnation of broker 1
    reply, new_epoch = await asyncio.gather(alter, again)
    assert new_epoch != epochs[1]
    assert reply.error.code == Errors.STALE_BROKER_EPOCH and not reply.partitions
    isr = {i: p.isr for i, p in (await partitions_of(ctl, "t")).items()}
    assert [isr[i] for i in range(TURN)] == [(1, 2)] * TURN  # the first turn was applied; the later ones were not
    assert isr[TURN] == (1, 2, 3)


async def test_a_slow_request_is_logged_with_where_its_time_went(log: SharedLog, monkeypatch) -> None:
    ctl, _ = await cluster(log)
    monkeypatch.setattr(quorum_controller, "SLOW_REQUEST_S", 0.05)
    log.auto_commit = False
    with structlog.testing.capture_logs() as logs:
        create = asyncio.create_task(ctl.create_topics([NewTopic("held", 1, 3)]))
        await asyncio.sleep(0.1)  # run and appended; its commit is held
        log.commit_all()
        log.auto_commit = True
        await create
        # Now one held in the queue: an event ahead of it holds the loop.
        ctl.queue.append(Event("slow", lambda: time.sleep(0.1)))
        await ctl.create_topics([NewTopic("queued", 1, 3)])
    slow = [e for e in logs if e["event"] == "slow_request"]
    assert [e["api"] for e in slow] == ["createTopics", "createTopics"], slow
    held, queued = slow
    assert held["commit_ms"] >= 90 and held["queue_ms"] < 50 and held["error"] == "NONE"
    assert queued["queue_ms"] >= 90 and queued["commit_ms"] < 50
    assert held["ms"] == pytest.approx(held["queue_ms"] + held["run_ms"] + held["commit_ms"], abs=0.5)
