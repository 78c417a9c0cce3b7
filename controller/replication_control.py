"""ReplicationControl: topics and partitions — CreateTopics with Kafka's validation order, codes and messages, and
the leader/ISR changes that follow brokers being fenced and unfenced.

``create_topics`` and the other generators read state and return records plus a response; :meth:`replay` is the
only code that changes state (Kafka's ReplicationControlManager).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from controller.cluster_control import ClusterControl
from controller.config_control import ConfigControl
from controller.configs import (
    TOPIC_RESOURCE,
    InvalidConfigError,
    check_min_insync_replicas,
    effective_topic_configs,
    parse_topic_configs,
)
from controller.elections import LeaderElections
from controller.partition_change import PartitionRegistration, merge
from controller.partition_replay import PartitionRecordReplay, Shared
from controller.placement import PlacementError, ReplicaPlacer, UsableBroker
from controller.reassignment import Reassignments, target_replicas
from controller.records import ConfigRecord, PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord
from controller.requests import CreatePartitionsResult, DeleteTopicResult, DeleteTopicState, NewPartitions
from controller.results import MAX_RECORDS_PER_USER_OP, NO_ERROR, ApiError, ControllerResult
from controller.timeline import Timeline, TimelineDict
from controller.topic_names import shown, validate_topic_name
from quorum.errors import Errors, KafkaError
from quorum.log.message import METADATA_TOPIC_ID, ZERO_UUID, ApiMessage, Uuid

METADATA_TOPIC = "__cluster_metadata"


# -- requests and responses ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewTopic:
    """One topic of a CreateTopics request (Kafka's CreatableTopic)."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()  # (partition index, broker ids)
    configs: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class TopicResult:
    name: str
    error: ApiError = NO_ERROR
    topic_id: Uuid | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[tuple[str, str, int], ...] = ()  # (name, value, config source)


class TopicInfo(NamedTuple):
    name: str
    id: Uuid
    created_offset: int = -1


@dataclass(frozen=True)
class _BrokerView:
    version: int
    registered: frozenset[int]
    active: frozenset[int]
    usable: list[UsableBroker]


@dataclass
class ReplicationSettings:
    num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    delete_topic_enable: bool = True  # delete.topic.enable


def _unify(name: str) -> str:
    return name.replace(".", "_")


class ReplicationControl:
    def __init__(
        self,
        timeline: Timeline,
        cluster: ClusterControl,
        placer: ReplicaPlacer,
        settings: ReplicationSettings,
        configs: ConfigControl | None = None,
    ) -> None:
        self.cluster = cluster
        self.placer = placer
        self.settings = settings
        self.topics: TimelineDict[Uuid, TopicInfo] = TimelineDict(timeline)
        self.topics_by_name: TimelineDict[str, Uuid] = TimelineDict(timeline)
        self.partitions: TimelineDict[tuple[Uuid, int], PartitionRegistration] = TimelineDict(timeline)
        # Topic and broker configs: replayed here with the topics they belong to, kept by ConfigControl.
        self.config_control = configs or ConfigControl(
            timeline, topic_exists=self.topics_by_name.__contains__, broker_registered=cluster.brokers.__contains__
        )
        self.configs = self.config_control.configs
        self._colliding: TimelineDict[str, tuple[str, ...]] = TimelineDict(timeline)  # unified name -> names
        self._broker_view: _BrokerView | None = None
        self.elections = LeaderElections(self)
        self.reassignments = Reassignments(timeline, self)
        self.shared = Shared()  # one object per distinct replica list and registration, for every replay path
        self.partition_records = PartitionRecordReplay(self)

    def topic_config(self, topic: str, name: str) -> Any:
        """The topic's effective value of ``name`` (topic, then broker levels, then the default)."""
        return self.config_control.topic_config(topic, name)

    # -- CreateTopics ----------------------------------------------------------------------------------------

    def partition_count(self, topic_id: Uuid, committed: bool = False) -> int:
        """Partitions are numbered 0..n-1 without gaps: count until the first missing one."""
        parts = self.partitions.committed() if committed else self.partitions
        n = 0
        while (topic_id, n) in parts:
            n += 1
        return n

    def create_topics(self, topics: list[NewTopic], validate_only: bool) -> ControllerResult[list[TopicResult]]:
        """Kafka's order: names, existence, null configs, config validation, then each topic's shape and placement.
        Every topic gets its own result; the records of all that succeed form one atomic batch."""
        errors: dict[str, ApiError] = {}
        for t in topics:
            try:
                validate_topic_name(t.name)
            except KafkaError as e:
                errors[t.name] = ApiError.of(e)
            if any(c in t.name for c in "._") and (others := self._colliding.get(_unify(t.name))):
                errors[t.name] = ApiError(
                    Errors.INVALID_TOPIC_EXCEPTION, f"Topic '{t.name}' collides with existing topic: {others[0]}"
                )
        for t in topics:
            # Unconditional, as Kafka's: an existing 'a.b' also "collides" with itself, and must answer 36, not 17.
            if t.name in self.topics_by_name:
                errors[t.name] = ApiError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists.")
        for t in topics:
            nulls = [name for name, value in t.configs if value is None]
            if t.name not in errors and nulls:
                errors[t.name] = ApiError(
                    Errors.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}"
                )
        records: list[ApiMessage] = []
        results: dict[str, TopicResult] = {}
        brokers = self._brokers()
        for t in topics:
            if t.name in errors:
                continue
            try:
                results[t.name] = self._create_topic(t, records, brokers)
            except KafkaError as e:
                errors[t.name] = ApiError.of(e)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            # Kafka fails the whole operation (BoundedListTooLongException -> POLICY_VIOLATION).
            excessive = ApiError(Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
            return ControllerResult([], [TopicResult(t.name, excessive) for t in topics])
        response = [results.get(t.name) or TopicResult(t.name, errors[t.name]) for t in topics]
        return ControllerResult([] if validate_only else records, response)

    def _create_topic(self, t: NewTopic, records: list[ApiMessage], brokers: _BrokerView) -> TopicResult:
        configs = {name: value for name, value in t.configs if value is not None}
        try:
            parsed = parse_topic_configs(configs)  # Kafka checks configs before the topic's shape
        except InvalidConfigError as e:
            raise KafkaError(str(e), Errors.INVALID_CONFIG) from None
        if t.assignments:
            if t.replication_factor != -1:
                raise KafkaError(
                    "A manual partition assignment was specified, but replication factor was not set to -1.",
                    Errors.INVALID_REQUEST,
                )
            if t.num_partitions != -1:
                raise KafkaError(
                    "A manual partition assignment was specified, but numPartitions was not set to -1.",
                    Errors.INVALID_REQUEST,
                )
            assignment = self._manual_assignment(t.assignments, brokers)
            replication_factor = len(assignment[0])
        elif t.replication_factor < -1 or t.replication_factor == 0:
            raise KafkaError(
                "Replication factor must be larger than 0, or -1 to use the default value.",
                Errors.INVALID_REPLICATION_FACTOR,
            )
        elif t.num_partitions < -1 or t.num_partitions == 0:
            raise KafkaError(
                "Number of partitions was set to an invalid non-positive value.", Errors.INVALID_PARTITIONS
            )
        else:
            partitions = self.settings.num_partitions if t.num_partitions == -1 else t.num_partitions
            replication_factor = (
                self.settings.default_replication_factor if t.replication_factor == -1 else t.replication_factor
            )
            try:
                assignment = self.placer.place(partitions, replication_factor, brokers.usable)
            except PlacementError as e:
                raise KafkaError(
                    f"Unable to replicate the partition {replication_factor} time(s): {e}",
                    Errors.INVALID_REPLICATION_FACTOR,
                ) from None
        try:
            check_min_insync_replicas(parsed, replication_factor)
        except InvalidConfigError as e:
            raise KafkaError(str(e), Errors.INVALID_CONFIG) from None
        new_partitions = []
        for index, replicas in enumerate(assignment):
            isr = [b for b in replicas if b in brokers.active]
            if not isr:
                if t.assignments:
                    raise KafkaError(
                        f"All brokers specified in the manual partition assignment for partition {index} are fenced "
                        "or in controlled shutdown.",
                        Errors.INVALID_REPLICA_ASSIGNMENT,
                    )
                raise KafkaError(
                    f"Unable to replicate the partition {replication_factor} time(s): All brokers are currently "
                    "fenced or in controlled shutdown.",
                    Errors.INVALID_REPLICATION_FACTOR,
                )
            new_partitions.append((replicas, isr))
        topic_id = Uuid.random()
        records.append(TopicRecord(name=t.name, topic_id=topic_id))
        records.extend(
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=t.name, name=name, value=value)
            for name, value in configs.items()
        )
        records.extend(
            _partition_record(topic_id, index, replicas, isr) for index, (replicas, isr) in enumerate(new_partitions)
        )
        return TopicResult(
            t.name,
            NO_ERROR,
            topic_id,
            len(new_partitions),
            replication_factor,
            tuple(effective_topic_configs(configs)),
        )

    def _manual_assignment(
        self, assignments: tuple[tuple[int, tuple[int, ...]], ...], view: _BrokerView
    ) -> list[tuple[int, ...]]:
        by_index: dict[int, tuple[int, ...]] = {}
        size: int | None = None
        for index, replicas in assignments:
            if index in by_index:
                raise KafkaError(
                    f"Found multiple manual partition assignments for partition {index}",
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                )
            by_index[index] = self._check_manual(index, replicas, size, view)
            size = len(replicas)
        for i in range(len(by_index)):
            if i not in by_index:
                raise KafkaError(
                    "partitions should be a consecutive 0-based integer sequence", Errors.INVALID_REPLICA_ASSIGNMENT
                )
        return [by_index[i] for i in range(len(by_index))]

    def check_assignment(self, replicas: Sequence[int], size: int | None = None) -> tuple[int, ...]:
        """Kafka's validateManualPartitionAssignment: not empty, every broker registered (fenced ones too), none
        twice, and ``size`` replicas when given."""
        return self._check_registered(replicas, size, self._brokers())

    @classmethod
    def _check_manual(cls, index: int, replicas: Sequence[int], size: int | None, view: _BrokerView) -> tuple[int, ...]:
        """A new partition's manual assignment: as :meth:`check_assignment`, and some replica must be active."""
        cls._check_registered(replicas, size, view)
        if not any(b in view.active for b in replicas):
            raise KafkaError(
                f"All brokers specified in the manual partition assignment for partition {index} are fenced or "
                "in controlled shutdown.",
                Errors.INVALID_REPLICA_ASSIGNMENT,
            )
        return tuple(replicas)

    @staticmethod
    def _check_registered(replicas: Sequence[int], size: int | None, view: _BrokerView) -> tuple[int, ...]:
        if not replicas:
            raise KafkaError(
                "The manual partition assignment includes an empty replica list.", Errors.INVALID_REPLICA_ASSIGNMENT
            )
        previous = None
        for broker in sorted(replicas):
            if broker not in view.registered:
                raise KafkaError(
                    f"The manual partition assignment includes broker {broker}, but no such broker is registered.",
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                )
            if broker == previous:
                raise KafkaError(
                    f"The manual partition assignment includes the broker {broker} more than once.",
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                )
            previous = broker
        if size is not None and len(replicas) != size:
            raise KafkaError(
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this "
                f"is not consistent with previous partitions, which have {size} replica(s).",
                Errors.INVALID_REPLICA_ASSIGNMENT,
            )
        return tuple(replicas)

    def _brokers(self) -> _BrokerView:
        """Registered, active and usable brokers, derived once per change of the broker registry."""
        registry = self.cluster.brokers
        if self._broker_view is None or self._broker_view.version != registry.version:
            regs = sorted(registry.values(), key=lambda b: b.id)
            self._broker_view = _BrokerView(
                registry.version,
                frozenset(b.id for b in regs),
                frozenset(b.id for b in regs if b.active),
                # Kafka's usableBrokers: registered and not in controlled shutdown (fenced ones too: they may follow)
                [UsableBroker(b.id, b.rack, b.fenced) for b in regs if not b.in_controlled_shutdown],
            )
        return self._broker_view

    # -- DeleteTopics ----------------------------------------------------------------------------------------

    def delete_topics(self, topics: list[DeleteTopicState]) -> ControllerResult[list[DeleteTopicResult]]:
        """Kafka's checks in Kafka's order (ControllerApis, then the controller): whole-request refusal when
        deletion is disabled; per topic, name xor id, duplicates (every copy refused), unknown ids and names; one
        RemoveTopicRecord per topic, all in one atomic batch. Replaying it removes partitions and configs too."""
        if not self.settings.delete_topic_enable:
            raise KafkaError("Topic deletion is disabled.", Errors.TOPIC_DELETION_DISABLED)
        names = [t.name for t in topics if t.name is not None]
        ids = [t.topic_id for t in topics if t.topic_id is not None]
        twice_names = {n for n in names if names.count(n) > 1}
        twice_ids = {i for i in ids if ids.count(i) > 1}
        results: list[DeleteTopicResult] = []
        records: list[ApiMessage] = []
        chosen: set[Uuid] = set()
        for t in topics:
            error = NO_ERROR
            topic_id = t.topic_id
            name = t.name
            if name is None and topic_id is None:
                error = ApiError(Errors.INVALID_REQUEST, "Neither topic name nor id were specified.")
            elif name is not None and topic_id is not None:
                error = ApiError(Errors.INVALID_REQUEST, "You may not specify both topic name and topic id.")
            elif name in twice_names:
                error = ApiError(Errors.INVALID_REQUEST, f"Duplicate topic name: {shown(name)}")
            elif topic_id in twice_ids:
                error = ApiError(Errors.INVALID_REQUEST, f"Duplicate topic id: {topic_id}")
            elif topic_id is not None:
                if topic_id == ZERO_UUID:
                    error = ApiError(Errors.INVALID_REQUEST, f"topic_id: {topic_id} is not a valid topic id")
                elif (info := self.topics.get(topic_id)) is None:
                    error = ApiError(Errors.UNKNOWN_TOPIC_ID, f"topic_id: no topic has id {topic_id}")
                else:
                    name = info.name
            else:
                topic_id = self.topics_by_name.get(name)
                if topic_id is None:
                    error = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{shown(name)}' does not exist.")
            if not error.failed and topic_id in chosen:
                error = ApiError(
                    Errors.INVALID_REQUEST,
                    f"Topic '{name}' was named both by its name and by its id {topic_id}.",
                )
            if not error.failed:
                chosen.add(topic_id)  # type: ignore[arg-type]
                records.append(RemoveTopicRecord(topic_id=topic_id))
            results.append(DeleteTopicResult(name, topic_id if not error.failed or t.topic_id else None, error))
        if len(records) > MAX_RECORDS_PER_USER_OP:
            excessive = ApiError(Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
            return ControllerResult([], [DeleteTopicResult(r.name, r.topic_id, excessive) for r in results])
        return ControllerResult(records, results)

    # -- CreatePartitions ------------------------------------------------------------------------------------

    def create_partitions(
        self, topics: list[NewPartitions], validate_only: bool
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        """Grow topics to ``count`` partitions each (others proceed when one fails); new partitions keep the
        topic's replication factor and are placed as CreateTopics places them, or manually."""
        seen: dict[str, int] = {}
        for t in topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        records: list[ApiMessage] = []
        results: list[CreatePartitionsResult] = []
        brokers = self._brokers()
        for t in topics:
            if seen[t.name] > 1:
                duplicate = ApiError(Errors.INVALID_REQUEST, "Duplicate topic name.")
                results.append(CreatePartitionsResult(t.name, duplicate))
                continue
            mine: list[ApiMessage] = []
            try:
                self._create_partitions(t, mine, brokers)
            except KafkaError as e:
                results.append(CreatePartitionsResult(t.name, ApiError.of(e)))
                continue
            if len(records) + len(mine) > MAX_RECORDS_PER_USER_OP:
                excessive = ApiError(Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
                results.append(CreatePartitionsResult(t.name, excessive))
                continue
            records += mine
            results.append(CreatePartitionsResult(t.name))
        return ControllerResult([] if validate_only else records, results)

    def _create_partitions(self, t: NewPartitions, records: list[ApiMessage], brokers: _BrokerView) -> None:
        topic_id = self.topics_by_name.get(t.name)
        if topic_id is None:
            raise KafkaError(f"Topic '{shown(t.name)}' does not exist.", Errors.UNKNOWN_TOPIC_OR_PARTITION)
        current = self.partition_count(topic_id)
        if t.count == current:
            raise KafkaError(f"Topic already has {current} partition(s).", Errors.INVALID_PARTITIONS)
        if t.count < current:
            raise KafkaError(
                f"The topic {t.name} currently has {current} partition(s); {t.count} would not be an increase.",
                Errors.INVALID_PARTITIONS,
            )
        added = t.count - current
        # The target's replication factor: Kafka counts a moving first partition's replicas, additions included.
        replication_factor = len(target_replicas(self.partitions[(topic_id, 0)]))
        if t.assignments is not None:
            if len(t.assignments) != added:
                raise KafkaError(
                    f"Attempted to add {added} additional partition(s), but only {len(t.assignments)} assignment(s) "
                    "were specified.",
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                )
            assignment = [
                self._check_manual(current + i, replicas, replication_factor, brokers)
                for i, replicas in enumerate(t.assignments)
            ]
        else:
            try:
                assignment = [tuple(r) for r in self.placer.place(added, replication_factor, brokers.usable)]
            except PlacementError as e:
                raise KafkaError(
                    f"Unable to replicate the partition {replication_factor} time(s): {e}",
                    Errors.INVALID_REPLICATION_FACTOR,
                ) from None
        for i, replicas in enumerate(assignment):
            isr = [b for b in replicas if b in brokers.active]
            if not isr:
                raise KafkaError(
                    f"Unable to replicate the partition {replication_factor} time(s): All brokers are currently "
                    "fenced or in controlled shutdown.",
                    Errors.INVALID_REPLICATION_FACTOR,
                )
            records.append(_partition_record(topic_id, current + i, replicas, isr))

    # -- replay ------------------------------------------------------------------------------------------------

    def replay(self, record: ApiMessage, offset: int) -> None:
        if isinstance(record, TopicRecord):
            self.topics[record.topic_id] = TopicInfo(record.name, record.topic_id, offset)
            self.topics_by_name[record.name] = record.topic_id
            if any(c in record.name for c in "._"):
                key = _unify(record.name)
                self._colliding[key] = (*self._colliding.get(key, ()), record.name)
        elif isinstance(record, PartitionRecord):
            topic = self.topics.get(record.topic_id)
            if topic is None:
                raise KafkaError(f"PartitionRecord at offset {offset} names unknown topic id {record.topic_id}")
            key = (topic.id, record.partition_id)  # the topic's id object: not one copy per partition
            before = self.partitions.get(key)
            self.partitions[key] = after = self.shared.registration(
                PartitionRegistration(
                    replicas=tuple(record.replicas),
                    isr=tuple(record.isr),
                    leader=record.leader,
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    removing=tuple(record.removing_replicas),
                    adding=tuple(record.adding_replicas),
                    leader_recovery_state=record.leader_recovery_state,
                    directories=tuple(record.directories),
                )
            )
            self.reassignments.track(topic.id, record.partition_id, before, after)
        elif isinstance(record, PartitionChangeRecord):
            key = (record.topic_id, record.partition_id)
            p = self.partitions.get(key)
            if p is None:
                raise KafkaError(f"PartitionChangeRecord at offset {offset} names unknown partition {key}")
            self.partitions[key] = after = self.shared.registration(merge(p, record))
            self.reassignments.track(record.topic_id, record.partition_id, p, after)
        elif isinstance(record, ConfigRecord):
            self.config_control.replay(record)
        elif isinstance(record, RemoveTopicRecord):
            topic = self.topics.get(record.topic_id)
            if topic is None:
                raise KafkaError(f"RemoveTopicRecord at offset {offset} names unknown topic id {record.topic_id}")
            for i in range(self.partition_count(record.topic_id)):
                del self.partitions[(record.topic_id, i)]
            del self.topics[record.topic_id]
            del self.topics_by_name[topic.name]
            self.reassignments.forget_topic(record.topic_id)
            self.config_control.delete_topic_configs(topic.name)
            key = _unify(topic.name)
            rest = tuple(n for n in self._colliding.get(key, ()) if n != topic.name)
            if rest:
                self._colliding[key] = rest
            elif key in self._colliding:
                del self._colliding[key]


def _partition_record(topic_id: Uuid, index: int, replicas: Sequence[int], isr: list[int]) -> PartitionRecord:
    """A new partition: led by the first live replica, epochs 0, recovered."""
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=list(replicas),
        isr=isr,
        leader=isr[0],
        leader_epoch=0,
        partition_epoch=0,
        directories=[METADATA_TOPIC_ID] * len(replicas),  # Kafka's DirectoryId.UNASSIGNED
    )
