"""The metadata log: append, flush, segments and their index, read, truncation, the epoch cache and its
checkpoint file, quorum-state. Crash recovery has its own file (test_log_recovery.py)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import struct
from pathlib import Path

import crc32c
import pytest
from structlog.testing import capture_logs

from controller.records import LeaderChangeMessage, PartitionRecord, TopicRecord, Uuid, Voter, deserialize, serialize
from quorum.log import segment as segment_module
from quorum.log.batch import MAX_BATCH_SIZE, CorruptBatchError, RecordBatch, build_batch, iter_batches, read_batch
from quorum.log.control import encode_control
from quorum.log.epoch_cache import CHECKPOINT_NAME, EpochCache
from quorum.log.log import METADATA_PARTITION_DIR, PREALLOCATE_CHUNK, LogConfig, MetadataLog
from quorum.log.quorum_state import QUORUM_STATE_NAME, ElectionState, QuorumStateStore
from quorum.log.reader import scan_file
from quorum.log.segment import Segment

TOPIC_ID = Uuid.from_int(0x5EED)
SMALL_PREALLOC = LogConfig(preallocate_bytes=16 * 1024)


# -- helpers -----------------------------------------------------------------------------------------------------


def partition_value(p: int) -> bytes:
    return serialize(
        PartitionRecord(
            partition_id=p,
            topic_id=TOPIC_ID,
            replicas=[1, 2, 3],
            isr=[1, 2, 3],
            leader=1 + p % 3,
            leader_epoch=0,
            partition_epoch=0,
            directories=[Uuid.from_int(1)] * 3,
        )
    )


def data_batch(first_partition: int, count: int, epoch: int = 0, base_offset: int = 0) -> bytes:
    return build_batch(
        [(None, partition_value(first_partition + i)) for i in range(count)],
        base_offset=base_offset,
        epoch=epoch,
        timestamp=1_700_000_000_000 + first_partition,
    )


def control_batch(epoch: int, leader: int = 1) -> bytes:
    message = LeaderChangeMessage(
        leader_id=leader, voters=[Voter(voter_id=v) for v in (1, 2, 3)], granting_voters=[Voter(voter_id=leader)]
    )
    return build_batch([encode_control(message)], epoch=epoch, timestamp=1_700_000_000_000, control=True)


def topic_batch(epoch: int) -> bytes:
    return build_batch([(None, serialize(TopicRecord(name="t", topic_id=TOPIC_ID)))], epoch=epoch)


def log_dir(data_dir: Path) -> Path:
    return data_dir / METADATA_PARTITION_DIR


def file_batches(path: Path) -> list[RecordBatch]:
    """The batches of one segment file as it lies on disk (positions are file positions), up to the pre-allocated
    zeros of an open segment."""
    out = []
    for item in scan_file(path):
        assert isinstance(item, RecordBatch), item
        assert item.crc_valid()
        out.append(item)
    return out


def read_index(path: Path) -> list[tuple[int, int]]:
    data = path.read_bytes()
    assert len(data) % 8 == 0, f"{path} is {len(data)} bytes, not a whole number of 8-byte entries"
    return [struct.unpack_from(">ii", data, i) for i in range(0, len(data), 8)]


def segment_model(directory: Path) -> list[tuple[Path, list[RecordBatch]]]:
    return [(p, file_batches(p)) for p in sorted(directory.glob("*.log"))]


def fill_log(log: MetadataLog, n: int, records_per_batch=(1, 3, 2, 4), epochs=None) -> list[bytes]:
    """Append ``n`` batches of varied size; returns the bytes as stamped by the log."""
    out = []
    for i in range(n):
        epoch = epochs[i] if epochs else max(log.last_epoch, 1)
        batch = data_batch(10 * i, records_per_batch[i % len(records_per_batch)], epoch=epoch)
        info = log.append(batch)
        out.append(read_batch(batch).with_offset(info.base_offset))
    return out


def expected_read(model, offset: int, max_bytes: int) -> tuple[bytes, int]:
    """What ``read`` must return, from the file model: whole batches of one segment, from the one holding
    ``offset``, as many as fit in ``max_bytes`` but at least one."""
    for _, batches in model:
        for i, b in enumerate(batches):
            if b.base_offset <= offset <= b.last_offset:
                out, total, nxt = [], 0, offset
                for c in batches[i:]:
                    if out and total + c.size > max_bytes:
                        break
                    out.append(c.buffer)
                    total += c.size
                    nxt = c.next_offset
                return b"".join(out), nxt
    raise AssertionError(f"offset {offset} is in no batch")


# -- append --------------------------------------------------------------------------------------------------------


def test_append_assigns_contiguous_offsets_and_stamps_offset_and_epoch(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, SMALL_PREALLOC)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (0, 0, 0)
    sources = [
        control_batch(epoch=0),  # stamped to epoch 1 below
        data_batch(0, 3, epoch=0, base_offset=999),  # a base offset from elsewhere: overwritten
        data_batch(3, 1, epoch=4, base_offset=7),
        topic_batch(epoch=9),
    ]
    infos = [
        log.append(sources[0], epoch=1),
        log.append(sources[1], epoch=1),
        log.append(sources[2], epoch=2),
        log.append(sources[3]),  # no epoch given: the batch's own (9) is kept
    ]
    assert [(i.base_offset, i.last_offset, i.epoch) for i in infos] == [(0, 0, 1), (1, 3, 1), (4, 4, 2), (5, 5, 9)]
    assert log.end_offset == 6 and log.last_epoch == 9
    positions = [0]
    for s in sources[:-1]:
        positions.append(positions[-1] + len(s))
    assert [i.position for i in infos] == positions

    on_disk = log.batches()
    assert [(b.base_offset, b.last_offset, b.epoch) for b in on_disk] == [(0, 0, 1), (1, 3, 1), (4, 4, 2), (5, 5, 9)]
    for src, b in zip(sources, on_disk, strict=True):
        # Only baseOffset (0..7) and partitionLeaderEpoch (12..15) change; both lie outside the CRC, which stays
        # the one the batch was built with and still verifies.
        assert b.buffer[8:12] == src[8:12] and b.buffer[16:] == src[16:]
        assert b.crc == read_batch(src).crc and b.crc_valid()
        read_batch(b.buffer)  # validates CRC
    assert [r.offset for r in on_disk[1].records()] == [1, 2, 3]
    assert deserialize(on_disk[1].records()[2].value).message.partition_id == 2
    assert on_disk[0].is_control and not on_disk[1].is_control
    log.close()


def _corrupt_crc(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[-3] ^= 0x10  # inside the last record: covered by the CRC
    return bytes(b)


def _zero_records(batch: bytes) -> bytes:
    """A CRC-valid batch whose recordsCount is 0: a batch with no records."""
    b = bytearray(batch)
    struct.pack_into(">i", b, 57, 0)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def _bad_magic(batch: bytes) -> bytes:
    b = bytearray(batch)
    b[16] = 1
    return bytes(b)


INVALID_APPENDS = {
    "bad crc": lambda: (_corrupt_crc(data_batch(0, 2, epoch=2)), None),
    "bad magic": lambda: (_bad_magic(data_batch(0, 2, epoch=2)), None),
    "two batches": lambda: (data_batch(0, 1, epoch=2) + data_batch(1, 1, epoch=2), None),
    "trailing byte": lambda: (data_batch(0, 1, epoch=2) + b"\x00", None),
    "torn batch": lambda: (data_batch(0, 2, epoch=2)[:-5], None),
    "header only": lambda: (data_batch(0, 2, epoch=2)[:40], None),
    "empty": lambda: (b"", None),
    "no records": lambda: (_zero_records(data_batch(0, 1, epoch=2)), None),
    "epoch backwards (argument)": lambda: (data_batch(0, 1, epoch=5), 1),
    "epoch backwards (batch)": lambda: (data_batch(0, 1, epoch=1), None),
    "negative epoch": lambda: (data_batch(0, 1, epoch=2), -1),
    "over 8 MiB": lambda: (build_batch([(None, bytes(MAX_BATCH_SIZE))], epoch=2), None),
}


@pytest.mark.parametrize("case", sorted(INVALID_APPENDS))
def test_append_rejects_invalid_batch_and_changes_nothing(tmp_path: Path, case: str) -> None:
    log = MetadataLog.open(tmp_path, SMALL_PREALLOC)
    log.append(control_batch(epoch=2))
    log.append(data_batch(0, 3, epoch=2))
    log.flush()
    seg = log.segments[-1]
    before = (log.end_offset, log.last_epoch, log.flushed_offset, log.epochs.entries, seg.read_bytes())
    checkpoint = (log.dir / CHECKPOINT_NAME).read_bytes()

    batch, epoch = INVALID_APPENDS[case]()
    with pytest.raises(ValueError) as exc:  # CorruptBatchError is a ValueError
        log.append(batch, epoch=epoch)
    if case in ("bad crc", "bad magic", "torn batch", "header only", "empty"):
        assert isinstance(exc.value, CorruptBatchError)

    assert (log.end_offset, log.last_epoch, log.flushed_offset, log.epochs.entries, seg.read_bytes()) == before
    assert log.flush() == before[0]
    assert (log.dir / CHECKPOINT_NAME).read_bytes() == checkpoint
    # The log goes on: the next valid batch takes the next offset.
    info = log.append(data_batch(9, 2, epoch=2))
    assert (info.base_offset, info.last_offset) == (4, 5)
    log.close()
    with MetadataLog.open(tmp_path, SMALL_PREALLOC) as again:
        assert [(b.base_offset, b.last_offset, b.epoch) for b in again.batches()] == [(0, 0, 2), (1, 3, 2), (4, 5, 2)]


def test_flush_returns_the_flushed_offset_and_writes_the_checkpoint(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, SMALL_PREALLOC)
    checkpoint = log.dir / CHECKPOINT_NAME
    assert log.flushed_offset == 0 and log.flush() == 0
    log.append(control_batch(epoch=1))
    log.append(data_batch(0, 4, epoch=1))
    assert log.end_offset == 5 and log.flushed_offset == 0  # appended, not yet durable
    assert not checkpoint.exists() or checkpoint.read_text() == "0\n0\n"  # epoch 1 is not written before the flush
    assert log.flush() == 5
    assert log.flushed_offset == 5
    assert checkpoint.read_text() == "0\n1\n1 0\n"
    log.append(data_batch(4, 2, epoch=3))
    assert log.flushed_offset == 5
    assert log.flush() == 7 == log.flushed_offset
    assert checkpoint.read_text() == "0\n2\n1 0\n3 5\n"
    assert log.flush() == 7  # nothing new
    log.close()


def test_close_and_reopen_keeps_everything(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=2048, index_interval_bytes=300, preallocate_bytes=8192)
    log = MetadataLog.open(tmp_path, config)
    assert log.append(control_batch(epoch=1)).base_offset == 0
    stamped = fill_log(log, 12, epochs=[1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 4])
    before = [b.buffer for b in log.batches()]
    segments, end, epochs = log.segments, log.end_offset, log.epochs.entries
    assert len(segments) >= 3
    log.close()

    with capture_logs() as logs, MetadataLog.open(tmp_path, config) as log:
        assert log.segments == segments
        assert log.end_offset == end == log.flushed_offset
        assert log.last_epoch == 4
        # Records per batch cycle 1, 3, 2, 4 after the control batch at 0: epoch 2 starts at 7, epoch 4 at 17.
        assert log.epochs.entries == epochs == [(1, 0), (2, 7), (4, 17)]
        assert [b.buffer for b in log.batches()] == before
        assert [b.buffer for b in log.batches()][1:] == stamped
        values = [r.value for b in log.batches()[1:] for r in b.records()]
        counts = (1, 3, 2, 4)
        assert [deserialize(v).message.partition_id for v in values] == [
            10 * i + j for i in range(12) for j in range(counts[i % 4])
        ]
    assert not [e for e in logs if e["event"] == "log_tail_truncated"]
    assert (log_dir(tmp_path) / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert (log_dir(tmp_path) / CHECKPOINT_NAME).read_text() == "0\n3\n" + "".join(f"{e} {s}\n" for e, s in epochs)


def test_close_and_reopen_exact_epoch_entries(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, SMALL_PREALLOC)
    log.append(control_batch(epoch=1))  # 0
    log.append(data_batch(0, 3, epoch=1))  # 1-3
    log.append(control_batch(epoch=2))  # 4
    log.append(data_batch(3, 2, epoch=2))  # 5-6
    log.append(control_batch(epoch=5))  # 7
    log.close()
    with MetadataLog.open(tmp_path, SMALL_PREALLOC) as log:
        assert log.epochs.entries == [(1, 0), (2, 4), (5, 7)]
        assert (log.end_offset, log.last_epoch) == (8, 5)


def test_closed_segments_have_no_trailing_zeros_and_a_kafka_index(tmp_path: Path) -> None:
    interval = 500
    config = LogConfig(segment_bytes=4096, index_interval_bytes=interval, preallocate_bytes=PREALLOCATE_CHUNK)
    log = MetadataLog.open(tmp_path, config)
    fill_log(log, 40)
    active = log.segments[-1]
    assert active.stat().st_size > 1024 * 1024  # pre-allocated while open
    for rolled in log.segments[:-1]:  # trimmed (and indexed) at the roll already
        assert rolled.stat().st_size == sum(b.size for b in file_batches(rolled)) <= 4096
        assert rolled.with_suffix(".index").exists()
    log.close()

    model = segment_model(log_dir(tmp_path))
    assert len(model) >= 4
    for path, batches in model:
        data = path.read_bytes()
        assert len(data) == sum(b.size for b in batches)  # nothing but batches: the pre-allocated zeros are gone
        assert batches[-1].position + batches[-1].size == len(data)
        base = int(path.name[:-4])
        entries = read_index(path.with_suffix(".index"))
        assert entries, f"{path}: empty index"
        starts = {b.position: b for b in batches}
        prev = None
        for rel, pos in entries:
            assert pos in starts, f"index position {pos} is not a batch start"
            assert rel == starts[pos].last_offset - base  # Kafka indexes a batch by its last offset
            if prev is not None:
                assert pos - prev > interval  # sparse: at most one entry per interval
            prev = pos
        indexed = [pos for _, pos in entries]
        assert indexed == sorted(indexed)
        for b in batches:  # ...and at least one: no batch starts more than an interval past the last entry
            before = [p for p in indexed if p <= b.position]
            assert b.position - (before[-1] if before else 0) <= interval or b.position in indexed


# -- segments and read ----------------------------------------------------------------------------------------------


def test_segments_roll_at_segment_bytes_and_are_named_by_base_offset(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1024, preallocate_bytes=4096)
    log = MetadataLog.open(tmp_path, config)
    fill_log(log, 20)
    big = build_batch([(None, bytes(3000))], epoch=1)  # larger than a segment: gets a segment of its own
    big_info = log.append(big)
    after = log.append(data_batch(0, 1, epoch=1))
    end = log.end_offset
    log.close()

    model = segment_model(log_dir(tmp_path))
    assert [p.name for p, _ in model] == [p.name for p in log.segments]
    assert len(model) >= 6
    expected_offset = 0
    for path, batches in model:
        assert path.name == f"{batches[0].base_offset:020d}.log" and len(path.name) == 24
        assert batches[0].base_offset == expected_offset
        expected_offset = batches[-1].next_offset
        size = sum(b.size for b in batches)
        assert size <= 1024 or len(batches) == 1
    assert expected_offset == end
    assert [b.base_offset for b in model[-2][1]] == [big_info.base_offset]
    assert [b.base_offset for b in model[-1][1]] == [after.base_offset]
    # Each segment was filled as far as it goes: the next segment's first batch did not fit.
    for (_, batches), (_, following) in itertools.pairwise(model):
        assert sum(b.size for b in batches) + following[0].size > 1024


def test_read_returns_whole_batches_of_one_segment(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1500, index_interval_bytes=256, preallocate_bytes=4096)
    log = MetadataLog.open(tmp_path, config)
    fill_log(log, 25)
    model = segment_model(log_dir(tmp_path))
    assert len(model) >= 4
    sizes = sorted({b.size for _, bs in model for b in bs})
    end = log.end_offset
    for max_bytes in (0, 1, sizes[0], sizes[-1], sizes[0] + sizes[-1], 1000, 10**6):
        for offset in range(end):
            data, nxt = log.read(offset, max_bytes)
            assert (data, nxt) == expected_read(model, offset, max_bytes), (offset, max_bytes)
            batches = list(iter_batches(data))
            assert batches[0].base_offset <= offset <= batches[0].last_offset
            assert len(batches) == 1 or len(data) <= max_bytes
            assert nxt == batches[-1].next_offset
            seg_of = {b.base_offset: i for i, (_, bs) in enumerate(model) for b in bs}
            assert len({seg_of[b.base_offset] for b in batches}) == 1  # never crosses a segment
    assert log.read(end, 10**6) == (b"", end)
    assert log.read(end) == (b"", end)
    with pytest.raises(ValueError):
        log.read(end + 1)
    with pytest.raises(ValueError):
        log.read(-1)
    # Reading the whole log batch by batch gives back exactly the files' bytes.
    offset, chunks = 0, []
    while offset < end:
        data, offset = log.read(offset, 10**6)
        chunks.append(data)
    assert chunks == [p.read_bytes()[: sum(b.size for b in bs)] for p, bs in model]
    log.close()


def test_read_of_an_empty_log(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, SMALL_PREALLOC) as log:
        assert log.read(0) == (b"", 0)
        assert log.batches() == []
        with pytest.raises(ValueError):
            log.read(1)


@pytest.mark.parametrize("interval", [1, 200, 1000, 4096, 10**6])
@pytest.mark.parametrize("reopen", [False, True])
def test_read_uses_the_sparse_index(tmp_path: Path, monkeypatch, interval: int, reopen: bool) -> None:
    config = LogConfig(segment_bytes=6000, index_interval_bytes=interval, preallocate_bytes=8192)
    log = MetadataLog.open(tmp_path, config)
    fill_log(log, 60)
    if reopen:  # the index is rebuilt by recovery
        log.close()
        log = MetadataLog.open(tmp_path, config)
    model = segment_model(log_dir(tmp_path))
    assert len(model) >= 3

    peeks = 0
    real_peek = Segment._peek

    def counting_peek(self, position):
        nonlocal peeks
        peeks += 1
        return real_peek(self, position)

    monkeypatch.setattr(segment_module.Segment, "_peek", counting_peek)
    worst = 0
    for offset in range(log.end_offset):
        for max_bytes in (1, 700):
            peeks = 0
            assert log.read(offset, max_bytes) == expected_read(model, offset, max_bytes), (offset, interval)
            worst = max(worst, peeks) if max_bytes == 1 else worst
    most_batches = max(len(bs) for _, bs in model)
    if interval == 1:
        # Every batch is indexed (by its last offset): the lookup starts at the batch or the one before it, and
        # reading peeks at most twice more (the batch, and the next one that does not fit).
        assert worst <= 4
    elif interval == 10**6:
        # Only the first batch of each segment is indexed: finding a batch walks the segment from its start.
        assert worst >= most_batches
    # Whatever the interval, a lookup never walks more than one interval's worth of batches past the entry.
    smallest = min(b.size for _, bs in model for b in bs)
    assert worst <= min(most_batches, interval // smallest + 2) + 2
    log.close()


# -- truncation -------------------------------------------------------------------------------------------------------


def _build_truncation_log(tmp_path: Path, config: LogConfig) -> MetadataLog:
    log = MetadataLog.open(tmp_path, config)
    log.append(control_batch(epoch=1))
    fill_log(log, 6, epochs=[1, 1, 1, 1, 1, 1])
    log.append(control_batch(epoch=3))
    fill_log(log, 6, epochs=[3, 3, 3, 3, 3, 3])
    log.append(control_batch(epoch=4))
    fill_log(log, 3, epochs=[4, 4, 4])
    log.flush()
    return log


TRUNC_CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=200, preallocate_bytes=8192)


def test_truncate_to_every_offset(tmp_path: Path) -> None:
    source = tmp_path / "source"
    log = _build_truncation_log(source, TRUNC_CONFIG)
    all_batches = log.batches()
    end = log.end_offset
    assert len(log.segments) >= 3
    log.close()
    original = segment_model(log_dir(source))

    for offset in range(end + 1):
        data_dir = tmp_path / f"t{offset}"
        shutil.copytree(source, data_dir)
        log = MetadataLog.open(data_dir, TRUNC_CONFIG)
        with capture_logs() as logs:
            new_end = log.truncate_to(offset)
        # A batch is never split: the one holding `offset` goes whole.
        kept = [b for b in all_batches if b.last_offset < offset]
        expected_end = kept[-1].next_offset if kept else 0
        assert new_end == expected_end == log.end_offset
        assert log.flushed_offset == expected_end
        assert [b.buffer for b in log.batches()] == [b.buffer for b in kept]
        epochs = []
        for b in kept:
            if not epochs or epochs[-1][0] != b.epoch:
                epochs.append((b.epoch, b.base_offset))
        assert log.epochs.entries == epochs
        assert log.last_epoch == (epochs[-1][0] if epochs else 0)
        assert (log_dir(data_dir) / CHECKPOINT_NAME).read_text() == "\n".join(
            ["0", str(len(epochs))] + [f"{e} {s}" for e, s in epochs]
        ) + "\n"
        # Segments wholly above the new end are deleted, .log and .index; the one holding it is cut, on disk.
        keep_segments = [p for p, bs in original if bs[0].base_offset <= expected_end]
        if offset < end:
            assert any(e["event"] == "log_truncated" for e in logs)
        assert sorted(p.name for p in log_dir(data_dir).glob("*.log")) == [p.name for p in keep_segments]
        assert {p.stem for p in log_dir(data_dir).glob("*.index")} <= {p.stem for p in keep_segments}
        last_file = log_dir(data_dir) / keep_segments[-1].name
        in_last = [b for b in kept if b.base_offset >= int(last_file.stem)]
        assert last_file.stat().st_size == sum(b.size for b in in_last)  # the bytes are gone, not forgotten
        # Appending goes on at the new end, in a new epoch.
        info = log.append(data_batch(500, 2, epoch=7))
        assert info.base_offset == expected_end
        log.close()
        with MetadataLog.open(data_dir, TRUNC_CONFIG) as again:
            assert [b.buffer for b in again.batches()[:-1]] == [b.buffer for b in kept]
            assert again.end_offset == expected_end + 2
            assert again.epochs.entries == [*epochs, (7, expected_end)]


def test_truncate_mid_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, SMALL_PREALLOC)
    log.append(data_batch(0, 2, epoch=1))  # 0-1
    log.append(data_batch(2, 4, epoch=2))  # 2-5
    log.append(data_batch(6, 1, epoch=2))  # 6
    for offset in (5, 4, 3):
        assert log.truncate_to(offset) == 2
        assert log.end_offset == 2
        assert log.epochs.entries == [(1, 0)]
        assert log.last_epoch == 1
        assert log.segments[0].stat().st_size == len(data_batch(0, 2))
    assert log.truncate_to(2) == 2  # nothing at or above 2 left: a no-op
    assert log.truncate_to(100) == 2
    with pytest.raises(ValueError):
        log.truncate_to(-1)
    assert log.end_offset_for_epoch(2) == (1, 2)
    assert log.truncate_to(0) == 0
    assert log.batches() == [] and log.last_epoch == 0 and log.epochs.entries == []
    assert (log.dir / CHECKPOINT_NAME).read_text() == "0\n0\n"
    log.append(data_batch(0, 1, epoch=1))  # a lower epoch than before the truncation is fine now
    assert log.epochs.entries == [(1, 0)]
    log.close()


@pytest.mark.parametrize("flush_before_close", [False, True])
def test_stale_bytes_do_not_resurrect_after_truncate_append_reopen(tmp_path: Path, flush_before_close: bool) -> None:
    log = _build_truncation_log(tmp_path, TRUNC_CONFIG)
    all_batches = log.batches()
    # Truncate into the middle of the second segment, then write fewer, smaller batches in a new epoch.
    second = int(log.segments[1].stem)
    cut = next(b for b in all_batches if b.base_offset > second + 1).base_offset + 1
    kept = [b.buffer for b in all_batches if b.last_offset < cut]
    log.truncate_to(cut)
    new = [build_batch([(None, b"x" * 5)], epoch=9), build_batch([(None, b"y")], epoch=9)]
    expected = kept + [read_batch(b).with_offset(log.append(b).base_offset) for b in new]
    expected_end = log.end_offset
    if flush_before_close:
        log.flush()
    log.close()
    with capture_logs() as logs, MetadataLog.open(tmp_path, TRUNC_CONFIG) as log:
        assert [b.buffer for b in log.batches()] == expected
        assert log.end_offset == expected_end
        assert log.last_epoch == 9
        assert log.epochs.entries[-1] == (9, expected_end - 2)
        assert [e["event"] for e in logs if e["event"] in ("log_tail_truncated", "epoch_checkpoint_unreadable")] == []
        files = sorted(log.dir.glob("*.log"))
        assert len(files) == 2
        assert b"".join(p.read_bytes() for p in files) == b"".join(expected)


def test_truncate_without_reappending_then_reopen(tmp_path: Path) -> None:
    log = _build_truncation_log(tmp_path, TRUNC_CONFIG)
    all_batches = log.batches()
    cut = all_batches[len(all_batches) // 2].base_offset + 1
    kept = [b.buffer for b in all_batches if b.last_offset < cut]
    end = log.truncate_to(cut)
    # No close: a crash right after the truncation finds exactly the truncated log, with the bytes beyond the cut
    # removed from the file (not left behind the logical end, where a recovery could take them for log data).
    assert b"".join(p.read_bytes() for p in log.segments) == b"".join(kept)
    other = MetadataLog.open(tmp_path, TRUNC_CONFIG)
    assert [b.buffer for b in other.batches()] == kept
    assert other.end_offset == end
    other.close()
    log.close()


# -- epoch cache -------------------------------------------------------------------------------------------------------


def test_epoch_cache_end_offset_for() -> None:
    cache = EpochCache([(1, 0), (3, 10), (4, 15)])
    leo = 20
    # Largest known epoch <= the requested one; it ends where the next known epoch starts, the latest at the LEO.
    assert cache.end_offset_for(0, leo) == (-1, -1)  # older than every known epoch
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert cache.end_offset_for(1, leo) == (1, 10)
    assert cache.end_offset_for(2, leo) == (1, 10)  # epoch 2 never wrote: epoch 1's end
    assert cache.end_offset_for(3, leo) == (3, 15)
    assert cache.end_offset_for(4, leo) == (4, 20)
    assert cache.end_offset_for(9, leo) == (4, 20)
    assert EpochCache().end_offset_for(5, 0) == (-1, -1)
    assert cache.latest_epoch == 4 and EpochCache().latest_epoch == -1


def test_epoch_cache_assign_and_truncate() -> None:
    cache = EpochCache()
    assert cache.assign(1, 0) and not cache.assign(1, 5)
    assert cache.assign(2, 7)
    with pytest.raises(ValueError):
        cache.assign(1, 9)  # epochs only grow
    with pytest.raises(ValueError):
        cache.assign(3, 6)  # start offsets too
    assert cache.assign(4, 12)
    assert cache.entries == [(1, 0), (2, 7), (4, 12)]
    assert not cache.truncate_from_end(13)
    assert cache.truncate_from_end(12) and cache.entries == [(1, 0), (2, 7)]
    assert cache.truncate_from_end(3) and cache.entries == [(1, 0)]
    assert cache.truncate_from_end(0) and cache.entries == []


def test_log_end_offset_for_epoch(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, SMALL_PREALLOC) as log:
        assert log.end_offset_for_epoch(3) == (-1, -1)
        log.append(control_batch(epoch=2))  # 0
        log.append(data_batch(0, 3, epoch=2))  # 1-3
        log.append(control_batch(epoch=5))  # 4
        log.append(data_batch(3, 2, epoch=5))  # 5-6
        assert log.end_offset_for_epoch(1) == (-1, -1)
        assert log.end_offset_for_epoch(2) == (2, 4)
        assert log.end_offset_for_epoch(4) == (2, 4)
        assert log.end_offset_for_epoch(5) == (5, 7)
        assert log.end_offset_for_epoch(6) == (5, 7)
        log.truncate_to(2)
        assert log.end_offset_for_epoch(5) == (2, 1)


def test_checkpoint_file_format_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / CHECKPOINT_NAME
    EpochCache([(0, 0), (2, 17), (11, 4000)]).write(path)
    assert path.read_bytes() == b"0\n3\n0 0\n2 17\n11 4000\n"
    assert EpochCache.read(path).entries == [(0, 0), (2, 17), (11, 4000)]
    assert not list(tmp_path.glob("*.tmp"))
    EpochCache().write(path)
    assert path.read_bytes() == b"0\n0\n"
    assert EpochCache.read(tmp_path / "missing").entries == []


@pytest.mark.parametrize(
    "content",
    [b"", b"1\n1\n1 0\n", b"0\n", b"0\n2\n1 0\n", b"0\nx\n", b"0\n1\n1\n", b"0\n1\n1 0 4\n", b"0\n2\n5 0\n3 9\n"],
)
def test_checkpoint_read_rejects_malformed_files_naming_them(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / CHECKPOINT_NAME
    path.write_bytes(content)
    with pytest.raises(ValueError, match=str(path)):
        EpochCache.read(path)


@pytest.mark.parametrize(
    "content",
    [None, b"", b"garbage\n", b"\xff\xfe\x00\x01binary", b"0\n1\n1 0\n", b"0\n2\n1 0\n3 5\n", b"0\n5\n1 0\n"],
    ids=["missing", "empty", "garbage", "binary", "stale", "wrong", "short"],
)
def test_checkpoint_is_rebuilt_from_the_log_on_open(tmp_path: Path, content: bytes | None) -> None:
    log = MetadataLog.open(tmp_path, SMALL_PREALLOC)
    log.append(control_batch(epoch=1))  # 0
    log.append(data_batch(0, 2, epoch=1))  # 1-2
    log.append(control_batch(epoch=4))  # 3
    log.append(data_batch(2, 1, epoch=6))  # 4
    log.close()
    path = log_dir(tmp_path) / CHECKPOINT_NAME
    assert path.read_bytes() == b"0\n3\n1 0\n4 3\n6 4\n"
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content)
    with MetadataLog.open(tmp_path, SMALL_PREALLOC) as log:
        assert log.epochs.entries == [(1, 0), (4, 3), (6, 4)]
        assert log.end_offset_for_epoch(5) == (4, 4)
        assert path.read_bytes() == b"0\n3\n1 0\n4 3\n6 4\n"  # rewritten at once, not only at the next flush


# -- quorum-state ------------------------------------------------------------------------------------------------------


def test_quorum_state_round_trip(tmp_path: Path) -> None:
    store = QuorumStateStore(tmp_path)
    assert store.read() is None
    state = ElectionState(
        leader_epoch=7, leader_id=-1, voted_id=2, voters=(1, 2, 3), cluster_id="abc", applied_offset=3
    )
    store.write(state)
    assert store.read() == state
    newer = ElectionState(leader_epoch=8, leader_id=3, voters=(1, 2, 3))
    store.write(newer)
    assert store.read() == newer
    assert sorted(p.name for p in tmp_path.iterdir()) == [QUORUM_STATE_NAME]  # no .tmp left behind


def test_quorum_state_is_kafkas_json(tmp_path: Path) -> None:
    store = QuorumStateStore(tmp_path)
    store.write(ElectionState(leader_epoch=7, leader_id=1, voters=(1, 2, 3)))
    assert (tmp_path / QUORUM_STATE_NAME).read_bytes() == (
        b'{"clusterId":"","leaderId":1,"leaderEpoch":7,"votedId":-1,"appliedOffset":0,'
        b'"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
    )
    # Kafka's kraft.version 1 file (data_version 1) reads too.
    (tmp_path / QUORUM_STATE_NAME).write_text(
        '{"leaderId":1,"leaderEpoch":7,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )
    state = store.read()
    assert (state.leader_id, state.leader_epoch, state.voted_id, state.voters) == (1, 7, -1, ())


def test_quorum_state_write_is_atomic(tmp_path: Path, monkeypatch) -> None:
    store = QuorumStateStore(tmp_path)
    first = ElectionState(leader_epoch=3, leader_id=2, voters=(1, 2, 3))
    store.write(first)
    original = (tmp_path / QUORUM_STATE_NAME).read_bytes()

    def crash(*args, **kwargs):
        raise OSError("crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.write(ElectionState(leader_epoch=4, voted_id=1, voters=(1, 2, 3)))
    monkeypatch.undo()
    # The file is whole and old; the new state sits in the temp file only.
    assert (tmp_path / QUORUM_STATE_NAME).read_bytes() == original
    assert store.read() == first
    assert json.loads((tmp_path / (QUORUM_STATE_NAME + ".tmp")).read_text())["leaderEpoch"] == 4
    store.write(ElectionState(leader_epoch=5, voters=(1, 2, 3)))
    assert not (tmp_path / (QUORUM_STATE_NAME + ".tmp")).exists()
    assert store.read().leader_epoch == 5


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b'{"leaderEpoch":7',
        b"not json",
        b"[]",
        b"null",
        b"7",
        b'"text"',
        b"\xff\xfe\x00garbage",
        b'{"leaderId":1}',
        b'{"leaderEpoch":"x"}',
        b'{"leaderEpoch":1,"data_version":2}',
        b'{"leaderEpoch":1,"currentVoters":5}',
        b'{"leaderEpoch":1,"currentVoters":[1]}',
    ],
)
def test_corrupt_quorum_state_raises_value_error_naming_the_file(tmp_path: Path, content: bytes) -> None:
    (tmp_path / QUORUM_STATE_NAME).write_bytes(content)
    with pytest.raises(ValueError) as exc:
        QuorumStateStore(tmp_path).read()
    assert str(tmp_path / QUORUM_STATE_NAME) in str(exc.value)


def test_open_removes_stray_temp_files_and_writes_partition_metadata(tmp_path: Path) -> None:
    directory = log_dir(tmp_path)
    directory.mkdir()
    (directory / "quorum-state.tmp").write_text("half")
    (directory / (CHECKPOINT_NAME + ".tmp")).write_text("half")
    with MetadataLog.open(tmp_path, SMALL_PREALLOC) as log:
        assert not list(log.dir.glob("*.tmp"))
        assert (log.dir / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
        assert [p.name for p in log.segments] == ["00000000000000000000.log"]


def test_log_config_limits() -> None:
    with pytest.raises(ValueError):
        LogConfig(segment_bytes=1023)
    with pytest.raises(ValueError):
        LogConfig(index_interval_bytes=0)
    with pytest.raises(ValueError):
        LogConfig(preallocate_bytes=-1)
    LogConfig(segment_bytes=1024, preallocate_bytes=0)


def test_no_preallocation(tmp_path: Path) -> None:
    config = LogConfig(preallocate_bytes=0)
    with MetadataLog.open(tmp_path, config) as log:
        stamped = fill_log(log, 5)
        assert log.segments[0].read_bytes() == b"".join(stamped)


def test_default_config_appends_without_preallocation(tmp_path: Path) -> None:
    """Kafka's log.preallocate defaults to false: the open segment is exactly its batches."""
    with MetadataLog.open(tmp_path) as log:
        fill_log(log, 5)
        log.flush()
        active = log.segments[-1]
        assert active.stat().st_size == sum(b.size for b in file_batches(active))
