"""One place decides every change to a partition: its target ISR and replicas, and which leader an election picks
(Kafka's PartitionChangeBuilder, without eligible leader replicas).

A change is described by targets; :meth:`PartitionChange.build` turns them into a PartitionChangeRecord holding only
what differs (Kafka's "no change" sentinels everywhere else), or None when nothing would change. Replaying the record
(:func:`merge`) bumps the leader epoch when a leader is named and the partition epoch always.

Partition states, as the records give them: NonExistent (no PartitionRecord, or its topic was removed), New (a
PartitionRecord names replicas, none of them live yet), Online (leader ≥ 0), Offline (leader −1: no live replica of the
ISR could lead). :func:`partition_state` reads them from a registration and the brokers' liveness.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import NamedTuple

from controller.records import PartitionChangeRecord
from quorum.log.message import METADATA_TOPIC_ID, Uuid

NO_LEADER = -1
NO_LEADER_CHANGE = -2
RECOVERED = 0
RECOVERING = 1


class PartitionRegistration(NamedTuple):  # NamedTuples: replayed by the thousand, and immutable
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    leader_recovery_state: int = RECOVERED
    directories: tuple[Uuid, ...] = ()

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0] if self.replicas else NO_LEADER

    @property
    def has_preferred_leader(self) -> bool:
        return self.leader == self.preferred_leader


class Election(enum.Enum):
    PREFERRED = "preferred"  # the first replica if it may lead; else as ONLINE
    ONLINE = "online"  # keep a valid leader; else the first valid one in replica order
    UNCLEAN = "unclean"  # as ONLINE; and if no ISR member may lead, any live replica (data may be lost)


class PartitionState(enum.Enum):
    NON_EXISTENT = "NonExistent"
    NEW = "New"
    ONLINE = "Online"
    OFFLINE = "Offline"


def partition_state(p: PartitionRegistration | None, live: Callable[[int], bool]) -> PartitionState:
    if p is None:
        return PartitionState.NON_EXISTENT
    if p.leader >= 0:
        return PartitionState.ONLINE
    if p.leader_epoch == 0 and p.partition_epoch == 0 and not any(live(b) for b in p.replicas):
        return PartitionState.NEW
    return PartitionState.OFFLINE


class PartitionChange:
    """Targets for one partition, then :meth:`build`. ``acceptable(broker)`` says whether a broker may lead now
    (registered, unfenced, not shutting down — minus whatever the caller is taking away)."""

    def __init__(
        self,
        partition: PartitionRegistration,
        topic_id: Uuid,
        partition_id: int,
        acceptable: Callable[[int], bool],
        election: Election = Election.ONLINE,
    ) -> None:
        self.partition = partition
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.acceptable = acceptable
        self.election = election
        self.target_isr: list[int] = list(partition.isr)
        self.target_replicas: list[int] = list(partition.replicas)
        self.target_removing: list[int] = list(partition.removing)
        self.target_adding: list[int] = list(partition.adding)
        self.target_recovery_state = partition.leader_recovery_state
        self.unclean = False  # set by build() when it elected a leader from outside the ISR

    def _valid(self, broker: int) -> bool:
        return broker in self.target_isr and self.acceptable(broker)

    def elect(self) -> tuple[int, bool]:
        """(the leader the election picks, whether it is unclean)."""
        current = self.partition.leader
        replicas = self.target_replicas
        if self.election is Election.PREFERRED:
            if replicas and self._valid(replicas[0]):
                return replicas[0], False
            if self._valid(current):
                return current, False
            return next((r for r in replicas[1:] if self._valid(r)), NO_LEADER), False
        if self._valid(current):
            return current, False  # a valid leader stays: no needless epoch bump
        leader = next((r for r in replicas if self._valid(r)), NO_LEADER)
        if leader == NO_LEADER and self.election is Election.UNCLEAN:
            unclean = next((r for r in replicas if self.acceptable(r)), NO_LEADER)
            if unclean != NO_LEADER:
                return unclean, True
        return leader, False

    def build(self) -> PartitionChangeRecord | None:
        p = self.partition
        record = PartitionChangeRecord(partition_id=self.partition_id, topic_id=self.topic_id)
        self._complete_reassignment()
        leader, unclean = self.elect()
        if leader != p.leader:
            record.leader = leader
            if unclean:
                self.unclean = True
                record.isr = [leader]  # forced: the data the old ISR held may be lost
                if p.leader_recovery_state != RECOVERING:
                    record.leader_recovery_state = RECOVERING
        elif not set(p.replicas) <= set(self.target_replicas):
            record.leader = p.leader  # replicas removed: bump the leader epoch so they stop following
        if record.isr is None and self.target_isr and self.target_isr != list(p.isr):
            record.isr = list(self.target_isr)  # never empty: with the last member gone, its data lives there
        if self.target_replicas != list(p.replicas):
            record.replicas = list(self.target_replicas)
            record.directories = _directories(p, self.target_replicas)
        if self.target_removing != list(p.removing):
            record.removing_replicas = list(self.target_removing)
        if self.target_adding != list(p.adding):
            record.adding_replicas = list(self.target_adding)
        if record.leader_recovery_state == -1 and self.target_recovery_state != p.leader_recovery_state:
            record.leader_recovery_state = self.target_recovery_state
        return None if _no_op(record) else record

    def _complete_reassignment(self) -> None:
        """Kafka's maybeCompleteReassignment: once every replica of the target is in the ISR, the replicas being
        removed leave replicas and ISR (neither may end up empty)."""
        if not self.target_adding and not self.target_removing:
            return
        removing = set(self.target_removing)
        isr = [r for r in self.target_isr if r not in removing]
        final = [r for r in self.target_replicas if r not in removing]
        if not isr or not final or not set(final) <= set(isr):
            return
        self.target_isr = isr
        self.target_replicas = final
        self.target_removing = []
        self.target_adding = []


def _no_op(record: PartitionChangeRecord) -> bool:
    return (
        record.leader == NO_LEADER_CHANGE
        and record.isr is None
        and record.replicas is None
        and record.removing_replicas is None
        and record.adding_replicas is None
        and record.leader_recovery_state == -1
        and record.directories is None
    )


def _directories(p: PartitionRegistration, replicas: Sequence[int]) -> list[Uuid]:
    known = dict(zip(p.replicas, p.directories, strict=False))
    return [known.get(r, METADATA_TOPIC_ID) for r in replicas]  # METADATA_TOPIC_ID: Kafka's UNASSIGNED directory


def merge(p: PartitionRegistration, change: PartitionChangeRecord) -> PartitionRegistration:
    """Apply a PartitionChangeRecord as Kafka's PartitionRegistration.merge does: a named leader (even the same one)
    bumps the leader epoch; every change bumps the partition epoch."""
    leader, leader_epoch = p.leader, p.leader_epoch
    if change.leader != NO_LEADER_CHANGE:
        leader, leader_epoch = change.leader, p.leader_epoch + 1
    return p._replace(
        replicas=tuple(change.replicas) if change.replicas is not None else p.replicas,
        isr=tuple(change.isr) if change.isr is not None else p.isr,
        removing=tuple(change.removing_replicas) if change.removing_replicas is not None else p.removing,
        adding=tuple(change.adding_replicas) if change.adding_replicas is not None else p.adding,
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=p.partition_epoch + 1,
        leader_recovery_state=p.leader_recovery_state
        if change.leader_recovery_state == -1
        else change.leader_recovery_state,
        directories=tuple(change.directories) if change.directories is not None else p.directories,
    )
