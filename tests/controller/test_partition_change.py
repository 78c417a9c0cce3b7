"""PartitionChange, the one place that decides a partition's change: each election type's choice, the records it
writes (only what changed, with Kafka's sentinels), and the epochs that replaying them bumps."""

from __future__ import annotations

from controller.partition_change import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChange,
    PartitionRegistration,
    PartitionState,
    merge,
    partition_state,
)
from quorum.log.message import Uuid

TOPIC = Uuid.random()


def reg(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int, **kw: object) -> PartitionRegistration:
    return PartitionRegistration(replicas, isr, leader, **kw)  # type: ignore[arg-type]


def live(*brokers: int):
    return lambda b: b in brokers


def build(p: PartitionRegistration, acceptable, election: Election = Election.ONLINE, isr=None, **targets):
    change = PartitionChange(p, TOPIC, 0, acceptable, election)
    if isr is not None:
        change.target_isr = list(isr)
    for name, value in targets.items():
        setattr(change, name, value)
    return change.build()


# -- what each election picks ----------------------------------------------------------------------------------


def test_online_keeps_a_valid_leader_and_writes_nothing() -> None:
    p = reg((1, 2, 3), (1, 2, 3), 2)
    assert build(p, live(1, 2, 3)) is None


def test_online_moves_leadership_to_the_first_valid_isr_member_in_replica_order() -> None:
    p = reg((3, 1, 2), (1, 2, 3), 3)
    record = build(p, live(1, 2), isr=(1, 2))
    assert (record.leader, record.isr) == (1, [1, 2])
    after = merge(p, record)
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (1, (1, 2), 1, 1)


def test_removing_the_last_isr_member_leaves_the_isr_and_takes_the_leader() -> None:
    """Kafka without ELR: the ISR is never emptied (its data lives on that broker); the partition goes offline."""
    p = reg((1, 2), (1,), 1)
    record = build(p, live(2), isr=())
    assert record.leader == NO_LEADER and record.isr is None
    assert partition_state(merge(p, record), live(2)) is PartitionState.OFFLINE


def test_unclean_elects_a_live_replica_outside_the_isr_and_marks_it_recovering() -> None:
    p = reg((1, 2, 3), (1,), NO_LEADER, leader_epoch=3, partition_epoch=5)
    assert build(p, live(3)) is None  # ONLINE: nobody in the ISR is live
    change = PartitionChange(p, TOPIC, 0, live(3), Election.UNCLEAN)
    record = change.build()
    assert change.unclean
    assert (record.leader, record.isr, record.leader_recovery_state) == (3, [3], RECOVERING)
    after = merge(p, record)
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (3, (3,), 4, 6)
    assert after.leader_recovery_state == RECOVERING


def test_unclean_prefers_a_live_isr_member() -> None:
    p = reg((1, 2, 3), (1, 2), NO_LEADER)
    record = build(p, live(2, 3), Election.UNCLEAN)
    assert (record.leader, record.isr, record.leader_recovery_state) == (2, None, -1)


def test_preferred_takes_the_first_replica_when_it_is_live_and_in_the_isr() -> None:
    p = reg((1, 2, 3), (1, 2, 3), 2)
    record = build(p, live(1, 2, 3), Election.PREFERRED)
    assert record.leader == 1 and record.isr is None
    assert build(p, live(2, 3), Election.PREFERRED) is None  # preferred not live: the valid leader stays
    assert build(reg((1, 2, 3), (2, 3), 2), live(1, 2, 3), Election.PREFERRED) is None  # not in the ISR


def test_preferred_falls_back_to_another_valid_replica_for_a_leaderless_partition() -> None:
    p = reg((1, 2, 3), (1, 3), NO_LEADER)
    assert build(p, live(3), Election.PREFERRED).leader == 3


def test_isr_change_keeps_the_leader_epoch_and_bumps_the_partition_epoch() -> None:
    p = reg((1, 2, 3), (1, 2, 3), 1, leader_epoch=7, partition_epoch=9)
    record = build(p, live(1, 2, 3), isr=(1, 3))
    assert record.leader == NO_LEADER_CHANGE and record.isr == [1, 3]
    after = merge(p, record)
    assert (after.leader_epoch, after.partition_epoch) == (7, 10)


def test_clearing_recovery_writes_only_the_state() -> None:
    p = reg((1, 2), (1,), 1, leader_recovery_state=RECOVERING)
    record = build(p, live(1, 2), target_recovery_state=RECOVERED)
    assert record.leader_recovery_state == RECOVERED
    assert (record.leader, record.isr, record.replicas) == (NO_LEADER_CHANGE, None, None)


def test_no_change_is_no_record() -> None:
    p = reg((1, 2, 3), (1, 2), 1)
    assert build(p, live(1, 2, 3), isr=(1, 2)) is None
    assert build(p, live(1, 2, 3), Election.UNCLEAN) is None


def test_completing_a_reassignment_drops_removing_replicas_and_moves_a_removed_leader() -> None:
    p = reg((1, 2, 3), (1, 2), 1, removing=(1,), adding=(3,))
    assert build(p, live(1, 2, 3)) is None  # the adding replica 3 is not in the ISR yet
    record = build(p, live(1, 2, 3), isr=(1, 2, 3))
    assert (record.replicas, record.isr, record.leader) == ([2, 3], [2, 3], 2)
    assert (record.removing_replicas, record.adding_replicas) == ([], [])
    after = merge(p, record)
    assert (after.replicas, after.removing, after.adding, after.leader_epoch) == ((2, 3), (), (), 1)
    assert len(after.directories) == 2


def test_partition_states() -> None:
    assert partition_state(None, live()) is PartitionState.NON_EXISTENT
    assert partition_state(reg((1, 2), (1, 2), 1), live(1)) is PartitionState.ONLINE
    assert partition_state(reg((1, 2), (1, 2), NO_LEADER), live()) is PartitionState.NEW
    assert partition_state(reg((1, 2), (1,), NO_LEADER, leader_epoch=1, partition_epoch=1), live()) is (
        PartitionState.OFFLINE
    )
