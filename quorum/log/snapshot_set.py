"""The snapshots beside a metadata log: which exist, which is the newest valid one, and their bytes.

At open, a ``.checkpoint.part`` left by a crash is removed, and the newest snapshot is validated whole (CRC of every
batch, header first, footer last). A damaged one is moved aside to ``<name>.damaged`` with a log line naming the
byte where the damage is, and the next older one is tried: the node starts from the newest snapshot it can trust.
Older snapshots are validated only when they are read.
"""

from __future__ import annotations

import os
from pathlib import Path

import structlog

from quorum.log.deleter import FileDeleter
from quorum.log.files import fsync_dir
from quorum.log.snapshots import (
    CorruptSnapshotError,
    SnapshotFile,
    SnapshotFileInstaller,
    SnapshotFileWriter,
    SnapshotId,
    list_snapshots,
    remove_partial_snapshots,
)

DAMAGED_SUFFIX = ".damaged"

log = structlog.get_logger("quorum.log")


class SnapshotSet:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ids: list[SnapshotId] = []  # ascending; the last one was validated at open or written by us
        self._open: dict[SnapshotId, SnapshotFile] = {}  # files kept open while they are being served
        self.deleter = FileDeleter(directory)  # the log's own, once the log is open

    @classmethod
    def open(cls, directory: Path) -> SnapshotSet:
        self = cls(directory)
        for stray in remove_partial_snapshots(directory):
            log.warning("partial_snapshot_removed", path=str(stray))
        ids = list_snapshots(directory)
        while ids:
            newest = ids[-1]
            f = SnapshotFile.open(self.path(newest))
            try:
                f.validate()
                self._open[newest] = f  # validated once: loading it reuses this
                break
            except CorruptSnapshotError as e:
                f.close()
                ids.pop()
                aside = self.path(newest).with_name(newest.file_name + DAMAGED_SUFFIX)
                os.replace(self.path(newest), aside)
                fsync_dir(directory)
                log.error(
                    "snapshot_damaged",
                    path=e.path,
                    position=e.position,
                    reason=e.reason,
                    moved_to=str(aside),
                    next_candidate=str(ids[-1]) if ids else None,
                )
        self.ids = ids
        return self

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def latest(self) -> SnapshotId | None:
        return self.ids[-1] if self.ids else None

    @property
    def earliest(self) -> SnapshotId | None:
        return self.ids[0] if self.ids else None

    def path(self, snapshot_id: SnapshotId) -> Path:
        return self.dir / snapshot_id.file_name

    def size(self, snapshot_id: SnapshotId) -> int:
        return self.path(snapshot_id).stat().st_size

    def total_bytes(self) -> int:
        return sum(self.size(i) for i in self.ids)

    def age_ms(self, snapshot_id: SnapshotId, now_ms: float) -> float:
        return now_ms - self.path(snapshot_id).stat().st_mtime * 1000

    # -- reading ---------------------------------------------------------------------------------------------

    def file(self, snapshot_id: SnapshotId) -> SnapshotFile | None:
        """The open snapshot, or None if it is not (or no longer) one of ours."""
        if snapshot_id not in self.ids:
            return None
        f = self._open.get(snapshot_id)
        if f is None:
            f = self._open[snapshot_id] = SnapshotFile.open(self.path(snapshot_id))
        return f

    def read(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        """``(bytes from position, the snapshot's size)``; None if that snapshot is gone. ValueError for a
        position beyond its end."""
        f = self.file(snapshot_id)
        if f is None:
            return None
        return f.read(position, max_bytes), f.size

    # -- writing ---------------------------------------------------------------------------------------------

    def writer(self, snapshot_id: SnapshotId, last_contained_log_timestamp: int) -> SnapshotFileWriter:
        return SnapshotFileWriter(self.dir, snapshot_id, last_contained_log_timestamp)

    def installer(self, snapshot_id: SnapshotId) -> SnapshotFileInstaller:
        return SnapshotFileInstaller(self.dir, snapshot_id)

    def add(self, snapshot_id: SnapshotId) -> None:
        """A snapshot was frozen under its final name."""
        if snapshot_id not in self.ids:
            self.ids.append(snapshot_id)
            self.ids.sort()

    def delete(self, snapshot_id: SnapshotId) -> None:
        f = self._open.pop(snapshot_id, None)
        if f is not None:
            f.close()
        self.ids.remove(snapshot_id)
        self.deleter.delete([self.path(snapshot_id)])
        log.info("snapshot_deleted", path=str(self.path(snapshot_id)))

    def forget_before(self, snapshot_id: SnapshotId) -> None:
        """Delete every snapshot older than ``snapshot_id`` (the log now starts at it)."""
        for old in [i for i in self.ids if i < snapshot_id]:
            self.delete(old)

    def close(self) -> None:
        for f in self._open.values():
            f.close()
        self._open.clear()
