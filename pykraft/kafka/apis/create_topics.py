"""CreateTopics (key 19), v0-7: answered by the gRPC service's CreateTopics — the same controller call, validation,
error codes and messages, authorization and KIP-599 throttling. A request-level refusal (NOT_CONTROLLER on a
standby, REQUEST_TIMED_OUT) is every topic's error, as Kafka's controller answers it."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import BOOL, INT8, INT16, INT32, STRING, UUID, ZERO_UUID, Field, Message, Struct, Uuid, array

_Assignment = Struct("CreatableReplicaAssignment", [Field("PartitionIndex", INT32), Field("BrokerIds", array(INT32))])
_Config = Struct("CreatableTopicConfig", [Field("Name", STRING), Field("Value", STRING, nullable="0+")])
_Topic = Struct(
    "CreatableTopic",
    [
        Field("Name", STRING),
        Field("NumPartitions", INT32),
        Field("ReplicationFactor", INT16),
        Field("Assignments", array(_Assignment)),
        Field("Configs", array(_Config)),
    ],
)
CreateTopicsRequest = Message(
    "CreateTopicsRequest",
    [
        Field("Topics", array(_Topic)),
        Field("TimeoutMs", INT32, default=60000),
        Field("ValidateOnly", BOOL, "1+"),
    ],
    api_key=19,
    versions="0-7",
    flexible="5+",
)

_ResultConfig = Struct(
    "CreatableTopicConfigs",
    [
        Field("Name", STRING, "5+"),
        Field("Value", STRING, "5+", nullable="5+"),
        Field("ReadOnly", BOOL, "5+"),
        Field("ConfigSource", INT8, "5+", default=-1, ignorable=True),
        Field("IsSensitive", BOOL, "5+"),
    ],
)
_Result = Struct(
    "CreatableTopicResult",
    [
        Field("Name", STRING),
        Field("TopicId", UUID, "7+", ignorable=True),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, "1+", nullable="0+", ignorable=True),
        Field("TopicConfigErrorCode", INT16, "5+", tag=0, ignorable=True),
        Field("NumPartitions", INT32, "5+", default=-1, ignorable=True),
        Field("ReplicationFactor", INT16, "5+", default=-1, ignorable=True),
        Field("Configs", array(_ResultConfig), "5+", nullable="5+", ignorable=True),
    ],
)
CreateTopicsResponse = Message(
    "CreateTopicsResponse",
    [Field("ThrottleTimeMs", INT32, "2+", ignorable=True), Field("Topics", array(_Result))],
    api_key=19,
    versions="0-7",
    flexible="5+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    grpc_request = pb.CreateTopicsRequest(
        # Kafka's timeoutMs <= 0 asks not to wait; ours always waits for the commit, so it takes the default.
        timeout_ms=max(req.timeout_ms, 0),  # type: ignore[attr-defined]
        validate_only=req.validate_only,  # type: ignore[attr-defined]
    )
    for t in req.topics:  # type: ignore[attr-defined]
        topic = grpc_request.topics.add(
            name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor
        )
        for a in t.assignments:
            topic.assignments.add(partition_index=a.partition_index, broker_ids=a.broker_ids)
        for c in t.configs:
            config = topic.configs.add(name=c.name)
            if c.value is not None:
                config.value = c.value
    answer = await ctx.service.CreateTopics(grpc_request, ctx.call)
    if answer.error_code:  # the whole request refused: each topic says so
        results = [
            _Result.cls(name=t.name, error_code=answer.error_code, error_message=answer.error_message or None)
            for t in req.topics  # type: ignore[attr-defined]
        ]
        return CreateTopicsResponse.cls(topics=results)
    results = []
    for r in answer.topics:
        result = _Result.cls(
            name=r.name,
            topic_id=Uuid(r.topic_id) if r.topic_id else ZERO_UUID,
            error_code=r.error_code,
            error_message=r.error_message or None,
            topic_config_error_code=r.topic_config_error_code,
        )
        if not r.error_code:
            result.num_partitions = r.num_partitions
            result.replication_factor = r.replication_factor
            result.configs = [
                _ResultConfig.cls(
                    name=c.name,
                    value=c.value if c.HasField("value") else None,
                    read_only=c.read_only,
                    config_source=c.config_source,
                    is_sensitive=c.is_sensitive,
                )
                for c in r.configs
            ]
        results.append(result)
    return CreateTopicsResponse.cls(throttle_time_ms=answer.throttle_time_ms, topics=results)


register(Api(19, "CreateTopics", CreateTopicsRequest, CreateTopicsResponse, handle, mutates=True))
