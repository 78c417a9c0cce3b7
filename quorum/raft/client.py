"""The interface the controller uses to reach Raft (Kafka's ``RaftClient``), and what it is handed back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.log.batch import Record, RecordBatch, build_batch


class CommittedBatch:
    """A committed batch, delivered to listeners in log order, once each. Its records are parsed only when asked
    for: the active controller skips the ones it wrote itself."""

    __slots__ = ("_batch", "_records")

    def __init__(self, batch: RecordBatch) -> None:
        self._batch = batch
        self._records: list[Record] | None = None

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

    def _parsed(self) -> list[Record]:
        if self._records is None:
            self._records = self._batch.records()
        return self._records

    @property
    def records(self) -> tuple[bytes, ...]:
        """Record values: framed metadata records (for control batches, the message body)."""
        return tuple(r.value or b"" for r in self._parsed())

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


class RaftListener(Protocol):
    def handle_commit(self, batch: CommittedBatch) -> None: ...

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
