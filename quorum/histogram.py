"""A latency histogram cheap enough for the hot path: a bisect and two additions per observation, no lock, no
allocation. The node's /metrics exports it as a Prometheus histogram (``pykraft/metrics.py``) at scrape time.

prometheus-client's own Histogram takes a lock per bucket and per sum on every observation, and registers itself in
a registry; this one is plain data, owned by the Raft core or the controller it measures (several nodes share a
process in tests), and deterministic under the simulator (its times come from the caller)."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

# Seconds. A metadata quorum's latencies run from ~100 µs (a read answered from memory) to tens of seconds (an
# election under load, a request stuck behind a snapshot load): 17 bounds, 2.5x apart, cover both ends.
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)


@dataclass(slots=True)
class Histogram:
    """Counts per bucket (not cumulative; the last one is +Inf) and the sum of what was observed."""

    bounds: tuple[float, ...] = LATENCY_BUCKETS_S
    counts: list[int] = field(default_factory=list)
    sum: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # Prometheus buckets are "less than or equal"
        self.sum += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> tuple[list[tuple[str, float]], float]:
        """``([(le, cumulative count), ..., ("+Inf", count)], sum)``, as Prometheus wants them. Read from another
        thread (a scrape) while the loop observes: the copy keeps the buckets consistent with one another."""
        counts = list(self.counts)
        total = self.sum
        out: list[tuple[str, float]] = []
        running = 0
        for bound, n in zip((*map(str, self.bounds), "+Inf"), counts, strict=True):
            running += n
            out.append((bound, running))
        return out, total
