"""Partition reassignment through the controller's own API and replay: Kafka's examples (testReassignPartitions and
its cancel), the codes, a pure reorder, shrink and growth of the replication factor, a new target on a moving
partition, completion through AlterPartition and through fencing, deletion and CreatePartitions mid-move, and a
standby (the next active controller) holding the same moves. Every case checks the records written."""

from __future__ import annotations

import random

import pytest
from ctl_helpers import SharedLog, active_cluster, settle, start_controller
from test_controller import check_partition_invariants, manual, partitions_of
from test_lifecycle import FIVE, fence, isr_change, unfence

from controller.partition_change import RECOVERING
from controller.quorum_controller import QuorumController
from controller.records import PartitionChangeRecord
from controller.requests import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    DeleteTopicState,
    NewPartitions,
    OngoingReassignment,
    ReassignablePartition,
    ReassignableTopic,
)
from quorum.errors import Errors


async def reassign(ctl: QuorumController, topic: str, *targets: tuple[int, tuple[int, ...] | None]) -> dict:
    [result] = await ctl.alter_partition_reassignments(
        [ReassignableTopic(topic, tuple(ReassignablePartition(i, r) for i, r in targets))]
    )
    assert result.name == topic
    return {p.partition_index: p.error for p in result.partitions}


def changes(log: SharedLog, first: int) -> list[PartitionChangeRecord]:
    return [r for r in log.records(first) if isinstance(r, PartitionChangeRecord)]


async def moving(ctl: QuorumController, topic: str | None = None) -> dict[tuple[str, int], OngoingReassignment]:
    topics = None if topic is None else [(topic, (0, 1, 2, 3))]
    listed = await ctl.list_partition_reassignments(topics)
    return {(t.name, p.partition_index): p for t in listed for p in t.partitions}


async def test_kafkas_example_move_then_complete_through_alter_partition(log: SharedLog) -> None:
    """[3,2,1] led by 3 → [0,2,1]: one record with replicas [0,2,1,3], adding [0], removing [3]; the leader's
    AlterPartition adding 0 to the ISR completes it, elects 0 and is answered NEW_LEADER_ELECTED."""
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (3, 2, 1))])
    first = len(log.entries)
    assert (await reassign(ctl, "t", (0, (0, 2, 1))))[0].code == Errors.NONE
    [started] = changes(log, first)
    assert (started.replicas, started.adding_replicas, started.removing_replicas) == ([0, 2, 1, 3], [0], [3])
    assert started.leader == -2 and started.isr is None  # nothing else changes yet
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.isr, p.leader, p.adding, p.removing) == ((0, 2, 1, 3), (3, 2, 1), 3, (0,), (3,))
    assert await moving(ctl) == {("t", 0): OngoingReassignment(0, (0, 2, 1, 3), (0,), (3,))}

    first = len(log.entries)
    reply = await ctl.alter_partition(3, epochs[3], [isr_change(ctl, "t", 0, p, (3, 0, 2, 1), epochs)])
    [r] = reply.partitions
    assert r.error.code == Errors.NEW_LEADER_ELECTED
    [done] = changes(log, first)
    assert (done.replicas, done.isr, done.leader) == ([0, 2, 1], [0, 2, 1], 0)
    assert (done.adding_replicas, done.removing_replicas) == ([], [])
    p2 = (await partitions_of(ctl, "t"))[0]
    assert (p2.replicas, p2.isr, p2.leader, p2.adding, p2.removing) == ((0, 2, 1), (0, 2, 1), 0, (), ())
    assert p2.leader_epoch == p.leader_epoch + 1
    assert await moving(ctl) == {}
    assert ctl.replication.reassignments.committed_count() == 0
    check_partition_invariants(ctl)


async def test_adding_a_replica_keeps_the_leader_and_completes_when_it_joins(log: SharedLog) -> None:
    """Replication factor 2 → 3: nothing is removed, so the leader stays and its epoch is not bumped at the end."""
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (1, 2))])
    assert (await reassign(ctl, "t", (0, (1, 2, 3))))[0].code == Errors.NONE
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.adding, p.removing, p.leader) == ((1, 2, 3), (3,), (), 1)
    first = len(log.entries)
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "t", 0, p, (1, 2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.NONE
    [done] = changes(log, first)
    assert (done.isr, done.adding_replicas, done.removing_replicas, done.leader) == ([1, 2, 3], [], None, -2)
    p2 = (await partitions_of(ctl, "t"))[0]
    assert (p2.replicas, p2.isr, p2.leader, p2.leader_epoch) == ((1, 2, 3), (1, 2, 3), 1, p.leader_epoch)


async def test_a_pure_reorder_completes_at_once_and_changes_no_leader(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, FIVE, topics=[manual("t", (1, 2, 3))])
    before = (await partitions_of(ctl, "t"))[0]
    first = len(log.entries)
    assert (await reassign(ctl, "t", (0, (3, 1, 2))))[0].code == Errors.NONE
    [record] = changes(log, first)
    assert record.replicas == [3, 1, 2] and record.leader == -2
    assert record.adding_replicas is None and record.removing_replicas is None
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.leader, p.leader_epoch) == ((3, 1, 2), 1, before.leader_epoch)
    assert await moving(ctl) == {}


async def test_a_shrink_to_in_sync_replicas_completes_at_once(log: SharedLog) -> None:
    """Removing the leader's replica: the remaining replicas are all in the ISR, so one record drops it and
    elects the first remaining replica."""
    ctl, _, _ = await active_cluster(log, FIVE, topics=[manual("t", (1, 2, 3))])
    first = len(log.entries)
    assert (await reassign(ctl, "t", (0, (2, 3))))[0].code == Errors.NONE
    [record] = changes(log, first)
    assert (record.replicas, record.isr, record.leader) == ([2, 3], [2, 3], 2)
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.isr, p.leader, p.adding, p.removing) == ((2, 3), (2, 3), 2, (), ())


async def test_cancel_reverts_to_the_original_replicas_in_current_order(log: SharedLog) -> None:
    """Kafka's revert example: [3,2,1] → [0,2,1] gives [0,2,1,3]; cancel gives [2,1,3], the adding replica off
    the ISR; a second cancel is NO_REASSIGNMENT_IN_PROGRESS."""
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (3, 2, 1))])
    await reassign(ctl, "t", (0, (0, 2, 1)))
    p = (await partitions_of(ctl, "t"))[0]
    # 0 joins the ISR without completing the move: 3 leaves only once the target's replicas are all in sync
    await ctl.alter_partition(3, epochs[3], [isr_change(ctl, "t", 0, p, (3, 2, 0), epochs)])
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.isr, p.adding, p.removing) == ((0, 2, 1, 3), (3, 2, 0), (0,), (3,))
    first = len(log.entries)
    assert (await reassign(ctl, "t", (0, None)))[0].code == Errors.NONE
    [record] = changes(log, first)
    assert (record.replicas, record.isr, record.adding_replicas, record.removing_replicas) == (
        [2, 1, 3],
        [3, 2],
        [],
        [],
    )
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.isr, p.leader) == ((2, 1, 3), (3, 2), 3)
    again = await reassign(ctl, "t", (0, None))
    assert again[0].code == Errors.NO_REASSIGNMENT_IN_PROGRESS


async def test_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it(log: SharedLog) -> None:
    """[1,2] → [3,4]; 3 joins, 2 drops out, 1 is fenced: the ISR is [3], only an adding replica. Reverting would
    leave it empty: refused (39) unless the topic allows unclean elections; then the first original replica is the
    ISR, and as it is fenced the live original replica 2 leads uncleanly (RECOVERING)."""
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (1, 2)), manual("u", (1, 2))])
    allow = AlterConfigsResource(
        2, "u", (AlterableConfig("unclean.leader.election.enable", AlterConfigOp.SET, "true"),)
    )
    [r] = await ctl.incremental_alter_configs([allow])
    assert not r.error.failed
    for topic in ("t", "u"):
        await reassign(ctl, topic, (0, (3, 4)))
        p = (await partitions_of(ctl, topic))[0]
        await ctl.alter_partition(1, epochs[1], [isr_change(ctl, topic, 0, p, (1, 3), epochs)])
    await fence(ctl, 1, epochs[1])
    for topic in ("t", "u"):
        p = (await partitions_of(ctl, topic))[0]
        assert (p.replicas, p.isr, p.leader, p.adding) == ((3, 4, 1, 2), (3,), 3, (3, 4))
    refused = await reassign(ctl, "t", (0, None))
    assert refused[0].code == Errors.INVALID_REPLICA_ASSIGNMENT
    assert refused[0].message == (
        "Unable to revert partition assignment for t:0 because it would require an unclean leader election."
    )
    assert (await partitions_of(ctl, "t"))[0].adding == (3, 4)
    assert (await reassign(ctl, "u", (0, None)))[0].code == Errors.NONE
    p = (await partitions_of(ctl, "u"))[0]
    assert (p.replicas, p.isr, p.leader, p.leader_recovery_state) == ((1, 2), (2,), 2, RECOVERING)
    check_partition_invariants(ctl)


async def test_codes_unknown_topic_partition_invalid_assignments(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (1, 2))])
    [missing] = await ctl.alter_partition_reassignments([ReassignableTopic("nope", (ReassignablePartition(0, (1,)),))])
    assert missing.partitions[0].error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.partitions[0].error.message == "Unable to find a topic named nope."
    answers = await reassign(
        ctl,
        "t",
        (5, (1, 2)),
        (0, ()),
    )
    assert answers[5].code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert answers[5].message == "Unable to find partition t:5."
    assert answers[0].code == Errors.INVALID_REPLICA_ASSIGNMENT
    assert "empty replica list" in answers[0].message
    dup = await reassign(ctl, "t", (0, (1, 1)))
    assert dup[0].code == Errors.INVALID_REPLICA_ASSIGNMENT and "more than once" in dup[0].message
    unknown = await reassign(ctl, "t", (0, (1, 9)))
    assert unknown[0].code == Errors.INVALID_REPLICA_ASSIGNMENT and "broker 9" in unknown[0].message
    assert (await partitions_of(ctl, "t"))[0].replicas == (1, 2)  # nothing written for refused partitions
    # A fenced broker may be a target (Kafka's controller: it joins once it is back and caught up).
    await fence(ctl, 4, epochs[4])
    fenced = await reassign(ctl, "t", (0, (1, 2, 4)))
    assert fenced[0].code == Errors.NONE
    assert (await partitions_of(ctl, "t"))[0].adding == (4,)


async def test_one_partition_failing_does_not_stop_the_others(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, FIVE, topics=[manual("t", (1, 2), (2, 3))])
    first = len(log.entries)
    answers = await reassign(ctl, "t", (0, (3, 4)), (1, (7,)))
    assert answers[0].code == Errors.NONE and answers[1].code == Errors.INVALID_REPLICA_ASSIGNMENT
    assert len(changes(log, first)) == 1


async def test_a_new_target_on_a_moving_partition_starts_from_the_union(log: SharedLog) -> None:
    """[2,3] moving to [0,1] (replicas [0,1,2,3]), then to [4,3]: replicas [4,3,0,1,2], adding [4], removing
    [0,1,2] — 3 is kept, 0 and 1 (added by the first move) are now being removed."""
    ctl, _, _ = await active_cluster(log, FIVE, topics=[manual("t", (2, 3))])
    await reassign(ctl, "t", (0, (0, 1)))
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.adding, p.removing) == ((0, 1, 2, 3), (0, 1), (2, 3))
    await reassign(ctl, "t", (0, (4, 3)))
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.adding, p.removing) == ((4, 3, 0, 1, 2), (4,), (0, 1, 2))


async def test_fencing_a_removing_leader_can_complete_the_move(log: SharedLog) -> None:
    """[1,2,3] → [2,3] is instant; [1,2] → [2,3] waits for 3. Fencing the removing leader 1 elects 2; once 3
    joins, 1 leaves the replicas."""
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (1, 2))])
    await reassign(ctl, "t", (0, (2, 3)))
    await fence(ctl, 1, epochs[1])
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.leader, p.isr, p.adding, p.removing) == (2, (2,), (3,), (1,))
    reply = await ctl.alter_partition(2, epochs[2], [isr_change(ctl, "t", 0, p, (2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.NONE
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.isr, p.leader, p.adding, p.removing) == ((2, 3), (2, 3), 2, (), ())
    check_partition_invariants(ctl)


async def test_a_fenced_destination_waits_and_the_move_completes_when_it_returns(log: SharedLog) -> None:
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (1, 2))])
    await reassign(ctl, "t", (0, (1, 3)))
    await fence(ctl, 3, epochs[3])
    p = (await partitions_of(ctl, "t"))[0]
    # the leader may not add a fenced broker to the ISR
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "t", 0, p, (1, 2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.INELIGIBLE_REPLICA
    assert (await moving(ctl))[("t", 0)].adding == (3,)
    await unfence(ctl, 3, epochs[3])
    p = (await partitions_of(ctl, "t"))[0]
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "t", 0, p, (1, 2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.NONE
    p = (await partitions_of(ctl, "t"))[0]
    assert (p.replicas, p.isr, p.leader) == ((1, 3), (1, 3), 1)


async def test_deleting_a_moving_topic_ends_its_moves(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, FIVE, topics=[manual("t", (1, 2)), manual("k", (1, 2))])
    await reassign(ctl, "t", (0, (3, 4)))
    await reassign(ctl, "k", (0, (3, 4)))
    [deleted] = await ctl.delete_topics([DeleteTopicState(name="t")])
    assert not deleted.error.failed
    assert set(await moving(ctl)) == {("k", 0)}
    assert ctl.replication.reassignments.committed_count() == 1


async def test_new_partitions_of_a_moving_topic_get_its_target_replication_factor(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, FIVE, topics=[manual("t", (1, 2))])
    await reassign(ctl, "t", (0, (3, 4, 0)))  # 2 → 3 replicas, five listed while moving
    [r] = await ctl.create_partitions([NewPartitions("t", 2)])
    assert not r.error.failed, r.error
    parts = await partitions_of(ctl, "t")
    assert len(parts[1].replicas) == 3
    assert set(await moving(ctl)) == {("t", 0)}  # the new partition is not moving


async def test_list_names_only_moving_partitions_of_known_topics(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, FIVE, topics=[manual("t", (1, 2), (1, 2)), manual("k", (1, 2))])
    await reassign(ctl, "t", (1, (1, 3)))
    listed = await ctl.list_partition_reassignments([("t", (0, 1, 7)), ("nope", (0,)), ("k", (0,))])
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in listed] == [("t", [1])]
    assert await ctl.list_partition_reassignments([]) == []


async def test_a_standby_holds_the_same_moves_and_finishes_them_when_it_becomes_active(log: SharedLog) -> None:
    standby, _ = await start_controller(log, 2)
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (1, 2), (2, 3))])
    await reassign(ctl, "t", (0, (3, 4)), (1, (2, 3, 4)))
    await settle()
    assert dict(standby.replication.partitions.items()) == dict(ctl.replication.partitions.items())
    assert standby.replication.reassignments.moving.committed() == ctl.replication.reassignments.moving.committed()
    # fail over: the standby becomes active and the leaders' AlterPartitions complete the moves there
    log.elect(2, 2)
    await settle()
    assert standby.active
    p0 = (await partitions_of(standby, "t"))[0]
    reply = await standby.alter_partition(1, epochs[1], [isr_change(standby, "t", 0, p0, (1, 2, 3, 4), epochs)])
    assert reply.partitions[0].error.code == Errors.NEW_LEADER_ELECTED
    p0 = (await partitions_of(standby, "t"))[0]
    assert (p0.replicas, p0.isr, p0.leader) == ((3, 4), (3, 4), 3)
    listed = await standby.list_partition_reassignments(None)
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in listed] == [("t", [1])]
    assert p0.leader_recovery_state != RECOVERING


def check_reassignment_invariants(ctl: QuorumController) -> None:
    """Adding and removing are disjoint parts of the replicas; the target (replicas − removing) is never empty; the
    ISR lies within the replicas; the index of moving partitions agrees with the partitions; no move that could
    complete is left open."""
    moving_index = {(tid, i) for tid, parts in ctl.replication.reassignments.moving.items() for i in parts}
    for key, p in ctl.replication.partitions.items():
        assert not set(p.adding) & set(p.removing), (key, p)
        assert set(p.adding) <= set(p.replicas) and set(p.removing) <= set(p.replicas), (key, p)
        assert len(set(p.replicas)) == len(p.replicas), (key, p)
        assert [r for r in p.replicas if r not in p.removing], (key, p)
        assert set(p.isr) <= set(p.replicas), (key, p)
        assert (key in moving_index) == bool(p.adding or p.removing), (key, p)
        if p.adding or p.removing:  # every change goes through PartitionChange, which completes what it can
            final, isr = set(p.replicas) - set(p.removing), set(p.isr) - set(p.removing)
            assert not (isr and final <= isr), ("a completable move was left open", key, p)


@pytest.mark.parametrize("seed", range(8))
async def test_random_moves_cancels_isr_changes_and_fencing_keep_the_invariants(seed: int) -> None:
    """Random reassignments, cancels, leaders' ISR changes (joining adding replicas, dropping others), fencing and
    unfencing, on a standby-watched log: every state satisfies the reassignment and partition invariants, and the
    standby holds exactly the same partitions and moves."""
    rng = random.Random(seed)
    log = SharedLog()
    standby, _ = await start_controller(log, 2)
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("t", (1, 2, 3), (2, 3, 4), (3, 4, 0))])
    fenced: set[int] = set()
    started = ended = 0
    for step in range(60):
        before = set(await moving(ctl, "t"))
        index = rng.randrange(3)
        p = (await partitions_of(ctl, "t"))[index]
        action = rng.random()
        if action < 0.35:
            target = tuple(rng.sample(range(5), rng.randint(1, 4)))
            await reassign(ctl, "t", (index, target))
        elif action < 0.45:
            await reassign(ctl, "t", (index, None))
        elif action < 0.85 and p.leader >= 0:
            others = [b for b in p.replicas if b != p.leader and b not in fenced]
            isr = (p.leader, *rng.sample(others, rng.randint(0, len(others))))
            await ctl.alter_partition(p.leader, epochs[p.leader], [isr_change(ctl, "t", index, p, isr, epochs)])
        elif fenced and rng.random() < 0.5:
            broker = rng.choice(sorted(fenced))
            await unfence(ctl, broker, epochs[broker])
            fenced.discard(broker)
        elif len(fenced) < 2:
            broker = rng.choice([b for b in range(5) if b not in fenced])
            await fence(ctl, broker, epochs[broker])
            fenced.add(broker)
        after = set(await moving(ctl, "t"))
        started, ended = started + len(after - before), ended + len(before - after)
        try:
            check_reassignment_invariants(ctl)
            check_partition_invariants(ctl)
        except AssertionError as e:
            raise AssertionError(f"seed {seed}, step {step}: {e}") from e
    assert started >= 3 and ended >= 2, (seed, started, ended)  # the walk really moves partitions
    await settle()
    assert dict(standby.replication.partitions.items()) == dict(ctl.replication.partitions.items()), f"seed {seed}"
    assert standby.replication.reassignments.moving.committed() == ctl.replication.reassignments.moving.committed()


async def test_a_cancel_racing_the_completion_either_finds_nothing_or_wins_cleanly(log: SharedLog) -> None:
    """The event queue orders them. Completion first: the cancel is NO_REASSIGNMENT_IN_PROGRESS and writes nothing.
    Cancel first: it drops the adding replica, which bumps the leader epoch, so the leader's AlterPartition computed
    before is FENCED_LEADER_EPOCH and the partition keeps its original replicas."""
    ctl, _, epochs = await active_cluster(log, FIVE, topics=[manual("a", (1, 2)), manual("b", (1, 2))])
    for topic in ("a", "b"):
        await reassign(ctl, topic, (0, (1, 3)))
    a = (await partitions_of(ctl, "a"))[0]
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "a", 0, a, (1, 2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.NONE
    first = len(log.entries)
    assert (await reassign(ctl, "a", (0, None)))[0].code == Errors.NO_REASSIGNMENT_IN_PROGRESS
    assert len(log.entries) == first
    assert (await partitions_of(ctl, "a"))[0].replicas == (1, 3)

    b = (await partitions_of(ctl, "b"))[0]
    assert (await reassign(ctl, "b", (0, None)))[0].code == Errors.NONE
    reply = await ctl.alter_partition(1, epochs[1], [isr_change(ctl, "b", 0, b, (1, 2, 3), epochs)])
    assert reply.partitions[0].error.code == Errors.FENCED_LEADER_EPOCH
    b = (await partitions_of(ctl, "b"))[0]
    assert (b.replicas, b.isr, b.adding, b.removing) == ((1, 2), (1, 2), (), ())
