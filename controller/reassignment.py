"""Partition reassignment (Kafka's KIP-455, as its KRaft controller runs it): AlterPartitionReassignments and
ListPartitionReassignments.

The state of a move lives in the partition's own records — ``replicas`` (the target first, then the replicas being
removed), ``adding`` and ``removing`` — so every controller replays it and a new active controller finishes what the
old one started. There is no driver: :class:`PartitionChange` completes a move whenever a change to the partition
finds every target replica in the ISR (an AlterPartition from the leader, usually; also fencing, unfencing,
elections and the request itself, which completes at once a pure reorder or a shrink to in-sync replicas).
Completion drops the removed replicas from replicas and ISR and elects a new leader only if the leader was removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from controller.partition_change import Election, PartitionChange, PartitionRegistration
from controller.records import PartitionChangeRecord
from controller.requests import (
    OngoingReassignment,
    OngoingTopicReassignment,
    ReassignablePartition,
    ReassignablePartitionResult,
    ReassignableTopic,
    ReassignableTopicResult,
)
from controller.results import MAX_RECORDS_PER_USER_OP, NO_ERROR, ApiError, ControllerResult
from controller.timeline import Timeline, TimelineDict
from controller.topic_names import shown
from quorum.errors import Errors, KafkaError
from quorum.log.message import ApiMessage, Uuid

if TYPE_CHECKING:
    from controller.replication_control import ReplicationControl


def in_progress(p: PartitionRegistration | None) -> bool:
    return p is not None and bool(p.adding or p.removing)


def target_replicas(p: PartitionRegistration) -> tuple[int, ...]:
    """Where a partition is going: its replicas without the ones being removed."""
    return tuple(r for r in p.replicas if r not in p.removing) if p.removing else p.replicas


def original_replicas(p: PartitionRegistration) -> tuple[int, ...]:
    """Where a partition came from: its replicas without the ones being added (current order)."""
    return tuple(r for r in p.replicas if r not in p.adding) if p.adding else p.replicas


class Reassignments:
    def __init__(self, timeline: Timeline, replication: ReplicationControl) -> None:
        self.replication = replication
        # topic id -> the partitions under reassignment (Kafka's reassigningTopics), kept by replay
        self.moving: TimelineDict[Uuid, frozenset[int]] = TimelineDict(timeline)

    # -- replay -------------------------------------------------------------------------------------------------

    def track(
        self, topic_id: Uuid, index: int, before: PartitionRegistration | None, after: PartitionRegistration
    ) -> None:
        was, now = in_progress(before), in_progress(after)
        if was == now:
            return
        parts = self.moving.get(topic_id, frozenset())
        parts = parts | {index} if now else parts - {index}
        if parts:
            self.moving[topic_id] = parts
        elif topic_id in self.moving:
            del self.moving[topic_id]

    def forget_topic(self, topic_id: Uuid) -> None:
        if topic_id in self.moving:
            del self.moving[topic_id]

    def committed_count(self) -> int:
        return sum(len(parts) for parts in self.moving.committed().values())

    # -- AlterPartitionReassignments ---------------------------------------------------------------------------

    def alter(self, topics: list[ReassignableTopic]) -> ControllerResult[list[ReassignableTopicResult]]:
        """Each partition succeeds or fails alone (Kafka answers every one); the records of all that succeed go
        in one atomic batch, as Kafka's atomicOf."""
        records: list[ApiMessage] = []
        results = []
        for topic in topics:
            answers = []
            for target in topic.partitions:
                error = NO_ERROR
                try:
                    record = self._alter_one(topic.name, target)
                    if record is not None:
                        records.append(record)
                except KafkaError as e:
                    error = ApiError.of(e)
                answers.append(ReassignablePartitionResult(target.partition_index, error))
            results.append(ReassignableTopicResult(topic.name, tuple(answers)))
        if len(records) > MAX_RECORDS_PER_USER_OP:
            raise KafkaError("Unable to perform excessively large batch operation.", Errors.POLICY_VIOLATION)
        return ControllerResult(records, results)

    def _alter_one(self, name: str, target: ReassignablePartition) -> PartitionChangeRecord | None:
        r = self.replication
        topic_id = r.topics_by_name.get(name)
        if topic_id is None:
            raise KafkaError(f"Unable to find a topic named {shown(name)}.", Errors.UNKNOWN_TOPIC_OR_PARTITION)
        p = r.partitions.get((topic_id, target.partition_index))
        if p is None:
            raise KafkaError(
                f"Unable to find partition {shown(name)}:{target.partition_index}.", Errors.UNKNOWN_TOPIC_OR_PARTITION
            )
        if target.replicas is None:
            return self._cancel(name, topic_id, target.partition_index, p)
        return self._change(topic_id, target.partition_index, p, target.replicas)

    def _change(
        self, topic_id: Uuid, index: int, p: PartitionRegistration, target: Sequence[int]
    ) -> PartitionChangeRecord | None:
        """Kafka's changePartitionReassignment: validated as a manual assignment (the replication factor may
        change; fenced brokers are allowed: they join when they catch up), then replicas = target + removing,
        adding = target − current, removing = current − target (both ascending). A new target on a moving
        partition starts from the union the move holds."""
        replicas = self.replication.check_assignment(target)
        current = p.replicas
        removing = sorted(set(current) - set(replicas))
        adding = sorted(set(replicas) - set(current))
        change = PartitionChange(p, topic_id, index, self.replication.cluster.active)
        change.target_replicas = [*replicas, *removing]
        change.target_removing = removing
        change.target_adding = adding
        return change.build()

    def _cancel(self, name: str, topic_id: Uuid, index: int, p: PartitionRegistration) -> PartitionChangeRecord | None:
        """Kafka's cancelPartitionReassignment: back to the original replicas (current order); the adding replicas
        leave the ISR. If only adding replicas were in sync, the first original replica becomes the ISR — an
        unclean election, allowed only where the topic allows those."""
        if not in_progress(p):
            raise KafkaError(
                "No partition reassignment is in progress for the topic and partition.",
                Errors.NO_REASSIGNMENT_IN_PROGRESS,
            )
        replicas = list(original_replicas(p))
        isr = [b for b in p.isr if b not in p.adding]
        unclean_allowed = bool(self.replication.topic_config(name, "unclean.leader.election.enable"))
        if not isr:
            if not unclean_allowed:
                raise KafkaError(
                    f"Unable to revert partition assignment for {name}:{index} because it would require an "
                    "unclean leader election.",
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                )
            isr = replicas[:1]
        election = Election.UNCLEAN if unclean_allowed else Election.ONLINE
        change = PartitionChange(p, topic_id, index, self.replication.cluster.active, election)
        change.target_isr = isr
        change.target_replicas = replicas
        change.target_removing = []
        change.target_adding = []
        return change.build()

    # -- ListPartitionReassignments ----------------------------------------------------------------------------

    def list(self, topics: list[tuple[str, tuple[int, ...]]] | None) -> list[OngoingTopicReassignment]:
        """Committed state. ``topics`` None: every moving partition; else the named ones — unknown topics and
        partitions not moving are left out silently, as Kafka does."""
        moving = self.moving.committed()
        by_name = self.replication.topics_by_name.committed()
        names = {t.id: t.name for t in self.replication.topics.committed().values()}
        parts = self.replication.partitions.committed()
        if topics is None:
            wanted = [(names[tid], tid, sorted(idx)) for tid, idx in moving.items() if tid in names]
            wanted.sort()
        else:
            wanted = [(name, by_name[name], list(idx)) for name, idx in topics if name in by_name]
        out = []
        for name, topic_id, indexes in wanted:
            ongoing = []
            for i in indexes:
                p = parts.get((topic_id, i))
                if in_progress(p):
                    assert p is not None
                    ongoing.append(OngoingReassignment(i, p.replicas, p.adding, p.removing))
            if ongoing:
                out.append(OngoingTopicReassignment(name, tuple(ongoing)))
        return out
