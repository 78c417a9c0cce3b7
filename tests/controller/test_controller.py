"""The QuorumController over a fake Raft: responses only after commit, reads of committed state, leadership loss and
revert, standby replay, and the broker lifecycle (register, heartbeat, fence, controlled shutdown)."""

from __future__ import annotations

import asyncio
import gc
import time
from collections import Counter

import pytest
from ctl_helpers import (
    SharedLog,
    active_cluster,
    endpoint,
    quiet_settings,
    register,
    settle,
    start_controller,
)

from controller.cluster_control import HeartbeatRequest, RegisterBrokerRequest
from controller.event_queue import Event
from controller.quorum_controller import NO_FULL_COLLECTION, NotControllerError, QuorumController, ReplayError
from controller.records import (
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    Uuid,
    ZkMigrationStateRecord,
)
from controller.replication_control import NewTopic, PartitionRegistration
from controller.results import ControllerResult
from quorum.errors import Errors, KafkaError, NotLeaderError
from quorum.log.message import METADATA_TOPIC_ID

THREE = [(1, "a", False), (2, "b", False), (3, "c", False)]


def manual(name: str, *partitions: tuple[int, ...]) -> NewTopic:
    return NewTopic(name, assignments=tuple(enumerate(partitions)))


async def partitions_of(ctl: QuorumController, name: str) -> dict[int, PartitionRegistration]:
    [d] = await ctl.describe_topics([name])
    assert not d.error.failed, d.error
    return dict(d.partitions)


async def brokers_of(ctl: QuorumController) -> dict[int, object]:
    return {b.id: b for b in await ctl.describe_cluster()}


async def fence_check(ctl: QuorumController) -> object:
    """Run the periodic stale-broker check now, on the event queue; what it answered once committed."""
    return await asyncio.wait_for(ctl.queue.append(Event("brokerDepartures", ctl._step_departures)), 5)


def check_partition_invariants(ctl: QuorumController) -> None:
    """Leaders are active ISR members (or -1); ISRs are never empty; no fenced broker in a multi-member ISR."""
    for key, p in ctl.replication.partitions.items():
        assert p.isr, key
        if p.leader != -1:
            assert p.leader in p.isr and ctl.cluster.active(p.leader), (key, p)
        if len(p.isr) > 1:
            assert all(ctl.cluster.active(b) for b in p.isr), (key, p)


# -- the write path: answers after commit, reads of committed state ---------------------------------------------


async def test_activation_writes_the_bootstrap_records_in_one_batch(log: SharedLog) -> None:
    log.auto_commit = True
    ctl, _ = await start_controller(log)
    assert not ctl.active
    log.elect(1, 1)
    await settle()
    assert ctl.active
    assert len(log.append_calls) == 1
    records = log.records()
    assert [type(r) for r in records] == [
        BeginTransactionRecord,
        FeatureLevelRecord,
        ZkMigrationStateRecord,
        EndTransactionRecord,
    ]
    assert (records[1].name, records[1].feature_level) == ("metadata.version", 22)


async def test_activation_lost_before_commit_is_written_again_on_the_next_claim(log: SharedLog) -> None:
    ctl, _ = await start_controller(log)
    log.elect(1, 1)
    await settle()
    assert len(log.append_calls) == 1  # the activation batch, never committed
    log.truncate_uncommitted()  # a new leader's log replaces it
    log.elect(2, 2)
    await settle()
    assert not ctl.active
    log.auto_commit = True
    log.elect(1, 3)
    await settle()
    # the metadata.version of the lost batch was uncommitted state: the controller must not believe it is set
    assert [type(r) for r in log.records()] == [
        BeginTransactionRecord,
        FeatureLevelRecord,
        ZkMigrationStateRecord,
        EndTransactionRecord,
    ]
    assert log.delivered == len(log.batches)


async def test_create_topics_answers_only_after_commit(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE)
    log.auto_commit = False
    calls = len(log.append_calls)
    task = asyncio.ensure_future(ctl.create_topics([NewTopic("t", 2, 2)]))
    await settle()
    assert len(log.append_calls) == calls + 1  # appended...
    assert not task.done()  # ...but not answered
    assert "t" in ctl.replication.topics_by_name  # replayed into memory at once
    assert "t" not in ctl.replication.topics_by_name.committed()
    last = log.batches[-1].last_offset
    log.commit_through(last - 1)  # the high watermark inside the batch is not enough
    await settle()
    assert not task.done()
    log.commit_all()
    [r] = await asyncio.wait_for(task, 5)
    assert r.error.code == Errors.NONE
    assert "t" in ctl.replication.topics_by_name.committed()
    assert ctl.committed_offset == last


async def test_reads_wait_for_pending_writes_and_never_show_uncommitted_topics(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE)
    # nothing pending: a read answers at once
    assert [d.name for d in await ctl.describe_topics(None)] == []
    log.auto_commit = False
    create_t = asyncio.ensure_future(ctl.create_topics([NewTopic("t", 1, 1)]))
    await settle()
    offset_t = log.batches[-1].last_offset
    read_topics = asyncio.ensure_future(ctl.describe_topics(None))
    read_cluster = asyncio.ensure_future(ctl.describe_cluster())
    await settle()
    create_u = asyncio.ensure_future(ctl.create_topics([NewTopic("u", 1, 1)]))
    await settle()
    assert not read_topics.done() and not read_cluster.done()  # they wait for t's offset

    log.commit_through(offset_t)
    await settle()
    assert create_t.done() and read_topics.done() and read_cluster.done()
    assert not create_u.done()
    assert [d.name for d in read_topics.result()] == ["t"]  # u is in memory, uncommitted: not shown
    assert len(read_cluster.result()) == 3

    read_u = asyncio.ensure_future(ctl.describe_topics(["u", "nope"]))
    await settle()
    assert not read_u.done()  # waits for u's offset: a client reads its own writes
    log.commit_all()
    u, nope = await asyncio.wait_for(read_u, 5)
    assert not u.error.failed and len(u.partitions) == 1
    assert nope.error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION and "nope" in (nope.error.message or "")
    await create_u


async def test_leadership_loss_fails_pending_requests_and_reverts_uncommitted_state(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE, topics=[NewTopic("kept", 1, 1)])
    log.auto_commit = False
    reg = asyncio.ensure_future(ctl.register_broker(RegisterBrokerRequest(7, Uuid.random(), None, endpoint(7))))
    await settle()
    create = asyncio.ensure_future(ctl.create_topics([NewTopic("t", 3, 4)]))  # placed with broker 7 (uncommitted)
    await settle()
    read = asyncio.ensure_future(ctl.describe_topics(None))
    await settle()
    assert "t" in ctl.replication.topics_by_name and 7 in ctl.cluster.brokers
    topic_id = ctl.replication.topics_by_name["t"]

    log.truncate_uncommitted()
    log.elect(2, 2)
    await settle()
    for fut in (reg, create, read):
        with pytest.raises(NotControllerError) as e:
            await asyncio.wait_for(fut, 5)
        assert e.value.code == Errors.NOT_CONTROLLER and e.value.leader_id == 2
    assert not ctl.active
    # uncommitted state is gone; committed state stays
    assert "t" not in ctl.replication.topics_by_name and topic_id not in ctl.replication.topics
    assert not any(key[0] == topic_id for key in ctl.replication.partitions)
    assert 7 not in ctl.cluster.brokers
    assert "kept" in ctl.replication.topics_by_name
    assert not ctl.timeline.pending
    with pytest.raises(NotControllerError):
        await ctl.create_topics([NewTopic("t", 1, 1)])

    # leadership comes back: the same topic can be created again
    log.auto_commit = True
    log.elect(1, 3)
    await settle()
    assert ctl.active
    [r] = await ctl.create_topics([NewTopic("t", 3, 2)])
    assert r.error.code == Errors.NONE and r.topic_id != topic_id
    # the reverted broker 7 is not placed on either (three brokers are registered, not four)
    [four] = await ctl.create_topics([NewTopic("four", 1, 4)])
    assert four.error.code == Errors.INVALID_REPLICATION_FACTOR and "3 broker(s)" in (four.error.message or "")
    assert [d.name for d in await ctl.describe_topics(None)] == ["kept", "t"]


async def test_raft_refusing_an_append_makes_the_controller_step_down(log: SharedLog) -> None:
    ctl, raft, _ = await active_cluster(log, THREE)
    raft.refuse = NotLeaderError("epoch 1 is over", leader_id=3, epoch=2)
    with pytest.raises(NotControllerError) as e:
        await ctl.create_topics([NewTopic("t", 1, 1)])
    assert e.value.code == Errors.NOT_CONTROLLER and e.value.leader_id == 3
    assert not ctl.active
    assert "t" not in ctl.replication.topics_by_name


async def test_a_record_that_fails_to_apply_on_the_active_controller_is_fatal_before_it_is_appended(
    log: SharedLog,
) -> None:
    """Kafka's order: the active controller applies a batch's records before appending it, and a record that
    cannot be applied is a fatal fault — none of its batch reaches the log (where every standby would fail on it
    too). With an in-process fault handler, the controller stops serving for good."""
    ctl, _, _ = await active_cluster(log, THREE)
    entries = len(log.entries)
    good = TopicRecord(name="t", topic_id=Uuid.random())
    bad = PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=[1], isr=[1], leader=1)  # no such topic
    ctl.replication.create_topics = lambda topics, validate_only: ControllerResult([good, bad], [])  # type: ignore[method-assign]
    with pytest.raises(KafkaError) as e:
        await ctl.create_topics([NewTopic("t", 1, 1)])
    assert e.value.code == Errors.UNKNOWN_SERVER_ERROR and "fatal fault" in str(e.value)
    [fault] = ctl.faults.faults  # type: ignore[attr-defined]
    assert fault.message == (
        f"fatal error while applying the PartitionRecord at offset {entries + 1} on the active controller, "
        f"from the batch at offset {entries}"
    )
    assert fault.context["epoch"] == 1 and fault.cause is not None
    assert len(log.entries) == entries, "nothing of the failed batch may reach the log"
    assert "t" not in ctl.replication.topics_by_name, "the record applied before the failure is undone too"
    assert log.resigned == [(1, 1)]
    assert ctl.failed and not ctl.active
    log.elect(1, 2)  # even given the leadership again, a failed controller does not serve
    await settle()
    assert not ctl.active
    with pytest.raises(NotControllerError):
        await ctl.create_topics([NewTopic("u", 1, 1)])


async def test_an_append_refused_as_a_whole_undoes_the_records_applied_for_it(log: SharedLog) -> None:
    """Applied first, appended second: when Raft refuses the batch itself (too large, buffer full), what was
    applied for it is undone, and the controller goes on serving."""
    ctl, raft, _ = await active_cluster(log, THREE, topics=[NewTopic("kept", 1, 1)])
    entries = len(log.entries)
    raft.refuse = KafkaError("an atomic append does not fit one batch", Errors.RECORD_LIST_TOO_LARGE)
    with pytest.raises(KafkaError) as e:
        await ctl.create_topics([NewTopic("big", 3, 3)])
    assert e.value.code == Errors.RECORD_LIST_TOO_LARGE
    assert len(log.entries) == entries
    assert "big" not in ctl.replication.topics_by_name and not ctl.timeline.pending
    assert ctl.active and not ctl.failed
    raft.refuse = None
    [r] = await ctl.create_topics([NewTopic("big", 3, 3)])
    assert r.error.code == Errors.NONE
    assert sorted(d.name for d in await ctl.describe_topics(None)) == ["big", "kept"]


async def test_close_fails_pending_requests(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE)
    log.auto_commit = False
    task = asyncio.ensure_future(ctl.create_topics([NewTopic("t", 1, 1)]))
    await settle()
    await ctl.close()
    with pytest.raises(NotControllerError):
        await asyncio.wait_for(task, 5)


async def test_request_deadline_gives_request_timed_out(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE)
    log.auto_commit = False
    started = time.monotonic()
    with pytest.raises(KafkaError) as e:
        await ctl.create_topics([NewTopic("slow", 1, 1)], timeout_ms=50)
    assert e.value.code == Errors.REQUEST_TIMED_OUT
    assert "createTopics" in str(e.value) and "50 ms" in str(e.value)
    assert time.monotonic() - started < 2
    with pytest.raises(KafkaError) as e:
        await ctl.describe_topics(None, timeout_ms=30)  # waits for the same uncommitted write
    assert e.value.code == Errors.REQUEST_TIMED_OUT
    # the write was appended and may still complete
    log.commit_all()
    await settle()
    assert "slow" in ctl.replication.topics_by_name.committed()


async def test_periodic_noop_is_written_when_idle(log: SharedLog) -> None:
    await active_cluster(log, [], quiet_settings(max_idle_interval_ms=20))
    deadline = time.monotonic() + 3
    while not any(isinstance(r, NoOpRecord) for r in log.records()):
        assert time.monotonic() < deadline, "no NoOpRecord written"
        await asyncio.sleep(0.01)


# -- standbys and replay -----------------------------------------------------------------------------------------


async def test_standby_replays_committed_records_into_the_same_state(log: SharedLog) -> None:
    standby, _ = await start_controller(log, 2)
    leader, _, epochs = await active_cluster(
        log,
        [(1, "a", False), (2, "b", False), (3, "c", False), (4, None, True)],
        topics=[NewTopic("auto", 6, 3), NewTopic("cfg.x", 2, 2, configs=(("cleanup.policy", "compact"),))],
    )
    await leader.create_topics([manual("m", (1, 2), (3, 1)), manual("solo", (2,))])
    await leader.broker_heartbeat(HeartbeatRequest(2, epochs[2], leader.committed_offset, want_fence=True))
    await leader.broker_heartbeat(HeartbeatRequest(3, epochs[3], leader.committed_offset, want_shutdown=True))
    await leader.register_broker(RegisterBrokerRequest(1, Uuid.random(), "a2", endpoint(1)))
    await settle()
    assert log.delivered == len(log.batches)

    assert not standby.active and standby.committed_offset == leader.committed_offset
    assert not leader.timeline.pending
    for attr in ("topics", "topics_by_name", "partitions", "configs"):
        mine = getattr(leader.replication, attr)
        theirs = getattr(standby.replication, attr)
        assert dict(theirs.committed()) == dict(mine.committed()), attr
        assert dict(mine) == dict(mine.committed()), attr  # nothing uncommitted on the leader either
    assert dict(standby.cluster.brokers.committed()) == dict(leader.cluster.brokers.committed())
    # and a changed partition really is in both: broker 2 was fenced, so it left m-0's ISR
    m_id = leader.replication.topics_by_name["m"]
    assert standby.replication.partitions.committed()[(m_id, 0)].isr == (1,)

    # failover: the standby takes over with the state it replayed and writes no second activation
    log.elect(2, 2)
    await settle()
    assert standby.active and not leader.active
    # every broker is fenced or shutting down by now; broker 2 comes back through the new controller
    reply = await standby.broker_heartbeat(HeartbeatRequest(2, epochs[2], standby.committed_offset))
    assert not reply.is_fenced
    assert [d.name for d in await standby.describe_topics(None)] == ["auto", "cfg.x", "m", "solo"]
    [r] = await standby.create_topics([NewTopic("after", 1, 1)])
    assert r.error.code == Errors.NONE
    assert sum(isinstance(r, FeatureLevelRecord) for r in log.records()) == 1
    await settle()
    assert "after" in leader.replication.topics_by_name.committed()  # the old leader now replays as a standby


async def test_own_records_replay_once_and_foreign_records_are_replayed(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE)
    replayed: list[int] = []
    original = ctl._replay

    def spy(record, offset):
        replayed.append(offset)
        original(record, offset)

    ctl._replay = spy  # type: ignore[method-assign]
    log.auto_commit = False
    first = len(log.entries)
    create_a = asyncio.ensure_future(ctl.create_topics([manual("a", (1, 2), (2, 3))]))
    await settle()
    foreign_offset = len(log.entries)
    foreign_id = Uuid.random()
    log.foreign(
        [
            RegisterBrokerRecord(broker_id=9, incarnation_id=Uuid.random(), broker_epoch=foreign_offset, rack="z"),
            TopicRecord(name="foreign", topic_id=foreign_id),
            PartitionRecord(partition_id=0, topic_id=foreign_id, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                            partition_epoch=0, directories=[METADATA_TOPIC_ID]),
        ]
    )  # fmt: skip
    create_b = asyncio.ensure_future(ctl.create_topics([manual("b", (3, 1))]))
    await settle()
    assert "foreign" not in ctl.replication.topics_by_name  # not replayed before it commits
    log.commit_all()
    await asyncio.wait_for(asyncio.gather(create_a, create_b), 5)

    counts = Counter(replayed)
    assert set(counts) == set(range(first, len(log.entries)))  # every record replayed...
    assert set(counts.values()) == {1}  # ...exactly once
    assert "foreign" in ctl.replication.topics_by_name.committed()
    assert 9 in ctl.cluster.brokers.committed() and ctl.cluster.brokers[9].epoch == foreign_offset
    for name in ("a", "b"):
        for p in (await partitions_of(ctl, name)).values():
            assert (p.leader_epoch, p.partition_epoch) == (0, 0)
    assert not ctl.timeline.pending


async def test_own_partition_changes_are_not_applied_twice(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2, 3))])
    await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_fence=True))
    [p] = (await partitions_of(ctl, "t")).values()
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (2, (2, 3), 1, 1)


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ([b"\x07\x00garbage"], "cannot decode the record at offset {first}: .*frame version"),
        ([b"\x01\x7f\x00"], "cannot decode the record at offset {first}: "),
        # Decodes, but names a topic that does not exist: a standby cannot apply it.
        (
            [NoOpRecord(), PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=[1], isr=[1], leader=1)],
            r"cannot apply the PartitionRecord at offset {second} on the standby controller \(batch {first}-{second}\)",
        ),
    ],
)
async def test_a_committed_record_that_cannot_be_applied_raises_replay_error(
    log: SharedLog, records: list, expected: str
) -> None:
    """Kafka treats a committed record a controller cannot apply as fatal: ``handle_commit`` raises (Raft's
    delivery then stops the node) instead of skipping it and serving a state that differs from the log's."""
    standby, _ = await start_controller(log, 2)
    await active_cluster(log, THREE)
    committed = standby.committed_offset
    first = log.foreign(records) - len(records) + 1
    with pytest.raises(ReplayError, match=expected.format(first=first, second=first + 1)):
        log.commit_all()
    assert standby.committed_offset == committed  # the batch is not counted as applied


async def test_standby_answers_not_controller_with_the_leader_id(log: SharedLog) -> None:
    standby, _ = await start_controller(log, 2)
    with pytest.raises(NotControllerError) as e:
        await standby.create_topics([NewTopic("t", 1, 1)])
    assert e.value.leader_id == -1  # no leader known yet
    await active_cluster(log, THREE)
    calls = [
        standby.create_topics([NewTopic("t", 1, 1)]),
        standby.describe_topics(None),
        standby.describe_cluster(),
        standby.register_broker(RegisterBrokerRequest(5, Uuid.random(), None, endpoint(5))),
        standby.broker_heartbeat(HeartbeatRequest(1, 0, 0)),
    ]
    for call in calls:
        with pytest.raises(NotControllerError) as e:
            await call
        assert e.value.code == Errors.NOT_CONTROLLER
        assert e.value.leader_id == 1 and "node 1" in str(e.value)


# -- brokers -------------------------------------------------------------------------------------------------------


async def test_registration_fences_and_epoch_is_the_record_offset(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    incarnation = Uuid.random()
    epoch = await ctl.register_broker(RegisterBrokerRequest(1, incarnation, "r1", endpoint(1)))
    record = log.records(epoch)[0]
    assert isinstance(record, RegisterBrokerRecord)
    assert (record.broker_id, record.broker_epoch, record.fenced, record.rack) == (1, epoch, True, "r1")
    [b] = await ctl.describe_cluster()
    assert (b.id, b.epoch, b.fenced, b.rack, b.incarnation_id) == (1, epoch, True, "r1", incarnation)
    assert b.endpoints == endpoint(1)


@pytest.mark.parametrize(
    ("broker_id", "endpoints", "fragment"),
    [(-1, endpoint(1), "broker_id"), (1, (), "endpoints")],
    ids=["negative-id", "no-endpoints"],
)
async def test_invalid_registration(log: SharedLog, broker_id: int, endpoints: tuple, fragment: str) -> None:
    ctl, _, _ = await active_cluster(log, [])
    with pytest.raises(KafkaError) as e:
        await ctl.register_broker(RegisterBrokerRequest(broker_id, Uuid.random(), None, endpoints))
    assert e.value.code == Errors.INVALID_REQUEST and fragment in str(e.value)


async def test_heartbeat_unfences_once_the_broker_has_seen_its_registration(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    epoch = await register(ctl, 1, "r1")
    calls = len(log.append_calls)
    behind = await ctl.broker_heartbeat(HeartbeatRequest(1, epoch, epoch - 1))
    assert behind.is_fenced and not behind.is_caught_up
    assert len(log.append_calls) == calls  # nothing to write
    caught_up = await ctl.broker_heartbeat(HeartbeatRequest(1, epoch, epoch))
    assert not caught_up.is_fenced and caught_up.is_caught_up
    assert len(log.append_calls) == calls + 1
    [change] = [r for r in log.records(len(log.entries) - len(log.append_calls[-1][1]))]
    assert isinstance(change, BrokerRegistrationChangeRecord)
    assert (change.broker_id, change.broker_epoch, change.fenced) == (1, epoch, -1)
    assert not (await brokers_of(ctl))[1].fenced
    again = await ctl.broker_heartbeat(HeartbeatRequest(1, epoch, epoch))
    assert not again.is_fenced and len(log.append_calls) == calls + 1


async def test_heartbeat_with_a_stale_epoch(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    epoch = await register(ctl, 1)
    with pytest.raises(KafkaError) as e:
        await ctl.broker_heartbeat(HeartbeatRequest(1, epoch + 100, epoch))
    assert e.value.code == Errors.STALE_BROKER_EPOCH
    assert str(epoch + 100) in str(e.value) and "broker_epoch" in str(e.value)


async def test_heartbeat_from_an_unknown_broker(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    with pytest.raises(KafkaError) as e:
        await ctl.broker_heartbeat(HeartbeatRequest(42, 0, 0))
    assert e.value.code == Errors.BROKER_ID_NOT_REGISTERED and "42" in str(e.value)


async def test_session_timeout_fences_moves_leaders_and_shrinks_isrs(log: SharedLog) -> None:
    settings = quiet_settings(session_timeout_ms=150)
    ctl, _, epochs = await active_cluster(
        log, THREE, settings, topics=[manual("led1", (1, 2, 3)), manual("solo1", (1,)), manual("led2", (2, 1, 3))]
    )
    await asyncio.sleep(0.3)
    for b in (2, 3):  # 2 and 3 keep their sessions; 1 has been silent too long
        await ctl.broker_heartbeat(HeartbeatRequest(b, epochs[b], ctl.committed_offset))
    assert await fence_check(ctl) == [1]
    brokers = await brokers_of(ctl)
    assert brokers[1].fenced and not brokers[2].fenced and not brokers[3].fenced
    [led1] = (await partitions_of(ctl, "led1")).values()
    [solo1] = (await partitions_of(ctl, "solo1")).values()
    [led2] = (await partitions_of(ctl, "led2")).values()
    assert (led1.leader, led1.isr, led1.leader_epoch) == (2, (2, 3), 1)
    assert (solo1.leader, solo1.isr, solo1.leader_epoch) == (-1, (1,), 1)  # leaderless, ISR never emptied
    assert (led2.leader, led2.isr, led2.leader_epoch, led2.partition_epoch) == (2, (2, 3), 0, 1)
    check_partition_invariants(ctl)
    assert await fence_check(ctl) is None  # nothing more to fence


async def test_two_brokers_timing_out_together_leave_consistent_partitions(log: SharedLog) -> None:
    settings = quiet_settings(session_timeout_ms=150)
    topics = [manual("p", (1, 2, 3)), manual("q", (2, 1, 3)), manual("r", (1, 2)), manual("s", (3, 2, 1))]
    ctl, _, epochs = await active_cluster(log, THREE, settings, topics=topics)
    await asyncio.sleep(0.3)
    await ctl.broker_heartbeat(HeartbeatRequest(3, epochs[3], ctl.committed_offset))
    for _ in range(5):  # as many checks as it takes (Kafka fences one broker per check)
        await fence_check(ctl)
        await settle()
        brokers = await brokers_of(ctl)
        if brokers[1].fenced and brokers[2].fenced:
            break
    assert brokers[1].fenced and brokers[2].fenced and not brokers[3].fenced
    parts = {name: (await partitions_of(ctl, name))[0] for name in "pqrs"}
    assert (parts["p"].leader, parts["p"].isr) == (3, (3,))
    assert (parts["q"].leader, parts["q"].isr) == (3, (3,))
    assert (parts["s"].leader, parts["s"].isr, parts["s"].leader_epoch) == (3, (3,), 0)
    assert parts["r"].leader == -1 and len(parts["r"].isr) == 1 and parts["r"].isr[0] in (1, 2)
    check_partition_invariants(ctl)


async def test_controlled_shutdown_moves_leaderships_then_says_shut_down(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("cs", (1, 2, 3)), manual("cs2", (2, 1))])
    first = await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_shutdown=True))
    assert first.in_controlled_shutdown and not first.should_shut_down and not first.is_fenced
    b1 = (await brokers_of(ctl))[1]
    assert b1.in_controlled_shutdown and not b1.fenced
    [cs] = (await partitions_of(ctl, "cs")).values()
    [cs2] = (await partitions_of(ctl, "cs2")).values()
    assert (cs.leader, cs.isr) == (2, (2, 3))
    assert (cs2.leader, cs2.isr) == (2, (2,))
    assert not ctl.replication.elections.has_leaderships(1)
    # a broker shutting down gets no new replicas
    [r] = await ctl.create_topics([NewTopic("later", 12, 2)])
    assert r.error.code == Errors.NONE
    assert all(1 not in p.replicas for p in (await partitions_of(ctl, "later")).values())

    second = await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_shutdown=True))
    assert second.should_shut_down and second.is_fenced
    b1 = (await brokers_of(ctl))[1]
    assert b1.fenced and b1.in_controlled_shutdown  # as Kafka's: it lasts until the broker registers again
    check_partition_invariants(ctl)
    # a heartbeat without a new registration does not bring it back
    third = await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset))
    assert third.is_fenced
    # the restarted broker registers again: a fresh registration, fenced until caught up, then unfenced
    epoch = await register(ctl, 1, "a")
    b1 = (await brokers_of(ctl))[1]
    assert b1.fenced and not b1.in_controlled_shutdown
    assert not (await ctl.broker_heartbeat(HeartbeatRequest(1, epoch, ctl.committed_offset))).is_fenced


async def test_unfencing_gives_leaderless_partitions_a_leader(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("lone", (1,)), manual("pair", (2, 1))])
    fenced = await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_fence=True))
    assert fenced.is_fenced
    [lone] = (await partitions_of(ctl, "lone")).values()
    assert (lone.leader, lone.isr, lone.leader_epoch) == (-1, (1,), 1)
    [pair] = (await partitions_of(ctl, "pair")).values()
    assert (pair.leader, pair.isr) == (2, (2,))

    back = await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset))
    assert not back.is_fenced
    [lone] = (await partitions_of(ctl, "lone")).values()
    assert (lone.leader, lone.isr, lone.leader_epoch) == (1, (1,), 2)
    [pair] = (await partitions_of(ctl, "pair")).values()
    assert (pair.leader, pair.isr, pair.leader_epoch) == (2, (2,), 0)  # rejoining an ISR is the broker's business
    assert any(isinstance(r, PartitionChangeRecord) and r.leader == 1 for r in log.records())


async def test_a_new_incarnation_replaces_the_old_registration(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE)
    new_incarnation = Uuid.random()
    new_epoch = await ctl.register_broker(RegisterBrokerRequest(1, new_incarnation, "moved", endpoint(1)))
    assert new_epoch > epochs[1]
    b1 = (await brokers_of(ctl))[1]
    assert (b1.epoch, b1.incarnation_id, b1.rack, b1.fenced) == (new_epoch, new_incarnation, "moved", True)
    with pytest.raises(KafkaError) as e:
        await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset))
    assert e.value.code == Errors.STALE_BROKER_EPOCH
    reply = await ctl.broker_heartbeat(HeartbeatRequest(1, new_epoch, ctl.committed_offset))
    assert not reply.is_fenced
    assert len(await ctl.describe_cluster()) == 3


async def test_a_large_write_puts_full_collections_off_until_its_records_are_freed(
    log: SharedLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Collections that run while a CreateTopics makes its records promote them; a full one then scanned them all,
    about once per large request, to free nothing. None runs during the write; the one due runs after it."""
    ctl, _, _ = await active_cluster(log, [(b, None, False) for b in range(6)])
    writing = False
    full: list[bool] = []  # a full collection started: during a write?

    def write_now(generate):  # type: ignore[no-untyped-def]
        nonlocal writing
        writing = True
        try:
            return QuorumController._write_now(ctl, generate)
        finally:
            writing = False

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(writing)

    monkeypatch.setattr(ctl, "_write_now", write_now)
    gc.callbacks.append(watch)
    try:
        for n in range(3):  # ~10,000 PartitionRecords each: a few dozen generation-1 collections in each
            topics = [NewTopic(f"t{n}-{i}", 100, 3) for i in range(99)]
            results = await ctl.create_topics(topics)
            assert not any(r.error.failed for r in results)
    finally:
        gc.callbacks.remove(watch)
    assert full and not any(full), full
    assert gc.get_threshold()[2] != NO_FULL_COLLECTION
