"""CreateAcls (key 30), v0-3: answered by the gRPC service's CreateAcls (ALTER on the CLUSTER when authorization is
on; an ACL that is not concrete or well formed fails alone with INVALID_REQUEST). Before v1 every ACL is LITERAL."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.apis.describe_acls import LITERAL
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import INT8, INT16, INT32, STRING, Field, Message, Struct, array

_Creation = Struct(
    "AclCreation",
    [
        Field("ResourceType", INT8),
        Field("ResourceName", STRING),
        Field("ResourcePatternType", INT8, "1+", default=LITERAL),
        Field("Principal", STRING),
        Field("Host", STRING),
        Field("Operation", INT8),
        Field("PermissionType", INT8),
    ],
)
CreateAclsRequest = Message(
    "CreateAclsRequest", [Field("Creations", array(_Creation))], api_key=30, versions="0-3", flexible="2+"
)
_Result = Struct("AclCreationResult", [Field("ErrorCode", INT16), Field("ErrorMessage", STRING, nullable="0+")])
CreateAclsResponse = Message(
    "CreateAclsResponse",
    [Field("ThrottleTimeMs", INT32), Field("Results", array(_Result))],
    api_key=30,
    versions="0-3",
    flexible="2+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    creations = request.creations  # type: ignore[attr-defined]
    grpc_request = pb.CreateAclsRequest()
    for c in creations:
        grpc_request.creations.add(
            resource_type=c.resource_type,
            resource_name=c.resource_name,
            resource_pattern_type=c.resource_pattern_type,
            principal=c.principal,
            host=c.host,
            operation=c.operation,
            permission_type=c.permission_type,
        )
    answer = await ctx.service.CreateAcls(grpc_request, ctx.call)
    if answer.error_code:  # the whole request refused: each ACL says so
        message = answer.error_message or None
        return CreateAclsResponse.cls(
            results=[_Result.cls(error_code=answer.error_code, error_message=message) for _ in creations]
        )
    return CreateAclsResponse.cls(
        results=[_Result.cls(error_code=r.error_code, error_message=r.error_message or None) for r in answer.results]
    )


register(Api(30, "CreateAcls", CreateAclsRequest, CreateAclsResponse, handle, mutates=True))
