"""The leader's BatchAccumulator (Kafka's BatchAccumulator): final offsets at append time, batches that respect the
size limit and atomicity, and the group-commit drain policy."""

from __future__ import annotations

import pytest

from quorum.errors import Errors, KafkaError, NotLeaderError, RecordBatchTooLargeError
from quorum.log.batch import HEADER_SIZE, read_batch
from quorum.log.control import LeaderChangeMessage, Voter, decode_control, encode_control
from quorum.raft.accumulator import RECORD_OVERHEAD, BatchAccumulator, BufferFullError, PendingBatch

EPOCH = 3
LINGER = 25


def make(base: int = 10, max_batch: int = 1024, max_pending: int = 1 << 20) -> BatchAccumulator:
    return BatchAccumulator(EPOCH, base, linger_ms=LINGER, max_batch_bytes=max_batch, max_pending_bytes=max_pending)


def record(size: int, tag: int = 0) -> bytes:
    """A record that costs exactly ``size`` bytes of batch room (payload plus the per-record overhead)."""
    assert size > RECORD_OVERHEAD
    return bytes([tag % 256]) * (size - RECORD_OVERHEAD)


def decoded(batches: list[PendingBatch]) -> list[tuple[int, int, int, bool, list[bytes | None]]]:
    """(base offset, last offset, epoch, control, values) of each batch, read back from its encoding."""
    out = []
    for b in batches:
        encoded = b.encode(EPOCH)
        parsed = read_batch(encoded)
        assert parsed.size == len(encoded)
        values = [r.value for r in parsed.records()]
        out.append((parsed.base_offset, parsed.last_offset, parsed.epoch, parsed.is_control, values))
    return out


def test_offsets_are_final_and_contiguous() -> None:
    acc = make(base=10)
    assert acc.append(EPOCH, [b"a", b"b", b"c"], 0, 1000, atomic=False) == 12
    assert acc.append(EPOCH, [b"d"], 1, 1001, atomic=True) == 13
    assert acc.next_offset == 14
    batches = acc.drain()
    assert decoded(batches) == [(10, 13, EPOCH, False, [b"a", b"b", b"c", b"d"])]
    assert read_batch(batches[0].encode(EPOCH)).base_timestamp == 1000
    # After a drain the offsets carry on where they stopped.
    assert acc.append(EPOCH, [b"e", b"f"], 2, 1002, atomic=False) == 15
    assert decoded(acc.drain()) == [(14, 15, EPOCH, False, [b"e", b"f"])]
    assert acc.empty and acc.drain() == []


def test_empty_append_is_refused() -> None:
    acc = make()
    with pytest.raises(KafkaError) as e:
        acc.append(EPOCH, [], 0, 0, atomic=False)
    assert e.value.code == Errors.INVALID_REQUEST
    assert acc.empty and acc.next_offset == 10


def test_batches_close_at_the_size_limit() -> None:
    max_batch = 400
    room = max_batch - HEADER_SIZE  # 339 bytes of records per batch
    acc = make(base=0, max_batch=max_batch)
    recs = [record(100, i) for i in range(7)]  # 3 fit a batch (300 <= 339), a 4th does not
    assert acc.append(EPOCH, recs, 0, 0, atomic=False) == 6
    batches = acc.drain()
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 2), (3, 5), (6, 6)]
    assert all(b.size <= max_batch for b in batches) and batches[0].size == HEADER_SIZE + 300 <= HEADER_SIZE + room
    assert [v for *_, vs in decoded(batches) for v in vs] == recs
    assert all(len(b.encode(EPOCH)) <= max_batch for b in batches)  # the estimate is an upper bound


def test_atomic_append_never_spans_batches() -> None:
    acc = make(base=0, max_batch=400)
    acc.append(EPOCH, [record(100, 1), record(100, 2)], 0, 0, atomic=False)  # 200 of 339 bytes used
    # Two 100-byte records: only one would fit the open batch. Atomic: both go to a new batch together.
    assert acc.append(EPOCH, [record(100, 3), record(100, 4)], 0, 0, atomic=True) == 3
    batches = acc.drain()
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 1), (2, 3)]
    # The same append, not atomic, fills the open batch first and spills only the rest.
    acc = make(base=0, max_batch=400)
    acc.append(EPOCH, [record(100, 1), record(100, 2)], 0, 0, atomic=False)
    acc.append(EPOCH, [record(100, 3), record(100, 4)], 0, 0, atomic=False)
    assert [(b.base_offset, b.last_offset) for b in acc.drain()] == [(0, 2), (3, 3)]


def test_atomic_append_that_fits_the_open_batch_joins_it() -> None:
    acc = make(base=0, max_batch=400)
    acc.append(EPOCH, [record(100, 1)], 0, 0, atomic=False)
    acc.append(EPOCH, [record(100, 2), record(100, 3)], 0, 0, atomic=True)  # 300 <= 339
    assert [(b.base_offset, b.last_offset) for b in acc.drain()] == [(0, 2)]


def test_too_large_atomic_append_is_refused_whole() -> None:
    acc = make(base=5, max_batch=400)
    acc.append(EPOCH, [b"kept"], 0, 0, atomic=False)
    too_big = [record(100, i) for i in range(4)]  # 400 > 339: no single batch holds them
    with pytest.raises(RecordBatchTooLargeError) as e:
        acc.append(EPOCH, too_big, 0, 0, atomic=True)
    assert e.value.code == 18  # RECORD_LIST_TOO_LARGE
    assert acc.next_offset == 6  # nothing of it was taken
    assert decoded(acc.drain()) == [(5, 5, EPOCH, False, [b"kept"])]
    # Not atomic, the same records are fine: they spread over two batches.
    acc.append(EPOCH, too_big, 0, 0, atomic=False)
    assert [(b.base_offset, b.last_offset) for b in acc.drain()] == [(6, 8), (9, 9)]


def test_single_record_larger_than_a_batch_is_refused() -> None:
    acc = make(base=0, max_batch=400)
    with pytest.raises(RecordBatchTooLargeError):
        acc.append(EPOCH, [b"small", record(400 - HEADER_SIZE + 1)], 0, 0, atomic=False)
    assert acc.empty and acc.next_offset == 0
    assert acc.append(EPOCH, [record(400 - HEADER_SIZE)], 0, 0, atomic=False) == 0  # exactly one batch: fine


def test_stale_epoch_is_not_leader_and_future_epoch_is_a_bug() -> None:
    acc = make()
    with pytest.raises(NotLeaderError) as e:
        acc.append(EPOCH - 1, [b"x"], 0, 0, atomic=False)
    assert e.value.epoch == EPOCH
    with pytest.raises(KafkaError) as e:
        acc.append(EPOCH + 1, [b"x"], 0, 0, atomic=False)
    assert e.value.code == Errors.INVALID_REQUEST and "ahead of the leader's epoch" in str(e.value)
    assert acc.empty and acc.next_offset == 10


def test_memory_pool_limit() -> None:
    acc = make(max_pending=3 * 100)
    acc.append(EPOCH, [record(100), record(100)], 0, 0, atomic=False)
    with pytest.raises(BufferFullError):
        acc.append(EPOCH, [record(100), record(100)], 0, 0, atomic=False)
    assert acc.next_offset == 12
    acc.append(EPOCH, [record(100)], 0, 0, atomic=False)  # exactly at the limit
    acc.drain()  # written: the pool is free again
    acc.append(EPOCH, [record(100), record(100), record(100)], 0, 0, atomic=False)


def test_drains_at_once_when_no_write_is_in_flight() -> None:
    acc = make()
    assert not acc.needs_drain(0, write_in_flight=False)  # nothing to drain
    assert acc.next_deadline() is None
    acc.append(EPOCH, [b"x"], 100, 0, atomic=False)
    assert acc.needs_drain(100, write_in_flight=False)  # a lone append pays no linger


def test_lingers_while_a_write_is_in_flight() -> None:
    acc = make()
    acc.append(EPOCH, [b"x"], 100, 0, atomic=False)
    assert acc.next_deadline() == 100 + LINGER
    acc.append(EPOCH, [b"y"], 110, 0, atomic=False)
    assert acc.next_deadline() == 100 + LINGER  # the linger runs from the first append after a drain
    assert not acc.needs_drain(100, write_in_flight=True)
    assert not acc.needs_drain(100 + LINGER - 1, write_in_flight=True)
    assert acc.needs_drain(100 + LINGER, write_in_flight=True)
    assert [(b.base_offset, b.last_offset) for b in acc.drain()] == [(10, 11)]
    assert acc.next_deadline() is None
    acc.append(EPOCH, [b"z"], 500, 0, atomic=False)
    assert acc.next_deadline() == 500 + LINGER  # a new linger for the next batch


def test_full_batch_drains_even_with_a_write_in_flight() -> None:
    acc = make(base=0, max_batch=400)
    acc.append(EPOCH, [record(100), record(100)], 0, 0, atomic=False)
    assert not acc.needs_drain(1, write_in_flight=True)
    acc.append(EPOCH, [record(100), record(100)], 1, 0, atomic=False)  # the first batch is now complete
    assert acc.needs_drain(1, write_in_flight=True)
    batches = acc.drain()  # the drain takes the open batch too
    assert [(b.base_offset, b.last_offset) for b in batches] == [(0, 2), (3, 3)]


def test_control_batch_stands_alone_and_drains_at_once() -> None:
    acc = make(base=7)
    acc.append(EPOCH, [b"before"], 0, 0, atomic=False)
    change = LeaderChangeMessage(leader_id=1, voters=[Voter(voter_id=1)], granting_voters=[Voter(voter_id=1)])
    key, value = encode_control(change)
    assert acc.append_control(key, value, 0) == 8
    assert acc.needs_drain(0, write_in_flight=True)  # a completed batch waits for nobody
    acc.append(EPOCH, [b"after"], 0, 0, atomic=False)
    batches = acc.drain()
    assert [(b.base_offset, b.last_offset, b.control) for b in batches] == [(7, 7, False), (8, 8, True), (9, 9, False)]
    parsed = read_batch(batches[1].encode(EPOCH))
    assert parsed.is_control
    (rec,) = parsed.records()
    _, message, _ = decode_control(rec.key, rec.value)
    assert message == change
