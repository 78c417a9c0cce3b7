from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FrameEndpointRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FrameEndpointResponse(_message.Message):
    __slots__ = ("port",)
    PORT_FIELD_NUMBER: _ClassVar[int]
    port: int
    def __init__(self, port: _Optional[int] = ...) -> None: ...

class PeerMessage(_message.Message):
    __slots__ = ("source", "vote_request", "vote_response", "begin_quorum_epoch_request", "begin_quorum_epoch_response", "end_quorum_epoch_request", "end_quorum_epoch_response", "fetch_request", "fetch_response", "fetch_snapshot_request", "fetch_snapshot_response")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    VOTE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    VOTE_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    BEGIN_QUORUM_EPOCH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    BEGIN_QUORUM_EPOCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    END_QUORUM_EPOCH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    END_QUORUM_EPOCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FETCH_REQUEST_FIELD_NUMBER: _ClassVar[int]
    FETCH_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    FETCH_SNAPSHOT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    FETCH_SNAPSHOT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    source: int
    vote_request: VoteRequest
    vote_response: VoteResponse
    begin_quorum_epoch_request: BeginQuorumEpochRequest
    begin_quorum_epoch_response: BeginQuorumEpochResponse
    end_quorum_epoch_request: EndQuorumEpochRequest
    end_quorum_epoch_response: EndQuorumEpochResponse
    fetch_request: FetchRequest
    fetch_response: FetchResponse
    fetch_snapshot_request: FetchSnapshotRequest
    fetch_snapshot_response: FetchSnapshotResponse
    def __init__(self, source: _Optional[int] = ..., vote_request: _Optional[_Union[VoteRequest, _Mapping]] = ..., vote_response: _Optional[_Union[VoteResponse, _Mapping]] = ..., begin_quorum_epoch_request: _Optional[_Union[BeginQuorumEpochRequest, _Mapping]] = ..., begin_quorum_epoch_response: _Optional[_Union[BeginQuorumEpochResponse, _Mapping]] = ..., end_quorum_epoch_request: _Optional[_Union[EndQuorumEpochRequest, _Mapping]] = ..., end_quorum_epoch_response: _Optional[_Union[EndQuorumEpochResponse, _Mapping]] = ..., fetch_request: _Optional[_Union[FetchRequest, _Mapping]] = ..., fetch_response: _Optional[_Union[FetchResponse, _Mapping]] = ..., fetch_snapshot_request: _Optional[_Union[FetchSnapshotRequest, _Mapping]] = ..., fetch_snapshot_response: _Optional[_Union[FetchSnapshotResponse, _Mapping]] = ...) -> None: ...

class VoteRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "replica_epoch", "last_offset_epoch", "last_offset", "pre_vote", "correlation_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    replica_id: int
    replica_epoch: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool
    correlation_id: int
    def __init__(self, cluster_id: _Optional[str] = ..., replica_id: _Optional[int] = ..., replica_epoch: _Optional[int] = ..., last_offset_epoch: _Optional[int] = ..., last_offset: _Optional[int] = ..., pre_vote: bool = ..., correlation_id: _Optional[int] = ...) -> None: ...

class VoteResponse(_message.Message):
    __slots__ = ("error_code", "epoch", "leader_id", "vote_granted", "pre_vote", "correlation_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    VOTE_GRANTED_FIELD_NUMBER: _ClassVar[int]
    PRE_VOTE_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    epoch: int
    leader_id: int
    vote_granted: bool
    pre_vote: bool
    correlation_id: int
    def __init__(self, error_code: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., vote_granted: bool = ..., pre_vote: bool = ..., correlation_id: _Optional[int] = ...) -> None: ...

class BeginQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "leader_id", "leader_epoch", "correlation_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    leader_id: int
    leader_epoch: int
    correlation_id: int
    def __init__(self, cluster_id: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class BeginQuorumEpochResponse(_message.Message):
    __slots__ = ("error_code", "epoch", "leader_id", "correlation_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    epoch: int
    leader_id: int
    correlation_id: int
    def __init__(self, error_code: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class EndQuorumEpochRequest(_message.Message):
    __slots__ = ("cluster_id", "leader_id", "leader_epoch", "preferred_successors", "correlation_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_SUCCESSORS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: _containers.RepeatedScalarFieldContainer[int]
    correlation_id: int
    def __init__(self, cluster_id: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., preferred_successors: _Optional[_Iterable[int]] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class EndQuorumEpochResponse(_message.Message):
    __slots__ = ("error_code", "epoch", "leader_id", "correlation_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    epoch: int
    leader_id: int
    correlation_id: int
    def __init__(self, error_code: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "leader_epoch", "fetch_offset", "last_fetched_epoch", "max_bytes", "max_wait_ms", "correlation_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    replica_id: int
    leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_bytes: int
    max_wait_ms: int
    correlation_id: int
    def __init__(self, cluster_id: _Optional[str] = ..., replica_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., max_bytes: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error_code", "epoch", "leader_id", "high_watermark", "records", "diverging_epoch", "diverging_end_offset", "correlation_id", "snapshot_end_offset", "snapshot_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    epoch: int
    leader_id: int
    high_watermark: int
    records: bytes
    diverging_epoch: int
    diverging_end_offset: int
    correlation_id: int
    snapshot_end_offset: int
    snapshot_epoch: int
    def __init__(self, error_code: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., high_watermark: _Optional[int] = ..., records: _Optional[bytes] = ..., diverging_epoch: _Optional[int] = ..., diverging_end_offset: _Optional[int] = ..., correlation_id: _Optional[int] = ..., snapshot_end_offset: _Optional[int] = ..., snapshot_epoch: _Optional[int] = ...) -> None: ...

class FetchSnapshotRequest(_message.Message):
    __slots__ = ("cluster_id", "replica_id", "leader_epoch", "snapshot_end_offset", "snapshot_epoch", "position", "max_bytes", "correlation_id")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    replica_id: int
    leader_epoch: int
    snapshot_end_offset: int
    snapshot_epoch: int
    position: int
    max_bytes: int
    correlation_id: int
    def __init__(self, cluster_id: _Optional[str] = ..., replica_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., snapshot_end_offset: _Optional[int] = ..., snapshot_epoch: _Optional[int] = ..., position: _Optional[int] = ..., max_bytes: _Optional[int] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class FetchSnapshotResponse(_message.Message):
    __slots__ = ("error_code", "epoch", "leader_id", "snapshot_end_offset", "snapshot_epoch", "size", "position", "data", "correlation_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    epoch: int
    leader_id: int
    snapshot_end_offset: int
    snapshot_epoch: int
    size: int
    position: int
    data: bytes
    correlation_id: int
    def __init__(self, error_code: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ..., snapshot_end_offset: _Optional[int] = ..., snapshot_epoch: _Optional[int] = ..., size: _Optional[int] = ..., position: _Optional[int] = ..., data: _Optional[bytes] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class DescribeQuorumRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReplicaState(_message.Message):
    __slots__ = ("replica_id", "log_end_offset", "last_fetch_age_ms", "lag")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCH_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    log_end_offset: int
    last_fetch_age_ms: int
    lag: int
    def __init__(self, replica_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., last_fetch_age_ms: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class DescribeQuorumResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "cluster_id", "node_id", "leader_id", "leader_epoch", "high_watermark", "role", "voters", "log_end_offset", "leader_endpoint", "epoch_start_offset", "log_start_offset", "latest_snapshot_end_offset", "latest_snapshot_epoch", "latest_snapshot_bytes", "observers")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LATEST_SNAPSHOT_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LATEST_SNAPSHOT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LATEST_SNAPSHOT_BYTES_FIELD_NUMBER: _ClassVar[int]
    OBSERVERS_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    cluster_id: str
    node_id: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    role: str
    voters: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    log_end_offset: int
    leader_endpoint: str
    epoch_start_offset: int
    log_start_offset: int
    latest_snapshot_end_offset: int
    latest_snapshot_epoch: int
    latest_snapshot_bytes: int
    observers: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., cluster_id: _Optional[str] = ..., node_id: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., role: _Optional[str] = ..., voters: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ..., log_end_offset: _Optional[int] = ..., leader_endpoint: _Optional[str] = ..., epoch_start_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., latest_snapshot_end_offset: _Optional[int] = ..., latest_snapshot_epoch: _Optional[int] = ..., latest_snapshot_bytes: _Optional[int] = ..., observers: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ...) -> None: ...

class AppendRecordsRequest(_message.Message):
    __slots__ = ("records", "atomic", "timeout_ms")
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    ATOMIC_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedScalarFieldContainer[bytes]
    atomic: bool
    timeout_ms: int
    def __init__(self, records: _Optional[_Iterable[bytes]] = ..., atomic: bool = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AppendRecordsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "base_offset", "last_offset", "epoch", "leader_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: int
    error_message: str
    base_offset: int
    last_offset: int
    epoch: int
    leader_id: int
    def __init__(self, error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., epoch: _Optional[int] = ..., leader_id: _Optional[int] = ...) -> None: ...

class ExportLogRequest(_message.Message):
    __slots__ = ("max_chunk_bytes",)
    MAX_CHUNK_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_chunk_bytes: int
    def __init__(self, max_chunk_bytes: _Optional[int] = ...) -> None: ...

class ExportLogChunk(_message.Message):
    __slots__ = ("cluster_id", "node_id", "high_watermark", "leader_epoch", "log_start_offset", "batches", "first_offset", "next_offset", "snapshot_name", "snapshot_data")
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_NAME_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_DATA_FIELD_NUMBER: _ClassVar[int]
    cluster_id: str
    node_id: int
    high_watermark: int
    leader_epoch: int
    log_start_offset: int
    batches: bytes
    first_offset: int
    next_offset: int
    snapshot_name: str
    snapshot_data: bytes
    def __init__(self, cluster_id: _Optional[str] = ..., node_id: _Optional[int] = ..., high_watermark: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., batches: _Optional[bytes] = ..., first_offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., snapshot_name: _Optional[str] = ..., snapshot_data: _Optional[bytes] = ...) -> None: ...
