"""Leadership and ISR changes of existing partitions: brokers leaving and arriving, ElectLeaders, AlterPartition,
and the periodic preferred-leader balancing and unclean elections (Kafka's ReplicationControlManager, the parts
that run :class:`PartitionChange`).

Like every generator here, these read state and return records plus a response; replaying the records is what
changes state. Every decision about a partition goes through :class:`PartitionChange`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from controller.partition_change import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChange,
    PartitionRegistration,
    merge,
)
from controller.partition_scan import SCAN_PARTITIONS_PER_RUN, PartitionScan
from controller.records import PartitionChangeRecord
from controller.requests import (
    AlterPartitionData,
    AlterPartitionResponse,
    AlterPartitionResult,
    AlterPartitionTopic,
    ElectionResult,
    ElectionType,
)
from controller.results import MAX_RECORDS_PER_USER_OP, NO_ERROR, ApiError, ControllerResult
from quorum.errors import Errors, KafkaError
from quorum.log.message import ApiMessage, Uuid

if TYPE_CHECKING:
    from controller.replication_control import ReplicationControl

MAX_ELECTIONS_PER_IMBALANCE = 1000  # Kafka's QuorumController cap per balancing / unclean run


class LeaderElections:
    def __init__(self, replication: ReplicationControl) -> None:
        self.replication = replication
        self.cluster = replication.cluster
        self._balance_scan = PartitionScan()
        self._unclean_scan = PartitionScan()

    def _election_for(self, topic_id: Uuid) -> Election:
        """ONLINE, or UNCLEAN where the topic (or the broker default) enables unclean.leader.election.enable."""
        topic = self.replication.topics.get(topic_id)
        if topic is not None and self.replication.topic_config(topic.name, "unclean.leader.election.enable"):
            return Election.UNCLEAN
        return Election.ONLINE

    # -- brokers leaving and arriving ------------------------------------------------------------------------

    def broker_moves(
        self, broker_id: int, removing: bool, keys: Iterable[tuple[Uuid, int]] | None = None
    ) -> list[ApiMessage]:
        """PartitionChangeRecords for ``broker_id`` leaving (fenced, shutting down: off every ISR it is in, never
        emptying one; a new leader where it led) or arriving (unfenced: every leaderless partition holds an
        election in which it may take part), as Kafka's generateLeaderAndIsrUpdates. ``keys``: only these
        partitions (those gone since are skipped), else all."""
        active = self.cluster.active
        partitions = self.replication.partitions
        if keys is None:
            items: Iterable[tuple[tuple[Uuid, int], PartitionRegistration | None]] = partitions.latest_items()
        else:
            items = ((key, partitions.get(key)) for key in keys)
        records: list[ApiMessage] = []
        if removing:

            def acceptable(r: int) -> bool:
                return r != broker_id and active(r)

            for (topic_id, index), p in items:
                if p is not None and broker_id in p.isr:
                    change = PartitionChange(p, topic_id, index, acceptable, self._election_for(topic_id))
                    change.target_isr = [b for b in p.isr if b != broker_id]
                    if (record := change.build()) is not None:
                        records.append(record)
        else:

            def acceptable(r: int) -> bool:
                return r == broker_id or active(r)

            for (topic_id, index), p in items:
                if p is not None and p.leader == NO_LEADER:
                    change = PartitionChange(p, topic_id, index, acceptable, self._election_for(topic_id))
                    if (record := change.build()) is not None:
                        records.append(record)
        return records

    def isr_places(self, broker_id: int) -> list[tuple[Uuid, int]]:
        """The partitions whose ISR holds ``broker_id`` and that its leaving changes, those it leads first (they
        wait for a new leader). Left out: a leaderless partition whose sole ISR member it is (an ISR is never
        emptied, so nothing changes there)."""
        led: list[tuple[Uuid, int]] = []
        others: list[tuple[Uuid, int]] = []
        for key, p in self.replication.partitions.latest_items():
            if broker_id in p.isr:
                if p.leader == broker_id:
                    led.append(key)
                elif len(p.isr) > 1:
                    others.append(key)
        return led + others

    def has_leaderships(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for _, p in self.replication.partitions.latest_items())

    # -- ElectLeaders ----------------------------------------------------------------------------------------

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None
    ) -> ControllerResult[list[ElectionResult]]:
        """Per partition: UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
        ELIGIBLE_LEADERS_NOT_AVAILABLE or success. ``partitions`` None: every partition, and the answer leaves out
        those that need no election. An administrator's UNCLEAN election ignores the topic's config."""
        try:
            kind = ElectionType(election_type)
        except ValueError:
            raise KafkaError(
                f"election_type: {election_type} is not a valid election type (0 PREFERRED, 1 UNCLEAN)",
                Errors.INVALID_REQUEST,
            ) from None
        records: list[ApiMessage] = []
        results: list[ElectionResult] = []
        if partitions is None:
            names = {t.id: t.name for t in self.replication.topics.values()}
            for (topic_id, index), p in self.replication.partitions.items():
                error = self._elect(names[topic_id], topic_id, index, p, kind, records)
                if error.code != Errors.ELECTION_NOT_NEEDED:
                    results.append(ElectionResult(names[topic_id], index, error))
        else:
            for topic, index in dict.fromkeys(partitions):  # a partition named twice is elected once
                topic_id = self.replication.topics_by_name.get(topic)
                p = None if topic_id is None else self.replication.partitions.get((topic_id, index))
                if topic_id is None:
                    error = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}")
                elif p is None:
                    error = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{index}")
                else:
                    error = self._elect(topic, topic_id, index, p, kind, records)
                results.append(ElectionResult(topic, index, error))
        if len(records) > MAX_RECORDS_PER_USER_OP:
            raise KafkaError("Unable to perform excessively large batch operation.", Errors.POLICY_VIOLATION)
        return ControllerResult(records, results, atomic=False)

    def _elect(
        self,
        topic: str,
        topic_id: Uuid,
        index: int,
        p: PartitionRegistration,
        kind: ElectionType,
        records: list[ApiMessage],
    ) -> ApiError:
        if kind is ElectionType.PREFERRED and p.has_preferred_leader:
            return ApiError(
                Errors.ELECTION_NOT_NEEDED, f"{topic}-{index}: the preferred replica {p.leader} already leads"
            )
        if kind is ElectionType.UNCLEAN and p.leader != NO_LEADER:
            return ApiError(Errors.ELECTION_NOT_NEEDED, f"{topic}-{index}: broker {p.leader} already leads")
        election = Election.PREFERRED if kind is ElectionType.PREFERRED else Election.UNCLEAN
        record = PartitionChange(p, topic_id, index, self.cluster.active, election).build()
        if record is None:
            if kind is ElectionType.PREFERRED:
                return ApiError(
                    Errors.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"{topic}-{index}: the preferred replica {p.preferred_leader} is not live or not in the ISR "
                    f"{list(p.isr)}",
                )
            return ApiError(
                Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"{topic}-{index}: no replica of {list(p.replicas)} is live to lead",
            )
        records.append(record)
        return NO_ERROR

    # -- periodic work ---------------------------------------------------------------------------------------

    def balance_leaders(
        self, limit: int = MAX_ELECTIONS_PER_IMBALANCE, budget: int = SCAN_PARTITIONS_PER_RUN
    ) -> ControllerResult[bool]:
        """Preferred elections for partitions not led by their first replica, at most ``limit`` records, over the
        next ``budget`` partitions of a pass (controller/partition_scan.py); the response says whether to run
        again soon (the pass goes on, or the cap was hit). KRaft ignores leader.imbalance.per.broker.percentage:
        any imbalanced partition is a candidate."""
        return self._elect_in_scan(self._balance_scan, Election.PREFERRED, limit, budget)

    def elect_unclean_leaders(
        self, limit: int = MAX_ELECTIONS_PER_IMBALANCE, budget: int = SCAN_PARTITIONS_PER_RUN
    ) -> ControllerResult[bool]:
        """Unclean elections for leaderless partitions whose topic enables them (Kafka's maybeElectUncleanLeaders),
        as :meth:`balance_leaders` runs."""
        return self._elect_in_scan(self._unclean_scan, Election.UNCLEAN, limit, budget)

    def _elect_in_scan(
        self, scan: PartitionScan, election: Election, limit: int, budget: int
    ) -> ControllerResult[bool]:
        records: list[ApiMessage] = []
        active = self.cluster.active

        def visit(key: tuple[Uuid, int], p: PartitionRegistration) -> bool:
            if election is Election.PREFERRED:
                wanted = p.leader != p.replicas[0]
            else:
                wanted = p.leader == NO_LEADER and self._election_for(key[0]) is Election.UNCLEAN
            if not wanted:
                return True
            if len(records) >= limit:
                return False  # the cap: this one is the next run's first
            record = PartitionChange(p, key[0], key[1], active, election).build()
            if record is not None:
                records.append(record)
            return True

        ended = scan.run(self.replication, visit, budget)
        return ControllerResult(records, not ended, atomic=False)

    def imbalanced(self) -> bool:
        return any(p.leader != p.replicas[0] for _, p in self.replication.partitions.latest_items())

    # -- AlterPartition --------------------------------------------------------------------------------------

    def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        topics: list[AlterPartitionTopic],
        seen: set[tuple[Uuid, int]] | None = None,
    ) -> ControllerResult[AlterPartitionResponse]:
        """A partition leader's ISR change (or the end of its recovery), with Kafka's checks in Kafka's order. The
        answer carries each partition's state after the change. Non-atomic per partition, as Kafka. ``seen``: the
        partitions of the same request applied by earlier turns (a partition named twice is refused)."""
        b = self.cluster.brokers.get(broker_id)
        if b is None or b.epoch != broker_epoch:
            why = "is not registered" if b is None else f"is registered with epoch {b.epoch}"
            error = ApiError(
                Errors.STALE_BROKER_EPOCH, f"broker_epoch: {broker_epoch} is stale; broker {broker_id} {why}"
            )
            return ControllerResult([], AlterPartitionResponse(error))
        records: list[ApiMessage] = []
        results: list[AlterPartitionResult] = []
        seen = set() if seen is None else seen
        for topic in topics:
            info = self.replication.topics.get(topic.topic_id)
            for data in topic.partitions:
                key = (topic.topic_id, data.partition_index)
                if info is None:
                    error = ApiError(Errors.UNKNOWN_TOPIC_ID, f"topic_id: no topic has id {topic.topic_id}")
                    results.append(AlterPartitionResult(topic.topic_id, data.partition_index, error))
                    continue
                if key in seen:
                    error = ApiError(
                        Errors.INVALID_REQUEST,
                        f"partition_index: {info.name}-{data.partition_index} appears more than once in the request",
                    )
                    results.append(AlterPartitionResult(topic.topic_id, data.partition_index, error))
                    continue
                seen.add(key)
                results.append(self._alter_one(broker_id, info.name, topic.topic_id, data, records))
        return ControllerResult(records, AlterPartitionResponse(NO_ERROR, tuple(results)), atomic=False)

    def _alter_one(
        self, broker_id: int, name: str, topic_id: Uuid, data: AlterPartitionData, records: list[ApiMessage]
    ) -> AlterPartitionResult:
        index = data.partition_index
        where = f"{name}-{index}"

        def fail(code: Errors, message: str) -> AlterPartitionResult:
            return AlterPartitionResult(topic_id, index, ApiError(code, message))

        p = self.replication.partitions.get((topic_id, index))
        if p is None:
            return fail(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"partition_index: {where} does not exist")
        if data.leader_epoch > p.leader_epoch or data.partition_epoch > p.partition_epoch:
            return fail(
                Errors.NOT_CONTROLLER,
                f"{where}: the request's leader epoch {data.leader_epoch} / partition epoch {data.partition_epoch} "
                f"is ahead of this controller's {p.leader_epoch} / {p.partition_epoch}",
            )
        if data.leader_epoch < p.leader_epoch:
            return fail(
                Errors.FENCED_LEADER_EPOCH,
                f"leader_epoch: {data.leader_epoch} for {where} is stale; the leader epoch is {p.leader_epoch}",
            )
        if broker_id != p.leader:
            return fail(Errors.INVALID_REQUEST, f"{where}: broker {broker_id} is not its leader ({p.leader})")
        if data.partition_epoch < p.partition_epoch:
            return fail(
                Errors.INVALID_UPDATE_VERSION,
                f"partition_epoch: {data.partition_epoch} for {where} is stale; the partition epoch is "
                f"{p.partition_epoch}",
            )
        isr = [member for member, _ in data.new_isr]
        if problem := _isr_problem(isr, p, broker_id):
            return fail(Errors.INVALID_REQUEST, f"new_isr: {isr} for {where} {problem}")
        if data.leader_recovery_state not in (RECOVERED, RECOVERING):
            return fail(
                Errors.INVALID_REQUEST,
                f"leader_recovery_state: {data.leader_recovery_state} for {where} is not 0 RECOVERED or 1 RECOVERING",
            )
        if data.leader_recovery_state == RECOVERING and len(isr) > 1:
            return fail(Errors.INVALID_REQUEST, f"new_isr: {isr} for {where}: a RECOVERING leader must be alone")
        if p.leader_recovery_state == RECOVERED and data.leader_recovery_state == RECOVERING:
            return fail(Errors.INVALID_REQUEST, f"leader_recovery_state: {where} cannot go back to RECOVERING")
        for member, epoch in data.new_isr:
            reg = self.cluster.brokers.get(member)
            why = (
                "is not registered"
                if reg is None
                else "is in controlled shutdown"
                if reg.in_controlled_shutdown
                else "is fenced"
                if reg.fenced
                else f"has broker epoch {reg.epoch}, not {epoch}"
                if epoch != -1 and reg.epoch != epoch
                else None
            )
            if why:
                return fail(Errors.INELIGIBLE_REPLICA, f"new_isr: broker {member} in {isr} for {where} {why}")
        change = PartitionChange(p, topic_id, index, self.cluster.active, self._election_for(topic_id))
        change.target_isr = isr
        change.target_recovery_state = data.leader_recovery_state
        record = change.build()
        after = p
        if record is not None:
            records.append(record)
            after = merge(p, record)
            if isinstance(record, PartitionChangeRecord) and record.leader not in (NO_LEADER_CHANGE, broker_id):
                return fail(
                    Errors.NEW_LEADER_ELECTED,
                    f"{where}: the change elected broker {record.leader}; broker {broker_id} no longer leads",
                )
        return AlterPartitionResult(
            topic_id,
            index,
            NO_ERROR,
            after.leader,
            after.leader_epoch,
            after.isr,
            after.leader_recovery_state,
            after.partition_epoch,
        )


def _isr_problem(isr: Iterable[int], p: PartitionRegistration, leader: int) -> str | None:
    members = list(isr)
    if len(set(members)) != len(members):
        return "names a broker twice"
    if any(b < 0 for b in members):
        return "names a negative broker id"
    if not set(members) <= set(p.replicas):
        return f"is not a subset of the replicas {list(p.replicas)}"
    if leader not in members:
        return f"does not hold the leader {leader}"
    return None
