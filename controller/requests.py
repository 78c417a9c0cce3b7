"""The requests of a partition's life after creation and their answers, as plain values: ElectLeaders,
AlterPartition, DeleteTopics, CreatePartitions, IncrementalAlterConfigs, DescribeConfigs, AlterPartitionReassignments,
ListPartitionReassignments. Fields mirror Kafka's request and response schemas (snake_case); the gRPC service and
the CLI translate to and from these."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from controller.results import NO_ERROR, ApiError
from quorum.log.message import Uuid

# -- ElectLeaders -------------------------------------------------------------------------------------------------


class ElectionType(enum.IntEnum):
    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True)
class ElectionResult:
    topic: str
    partition: int
    error: ApiError = NO_ERROR


# -- AlterPartition -----------------------------------------------------------------------------------------------


class LeaderRecoveryState(enum.IntEnum):
    RECOVERED = 0
    RECOVERING = 1


@dataclass(frozen=True)
class AlterPartitionData:
    """One partition of an AlterPartition request: the leader's view (its epochs) and the ISR it wants."""

    partition_index: int
    leader_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker id, broker epoch); epoch -1: not checked
    partition_epoch: int
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED


@dataclass(frozen=True)
class AlterPartitionTopic:
    topic_id: Uuid
    partitions: tuple[AlterPartitionData, ...]


@dataclass(frozen=True)
class AlterPartitionResult:
    """The partition's state after the request (or only the error)."""

    topic_id: Uuid
    partition_index: int
    error: ApiError = NO_ERROR
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    leader_recovery_state: int = 0
    partition_epoch: int = -1


@dataclass(frozen=True)
class AlterPartitionResponse:
    error: ApiError  # request level: STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED
    partitions: tuple[AlterPartitionResult, ...] = ()


# -- DeleteTopics -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeleteTopicState:
    """One topic of a DeleteTopics request (v6): by name or by id, not both."""

    name: str | None = None
    topic_id: Uuid | None = None


@dataclass(frozen=True)
class DeleteTopicResult:
    name: str | None
    topic_id: Uuid | None
    error: ApiError = NO_ERROR


# -- CreatePartitions ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NewPartitions:
    """Kafka's CreatePartitionsTopic: ``count`` is the new total; ``assignments`` (one broker list per new
    partition) or None for the placer's choice."""

    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True)
class CreatePartitionsResult:
    name: str
    error: ApiError = NO_ERROR


# -- configs ------------------------------------------------------------------------------------------------------


class ConfigResourceType(enum.IntEnum):
    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4


class AlterConfigOp(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' ConfigSource ids."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# DescribeConfigs' ConfigType ids, by the type names ConfigEntry.config_type carries (0: unknown).
CONFIG_TYPE_IDS = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}


@dataclass(frozen=True)
class AlterableConfig:
    name: str
    op: int  # AlterConfigOp (an int so that unknown operations reach validation)
    value: str | None = None


@dataclass(frozen=True)
class AlterConfigsResource:
    resource_type: int  # ConfigResourceType
    resource_name: str  # a topic name; a broker id, or "" for the cluster-wide broker default
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True)
class ConfigResourceResult:
    resource_type: int
    resource_name: str
    error: ApiError = NO_ERROR


@dataclass(frozen=True)
class ConfigResource:
    """One resource of a DescribeConfigs request; ``keys`` None: every config."""

    resource_type: int
    resource_name: str
    keys: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None  # None for a sensitive value
    source: int
    read_only: bool = False
    is_sensitive: bool = False
    synonyms: tuple[ConfigSynonym, ...] = ()  # the value's sources, highest precedence first (the value's own first)
    config_type: str = "string"
    documentation: str | None = None


@dataclass(frozen=True)
class DescribeConfigsResult:
    resource_type: int
    resource_name: str
    error: ApiError = NO_ERROR
    configs: tuple[ConfigEntry, ...] = ()


# -- AlterPartitionReassignments / ListPartitionReassignments ---------------------------------------------------


@dataclass(frozen=True)
class ReassignablePartition:
    """One partition of an AlterPartitionReassignments request: the target replicas, or None to cancel."""

    partition_index: int
    replicas: tuple[int, ...] | None


@dataclass(frozen=True)
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...]


@dataclass(frozen=True)
class ReassignablePartitionResult:
    partition_index: int
    error: ApiError = NO_ERROR


@dataclass(frozen=True)
class ReassignableTopicResult:
    name: str
    partitions: tuple[ReassignablePartitionResult, ...]


@dataclass(frozen=True)
class OngoingReassignment:
    """A partition under reassignment: ``replicas`` is the union of the current and target replicas."""

    partition_index: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@dataclass(frozen=True)
class OngoingTopicReassignment:
    name: str
    partitions: tuple[OngoingReassignment, ...]
