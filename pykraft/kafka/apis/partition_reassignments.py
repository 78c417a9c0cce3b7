"""AlterPartitionReassignments (key 45) and ListPartitionReassignments (key 46), v0 (KIP-455): answered by the gRPC
service's calls of the same names (the same checks and codes: INVALID_REPLICA_ASSIGNMENT,
NO_REASSIGNMENT_IN_PROGRESS, ...; a null replica list cancels a partition's move). Two APIs in one module: they are
one feature, and each message is small."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import INT16, INT32, STRING, Field, Message, Struct, array

_Partition = Struct(
    "ReassignablePartition",
    [Field("PartitionIndex", INT32), Field("Replicas", array(INT32), nullable="0+", default=None)],
)
_Topic = Struct("ReassignableTopic", [Field("Name", STRING), Field("Partitions", array(_Partition))])
AlterPartitionReassignmentsRequest = Message(
    "AlterPartitionReassignmentsRequest",
    [Field("TimeoutMs", INT32, default=60000), Field("Topics", array(_Topic))],
    api_key=45,
    versions="0",
    flexible="0+",
)
_PartitionResponse = Struct(
    "ReassignablePartitionResponse",
    [Field("PartitionIndex", INT32), Field("ErrorCode", INT16), Field("ErrorMessage", STRING, nullable="0+")],
)
_TopicResponse = Struct(
    "ReassignableTopicResponse", [Field("Name", STRING), Field("Partitions", array(_PartitionResponse))]
)
AlterPartitionReassignmentsResponse = Message(
    "AlterPartitionReassignmentsResponse",
    [
        Field("ThrottleTimeMs", INT32),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("Responses", array(_TopicResponse)),
    ],
    api_key=45,
    versions="0",
    flexible="0+",
)

_ListTopic = Struct(
    "ListPartitionReassignmentsTopics", [Field("Name", STRING), Field("PartitionIndexes", array(INT32))]
)
ListPartitionReassignmentsRequest = Message(
    "ListPartitionReassignmentsRequest",
    [Field("TimeoutMs", INT32, default=60000), Field("Topics", array(_ListTopic), nullable="0+", default=None)],
    api_key=46,
    versions="0",
    flexible="0+",
)
_Ongoing = Struct(
    "OngoingPartitionReassignment",
    [
        Field("PartitionIndex", INT32),
        Field("Replicas", array(INT32)),
        Field("AddingReplicas", array(INT32)),
        Field("RemovingReplicas", array(INT32)),
    ],
)
_OngoingTopic = Struct("OngoingTopicReassignment", [Field("Name", STRING), Field("Partitions", array(_Ongoing))])
ListPartitionReassignmentsResponse = Message(
    "ListPartitionReassignmentsResponse",
    [
        Field("ThrottleTimeMs", INT32),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("Topics", array(_OngoingTopic)),
    ],
    api_key=46,
    versions="0",
    flexible="0+",
)


async def alter(ctx: RequestContext, request: object, version: int) -> object:
    grpc_request = pb.AlterPartitionReassignmentsRequest(timeout_ms=max(request.timeout_ms, 0))  # type: ignore[attr-defined]
    for t in request.topics:  # type: ignore[attr-defined]
        topic = grpc_request.topics.add(name=t.name)
        for p in t.partitions:
            partition = topic.partitions.add(partition_index=p.partition_index)
            if p.replicas is not None:  # null cancels
                partition.replicas.broker_ids.extend(p.replicas)
    answer = await ctx.service.AlterPartitionReassignments(grpc_request, ctx.call)
    return AlterPartitionReassignmentsResponse.cls(
        error_code=answer.error_code,
        error_message=answer.error_message or None,
        responses=[
            _TopicResponse.cls(
                name=t.name,
                partitions=[
                    _PartitionResponse.cls(
                        partition_index=p.partition_index,
                        error_code=p.error_code,
                        error_message=p.error_message or None,
                    )
                    for p in t.partitions
                ],
            )
            for t in answer.responses
        ],
    )


async def list_(ctx: RequestContext, request: object, version: int) -> object:
    grpc_request = pb.ListPartitionReassignmentsRequest(timeout_ms=max(request.timeout_ms, 0))  # type: ignore[attr-defined]
    if request.topics is not None:  # type: ignore[attr-defined]
        grpc_request.topics.SetInParent()  # an empty list asks for nothing, not for everything
        for t in request.topics:  # type: ignore[attr-defined]
            grpc_request.topics.topics.add(name=t.name, partition_indexes=t.partition_indexes)
    answer = await ctx.service.ListPartitionReassignments(grpc_request, ctx.call)
    return ListPartitionReassignmentsResponse.cls(
        error_code=answer.error_code,
        error_message=answer.error_message or None,
        topics=[
            _OngoingTopic.cls(
                name=t.name,
                partitions=[
                    _Ongoing.cls(
                        partition_index=p.partition_index,
                        replicas=list(p.replicas),
                        adding_replicas=list(p.adding_replicas),
                        removing_replicas=list(p.removing_replicas),
                    )
                    for p in t.partitions
                ],
            )
            for t in answer.topics
        ],
    )


register(
    Api(
        45,
        "AlterPartitionReassignments",
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        alter,
        mutates=True,
    )
)
register(
    Api(46, "ListPartitionReassignments", ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, list_)
)
