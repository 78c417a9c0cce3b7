"""Reading batch files as they lie on disk: log segments and snapshot ``.checkpoint`` files (both are plain
sequences of RecordBatches), for tools that must report damage and go on rather than stop."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from quorum.log.batch import LOG_OVERHEAD, CorruptBatchError, RecordBatch, read_batch
from quorum.log.snapshots import SNAPSHOT_SUFFIX, SnapshotId


@dataclass(frozen=True)
class Damage:
    """Bytes where no batch boundary can be found: the rest of the file cannot be read."""

    path: str
    position: int
    reason: str
    bytes_left: int


def scan_file(path: str | Path) -> Iterator[RecordBatch | Damage]:
    """Every batch of a file in order, CRC *not* enforced (call ``batch.crc_valid()``), then a :class:`Damage`
    if the file ends in bytes that are not a batch. Zeros after the last batch (pre-allocated space of a log that
    was not closed cleanly) are not damage."""
    path = str(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return
        with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as mm:
            pos = 0
            while pos < size:
                if not any(mm[pos : pos + LOG_OVERHEAD]) and all_zero(mm, pos):
                    return
                try:
                    batch = read_batch(mm, pos, path=path, check_crc=False)
                except CorruptBatchError as e:
                    yield Damage(path, pos, e.reason, size - pos)
                    return
                yield batch
                pos += batch.size


def is_snapshot(path: Path) -> bool:
    return path.name.endswith(SNAPSHOT_SUFFIX)


def parse_snapshot_name(path: Path) -> tuple[int, int] | None:
    """``(end offset, epoch)`` from ``%020d-%010d.checkpoint``, or None for another name (the tools' tuple form of
    :meth:`SnapshotId.parse`)."""
    snapshot_id = SnapshotId.parse(path)
    return None if snapshot_id is None else (snapshot_id.end_offset, snapshot_id.epoch)


def all_zero(mm: mmap.mmap, pos: int, chunk: int = 1 << 20) -> bool:
    """Whether every byte from ``pos`` to the end is zero, read a chunk at a time."""
    end = len(mm)
    while pos < end:
        part = mm[pos : min(pos + chunk, end)]
        if part.count(0) != len(part):
            return False
        pos += len(part)
    return True
