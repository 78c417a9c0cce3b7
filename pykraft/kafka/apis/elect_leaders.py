"""ElectLeaders (key 43), v0-2: preferred or unclean elections for the partitions named (null: every partition),
answered by the gRPC service's ElectLeaders (the same controller call, codes such as ELECTION_NOT_NEEDED, and
authorization). v0 has no election type: PREFERRED. Before v1 there is no top-level error code, so a request-level
refusal (NOT_CONTROLLER) is every named partition's error at every version."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import INT8, INT16, INT32, STRING, Field, Message, Struct, array

_TopicPartitions = Struct("TopicPartitions", [Field("Topic", STRING), Field("Partitions", array(INT32))])
ElectLeadersRequest = Message(
    "ElectLeadersRequest",
    [
        Field("ElectionType", INT8, "1+"),
        Field("TopicPartitions", array(_TopicPartitions), nullable="0+"),
        Field("TimeoutMs", INT32, default=60000),
    ],
    api_key=43,
    versions="0-2",
    flexible="2+",
)
_PartitionResult = Struct(
    "PartitionResult",
    [Field("PartitionId", INT32), Field("ErrorCode", INT16), Field("ErrorMessage", STRING, nullable="0+")],
)
_ElectionResult = Struct(
    "ReplicaElectionResult", [Field("Topic", STRING), Field("PartitionResult", array(_PartitionResult))]
)
ElectLeadersResponse = Message(
    "ElectLeadersResponse",
    [
        Field("ThrottleTimeMs", INT32),
        Field("ErrorCode", INT16, "1+"),
        Field("ReplicaElectionResults", array(_ElectionResult)),
    ],
    api_key=43,
    versions="0-2",
    flexible="2+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    named = req.topic_partitions  # type: ignore[attr-defined]
    grpc_request = pb.ElectLeadersRequest(
        election_type=req.election_type,  # type: ignore[attr-defined]
        timeout_ms=max(req.timeout_ms, 0),  # type: ignore[attr-defined]
    )
    if named is not None:
        grpc_request.topic_partitions.SetInParent()  # an empty list is no partition, not every one
        for t in named:
            grpc_request.topic_partitions.topics.add(topic=t.topic, partitions=t.partitions)
    answer = await ctx.service.ElectLeaders(grpc_request, ctx.call)
    if answer.error_code:
        message = answer.error_message or None
        return ElectLeadersResponse.cls(
            error_code=answer.error_code if version >= 1 else 0,
            replica_election_results=[
                _ElectionResult.cls(
                    topic=t.topic,
                    partition_result=[
                        _PartitionResult.cls(partition_id=p, error_code=answer.error_code, error_message=message)
                        for p in t.partitions
                    ],
                )
                for t in named or ()
            ],
        )
    return ElectLeadersResponse.cls(
        replica_election_results=[
            _ElectionResult.cls(
                topic=r.topic,
                partition_result=[
                    _PartitionResult.cls(
                        partition_id=p.partition_id, error_code=p.error_code, error_message=p.error_message or None
                    )
                    for p in r.partition_result
                ],
            )
            for r in answer.replica_election_results
        ]
    )


register(Api(43, "ElectLeaders", ElectLeadersRequest, ElectLeadersResponse, handle, mutates=True))
