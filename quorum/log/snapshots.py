"""Metadata snapshots: ``<end offset %020d>-<epoch %010d>.checkpoint`` files in ``__cluster_metadata-0/``, in
Kafka's layout (see ``docs/snapshots.md``).

A snapshot is a sequence of RecordBatches whose offsets restart at 0 and whose batches all carry the snapshot's
epoch: a control batch with a SnapshotHeaderRecord, data batches, a control batch with a SnapshotFooterRecord
(Kafka's ``RecordsSnapshotWriter``). It is written (or fetched from the leader) into ``<id>.checkpoint.part`` and
renamed into place once whole and on disk, so a ``.checkpoint`` is never partial. The writer blocks on disk I/O:
callers run it off the event loop. The installer writes each chunk in a thread (the caller waits only for the
previous chunk's write), but its freeze (validation, fsync) blocks.
"""

from __future__ import annotations

import errno
import mmap
import os
import struct
import time
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from itertools import accumulate
from pathlib import Path
from types import TracebackType
from typing import BinaryIO, Self

# batch.py's table of zig-zag varints and its batch sealing (header + CRC), shared by this faster record encoder.
from quorum.log.batch import (
    _BASE_OFFSET,
    _ZIGZAG,
    HEADER_SIZE,
    MAX_BATCH_SIZE,
    CorruptBatchError,
    RecordBatch,
    _finish,
    build_batch,
    read_batch,
)
from quorum.log.control import ControlType, SnapshotFooterRecord, SnapshotHeaderRecord, decode_control, encode_control
from quorum.log.files import fsync_dir, naming, remove_ending, remove_gradually
from quorum.log.message import ApiMessage
from quorum.log.varint import varint

SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"  # a snapshot being written or fetched; never read as a snapshot

# Kafka >= 3.9 (kraft.version 1) puts these after the SnapshotHeaderRecord in the header batch; they are valid there.
_HEADER_EXTRAS = frozenset({ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS})
_TYPE_NAMES = {t.value: t.name for t in ControlType}
_FLUSH_BYTES = 1 << 20  # write buffer: one syscall per MiB, whatever the batch size
# A snapshot written off the event loop (a forked child, an install's writer thread) is synced as it is written,
# every SYNC_BYTES (Redis's rdb-save-incremental-fsync does it every 4 MB): left to the kernel, a 240 MiB file's
# dirty pages were flushed in bulk, and the node's log fsyncs on the same disk waited behind them (ext4: a commit
# flushes the other files' pending data). Measured here with a 248 MiB writer beside a 200-byte append + fdatasync
# loop: that loop's longest fdatasync 97-108 ms, 17-26 ms syncing every 8 MiB.
SYNC_BYTES = 8 << 20
_MAX_VALUE = MAX_BATCH_SIZE - HEADER_SIZE - 32  # one record alone must still fit the batch size Kafka reads


def _middle(offset_delta: int) -> bytes:
    """A data record's bytes between its length and its value's length: attributes 0, timestampDelta 0, the
    offsetDelta, a null key."""
    return b"\x00\x00" + varint(offset_delta) + b"\x01"


_MIDDLES = [_middle(i) for i in range(len(_ZIGZAG))]
_TABLED = len(_ZIGZAG)  # value lengths and offset deltas below this have ready-made varints
# The offset deltas whose varints have 1, 2 and 3 bytes: a run of records framed from one table ends at the next.
_DELTA_WIDTHS = ((64, 1), (8192, 2), (_TABLED, 3))


@cache
def _tables(width: int) -> tuple[list[bytes], list[int]]:
    """For records whose offset delta's varint has ``width`` bytes, indexed by the value's length: the record's
    length varint, and its size with it."""
    heads, sizes = [], []
    for n in range(_TABLED):
        size = 3 + width + len(_ZIGZAG[n]) + n + 1  # attributes, timestampDelta, delta, null key; vlen; value; headers
        head = _ZIGZAG[size] if size < _TABLED else varint(size)
        heads.append(head)
        sizes.append(len(head) + size)
    return heads, sizes


def _framing(delta: int) -> tuple[int, list[bytes], list[int]]:
    """For a record at ``delta`` (< _TABLED) in its batch: where its run of one delta width ends, and the tables."""
    end, width = next(w for w in _DELTA_WIDTHS if delta < w[0])
    return (end, *_tables(width))


@dataclass(frozen=True, order=True, slots=True)
class SnapshotId:
    """Kafka's ``OffsetAndEpoch`` naming a snapshot: it holds the state of every offset below ``end_offset``
    (exclusive), and ``epoch`` is the epoch of the last record it covers."""

    end_offset: int
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"

    @classmethod
    def parse(cls, path: Path | str) -> SnapshotId | None:
        """The id in a ``%020d-%010d.checkpoint`` name, or None for any other name."""
        name = Path(path).name
        if not name.endswith(SNAPSHOT_SUFFIX):
            return None
        offset, _, epoch = name[: -len(SNAPSHOT_SUFFIX)].partition("-")
        if len(offset) == 20 and len(epoch) == 10 and offset.isdigit() and epoch.isdigit():
            return cls(int(offset), int(epoch))
        return None

    def __str__(self) -> str:
        return f"{self.end_offset}-{self.epoch}"


class CorruptSnapshotError(Exception):
    """A snapshot file that breaks the layout: which file, which byte (the start of the offending batch, or the
    end of the file when something is missing) and what is wrong."""

    def __init__(self, path: str | Path, position: int, reason: str) -> None:
        self.path = str(path)
        self.position = position
        self.reason = reason
        super().__init__(f"{self.path}: corrupt snapshot at byte {position}: {reason}")


@dataclass(frozen=True, slots=True)
class SnapshotInfo:
    """What a full validation found."""

    snapshot_id: SnapshotId
    size: int
    last_contained_log_timestamp: int
    data_batches: int
    data_records: int


class _PartFile:
    """A ``.part`` file that is renamed to its ``.checkpoint`` name once complete and durable, or removed."""

    def __init__(self, directory: Path, snapshot_id: SnapshotId, piece: int = 0) -> None:
        self.directory = Path(directory)
        self.snapshot_id = snapshot_id
        self.path = piece_path(self.directory, snapshot_id, piece)
        self.final_path = self.directory / snapshot_id.file_name
        if self.final_path.exists():  # a snapshot is immutable; Kafka refuses to create one twice as well
            raise FileExistsError(errno.EEXIST, "snapshot already exists", str(self.final_path))
        # O_TRUNC: a stale .part of the same id is a crashed attempt, never something to append to.
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._state = "open"
        self.sync_bytes = 0  # >0: fdatasync after every that many bytes written (see SYNC_BYTES); 0: at the end only
        self._unsynced = 0

    @property
    def fd(self) -> int:
        """The open ``.part`` file's descriptor (-1 once closed)."""
        return self._fd

    def _check_open(self) -> None:
        if self._state != "open":
            raise RuntimeError(f"snapshot {self.snapshot_id} is {self._state}")

    def _write_all(self, data: bytes | bytearray) -> None:
        with naming("write", self.path), memoryview(data) as view:
            while view:
                view = view[os.write(self._fd, view) :]
        self._unsynced += len(data)
        if self.sync_bytes and self._unsynced >= self.sync_bytes:
            with naming("fdatasync", self.path):
                os.fdatasync(self._fd)
            self._unsynced = 0

    def _commit(self) -> Path:
        with naming("fsync", self.path):
            os.fsync(self._fd)
            fd, self._fd = self._fd, -1
            os.close(fd)
        os.replace(self.path, self.final_path)
        self._state = "frozen"
        fsync_dir(self.directory)
        return self.final_path

    def detach(self) -> None:
        """Close this process's descriptor and leave the file to the process that writes it (a forked one)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
        self._state = "detached"

    def abort(self) -> None:
        """Close and remove the ``.part`` file (nothing once frozen); safe to call more than once."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.close(fd)
            except OSError:
                pass  # the file is being thrown away; a failed close changes nothing
        if self._state == "open":
            self._state = "aborted"
            remove_gradually(self.path)

    @contextmanager
    def _aborting(self) -> Iterator[None]:
        """A failure leaves no ``.part`` behind and the object unusable: its file is in an unknown state."""
        try:
            yield
        except BaseException:
            self.abort()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.abort()


class SnapshotFileWriter(_PartFile):
    """Writes a snapshot as Kafka's ``RecordsSnapshotWriter`` does: the header batch at offset 0, then the records
    of every :meth:`append` packed into data batches of at most ``max_batch_bytes`` (a record bigger than that goes
    alone in its batch), offsets continuing across the file, every batch stamped with the snapshot's epoch.

    Any failure while appending or freezing (ENOSPC, EIO, …) removes the ``.part`` and re-raises; the writer is
    then unusable. Batch timestamps are ``timestamp_ms``, or the wall clock when each batch is closed.
    """

    def __init__(
        self,
        directory: Path,
        snapshot_id: SnapshotId,
        last_contained_log_timestamp: int,
        *,
        max_batch_bytes: int = 1 << 20,
        timestamp_ms: int | None = None,
        piece: int = 0,
    ) -> None:
        if not HEADER_SIZE < max_batch_bytes <= MAX_BATCH_SIZE:
            raise ValueError(f"max_batch_bytes must be in ({HEADER_SIZE}, {MAX_BATCH_SIZE}], got {max_batch_bytes}")
        super().__init__(directory, snapshot_id, piece)
        self._last_contained = last_contained_log_timestamp
        self._max_batch_bytes = max_batch_bytes
        self._timestamp_ms = timestamp_ms
        self._buffer = bytearray()  # closed batches not yet handed to the OS
        self._written = 0  # bytes of closed batches, buffered or written
        self._next_offset = 0
        self._parts: list[bytes] = []  # the open data batch's records, in pieces joined when it closes
        self._count = 0
        self._open_bytes = HEADER_SIZE
        header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=last_contained_log_timestamp)
        with self._aborting():
            self._control(header)

    @property
    def bytes_written(self) -> int:
        """Bytes of the batches closed so far (the open data batch is not counted); the file's size once frozen."""
        return self._written

    def _now(self) -> int:
        return int(time.time() * 1000) if self._timestamp_ms is None else self._timestamp_ms

    def append(self, records: Sequence[bytes]) -> None:
        """Add framed metadata record values (data records have no key)."""
        self._check_open()
        if not records:
            return
        lengths = list(map(len, records))
        shortest, longest = min(lengths), max(lengths)
        if shortest == 0:  # Kafka's reader rejects an empty value
            raise ValueError("a metadata record value is never empty")
        if longest > _MAX_VALUE:
            raise ValueError(f"a record of {longest} bytes does not fit a batch of {MAX_BATCH_SIZE} bytes")
        with self._aborting():
            if longest < _TABLED:
                self._encode_runs(records, lengths)
            else:
                self._encode(records)

    def _encode_runs(self, records: Sequence[bytes], lengths: list[int]) -> None:
        # The per-record cost of writing a snapshot (2M records at 2M partitions), hence no Python code per record:
        # for a run of records whose offset deltas have varints of one width, each record's total size and pieces
        # come from tables indexed by its value's length, the run's sizes are summed by accumulate, the records
        # that fit the open batch found by bisect, and the pieces laid out by slice assignment (all in C). Measured
        # on a 2M-partition image: framing took 1.64 s of cProfile time in _encode, 0.70 s here; the whole snapshot
        # (encode, frame, write) 2.09-2.17 s against 2.24-3.23 s. The bytes are _encode's: the tests compare them.
        limit, i, total = self._max_batch_bytes, 0, len(records)
        while i < total:
            count, used = self._count, self._open_bytes
            if count >= _TABLED:  # tiny records, more than the table's deltas in one batch: one at a time
                self._encode(records[i : i + 1])
                i += 1
                continue
            run_end, heads, sizes = _framing(count)
            run = lengths[i : min(total, i + run_end - count)]
            ends = list(accumulate(map(sizes.__getitem__, run)))
            fit = bisect_right(ends, limit - used)
            if not fit:
                if count:
                    self._close_batch()
                    continue
                fit = 1  # a record bigger than the limit goes alone in its batch
            run = run[:fit]
            pieces = [b"\x00"] * (5 * fit)  # every record ends with its headers count, 0
            pieces[0::5] = map(heads.__getitem__, run)
            pieces[1::5] = _MIDDLES[count : count + fit]
            pieces[2::5] = map(_ZIGZAG.__getitem__, run)
            pieces[3::5] = records[i : i + fit]
            self._parts += pieces
            self._count, self._open_bytes = count + fit, used + ends[fit - 1]
            i += fit

    def _encode(self, records: Sequence[bytes]) -> None:
        # One record at a time: values of _TABLED bytes or more, deltas beyond the tables. Locals and ready-made
        # varints: each record is appended as pieces (length; attributes, timestampDelta 0, offsetDelta and null
        # key; value length; value; no headers) joined once per batch.
        zz, small, middles = _ZIGZAG, len(_ZIGZAG), _MIDDLES
        limit = self._max_batch_bytes
        parts, count, used = self._parts, self._count, self._open_bytes
        for value in records:
            n = len(value)
            vlen = zz[n] if n < small else varint(n)
            middle = middles[count] if count < small else _middle(count)
            size = len(middle) + len(vlen) + n + 1
            head = zz[size] if size < small else varint(size)
            if used + len(head) + size > limit and count:
                self._count, self._open_bytes = count, used
                self._close_batch()
                parts, count, used = self._parts, 0, HEADER_SIZE
                middle = middles[0]
                size = len(middle) + len(vlen) + n + 1
                head = zz[size] if size < small else varint(size)
            parts += (head, middle, vlen, value, b"\x00")
            count += 1
            used += len(head) + size
        self._count, self._open_bytes = count, used

    def _close_batch(self) -> None:
        if self._count:
            epoch, count = self.snapshot_id.epoch, self._count
            self._emit(_finish(b"".join(self._parts), count, self._next_offset, epoch, self._now(), 0), count)
            self._parts, self._count, self._open_bytes = [], 0, HEADER_SIZE

    def _emit(self, batch: bytes | bytearray, count: int) -> None:
        self._buffer += batch
        self._written += len(batch)
        self._next_offset += count
        if len(self._buffer) >= _FLUSH_BYTES:
            self._flush()

    def _control(self, message: ApiMessage) -> None:
        epoch, ts = self.snapshot_id.epoch, self._now()
        self._emit(build_batch([encode_control(message)], base_offset=self._next_offset, epoch=epoch, timestamp=ts,
                               control=True), 1)  # fmt: skip

    def _flush(self) -> None:
        if self._buffer:
            self._write_all(self._buffer)
            self._buffer = bytearray()

    def freeze(self) -> int:
        """Close the open batch, add the footer batch, fsync, rename to ``.checkpoint``, fsync the directory;
        returns the file's size."""
        self.finish()
        with self._aborting():
            self._commit()
        return self._written

    def finish(self, sync: bool = True) -> int:
        """Everything :meth:`freeze` does before the rename: the footer, the last writes, the fsync (unless not
        ``sync``: a piece, read back at once by :meth:`append_piece`). Returns the file's size. (A forked child
        writing the snapshot ends here; its parent then calls :meth:`publish`.)"""
        self._check_open()
        with self._aborting():
            self._close_batch()
            self._control(SnapshotFooterRecord(version=0))
            self._flush()
            if sync:
                with naming("fsync", self.path):
                    os.fsync(self._fd)
        return self._written

    def piece(self, number: int) -> SnapshotFileWriter:
        """A writer of a piece of this snapshot (``number`` >= 1), for another process to write at the same time:
        a snapshot file of its own with this one's id and settings, at :func:`piece_path`. This writer then takes
        its records in with :meth:`append_piece`."""
        return SnapshotFileWriter(
            self.directory,
            self.snapshot_id,
            self._last_contained,
            max_batch_bytes=self._max_batch_bytes,
            timestamp_ms=self._timestamp_ms,
            piece=number,
        )

    def append_piece(self, path: Path) -> int:
        """Append the data batches of the finished piece at ``path`` (see :meth:`piece`), validated as a whole
        snapshot is, and renumbered to follow the records appended so far (a batch's base offset lies outside its
        CRC); returns the records taken. The open batch is closed first. The caller removes the piece."""
        self._check_open()
        taken = 0
        with self._aborting(), open(path, "rb") as f, _mapped(f) as buf:
            self._close_batch()
            for batch, message in _scan(buf, str(path), self.snapshot_id.epoch):
                if message is None:  # a data batch; the piece's header and footer are its own
                    rebased = bytearray(batch.buffer)
                    _BASE_OFFSET.pack_into(rebased, 0, self._next_offset)
                    self._emit(rebased, batch.record_count)
                    taken += batch.record_count
        return taken

    def publish(self, size: int) -> None:
        """The file was written and made durable through this writer's descriptor by another process (a forked
        child, see :meth:`finish`), ``size`` bytes of it: drop what this copy of the writer buffered, rename the
        file to its ``.checkpoint`` name and fsync the directory."""
        self._check_open()
        with self._aborting():
            self._buffer.clear()
            self._parts.clear()
            self._written = size
            self._commit()


class SnapshotFileInstaller(_PartFile):
    """A snapshot fetched from the leader in chunks (FetchSnapshot), installed only once it validates whole.

    Each chunk is written by a thread of its own while the caller goes on (the next chunk's request goes out and
    arrives meanwhile: a 2M-partition snapshot is 30 chunks of 8 MiB, each ~20 ms to write), one chunk at a time:
    :meth:`write` first waits for the previous chunk's write, and raises its error (the ``.part`` file removed);
    :meth:`freeze` waits for the last one."""

    def __init__(self, directory: Path, snapshot_id: SnapshotId) -> None:
        super().__init__(directory, snapshot_id)
        self.sync_bytes = SYNC_BYTES  # written by a thread: syncing as it goes holds nobody up
        self._size = 0
        self._writer: ThreadPoolExecutor | None = None
        self._writing: Future[None] | None = None

    @property
    def size(self) -> int:
        """Bytes received so far: the position the next chunk must start at."""
        return self._size

    def write(self, position: int, data: bytes) -> None:
        self._check_open()
        if position != self._size:
            raise ValueError(f"snapshot {self.snapshot_id}: chunk at byte {position}, expected {self._size}")
        self._written()
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix=f"install-{self.snapshot_id}")
        self._writing = self._writer.submit(self._write_all, data)
        self._size += len(data)

    def _written(self) -> None:
        """Wait for the chunk being written; its error aborts the install and is raised."""
        writing, self._writing = self._writing, None
        if writing is not None:
            with self._aborting():
                writing.result()

    def _stop_writer(self) -> None:
        if self._writer is not None:
            self._writer.shutdown()  # waits for a write under way
            self._writer = None

    def abort(self) -> None:
        self._writing = None  # its error, if any, no longer matters
        self._stop_writer()  # the descriptor stays open until its write is over
        super().abort()

    def freeze(self) -> Path:
        """Validate the whole file (a bad one raises :class:`CorruptSnapshotError` and is removed), fsync, rename
        to ``.checkpoint``, fsync the directory; returns the snapshot's path."""
        self._check_open()
        self._written()
        self._stop_writer()
        with self._aborting(), open(self.path, "rb") as f:
            _validate(f, self.path, self.snapshot_id)
        with self._aborting():
            return self._commit()


class SnapshotFile:
    """A frozen snapshot, read to serve FetchSnapshot (:meth:`read`) or to load it (:meth:`data_batches`)."""

    def __init__(self, path: Path, snapshot_id: SnapshotId) -> None:
        self.path = path
        self.id = snapshot_id
        self._file = open(path, "rb")  # held open for read(); closed by close()
        self.size = os.fstat(self._file.fileno()).st_size
        self._info: SnapshotInfo | None = None

    @classmethod
    def open(cls, path: Path | str) -> SnapshotFile:
        path = Path(path)
        snapshot_id = SnapshotId.parse(path)
        if snapshot_id is None:
            raise ValueError(f"{path}: not a snapshot file name (%020d-%010d{SNAPSHOT_SUFFIX})")
        return cls(path, snapshot_id)

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SnapshotFile:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def read(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` raw bytes from ``position`` (``b""`` at the end)."""
        if not 0 <= position <= self.size or max_bytes < 0:
            raise ValueError(f"{self.path}: cannot read {max_bytes} bytes at {position} of {self.size}")
        # pread on a regular file returns all asked for short of the end; FetchSnapshot chunks are small.
        return os.pread(self._file.fileno(), min(max_bytes, self.size - position), position)

    def validate(self) -> SnapshotInfo:
        """Check the whole file (see ``docs/snapshots.md``); raises :class:`CorruptSnapshotError` at the first
        problem."""
        if self._info is None:
            self._info = _validate(self._file, self.path, self.id)
        return self._info

    @property
    def last_contained_log_timestamp(self) -> int:
        """From the header batch, reading only that batch unless the file was validated."""
        if self._info is not None:
            return self._info.last_contained_log_timestamp
        with _mapped(self._file) as buf:
            _, header = next(_scan(buf, str(self.path), self.id.epoch))
        assert isinstance(header, SnapshotHeaderRecord)
        return header.last_contained_log_timestamp

    def data_batches(self) -> Iterator[RecordBatch]:
        """The data batches in order, header and footer left out. The whole file is validated first, so a
        consumer never loads part of a corrupt snapshot."""
        self.validate()
        with _mapped(self._file) as buf:
            for batch, message in _scan(buf, str(self.path), self.id.epoch):
                if message is None:
                    yield batch


@contextmanager
def _mapped(file: BinaryIO) -> Iterator[bytes | mmap.mmap]:
    """The file mapped read-only; a zero-length file (which mmap refuses) as empty bytes."""
    size = os.fstat(file.fileno()).st_size
    if size == 0:
        yield b""
        return
    with mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ) as mm:
        yield mm


def _validate(file: BinaryIO, path: Path, snapshot_id: SnapshotId) -> SnapshotInfo:
    timestamp = batches = records = 0
    with _mapped(file) as buf:
        for batch, message in _scan(buf, str(path), snapshot_id.epoch):
            if isinstance(message, SnapshotHeaderRecord):
                timestamp = message.last_contained_log_timestamp
            elif message is None:
                batches += 1
                records += batch.record_count
        size = len(buf)
    return SnapshotInfo(snapshot_id, size, timestamp, batches, records)


def _scan(buf: bytes | mmap.mmap, path: str, epoch: int) -> Iterator[tuple[RecordBatch, ApiMessage | None]]:
    """Every batch with every rule checked as it is reached: ``(batch, SnapshotHeaderRecord)`` first, then
    ``(batch, None)`` per data batch, then ``(batch, SnapshotFooterRecord)``."""
    size = len(buf)
    if size == 0:
        raise CorruptSnapshotError(path, 0, "empty file: no SnapshotHeaderRecord")
    pos = next_offset = 0
    while pos < size:
        try:
            batch = read_batch(buf, pos, path=path)
        except CorruptBatchError as e:
            raise CorruptSnapshotError(path, pos, e.reason) from None
        if batch.base_offset != next_offset:
            raise CorruptSnapshotError(path, pos, f"base offset {batch.base_offset}, expected {next_offset}")
        if batch.partition_leader_epoch != epoch:
            raise CorruptSnapshotError(path, pos, f"epoch {batch.partition_leader_epoch}, expected {epoch}")
        if pos == 0:
            yield batch, _control_records(batch, path, header=True)
        elif batch.is_control:
            footer = _control_records(batch, path, header=False)
            end = pos + batch.size
            if end != size:
                raise CorruptSnapshotError(path, end, f"{size - end} bytes after the SnapshotFooterRecord")
            yield batch, footer
            return
        else:
            yield batch, None
        next_offset = batch.next_offset
        pos += batch.size
    raise CorruptSnapshotError(path, size, "the file ends without a SnapshotFooterRecord")


def _control_records(batch: RecordBatch, path: str, *, header: bool) -> ApiMessage:
    """The SnapshotHeaderRecord or SnapshotFooterRecord that ``batch`` must consist of."""
    want = ControlType.SNAPSHOT_HEADER if header else ControlType.SNAPSHOT_FOOTER
    if not batch.is_control:
        raise CorruptSnapshotError(path, batch.position, f"a data batch where the {want.name} batch belongs")
    try:
        found = [decode_control(r.key, r.value) for r in batch.records(path)]
    except (CorruptBatchError, ValueError, IndexError, struct.error) as e:
        raise CorruptSnapshotError(path, batch.position, f"unreadable control record: {e}") from None
    types = [ctype for ctype, _, _ in found]
    extras_ok = header and all(t in _HEADER_EXTRAS for t in types[1:])
    if not types or types[0] != want or found[0][1] is None or (len(types) > 1 and not extras_ok):
        names = ", ".join(_TYPE_NAMES.get(t, f"type {t}") for t in types)
        raise CorruptSnapshotError(path, batch.position, f"control batch holds [{names}], expected {want.name}")
    return found[0][1]


def list_snapshots(directory: Path) -> list[SnapshotId]:
    """The ids of the ``.checkpoint`` files in ``directory``, oldest first; other names are not snapshots."""
    with os.scandir(directory) as entries:
        return sorted(i for e in entries if (i := SnapshotId.parse(e.name)) is not None)


def piece_path(directory: Path, snapshot_id: SnapshotId, piece: int = 0) -> Path:
    """The ``.part`` file of a snapshot being written, or of a piece of it written by another process at the same
    time (``piece`` >= 1: ``<id>.piece-<n>.checkpoint.part``, removed at start as every ``.part``)."""
    stem = snapshot_id.file_name[: -len(SNAPSHOT_SUFFIX)]
    return Path(directory) / (stem + (f".piece-{piece}" if piece else "") + PART_SUFFIX)


def remove_partial_snapshots(directory: Path) -> list[Path]:
    """Remove the ``.part`` files a crash left (a snapshot being written or fetched); returns them."""
    removed = remove_ending(directory, PART_SUFFIX)
    if removed:
        fsync_dir(directory)
    return removed
