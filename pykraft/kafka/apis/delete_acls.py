"""DeleteAcls (key 31), v0-3: each filter's matching ACLs removed, answered by the gRPC service's DeleteAcls (ALTER
on the CLUSTER when authorization is on; a filter with an UNKNOWN part fails alone). Before v1 filters are LITERAL."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.apis.describe_acls import LITERAL, binding_filter
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import INT8, INT16, INT32, STRING, Field, Message, Struct, array

_Filter = Struct(
    "DeleteAclsFilter",
    [
        Field("ResourceTypeFilter", INT8),
        Field("ResourceNameFilter", STRING, nullable="0+"),
        Field("PatternTypeFilter", INT8, "1+", default=LITERAL),
        Field("PrincipalFilter", STRING, nullable="0+"),
        Field("HostFilter", STRING, nullable="0+"),
        Field("Operation", INT8),
        Field("PermissionType", INT8),
    ],
)
DeleteAclsRequest = Message(
    "DeleteAclsRequest", [Field("Filters", array(_Filter))], api_key=31, versions="0-3", flexible="2+"
)
_Match = Struct(
    "DeleteAclsMatchingAcl",
    [
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("ResourceType", INT8),
        Field("ResourceName", STRING),
        Field("PatternType", INT8, "1+", default=LITERAL),
        Field("Principal", STRING),
        Field("Host", STRING),
        Field("Operation", INT8),
        Field("PermissionType", INT8),
    ],
)
_FilterResult = Struct(
    "DeleteAclsFilterResult",
    [
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("MatchingAcls", array(_Match)),
    ],
)
DeleteAclsResponse = Message(
    "DeleteAclsResponse",
    [Field("ThrottleTimeMs", INT32), Field("FilterResults", array(_FilterResult))],
    api_key=31,
    versions="0-3",
    flexible="2+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    filters = request.filters  # type: ignore[attr-defined]
    grpc_request = pb.DeleteAclsRequest()
    for f in filters:
        binding_filter(f, grpc_request.filters.add())
    answer = await ctx.service.DeleteAcls(grpc_request, ctx.call)
    if answer.error_code:  # the whole request refused: each filter says so
        message = answer.error_message or None
        return DeleteAclsResponse.cls(
            filter_results=[_FilterResult.cls(error_code=answer.error_code, error_message=message) for _ in filters]
        )
    return DeleteAclsResponse.cls(
        filter_results=[
            _FilterResult.cls(
                error_code=r.error_code,
                error_message=r.error_message or None,
                matching_acls=[
                    _Match.cls(
                        error_code=m.error_code,
                        error_message=m.error_message or None,
                        resource_type=m.resource_type,
                        resource_name=m.resource_name,
                        # v0 filters are LITERAL, so only LITERAL ACLs match (and v0 cannot say another type)
                        pattern_type=m.pattern_type if version >= 1 else LITERAL,
                        principal=m.principal,
                        host=m.host,
                        operation=m.operation,
                        permission_type=m.permission_type,
                    )
                    for m in r.matching_acls
                ],
            )
            for r in answer.filter_results
        ]
    )


register(Api(31, "DeleteAcls", DeleteAclsRequest, DeleteAclsResponse, handle, mutates=True))
