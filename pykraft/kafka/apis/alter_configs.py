"""AlterConfigs (key 33), v0-2, the legacy API IncrementalAlterConfigs replaced (confluent-kafka's ``alter_configs``
and kafka-python's ``incremental=False`` still send it): each resource's dynamic configs become exactly the request's
— a key set now and not named is removed — as Kafka's controller applies it. Answered by the gRPC service's
AlterConfigs (IncrementalAlterConfigs' checks, codes and ALTER_CONFIGS authorization); a request-level refusal is
every resource's error."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.apis.incremental_alter_configs import (
    add_resources,
    resource_response_struct,
    resource_responses,
)
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import BOOL, INT8, INT32, STRING, Field, Message, Struct, array

_Config = Struct("AlterableConfig", [Field("Name", STRING), Field("Value", STRING, nullable="0+")])
_Resource = Struct(
    "AlterConfigsResource",
    [Field("ResourceType", INT8), Field("ResourceName", STRING), Field("Configs", array(_Config))],
)
AlterConfigsRequest = Message(
    "AlterConfigsRequest",
    [Field("Resources", array(_Resource)), Field("ValidateOnly", BOOL)],
    api_key=33,
    versions="0-2",
    flexible="2+",
)
_Response = resource_response_struct()
AlterConfigsResponse = Message(
    "AlterConfigsResponse",
    [Field("ThrottleTimeMs", INT32), Field("Responses", array(_Response))],
    api_key=33,
    versions="0-2",
    flexible="2+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    grpc_request = pb.AlterConfigsRequest(validate_only=req.validate_only)  # type: ignore[attr-defined]
    add_resources(grpc_request, req.resources, with_operation=False)  # type: ignore[attr-defined]
    answer = await ctx.service.AlterConfigs(grpc_request, ctx.call)
    return AlterConfigsResponse.cls(responses=resource_responses(answer, req.resources, _Response))  # type: ignore[attr-defined]


register(Api(33, "AlterConfigs", AlterConfigsRequest, AlterConfigsResponse, handle, mutates=True))
