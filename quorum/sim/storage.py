"""In-memory log and election store with crash semantics: a crash keeps what was flushed, and perhaps some of what
was not; with :class:`~quorum.sim.faults.CrashPoints` a node can also die inside ``append``, ``truncate_to``,
``install_snapshot`` and ``write`` (raising :class:`~quorum.sim.faults.CrashPoint`).

Snapshots: in the simulator the replicated state *is* the log prefix, so a snapshot's content is the concatenation
of every raw batch below its end offset. Snapshots are durable once taken or installed; :meth:`SimLog.clean`
deletes the batches they cover (the log then starts after offset 0) and older snapshots, and :meth:`SimLog.open`
(the restart) finishes an install that a crash interrupted, as the real log's open does.
"""

from __future__ import annotations

import bisect
import copy
import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from quorum.log.batch import CorruptBatchError, read_batch
from quorum.log.epoch_cache import EpochCache
from quorum.log.quorum_state import ElectionState
from quorum.log.snapshots import CorruptSnapshotError, SnapshotId
from quorum.sim.faults import CrashPoint, CrashPoints


def _chain(prev: bytes, batch: bytes) -> bytes:
    return hashlib.blake2b(prev + batch, digest_size=16).digest()


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


@dataclass(frozen=True)
class SnapshotIndex:
    """Where each batch of a snapshot's bytes ends: its end offset, the chain up to it, and its end position in the
    bytes (derived from the bytes; kept beside them so that lookups below the log start are cheap)."""

    ends: tuple[int, ...]
    chains: tuple[bytes, ...]
    positions: tuple[int, ...]

    def find(self, end: int) -> int | None:
        i = bisect.bisect_left(self.ends, end)
        return i if i < len(self.ends) and self.ends[i] == end else None


def index_snapshot(data: bytes, snapshot_id: SnapshotId) -> SnapshotIndex:
    """Validate a snapshot's bytes (contiguous batches from offset 0 to its end, epochs never falling, the last in
    its epoch) and index them; :class:`CorruptSnapshotError` names the first problem."""
    where = f"snapshot {snapshot_id}"
    ends: list[int] = []
    chains: list[bytes] = []
    positions: list[int] = []
    pos = expected = 0
    chain = b""
    epoch = -1
    while pos < len(data):
        try:
            batch = read_batch(data, pos, path=where)
        except CorruptBatchError as e:
            raise CorruptSnapshotError(where, pos, e.reason) from None
        if batch.base_offset != expected:
            raise CorruptSnapshotError(where, pos, f"base offset {batch.base_offset}, expected {expected}")
        if batch.epoch < epoch:
            raise CorruptSnapshotError(where, pos, f"epoch {batch.epoch} after epoch {epoch}")
        epoch, expected = batch.epoch, batch.next_offset
        chain = _chain(chain, data[pos : pos + batch.size])
        pos += batch.size
        ends.append(expected)
        chains.append(chain)
        positions.append(pos)
    if expected != snapshot_id.end_offset:
        raise CorruptSnapshotError(where, pos, f"the batches end at offset {expected}, not {snapshot_id.end_offset}")
    if epoch != snapshot_id.epoch:
        raise CorruptSnapshotError(where, pos, f"the last batch is in epoch {epoch}, not {snapshot_id.epoch}")
    return SnapshotIndex(tuple(ends), tuple(chains), tuple(positions))


class SimSnapshotInstall:
    """A snapshot arriving from the leader in chunks: in memory only (lost with the process) until installed."""

    def __init__(self, snapshot_id: SnapshotId) -> None:
        self.snapshot_id = snapshot_id
        self.data = bytearray()
        self.closed = False

    @property
    def size(self) -> int:
        return len(self.data)

    def write(self, position: int, data: bytes) -> None:
        if self.closed:
            raise ValueError(f"snapshot {self.snapshot_id}: written after it was installed or aborted")
        if position != len(self.data):
            raise ValueError(f"snapshot {self.snapshot_id}: chunk at byte {position}, expected {len(self.data)}")
        self.data += data

    def abort(self) -> None:
        self.closed = True
        self.data = bytearray()


class SimLog:
    """A RaftLog kept in memory. ``on_append`` lets the harness check log matching as batches arrive."""

    def __init__(
        self, on_append: Callable[[SimBatch], None] | None = None, crash_points: CrashPoints | None = None
    ) -> None:
        self.batches: list[SimBatch] = []  # from the log start offset to the log end
        self._bases: list[int] = []
        self.epochs = EpochCache()
        self._start = 0
        self._start_chain = b""  # the chain up to the log start (from the snapshot that covers it)
        self.snapshots: dict[SnapshotId, bytes] = {}  # durable: taken here or installed from a leader
        self._indexes: dict[SnapshotId, SnapshotIndex] = {}
        self.on_append = on_append
        self.crash_points = crash_points

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self._start

    @property
    def last_epoch(self) -> int:
        """The epoch of the last batch; for an empty log starting at a snapshot, the snapshot's (Kafka's
        ``lastFetchedEpoch``), however the log came to be empty (installed, cleaned, or truncated to its start)."""
        if self.epochs.latest_epoch >= 0:
            return self.epochs.latest_epoch
        at_start = self._snapshot_at_start()
        return at_start.epoch if at_start is not None else 0

    @property
    def durable_end(self) -> int:
        end = self._start  # offsets below the start are in a durable snapshot
        for b in self.batches:
            if not b.durable:
                break
            end = b.last_offset + 1
        return end

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The epoch cache's answer; for an epoch older than every one it holds, the snapshot at the log start
        answers for its own epoch, which ends where the log starts (Kafka's ``endOffsetForEpoch`` override): a
        follower that installed that snapshot fetches from the leader's log start in the snapshot's epoch."""
        found = self.epochs.end_offset_for(epoch, self.end_offset)
        if found[0] < 0 and (at_start := self._snapshot_at_start()) is not None and at_start.epoch <= epoch:
            entries = self.epochs.entries
            return at_start.epoch, entries[0][1] if entries else self.end_offset
        return found

    def _snapshot_at_start(self) -> SnapshotId | None:
        if self._start == 0:
            return None
        return max((s for s in self.snapshots if s.end_offset == self._start), default=None)

    def batch_ending_at(self, end: int) -> SimBatch | None:
        """The batch of the log whose last offset is ``end - 1``, if the log has a batch boundary there."""
        i = bisect.bisect_right(self._bases, end - 1) - 1
        if i >= 0 and self.batches[i].last_offset == end - 1:
            return self.batches[i]
        return None

    def chain_at(self, end: int) -> bytes | None:
        """The chain of everything this node holds below ``end`` if it holds a batch boundary there: from the log,
        or below the log start from the latest snapshot (a committed prefix a snapshot covers counts as held)."""
        if end > self._start:
            batch = self.batch_ending_at(end)
            return None if batch is None else batch.chain
        if end == 0:
            return b""
        if end == self._start:
            return self._start_chain
        found = self._covering()
        if found is None:
            return None
        index, _ = found
        i = index.find(end)
        return None if i is None else index.chains[i]

    def chains_between(self, low: int, high: int) -> Iterator[tuple[int, bytes]]:
        """``(end, chain)`` of every batch boundary in ``(low, high]`` this node holds (see :meth:`chain_at`)."""
        if low < self._start and (found := self._covering()) is not None:
            index, _ = found
            i = bisect.bisect_right(index.ends, low)
            while i < len(index.ends) and index.ends[i] <= min(high, self._start):
                yield index.ends[i], index.chains[i]
                i += 1
        for b in self.batches[max(bisect.bisect_right(self._bases, low) - 1, 0) :]:
            if b.last_offset + 1 > high:
                break
            if b.last_offset + 1 > low:
                yield b.last_offset + 1, b.chain

    def data(self) -> bytes:
        """Every batch this node holds from offset 0: the latest snapshot's below the log start, then the log's."""
        return self._prefix_bytes(0) + b"".join(b.data for b in self.batches)

    def data_from(self, offset: int) -> bytes:
        """The batches this node holds from the one holding ``offset`` to the log end."""
        if offset >= self._start:
            i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
            return b"".join(b.data for b in self.batches[i:])
        return self._prefix_bytes(offset) + b"".join(b.data for b in self.batches)

    def _prefix_bytes(self, offset: int) -> bytes:
        """The latest snapshot's bytes from the batch holding ``offset`` up to the log start."""
        if self._start == 0:
            return b""
        found = self._covering()
        if found is None:
            raise AssertionError(f"the log starts at {self._start} and no snapshot covers the offsets below it")
        index, sid = found
        i = bisect.bisect_right(index.ends, offset)
        begin = index.positions[i - 1] if i > 0 else 0
        end = index.positions[index.find(self._start)]  # type: ignore[index]  # _covering checked it
        return self.snapshots[sid][begin:end]

    def _covering(self) -> tuple[SnapshotIndex, SnapshotId] | None:
        """The latest snapshot with a batch boundary at the log start: it holds what the log no longer does."""
        for sid in sorted(self.snapshots, reverse=True):
            index = self._index(sid)
            if self._start == 0 or index.find(self._start) is not None:
                return index, sid
        return None

    def _index(self, sid: SnapshotId) -> SnapshotIndex:
        index = self._indexes.get(sid)
        if index is None:
            index = self._indexes[sid] = index_snapshot(self.snapshots[sid], sid)
        return index

    def read(self, offset: int, max_bytes: int) -> tuple[bytes, int]:
        if offset < self._start:
            raise ValueError(f"offset {offset} is below the log start offset {self._start}")
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
        prev = self.batches[-1].chain if self.batches else self._start_chain
        entry = SimBatch(base, last, epoch, batch, _chain(prev, batch))
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
        if offset >= self.end_offset:
            return self.end_offset
        if offset < self._start:
            raise ValueError(f"cannot truncate to {offset}, below the log start offset {self._start}")
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

    # -- snapshots -----------------------------------------------------------------------------------------------

    def latest_snapshot(self) -> SnapshotId | None:
        snapshots = self.snapshots
        if len(snapshots) == 1:  # the usual case once cleaned: no comparisons (checked after every step)
            return next(iter(snapshots))
        return max(snapshots) if snapshots else None

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        data = self.snapshots.get(snapshot_id)
        if data is None:
            return None
        if not 0 <= position <= len(data) or max_bytes < 0:
            raise ValueError(f"snapshot {snapshot_id}: cannot read {max_bytes} bytes at {position} of {len(data)}")
        return data[position : position + max_bytes], len(data)

    def begin_snapshot(self, snapshot_id: SnapshotId) -> SimSnapshotInstall:
        return SimSnapshotInstall(snapshot_id)

    def take_snapshot(self, end: int) -> SnapshotId | None:
        """Snapshot everything below ``end``, a batch boundary of the log (the harness picks one at or below the
        node's high watermark: only committed offsets). None if the latest snapshot reaches that far already."""
        latest = self.latest_snapshot()
        if end <= self._start or (latest is not None and end <= latest.end_offset):
            return None
        batch = self.batch_ending_at(end)
        if batch is None:
            raise ValueError(f"offset {end} is not a batch boundary of the log")
        upto = self.batches[: bisect.bisect_right(self._bases, batch.base_offset)]
        if self._start > 0:  # below the log start: what the latest snapshot holds
            found = self._covering()
            assert found is not None, f"no snapshot covers the offsets below the log start {self._start}"
            index, sid = found
            k = index.find(self._start)
            assert k is not None
            ends, chains, positions = index.ends[: k + 1], index.chains[: k + 1], index.positions[: k + 1]
            prefix = self.snapshots[sid][: positions[-1]]
        else:
            ends, chains, positions, prefix = (), (), (), b""
        data = prefix + b"".join(b.data for b in upto)
        pos = len(prefix)
        more_positions = []
        for b in upto:
            pos += len(b.data)
            more_positions.append(pos)
        sid = SnapshotId(end, batch.epoch)
        self.snapshots[sid] = data
        self._indexes[sid] = SnapshotIndex(
            ends + tuple(b.last_offset + 1 for b in upto),
            chains + tuple(b.chain for b in upto),
            positions + tuple(more_positions),
        )
        return sid

    def clean(self) -> None:
        """Retention, aggressive: delete every snapshot but the latest and every batch wholly below it (so that a
        lagging follower needs the snapshot)."""
        latest = self.latest_snapshot()
        if latest is None:
            return
        for sid in [s for s in self.snapshots if s < latest]:
            del self.snapshots[sid]
            self._indexes.pop(sid, None)
        keep_from = bisect.bisect_left([b.last_offset for b in self.batches], latest.end_offset)
        if keep_from == 0:
            return
        self._start_chain = self.batches[keep_from - 1].chain
        self._start = self.batches[keep_from - 1].last_offset + 1
        del self.batches[:keep_from], self._bases[:keep_from]
        self.epochs.truncate_from_start(self._start)

    def install_snapshot(self, install: SimSnapshotInstall, truncate: bool = True) -> int:
        """Validate the fetched bytes (:class:`CorruptSnapshotError`, leaving no trace), make the snapshot durable,
        then empty the log to start at its end, forgetting older snapshots; returns the new log end offset.
        ``truncate=False`` only registers the snapshot and keeps the log (a planted bug, never the real log)."""
        if install.closed:
            raise ValueError(f"snapshot {install.snapshot_id} was already installed or aborted")
        sid, data = install.snapshot_id, bytes(install.data)
        install.abort()
        index = index_snapshot(data, sid)
        points = self.crash_points
        dies = points is not None and points.hit("install")
        if points is not None and dies and points.rng.random() < 1 / 3:
            raise CrashPoint  # died before the snapshot's rename: nothing happened
        self.snapshots[sid] = data
        self._indexes[sid] = index
        if not truncate:
            return self.end_offset
        if points is not None and dies:
            # The snapshot is durable; the real log then removes its segments last-first, each removal durable:
            # the crash leaves the log cut anywhere, and the restart (open) finishes the job.
            self._cut(points.rng.randint(0, len(self.batches)))
            raise CrashPoint
        self._truncate_to_snapshot(sid)
        return self.end_offset

    def _truncate_to_snapshot(self, sid: SnapshotId) -> None:
        index = self._index(sid)
        self.batches, self._bases = [], []
        self._start, self._start_chain = sid.end_offset, index.chains[-1]
        self.epochs = EpochCache([(sid.epoch, sid.end_offset)])
        for old in [s for s in self.snapshots if s < sid]:
            del self.snapshots[old]
            self._indexes.pop(old, None)

    # -- crashes -------------------------------------------------------------------------------------------------

    def crash(self, survivors: int = 0) -> None:
        """Lose what was not flushed, except the first ``survivors`` unflushed batches: the OS may have written
        them before the crash (a legal outcome the core must tolerate). What survives is on disk now; snapshots
        are durable once taken or installed. The restart's :meth:`open` recovers the rest."""
        keep = 0
        for b in self.batches:
            if not b.durable:
                break
            keep += 1
        keep = min(keep + survivors, len(self.batches))
        del self.batches[keep:], self._bases[keep:]
        for b in self.batches:
            b.durable = True
        self.epochs = EpochCache()  # rebuilt from the batches, as the real log's open does
        for b in self.batches:
            self.epochs.assign(b.epoch, b.base_offset)

    def open(self) -> None:
        """The restart's recovery (Kafka's ``truncateToLatestSnapshot``): a latest snapshot ending beyond the log,
        or in a later epoch than the log's last batch, empties the log to start at its end. Either is an install
        that a crash interrupted (or a snapshot of records the crash lost): the log may still hold the tail that
        diverged from the snapshot, which is why the leader sent one, below the snapshot's end too."""
        if self._open_truncates():
            self._truncate_to_snapshot(self.latest_snapshot())  # type: ignore[arg-type]

    def _open_truncates(self) -> bool:
        latest = self.latest_snapshot()
        return latest is not None and (
            latest.end_offset > self.end_offset or latest.epoch > max(self.epochs.latest_epoch, 0)
        )

    def reopened(self) -> SimLog:
        """This log as its restart will find it (itself, unless :meth:`open` has something to recover): a down
        node counts with the log it restarts on."""
        if not self.snapshots or not self._open_truncates():
            return self
        other = copy.copy(self)
        other.batches, other._bases = list(self.batches), list(self._bases)
        other.epochs = EpochCache(self.epochs.entries)
        other.snapshots, other._indexes = dict(self.snapshots), dict(self._indexes)
        other.open()
        return other


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
