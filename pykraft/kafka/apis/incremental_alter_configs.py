"""IncrementalAlterConfigs (key 44), v0-1: topic and broker configs SET, DELETE, APPEND, SUBTRACT; answered by the
gRPC service's IncrementalAlterConfigs (the same validation, codes, authorization); a request-level refusal is
every resource's error."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import BOOL, INT8, INT16, INT32, STRING, Field, Message, Struct, array

_Config = Struct(
    "AlterableConfig",
    [Field("Name", STRING), Field("ConfigOperation", INT8), Field("Value", STRING, nullable="0+")],
)
_Resource = Struct(
    "AlterConfigsResource",
    [Field("ResourceType", INT8), Field("ResourceName", STRING), Field("Configs", array(_Config))],
)
IncrementalAlterConfigsRequest = Message(
    "IncrementalAlterConfigsRequest",
    [Field("Resources", array(_Resource)), Field("ValidateOnly", BOOL)],
    api_key=44,
    versions="0-1",
    flexible="1+",
)
_Response = Struct(
    "AlterConfigsResourceResponse",
    [
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("ResourceType", INT8),
        Field("ResourceName", STRING),
    ],
)
IncrementalAlterConfigsResponse = Message(
    "IncrementalAlterConfigsResponse",
    [Field("ThrottleTimeMs", INT32), Field("Responses", array(_Response))],
    api_key=44,
    versions="0-1",
    flexible="1+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    grpc_request = pb.IncrementalAlterConfigsRequest(validate_only=req.validate_only)  # type: ignore[attr-defined]
    for r in req.resources:  # type: ignore[attr-defined]
        resource = grpc_request.resources.add(resource_type=r.resource_type, resource_name=r.resource_name)
        for c in r.configs:
            config = resource.configs.add(name=c.name, config_operation=c.config_operation)
            if c.value is not None:
                config.value = c.value
    answer = await ctx.service.IncrementalAlterConfigs(grpc_request, ctx.call)
    if answer.error_code:
        return IncrementalAlterConfigsResponse.cls(
            responses=[
                _Response.cls(
                    error_code=answer.error_code,
                    error_message=answer.error_message or None,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in req.resources  # type: ignore[attr-defined]
            ]
        )
    return IncrementalAlterConfigsResponse.cls(
        responses=[
            _Response.cls(
                error_code=r.error_code,
                error_message=r.error_message or None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in answer.responses
        ]
    )


register(
    Api(
        44,
        "IncrementalAlterConfigs",
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        handle,
        mutates=True,
    )
)
