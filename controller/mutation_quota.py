"""Controller mutation quotas (Kafka's KIP-599: ControllerMutationQuotaManager, StrictControllerMutationQuota).

``controller_mutation_rate`` bounds the partitions a principal (user) and client id may create or delete per
second. The value comes from the committed client quotas (``controller/quota_control.py``), resolved in Kafka's
order (DefaultQuotaCallback): user+client-id, user+default client-id, user, default user+client-id, default
user+default client-id, default user, client-id, default client-id; no match = no limit. The level that matched
decides who shares a bucket, as Kafka's metric tags do: (user, client-id) for the levels naming both, (user, "")
for the user-only levels, ("", client-id) for the client-only ones; so a default user quota gives every user a
bucket of their own.

Each bucket is Kafka's TokenBucket: it holds at most ``burst = rate x controller.quota.window.num (11) x
controller.quota.window.size.seconds (1)`` tokens (node settings with Kafka's names and defaults), refills at
``rate`` per second, starts full, and a recording may take it below zero (debt). A request's quota is strict
(Kafka's StrictControllerMutationQuota, used by CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): each
topic's partition count is checked then recorded;
while the bucket is in debt the topic is refused with THROTTLING_QUOTA_EXCEEDED, and the throttle time is how long
the bucket needs to climb back to zero, ``-tokens / rate`` seconds. The buckets are this node's own memory: a new
controller starts with full buckets, as Kafka's.

:class:`MutationStats` counts what Kafka's per-user ``ControllerMutation`` sensors measure (throttled requests and
their throttle time, partitions recorded), summed over every principal: a label per principal would let any client
id or certificate name add series to a scrape.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from controller.quota_control import CLIENT_ID, CONTROLLER_MUTATION_RATE, USER, Entity

WINDOW_NUM = 11  # controller.quota.window.num (Kafka's default)
WINDOW_SECONDS = 1  # controller.quota.window.size.seconds (Kafka's default)
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

    def refill(self, rate: float, burst_s: float, now_s: float) -> float:
        burst = rate * burst_s
        self.tokens = min(burst, self.tokens + rate * max(0.0, now_s - self.last_s))
        self.last_s = now_s
        return burst


@dataclass(slots=True)
class MutationStats:
    """Summed over every bucket (no principal labels: bounded series)."""

    throttled_requests: int = 0  # requests with at least one topic refused THROTTLING_QUOTA_EXCEEDED
    throttled_topics: int = 0
    throttle_time_ms: int = 0  # the throttle times those requests were answered with, summed
    recorded_partitions: float = 0.0  # partitions recorded into limited buckets (refunds taken back)


class ControllerMutationQuotas:
    """A node's buckets, by tags. ``clock``: seconds, monotonic (a test's own). ``window_num`` x ``window_s``
    (Kafka's controller.quota.window.num and controller.quota.window.size.seconds) is how many seconds of the rate
    a bucket holds."""

    def __init__(
        self,
        lookup: Lookup,
        clock: Callable[[], float] = time.monotonic,
        window_num: int = WINDOW_NUM,
        window_s: int = WINDOW_SECONDS,
    ) -> None:
        if window_num < 1 or window_s < 1:
            raise ValueError(
                f"controller.quota.window.num ({window_num}) and controller.quota.window.size.seconds ({window_s}) "
                "must be at least 1"
            )
        self.lookup = lookup
        self.clock = clock
        self.burst_s = float(window_num * window_s)
        self.buckets: dict[Tags, TokenBucket] = {}
        self.stats = MutationStats()
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
            b = self.buckets[tags] = TokenBucket(rate * self.burst_s, now_s)
        return b

    def _drop_full(self) -> None:
        now = self.clock()
        for tags, b in list(self.buckets.items()):
            if b.tokens >= 0 and now - b.last_s > self.burst_s * 60:
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
        burst = b.refill(self.rate, self._quotas.burst_s, now)
        if b.tokens < 0:
            self.throttle_time_ms = max(1, round(-b.tokens / self.rate * 1000))
            return False
        b.tokens = min(burst, b.tokens - permits)
        self._quotas.stats.recorded_partitions += permits
        return True

    def throttled(self, topics: int) -> None:
        """Count one request of which ``topics`` were refused, answered with :attr:`throttle_time_ms`."""
        stats = self._quotas.stats
        stats.throttled_requests += 1
        stats.throttled_topics += topics
        stats.throttle_time_ms += self.throttle_time_ms

    def refund(self, permits: float) -> None:
        """Give back what a topic the controller then refused had recorded (Kafka records only topics that pass
        validation; this node checks the quota before the controller validates)."""
        if not self.limited or permits <= 0:
            return
        assert self.tags is not None
        now = self._quotas.clock()
        b = self._quotas.bucket(self.tags, self.rate, now)
        burst = b.refill(self.rate, self._quotas.burst_s, now)
        b.tokens = min(burst, b.tokens + permits)
        self._quotas.stats.recorded_partitions -= permits
