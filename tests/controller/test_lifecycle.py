"""A partition's life after creation, through the controller's own API and replay: elections (fencing, unfencing,
preferred, unclean, the topic's unclean config, automatic balancing), AlterPartition with Kafka's checks,
DeleteTopics and CreatePartitions. Every case checks the records written, not only the answers."""

from __future__ import annotations

import asyncio

from ctl_helpers import SharedLog, active_cluster, quiet_settings, settle, start_controller
from test_controller import THREE, brokers_of, check_partition_invariants, manual, partitions_of

from controller.cluster_control import HeartbeatRequest
from controller.event_queue import Event
from controller.partition_change import RECOVERED, RECOVERING
from controller.quorum_controller import QuorumController
from controller.records import (
    BrokerRegistrationChangeRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
)
from controller.replication_control import NewTopic
from controller.requests import (
    AlterPartitionData,
    AlterPartitionTopic,
    DeleteTopicState,
    ElectionType,
    NewPartitions,
)
from quorum.errors import Errors, KafkaError
from quorum.log.message import ZERO_UUID, Uuid

FIVE = [(0, None, False), (1, None, False), (2, None, False), (3, None, False), (4, None, False)]


def written(log: SharedLog, first: int) -> list[object]:
    return log.records(first)


async def fence(ctl: QuorumController, broker_id: int, epoch: int) -> None:
    await ctl.broker_heartbeat(HeartbeatRequest(broker_id, epoch, ctl.committed_offset, want_fence=True))


async def unfence(ctl: QuorumController, broker_id: int, epoch: int) -> None:
    reply = await ctl.broker_heartbeat(HeartbeatRequest(broker_id, epoch, ctl.committed_offset))
    assert not reply.is_fenced


def errors(results) -> dict:
    return {(r.topic, r.partition): r.error.code for r in results}


# -- brokers leaving and arriving --------------------------------------------------------------------------------


async def test_fencing_two_brokers_moves_leaders_in_replica_order(log: SharedLog) -> None:
    """Kafka's testFenceMultipleBrokers: fence 2 then 3 on [1,2,3], [2,3,4], [0,2,1]."""
    topics = [manual("a", (1, 2, 3)), manual("b", (2, 3, 4)), manual("c", (0, 2, 1))]
    ctl, _, epochs = await active_cluster(log, FIVE, topics=topics)
    first, non_atomic = len(log.entries), log.non_atomic_appends
    await fence(ctl, 2, epochs[2])
    await fence(ctl, 3, epochs[3])
    assert log.non_atomic_appends == non_atomic + 2  # as Kafka: a huge fencing may span batches
    parts = {name: (await partitions_of(ctl, name))[0] for name in "abc"}
    assert (parts["a"].leader, parts["a"].isr) == (1, (1,))
    assert (parts["b"].leader, parts["b"].isr) == (4, (4,))
    assert (parts["c"].leader, parts["c"].isr) == (0, (0, 1))
    assert parts["c"].leader_epoch == 0  # its leader 0 stayed: no epoch bump
    records = written(log, first)
    # Kafka's order when fencing: the partition changes, then the registration change
    kinds = [type(r).__name__ for r in records]
    assert kinds.index("BrokerRegistrationChangeRecord") > kinds.index("PartitionChangeRecord")
    check_partition_invariants(ctl)


async def test_unfencing_gives_an_offline_partition_its_leader_back(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("solo", (1, 2)), manual("pair", (1, 3))])
    await fence(ctl, 2, epochs[2])
    await fence(ctl, 1, epochs[1])
    solo = (await partitions_of(ctl, "solo"))[0]
    assert (solo.leader, solo.isr) == (-1, (1,))
    first = len(log.entries)
    await unfence(ctl, 1, epochs[1])
    solo = (await partitions_of(ctl, "solo"))[0]
    assert (solo.leader, solo.isr, solo.leader_epoch) == (1, (1,), 2)
    changes = [r for r in written(log, first) if isinstance(r, PartitionChangeRecord)]
    assert [(c.leader, c.isr) for c in changes] == [(1, None)]  # only the leaderless partition changes
    check_partition_invariants(ctl)


async def test_fencing_the_last_isr_member_of_an_unclean_topic_elects_a_live_replica(log: SharedLog) -> None:
    unclean = NewTopic("u", assignments=((0, (1, 2)),), configs=(("unclean.leader.election.enable", "true"),))
    ctl, _, epochs = await active_cluster(log, THREE, topics=[unclean, manual("clean", (1, 2))])
    await fence(ctl, 2, epochs[2])  # ISRs shrink to [1]
    await unfence(ctl, 2, epochs[2])  # 2 is back, but not in the ISRs (only the data plane puts it back)
    await fence(ctl, 1, epochs[1])
    u = (await partitions_of(ctl, "u"))[0]
    clean = (await partitions_of(ctl, "clean"))[0]
    assert (u.leader, u.isr, u.leader_recovery_state) == (2, (2,), RECOVERING)
    assert (clean.leader, clean.isr) == (-1, (1,))


async def test_controlled_shutdown_marks_the_broker_before_moving_its_partitions(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("cs", (1, 2, 3))])
    first = len(log.entries)
    await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_shutdown=True))
    records = written(log, first)
    assert isinstance(records[0], BrokerRegistrationChangeRecord) and records[0].in_controlled_shutdown == 1
    assert isinstance(records[1], PartitionChangeRecord) and (records[1].leader, records[1].isr) == (2, [2, 3])


# -- ElectLeaders ------------------------------------------------------------------------------------------------


async def test_preferred_elections_per_partition(log: SharedLog) -> None:
    """Kafka's testElectPreferredLeaders: 80 when the preferred replica is not in the ISR or shutting down, 84
    when it already leads, 3 for unknown topics and partitions; then one {Leader} record per election."""
    topics = [manual("foo", (1, 2, 3), (2, 3, 1), (3, 1, 2))]
    ctl, _, epochs = await active_cluster(log, THREE, topics=topics)
    await fence(ctl, 1, epochs[1])
    await unfence(ctl, 1, epochs[1])  # 1 is live again but out of every ISR
    results = await ctl.elect_leaders(ElectionType.PREFERRED, [("foo", 0), ("foo", 1), ("foo", 9), ("bar", 0)])
    assert errors(results) == {
        ("foo", 0): Errors.PREFERRED_LEADER_NOT_AVAILABLE,
        ("foo", 1): Errors.ELECTION_NOT_NEEDED,
        ("foo", 9): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("bar", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert results[3].error.message == "No such topic as bar"
    assert results[2].error.message == "No such partition as foo-9"
    # 1 rejoins the ISR of partition 0 (as the leader 2 would ask), then the preferred election succeeds
    p0 = (await partitions_of(ctl, "foo"))[0]
    reply = await ctl.alter_partition(p0.leader, epochs[p0.leader], [isr_change(ctl, "foo", 0, p0, (1, 2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.NONE, reply
    first = len(log.entries)
    results = await ctl.elect_leaders(ElectionType.PREFERRED, [("foo", 0)])
    assert errors(results) == {("foo", 0): Errors.NONE}
    [record] = written(log, first)
    assert (record.leader, record.isr) == (1, None)


async def test_electing_all_partitions_answers_only_those_that_needed_it(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2), (2, 1), (3, 1))])
    await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_shutdown=True))
    results = await ctl.elect_leaders(ElectionType.PREFERRED, None)
    # p0: preferred 1 is shutting down (80); p1 and p2 already led by their preferred replica (left out)
    assert errors(results) == {("t", 0): Errors.PREFERRED_LEADER_NOT_AVAILABLE}


async def test_unclean_election_on_request_ignores_the_topic_config(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2)), manual("led", (3,))])
    await fence(ctl, 2, epochs[2])
    await unfence(ctl, 2, epochs[2])
    await fence(ctl, 1, epochs[1])
    assert await ctl.elect_leaders(ElectionType.PREFERRED, [("t", 0)]) and True
    results = await ctl.elect_leaders(ElectionType.UNCLEAN, [("t", 0), ("led", 0)])
    assert errors(results) == {("t", 0): Errors.NONE, ("led", 0): Errors.ELECTION_NOT_NEEDED}
    t = (await partitions_of(ctl, "t"))[0]
    assert (t.leader, t.isr, t.leader_recovery_state) == (2, (2,), RECOVERING)
    # the new leader ends its recovery through AlterPartition
    reply = await ctl.alter_partition(2, epochs[2], [isr_change(ctl, "t", 0, t, (2,), epochs, RECOVERED)])
    assert reply.partitions[0].leader_recovery_state == RECOVERED
    await fence(ctl, 2, epochs[2])
    results = await ctl.elect_leaders(ElectionType.UNCLEAN, [("t", 0)])
    assert errors(results) == {("t", 0): Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE}


async def test_a_bad_election_type_fails_the_request(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE, topics=[manual("t", (1, 2))])
    try:
        await ctl.elect_leaders(7, None)
    except KafkaError as e:
        assert e.code == Errors.INVALID_REQUEST and "election_type: 7" in str(e)
    else:
        raise AssertionError("election type 7 was accepted")
    assert await ctl.elect_leaders(ElectionType.PREFERRED, []) == []


async def test_automatic_balancing_restores_preferred_leaders_in_capped_runs(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2), (1, 3), (2, 1))])
    await fence(ctl, 1, epochs[1])
    await unfence(ctl, 1, epochs[1])
    for index in (0, 1):
        p = (await partitions_of(ctl, "t"))[index]
        reply = await ctl.alter_partition(
            p.leader, epochs[p.leader], [isr_change(ctl, "t", index, p, (*p.isr, 1), epochs)]
        )
        assert reply.partitions[0].error.code == Errors.NONE
    result = ctl.replication.elections.balance_leaders(limit=1)
    assert result.response is True and len(result.records) == 1  # capped: run again soon
    await asyncio.wait_for(ctl.queue.append(Event("balance", ctl._balance)), 5)
    await asyncio.wait_for(ctl.queue.append(Event("balance", ctl._balance)), 5)
    await settle()
    parts = await partitions_of(ctl, "t")
    assert [parts[i].leader for i in range(3)] == [1, 1, 2]
    assert not ctl.replication.elections.imbalanced()


async def test_balancing_scans_a_budget_of_partitions_per_run_and_resumes_where_it_stopped(log: SharedLog) -> None:
    """controller/partition_scan.py: a pass goes topic by topic over runs; the election cap stops a run at the
    partition the next run starts with; a run that ends the pass says so (no run again soon)."""
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("a", (1, 2)), manual("b", (2, 1)),
                                                              manual("c", (1, 2))])  # fmt: skip
    await fence(ctl, 1, epochs[1])
    await unfence(ctl, 1, epochs[1])
    for name in ("a", "b", "c"):
        p = (await partitions_of(ctl, name))[0]
        if 1 not in p.isr:
            reply = await ctl.alter_partition(
                p.leader, epochs[p.leader], [isr_change(ctl, name, 0, p, (*p.isr, 1), epochs)]
            )
            assert reply.partitions[0].error.code == Errors.NONE
    ids = {name: ctl.replication.topics_by_name[name] for name in ("a", "b", "c")}
    elections = ctl.replication.elections

    def elected(result) -> list[str]:
        return [next(n for n, i in ids.items() if i == r.topic_id) for r in result.records]

    runs = [elections.balance_leaders(budget=1) for _ in range(3)]  # one topic of one partition per run
    assert [(elected(r), r.response) for r in runs] == [(["a"], True), ([], True), (["c"], False)]
    capped = elections.balance_leaders(limit=1)  # a new pass: nothing was written, so a and c still need it
    assert (elected(capped), capped.response) == (["a"], True)
    rest = elections.balance_leaders(limit=1)
    assert (elected(rest), rest.response) == (["c"], False)  # resumed at c, where the cap stopped the run


# -- AlterPartition ----------------------------------------------------------------------------------------------


def isr_change(ctl, topic, index, p, isr, epochs, recovery=None) -> AlterPartitionTopic:
    topic_id = ctl.replication.topics_by_name[topic]
    data = AlterPartitionData(
        index,
        p.leader_epoch,
        tuple((b, epochs[b]) for b in isr),
        p.partition_epoch,
        p.leader_recovery_state if recovery is None else recovery,
    )
    return AlterPartitionTopic(topic_id, (data,))


async def test_shrink_and_expand_the_isr(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2, 3))])
    p = (await partitions_of(ctl, "t"))[0]
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "t", 0, p, (1, 2), epochs)])
    [r] = reply.partitions
    assert (r.error.code, r.leader_id, r.leader_epoch, r.isr, r.partition_epoch) == (Errors.NONE, 1, 0, (1, 2), 1)
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.isr, p.leader_epoch, p.partition_epoch) == ((1, 2), 0, 1)
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "t", 0, p, (1, 2, 3), epochs)])
    assert reply.partitions[0].isr == (1, 2, 3) and reply.partitions[0].partition_epoch == 2
    first = len(log.entries)
    p = (await partitions_of(ctl, "t"))[0]
    same = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "t", 0, p, (1, 2, 3), epochs)])
    assert same.partitions[0].error.code == Errors.NONE and len(log.entries) == first  # no change, no record


async def test_alter_partition_refuses_with_kafkas_codes_and_writes_nothing(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, [*THREE, (4, "d", True)], topics=[manual("t", (1, 2, 3), (2, 3, 1))])
    await ctl.broker_heartbeat(HeartbeatRequest(3, epochs[3], ctl.committed_offset, want_shutdown=True))
    p = (await partitions_of(ctl, "t"))[0]
    topic_id = ctl.replication.topics_by_name["t"]
    first = len(log.entries)

    async def answer(isr, leader_epoch=None, partition_epoch=None, broker=1, index=0, recovery=0, epoch_of=None):
        data = AlterPartitionData(
            index,
            p.leader_epoch if leader_epoch is None else leader_epoch,
            tuple((b, (epoch_of or epochs).get(b, -1)) for b in isr),
            p.partition_epoch if partition_epoch is None else partition_epoch,
            recovery,
        )
        reply = await ctl.alter_partition(broker, epochs[broker], [AlterPartitionTopic(topic_id, (data,))])
        return reply.partitions[0].error

    assert (await answer((1, 2), leader_epoch=p.leader_epoch + 1)).code == Errors.NOT_CONTROLLER
    assert (await answer((1, 2), partition_epoch=p.partition_epoch + 1)).code == Errors.NOT_CONTROLLER
    assert (await answer((1, 2), partition_epoch=p.partition_epoch - 1)).code == Errors.INVALID_UPDATE_VERSION
    assert (await answer((2,), broker=2)).code == Errors.INVALID_REQUEST  # 2 is not the leader
    assert (await answer((2, 1, 2))).code == Errors.INVALID_REQUEST  # a duplicate
    assert (await answer((2,))).code == Errors.INVALID_REQUEST  # no leader in it
    assert (await answer((1, 4))).code == Errors.INVALID_REQUEST  # 4 is not a replica
    assert (await answer((1, 3))).code == Errors.INELIGIBLE_REPLICA  # 3 is shutting down
    error = await answer((1, 2), epoch_of={1: epochs[1], 2: epochs[2] + 1})
    assert error.code == Errors.INELIGIBLE_REPLICA and "broker epoch" in error.message
    assert (await answer((1, 2), recovery=RECOVERING)).code == Errors.INVALID_REQUEST
    assert (await answer((1,), index=7)).code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert len(log.entries) == first
    # a leader epoch below the partition's is fenced; a zombie broker's stale epoch fails the whole request
    await ctl.elect_leaders(ElectionType.PREFERRED, [("t", 0)])
    p2 = (await partitions_of(ctl, "t"))[1]
    assert p2.leader == 2
    assert (await answer((1, 2), leader_epoch=p.leader_epoch - 1)).code in (Errors.FENCED_LEADER_EPOCH,)
    stale = await ctl.alter_partition(1, epochs[1] - 1, [isr_change(ctl, "t", 0, p, (1,), epochs)])
    assert stale.error.code == Errors.STALE_BROKER_EPOCH and not stale.partitions
    unknown = await ctl.alter_partition(1, epochs[1], [AlterPartitionTopic(Uuid.random(), p_data(0))])
    assert unknown.partitions[0].error.code == Errors.UNKNOWN_TOPIC_ID
    assert len(log.entries) == first


def p_data(index: int) -> tuple[AlterPartitionData, ...]:
    return (AlterPartitionData(index, 0, ((1, -1),), 0),)


async def test_alter_partition_that_completes_a_reassignment_answers_new_leader_elected(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2))])
    topic_id = ctl.replication.topics_by_name["t"]
    # a reassignment from [1, 2] to [2, 3] in flight, as the log would hold it
    log.foreign(
        [
            PartitionChangeRecord(
                topic_id=topic_id, partition_id=0, replicas=[1, 2, 3], removing_replicas=[1], adding_replicas=[3]
            )
        ]
    )
    await settle()
    p = (await partitions_of(ctl, "t"))[0]
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "t", 0, p, (1, 2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.NEW_LEADER_ELECTED
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.isr, p.leader, p.removing, p.adding) == ((2, 3), (2, 3), 2, (), ())


# -- DeleteTopics ------------------------------------------------------------------------------------------------


async def test_delete_by_name_and_id_then_recreate_under_the_same_name(log: SharedLog) -> None:
    topics = [NewTopic("a", 3, 2, configs=(("retention.ms", "1000"),)), NewTopic("b", 2, 1)]
    ctl, _, _ = await active_cluster(log, THREE, topics=topics)
    old_a = ctl.replication.topics_by_name["a"]
    b_id = ctl.replication.topics_by_name["b"]
    first = len(log.entries)
    results = await ctl.delete_topics([DeleteTopicState(name="a"), DeleteTopicState(topic_id=b_id)])
    assert [(r.name, r.topic_id, r.error.code) for r in results] == [("a", old_a, 0), ("b", b_id, 0)]
    assert written(log, first) == [RemoveTopicRecord(topic_id=old_a), RemoveTopicRecord(topic_id=b_id)]
    assert len(log.append_calls[-1][1]) == 2  # one atomic batch
    assert not any(key[0] in (old_a, b_id) for key in ctl.replication.partitions)
    assert (2, "a") not in ctl.replication.configs
    [described] = await ctl.describe_topics(["a"])
    assert described.error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    [again] = await ctl.create_topics([NewTopic("a", 1, 1)])
    assert not again.error.failed and again.topic_id != old_a
    [d] = await ctl.describe_topics(["a"])
    assert len(d.partitions) == 1 and d.configs == ()


async def test_delete_topics_refusals(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE, topics=[NewTopic("a", 1, 1), NewTopic("b", 1, 1)])
    a_id = ctl.replication.topics_by_name["a"]
    first = len(log.entries)
    results = await ctl.delete_topics(
        [
            DeleteTopicState(),
            DeleteTopicState(name="b", topic_id=a_id),
            DeleteTopicState(name="dup"),
            DeleteTopicState(name="dup"),
            DeleteTopicState(topic_id=ZERO_UUID),
            DeleteTopicState(topic_id=Uuid.random()),
            DeleteTopicState(name="nope"),
            DeleteTopicState(name="a"),
            DeleteTopicState(topic_id=a_id),
        ]
    )
    codes = [r.error.code for r in results]
    assert codes == [
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
        Errors.INVALID_REQUEST,
        Errors.UNKNOWN_TOPIC_ID,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NONE,
        Errors.INVALID_REQUEST,  # the same topic again, by its id
    ]
    assert results[0].error.message == "Neither topic name nor id were specified."
    assert results[1].error.message == "You may not specify both topic name and topic id."
    assert written(log, first) == [RemoveTopicRecord(topic_id=a_id)]


async def test_deletion_disabled(log: SharedLog) -> None:
    settings = quiet_settings(delete_topic_enable=False)
    ctl, _, _ = await active_cluster(log, THREE, settings, topics=[NewTopic("a", 1, 1)])
    try:
        await ctl.delete_topics([DeleteTopicState(name="a")])
    except KafkaError as e:
        assert e.code == Errors.TOPIC_DELETION_DISABLED
    else:
        raise AssertionError("deletion was not refused")
    assert "a" in ctl.replication.topics_by_name


# -- CreatePartitions --------------------------------------------------------------------------------------------


async def test_create_partitions_grows_a_topic_with_its_replication_factor(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, THREE, topics=[NewTopic("t", 2, 2)])
    first = len(log.entries)
    [r] = await ctl.create_partitions([NewPartitions("t", 5)])
    assert not r.error.failed
    records = written(log, first)
    assert [x.partition_id for x in records] == [2, 3, 4] and all(isinstance(x, PartitionRecord) for x in records)
    parts = await partitions_of(ctl, "t")
    assert sorted(parts) == [0, 1, 2, 3, 4] and all(len(p.replicas) == 2 for p in parts.values())
    assert all(p.leader == p.isr[0] and p.leader_epoch == 0 for p in parts.values())


async def test_create_partitions_refusals(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, [*THREE, (4, "d", True)], topics=[NewTopic("t", 2, 2)])
    first = len(log.entries)

    async def one(request: NewPartitions, validate_only: bool = False):
        [r] = await ctl.create_partitions([request], validate_only=validate_only)
        return r.error

    assert (await one(NewPartitions("nope", 3))).code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    e = await one(NewPartitions("t", 2))
    assert (e.code, e.message) == (Errors.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    e = await one(NewPartitions("t", 1))
    assert e.message == "The topic t currently has 2 partition(s); 1 would not be an increase."
    e = await one(NewPartitions("t", 4, ((1, 2),)))
    assert e.code == Errors.INVALID_REPLICA_ASSIGNMENT and "only 1 assignment(s)" in e.message
    assert (await one(NewPartitions("t", 3, ((1, 1),)))).code == Errors.INVALID_REPLICA_ASSIGNMENT
    assert (await one(NewPartitions("t", 3, ((1, 9),)))).code == Errors.INVALID_REPLICA_ASSIGNMENT
    assert (await one(NewPartitions("t", 3, ((1, 2, 3),)))).code == Errors.INVALID_REPLICA_ASSIGNMENT
    e = await one(NewPartitions("t", 3, ((4,),)))
    assert e.code == Errors.INVALID_REPLICA_ASSIGNMENT
    assert (await one(NewPartitions("t", 3, ((3, 4),)), validate_only=True)).code == Errors.NONE
    duplicate = await ctl.create_partitions([NewPartitions("t", 3), NewPartitions("t", 4)])
    assert [r.error.code for r in duplicate] == [Errors.INVALID_REQUEST, Errors.INVALID_REQUEST]
    assert len(log.entries) == first
    [r] = await ctl.create_partitions([NewPartitions("t", 3, ((3, 4),))])
    assert not r.error.failed
    p = (await partitions_of(ctl, "t"))[2]
    assert (p.replicas, p.isr, p.leader) == ((3, 4), (3,), 3)  # 4 is fenced: not in the ISR
    for b in (1, 2, 3):
        await fence(ctl, b, epochs[b])
    e = await one(NewPartitions("t", 4))
    assert e.code == Errors.INVALID_REPLICATION_FACTOR and "fenced" in e.message


async def test_standby_replays_every_lifecycle_change_identically(log: SharedLog) -> None:
    standby, _ = await start_controller(log, 2)
    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2, 3)), NewTopic("gone", 2, 2)])
    await fence(ctl, 1, epochs[1])
    await unfence(ctl, 1, epochs[1])
    await ctl.create_partitions([NewPartitions("t", 3)])
    await ctl.delete_topics([DeleteTopicState(name="gone")])
    await ctl.elect_leaders(ElectionType.PREFERRED, None)
    await settle()
    assert dict(standby.replication.partitions.items()) == dict(ctl.replication.partitions.items())
    assert dict(standby.replication.topics_by_name.items()) == dict(ctl.replication.topics_by_name.items())
    assert (await brokers_of(ctl)).keys() == {1, 2, 3}


# -- configs drive elections -------------------------------------------------------------------------------------


def unclean_on() -> tuple:
    from controller.requests import AlterableConfig, AlterConfigOp

    return (AlterableConfig("unclean.leader.election.enable", AlterConfigOp.SET, "true"),)


async def test_the_cluster_default_unclean_config_makes_fencing_elect_unclean_leaders(log: SharedLog) -> None:
    from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource, ConfigResource

    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2))])
    await fence(ctl, 2, epochs[2])
    await unfence(ctl, 2, epochs[2])
    resource = AlterConfigsResource(
        4, "", (AlterableConfig("unclean.leader.election.enable", AlterConfigOp.SET, "true"),)
    )
    [r] = await ctl.incremental_alter_configs([resource])
    assert not r.error.failed, r
    [described] = await ctl.describe_configs([ConfigResource(2, "t", ("unclean.leader.election.enable",))])
    [entry] = described.configs
    assert (entry.value, entry.source) == ("true", 3)  # DYNAMIC_DEFAULT_BROKER_CONFIG
    await fence(ctl, 1, epochs[1])
    t = (await partitions_of(ctl, "t"))[0]
    assert (t.leader, t.isr, t.leader_recovery_state) == (2, (2,), RECOVERING)


async def test_a_static_unclean_default_and_the_periodic_unclean_election(log: SharedLog) -> None:
    from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource

    ctl, _, epochs = await active_cluster(log, THREE, topics=[manual("t", (1, 2)), manual("u", (1, 3))])
    await fence(ctl, 2, epochs[2])
    await unfence(ctl, 2, epochs[2])
    await fence(ctl, 1, epochs[1])
    assert (await partitions_of(ctl, "t"))[0].leader == -1
    # the topic is switched to unclean later: the periodic run elects its leader
    resource = AlterConfigsResource(
        2, "t", (AlterableConfig("unclean.leader.election.enable", AlterConfigOp.SET, "true"),)
    )
    [r] = await ctl.incremental_alter_configs([resource])
    assert not r.error.failed
    await asyncio.wait_for(ctl.queue.append(Event("unclean", ctl._unclean)), 5)
    await settle()
    assert (await partitions_of(ctl, "t"))[0].leader == 2
    assert (await partitions_of(ctl, "u"))[0].leader == 3  # its ISR member 3 took over when 1 was fenced
    static = quiet_settings(static_broker_configs={"unclean.leader.election.enable": "true"})
    log2 = SharedLog()
    ctl2, _, epochs2 = await active_cluster(log2, THREE, static, topics=[manual("t", (1, 2))])
    await fence(ctl2, 2, epochs2[2])
    await unfence(ctl2, 2, epochs2[2])
    await fence(ctl2, 1, epochs2[1])
    assert (await partitions_of(ctl2, "t"))[0].leader == 2
    await ctl2.close()


async def test_deleting_a_topic_drops_its_configs_from_describe(log: SharedLog) -> None:
    from controller.requests import ConfigResource

    ctl, _, _ = await active_cluster(log, THREE, topics=[NewTopic("c", 1, 1, configs=(("retention.ms", "5"),))])
    [d] = await ctl.describe_configs([ConfigResource(2, "c", ("retention.ms",))])
    assert (d.configs[0].value, d.configs[0].source) == ("5", 1)
    await ctl.delete_topics([DeleteTopicState(name="c")])
    [d] = await ctl.describe_configs([ConfigResource(2, "c")])
    assert d.error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert (2, "c") not in ctl.configs.configs
