"""DeleteTopics (key 20), v0-6: by names, and from v6 by names or topic ids; answered by the gRPC service's
DeleteTopics (the same controller call, codes, authorization and throttling). A request-level refusal
(NOT_CONTROLLER, TOPIC_DELETION_DISABLED, REQUEST_TIMED_OUT) is every topic's error, as Kafka answers it; before v3,
which has no TOPIC_DELETION_DISABLED, disabled deletion is INVALID_REQUEST, as Kafka's controller answers it."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.errors import Errors
from quorum.log.message import INT16, INT32, STRING, UUID, ZERO_UUID, Field, Message, Struct, Uuid, array

_State = Struct(
    "DeleteTopicState", [Field("Name", STRING, "6+", nullable="6+", default=None), Field("TopicId", UUID, "6+")]
)
DeleteTopicsRequest = Message(
    "DeleteTopicsRequest",
    [
        Field("Topics", array(_State), "6+"),
        Field("TopicNames", array(STRING), "0-5", ignorable=True),
        Field("TimeoutMs", INT32),
    ],
    api_key=20,
    versions="0-6",
    flexible="4+",
)
_Result = Struct(
    "DeletableTopicResult",
    [
        Field("Name", STRING, nullable="6+"),
        Field("TopicId", UUID, "6+", ignorable=True),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, "5+", nullable="5+", default=None, ignorable=True),
    ],
)
DeleteTopicsResponse = Message(
    "DeleteTopicsResponse",
    [Field("ThrottleTimeMs", INT32, "1+", ignorable=True), Field("Responses", array(_Result))],
    api_key=20,
    versions="0-6",
    flexible="4+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    named: list[tuple[str | None, Uuid]] = (
        [(t.name, t.topic_id) for t in req.topics]  # type: ignore[attr-defined]
        if version >= 6
        else [(n, ZERO_UUID) for n in req.topic_names]  # type: ignore[attr-defined]
    )
    grpc_request = pb.DeleteTopicsRequest(timeout_ms=max(req.timeout_ms, 0))  # type: ignore[attr-defined]
    for name, topic_id in named:
        state = grpc_request.topics.add()
        if name is not None:
            state.name = name
        if topic_id != ZERO_UUID:
            state.topic_id = str(topic_id)
    answer = await ctx.service.DeleteTopics(grpc_request, ctx.call)
    if answer.error_code:  # the whole request refused: each topic says so
        code = answer.error_code
        if code == Errors.TOPIC_DELETION_DISABLED and version < 3:  # clients before v3 do not know code 73
            code = Errors.INVALID_REQUEST
        results = [
            _Result.cls(
                name=name if name is not None or version >= 6 else "",
                topic_id=topic_id,
                error_code=code,
                error_message=answer.error_message or None,
            )
            for name, topic_id in named
        ]
        return DeleteTopicsResponse.cls(responses=results)
    results = [
        _Result.cls(
            name=r.name if r.HasField("name") else (None if version >= 6 else ""),
            topic_id=Uuid(r.topic_id) if r.topic_id else ZERO_UUID,
            error_code=r.error_code,
            error_message=r.error_message or None,
        )
        for r in answer.responses
    ]
    return DeleteTopicsResponse.cls(throttle_time_ms=answer.throttle_time_ms, responses=results)


register(Api(20, "DeleteTopics", DeleteTopicsRequest, DeleteTopicsResponse, handle, mutates=True))
