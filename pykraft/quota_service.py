"""The Controller service's client quota requests (AlterClientQuotas, DescribeClientQuotas, Kafka's over gRPC) and
KIP-599's enforcement for CreateTopics, CreatePartitions and DeleteTopics.

Kafka's rules live in the controller (``controller/quota_control.py``) and come back per entry with Kafka's codes
and messages. With authorization on, AlterClientQuotas needs ALTER_CONFIGS on the CLUSTER and DescribeClientQuotas
DESCRIBE_CONFIGS on it (CLUSTER_AUTHORIZATION_FAILED for the request), as Kafka's ControllerApis.

Enforcement (:class:`MutationThrottle`): each request gets its principal's and client id's strict quota
(``controller/mutation_quota.py``); the topics are checked in request order, each recording its partition count
(created, added or deleted); a topic met while the bucket is in debt is refused with THROTTLING_QUOTA_EXCEEDED and
does not reach the controller, and the response's ``throttle_time_ms`` says how long to wait. Kafka records a topic
only once it passed the controller's validation; here the check comes first, so a topic the controller then
refuses gives its partitions back. The principal is the connection's (``User:ANONYMOUS`` on plaintext), whether
authorization is on or not; the client id is the gRPC metadata ``client-id`` (the AdminClient sends its own),
empty when absent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import grpc

from controller.authorizer import AclOperation as Op
from controller.mutation_quota import StrictMutationQuota
from controller.quota_control import FilterComponent, QuotaAlteration, QuotaOp
from pykraft.api import controller_pb2 as pb
from pykraft.authorization import Caller
from pykraft.quota_client import CLIENT_ID_METADATA, entity_pb
from pykraft.security.principal import NoMatchingRule, SslPrincipalMapper, principal_of
from pykraft.servicer_part import ServicerPart
from quorum.errors import Errors

if TYPE_CHECKING:
    from controller.requests import DeleteTopicState, NewPartitions

THROTTLED_MESSAGE = "The throttling quota has been exceeded."  # Kafka's Errors.THROTTLING_QUOTA_EXCEEDED message
MAX_CLIENT_ID = 256


def client_id_of(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_METADATA and isinstance(value, str):
            return value[:MAX_CLIENT_ID]  # a bucket key: bounded
    return ""


class MutationThrottle:
    """One request's partition-mutation quota: which topics pass, which are throttled, and the wait to report."""

    def __init__(self, quota: StrictMutationQuota) -> None:
        self.quota = quota
        self.charged: dict[int, int] = {}  # request index -> partitions recorded

    def admit(self, permits: Sequence[int]) -> set[int]:
        """The indexes refused (THROTTLING_QUOTA_EXCEEDED); each admitted one's permits are recorded."""
        throttled: set[int] = set()
        if not self.quota.limited:
            return throttled
        for i, n in enumerate(permits):
            if self.quota.record(n):
                self.charged[i] = n
            else:
                throttled.add(i)
        if throttled:
            self.quota.throttled(len(throttled))
        return throttled

    def refund(self, index: int) -> None:
        self.quota.refund(self.charged.pop(index, 0))

    def refund_named(self, name: str | None, names: Sequence[str | None]) -> None:
        """Refund every admitted topic of the request called ``name`` (the controller answers a name once)."""
        if self.charged:
            for i, n in enumerate(names):
                if n == name:
                    self.refund(i)

    @property
    def throttle_time_ms(self) -> int:
        return self.quota.throttle_time_ms


class QuotaServicer(ServicerPart):
    """Part of :class:`pykraft.service.ControllerService` (which provides ``controller``, ``_serve``, ``_caller``
    and ``_quota_mapper``)."""

    _quota_mapper: SslPrincipalMapper

    if TYPE_CHECKING:

        def _timeout(self, timeout_ms: int) -> int | None: ...

    def _throttle(self, context: grpc.aio.ServicerContext, caller: Caller) -> MutationThrottle:
        quotas = self.controller.mutation_quotas
        ctl = self.controller
        # Only the active controller enforces (another node answers NOT_CONTROLLER); no quota at all: no principal
        # to work out. A validate_only request is recorded too, as Kafka's controller does.
        if not ctl.active or not ctl.quotas.quotas.committed():
            return MutationThrottle(quotas.unlimited)
        principal = caller.principal
        if not caller.enforced:  # authorization off: the connection's principal all the same
            try:
                principal = str(principal_of(context, self._quota_mapper))
            except NoMatchingRule:
                principal = "User:ANONYMOUS"
        return MutationThrottle(quotas.quota_for(principal, client_id_of(context)))

    def _partitions_of(self, topic: DeleteTopicState) -> int:
        """A topic's partitions now (0 when unknown: the controller answers it), as DeleteTopics records them."""
        replication = self.controller.replication
        topic_id = topic.topic_id if topic.topic_id is not None else replication.topics_by_name.get(topic.name or "")
        if topic_id is None or topic_id not in replication.topics:
            return 0
        return replication.partition_count(topic_id)

    def _added_partitions(self, topic: NewPartitions) -> int:
        """The partitions CreatePartitions would add (0 when none: the controller answers it)."""
        replication = self.controller.replication
        topic_id = replication.topics_by_name.get(topic.name)
        if topic_id is None:
            return 0
        return max(0, topic.count - replication.partition_count(topic_id))

    async def AlterClientQuotas(
        self, request: pb.AlterClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterClientQuotasResponse:
        async def call() -> pb.AlterClientQuotasResponse:
            caller = await self._caller(context)
            caller.require_cluster(Op.ALTER_CONFIGS)
            alterations = [
                QuotaAlteration(
                    [(e.entity_type, e.entity_name if e.HasField("entity_name") else None) for e in entry.entity],
                    [QuotaOp(o.key, o.value, o.remove) for o in entry.ops],
                )
                for entry in request.entries
            ]
            results = await self.controller.alter_client_quotas(
                alterations, request.validate_only, timeout_ms=self._timeout(request.timeout_ms)
            )
            out = pb.AlterClientQuotasResponse()
            for r in results:
                item = out.entries.add(error_code=int(r.error.code), error_message=r.error.message or "")
                entity_pb(r.entity, item.entity)
            return out

        return await self._serve(
            "AlterClientQuotas",
            pb.AlterClientQuotasResponse,
            call,
            lambda r: {"results": [e.error_code for e in r.entries[:20]]},
            entries=len(request.entries),
            validate_only=request.validate_only,
        )

    async def DescribeClientQuotas(
        self, request: pb.DescribeClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeClientQuotasResponse:
        async def call() -> pb.DescribeClientQuotasResponse:
            caller = await self._caller(context, read=True)
            caller.require_cluster(Op.DESCRIBE_CONFIGS)
            components = [
                FilterComponent(c.entity_type, c.match_type, c.match if c.HasField("match") else None)
                for c in request.components
            ]
            result = await self.controller.describe_client_quotas(
                components, request.strict, timeout_ms=self._timeout(request.timeout_ms)
            )
            out = pb.DescribeClientQuotasResponse(
                error_code=int(result.error.code), error_message=result.error.message or ""
            )
            for entity, values in result.entries:
                item = out.entries.add()
                entity_pb(entity, item.entity)
                for key, value in values:
                    item.values.add(key=key, value=value)
            return out

        return await self._serve(
            "DescribeClientQuotas",
            pb.DescribeClientQuotasResponse,
            call,
            lambda r: {"entries": len(r.entries)},
            components=len(request.components),
        )


def throttled_error() -> tuple[int, str]:
    return int(Errors.THROTTLING_QUOTA_EXCEEDED), THROTTLED_MESSAGE
