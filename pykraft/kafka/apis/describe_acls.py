"""DescribeAcls (key 29), v0-3: the committed ACLs a filter matches, grouped by resource pattern; answered by the
gRPC service's DescribeAcls (DESCRIBE on the CLUSTER when authorization is on; a filter with an UNKNOWN part is
INVALID_REQUEST). Before v1 there are no pattern types: the filter is LITERAL, as Kafka reads it.

Serving it also tells kafka-python how new a server this is: it guesses a broker's version from the APIs it answers
(DescribeAcls v3: Kafka 3.3), and refuses CreateTopics with default counts for anything older than 2.4."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import INT8, INT16, INT32, STRING, Field, Message, Struct, array

LITERAL = 3

DescribeAclsRequest = Message(
    "DescribeAclsRequest",
    [
        Field("ResourceTypeFilter", INT8),
        Field("ResourceNameFilter", STRING, nullable="0+"),
        Field("PatternTypeFilter", INT8, "1+", default=LITERAL),
        Field("PrincipalFilter", STRING, nullable="0+"),
        Field("HostFilter", STRING, nullable="0+"),
        Field("Operation", INT8),
        Field("PermissionType", INT8),
    ],
    api_key=29,
    versions="0-3",
    flexible="2+",
)
_Acl = Struct(
    "AclDescription",
    [Field("Principal", STRING), Field("Host", STRING), Field("Operation", INT8), Field("PermissionType", INT8)],
)
_Resource = Struct(
    "DescribeAclsResource",
    [
        Field("ResourceType", INT8),
        Field("ResourceName", STRING),
        Field("PatternType", INT8, "1+", default=LITERAL),
        Field("Acls", array(_Acl)),
    ],
)
DescribeAclsResponse = Message(
    "DescribeAclsResponse",
    [
        Field("ThrottleTimeMs", INT32),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("Resources", array(_Resource)),
    ],
    api_key=29,
    versions="0-3",
    flexible="2+",
)


def binding_filter(r: object, out: pb.AclBindingFilter | None = None) -> pb.AclBindingFilter:
    """A Kafka ACL filter (DescribeAcls' request, DeleteAcls' filters: the same fields) as the gRPC one; a null
    name, principal or host matches any."""
    out = pb.AclBindingFilter() if out is None else out
    out.resource_type_filter = r.resource_type_filter  # type: ignore[attr-defined]
    out.pattern_type_filter = r.pattern_type_filter  # type: ignore[attr-defined]
    out.operation = r.operation  # type: ignore[attr-defined]
    out.permission_type = r.permission_type  # type: ignore[attr-defined]
    for attr in ("resource_name_filter", "principal_filter", "host_filter"):
        value = getattr(r, attr)
        if value is not None:
            setattr(out, attr, value)
    return out


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    answer = await ctx.service.DescribeAcls(pb.DescribeAclsRequest(filter=binding_filter(request)), ctx.call)
    out = DescribeAclsResponse.cls(error_code=answer.error_code, error_message=answer.error_message or None)
    if answer.error_code:
        return out
    out.resources = [
        _Resource.cls(
            resource_type=res.resource_type,
            resource_name=res.resource_name,
            pattern_type=res.pattern_type,
            acls=[
                _Acl.cls(principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type)
                for a in res.acls
            ],
        )
        for res in answer.resources
        if version >= 1 or res.pattern_type == LITERAL  # v0 cannot say PREFIXED: those are left out, as Kafka does
    ]
    return out


register(Api(29, "DescribeAcls", DescribeAclsRequest, DescribeAclsResponse, handle))
