"""The ``__cluster_metadata`` log: segmented, append-only, in Kafka's layout and byte format.

``<data-dir>/__cluster_metadata-0/`` holds ``%020d.log`` segments (+ ``.index``), ``leader-epoch-checkpoint``,
``partition.metadata`` and ``quorum-state``. The log knows offsets, epochs and bytes — nothing about what the
records mean.

Durability contract: ``append`` writes to the OS; only ``flush`` (fdatasync) makes it durable, and returns the
offset up to which it did. Raft acknowledges nothing above the flushed offset.

Recovery on open re-validates every batch (as Kafka does for the metadata log, whose recovery point is always 0).
A torn or corrupt *tail* — damage with no valid batch after it — is cut back to the last valid batch and logged.
Damage with valid batches after it stops the open with :class:`LogCorruptionError`: those batches may be
committed, and dropping them silently could lose acknowledged writes.

Snapshots (:mod:`quorum.log.snapshot_set`) live beside the segments. The log may start after offset 0 once
retention (:meth:`MetadataLog.clean`) deleted segments wholly below the oldest snapshot kept; the newest valid
snapshot must then reach the log's start, or the open is refused. A snapshot ending beyond the log (one installed
from the leader, whose truncation a crash interrupted) empties the log to start at the snapshot's end.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import structlog

from quorum.log.batch import MAX_BATCH_SIZE, RecordBatch, read_batch
from quorum.log.deleter import remove_deleted
from quorum.log.epoch_cache import CHECKPOINT_NAME, EpochCache
from quorum.log.files import atomic_write, fsync_dir
from quorum.log.segment import SUFFIX, Segment
from quorum.log.snapshot_set import SnapshotSet
from quorum.log.snapshots import SnapshotFileInstaller, SnapshotFileWriter, SnapshotId

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION_DIR = f"{METADATA_TOPIC}-0"
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024  # metadata.log.segment.bytes
DEFAULT_INDEX_INTERVAL = 4096  # index.interval.bytes
PREALLOCATE_CHUNK = 4 * 1024 * 1024  # how far ahead a pre-allocating segment zero-fills
DEFAULT_RETENTION_BYTES = 100 * 1024 * 1024  # metadata.max.retention.bytes
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # metadata.max.retention.ms
# Ours, not Kafka's: older snapshots are only a fallback should the newest be damaged, so keep few of them.
MAX_RETAINED_SNAPSHOTS = 3
_PARTITION_METADATA = b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid.METADATA_TOPIC_ID

log = structlog.get_logger("quorum.log")


class LogCorruptionError(Exception):
    """Damage before the tail of the log: the node must not start on it."""

    def __init__(self, path: Path | str, position: int, reason: str) -> None:
        self.path = str(path)
        self.position = position
        self.reason = reason
        super().__init__(
            f"{path}: corrupt batch at byte {position}: {reason}; valid batches follow it, so this is not a torn "
            "write at the tail and may hold committed data. Refusing to open the log: restore this node's data "
            "directory from a replica, or remove it to let the node catch up from the leader."
        )


@dataclass(frozen=True)
class AppendInfo:
    base_offset: int
    last_offset: int
    epoch: int
    position: int


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL
    # Kafka's log.preallocate, off by default as in Kafka: zero-filled space ahead of the writer makes fdatasync
    # ~1.4x faster here, but a live segment then ends in zeros that other readers take for corruption.
    preallocate_bytes: int = 0
    retention_bytes: int = DEFAULT_RETENTION_BYTES  # metadata.max.retention.bytes (-1: no size limit)
    retention_ms: int = DEFAULT_RETENTION_MS  # metadata.max.retention.ms (-1: no time limit)

    def __post_init__(self) -> None:
        if self.segment_bytes < 1024:
            raise ValueError(f"metadata.log.segment.bytes = {self.segment_bytes} is below the minimum of 1024")
        if self.index_interval_bytes < 1 or self.preallocate_bytes < 0:
            raise ValueError("index.interval.bytes must be positive and preallocate bytes non-negative")
        if self.retention_bytes < -1 or self.retention_ms < -1:
            raise ValueError("metadata.max.retention.bytes and metadata.max.retention.ms must be -1 or more")


class MetadataLog:
    def __init__(
        self, directory: Path, config: LogConfig, segments: list[Segment], epochs: EpochCache, snapshots: SnapshotSet
    ) -> None:
        self.dir = directory
        self.config = config
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self.epochs = epochs
        self.snapshots = snapshots
        self._epochs_dirty = False
        self._flushed_offset = self.end_offset
        self._flush_lock = threading.Lock()  # flush may run on an executor thread while the loop appends
        self._flushed_at = (self._segments[-1], self._segments[-1].size)  # (segment, its size) at the last flush
        self.deleter = snapshots.deleter  # retention's files (segments, snapshots) go through it

    # -- opening -------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, data_dir: Path | str, config: LogConfig | None = None) -> MetadataLog:
        """Open (creating if needed) ``<data_dir>/__cluster_metadata-0`` and recover it."""
        config = config or LogConfig()
        directory = Path(data_dir) / METADATA_PARTITION_DIR
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        if created:
            fsync_dir(directory.parent)
        for stray in directory.glob("*.tmp"):
            stray.unlink()  # an atomic write that never reached its rename
        for doomed in remove_deleted(directory):
            log.info("deleted_file_removed", path=str(doomed))  # a crash came between a deletion's rename and its end
        paths = sorted(directory.glob("*" + SUFFIX), key=lambda p: p.name)
        snapshots = SnapshotSet.open(directory)
        segments: list[Segment] = []
        try:
            for p in paths:
                segments.append(
                    Segment.open(p, index_interval=config.index_interval_bytes, preallocate=config.preallocate_bytes)
                )
            epochs = cls._recover(directory, segments)
            cls._check_snapshot_reaches_log(directory, segments, snapshots.latest)
        except BaseException:
            for seg in segments:  # a refused open must not leak descriptors (nor touch the files: no close())
                seg.release()
            raise
        if not segments:
            start = snapshots.latest.end_offset if snapshots.latest else 0
            segments.append(
                Segment.create(
                    directory, start, index_interval=config.index_interval_bytes, preallocate=config.preallocate_bytes
                )
            )
            fsync_dir(directory)
        pm = directory / "partition.metadata"
        if not pm.exists():
            atomic_write(pm, _PARTITION_METADATA)
        self = cls(directory, config, segments, epochs, snapshots)
        latest = snapshots.latest
        if latest is not None and (
            latest.end_offset > self.end_offset
            or latest.epoch > self.last_epoch
            or (latest.epoch == self.last_epoch and latest.end_offset > self.end_offset)
        ):
            # An installed snapshot whose truncation of the log a crash interrupted — the log may even be longer
            # than the snapshot, but from an older epoch, so divergent: finish it (Kafka's truncateToLatestSnapshot).
            self.truncate_to_snapshot(latest)
        elif latest is not None and latest.end_offset == self.start_offset:
            # A log that starts at a snapshot: the snapshot's epoch ends there (what an empty log reports as its
            # last epoch, and what a follower fetching from that point must find).
            entries = self.epochs.entries
            if not entries or entries[0][0] > latest.epoch:
                self.epochs = EpochCache([(latest.epoch, latest.end_offset), *entries])
        self._reconcile_checkpoint()
        log.info(
            "log_opened",
            path=str(directory),
            log_start_offset=self.start_offset,
            log_end_offset=self.end_offset,
            last_epoch=self.last_epoch,
            segments=len(self._segments),
            latest_snapshot=str(latest) if latest else None,
            snapshots=len(snapshots.ids),
        )
        return self

    @staticmethod
    def _check_snapshot_reaches_log(directory: Path, segments: list[Segment], latest: SnapshotId | None) -> None:
        """Offsets below the log's start exist only in a snapshot: refuse to open if none reaches that far."""
        start = segments[0].base_offset if segments else 0
        if start == 0 or (latest is not None and latest.end_offset >= start):
            return
        covered = f"the newest valid snapshot ends at offset {latest.end_offset}" if latest else "no valid snapshot"
        raise LogCorruptionError(
            directory,
            0,
            f"the log starts at offset {start} and {covered}: the records below offset {start} are lost",
        )

    @staticmethod
    def _recover(directory: Path, segments: list[Segment]) -> EpochCache:
        """Validate every segment; cut a torn tail; refuse damage before it. Mutates ``segments``."""
        epochs = EpochCache()
        expected = segments[0].base_offset if segments else 0
        min_epoch = 0
        for i, seg in enumerate(segments):
            if seg.base_offset != expected and os.fstat(seg.fd).st_size > 0:
                raise LogCorruptionError(
                    seg.path, 0, f"segment starts at offset {seg.base_offset}, but the log before it ends at {expected}"
                )
            result, batches = seg.scan(expected, min_epoch)
            seg.load(batches, result.valid_end, result.next_offset)
            for b in batches:
                epochs.assign(b.epoch, b.base_offset)
            if batches:
                min_epoch = batches[-1].epoch
            expected = result.next_offset
            if result.error is None:
                continue
            later = [s for s in segments[i + 1 :] if s.holds_data()]
            if result.valid_batch_after_error is not None or later:
                e = result.error
                raise LogCorruptionError(seg.path, e.position, e.reason)
            dropped = seg.allocated - result.valid_end
            seg.truncate_to_position(result.valid_end, result.next_offset)
            log.warning(
                "log_tail_truncated",
                path=str(seg.path),
                position=result.valid_end,
                offset=result.next_offset,
                reason=result.error.reason,
                bytes_dropped=dropped,
            )
            break
        # Empty segments beyond the recovered end (left by a cut tail, or a crash during a roll) go.
        while len(segments) > 1 and segments[-1].size == 0 and segments[-1].base_offset != expected:
            segments.pop().delete()
            fsync_dir(directory)
        return epochs

    def _reconcile_checkpoint(self) -> None:
        """The log is the truth; rewrite the checkpoint file if it disagrees (or is missing)."""
        path = self.dir / CHECKPOINT_NAME
        try:
            stored = EpochCache.read(path).entries
        except ValueError as e:
            log.warning("epoch_checkpoint_unreadable", path=str(path), error=str(e))
            stored = None
        if stored != self.epochs.entries:
            self.epochs.write(path)

    # -- state ---------------------------------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The log start offset: the first offset the segments hold (earlier ones are only in a snapshot)."""
        return self._segments[0].base_offset

    @property
    def end_offset(self) -> int:
        """The log end offset (LEO): the offset the next appended record gets."""
        return self._segments[-1].next_offset

    @property
    def flushed_offset(self) -> int:
        """Every offset below this is on disk."""
        return self._flushed_offset

    @property
    def last_epoch(self) -> int:
        """The epoch of the last batch; for an empty log that starts at a snapshot, the snapshot's (Kafka's
        lastFetchedEpoch); 0 for an empty log."""
        if self.end_offset == self.start_offset:
            at_start = self._snapshot_at_start()
            if at_start is not None:
                return at_start.epoch
        return max(self.epochs.latest_epoch, 0)

    def _snapshot_at_start(self) -> SnapshotId | None:
        """The snapshot ending exactly where the log starts, if any (what holds everything before it)."""
        start = self.start_offset
        return next((i for i in reversed(self.snapshots.ids) if i.end_offset == start), None)

    @property
    def unflushed_bytes(self) -> int:
        """About what the next flush has to write: the active segment's bytes appended since the last flush."""
        segment, size = self._flushed_at
        active = self._segments[-1]
        return max(0, active.size - size) if segment is active else active.size

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[Path]:
        return [s.path for s in self._segments]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(epoch, end offset)`` of the largest epoch <= ``epoch`` in this log; see EpochCache.end_offset_for.
        An epoch older than every epoch the log holds, but not older than the snapshot the log starts at, ends
        where that snapshot does (Kafka's endOffsetForEpoch overrides it the same way): a follower that installed
        that snapshot fetches from there and must not be sent the snapshot again."""
        found = self.epochs.end_offset_for(epoch, self.end_offset)
        if found[0] < 0:
            at_start = self._snapshot_at_start()
            if at_start is not None and at_start.epoch <= epoch:
                return at_start.epoch, at_start.end_offset
        return found

    # -- writing -------------------------------------------------------------------------------------------------

    def append(self, batch: bytes, epoch: int | None = None) -> AppendInfo:
        """Append one batch at the log end, stamping its base offset (and ``epoch``, if given).

        The batch is validated first (length, magic, CRC): a follower appends bytes from the network.
        """
        if len(batch) > MAX_BATCH_SIZE:
            raise ValueError(f"batch of {len(batch)} bytes exceeds the maximum of {MAX_BATCH_SIZE}")
        parsed = read_batch(batch, path="<append>")
        if parsed.size != len(batch):
            raise ValueError(f"append takes one batch: {len(batch) - parsed.size} bytes follow the first")
        if parsed.record_count <= 0:  # recovery rejects such a batch: appending it would make the log unopenable
            raise ValueError(f"a batch holds at least one record, this one {parsed.record_count}")
        base = self.end_offset
        if parsed.base_offset != base or (epoch is not None and epoch != parsed.epoch):
            batch = parsed.with_offset(base, epoch)
        epoch = parsed.epoch if epoch is None else epoch
        if epoch < self.last_epoch:
            raise ValueError(f"batch epoch {epoch} is below the log's last epoch {self.last_epoch}")
        last = base + parsed.last_offset_delta
        active = self._segments[-1]
        if active.size > 0 and active.size + len(batch) > self.config.segment_bytes:
            active = self._roll(base)
        position = active.size
        active.append(batch, last)
        if self.epochs.assign(epoch, base):
            self._epochs_dirty = True
        return AppendInfo(base, last, epoch, position)

    def _roll(self, base_offset: int) -> Segment:
        old = self._segments[-1]
        old.flush()  # the new segment must never be durable ahead of the old one's tail
        old.trim()
        old.write_index()
        new = Segment.create(
            self.dir,
            base_offset,
            index_interval=self.config.index_interval_bytes,
            preallocate=self.config.preallocate_bytes,
        )
        fsync_dir(self.dir)
        self._segments.append(new)
        self._bases.append(base_offset)
        log.info("segment_rolled", path=str(new.path), base_offset=base_offset, previous_size=old.size)
        return new

    def flush(self) -> int:
        """fdatasync everything appended so far; returns the new flushed offset. Safe to call from a thread
        other than the appender's: it makes durable at least what was appended before it was called."""
        with self._flush_lock:
            target = self.end_offset
            active = self._segments[-1]
            size = active.size
            if target > self._flushed_offset:
                active.flush()
            self._flushed_at = (active, size)
            if self._epochs_dirty:
                self._epochs_dirty = False
                self.epochs.write(self.dir / CHECKPOINT_NAME)
            self._flushed_offset = max(self._flushed_offset, target)
            return self._flushed_offset

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset`` (Raft divergence); returns the new end offset.

        A batch is never split: if ``offset`` falls inside one, all of it goes.
        """
        with self._flush_lock:
            return self._truncate_to(offset)

    def _truncate_to(self, offset: int) -> int:
        if offset >= self.end_offset:
            return self.end_offset
        if offset < self.start_offset:
            raise ValueError(f"cannot truncate to {offset}, below the log start offset {self.start_offset}")
        old_end = self.end_offset
        i = bisect.bisect_right(self._bases, offset) - 1
        # Whole segments go last-first, each removal made durable before the next: a crash midway leaves a
        # shorter but contiguous log, never one with a hole that recovery would refuse.
        while len(self._segments) > i + 1:
            self._segments.pop().delete()
            self._bases.pop()
            fsync_dir(self.dir)
        seg = self._segments[i]
        found = seg.position_of(offset)
        if found is not None:
            position, batch_base = found
            seg.truncate_to_position(position, batch_base)  # ftruncate + fsync
        new_end = self.end_offset
        if self.epochs.truncate_from_end(new_end):
            self.epochs.write(self.dir / CHECKPOINT_NAME)
        self._flushed_offset = min(self._flushed_offset, new_end)
        log.warning("log_truncated", path=str(self.dir), requested_offset=offset, old_end=old_end, new_end=new_end)
        return new_end

    # -- snapshots -----------------------------------------------------------------------------------------------

    def latest_snapshot(self) -> SnapshotId | None:
        return self.snapshots.latest

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        return self.snapshots.read(snapshot_id, position, max_bytes)

    def snapshot_writer(self, snapshot_id: SnapshotId, last_contained_log_timestamp: int) -> SnapshotFileWriter:
        return self.snapshots.writer(snapshot_id, last_contained_log_timestamp)

    def begin_snapshot(self, snapshot_id: SnapshotId) -> SnapshotFileInstaller:
        """A snapshot fetched from the leader, written as it arrives; see :meth:`truncate_to_snapshot`."""
        return self.snapshots.installer(snapshot_id)

    def snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        self.snapshots.add(snapshot_id)

    def install_snapshot(self, install: SnapshotFileInstaller) -> int:
        """A snapshot fetched from the leader is complete: validate and freeze it (CorruptSnapshotError, leaving
        nothing, if it is damaged), then empty the log to start at its end. Returns the new end offset."""
        install.freeze()
        self.snapshots.add(install.snapshot_id)
        return self.truncate_to_snapshot(install.snapshot_id)

    def truncate_to_snapshot(self, snapshot_id: SnapshotId) -> int:
        """Empty the log to start at ``snapshot_id``'s end (it was installed from the leader), and forget older
        snapshots. Durable when it returns; returns the new end offset."""
        self.deleter.drain()  # no older segment may outlive a crash beside the new log (see quorum.log.deleter)
        with self._flush_lock:
            start = snapshot_id.end_offset
            old_start, old_end = self.start_offset, self.end_offset
            # Last segment first, each removal durable: a crash leaves a shorter log, which the snapshot (now
            # durable) still reaches beyond, and the open finishes the job.
            while self._segments:
                self._segments.pop().delete()
                self._bases.pop()
                fsync_dir(self.dir)
            self._segments.append(
                Segment.create(
                    self.dir,
                    start,
                    index_interval=self.config.index_interval_bytes,
                    preallocate=self.config.preallocate_bytes,
                )
            )
            self._bases.append(start)
            fsync_dir(self.dir)
            self.epochs = EpochCache([(snapshot_id.epoch, start)])
            self.epochs.write(self.dir / CHECKPOINT_NAME)
            self._epochs_dirty = False
            self._flushed_offset = start
        self.snapshots.forget_before(snapshot_id)
        log.warning(
            "log_truncated_to_snapshot",
            path=str(self.dir),
            snapshot=str(snapshot_id),
            old_start=old_start,
            old_end=old_end,
            new_start=start,
        )
        return start

    def clean(self, now_ms: float | None = None, catch_up_from: int | None = None) -> int:
        """Retention (Kafka's ``maybeClean``): delete snapshots older than the newest, oldest first, while there
        are more than :data:`MAX_RETAINED_SNAPSHOTS`, the snapshots and the log together exceed
        ``retention_bytes``, or the oldest is older than ``retention_ms``; then delete segments wholly below the
        oldest snapshot kept while the same limits are exceeded. The newest snapshot is never deleted, nor a
        segment it does not cover, nor the active segment. Returns the bytes freed.

        ``catch_up_from`` (a leader's: the lowest fetch offset of the replicas still fetching) keeps the segments
        holding it and above from the size limit as long as the log alone stays within ``retention_bytes``, as
        etcd keeps entries behind its snapshot for slow followers: a replica a little behind goes on reading the
        log instead of fetching and loading the whole snapshot (at millions of partitions, every observer behind
        the newest snapshot when it was taken did so). The age limit still applies."""
        self.deleter.check()
        now = time.time() * 1000 if now_ms is None else now_ms
        cfg, snaps = self.config, self.snapshots
        freed = 0

        def over_size() -> bool:
            return cfg.retention_bytes >= 0 and self.size_bytes + snaps.total_bytes() > cfg.retention_bytes

        def kept_for_catch_up(segment_end: int) -> bool:
            return catch_up_from is not None and segment_end > catch_up_from and self.size_bytes <= cfg.retention_bytes

        while len(snaps.ids) > 1:
            oldest = snaps.ids[0]
            too_old = cfg.retention_ms >= 0 and snaps.age_ms(oldest, now) > cfg.retention_ms
            if not (len(snaps.ids) > MAX_RETAINED_SNAPSHOTS or too_old or over_size()):
                break
            freed += snaps.size(oldest)
            snaps.delete(oldest)
        bound = snaps.earliest
        if bound is None:
            return freed
        while len(self._segments) > 1 and self._segments[1].base_offset <= bound.end_offset:
            seg = self._segments[0]
            too_old = cfg.retention_ms >= 0 and now - seg.path.stat().st_mtime * 1000 > cfg.retention_ms
            if not (too_old or (over_size() and not kept_for_catch_up(self._segments[1].base_offset))):
                break
            freed += seg.size
            with self._flush_lock:
                self._segments.pop(0)
                self._bases.pop(0)
            self.deleter.delete([seg.path, seg.index_path], release=seg.release)
            log.info("segment_deleted", path=str(seg.path), log_start_offset=self.start_offset)
        with self._flush_lock:
            # It drops entries below the log start only: the next flush writes the file. A crash before that
            # leaves them in it, and the open reconciles the file with the log.
            self._epochs_dirty |= self.epochs.truncate_from_start(self.start_offset)
        return freed

    # -- reading -------------------------------------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int = 1024 * 1024) -> tuple[bytes, int]:
        """Whole batches starting with the one that holds ``offset``, up to ``max_bytes`` (at least one batch);
        returns ``(bytes, next offset)``. Reads stay within one segment; an offset at the log end gives
        ``(b"", offset)``. Found through the sparse index, never by scanning a segment from its start."""
        if offset < self.start_offset or offset > self.end_offset:
            raise ValueError(f"offset {offset} is outside the log [{self.start_offset}, {self.end_offset}]")
        i = bisect.bisect_right(self._bases, offset) - 1
        for seg in self._segments[i:]:
            result = seg.read(offset, max_bytes)
            if result is not None:
                return result
        return b"", offset

    def batches(self, from_offset: int | None = None) -> list[RecordBatch]:
        """Every batch from ``from_offset`` to the end, parsed (tests and tools; the hot path uses ``read``)."""
        offset = self.start_offset if from_offset is None else from_offset
        out: list[RecordBatch] = []
        while offset < self.end_offset:
            data, offset = self.read(offset, 8 * 1024 * 1024)
            pos = 0
            while pos < len(data):
                batch = read_batch(data, pos, path=str(self.dir))
                out.append(batch)
                pos += batch.size
        return out

    def close(self) -> None:
        self.flush()
        for seg in self._segments:
            seg.close()
        self.snapshots.close()
        self.deleter.close()
        log.info("log_closed", path=str(self.dir), log_end_offset=self.end_offset)

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
