"""The leader's BatchAccumulator: turns appends into RecordBatches and assigns their final offsets.

Offsets are handed out at append time (the caller learns where its records will sit). Records gather in an open
batch; a batch closes when full (``max_batch_bytes``), before a control batch, or when drained. *When* to drain is
the group-commit policy, decided by :meth:`needs_drain`: at once when no write is in flight (a lone append pays no
linger), otherwise when a batch is full or the linger (``controller.quorum.append.linger.ms``) has expired — so
batches grow exactly while a write is on its way (the core counts one until it is durable here and committed).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from quorum.errors import Errors, KafkaError, NotLeaderError, RecordBatchTooLargeError
from quorum.log.batch import HEADER_SIZE, build_batch

RECORD_OVERHEAD = 12  # upper bound of a KRaft record's framing (length, attributes, deltas, null key, headers)


class BufferFullError(KafkaError):
    """More bytes wait to be written than the accumulator's memory pool holds: the caller should back off."""


class PendingBatch:
    __slots__ = ("base_offset", "control", "records", "size", "timestamp")

    def __init__(self, base_offset: int, timestamp: int, control: bool = False) -> None:
        self.base_offset = base_offset
        self.timestamp = timestamp
        self.control = control
        self.records: list[tuple[bytes | None, bytes]] = []
        self.size = HEADER_SIZE

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    def encode(self, epoch: int) -> bytes:
        return build_batch(
            self.records, base_offset=self.base_offset, epoch=epoch, timestamp=self.timestamp, control=self.control
        )


class BatchAccumulator:
    def __init__(
        self, epoch: int, base_offset: int, *, linger_ms: int, max_batch_bytes: int, max_pending_bytes: int
    ) -> None:
        self.epoch = epoch
        self.next_offset = base_offset
        self.linger_ms = linger_ms
        self.max_batch_bytes = max_batch_bytes
        self.max_pending_bytes = max_pending_bytes
        self._completed: deque[PendingBatch] = deque()
        self._open: PendingBatch | None = None
        self._linger_deadline: int | None = None
        self._pending_bytes = 0

    # -- appending ---------------------------------------------------------------------------------------------

    def append(self, epoch: int, records: Sequence[bytes], now_ms: int, timestamp_ms: int, atomic: bool) -> int:
        """Queue ``records``; returns the offset of the last one. Atomic appends never span batches."""
        self._check_epoch(epoch)
        if not records:
            raise KafkaError("append needs at least one record", Errors.INVALID_REQUEST)
        sizes = [len(r) + RECORD_OVERHEAD for r in records]
        total = sum(sizes)
        limit = self.max_batch_bytes - HEADER_SIZE
        if atomic and total > limit:
            raise RecordBatchTooLargeError(
                f"an atomic append of {len(records)} records ({total} bytes) does not fit one batch of "
                f"{self.max_batch_bytes} bytes"
            )
        if max(sizes) > limit:
            raise RecordBatchTooLargeError(
                f"a record of {max(sizes)} bytes exceeds the batch size {self.max_batch_bytes}"
            )
        if self._pending_bytes + total > self.max_pending_bytes:
            raise BufferFullError(
                f"{self._pending_bytes} bytes already wait to be written (limit {self.max_pending_bytes})"
            )
        if atomic:
            batch = self._batch_with_room(total, timestamp_ms)
            batch.records.extend((None, r) for r in records)
            batch.size += total
            self.next_offset += len(records)
        else:
            for record, size in zip(records, sizes, strict=True):
                # next_offset advances record by record: a batch opened midway starts at its first record's offset
                batch = self._batch_with_room(size, timestamp_ms)
                batch.records.append((None, record))
                batch.size += size
                self.next_offset += 1
        self._pending_bytes += total
        if self._linger_deadline is None:
            self._linger_deadline = now_ms + self.linger_ms
        return self.next_offset - 1

    def append_control(self, key: bytes, value: bytes, timestamp_ms: int) -> int:
        """A control record gets a batch of its own (the control flag is per batch)."""
        self._close_open()
        batch = PendingBatch(self.next_offset, timestamp_ms, control=True)
        batch.records.append((key, value))
        self._completed.append(batch)
        self.next_offset += 1
        return self.next_offset - 1

    def _batch_with_room(self, size: int, timestamp_ms: int) -> PendingBatch:
        if self._open is not None and self._open.size + size > self.max_batch_bytes:
            self._close_open()
        if self._open is None:
            self._open = PendingBatch(self.next_offset, timestamp_ms)
        return self._open

    def _close_open(self) -> None:
        if self._open is not None and self._open.records:
            self._completed.append(self._open)
        self._open = None

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.epoch:
            raise NotLeaderError(f"append in epoch {epoch}, but the leader is in epoch {self.epoch}", epoch=self.epoch)
        if epoch > self.epoch:
            raise KafkaError(
                f"append in epoch {epoch}, ahead of the leader's epoch {self.epoch}", Errors.INVALID_REQUEST
            )

    # -- draining ----------------------------------------------------------------------------------------------

    @property
    def empty(self) -> bool:
        return not self._completed and self._open is None

    def needs_drain(self, now_ms: int, write_in_flight: bool) -> bool:
        if self.empty:
            return False
        if not write_in_flight or self._completed:
            return True
        return self._linger_deadline is not None and now_ms >= self._linger_deadline

    def next_deadline(self) -> int | None:
        return None if self.empty else self._linger_deadline

    def drain(self) -> list[PendingBatch]:
        self._close_open()
        batches = list(self._completed)
        self._completed.clear()
        self._pending_bytes = 0
        self._linger_deadline = None
        return batches
