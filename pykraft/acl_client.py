"""The admin client's ACL methods (Kafka's Admin.createAcls / describeAcls / deleteAcls), part of
:class:`pykraft.client.AdminClient`::

    from controller.authorizer import AclBindingFilter, AclOperation, AclPermissionType, PatternType, ResourceType
    from controller.authorizer import StandardAcl

    alice_reads = StandardAcl(ResourceType.TOPIC, "orders", PatternType.LITERAL, "User:alice", "*",
                              AclOperation.READ, AclPermissionType.ALLOW)
    [result] = await admin.create_acls([alice_reads])          # AclCreateResult per ACL, in order
    acls = await admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.MATCH))
    [deleted] = await admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "orders", PatternType.LITERAL)])

Per-ACL and per-filter errors are results (ApiError with Kafka's code and message); a request refused as a whole
raises AdminError, as do DescribeAcls' errors (its response has only the one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from controller.acl_control import AclCreateResult, AclDeleteResult
from controller.authorizer import ANY_ACL, AclBindingFilter, StandardAcl
from controller.results import NO_ERROR, ApiError
from pykraft.api import controller_pb2 as pb
from quorum.errors import Errors


def _api_error(code: int, message: str) -> ApiError:
    if not code:
        return NO_ERROR
    if code in Errors._value2member_map_:
        return ApiError(Errors(code), message or None)
    return ApiError(Errors.UNKNOWN_SERVER_ERROR, f"error code {code}: {message}")


def filter_message(f: AclBindingFilter, into: pb.AclBindingFilter) -> pb.AclBindingFilter:
    into.resource_type_filter = int(f.resource_type)
    into.pattern_type_filter = int(f.pattern_type)
    into.operation = int(f.operation)
    into.permission_type = int(f.permission_type)
    if f.resource_name is not None:
        into.resource_name_filter = f.resource_name
    if f.principal is not None:
        into.principal_filter = f.principal
    if f.host is not None:
        into.host_filter = f.host
    return into


class AclAdmin:
    """Mixed into AdminClient, which provides ``_call``, ``_check`` and ``request_timeout_ms``."""

    request_timeout_ms: int

    if TYPE_CHECKING:

        async def _call(self, method: str, request: Any, timeout_ms: int | None = None) -> Any: ...

        @staticmethod
        def _check(response: Any, method: str) -> None: ...

    async def create_acls(self, acls: list[StandardAcl], *, timeout_ms: int | None = None) -> list[AclCreateResult]:
        """Create ACLs; one result per ACL, in order (an ACL that exists already succeeds and is not written twice)."""
        request = pb.CreateAclsRequest(timeout_ms=timeout_ms or self.request_timeout_ms)
        for a in acls:
            request.creations.add(
                resource_type=int(a.resource_type),
                resource_name=a.resource_name,
                resource_pattern_type=int(a.pattern_type),
                principal=a.principal,
                host=a.host,
                operation=int(a.operation),
                permission_type=int(a.permission_type),
            )
        response = await self._call("CreateAcls", request, timeout_ms)
        self._check(response, "CreateAcls")
        return [AclCreateResult(_api_error(r.error_code, r.error_message)) for r in response.results]

    async def describe_acls(
        self, acl_filter: AclBindingFilter = ANY_ACL, *, timeout_ms: int | None = None
    ) -> list[StandardAcl]:
        """The committed ACLs the filter matches (by default all), sorted by resource then entry."""
        request = pb.DescribeAclsRequest(timeout_ms=timeout_ms or self.request_timeout_ms)
        filter_message(acl_filter, request.filter)
        response = await self._call("DescribeAcls", request, timeout_ms)
        self._check(response, "DescribeAcls")
        return [
            StandardAcl(
                r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type
            )
            for r in response.resources
            for a in r.acls
        ]

    async def delete_acls(
        self, filters: list[AclBindingFilter], *, timeout_ms: int | None = None
    ) -> list[AclDeleteResult]:
        """Delete every ACL each filter matches; per filter, in order, the ACLs it matched (or its error)."""
        request = pb.DeleteAclsRequest(timeout_ms=timeout_ms or self.request_timeout_ms)
        for f in filters:
            filter_message(f, request.filters.add())
        response = await self._call("DeleteAcls", request, timeout_ms)
        self._check(response, "DeleteAcls")
        return [
            AclDeleteResult(
                _api_error(r.error_code, r.error_message),
                tuple(
                    StandardAcl(
                        m.resource_type,
                        m.resource_name,
                        m.pattern_type,
                        m.principal,
                        m.host,
                        m.operation,
                        m.permission_type,
                    )
                    for m in r.matching_acls
                ),
            )
            for r in response.filter_results
        ]
