"""Metadata snapshots: ``<end offset %020d>-<epoch %010d>.checkpoint`` files in ``__cluster_metadata-0/``, in
Kafka's layout (see ``docs/snapshots.md``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SNAPSHOT_SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"  # a snapshot being written or fetched; never read as a snapshot


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
