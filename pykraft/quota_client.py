"""The admin client's client quota methods (Kafka's Admin.alterClientQuotas / describeClientQuotas) and its
handling of KIP-599's throttling, part of :class:`pykraft.client.AdminClient`::

    from controller.quota_control import QuotaAlteration, QuotaOp, FilterComponent, MatchType

    [result] = await admin.alter_client_quotas(
        [QuotaAlteration([("user", "alice")], [QuotaOp("controller_mutation_rate", 10.0)])])
    quotas = await admin.describe_client_quotas([FilterComponent("user", MatchType.SPECIFIED)])
    # {(("user", "alice"),): {"controller_mutation_rate": 10.0}}

An entity is ``(type, name)`` pairs, ``name`` None for the default entity. Per-entry errors are results (ApiError
with Kafka's code and message); a request refused as a whole, and DescribeClientQuotas' errors, raise AdminError.

Throttling: CreateTopics, CreatePartitions and DeleteTopics answer the topics a controller mutation quota holds
back with THROTTLING_QUOTA_EXCEEDED and a ``throttle_time_ms``. With ``retry_on_quota_violation`` (the default,
as Kafka's AdminClient) the client waits that long and sends those topics again, until the call's deadline
(``timeout_ms``, else ``default_api_timeout_ms``); a wait that would pass it returns the throttled results as they
are.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from controller.quota_control import AlterQuotaResult, Entity, FilterComponent, QuotaAlteration, entity_of
from pykraft.api import controller_pb2 as pb
from quorum.errors import Errors

DEFAULT_CLIENT_ID = "pykraft-admin"
CLIENT_ID_METADATA = "client-id"  # gRPC metadata: Kafka's request header clientId


def entity_pb(entity: Sequence[tuple[str, str | None]], out: Any) -> None:
    """An entity's pairs into a repeated ClientQuotaEntityData (an absent name: the default entity)."""
    for t, n in entity:
        item = out.add(entity_type=t)
        if n is not None:
            item.entity_name = n


def _entity_pairs(entity: Any) -> list[tuple[str, str | None]]:
    return [(e.entity_type, e.entity_name if e.HasField("entity_name") else None) for e in entity]


class QuotaAdmin:
    """Mixed into AdminClient, which provides ``_call``, ``_check``, ``request_timeout_ms`` and
    ``default_api_timeout_ms``."""

    request_timeout_ms: int
    default_api_timeout_ms: int
    retry_on_quota_violation: bool = True
    throttle_waits = 0  # times this client waited out a throttle (for tests and tools)

    if TYPE_CHECKING:

        async def _call(self, method: str, request: Any, timeout_ms: int | None = None) -> Any: ...

        @staticmethod
        def _check(response: Any, method: str) -> None: ...

    # -- throttling ----------------------------------------------------------------------------------------------

    def _quota_deadline(self, timeout_ms: int | None) -> float:
        return time.monotonic() + (timeout_ms or self.default_api_timeout_ms) / 1000

    def _remaining_ms(self, deadline: float, timeout_ms: int | None) -> int | None:
        """A retry's own timeout: what is left of the call's (at least 1 ms); None when the call had none."""
        return None if timeout_ms is None else max(1, int((deadline - time.monotonic()) * 1000))

    async def _wait_throttle(self, throttled: int, throttle_time_ms: int, deadline: float) -> bool:
        """Wait out the throttle before resending ``throttled`` topics: False (no wait) when there are none,
        retries are off, the server named no wait, or the wait would pass the deadline."""
        if not throttled or not self.retry_on_quota_violation or throttle_time_ms <= 0:
            return False
        wait = throttle_time_ms / 1000
        if time.monotonic() + wait >= deadline:
            return False
        self.throttle_waits += 1
        await asyncio.sleep(wait)
        return True

    @staticmethod
    def _throttled(code: int) -> bool:
        return code == Errors.THROTTLING_QUOTA_EXCEEDED

    # -- AlterClientQuotas / DescribeClientQuotas ----------------------------------------------------------------

    async def alter_client_quotas(
        self, alterations: list[QuotaAlteration], *, validate_only: bool = False, timeout_ms: int | None = None
    ) -> list[AlterQuotaResult]:
        from pykraft.acl_client import _api_error

        request = pb.AlterClientQuotasRequest(
            validate_only=validate_only, timeout_ms=timeout_ms or self.request_timeout_ms
        )
        for a in alterations:
            entry = request.entries.add()
            entity_pb(a.entity, entry.entity)
            for op in a.ops:
                entry.ops.add(key=op.key, value=op.value, remove=op.remove)
        response = await self._call("AlterClientQuotas", request, timeout_ms)
        self._check(response, "AlterClientQuotas")
        return [
            AlterQuotaResult(_entity_pairs(e.entity), _api_error(e.error_code, e.error_message))
            for e in response.entries
        ]

    async def describe_client_quotas(
        self, components: list[FilterComponent], *, strict: bool = False, timeout_ms: int | None = None
    ) -> dict[Entity, dict[str, float]]:
        request = pb.DescribeClientQuotasRequest(strict=strict, timeout_ms=timeout_ms or self.request_timeout_ms)
        for c in components:
            item = request.components.add(entity_type=c.entity_type, match_type=int(c.match_type))
            if c.match is not None:
                item.match = c.match
        response = await self._call("DescribeClientQuotas", request, timeout_ms)
        self._check(response, "DescribeClientQuotas")
        return {entity_of(_entity_pairs(e.entity)): {v.key: v.value for v in e.values} for e in response.entries}
