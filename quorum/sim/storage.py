"""In-memory log and election store with crash semantics: a crash keeps what was flushed, and perhaps some of what
was not; with :class:`~quorum.sim.faults.CrashPoints` a node can also die inside ``append``, ``truncate_to`` and
``write`` (raising :class:`~quorum.sim.faults.CrashPoint`)."""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from quorum.log.batch import read_batch
from quorum.log.epoch_cache import EpochCache
from quorum.log.quorum_state import ElectionState
from quorum.sim.faults import CrashPoint, CrashPoints


@dataclass
class SimBatch:
    base_offset: int
    last_offset: int
    epoch: int
    data: bytes
    chain: bytes  # hash of this batch and every batch before it: equal chains mean equal prefixes
    durable: bool = False


@dataclass(frozen=True)
class Appended:
    base_offset: int
    last_offset: int


class SimLog:
    """A RaftLog kept in memory. ``on_append`` lets the harness check log matching as batches arrive."""

    def __init__(
        self, on_append: Callable[[SimBatch], None] | None = None, crash_points: CrashPoints | None = None
    ) -> None:
        self.batches: list[SimBatch] = []
        self._bases: list[int] = []
        self.epochs = EpochCache()
        self.on_append = on_append
        self.crash_points = crash_points

    @property
    def start_offset(self) -> int:
        return 0

    @property
    def end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0

    @property
    def last_epoch(self) -> int:
        return self.batches[-1].epoch if self.batches else 0

    @property
    def durable_end(self) -> int:
        end = 0
        for b in self.batches:
            if not b.durable:
                break
            end = b.last_offset + 1
        return end

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.end_offset)

    def batch_ending_at(self, end: int) -> SimBatch | None:
        """The batch whose last offset is ``end - 1``, if the log has a batch boundary there."""
        i = bisect.bisect_right(self._bases, end - 1) - 1
        if i >= 0 and self.batches[i].last_offset == end - 1:
            return self.batches[i]
        return None

    def read(self, offset: int, max_bytes: int) -> tuple[bytes, int]:
        i = bisect.bisect_right(self._bases, offset) - 1
        if offset >= self.end_offset or i < 0:
            return b"", offset
        out, size, nxt = [], 0, offset
        for b in self.batches[i:]:
            if out and size + len(b.data) > max_bytes:
                break
            out.append(b.data)
            size += len(b.data)
            nxt = b.last_offset + 1
        return b"".join(out), nxt

    def append(self, batch: bytes, epoch: int | None = None) -> Appended:
        parsed = read_batch(batch)
        if parsed.size != len(batch):
            raise ValueError("append takes one batch")
        base = self.end_offset
        if parsed.base_offset != base or (epoch is not None and epoch != parsed.epoch):
            batch = parsed.with_offset(base, epoch)
        epoch = parsed.epoch if epoch is None else epoch
        if epoch < self.last_epoch:
            raise ValueError(f"batch epoch {epoch} is below the log's last epoch {self.last_epoch}")
        last = base + parsed.last_offset_delta
        prev = self.batches[-1].chain if self.batches else b""
        entry = SimBatch(base, last, epoch, batch, hashlib.blake2b(prev + batch, digest_size=16).digest())
        self.batches.append(entry)
        self._bases.append(base)
        self.epochs.assign(epoch, base)
        if self.on_append is not None:
            self.on_append(entry)
        if self.crash_points is not None and self.crash_points.hit("append"):
            raise CrashPoint  # appended, not flushed: the crash keeps it or not (see crash)
        return Appended(base, last)

    def truncate_to(self, offset: int) -> int:
        """Durable at once (the real log ftruncates and fsyncs)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        while i >= 0 and self.batches[i].last_offset >= offset:
            i -= 1
        if self.crash_points is not None and self.crash_points.hit("truncate"):
            # The real log removes whole segments last-first, each removal durable before the next: a crash
            # leaves it cut anywhere from its old end (nothing done) down to the target (all done).
            self._cut(self.crash_points.rng.randint(i + 1, len(self.batches)))
            raise CrashPoint
        self._cut(i + 1)
        return self.end_offset

    def _cut(self, keep: int) -> None:
        del self.batches[keep:], self._bases[keep:]
        self.epochs.truncate_from_end(self.end_offset)

    def begin_flush(self) -> tuple[int, list[SimBatch]]:
        """What a flush started now will make durable: ``(end offset, the batches)``."""
        return self.end_offset, [b for b in self.batches if not b.durable]

    def complete_flush(self, batches: list[SimBatch]) -> None:
        for b in batches:
            b.durable = True  # a batch truncated meanwhile is no longer in the log: marking it is harmless

    @property
    def unflushed(self) -> int:
        """How many batches past the durable prefix a crash could lose."""
        return sum(1 for b in self.batches if not b.durable)

    def crash(self, survivors: int = 0) -> None:
        """Lose what was not flushed, except the first ``survivors`` unflushed batches: the OS may have written
        them before the crash (a legal outcome the core must tolerate). What survives is on disk now."""
        keep = 0
        for b in self.batches:
            if not b.durable:
                break
            keep += 1
        keep = min(keep + survivors, len(self.batches))
        del self.batches[keep:], self._bases[keep:]
        for b in self.batches:
            b.durable = True
        self.epochs = EpochCache()
        for b in self.batches:
            self.epochs.assign(b.epoch, b.base_offset)


class SimStore:
    """The quorum-state file: ``write`` is atomic and durable once it returns. A crash point in it dies before or
    after the write, never half-way (the real file is replaced by a rename)."""

    def __init__(self, crash_points: CrashPoints | None = None) -> None:
        self.state: ElectionState | None = None
        self.history: list[ElectionState] = []
        self.crash_points = crash_points

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        before = after = False
        if self.crash_points is not None and self.crash_points.hit_write(state):
            before = self.crash_points.rng.random() < 0.5
            after = not before
        if before:
            raise CrashPoint  # died before the rename: the old state stays
        self.state = state
        self.history.append(state)
        if after:
            raise CrashPoint  # written, but the node dies before acting on it
