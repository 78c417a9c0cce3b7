"""Snapshot files (quorum/log/snapshots.py, docs/snapshots.md): the writer, the installer of fetched chunks, the
reader's validation of every rule (each broken file must fail at the right byte), the directory helpers, and
kafka-python as an independent decoder of what the writer produces."""

from __future__ import annotations

import errno
import itertools
import os
import random
import struct
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from controller.records import (
    KRaftVersionRecord,
    LeaderChangeMessage,
    PartitionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TopicRecord,
    Uuid,
    Voter,
    serialize,
)
from quorum.log import snapshots
from quorum.log.batch import HEADER_SIZE, RecordBatch, build_batch, iter_batches
from quorum.log.control import ControlType, encode_control
from quorum.log.message import ApiMessage
from quorum.log.reader import SNAPSHOT_SUFFIX, parse_snapshot_name
from quorum.log.snapshots import (
    PART_SUFFIX,
    CorruptSnapshotError,
    SnapshotFile,
    SnapshotFileInstaller,
    SnapshotFileWriter,
    SnapshotId,
    list_snapshots,
    remove_partial_snapshots,
)

with warnings.catch_warnings():  # kafka-python's own import uses a deprecated importlib.resources call
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    from kafka.record import MemoryRecords
    from kafka.record.default_records import ControlRecord, DefaultRecordBatch

TS = 1_700_000_000_000
SID = SnapshotId(1234, 3)


def metadata_values(n: int, seed: int = 7) -> list[bytes]:
    """Framed metadata records of varied sizes: topics and partitions with up to 40 replicas."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topic_id = Uuid.from_int(0x1000 + i // 4)
        if i % 4 == 0:
            out.append(serialize(TopicRecord(name=f"topic-{i}-" + "x" * rng.randrange(200), topic_id=topic_id)))
        else:
            replicas = list(range(1, 2 + rng.randrange(40)))
            dirs = [Uuid.from_int(1)] * len(replicas)
            record = PartitionRecord(
                partition_id=i % 4, topic_id=topic_id, replicas=replicas, isr=replicas, leader=1, directories=dirs
            )
            out.append(serialize(record))
    return out


def write(directory: Path, values: list[bytes], *, sid: SnapshotId = SID, chunks: int = 3, **kw: int) -> Path:
    kw.setdefault("timestamp_ms", TS)
    directory.mkdir(exist_ok=True)
    writer = SnapshotFileWriter(directory, sid, TS - 5, **kw)
    step = max(1, len(values) // chunks)
    for i in range(0, len(values), step):
        writer.append(values[i : i + step])
    size = writer.freeze()
    path = directory / sid.file_name
    assert size == path.stat().st_size == writer.bytes_written
    return path


def batches_of(data: bytes) -> list[RecordBatch]:
    return list(iter_batches(data))


def validate(path: Path) -> snapshots.SnapshotInfo:
    with SnapshotFile.open(path) as snap:
        return snap.validate()


# -- writing and reading back ------------------------------------------------------------------------------------


def test_round_trip(tmp_path: Path) -> None:
    values = metadata_values(1000)
    path = write(tmp_path, values, max_batch_bytes=4096)
    assert path.name == "00000000000000001234-0000000003.checkpoint"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # the .part was renamed, nothing else left

    with SnapshotFile.open(path) as snap:
        assert (snap.id, snap.path, snap.size) == (SID, path, path.stat().st_size)
        assert snap.last_contained_log_timestamp == TS - 5  # from the header batch alone
        info = snap.validate()
        data = list(snap.data_batches())
    assert info == snapshots.SnapshotInfo(SID, path.stat().st_size, TS - 5, len(data), 1000)
    assert len(data) > 10
    records = [r for b in data for r in b.records()]
    assert [r.value for r in records] == values
    assert [r.key for r in records] == [None] * 1000
    assert [r.offset for r in records] == list(range(1, 1001))  # the header batch is offset 0

    every = batches_of(path.read_bytes())
    assert [b.base_offset for b in every] == [0, *(b.base_offset for b in data), 1001]
    assert {b.partition_leader_epoch for b in every} == {3}
    assert {b.base_timestamp for b in every} == {TS}
    assert [b.is_control for b in every] == [True] + [False] * len(data) + [True]
    assert all(b.crc_valid() for b in every)
    assert all(b.size <= 4096 for b in every)
    (header,) = every[0].records()
    assert header.key == struct.pack(">hh", 0, ControlType.SNAPSHOT_HEADER)
    assert header.value == SnapshotHeaderRecord(version=0, last_contained_log_timestamp=TS - 5).encode()
    (footer,) = every[-1].records()
    assert footer.key == struct.pack(">hh", 0, ControlType.SNAPSHOT_FOOTER)
    assert footer.value == SnapshotFooterRecord(version=0).encode()


def test_batches_are_filled_up_to_the_limit(tmp_path: Path) -> None:
    values = [os.urandom(n) for n in random.Random(1).choices(range(1, 300), k=3000)]
    limit = 2000
    path = write(tmp_path, values, max_batch_bytes=limit, chunks=7)
    data = batches_of(path.read_bytes())[1:-1]
    assert [r.value for b in data for r in b.records()] == values  # appends are packed across call boundaries
    for batch, following in itertools.pairwise(data):
        assert batch.size <= limit
        # A batch closes only when the next record would not fit (its framing is at most 10 bytes).
        assert batch.size + len(following.records()[0].value) + 10 > limit


def test_a_record_bigger_than_the_limit_goes_alone(tmp_path: Path) -> None:
    values = [b"\x01" * 10, b"\x02" * 5000, b"\x03" * 10]
    path = write(tmp_path, values, max_batch_bytes=1000, chunks=1)
    data = batches_of(path.read_bytes())[1:-1]
    assert [[r.value for r in b.records()] for b in data] == [[v] for v in values]


def test_many_small_records_in_one_batch(tmp_path: Path) -> None:
    """Offset deltas beyond the varint table (16384 records in a batch) are encoded too."""
    values = [bytes([1, i % 256]) for i in range(40_000)]
    path = write(tmp_path, values, chunks=1)
    (data,) = batches_of(path.read_bytes())[1:-1]
    assert [r.value for r in data.records()] == values
    assert [r.offset for r in data.records()] == list(range(1, 40_001))


@pytest.mark.parametrize(
    ("count", "limit", "chunks"),
    [(3, 100, 1), (200, 100, 1), (200, 1000, 3), (2000, 65_536, 1), (20_000, 4096, 1000), (20_000, 1 << 20, 3)],
)
def test_records_framed_by_runs_are_the_bytes_framed_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, count: int, limit: int, chunks: int
) -> None:
    """The writer frames runs of records from tables (_encode_runs); one at a time (_encode) is the reference.
    Sizes straddle the varint widths of lengths and of offset deltas (63/64, 8191/8192, 16383/16384 records in a
    batch), records bigger than the batch limit, and appends of every size."""
    rng = random.Random(count + limit)
    sizes = (1, 2, 50, 60, 61, 62, 63, 64, 65, 120, 127, 128, 129, 200, 1000, 8190, 8191, 8192, 16_300, 16_383)
    values = [os.urandom(9000)]  # bigger than most limits: alone in its batch
    for _ in range(count - 1):
        small = rng.random() < 0.9  # mostly small: many records to a batch, deltas past the widths' bounds
        values.append(os.urandom(rng.choice(sizes[:8] if small else sizes)))
    by_runs = write(tmp_path / "runs", values, max_batch_bytes=limit, chunks=chunks).read_bytes()
    monkeypatch.setattr(snapshots, "_TABLED", 0)  # no value is below it: every record goes through _encode
    one_at_a_time = write(tmp_path / "each", values, max_batch_bytes=limit, chunks=chunks).read_bytes()
    assert by_runs == one_at_a_time
    assert [r.value for b in batches_of(by_runs)[1:-1] for r in b.records()] == values


def test_an_empty_snapshot_is_a_header_and_a_footer(tmp_path: Path) -> None:
    writer = SnapshotFileWriter(tmp_path, SnapshotId(0, 0), 0, timestamp_ms=TS)
    writer.append([])
    writer.freeze()
    path = tmp_path / SnapshotId(0, 0).file_name
    assert [b.base_offset for b in batches_of(path.read_bytes())] == [0, 1]
    assert validate(path).data_batches == 0


def test_part_file_while_writing_then_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[Path] = []
    real = snapshots.fsync_dir
    monkeypatch.setattr(snapshots, "fsync_dir", lambda p: (synced.append(p), real(p)))
    writer = SnapshotFileWriter(tmp_path, SID, TS, max_batch_bytes=1 << 16)
    writer.append([b"\x01" * 100] * 12_000)  # more than the write buffer: some of it is on disk already
    part = tmp_path / ("00000000000000001234-0000000003" + PART_SUFFIX)
    assert writer.path == part
    assert [p.name for p in tmp_path.iterdir()] == [part.name]
    assert part.stat().st_size > 0
    assert list_snapshots(tmp_path) == []  # a .part is not a snapshot
    with pytest.raises(ValueError):
        SnapshotFile.open(part)
    writer.freeze()
    assert [p.name for p in tmp_path.iterdir()] == [SID.file_name]
    assert synced == [tmp_path]
    with pytest.raises(RuntimeError, match="frozen"):
        writer.append([b"\x01"])
    writer.abort()  # a no-op once frozen
    assert validate(tmp_path / SID.file_name).data_records == 12_000


def test_writes_are_buffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: (calls.append((fd, len(data))), real(fd, data))[1])
    writer = SnapshotFileWriter(tmp_path, SID, TS, max_batch_bytes=8192)
    fd = writer._fd
    for _ in range(50):
        writer.append([b"\x01" * 100] * 1000)
    size = writer.freeze()
    ours = [n for f, n in calls if f == fd]
    assert sum(ours) == size
    assert len(ours) <= size // (1 << 20) + 2  # a syscall per MiB, not per record or batch


def test_wall_clock_timestamps(tmp_path: Path) -> None:
    before = int(time.time() * 1000)
    writer = SnapshotFileWriter(tmp_path, SID, TS)
    writer.append([b"\x01"])
    writer.freeze()
    after = int(time.time() * 1000)
    assert all(before <= b.base_timestamp <= after for b in batches_of((tmp_path / SID.file_name).read_bytes()))


def test_abort_and_context_manager_leave_nothing(tmp_path: Path) -> None:
    writer = SnapshotFileWriter(tmp_path, SID, TS)
    writer.append([b"\x01"] * 10)
    writer.abort()
    writer.abort()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="aborted"):
        writer.append([b"\x01"])
    with pytest.raises(KeyError), SnapshotFileWriter(tmp_path, SID, TS) as w:
        w.append([b"\x01"] * 10)
        raise KeyError("the caller failed")
    assert list(tmp_path.iterdir()) == []


def test_bad_arguments(tmp_path: Path) -> None:
    for bad in (HEADER_SIZE, 9 << 20):
        with pytest.raises(ValueError, match="max_batch_bytes"):
            SnapshotFileWriter(tmp_path, SID, TS, max_batch_bytes=bad)
    assert list(tmp_path.iterdir()) == []
    writer = SnapshotFileWriter(tmp_path, SID, TS)
    with pytest.raises(ValueError, match="never empty"):
        writer.append([b"\x01", b""])
    writer.append([b"\x01"])  # a refused append changes nothing
    writer.freeze()
    assert validate(tmp_path / SID.file_name).data_records == 1
    with pytest.raises(FileExistsError):
        SnapshotFileWriter(tmp_path, SID, TS)
    with pytest.raises(FileExistsError):
        SnapshotFileInstaller(tmp_path, SID)


# -- the disk failing ----------------------------------------------------------------------------------------------


def _failing(monkeypatch: pytest.MonkeyPatch, name: str, err: int) -> None:
    def fail(*args: object) -> None:
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, name, fail)


def test_enospc_while_appending_removes_the_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = SnapshotFileWriter(tmp_path, SID, TS, max_batch_bytes=1 << 16)
    _failing(monkeypatch, "write", errno.ENOSPC)
    with pytest.raises(OSError) as e:
        writer.append([b"\x01" * 100] * 20_000)  # 2 MB: the buffer must be written
    assert e.value.errno == errno.ENOSPC
    assert e.value.filename == str(writer.path)  # the error names the file
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError):
        writer.freeze()


@pytest.mark.parametrize(("call", "err"), [("write", errno.ENOSPC), ("fsync", errno.EIO)])
def test_failure_while_freezing_removes_the_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, err: int
) -> None:
    writer = SnapshotFileWriter(tmp_path, SID, TS)
    writer.append([b"\x01" * 100] * 100)  # all in the buffer until freeze
    _failing(monkeypatch, call, err)
    with pytest.raises(OSError) as e:
        writer.freeze()
    assert e.value.errno == err
    assert str(writer.path) in str(e.value)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("then", ["write", "freeze"])
def test_enospc_while_installing_removes_the_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str) -> None:
    installer = SnapshotFileInstaller(tmp_path, SID)
    installer.write(0, b"abc")
    _failing(monkeypatch, "write", errno.ENOSPC)
    installer.write(3, b"def")  # written in the background: its error comes with the next call
    with pytest.raises(OSError, match="No space left") as e:
        installer.write(6, b"ghi") if then == "write" else installer.freeze()
    assert str(installer.path) in str(e.value)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError, match="aborted"):
        installer.write(6, b"ghi")


def test_installer_chunks_are_written_in_order_behind_the_caller(tmp_path: Path) -> None:
    """Each chunk's write overlaps what the caller does next (the next chunk's fetch), one chunk at a time: the
    write of a chunk starts only once the previous one is on file, and freeze waits for the last."""
    source = write(tmp_path / "leader", metadata_values(2000), max_batch_bytes=3000)
    follower = tmp_path / "follower"
    follower.mkdir()
    installer = SnapshotFileInstaller(follower, SID)
    with SnapshotFile.open(source) as snap:
        while installer.size < snap.size:
            installer.write(installer.size, snap.read(installer.size, 5000))
    assert installer.freeze().read_bytes() == source.read_bytes()


def test_aborting_an_install_waits_for_the_chunk_being_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    installer = SnapshotFileInstaller(tmp_path, SID)
    started, release = threading.Event(), threading.Event()
    real_write = os.write

    def slow_write(fd: int, data: object) -> int:
        started.set()
        release.wait(5)
        return real_write(fd, data)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "write", slow_write)
    installer.write(0, b"partial")
    assert started.wait(5)
    threading.Timer(0.05, release.set).start()
    installer.abort()  # returns only once the write is over: its descriptor is closed after it, never under it
    assert release.is_set()
    assert list(tmp_path.iterdir()) == []


# -- installing a fetched snapshot ---------------------------------------------------------------------------------


def test_installer_in_chunks_of_odd_sizes(tmp_path: Path) -> None:
    source = write(tmp_path / "leader", metadata_values(500), max_batch_bytes=3000)
    follower = tmp_path / "follower"
    follower.mkdir()
    installer = SnapshotFileInstaller(follower, SID)
    sizes = iter([1, 7, 60, 61, 62, 4093, 1, 10_007])
    with SnapshotFile.open(source) as snap:
        while installer.size < snap.size:
            chunk = snap.read(installer.size, next(sizes, 9999))
            installer.write(installer.size, chunk)
            assert [p.name for p in follower.iterdir()] == [installer.path.name]
        with pytest.raises(ValueError, match="expected"):
            installer.write(0, b"again")
    path = installer.freeze()
    assert path == follower / SID.file_name
    assert [p.name for p in follower.iterdir()] == [SID.file_name]
    assert path.read_bytes() == source.read_bytes()
    assert validate(path).data_records == 500


def test_installer_refuses_a_corrupt_snapshot(tmp_path: Path) -> None:
    original = write(tmp_path / "leader", metadata_values(50)).read_bytes()
    data = bytearray(original)
    data[200] ^= 0x40
    installer = SnapshotFileInstaller(tmp_path, SID)
    installer.write(0, bytes(data))
    with pytest.raises(CorruptSnapshotError) as e:
        installer.freeze()
    assert e.value.path == str(installer.path)
    assert e.value.position == max(b.position for b in batches_of(original) if b.position <= 200)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["leader"]


def test_installer_abort(tmp_path: Path) -> None:
    installer = SnapshotFileInstaller(tmp_path, SID)
    installer.write(0, b"partial")
    installer.abort()
    assert list(tmp_path.iterdir()) == []


# -- every broken file fails at the right byte ----------------------------------------------------------------------


def hand_built(epoch: int = 3) -> list[bytes]:
    """A snapshot built batch by batch with batch.py, not with the writer: header, 3 data batches, footer."""
    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=TS - 5)
    values = metadata_values(9)
    return [
        build_batch([encode_control(header)], base_offset=0, epoch=epoch, timestamp=TS, control=True),
        *(build_batch([(None, v) for v in values[i : i + 3]], base_offset=1 + i, epoch=epoch, timestamp=TS)
          for i in range(0, 9, 3)),
        build_batch([encode_control(SnapshotFooterRecord(version=0))], base_offset=10, epoch=epoch, timestamp=TS,
                    control=True),
    ]  # fmt: skip


def starts(batches: list[bytes]) -> list[int]:
    out, pos = [], 0
    for b in batches:
        out.append(pos)
        pos += len(b)
    return out


def flip(batch_index: int, byte: int) -> Callable[[list[bytes]], bytes]:
    def make(batches: list[bytes]) -> bytes:
        data = bytearray(b"".join(batches))
        data[starts(batches)[batch_index] + byte] ^= 0x01
        return bytes(data)

    return make


def truncate(batch_index: int, keep: int) -> Callable[[list[bytes]], bytes]:
    return lambda batches: b"".join(batches)[: starts(batches)[batch_index] + keep]


def restamp(batch_index: int, *, offset: int | None = None, epoch: int | None = None) -> Callable[[list[bytes]], bytes]:
    """The file with one batch's base offset or epoch rewritten (neither is under the CRC)."""

    def make(batches: list[bytes]) -> bytes:
        b = RecordBatch(batches[batch_index])
        out = list(batches)
        out[batch_index] = b.with_offset(b.base_offset if offset is None else offset, epoch)
        return b"".join(out)

    return make


def shifted(batches: list[bytes], by: int) -> bytes:
    """These batches with their offsets moved by ``by``, e.g. after a batch holding one more record."""
    return b"".join(RecordBatch(b).with_offset(RecordBatch(b).base_offset + by) for b in batches)


def control_batch(*messages: ApiMessage, offset: int, epoch: int = 3) -> bytes:
    pairs = [encode_control(m) for m in messages]
    return build_batch(pairs, base_offset=offset, epoch=epoch, timestamp=TS, control=True)


def at_batch(index: int) -> Callable[[list[bytes], bytes], int]:
    return lambda batches, _: starts(batches)[index]


def at_end(batches: list[bytes], data: bytes) -> int:
    return len(data)


def after_footer(batches: list[bytes], data: bytes) -> int:
    return len(b"".join(batches))


LEADER_CHANGE = LeaderChangeMessage(leader_id=1, voters=[Voter(voter_id=1)], granting_voters=[Voter(voter_id=1)])
FOOTER = SnapshotFooterRecord(version=0)
HEADER = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=TS - 5)

# (name, how to break the hand-built file, where the error must be, its reason)
CASES: list[tuple[str, Callable[[list[bytes]], bytes], Callable[[list[bytes], bytes], int], str]] = [
    ("bad CRC in the header batch", flip(0, 30), at_batch(0), "CRC-32C mismatch"),
    ("bad CRC in a data record", flip(2, 80), at_batch(2), "CRC-32C mismatch"),
    ("bad CRC in the last data batch's header", flip(3, 24), at_batch(3), "CRC-32C mismatch"),
    ("bad CRC in the footer batch", flip(4, 62), at_batch(4), "CRC-32C mismatch"),
    ("the stored CRC itself", flip(1, 18), at_batch(1), "CRC-32C mismatch"),
    ("wrong magic", flip(2, 16), at_batch(2), "magic byte is 3"),
    ("a base offset (not under the CRC)", flip(2, 7), at_batch(2), "base offset 5, expected 4"),
    ("an epoch (not under the CRC)", flip(1, 15), at_batch(1), "epoch 2, expected 3"),
    ("the footer's batch length", flip(4, 10), at_batch(4), "runs past the end"),
    ("truncated in the header batch's header", truncate(0, 20), at_batch(0), "only 20 bytes left"),
    ("truncated in the header batch's records", truncate(0, 70), at_batch(0), "runs past the end"),
    ("truncated inside a data batch", truncate(2, 100), at_batch(2), "runs past the end"),
    ("truncated one byte short", lambda b: b"".join(b)[:-1], at_batch(4), "runs past the end"),
    ("truncated at a batch boundary", truncate(3, 0), at_end, "ends without a SnapshotFooterRecord"),
    ("missing footer", lambda b: b"".join(b[:-1]), at_end, "ends without a SnapshotFooterRecord"),
    ("missing header", lambda b: b"".join(b[1:]), at_batch(0), "base offset 1, expected 0"),
    ("a data batch first", lambda b: shifted(b[1:], -1), at_batch(0), "a data batch where the SNAPSHOT_HEADER"),
    ("a footer first", lambda b: control_batch(FOOTER, offset=0) + b"".join(b[1:]), at_batch(0),
     "holds [SNAPSHOT_FOOTER], expected SNAPSHOT_HEADER"),
    ("header not the first record", lambda b: control_batch(LEADER_CHANGE, HEADER, offset=0) + shifted(b[1:], 1),
     at_batch(0), "holds [LEADER_CHANGE, SNAPSHOT_HEADER]"),
    ("a foreign record after the header", lambda b: control_batch(HEADER, LEADER_CHANGE, offset=0)
     + shifted(b[1:], 1), at_batch(0), "holds [SNAPSHOT_HEADER, LEADER_CHANGE]"),
    ("bytes after the footer", lambda b: b"".join(b) + b"\x00" * 10, after_footer, "10 bytes after the Snapshot"),
    ("a batch after the footer", lambda b: b"".join(b) + shifted(b[1:2], 10), after_footer, "bytes after the"),
    ("a footer in the middle", lambda b: b"".join([*b[:2], control_batch(FOOTER, offset=4)]) + shifted(b[2:], 1),
     lambda b, _: starts(b)[2] + len(control_batch(FOOTER, offset=4)), "bytes after the SnapshotFooterRecord"),
    ("a leader change in the middle", lambda b: b"".join([*b[:2], control_batch(LEADER_CHANGE, offset=4)])
     + shifted(b[2:], 1), at_batch(2), "holds [LEADER_CHANGE], expected SNAPSHOT_FOOTER"),
    ("a footer holding two records", lambda b: b"".join(b[:-1]) + control_batch(FOOTER, FOOTER, offset=10),
     at_batch(4), "holds [SNAPSHOT_FOOTER, SNAPSHOT_FOOTER]"),
    ("an unknown control type", lambda b: b"".join(b[:-1]) + build_batch([(struct.pack(">hh", 0, 99), b"\x00")],
     base_offset=10, epoch=3, timestamp=TS, control=True), at_batch(4), "holds [type 99]"),
    ("wrong epoch on a data batch", restamp(2, epoch=4), at_batch(2), "epoch 4, expected 3"),
    ("wrong epoch on the footer", restamp(4, epoch=2), at_batch(4), "epoch 2, expected 3"),
    ("a gap in offsets", lambda b: b"".join(b[:2]) + shifted(b[2:], 1), at_batch(2), "base offset 5, expected 4"),
    ("offsets overlapping", restamp(2, offset=3), at_batch(2), "base offset 3, expected 4"),
    ("empty file", lambda b: b"", at_batch(0), "empty file"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make", "where", "reason"), CASES, ids=[c[0] for c in CASES])
def test_corruption_is_found_at_its_byte(
    tmp_path: Path,
    name: str,
    make: Callable[[list[bytes]], bytes],
    where: Callable[[list[bytes], bytes], int],
    reason: str,
) -> None:
    batches = hand_built()
    path = tmp_path / SID.file_name
    path.write_bytes(b"".join(batches))
    assert validate(path).data_records == 9  # the unbroken file is valid
    data = make(batches)
    path.write_bytes(data)
    with SnapshotFile.open(path) as snap:
        with pytest.raises(CorruptSnapshotError) as e:
            snap.validate()
        with pytest.raises(CorruptSnapshotError):
            next(snap.data_batches())  # nothing of a corrupt snapshot is handed out
    expected = where(batches, data)
    assert (e.value.path, e.value.position) == (str(path), expected), e.value
    assert reason in e.value.reason
    assert str(e.value).startswith(f"{path}: corrupt snapshot at byte {expected}: ")
    # The installer applies the same rules to a fetched file.
    path.unlink()
    installer = SnapshotFileInstaller(tmp_path, SID)
    installer.write(0, data)
    with pytest.raises(CorruptSnapshotError) as e2:
        installer.freeze()
    assert (e2.value.position, e2.value.reason) == (expected, e.value.reason)
    assert list(tmp_path.iterdir()) == []


def test_every_position_of_a_truncation_is_corrupt(tmp_path: Path) -> None:
    batches = hand_built()
    data = b"".join(batches)
    path = tmp_path / SID.file_name
    for cut in range(len(data)):
        path.write_bytes(data[:cut])
        with pytest.raises(CorruptSnapshotError) as e:
            validate(path)
        # Inside a batch: that batch's start; at a boundary: the end, where the next batch is missing.
        assert e.value.position == max(s for s in starts(batches) if s <= cut)


def test_snapshot_named_with_another_epoch(tmp_path: Path) -> None:
    path = tmp_path / SnapshotId(1234, 4).file_name
    path.write_bytes(b"".join(hand_built(epoch=3)))
    with pytest.raises(CorruptSnapshotError, match="at byte 0: epoch 3, expected 4"):
        validate(path)


def test_a_kraft_version_1_header_batch_is_valid(tmp_path: Path) -> None:
    """Kafka with kraft.version 1 puts a KRaftVersionRecord (and a VotersRecord) after the header."""
    batches = hand_built()
    batches[0] = build_batch(
        [encode_control(HEADER), encode_control(KRaftVersionRecord(version=0, kraft_version=1))],
        base_offset=0, epoch=3, timestamp=TS, control=True,
    )  # fmt: skip
    path = tmp_path / SID.file_name
    path.write_bytes(batches[0] + shifted(batches[1:], 1))
    with SnapshotFile.open(path) as snap:
        assert snap.validate().last_contained_log_timestamp == TS - 5
        assert [b.base_offset for b in snap.data_batches()] == [2, 5, 8]


# -- reading for FetchSnapshot -------------------------------------------------------------------------------------


def test_read(tmp_path: Path) -> None:
    path = write(tmp_path, metadata_values(100))
    data = path.read_bytes()
    with SnapshotFile.open(path) as snap:
        assert snap.read(0, 10) == data[:10]
        assert snap.read(5, 1 << 30) == data[5:]
        assert snap.read(snap.size, 100) == b""
        assert snap.read(3, 0) == b""
        for position, size in ((snap.size + 1, 1), (-1, 1), (0, -1)):
            with pytest.raises(ValueError):
                snap.read(position, size)


def test_open_refuses_other_names(tmp_path: Path) -> None:
    for name in ("00000000000000001234.log", "1234-3.checkpoint", "00000000000000001234-0000000003.checkpoint.part"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(ValueError, match="not a snapshot"):
            SnapshotFile.open(tmp_path / name)


# -- the directory ---------------------------------------------------------------------------------------------------


def test_directory_helpers(tmp_path: Path) -> None:
    ids = [SnapshotId(500, 2), SnapshotId(20, 1), SnapshotId(0, 0), SnapshotId(500, 3)]
    for sid in ids:
        (tmp_path / sid.file_name).write_bytes(b"")
    others = ["00000000000000000099-0000000001.checkpoint.part", "00000000000000000098-0000000001.checkpoint.deleted",
              "00000000000000000000.log", "quorum-state", "0-0.checkpoint"]  # fmt: skip
    for name in others:
        (tmp_path / name).write_bytes(b"")
    assert list_snapshots(tmp_path) == sorted(ids)
    assert list_snapshots(tmp_path)[0] == SnapshotId(0, 0)

    writing = SnapshotFileWriter(tmp_path, SnapshotId(700, 3), TS)  # a crash leaves its .part
    assert remove_partial_snapshots(tmp_path) == sorted([tmp_path / others[0], writing.path])
    writing.abort()
    assert remove_partial_snapshots(tmp_path) == []
    assert list_snapshots(tmp_path) == sorted(ids)


def test_the_readers_names_agree(tmp_path: Path) -> None:
    assert SNAPSHOT_SUFFIX == snapshots.SNAPSHOT_SUFFIX
    for name in (SID.file_name, "00000000000000001234-0000000003.checkpoint.part", "x.checkpoint", "1-2.checkpoint"):
        parsed = SnapshotId.parse(name)
        assert parse_snapshot_name(tmp_path / name) == (None if parsed is None else (parsed.end_offset, parsed.epoch))
    assert parse_snapshot_name(tmp_path / SID.file_name) == (1234, 3)


# -- kafka-python, an independent decoder, reads what the writer writes -------------------------------------------


def test_kafka_python_reads_every_batch_and_record(tmp_path: Path) -> None:
    values = metadata_values(300)
    path = write(tmp_path, values, max_batch_bytes=2048)
    data = path.read_bytes()
    records = MemoryRecords(data)
    assert records.valid_bytes() == len(data)
    theirs = []
    for batch in records:
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()  # before iterating, as kafka-python requires
        theirs.append((batch, list(batch)))
    ours = batches_of(data)
    assert len(theirs) == len(ours) > 3

    expected_offset = 0
    for (batch, recs), mine in zip(theirs, ours, strict=True):
        assert (batch.magic, batch.leader_epoch, batch.base_offset) == (2, 3, expected_offset)
        assert (batch.crc, batch.size_in_bytes, batch.attributes) == (mine.crc, mine.size, mine.attributes)
        assert batch.compression_type == 0 and not batch.is_transactional
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
        assert batch.first_timestamp == batch.max_timestamp == TS
        assert batch.records_count == len(recs) == batch.last_offset_delta + 1
        assert [r.offset for r in recs] == list(range(expected_offset, expected_offset + len(recs)))
        assert all(r.timestamp == TS and r.headers == [] for r in recs)
        expected_offset += len(recs)

    (first, header), *middle, (last, footer) = theirs
    assert first.is_control_batch and last.is_control_batch
    assert not any(b.is_control_batch for b, _ in middle)
    (h,) = header
    assert isinstance(h, ControlRecord) and (h.version, h.type) == (0, ControlType.SNAPSHOT_HEADER)
    # SnapshotHeaderRecord v0 by hand: int16 Version, int64 LastContainedLogTimestamp, no tagged fields.
    assert h.value == struct.pack(">hqB", 0, TS - 5, 0)
    (f,) = footer
    assert isinstance(f, ControlRecord) and (f.version, f.type) == (0, ControlType.SNAPSHOT_FOOTER)
    assert f.value == struct.pack(">hB", 0, 0)
    data_records = [r for _, recs in middle for r in recs]
    assert [r.key for r in data_records] == [None] * len(values)
    assert [r.value for r in data_records] == values
    assert expected_offset == len(values) + 2


@pytest.mark.parametrize("sync_bytes", [0, 1 << 20])
def test_a_writer_syncs_as_it_goes_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sync_bytes: int
) -> None:
    """Off the event loop (a forked child) a snapshot is synced every ``sync_bytes`` written, so the node's own log
    fsyncs never wait behind the whole file's dirty pages; on the loop (0) only at the end."""
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    writer = SnapshotFileWriter(tmp_path, SID, TS)
    writer.sync_bytes = sync_bytes
    writer.append([b"\x01" * 1000] * 5000)  # 4.2 MB closed, handed to the OS ~2 MB at a time
    assert writer.bytes_written > 4_000_000
    assert len(synced) >= 2 if sync_bytes else synced == []
    writer.freeze()


def test_an_install_syncs_every_sync_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = write(tmp_path / "leader", metadata_values(2000), max_batch_bytes=3000)
    follower = tmp_path / "follower"
    follower.mkdir()
    synced: list[int] = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd))[1])
    installer = SnapshotFileInstaller(follower, SID)
    assert installer.sync_bytes == snapshots.SYNC_BYTES  # written by a thread: synced as it goes
    installer.sync_bytes = 20_000
    with SnapshotFile.open(source) as snap:
        while installer.size < snap.size:
            installer.write(installer.size, snap.read(installer.size, 5000))
        size = snap.size
    installer.freeze()
    assert len(synced) == size // 20_000
