"""Kafka's replication throttles (KIP-73) for the simulated data plane, and a per-agent disk rate.

Which replicas are throttled comes from two topic configs, each ``*`` or a list of ``partition:broker`` entries, read
by every broker for its own id (Kafka's TopicConfigHandler keeps only the entries naming this broker):

- ``follower.replication.throttled.replicas`` on the fetching broker: an entry ``p:<own id>`` (or ``*``) throttles
  this broker's fetches of partition ``p`` while this replica is out of the ISR (Kafka's shouldFollowerThrottle);
- ``leader.replication.throttled.replicas`` on the leader: an entry ``p:<own id>`` (or ``*``) throttles what this
  broker sends for partition ``p`` to followers out of the ISR (Kafka's shouldLeaderThrottle).

How fast comes from the broker configs ``follower.replication.throttled.rate`` and
``leader.replication.throttled.rate`` (bytes per second for all throttled partitions together; Long.MAX_VALUE:
unthrottled). As in Kafka the bytes of every *listed* partition count against the quota, in the ISR or not, but
only out-of-ISR replicas are ever held back. Each rate is a :class:`TokenBucket` with one second of burst: a
throttled fetch asks for (or a leader sends) no more than the bucket holds, so the long-run rate is the configured
one even when it is below replica.fetch.max.bytes per second. A throttled replica waits until the bucket holds a
tenth of a second's worth (or all it lacks) rather than creep a message per round trip.

Pure: every method that depends on time takes ``now_ms``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import structlog

log = structlog.get_logger("pykraft.replica")

UNLIMITED = (1 << 63) - 1  # Long.MAX_VALUE: Kafka's "no throttle"
CHUNK_S = 0.1  # a throttled replica moves at least this long's worth of its rate per fetch (or all it lacks)
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
BROKER_KEYS = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_KEYS = (LEADER_REPLICAS, FOLLOWER_REPLICAS)


class TokenBucket:
    """Bytes per second with ``burst_s`` seconds of burst (at least ``min_burst`` bytes, so one message fits).

    ``take`` records bytes moved (or reserves them: ``give_back`` returns what did not move); it may leave the
    bucket in debt (down to one burst), which later traffic pays back: bytes that had to move anyway (a listed
    replica in the ISR) still count against the rate, as in Kafka. A bucket that becomes limited starts empty."""

    def __init__(self, rate: int = UNLIMITED, now_ms: int = 0, burst_s: float = 1.0, min_burst: int = 0) -> None:
        self.burst_s = burst_s
        self.min_burst = min_burst
        self.rate = UNLIMITED
        self.tokens = 0.0
        self.updated_ms = now_ms
        self.set_rate(rate, now_ms)

    @property
    def unlimited(self) -> bool:
        return self.rate >= UNLIMITED

    @property
    def capacity(self) -> float:
        return max(self.rate * self.burst_s, float(self.min_burst))

    def _refill(self, now_ms: int) -> None:
        if now_ms > self.updated_ms and not self.unlimited:
            self.tokens = min(self.capacity, self.tokens + (now_ms - self.updated_ms) * self.rate / 1000)
        self.updated_ms = max(self.updated_ms, now_ms)

    def set_rate(self, rate: int, now_ms: int) -> None:
        rate = max(0, min(int(rate), UNLIMITED))
        self._refill(now_ms)
        was_unlimited = self.unlimited
        self.rate = rate
        self.tokens = 0.0 if self.unlimited or was_unlimited else min(self.tokens, self.capacity)

    def available(self, now_ms: int) -> int:
        """Bytes that may move now (UNLIMITED when unthrottled)."""
        if self.unlimited:
            return UNLIMITED
        self._refill(now_ms)
        return max(0, int(self.tokens))

    def take(self, n: int, now_ms: int) -> None:
        if self.unlimited or n <= 0:
            return
        self._refill(now_ms)
        self.tokens = max(-self.capacity, self.tokens - n)

    def min_grant(self, want: int, unit: int) -> int:
        """The least worth moving for a replica that lacks ``want`` bytes: a tenth of a second's worth, at least one
        ``unit`` (a message), at most ``want``."""
        if self.unlimited:
            return min(want, unit)
        return min(want, max(unit, int(self.rate * CHUNK_S) // unit * unit))

    def give_back(self, n: int) -> None:
        """Return bytes taken ahead (a reservation) that did not move."""
        if not self.unlimited and n > 0:
            self.tokens = min(self.capacity, self.tokens + n)

    def wait_ms(self, n: int, now_ms: int) -> int:
        """Milliseconds until ``n`` bytes are available (0: now)."""
        if self.unlimited:
            return 0
        self._refill(now_ms)
        missing = min(float(n), self.capacity) - self.tokens
        if missing <= 0:
            return 0
        if self.rate == 0:
            return UNLIMITED
        return int(missing * 1000 / self.rate) + 1


@dataclass(frozen=True)
class ThrottledReplicas:
    """A ``*.replication.throttled.replicas`` value: ``*`` (every replica) or ``partition:broker`` entries."""

    all: bool = False
    entries: frozenset[tuple[int, int]] = frozenset()

    @classmethod
    def parse(cls, value: str | None) -> ThrottledReplicas:
        """Kafka's parsing: ``*`` alone means all; entries are ``p:b`` with surrounding spaces allowed. Entries that
        do not parse are skipped (the controller refuses them when they are set)."""
        if value is None:
            return NONE
        items = [item.strip() for item in value.split(",") if item.strip()]
        if items == ["*"]:
            return cls(all=True)
        entries = set()
        for item in items:
            partition, colon, broker = item.partition(":")
            if colon and partition.strip().isdigit() and broker.strip().isdigit():
                entries.add((int(partition), int(broker)))
        return cls(entries=frozenset(entries))

    def covers(self, partition: int, broker_id: int) -> bool:
        return self.all or (partition, broker_id) in self.entries

    def partitions_of(self, broker_id: int) -> list[int] | str:
        """What this broker keeps of the value (Kafka's markThrottled): ``*`` or its partitions."""
        return "*" if self.all else sorted(p for p, b in self.entries if b == broker_id)

    def __bool__(self) -> bool:
        return self.all or bool(self.entries)


NONE = ThrottledReplicas()


def parse_rate(value: str | None) -> int:
    """A ``*.replication.throttled.rate`` value; absent or not a number: unthrottled."""
    try:
        return max(0, min(int(value), UNLIMITED)) if value is not None else UNLIMITED
    except ValueError:
        return UNLIMITED


def rate_text(rate: int) -> str | int:
    return "unlimited" if rate >= UNLIMITED else rate


@dataclass
class ThrottleCounters:
    leader_throttled_bytes: int = 0  # bytes sent to throttled followers (out of the ISR, listed)
    follower_throttled_bytes: int = 0  # bytes fetched for throttled replicas (out of the ISR, listed)
    follower_skips: int = 0  # times a throttled partition was left out of a fetch for want of quota
    leader_holds: int = 0  # times a leader answered a throttled follower with no records for want of quota
    disk_holds: int = 0  # times a partition was left out of a fetch for want of disk rate


@dataclass
class ReplicationThrottles:
    """What one broker knows of the throttle configs, and its buckets: leader, follower, and the disk rate (all
    bytes appended as a follower)."""

    broker_id: int
    now_ms: int = 0
    disk_rate: int = UNLIMITED
    min_burst: int = 0
    leader_replicas: dict[str, ThrottledReplicas] = field(default_factory=dict)
    follower_replicas: dict[str, ThrottledReplicas] = field(default_factory=dict)
    counters: ThrottleCounters = field(default_factory=ThrottleCounters)

    def __post_init__(self) -> None:
        self.leader = TokenBucket(UNLIMITED, self.now_ms, min_burst=self.min_burst)
        self.follower = TokenBucket(UNLIMITED, self.now_ms, min_burst=self.min_burst)
        self.disk = TokenBucket(self.disk_rate, self.now_ms, min_burst=self.min_burst)

    def set_rates(self, leader_rate: int, follower_rate: int, now_ms: int) -> bool:
        """The broker's effective rates (per-broker, else cluster default, else unlimited). True if one changed."""
        changed = False
        for name, bucket, rate in (
            (LEADER_RATE, self.leader, leader_rate),
            (FOLLOWER_RATE, self.follower, follower_rate),
        ):
            if rate != bucket.rate:
                log.info(
                    "replication_throttle_rate_changed",
                    config=name,
                    old=rate_text(bucket.rate),
                    new=rate_text(rate),
                    broker_id=self.broker_id,
                )
                bucket.set_rate(rate, now_ms)
                changed = True
        return changed

    def set_topic(self, topic: str, leader_value: str | None, follower_value: str | None) -> bool:
        """A topic's throttled-replica configs, as last described. True if what this broker keeps changed."""
        changed = False
        for name, table, value in (
            (LEADER_REPLICAS, self.leader_replicas, leader_value),
            (FOLLOWER_REPLICAS, self.follower_replicas, follower_value),
        ):
            new = ThrottledReplicas.parse(value)
            old = table.get(topic, NONE)
            if new.partitions_of(self.broker_id) != old.partitions_of(self.broker_id):
                log.info(
                    "replication_throttled_replicas_changed",
                    config=name,
                    topic=topic,
                    old=old.partitions_of(self.broker_id),
                    new=new.partitions_of(self.broker_id),
                    broker_id=self.broker_id,
                )
                changed = True
            if new:
                table[topic] = new
            else:
                table.pop(topic, None)
        return changed

    def retain(self, topics: Iterable[str]) -> None:
        """Forget the configs of topics this broker no longer holds a replica of."""
        keep = set(topics)
        for table in (self.leader_replicas, self.follower_replicas):
            for topic in [t for t in table if t not in keep]:
                del table[topic]

    def leader_listed(self, topic: str, partition: int) -> bool:
        """Kafka's leader quota isThrottled: this broker's entry for the partition (or ``*``) is listed."""
        r = self.leader_replicas.get(topic)
        return r is not None and r.covers(partition, self.broker_id)

    def follower_listed(self, topic: str, partition: int) -> bool:
        r = self.follower_replicas.get(topic)
        return r is not None and r.covers(partition, self.broker_id)
