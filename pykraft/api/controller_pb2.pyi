from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ControllerHint(_message.Message):
    __slots__ = ("controller_id", "controller_endpoint")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_endpoint: str
    def __init__(self, controller_id: _Optional[int] = ..., controller_endpoint: _Optional[str] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    class ReplicaAssignment(_message.Message):
        __slots__ = ("partition_index", "broker_ids")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        broker_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition_index: _Optional[int] = ..., broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    class TopicConfig(_message.Message):
        __slots__ = ("name", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class Topic(_message.Message):
        __slots__ = ("name", "num_partitions", "replication_factor", "assignments", "configs")
        NAME_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        name: str
        num_partitions: int
        replication_factor: int
        assignments: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.ReplicaAssignment]
        configs: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.TopicConfig]
        def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[CreateTopicsRequest.ReplicaAssignment, _Mapping]]] = ..., configs: _Optional[_Iterable[_Union[CreateTopicsRequest.TopicConfig, _Mapping]]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsRequest.Topic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicsRequest.Topic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: bool = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "topics", "throttle_time_ms")
    class Config(_message.Message):
        __slots__ = ("name", "value", "read_only", "config_source", "is_sensitive")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        READ_ONLY_FIELD_NUMBER: _ClassVar[int]
        CONFIG_SOURCE_FIELD_NUMBER: _ClassVar[int]
        IS_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        read_only: bool
        config_source: int
        is_sensitive: bool
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., read_only: bool = ..., config_source: _Optional[int] = ..., is_sensitive: bool = ...) -> None: ...
    class TopicResult(_message.Message):
        __slots__ = ("name", "topic_id", "error_code", "error_message", "num_partitions", "replication_factor", "configs", "topic_config_error_code")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        TOPIC_CONFIG_ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        name: str
        topic_id: str
        error_code: int
        error_message: str
        num_partitions: int
        replication_factor: int
        configs: _containers.RepeatedCompositeFieldContainer[CreateTopicsResponse.Config]
        topic_config_error_code: int
        def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Iterable[_Union[CreateTopicsResponse.Config, _Mapping]]] = ..., topic_config_error_code: _Optional[int] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicsResponse.TopicResult]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[CreateTopicsResponse.TopicResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class DescribeTopicsRequest(_message.Message):
    __slots__ = ("names", "timeout_ms")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class PartitionDescription(_message.Message):
    __slots__ = ("partition_index", "leader_id", "leader_epoch", "partition_epoch", "replicas", "isr", "offline_replicas", "leader_recovery_state", "adding_replicas", "removing_replicas")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    offline_replicas: _containers.RepeatedScalarFieldContainer[int]
    leader_recovery_state: int
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition_index: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., partition_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ..., offline_replicas: _Optional[_Iterable[int]] = ..., leader_recovery_state: _Optional[int] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicDescription(_message.Message):
    __slots__ = ("name", "topic_id", "error_code", "error_message", "partitions", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    error_code: int
    error_message: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionDescription]
    configs: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionDescription, _Mapping]]] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class DescribeTopicsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "topics")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[TopicDescription]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicDescription, _Mapping]]] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ("timeout_ms",)
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    timeout_ms: int
    def __init__(self, timeout_ms: _Optional[int] = ...) -> None: ...

class Listener(_message.Message):
    __slots__ = ("name", "host", "port", "security_protocol")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    SECURITY_PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    host: str
    port: int
    security_protocol: int
    def __init__(self, name: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., security_protocol: _Optional[int] = ...) -> None: ...

class BrokerDescription(_message.Message):
    __slots__ = ("broker_id", "rack", "fenced", "in_controlled_shutdown", "broker_epoch", "incarnation_id", "listeners", "last_heartbeat_age_ms")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    rack: str
    fenced: bool
    in_controlled_shutdown: bool
    broker_epoch: int
    incarnation_id: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    last_heartbeat_age_ms: int
    def __init__(self, broker_id: _Optional[int] = ..., rack: _Optional[str] = ..., fenced: bool = ..., in_controlled_shutdown: bool = ..., broker_epoch: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ..., last_heartbeat_age_ms: _Optional[int] = ...) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "cluster_id", "controller_id", "brokers")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    cluster_id: str
    controller_id: int
    brokers: _containers.RepeatedCompositeFieldContainer[BrokerDescription]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., brokers: _Optional[_Iterable[_Union[BrokerDescription, _Mapping]]] = ...) -> None: ...

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("broker_id", "incarnation_id", "rack", "listeners", "timeout_ms")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_ID_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    LISTENERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    incarnation_id: str
    rack: str
    listeners: _containers.RepeatedCompositeFieldContainer[Listener]
    timeout_ms: int
    def __init__(self, broker_id: _Optional[int] = ..., incarnation_id: _Optional[str] = ..., rack: _Optional[str] = ..., listeners: _Optional[_Iterable[_Union[Listener, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "broker_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    broker_epoch: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "current_metadata_offset", "want_fence", "want_shutdown", "timeout_ms")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    WANT_FENCE_FIELD_NUMBER: _ClassVar[int]
    WANT_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shutdown: bool
    timeout_ms: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., current_metadata_offset: _Optional[int] = ..., want_fence: bool = ..., want_shutdown: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "is_caught_up", "is_fenced", "in_controlled_shutdown", "should_shut_down", "metadata_offset")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    IS_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    IS_FENCED_FIELD_NUMBER: _ClassVar[int]
    IN_CONTROLLED_SHUTDOWN_FIELD_NUMBER: _ClassVar[int]
    SHOULD_SHUT_DOWN_FIELD_NUMBER: _ClassVar[int]
    METADATA_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool
    metadata_offset: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., is_caught_up: bool = ..., is_fenced: bool = ..., in_controlled_shutdown: bool = ..., should_shut_down: bool = ..., metadata_offset: _Optional[int] = ...) -> None: ...

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topics", "timeout_ms")
    class BrokerState(_message.Message):
        __slots__ = ("broker_id", "broker_epoch")
        BROKER_ID_FIELD_NUMBER: _ClassVar[int]
        BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        broker_id: int
        broker_epoch: int
        def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "leader_epoch", "new_isr_with_epochs", "leader_recovery_state", "partition_epoch")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        NEW_ISR_WITH_EPOCHS_FIELD_NUMBER: _ClassVar[int]
        LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        leader_epoch: int
        new_isr_with_epochs: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.BrokerState]
        leader_recovery_state: int
        partition_epoch: int
        def __init__(self, partition_index: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., new_isr_with_epochs: _Optional[_Iterable[_Union[AlterPartitionRequest.BrokerState, _Mapping]]] = ..., leader_recovery_state: _Optional[int] = ..., partition_epoch: _Optional[int] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.PartitionData]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionRequest.PartitionData, _Mapping]]] = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionRequest.TopicData]
    timeout_ms: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionRequest.TopicData, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "topics")
    class PartitionData(_message.Message):
        __slots__ = ("partition_index", "error_code", "error_message", "leader_id", "leader_epoch", "isr", "leader_recovery_state", "partition_epoch")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        LEADER_ID_FIELD_NUMBER: _ClassVar[int]
        LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        ISR_FIELD_NUMBER: _ClassVar[int]
        LEADER_RECOVERY_STATE_FIELD_NUMBER: _ClassVar[int]
        PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        error_message: str
        leader_id: int
        leader_epoch: int
        isr: _containers.RepeatedScalarFieldContainer[int]
        leader_recovery_state: int
        partition_epoch: int
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., leader_recovery_state: _Optional[int] = ..., partition_epoch: _Optional[int] = ...) -> None: ...
    class TopicData(_message.Message):
        __slots__ = ("topic_id", "partitions")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic_id: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionResponse.PartitionData]
        def __init__(self, topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionResponse.PartitionData, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionResponse.TopicData]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionResponse.TopicData, _Mapping]]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "topic_partitions", "timeout_ms")
    class TopicPartitions(_message.Message):
        __slots__ = ("topic", "partitions")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partitions: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...
    class TopicPartitionsList(_message.Message):
        __slots__ = ("topics",)
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        topics: _containers.RepeatedCompositeFieldContainer[ElectLeadersRequest.TopicPartitions]
        def __init__(self, topics: _Optional[_Iterable[_Union[ElectLeadersRequest.TopicPartitions, _Mapping]]] = ...) -> None: ...
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    election_type: int
    topic_partitions: ElectLeadersRequest.TopicPartitionsList
    timeout_ms: int
    def __init__(self, election_type: _Optional[int] = ..., topic_partitions: _Optional[_Union[ElectLeadersRequest.TopicPartitionsList, _Mapping]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "replica_election_results")
    class PartitionResult(_message.Message):
        __slots__ = ("partition_id", "error_code", "error_message")
        PARTITION_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        partition_id: int
        error_code: int
        error_message: str
        def __init__(self, partition_id: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    class ReplicaElectionResult(_message.Message):
        __slots__ = ("topic", "partition_result")
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_RESULT_FIELD_NUMBER: _ClassVar[int]
        topic: str
        partition_result: _containers.RepeatedCompositeFieldContainer[ElectLeadersResponse.PartitionResult]
        def __init__(self, topic: _Optional[str] = ..., partition_result: _Optional[_Iterable[_Union[ElectLeadersResponse.PartitionResult, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ELECTION_RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    replica_election_results: _containers.RepeatedCompositeFieldContainer[ElectLeadersResponse.ReplicaElectionResult]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., replica_election_results: _Optional[_Iterable[_Union[ElectLeadersResponse.ReplicaElectionResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms")
    class DeleteTopicState(_message.Message):
        __slots__ = ("name", "topic_id")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        name: str
        topic_id: str
        def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteTopicsRequest.DeleteTopicState]
    timeout_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteTopicsRequest.DeleteTopicState, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "responses", "throttle_time_ms")
    class DeletableTopicResult(_message.Message):
        __slots__ = ("name", "topic_id", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        topic_id: str
        error_code: int
        error_message: str
        def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    responses: _containers.RepeatedCompositeFieldContainer[DeleteTopicsResponse.DeletableTopicResult]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., responses: _Optional[_Iterable[_Union[DeleteTopicsResponse.DeletableTopicResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    class CreatePartitionsAssignment(_message.Message):
        __slots__ = ("broker_ids",)
        BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
        broker_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    class AssignmentList(_message.Message):
        __slots__ = ("assignments",)
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        assignments: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.CreatePartitionsAssignment]
        def __init__(self, assignments: _Optional[_Iterable[_Union[CreatePartitionsRequest.CreatePartitionsAssignment, _Mapping]]] = ...) -> None: ...
    class CreatePartitionsTopic(_message.Message):
        __slots__ = ("name", "count", "assignments")
        NAME_FIELD_NUMBER: _ClassVar[int]
        COUNT_FIELD_NUMBER: _ClassVar[int]
        ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
        name: str
        count: int
        assignments: CreatePartitionsRequest.AssignmentList
        def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Union[CreatePartitionsRequest.AssignmentList, _Mapping]] = ...) -> None: ...
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsRequest.CreatePartitionsTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsRequest.CreatePartitionsTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: bool = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "results", "throttle_time_ms")
    class CreatePartitionsTopicResult(_message.Message):
        __slots__ = ("name", "error_code", "error_message")
        NAME_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        name: str
        error_code: int
        error_message: str
        def __init__(self, name: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    results: _containers.RepeatedCompositeFieldContainer[CreatePartitionsResponse.CreatePartitionsTopicResult]
    throttle_time_ms: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., results: _Optional[_Iterable[_Union[CreatePartitionsResponse.CreatePartitionsTopicResult, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class IncrementalAlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only", "timeout_ms")
    class AlterableConfig(_message.Message):
        __slots__ = ("name", "config_operation", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIG_OPERATION_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        config_operation: int
        value: str
        def __init__(self, name: _Optional[str] = ..., config_operation: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    class AlterConfigsResource(_message.Message):
        __slots__ = ("resource_type", "resource_name", "configs")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        configs: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.AlterableConfig]
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.AlterableConfig, _Mapping]]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    timeout_ms: int
    def __init__(self, resources: _Optional[_Iterable[_Union[IncrementalAlterConfigsRequest.AlterConfigsResource, _Mapping]]] = ..., validate_only: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class IncrementalAlterConfigsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "responses")
    class AlterConfigsResourceResponse(_message.Message):
        __slots__ = ("error_code", "error_message", "resource_type", "resource_name")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        resource_type: int
        resource_name: str
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    responses: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., responses: _Optional[_Iterable[_Union[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, _Mapping]]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only", "timeout_ms")
    class AlterableConfig(_message.Message):
        __slots__ = ("name", "value")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AlterConfigsResource(_message.Message):
        __slots__ = ("resource_type", "resource_name", "configs")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        configs: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.AlterableConfig]
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[AlterConfigsRequest.AlterableConfig, _Mapping]]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[AlterConfigsRequest.AlterConfigsResource]
    validate_only: bool
    timeout_ms: int
    def __init__(self, resources: _Optional[_Iterable[_Union[AlterConfigsRequest.AlterConfigsResource, _Mapping]]] = ..., validate_only: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "responses")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    responses: _containers.RepeatedCompositeFieldContainer[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., responses: _Optional[_Iterable[_Union[IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, _Mapping]]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources", "include_synonyms", "include_documentation", "timeout_ms")
    class ConfigurationKeys(_message.Message):
        __slots__ = ("keys",)
        KEYS_FIELD_NUMBER: _ClassVar[int]
        keys: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, keys: _Optional[_Iterable[str]] = ...) -> None: ...
    class DescribeConfigsResource(_message.Message):
        __slots__ = ("resource_type", "resource_name", "configuration_keys")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGURATION_KEYS_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        configuration_keys: DescribeConfigsRequest.ConfigurationKeys
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configuration_keys: _Optional[_Union[DescribeConfigsRequest.ConfigurationKeys, _Mapping]] = ...) -> None: ...
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SYNONYMS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[DescribeConfigsRequest.DescribeConfigsResource]
    include_synonyms: bool
    include_documentation: bool
    timeout_ms: int
    def __init__(self, resources: _Optional[_Iterable[_Union[DescribeConfigsRequest.DescribeConfigsResource, _Mapping]]] = ..., include_synonyms: bool = ..., include_documentation: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "results")
    class DescribeConfigsSynonym(_message.Message):
        __slots__ = ("name", "value", "source")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        SOURCE_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        source: int
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., source: _Optional[int] = ...) -> None: ...
    class DescribeConfigsResourceResult(_message.Message):
        __slots__ = ("name", "value", "read_only", "config_source", "is_sensitive", "synonyms", "config_type", "documentation")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        READ_ONLY_FIELD_NUMBER: _ClassVar[int]
        CONFIG_SOURCE_FIELD_NUMBER: _ClassVar[int]
        IS_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
        SYNONYMS_FIELD_NUMBER: _ClassVar[int]
        CONFIG_TYPE_FIELD_NUMBER: _ClassVar[int]
        DOCUMENTATION_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        read_only: bool
        config_source: int
        is_sensitive: bool
        synonyms: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.DescribeConfigsSynonym]
        config_type: int
        documentation: str
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., read_only: bool = ..., config_source: _Optional[int] = ..., is_sensitive: bool = ..., synonyms: _Optional[_Iterable[_Union[DescribeConfigsResponse.DescribeConfigsSynonym, _Mapping]]] = ..., config_type: _Optional[int] = ..., documentation: _Optional[str] = ...) -> None: ...
    class DescribeConfigsResult(_message.Message):
        __slots__ = ("error_code", "error_message", "resource_type", "resource_name", "configs")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        CONFIGS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        resource_type: int
        resource_name: str
        configs: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.DescribeConfigsResourceResult]
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[DescribeConfigsResponse.DescribeConfigsResourceResult, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResponse.DescribeConfigsResult]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., results: _Optional[_Iterable[_Union[DescribeConfigsResponse.DescribeConfigsResult, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("timeout_ms", "topics")
    class ReplicaList(_message.Message):
        __slots__ = ("broker_ids",)
        BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
        broker_ids: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...
    class ReassignablePartition(_message.Message):
        __slots__ = ("partition_index", "replicas")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        replicas: AlterPartitionReassignmentsRequest.ReplicaList
        def __init__(self, partition_index: _Optional[int] = ..., replicas: _Optional[_Union[AlterPartitionReassignmentsRequest.ReplicaList, _Mapping]] = ...) -> None: ...
    class ReassignableTopic(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.ReassignablePartition]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.ReassignablePartition, _Mapping]]] = ...) -> None: ...
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    timeout_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsRequest.ReassignableTopic]
    def __init__(self, timeout_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[AlterPartitionReassignmentsRequest.ReassignableTopic, _Mapping]]] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "responses")
    class ReassignablePartitionResponse(_message.Message):
        __slots__ = ("partition_index", "error_code", "error_message")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        error_code: int
        error_message: str
        def __init__(self, partition_index: _Optional[int] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    class ReassignableTopicResponse(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[AlterPartitionReassignmentsResponse.ReassignablePartitionResponse, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    responses: _containers.RepeatedCompositeFieldContainer[AlterPartitionReassignmentsResponse.ReassignableTopicResponse]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., responses: _Optional[_Iterable[_Union[AlterPartitionReassignmentsResponse.ReassignableTopicResponse, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("timeout_ms", "topics")
    class ListPartitionReassignmentsTopics(_message.Message):
        __slots__ = ("name", "partition_indexes")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITION_INDEXES_FIELD_NUMBER: _ClassVar[int]
        name: str
        partition_indexes: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, name: _Optional[str] = ..., partition_indexes: _Optional[_Iterable[int]] = ...) -> None: ...
    class TopicList(_message.Message):
        __slots__ = ("topics",)
        TOPICS_FIELD_NUMBER: _ClassVar[int]
        topics: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics]
        def __init__(self, topics: _Optional[_Iterable[_Union[ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics, _Mapping]]] = ...) -> None: ...
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    timeout_ms: int
    topics: ListPartitionReassignmentsRequest.TopicList
    def __init__(self, timeout_ms: _Optional[int] = ..., topics: _Optional[_Union[ListPartitionReassignmentsRequest.TopicList, _Mapping]] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "topics")
    class OngoingPartitionReassignment(_message.Message):
        __slots__ = ("partition_index", "replicas", "adding_replicas", "removing_replicas")
        PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
        REPLICAS_FIELD_NUMBER: _ClassVar[int]
        ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
        partition_index: int
        replicas: _containers.RepeatedScalarFieldContainer[int]
        adding_replicas: _containers.RepeatedScalarFieldContainer[int]
        removing_replicas: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, partition_index: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ...) -> None: ...
    class OngoingTopicReassignment(_message.Message):
        __slots__ = ("name", "partitions")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PARTITIONS_FIELD_NUMBER: _ClassVar[int]
        name: str
        partitions: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsResponse.OngoingPartitionReassignment]
        def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListPartitionReassignmentsResponse.OngoingPartitionReassignment, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    topics: _containers.RepeatedCompositeFieldContainer[ListPartitionReassignmentsResponse.OngoingTopicReassignment]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[ListPartitionReassignmentsResponse.OngoingTopicReassignment, _Mapping]]] = ...) -> None: ...

class CreateSnapshotRequest(_message.Message):
    __slots__ = ("timeout_ms",)
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    timeout_ms: int
    def __init__(self, timeout_ms: _Optional[int] = ...) -> None: ...

class CreateSnapshotResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "node_id", "end_offset", "epoch", "size_bytes", "created")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    node_id: int
    end_offset: int
    epoch: int
    size_bytes: int
    created: bool
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., node_id: _Optional[int] = ..., end_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., size_bytes: _Optional[int] = ..., created: bool = ...) -> None: ...

class CreateAclsRequest(_message.Message):
    __slots__ = ("creations", "timeout_ms")
    class AclCreation(_message.Message):
        __slots__ = ("resource_type", "resource_name", "resource_pattern_type", "principal", "host", "operation", "permission_type")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
        PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        OPERATION_FIELD_NUMBER: _ClassVar[int]
        PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        resource_pattern_type: int
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., resource_pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...
    CREATIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    creations: _containers.RepeatedCompositeFieldContainer[CreateAclsRequest.AclCreation]
    timeout_ms: int
    def __init__(self, creations: _Optional[_Iterable[_Union[CreateAclsRequest.AclCreation, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class CreateAclsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "results")
    class AclCreationResult(_message.Message):
        __slots__ = ("error_code", "error_message")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    results: _containers.RepeatedCompositeFieldContainer[CreateAclsResponse.AclCreationResult]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., results: _Optional[_Iterable[_Union[CreateAclsResponse.AclCreationResult, _Mapping]]] = ...) -> None: ...

class AclBindingFilter(_message.Message):
    __slots__ = ("resource_type_filter", "resource_name_filter", "pattern_type_filter", "principal_filter", "host_filter", "operation", "permission_type")
    RESOURCE_TYPE_FILTER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FILTER_FIELD_NUMBER: _ClassVar[int]
    PATTERN_TYPE_FILTER_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FILTER_FIELD_NUMBER: _ClassVar[int]
    HOST_FILTER_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
    resource_type_filter: int
    resource_name_filter: str
    pattern_type_filter: int
    principal_filter: str
    host_filter: str
    operation: int
    permission_type: int
    def __init__(self, resource_type_filter: _Optional[int] = ..., resource_name_filter: _Optional[str] = ..., pattern_type_filter: _Optional[int] = ..., principal_filter: _Optional[str] = ..., host_filter: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...

class DescribeAclsRequest(_message.Message):
    __slots__ = ("filter", "timeout_ms")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    filter: AclBindingFilter
    timeout_ms: int
    def __init__(self, filter: _Optional[_Union[AclBindingFilter, _Mapping]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DescribeAclsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "resources")
    class AclDescription(_message.Message):
        __slots__ = ("principal", "host", "operation", "permission_type")
        PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        OPERATION_FIELD_NUMBER: _ClassVar[int]
        PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(self, principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...
    class DescribeAclsResource(_message.Message):
        __slots__ = ("resource_type", "resource_name", "pattern_type", "acls")
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
        ACLS_FIELD_NUMBER: _ClassVar[int]
        resource_type: int
        resource_name: str
        pattern_type: int
        acls: _containers.RepeatedCompositeFieldContainer[DescribeAclsResponse.AclDescription]
        def __init__(self, resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., acls: _Optional[_Iterable[_Union[DescribeAclsResponse.AclDescription, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    resources: _containers.RepeatedCompositeFieldContainer[DescribeAclsResponse.DescribeAclsResource]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., resources: _Optional[_Iterable[_Union[DescribeAclsResponse.DescribeAclsResource, _Mapping]]] = ...) -> None: ...

class DeleteAclsRequest(_message.Message):
    __slots__ = ("filters", "timeout_ms")
    FILTERS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    filters: _containers.RepeatedCompositeFieldContainer[AclBindingFilter]
    timeout_ms: int
    def __init__(self, filters: _Optional[_Iterable[_Union[AclBindingFilter, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteAclsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "filter_results")
    class DeleteAclsMatchingAcl(_message.Message):
        __slots__ = ("error_code", "error_message", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_TYPE_FIELD_NUMBER: _ClassVar[int]
        RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
        PATTERN_TYPE_FIELD_NUMBER: _ClassVar[int]
        PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        OPERATION_FIELD_NUMBER: _ClassVar[int]
        PERMISSION_TYPE_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        resource_type: int
        resource_name: str
        pattern_type: int
        principal: str
        host: str
        operation: int
        permission_type: int
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., resource_type: _Optional[int] = ..., resource_name: _Optional[str] = ..., pattern_type: _Optional[int] = ..., principal: _Optional[str] = ..., host: _Optional[str] = ..., operation: _Optional[int] = ..., permission_type: _Optional[int] = ...) -> None: ...
    class DeleteAclsFilterResult(_message.Message):
        __slots__ = ("error_code", "error_message", "matching_acls")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        MATCHING_ACLS_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        matching_acls: _containers.RepeatedCompositeFieldContainer[DeleteAclsResponse.DeleteAclsMatchingAcl]
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., matching_acls: _Optional[_Iterable[_Union[DeleteAclsResponse.DeleteAclsMatchingAcl, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    FILTER_RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    filter_results: _containers.RepeatedCompositeFieldContainer[DeleteAclsResponse.DeleteAclsFilterResult]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., filter_results: _Optional[_Iterable[_Union[DeleteAclsResponse.DeleteAclsFilterResult, _Mapping]]] = ...) -> None: ...

class ClientQuotaEntityData(_message.Message):
    __slots__ = ("entity_type", "entity_name")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_NAME_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    entity_name: str
    def __init__(self, entity_type: _Optional[str] = ..., entity_name: _Optional[str] = ...) -> None: ...

class AlterClientQuotasRequest(_message.Message):
    __slots__ = ("entries", "validate_only", "timeout_ms")
    class OpData(_message.Message):
        __slots__ = ("key", "value", "remove")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        REMOVE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        remove: bool
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ..., remove: bool = ...) -> None: ...
    class EntryData(_message.Message):
        __slots__ = ("entity", "ops")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        OPS_FIELD_NUMBER: _ClassVar[int]
        entity: _containers.RepeatedCompositeFieldContainer[ClientQuotaEntityData]
        ops: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.OpData]
        def __init__(self, entity: _Optional[_Iterable[_Union[ClientQuotaEntityData, _Mapping]]] = ..., ops: _Optional[_Iterable[_Union[AlterClientQuotasRequest.OpData, _Mapping]]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasRequest.EntryData]
    validate_only: bool
    timeout_ms: int
    def __init__(self, entries: _Optional[_Iterable[_Union[AlterClientQuotasRequest.EntryData, _Mapping]]] = ..., validate_only: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AlterClientQuotasResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "entries")
    class EntryData(_message.Message):
        __slots__ = ("error_code", "error_message", "entity")
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        error_code: int
        error_message: str
        entity: _containers.RepeatedCompositeFieldContainer[ClientQuotaEntityData]
        def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., entity: _Optional[_Iterable[_Union[ClientQuotaEntityData, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    entries: _containers.RepeatedCompositeFieldContainer[AlterClientQuotasResponse.EntryData]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[AlterClientQuotasResponse.EntryData, _Mapping]]] = ...) -> None: ...

class DescribeClientQuotasRequest(_message.Message):
    __slots__ = ("components", "strict", "timeout_ms")
    class ComponentData(_message.Message):
        __slots__ = ("entity_type", "match_type", "match")
        ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
        MATCH_TYPE_FIELD_NUMBER: _ClassVar[int]
        MATCH_FIELD_NUMBER: _ClassVar[int]
        entity_type: str
        match_type: int
        match: str
        def __init__(self, entity_type: _Optional[str] = ..., match_type: _Optional[int] = ..., match: _Optional[str] = ...) -> None: ...
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    components: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasRequest.ComponentData]
    strict: bool
    timeout_ms: int
    def __init__(self, components: _Optional[_Iterable[_Union[DescribeClientQuotasRequest.ComponentData, _Mapping]]] = ..., strict: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DescribeClientQuotasResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "controller", "entries")
    class ValueData(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class EntryData(_message.Message):
        __slots__ = ("entity", "values")
        ENTITY_FIELD_NUMBER: _ClassVar[int]
        VALUES_FIELD_NUMBER: _ClassVar[int]
        entity: _containers.RepeatedCompositeFieldContainer[ClientQuotaEntityData]
        values: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasResponse.ValueData]
        def __init__(self, entity: _Optional[_Iterable[_Union[ClientQuotaEntityData, _Mapping]]] = ..., values: _Optional[_Iterable[_Union[DescribeClientQuotasResponse.ValueData, _Mapping]]] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    controller: ControllerHint
    entries: _containers.RepeatedCompositeFieldContainer[DescribeClientQuotasResponse.EntryData]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., controller: _Optional[_Union[ControllerHint, _Mapping]] = ..., entries: _Optional[_Iterable[_Union[DescribeClientQuotasResponse.EntryData, _Mapping]]] = ...) -> None: ...
