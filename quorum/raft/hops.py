"""Where a commit's time goes: one append at a time is followed through its hops, on the leader and on a follower.

Sampling one append at a time keeps this O(1) per event: under a sequential client every append is traced; under
many in flight, one in each round of replication. Times are monotonic nanoseconds, summed per stage; a reader
divides by the count (the Prometheus counters ``pykraft_raft_commit_stage_seconds_total`` and the samples). Each
stage's times also go to a histogram (``pykraft_raft_commit_stage_duration_seconds``): a mean hides the rare slow
commit that makes a client's p99.
"""

from __future__ import annotations

from collections.abc import Callable

from quorum.histogram import Histogram

# Leader stages, each measured from the append: the records are in the log (the batch was written), the leader's
# fsync covers them, a follower's next fetch says it holds them durably, the high watermark passed them.
LEADER_STAGES = ("written", "flushed", "replicated", "committed")
# Follower stages, from the arrival of a fetch answer with records: its fsync covers them, its next fetch leaves.
FOLLOWER_STAGES = ("flushed", "fetch_sent")


class StageTrace:
    """Follows one item (an offset) at a time through named stages; sums each stage's time since the start."""

    def __init__(self, stages: tuple[str, ...], clock: Callable[[], int]) -> None:
        self.stages = stages
        self.clock = clock
        self.seconds = dict.fromkeys(stages, 0.0)
        self.histograms = {stage: Histogram() for stage in stages}
        self.samples = 0
        self._offset: int | None = None  # the offset followed (traced once past it), and when it started
        self._started = 0
        self._reached: dict[str, int] = {}

    def start(self, offset: int) -> None:
        if self._offset is None:
            self._offset, self._started, self._reached = offset, self.clock(), {}

    def passed(self, stage: str, end_offset: int) -> None:
        """Something reached ``stage`` for every offset below ``end_offset``."""
        if self._offset is None or end_offset <= self._offset or stage in self._reached:
            return
        self._reached[stage] = self.clock() - self._started
        if len(self._reached) == len(self.stages):
            for name, ns in self._reached.items():
                self.seconds[name] += ns / 1e9
                self.histograms[name].observe(ns / 1e9)
            self.samples += 1
            self._offset = None

    def abandon(self) -> None:
        """The followed item will not finish (a new leader, a truncation): follow the next one."""
        self._offset = None
