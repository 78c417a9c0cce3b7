"""The Controller service's ACL requests: CreateAcls, DescribeAcls, DeleteAcls (Kafka's, over gRPC).

Protobuf in, :mod:`controller.authorizer` values to the QuorumController, protobuf out. Kafka's rules (a creation
must be concrete and well formed, a filter must have no UNKNOWN part) live in the controller
(``controller/acl_control.py``) and come back per creation or filter with Kafka's codes and messages; here only
the request's shape is checked (a negative timeout). DescribeAcls is answered from committed state, on a broker
from its image.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from controller.authorizer import AclBindingFilter, StandardAcl, code_name
from controller.authorizer import AclOperation as Op
from controller.authorizer import AclPermissionType as Perm
from controller.authorizer import PatternType as Pat
from controller.authorizer import ResourceType as Res
from pykraft.api import controller_pb2 as pb
from pykraft.lifecycle_service import LifecycleServicer
from pykraft.servicer_part import ServicerPart

if TYPE_CHECKING:
    pass


def filter_of(f: pb.AclBindingFilter) -> AclBindingFilter:
    """A protobuf filter as the controller's; an absent string is null (matches anything)."""
    return AclBindingFilter(
        f.resource_type_filter,
        f.resource_name_filter if f.HasField("resource_name_filter") else None,
        f.pattern_type_filter,
        f.principal_filter if f.HasField("principal_filter") else None,
        f.host_filter if f.HasField("host_filter") else None,
        f.operation,
        f.permission_type,
    )


def filter_text(f: AclBindingFilter) -> str:
    """A filter in one short string, for the request log line."""
    return (
        f"{code_name(Res, f.resource_type)}:{f.resource_name if f.resource_name is not None else '<any>'}:"
        f"{code_name(Pat, f.pattern_type)}/{f.principal or '<any>'}@{f.host or '<any>'}:{code_name(Op, f.operation)}:"
        f"{code_name(Perm, f.permission_type)}"
    )


class AclServicer(ServicerPart):
    """Part of :class:`pykraft.service.ControllerService` (see :class:`~pykraft.servicer_part.ServicerPart`)."""

    async def CreateAcls(
        self, request: pb.CreateAclsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateAclsResponse:
        creations = [
            StandardAcl(
                c.resource_type,
                c.resource_name,
                c.resource_pattern_type,
                c.principal,
                c.host,
                c.operation,
                c.permission_type,
            )
            for c in request.creations
        ]

        async def call() -> pb.CreateAclsResponse:
            (await self._caller(context)).require_cluster(Op.ALTER)
            timeout = LifecycleServicer._timeout(request.timeout_ms)
            results = await self.controller.create_acls(creations, timeout_ms=timeout)
            out = pb.CreateAclsResponse()
            for r in results:
                out.results.add(error_code=int(r.error.code), error_message=r.error.message or "")
            return out

        def summarize(response: pb.CreateAclsResponse) -> dict[str, Any]:
            return {"failed": sum(1 for r in response.results if r.error_code)}

        return await self._serve(
            "CreateAcls",
            pb.CreateAclsResponse,
            call,
            summarize,
            acl_count=len(creations),
            acls=[str(a) for a in creations[:10]],
        )

    async def DescribeAcls(
        self, request: pb.DescribeAclsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeAclsResponse:
        acl_filter = filter_of(request.filter)

        async def call() -> pb.DescribeAclsResponse:
            (await self._caller(context, read=True)).require_cluster(Op.DESCRIBE)
            timeout = LifecycleServicer._timeout(request.timeout_ms)
            result = await self.controller.describe_acls(acl_filter, timeout_ms=timeout)
            out = pb.DescribeAclsResponse(error_code=int(result.error.code), error_message=result.error.message or "")
            resources: dict[tuple[int, str, int], pb.DescribeAclsResponse.DescribeAclsResource] = {}
            for a in result.acls:  # sorted by resource: each resource's ACLs together
                key = (a.resource_type, a.resource_name, a.pattern_type)
                resource = resources.get(key)
                if resource is None:
                    resource = resources[key] = out.resources.add(
                        resource_type=a.resource_type, resource_name=a.resource_name, pattern_type=a.pattern_type
                    )
                resource.acls.add(
                    principal=a.principal, host=a.host, operation=a.operation, permission_type=a.permission_type
                )
            return out

        def summarize(response: pb.DescribeAclsResponse) -> dict[str, Any]:
            return {"acls": sum(len(r.acls) for r in response.resources)}

        return await self._serve(
            "DescribeAcls", pb.DescribeAclsResponse, call, summarize, filter=filter_text(acl_filter)
        )

    async def DeleteAcls(
        self, request: pb.DeleteAclsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteAclsResponse:
        filters = [filter_of(f) for f in request.filters]

        async def call() -> pb.DeleteAclsResponse:
            (await self._caller(context)).require_cluster(Op.ALTER)
            timeout = LifecycleServicer._timeout(request.timeout_ms)
            results = await self.controller.delete_acls(filters, timeout_ms=timeout)
            out = pb.DeleteAclsResponse()
            for r in results:
                item = out.filter_results.add(error_code=int(r.error.code), error_message=r.error.message or "")
                for a in r.matching:
                    item.matching_acls.add(
                        resource_type=a.resource_type,
                        resource_name=a.resource_name,
                        pattern_type=a.pattern_type,
                        principal=a.principal,
                        host=a.host,
                        operation=a.operation,
                        permission_type=a.permission_type,
                    )
            return out

        def summarize(response: pb.DeleteAclsResponse) -> dict[str, Any]:
            return {
                "deleted": sum(len(r.matching_acls) for r in response.filter_results),
                "failed": sum(1 for r in response.filter_results if r.error_code),
            }

        return await self._serve(
            "DeleteAcls",
            pb.DeleteAclsResponse,
            call,
            summarize,
            filters=[filter_text(f) for f in filters[:10]],
        )
