from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "broker_epoch", "max_bytes", "partitions", "session_id", "session_epoch", "forgotten")
    class Partition(_message.Message):
        __slots__ = ("topic_id", "partition", "fetch_offset", "current_leader_epoch", "partition_max_bytes")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
        CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
        PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        partition: int
        fetch_offset: int
        current_leader_epoch: int
        partition_max_bytes: int
        def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ...) -> None: ...
    class ForgottenPartition(_message.Message):
        __slots__ = ("topic_id", "partition")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        partition: int
        def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ...) -> None: ...
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    broker_epoch: int
    max_bytes: int
    partitions: _containers.RepeatedCompositeFieldContainer[FetchRequest.Partition]
    session_id: int
    session_epoch: int
    forgotten: _containers.RepeatedCompositeFieldContainer[FetchRequest.ForgottenPartition]
    def __init__(self, replica_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., max_bytes: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[FetchRequest.Partition, _Mapping]]] = ..., session_id: _Optional[int] = ..., session_epoch: _Optional[int] = ..., forgotten: _Optional[_Iterable[_Union[FetchRequest.ForgottenPartition, _Mapping]]] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error_code", "partitions", "session_id")
    class Partition(_message.Message):
        __slots__ = ("topic_id", "partition", "error_code", "high_watermark", "log_end_offset", "records_end_offset")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
        HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        RECORDS_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        partition: int
        error_code: int
        high_watermark: int
        log_end_offset: int
        records_end_offset: int
        def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ..., error_code: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., records_end_offset: _Optional[int] = ...) -> None: ...
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    partitions: _containers.RepeatedCompositeFieldContainer[FetchResponse.Partition]
    session_id: int
    def __init__(self, error_code: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[FetchResponse.Partition, _Mapping]]] = ..., session_id: _Optional[int] = ...) -> None: ...

class DescribeReplicasRequest(_message.Message):
    __slots__ = ("partitions",)
    class Partition(_message.Message):
        __slots__ = ("topic_id", "partition")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        partition: int
        def __init__(self, topic_id: _Optional[bytes] = ..., partition: _Optional[int] = ...) -> None: ...
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[DescribeReplicasRequest.Partition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[DescribeReplicasRequest.Partition, _Mapping]]] = ...) -> None: ...

class DescribeReplicasResponse(_message.Message):
    __slots__ = ("broker_id", "replicas")
    class Replica(_message.Message):
        __slots__ = ("topic_id", "topic", "partition", "size_bytes", "log_end_offset", "high_watermark", "is_leader", "in_isr", "throttled")
        TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
        TOPIC_FIELD_NUMBER: _ClassVar[int]
        PARTITION_FIELD_NUMBER: _ClassVar[int]
        SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
        LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
        HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
        IS_LEADER_FIELD_NUMBER: _ClassVar[int]
        IN_ISR_FIELD_NUMBER: _ClassVar[int]
        THROTTLED_FIELD_NUMBER: _ClassVar[int]
        topic_id: bytes
        topic: str
        partition: int
        size_bytes: int
        log_end_offset: int
        high_watermark: int
        is_leader: bool
        in_isr: bool
        throttled: bool
        def __init__(self, topic_id: _Optional[bytes] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., size_bytes: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., is_leader: bool = ..., in_isr: bool = ..., throttled: bool = ...) -> None: ...
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    replicas: _containers.RepeatedCompositeFieldContainer[DescribeReplicasResponse.Replica]
    def __init__(self, broker_id: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[DescribeReplicasResponse.Replica, _Mapping]]] = ...) -> None: ...
