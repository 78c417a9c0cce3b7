"""CreatePartitions (key 37), v0-3: answered by the gRPC service's CreatePartitions (the same controller call,
codes, authorization and throttling); a request-level refusal (NOT_CONTROLLER, REQUEST_TIMED_OUT) is every topic's
error."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import BOOL, INT16, INT32, STRING, Field, Message, Struct, array

_Assignment = Struct("CreatePartitionsAssignment", [Field("BrokerIds", array(INT32))])
_Topic = Struct(
    "CreatePartitionsTopic",
    [Field("Name", STRING), Field("Count", INT32), Field("Assignments", array(_Assignment), nullable="0+")],
)
CreatePartitionsRequest = Message(
    "CreatePartitionsRequest",
    [Field("Topics", array(_Topic)), Field("TimeoutMs", INT32), Field("ValidateOnly", BOOL)],
    api_key=37,
    versions="0-3",
    flexible="2+",
)
_Result = Struct(
    "CreatePartitionsTopicResult",
    [Field("Name", STRING), Field("ErrorCode", INT16), Field("ErrorMessage", STRING, nullable="0+", default=None)],
)
CreatePartitionsResponse = Message(
    "CreatePartitionsResponse",
    [Field("ThrottleTimeMs", INT32), Field("Results", array(_Result))],
    api_key=37,
    versions="0-3",
    flexible="2+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    grpc_request = pb.CreatePartitionsRequest(
        timeout_ms=max(req.timeout_ms, 0),  # type: ignore[attr-defined]
        validate_only=req.validate_only,  # type: ignore[attr-defined]
    )
    for t in req.topics:  # type: ignore[attr-defined]
        topic = grpc_request.topics.add(name=t.name, count=t.count)
        if t.assignments is not None:
            topic.assignments.SetInParent()  # an empty list is not null
            for a in t.assignments:
                topic.assignments.assignments.add(broker_ids=a.broker_ids)
    answer = await ctx.service.CreatePartitions(grpc_request, ctx.call)
    if answer.error_code:
        message = answer.error_message or None
        results = [_Result.cls(name=t.name, error_code=answer.error_code, error_message=message) for t in req.topics]  # type: ignore[attr-defined]
        return CreatePartitionsResponse.cls(results=results)
    return CreatePartitionsResponse.cls(
        throttle_time_ms=answer.throttle_time_ms,
        results=[
            _Result.cls(name=r.name, error_code=r.error_code, error_message=r.error_message or None)
            for r in answer.results
        ],
    )


register(Api(37, "CreatePartitions", CreatePartitionsRequest, CreatePartitionsResponse, handle, mutates=True))
