"""The interface the controller uses to reach Raft (Kafka's ``RaftClient``), and what it is handed back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """A committed batch, delivered to listeners in log order, once each."""

    base_offset: int
    last_offset: int
    epoch: int
    append_timestamp: int
    is_control: bool
    records: tuple[bytes, ...]  # record values (framed metadata records; for control batches, the message body)
    keys: tuple[bytes | None, ...] = ()  # record keys: null for data records, the 4-byte type for control records


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
