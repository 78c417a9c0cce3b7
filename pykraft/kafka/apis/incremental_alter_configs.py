"""IncrementalAlterConfigs (key 44), v0-1: topic and broker configs SET, DELETE, APPEND, SUBTRACT; answered by the
gRPC service's IncrementalAlterConfigs (the same validation, codes, authorization); a request-level refusal is
every resource's error."""

from __future__ import annotations

from typing import Any

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


def resource_response_struct() -> Struct:
    """Both alter-configs APIs' resource response, a new Struct each call: a struct's codec is compiled for one
    message's flexible versions (AlterConfigs v2+, IncrementalAlterConfigs v1+)."""
    return Struct(
        "AlterConfigsResourceResponse",
        [
            Field("ErrorCode", INT16),
            Field("ErrorMessage", STRING, nullable="0+", default=None),
            Field("ResourceType", INT8),
            Field("ResourceName", STRING),
        ],
    )


ResourceResponse = resource_response_struct()
IncrementalAlterConfigsResponse = Message(
    "IncrementalAlterConfigsResponse",
    [Field("ThrottleTimeMs", INT32), Field("Responses", array(ResourceResponse))],
    api_key=44,
    versions="0-1",
    flexible="1+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    grpc_request = pb.IncrementalAlterConfigsRequest(validate_only=req.validate_only)  # type: ignore[attr-defined]
    add_resources(grpc_request, req.resources, with_operation=True)  # type: ignore[attr-defined]
    answer = await ctx.service.IncrementalAlterConfigs(grpc_request, ctx.call)
    return IncrementalAlterConfigsResponse.cls(responses=resource_responses(answer, req.resources))  # type: ignore[attr-defined]


def add_resources(grpc_request: Any, resources: list[Any], with_operation: bool) -> None:
    """The request's resources into the gRPC request of either alter-configs API (the legacy one's configs carry
    no operation)."""
    for r in resources:
        resource = grpc_request.resources.add(resource_type=r.resource_type, resource_name=r.resource_name)
        for c in r.configs:
            config = resource.configs.add(name=c.name)
            if with_operation:
                config.config_operation = c.config_operation
            if c.value is not None:
                config.value = c.value


def resource_responses(answer: Any, resources: list[Any], struct: Struct = ResourceResponse) -> list[Any]:
    """A resource response per resource answered (both alter-configs APIs, each with its own ``struct``: a struct's
    codec is compiled for one message's flexible versions): a request-level refusal of the gRPC answer is each
    resource's error, in the request's order."""
    if answer.error_code:
        answered = [(answer.error_code, answer.error_message, r) for r in resources]
    else:
        answered = [(r.error_code, r.error_message, r) for r in answer.responses]
    return [
        struct.cls(
            error_code=code,
            error_message=message or None,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for code, message, r in answered
    ]


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
