"""One segment of the metadata log: ``<20-digit base offset>.log`` and its sparse offset index.

With ``log.preallocate`` on, the segment file is zero-filled ahead of the write position: overwriting allocated
blocks lets ``fdatasync`` skip the file-size metadata update, most of an fsync's cost on ext4 (docs/measured.md). The
zeros are trimmed when the segment is closed or rolled, so a cleanly closed segment is byte for byte what Kafka
writes; after a crash they are recognised and cut by recovery. (Off by default, as in Kafka: while the node runs,
readers of the live file would see the zeros.)

The offset index keeps one entry per ``index_interval`` bytes, as Kafka's ``.index`` does: the *last* offset of a
batch and the batch's file position. It lives in memory (rebuilt on every open, because the metadata log is always
re-validated on open as Kafka's is) and is written out as a Kafka-format ``.index`` file when the segment closes.
"""

from __future__ import annotations

import bisect
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import crc32c

from quorum.log.batch import CRC_START, HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, CorruptBatchError
from quorum.log.files import atomic_write, naming, remove_gradually
from quorum.log.reader import all_zero

SUFFIX = ".log"
INDEX_SUFFIX = ".index"
_PEEK = struct.Struct(">qiibIhi")  # baseOffset, length, epoch, magic, crc, attributes, lastOffsetDelta
_INDEX_ENTRY = struct.Struct(">ii")
_ZERO_CHUNK = 1 << 20  # pre-allocation is written a MiB at a time


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


class BatchInfo(NamedTuple):
    """What recovery learns about each valid batch."""

    base_offset: int
    last_offset: int
    epoch: int
    position: int
    size: int


@dataclass(frozen=True)
class ScanResult:
    valid_end: int  # file position just after the last valid batch
    next_offset: int
    error: CorruptBatchError | None = None
    valid_batch_after_error: int | None = None  # position of a valid batch beyond the error, if any


class Segment:
    def __init__(self, path: Path, base_offset: int, fd: int, *, index_interval: int, preallocate: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.index_interval = index_interval
        self.preallocate = preallocate
        self.size = 0  # logical end: bytes of valid batches
        self.allocated = os.fstat(fd).st_size  # physical end (valid batches + pre-allocated zeros)
        self.next_offset = base_offset
        self._index_offsets: list[int] = []  # last offset of an indexed batch
        self._index_positions: list[int] = []  # its position
        self._bytes_since_index = 0

    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_interval: int, preallocate: int) -> Segment:
        path = directory / segment_name(base_offset)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        return cls(path, base_offset, fd, index_interval=index_interval, preallocate=preallocate)

    @classmethod
    def open(cls, path: Path, *, index_interval: int, preallocate: int) -> Segment:
        base_offset = int(path.name[: -len(SUFFIX)])
        fd = os.open(path, os.O_RDWR)
        return cls(path, base_offset, fd, index_interval=index_interval, preallocate=preallocate)

    @property
    def index_path(self) -> Path:
        return self.path.with_suffix(INDEX_SUFFIX)

    # -- writing -------------------------------------------------------------------------------------------------

    def append(self, data: bytes, last_offset: int) -> None:
        pos = self.size
        end = pos + len(data)
        with naming("write", self.path):
            if self.preallocate and end > self.allocated:
                self._extend(end)
            _pwrite_all(self.fd, data, pos)
        self._note_batch(last_offset, pos, len(data))
        self.size = end
        self.next_offset = last_offset + 1

    def _note_batch(self, last_offset: int, position: int, size: int) -> None:
        if self._bytes_since_index > self.index_interval or not self._index_offsets:
            self._index_offsets.append(last_offset)
            self._index_positions.append(position)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def _extend(self, needed: int) -> None:
        target = max(needed, self.allocated + self.preallocate)
        zeros = bytes(min(_ZERO_CHUNK, target - self.allocated))
        while self.allocated < target:
            n = min(len(zeros), target - self.allocated)
            _pwrite_all(self.fd, zeros[:n], self.allocated)
            self.allocated += n

    def flush(self) -> None:
        with naming("fdatasync", self.path):
            os.fdatasync(self.fd)

    def trim(self) -> None:
        """Drop the pre-allocated zeros, leaving exactly Kafka's bytes."""
        if self.allocated != self.size:
            with naming("ftruncate", self.path):
                os.ftruncate(self.fd, self.size)
            self.allocated = self.size

    def truncate_to_position(self, position: int, next_offset: int) -> None:
        """Cut the file at ``position`` (a batch boundary). The bytes are removed, not just forgotten: bytes left
        beyond the logical end could be mistaken for log data by a later recovery."""
        with naming("truncate", self.path):
            os.ftruncate(self.fd, position)
            os.fsync(self.fd)
        self.size = self.allocated = position
        self.next_offset = next_offset
        cut = bisect.bisect_left(self._index_positions, position)
        del self._index_offsets[cut:], self._index_positions[cut:]
        self._bytes_since_index = position - self._index_positions[-1] if self._index_positions else 0

    def close(self) -> None:
        """Trim, write the Kafka-format ``.index``, and release the file."""
        if self.fd < 0:
            return
        self.trim()
        with naming("fsync", self.path):
            os.fsync(self.fd)
        self.write_index()
        os.close(self.fd)
        self.fd = -1

    def write_index(self) -> None:
        out = bytearray()
        for offset, position in zip(self._index_offsets, self._index_positions, strict=True):
            out += _INDEX_ENTRY.pack(offset - self.base_offset, position)
        atomic_write(self.index_path, bytes(out))

    def release(self) -> None:
        """Close the file descriptor without trimming or writing anything (an open that failed, or a deletion)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def holds_data(self) -> bool:
        """Whether the file has any non-zero byte: a segment that was created (and perhaps pre-allocated) but
        never got a batch holds none."""
        size = os.fstat(self.fd).st_size
        if size == 0:
            return False
        with mmap.mmap(self.fd, size, access=mmap.ACCESS_READ) as mm:
            return not all_zero(mm, 0)

    def delete(self) -> None:
        """Release and remove the files (the log's last segment: a crash midway leaves it shorter, a torn tail that
        the next open cuts)."""
        self.release()
        remove_gradually(self.path)
        self.index_path.unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------------------------------------------

    def _peek(self, position: int) -> tuple[int, int, int, int] | None:
        """``(base offset, last offset, epoch, size)`` of the batch at ``position``."""
        if position + _PEEK.size > self.size:
            return None
        base, length, epoch, _, _, _, last_delta = _PEEK.unpack(os.pread(self.fd, _PEEK.size, position))
        return base, base + last_delta, epoch, length + LOG_OVERHEAD

    def position_of(self, offset: int) -> tuple[int, int] | None:
        """``(position, base offset)`` of the first batch whose last offset is >= ``offset``, or None."""
        if offset >= self.next_offset:
            return None
        i = bisect.bisect_right(self._index_offsets, offset) - 1
        pos = self._index_positions[i] if i >= 0 else 0
        while (peek := self._peek(pos)) is not None:
            base, last, _, size = peek
            if last >= offset:
                return pos, base
            pos += size
        return None

    def read(self, offset: int, max_bytes: int) -> tuple[bytes, int] | None:
        """Whole batches from the one holding ``offset``, at most ``max_bytes`` but never less than one batch.
        Returns ``(bytes, next offset after them)`` or None when ``offset`` is not in this segment."""
        found = self.position_of(offset)
        if found is None:
            return None
        start, _ = found
        pos = start
        next_offset = offset
        while (peek := self._peek(pos)) is not None:
            _, last, _, size = peek
            if pos + size - start > max_bytes and pos > start:
                break
            pos += size
            next_offset = last + 1
        return os.pread(self.fd, pos - start, start), next_offset

    # -- recovery ------------------------------------------------------------------------------------------------

    def scan(self, expected_offset: int, min_epoch: int) -> tuple[ScanResult, list[BatchInfo]]:
        """Validate every batch from the start; stop at the first invalid one.

        Checks length, magic, CRC-32C, offset contiguity and non-decreasing epochs. Pre-allocated zeros after
        the last batch are a clean end. On an error, also looks for any valid batch beyond it: if there is one,
        the damage is not a torn tail and the caller must not cut it away.
        """
        file_size = os.fstat(self.fd).st_size
        self.allocated = file_size
        batches: list[BatchInfo] = []
        if file_size == 0:
            return ScanResult(0, expected_offset), batches
        with mmap.mmap(self.fd, file_size, access=mmap.ACCESS_READ) as mm:
            pos = 0
            path = str(self.path)
            while pos < file_size:
                if not any(mm[pos : pos + LOG_OVERHEAD]) and all_zero(mm, pos):
                    break  # pre-allocated space: the clean end of the log
                try:
                    info = _validate(mm, pos, file_size, path)
                    if info.base_offset != expected_offset:
                        raise CorruptBatchError(
                            path, pos, f"base offset {info.base_offset} where offset {expected_offset} was expected"
                        )
                    if info.epoch < min_epoch:
                        raise CorruptBatchError(
                            path, pos, f"leader epoch {info.epoch} is below epoch {min_epoch} of the batch before it"
                        )
                except CorruptBatchError as e:
                    after = _find_valid_batch(mm, pos + 1, file_size, expected_offset, path)
                    return ScanResult(pos, expected_offset, e, after), batches
                batches.append(info)
                expected_offset = info.last_offset + 1
                min_epoch = info.epoch
                pos += info.size
        return ScanResult(pos, expected_offset), batches

    def load(self, batches: list[BatchInfo], valid_end: int, next_offset: int) -> None:
        """Adopt a scan's result: logical size, next offset and the rebuilt index."""
        self.size = valid_end
        self.next_offset = next_offset
        self._index_offsets.clear()
        self._index_positions.clear()
        self._bytes_since_index = 0
        for b in batches:
            self._note_batch(b.last_offset, b.position, b.size)


def _validate(mm: mmap.mmap, pos: int, file_size: int, path: str) -> BatchInfo:
    available = file_size - pos
    if available < HEADER_SIZE:
        raise CorruptBatchError(path, pos, f"only {available} bytes left, a batch header needs {HEADER_SIZE}")
    base, length, epoch, magic, crc, _, last_delta = _PEEK.unpack_from(mm, pos)
    size = length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise CorruptBatchError(path, pos, f"batch length {length} is smaller than a batch header")
    if size > available:
        raise CorruptBatchError(path, pos, f"batch length {length} runs past the end of the file ({available} left)")
    if magic != MAGIC:
        raise CorruptBatchError(path, pos, f"magic byte is {magic}, expected {MAGIC}")
    with memoryview(mm) as view:
        actual = crc32c.crc32c(view[pos + CRC_START : pos + size])
    if actual != crc:
        raise CorruptBatchError(path, pos, f"CRC-32C mismatch: stored {crc:#010x}, computed {actual:#010x}")
    count = HEADER.unpack_from(mm, pos)[-1]
    if last_delta < 0 or count <= 0:
        raise CorruptBatchError(path, pos, f"bad record count {count} (last offset delta {last_delta})")
    return BatchInfo(base, base + last_delta, epoch, pos, size)


def _find_valid_batch(mm: mmap.mmap, start: int, file_size: int, min_offset: int, path: str) -> int | None:
    """Position of the first valid batch at or after ``start`` with offsets >= ``min_offset``, if any.

    Candidates are the positions 16 bytes before a magic byte, found with ``mmap.find`` (C speed).
    """
    search = start + 16
    while (q := mm.find(bytes((MAGIC,)), search)) >= 0:
        candidate = q - 16
        try:
            info = _validate(mm, candidate, file_size, path)
            if info.base_offset >= min_offset:
                return candidate
        except CorruptBatchError:
            pass
        search = q + 1
    return None


def _pwrite_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, position)
        view = view[n:]
        position += n
