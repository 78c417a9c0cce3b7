"""Controller mutation quotas (Kafka's KIP-599: ControllerMutationQuotaManager, StrictControllerMutationQuota).

``controller_mutation_rate`` bounds the partitions a principal (user) and client id may create or delete per
second. The value comes from the committed client quotas (``controller/quota_control.py``), resolved in Kafka's
order (DefaultQuotaCallback): user+client-id, user+default client-id, user, default user+client-id, default
user+default client-id, default user, client-id, default client-id; no match = no limit. The level that matched
decides who shares a bucket, as Kafka's metric tags do: (user, client-id) for the levels naming both, (user, "")
for the user-only levels, ("", client-id) for the client-only ones; so a default user quota gives every user a
bucket of their own.

Each bucket is Kafka's TokenBucket: it holds at most ``burst = rate x controller.quota.window.num (11) x
controller.quota.window.size.seconds (1)`` tokens, refills at ``rate`` per second, starts full, and a recording
may take it below zero (debt). A request's quota is strict (Kafka's StrictControllerMutationQuota, used by
CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): each topic's partition count is checked then recorded;
while the bucket is in debt the topic is refused with THROTTLING_QUOTA_EXCEEDED, and the throttle time is how long
the bucket needs to climb back to zero, ``-tokens / rate`` seconds. The buckets are this node's own memory: a new
controller starts with full buckets, as Kafka's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from controller.quota_control import CLIENT_ID, CONTROLLER_MUTATION_RATE, USER, Entity

WINDOW_NUM = 11  # controller.quota.window.num
WINDOW_SECONDS = 1.0  # controller.quota.window.size.seconds
MAX_IDLE_BUCKETS = 10_000  # past this many buckets, full ones are dropped (Kafka expires idle sensors after 1 h)

Lookup = Callable[[Entity, str], "float | None"]
Tags = tuple[str, str]  # (user, client id): who shares a bucket


def user_name(principal: str) -> str:
    """A principal's name (``User:alice`` -> ``alice``), as Kafka's quotas take ``principal.getName``."""
    kind, sep, name = principal.partition(":")
    return name if sep else kind


def resolve(
    lookup: Lookup, user: str, client_id: str, key: str = CONTROLLER_MUTATION_RATE
) -> tuple[Tags, float] | None:
    """Kafka's DefaultQuotaCallback order: the first entity with ``key`` set, and the bucket tags it implies."""
    both = (user, client_id)
    levels: tuple[tuple[Entity, Tags], ...] = (
        (((CLIENT_ID, client_id), (USER, user)), both),
        (((CLIENT_ID, None), (USER, user)), both),
        (((USER, user),), (user, "")),
        (((CLIENT_ID, client_id), (USER, None)), both),
        (((CLIENT_ID, None), (USER, None)), both),
        (((USER, None),), (user, "")),
        (((CLIENT_ID, client_id),), ("", client_id)),
        (((CLIENT_ID, None),), ("", client_id)),
    )
    for entity, tags in levels:
        value = lookup(entity, key)
        if value is not None:
            return tags, value
    return None


@dataclass(slots=True)
class TokenBucket:
    tokens: float
    last_s: float

    def refill(self, rate: float, now_s: float) -> float:
        burst = rate * WINDOW_NUM * WINDOW_SECONDS
        self.tokens = min(burst, self.tokens + rate * max(0.0, now_s - self.last_s))
        self.last_s = now_s
        return burst


class ControllerMutationQuotas:
    """A node's buckets, by tags. ``clock``: seconds, monotonic (a test's own)."""

    def __init__(self, lookup: Lookup, clock: Callable[[], float] = time.monotonic) -> None:
        self.lookup = lookup
        self.clock = clock
        self.buckets: dict[Tags, TokenBucket] = {}
        self.unlimited = StrictMutationQuota(self, None, 0.0)

    def quota_for(self, principal: str, client_id: str) -> StrictMutationQuota:
        """The quota one request records into (unlimited when no entity sets ``controller_mutation_rate``)."""
        found = resolve(self.lookup, user_name(principal), client_id)
        if found is None:
            return StrictMutationQuota(self, None, 0.0)
        tags, rate = found
        if tags not in self.buckets and len(self.buckets) >= MAX_IDLE_BUCKETS:
            self._drop_full()
        return StrictMutationQuota(self, tags, rate)

    def bucket(self, tags: Tags, rate: float, now_s: float) -> TokenBucket:
        b = self.buckets.get(tags)
        if b is None:
            b = self.buckets[tags] = TokenBucket(rate * WINDOW_NUM * WINDOW_SECONDS, now_s)
        return b

    def _drop_full(self) -> None:
        now = self.clock()
        for tags, b in list(self.buckets.items()):
            if b.tokens >= 0 and now - b.last_s > WINDOW_NUM * WINDOW_SECONDS * 60:
                del self.buckets[tags]


class StrictMutationQuota:
    """One request's view of its bucket (Kafka's StrictControllerMutationQuota)."""

    def __init__(self, quotas: ControllerMutationQuotas, tags: Tags | None, rate: float) -> None:
        self._quotas = quotas
        self.tags = tags
        self.rate = rate
        self.throttle_time_ms = 0  # the last refusal's: how long until the bucket is out of debt

    @property
    def limited(self) -> bool:
        return self.tags is not None and self.rate > 0

    def record(self, permits: float) -> bool:
        """Check, then record ``permits`` (partitions): False, recording nothing, while the bucket is in debt."""
        if not self.limited:
            return True
        assert self.tags is not None
        now = self._quotas.clock()
        b = self._quotas.bucket(self.tags, self.rate, now)
        burst = b.refill(self.rate, now)
        if b.tokens < 0:
            self.throttle_time_ms = max(1, round(-b.tokens / self.rate * 1000))
            return False
        b.tokens = min(burst, b.tokens - permits)
        return True

    def refund(self, permits: float) -> None:
        """Give back what a topic the controller then refused had recorded (Kafka records only topics that pass
        validation; this node checks the quota before the controller validates)."""
        if not self.limited or permits <= 0:
            return
        assert self.tags is not None
        now = self._quotas.clock()
        b = self._quotas.bucket(self.tags, self.rate, now)
        burst = b.refill(self.rate, now)
        b.tokens = min(burst, b.tokens + permits)
