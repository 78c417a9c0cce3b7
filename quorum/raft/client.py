"""The interface the controller uses to reach Raft (Kafka's ``RaftClient``), and what it is handed back."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.log.batch import Record, RecordBatch, build_batch
from quorum.log.snapshots import SnapshotId


class CommittedBatch:
    """A committed batch, delivered to listeners in log order, once each. Its records are parsed only when asked
    for: the active controller skips the ones it wrote itself."""

    __slots__ = ("_batch", "_records", "_values")

    def __init__(self, batch: RecordBatch) -> None:
        self._batch = batch
        self._records: list[Record] | None = None
        self._values: tuple[bytes, ...] | None = None

    @classmethod
    def of(cls, records: Sequence[bytes], base_offset: int = 0, epoch: int = 0, timestamp: int = 0) -> CommittedBatch:
        """A data batch of ``records`` (tests and tools)."""
        raw = build_batch([(None, r) for r in records], base_offset=base_offset, epoch=epoch, timestamp=timestamp)
        return cls(RecordBatch(raw))

    @property
    def base_offset(self) -> int:
        return self._batch.base_offset

    @property
    def last_offset(self) -> int:
        return self._batch.last_offset

    @property
    def epoch(self) -> int:
        return self._batch.partition_leader_epoch

    @property
    def append_timestamp(self) -> int:
        return self._batch.base_timestamp

    @property
    def is_control(self) -> bool:
        return self._batch.is_control

    @property
    def size_bytes(self) -> int:
        """The batch's size in the log (what ``metadata.log.max.record.bytes.between.snapshots`` counts)."""
        return self._batch.size

    def _parsed(self) -> list[Record]:
        if self._records is None:
            self._records = self._batch.records()
        return self._records

    @property
    def records(self) -> tuple[bytes, ...]:
        """Record values: framed metadata records (for control batches, the message body)."""
        if self._values is None:
            parsed = self._records
            self._values = tuple(self._batch.values() if parsed is None else (r.value or b"" for r in parsed))
        return self._values

    @property
    def keys(self) -> tuple[bytes | None, ...]:
        """Record keys: null for data records, the 4-byte type for control records."""
        return tuple(r.key for r in self._parsed())

    def __repr__(self) -> str:
        kind = "control" if self.is_control else "data"
        return f"CommittedBatch({kind}, offsets {self.base_offset}-{self.last_offset}, epoch {self.epoch})"


@dataclass(frozen=True, slots=True)
class LeaderAndEpoch:
    leader_id: int  # -1 when unknown
    epoch: int


class SnapshotReader(Protocol):
    """A frozen snapshot, as handed to a listener to load (Kafka's ``SnapshotReader``)."""

    @property
    def snapshot_id(self) -> SnapshotId: ...

    @property
    def last_contained_log_timestamp(self) -> int: ...

    def batches(self) -> Iterator[CommittedBatch]:
        """The data batches in order (the header and footer control batches left out), offsets within the
        snapshot. Raises if the file turns out damaged while read."""
        ...


class SnapshotWriter(Protocol):
    """A snapshot being written by its listener (Kafka's ``SnapshotWriter``). Nothing is visible until
    :meth:`freeze` returns; :meth:`abort` (or a failed freeze) leaves no trace."""

    @property
    def snapshot_id(self) -> SnapshotId: ...

    def append(self, records: Sequence[bytes]) -> None:
        """Framed metadata records, in order; batched as the writer sees fit."""
        ...

    async def freeze(self) -> int:
        """Write the footer, make the file durable under its final name (fsync, rename, directory fsync — off the
        event loop) and register it with the log; the snapshot's size in bytes. Raises OSError (e.g. disk full)
        after removing the partial file."""
        ...

    def abort(self) -> None: ...


class RaftListener(Protocol):
    def handle_commit(self, batch: CommittedBatch) -> None: ...

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace all state with the snapshot's. Called before any batch after it is delivered: at start when a
        snapshot exists, and when this node installs one fetched from the leader (its state is then behind the
        leader's log start)."""
        ...

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None: ...


class RaftClient(Protocol):
    node_id: int

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    def next_offset(self) -> int:
        """On the leader: the offset the next appended record will get."""
        ...

    def append(self, epoch: int, records: Sequence[bytes]) -> int:
        """Queue records (they may span batches); the offset of the last. Raises NotLeaderError."""
        ...

    def append_atomic(self, epoch: int, records: Sequence[bytes]) -> int:
        """Queue records as one batch, all or nothing; the offset of the last."""
        ...

    def register(self, listener: RaftListener) -> None: ...

    def resign(self, epoch: int) -> None: ...

    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def create_snapshot(self, snapshot_id: SnapshotId, last_contained_log_timestamp: int) -> SnapshotWriter | None:
        """A writer for a snapshot of the state through ``snapshot_id.end_offset - 1``, which must be committed
        and end a batch of epoch ``snapshot_id.epoch`` (ValueError otherwise); None if that snapshot (or a later
        one) exists already."""
        ...
