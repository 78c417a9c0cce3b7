"""Crash recovery of the metadata log.

The contract (README, quorum/log/log.py): every batch is re-validated on open. Damage with no valid batch after
it is a torn tail — cut back to the last valid batch and logged (``log_tail_truncated``). Damage followed by a
valid batch may hide committed data: the open fails with LogCorruptionError naming the file and the byte.
Pre-allocated zeros after the last batch are a clean end.

The crashes are simulated on the files of a closed log: cutting a file, appending the zeros a pre-allocated
segment would hold, flipping bits, adding the empty segment a roll leaves behind.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from controller.records import LeaderChangeMessage, PartitionRecord, TopicRecord, Uuid, Voter, serialize
from quorum.log.batch import RecordBatch, build_batch, read_batch
from quorum.log.control import encode_control
from quorum.log.epoch_cache import CHECKPOINT_NAME
from quorum.log.log import METADATA_PARTITION_DIR, LogConfig, LogCorruptionError, MetadataLog
from quorum.log.reader import scan_file

CONFIG = LogConfig(preallocate_bytes=8192)
MULTI = LogConfig(segment_bytes=1024, index_interval_bytes=200, preallocate_bytes=8192)
TOPIC_ID = Uuid.from_int(0xC0FFEE)
EPOCH_BYTES = range(12, 16)  # partitionLeaderEpoch: outside the CRC


# -- building a log ------------------------------------------------------------------------------------------------


def partition(p: int) -> bytes:
    return serialize(
        PartitionRecord(
            partition_id=p,
            topic_id=TOPIC_ID,
            replicas=[1, 2, 3],
            isr=[1, 2],
            leader=1 + p % 3,
            leader_epoch=p,
            partition_epoch=0,
            directories=[Uuid.from_int(1)] * 3,
        )
    )


def data(values: list[bytes], epoch: int) -> bytes:
    return build_batch([(None, v) for v in values], epoch=epoch, timestamp=1_700_000_000_000 + epoch)


def leader_change(epoch: int, leader: int) -> bytes:
    message = LeaderChangeMessage(
        leader_id=leader, voters=[Voter(voter_id=v) for v in (1, 2, 3)], granting_voters=[Voter(voter_id=leader)]
    )
    return build_batch([encode_control(message)], epoch=epoch, timestamp=1_700_000_000_000, control=True)


def single_segment_batches() -> list[bytes]:
    """Multi-record and single-record data batches, control batches, three epochs; the last batch (3 partition
    records, a few hundred bytes) is the one the torn-tail tests cut at every byte."""
    return [
        leader_change(1, leader=1),
        data([serialize(TopicRecord(name="orders", topic_id=TOPIC_ID)), partition(0), partition(1)], 1),
        data([partition(2)], 1),
        leader_change(2, leader=2),
        data([partition(3), partition(4), partition(5), partition(6)], 2),
        data([partition(7), partition(8), partition(9)], 3),
    ]


def multi_segment_batches() -> list[bytes]:
    out = [leader_change(1, leader=1)]
    for i in range(16):
        epoch = 1 + i // 4  # epochs 1..4, four batches each
        if i % 4 == 0 and i:
            out.append(leader_change(epoch, leader=1 + epoch % 3))
        out.append(data([partition(10 * i + j) for j in range(1 + i % 3)], epoch))
    return out


@dataclass
class OnDisk:
    """One batch as it lies in a closed log."""

    path: Path  # its segment file
    position: int
    batch: RecordBatch

    @property
    def raw(self) -> bytes:
        return self.batch.buffer


@dataclass
class Pristine:
    data_dir: Path
    config: LogConfig
    batches: list[OnDisk]
    end_offset: int

    @property
    def dir(self) -> Path:
        return self.data_dir / METADATA_PARTITION_DIR

    def clone(self, dest: Path) -> Path:
        shutil.copytree(self.data_dir, dest)
        return dest / METADATA_PARTITION_DIR

    def segments(self) -> list[Path]:
        return sorted(self.dir.glob("*.log"))


def write_log(data_dir: Path, config: LogConfig, batches: list[bytes]) -> Pristine:
    log = MetadataLog.open(data_dir, config)
    for b in batches:
        log.append(b)
    end = log.end_offset
    log.close()
    on_disk = []
    for path in sorted((data_dir / METADATA_PARTITION_DIR).glob("*.log")):
        for item in scan_file(path):
            assert isinstance(item, RecordBatch) and item.crc_valid()
            on_disk.append(OnDisk(path, item.position, item))
    assert [d.batch.epoch for d in on_disk] == [read_batch(b).epoch for b in batches]
    return Pristine(data_dir, config, on_disk, end)


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch) -> None:
    """These tests simulate crashes by editing the files of a closed log; what reached the disk is what the test
    wrote, so fsync has nothing to add — and hundreds of reopen cycles would spend most of their time in it."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    monkeypatch.setattr(os, "fdatasync", lambda fd: None)


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> Pristine:
    p = write_log(tmp_path_factory.mktemp("single"), CONFIG, single_segment_batches())
    assert len(p.segments()) == 1 and len(p.batches) == 6
    assert 300 <= p.batches[-1].batch.size <= 600
    assert [d.batch.epoch for d in p.batches][-2:] == [2, 3]
    assert sum(d.batch.is_control for d in p.batches) == 2
    return p


@pytest.fixture(scope="module")
def multi(tmp_path_factory) -> Pristine:
    p = write_log(tmp_path_factory.mktemp("multi"), MULTI, multi_segment_batches())
    assert len(p.segments()) >= 4
    return p


def open_log(data_dir: Path, config: LogConfig) -> tuple[MetadataLog, list[dict]]:
    with capture_logs() as events:
        log = MetadataLog.open(data_dir, config)
    return log, events


def tail_events(events: list[dict]) -> list[dict]:
    return [e for e in events if e["event"] == "log_tail_truncated"]


def epoch_entries(raws: list[bytes]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for raw in raws:
        b = read_batch(raw)
        if not out or out[-1][0] != b.epoch:
            out.append((b.epoch, b.base_offset))
    return out


def assert_log_is(log: MetadataLog, raws: list[bytes]) -> None:
    """The log holds exactly these batches, and every derived state agrees."""
    end = read_batch(raws[-1]).next_offset if raws else 0
    assert log.end_offset == end == log.flushed_offset  # first: batches() reads up to the end offset
    assert [b.buffer for b in log.batches()] == raws
    entries = epoch_entries(raws)
    assert log.epochs.entries == entries
    assert log.last_epoch == (entries[-1][0] if entries else 0)
    checkpoint = "\n".join(["0", str(len(entries))] + [f"{e} {s}" for e, s in entries]) + "\n"
    assert (log.dir / CHECKPOINT_NAME).read_text() == checkpoint


def append_and_reopen(data_dir: Path, log: MetadataLog, raws: list[bytes], config: LogConfig) -> None:
    """After recovery the log takes appends where it ends, and a clean reopen finds exactly that."""
    epoch = max(log.last_epoch, 3)
    info = log.append(data([partition(99)], epoch))
    assert info.base_offset == (read_batch(raws[-1]).next_offset if raws else 0)
    expected = [*raws, read_batch(data([partition(99)], epoch)).with_offset(info.base_offset)]
    log.close()
    again, events = open_log(data_dir, config)
    assert tail_events(events) == []
    assert_log_is(again, expected)
    again.close()
    files = sorted((data_dir / METADATA_PARTITION_DIR).glob("*.log"))
    assert b"".join(p.read_bytes() for p in files) == b"".join(expected)  # closed: no zeros, no stale bytes


def flip(path: Path, position: int, bit: int) -> bytes:
    data = bytearray(path.read_bytes())
    data[position] ^= 1 << bit
    path.write_bytes(bytes(data))
    return bytes(data)


def dir_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


# -- (a) a torn last batch, cut at every byte ---------------------------------------------------------------------


@pytest.mark.parametrize("zero_fill", [False, True], ids=["cut", "cut+preallocated-zeros"])
def test_torn_last_batch_cut_at_every_byte(single: Pristine, tmp_path: Path, zero_fill: bool) -> None:
    last = single.batches[-1]
    start, size, original = last.position, last.batch.size, last.raw
    prefix = [d.raw for d in single.batches[:-1]]
    zeros = bytes(4096) if zero_fill else b""
    for cut in range(start, start + size + 1):
        data_dir = tmp_path / f"cut{cut}"
        seg = single.clone(data_dir) / last.path.name
        with open(seg, "r+b") as f:
            f.truncate(cut)  # the crash: nothing from `cut` on reached the disk...
            f.seek(0, os.SEEK_END)
            f.write(zeros)  # ...of a segment pre-allocated with zeros beyond it
        lost = original[cut - start :]
        left = original[: cut - start] + zeros  # what the file holds from the last batch's position on
        log, events = open_log(data_dir, CONFIG)
        if not any(lost) and (zero_fill or not lost):
            # Nothing was lost but zeros, and the zeros are there: the batch is whole (a batch ends in zero bytes:
            # the last record's header count, often its tagged fields).
            expected, truncated = [*prefix, original], False
        elif not any(left):
            # From the last batch's position on the file is empty or all zeros (only its baseOffset's leading zero
            # bytes got written): indistinguishable from pre-allocated space, a clean end.
            expected, truncated = prefix, False
        else:
            expected, truncated = prefix, True
        tails = tail_events(events)
        if truncated:
            assert len(tails) == 1, cut
            event = tails[0]
            assert event["path"] == str(seg)
            assert event["position"] == start
            assert event["offset"] == last.batch.base_offset
            assert isinstance(event["reason"], str) and event["reason"]
            assert event["bytes_dropped"] == cut - start + len(zeros)
            assert event["log_level"] == "warning"
            assert seg.stat().st_size == start  # cut on disk, not only in memory
        else:
            assert tails == [], cut
        assert_log_is(log, expected)
        append_and_reopen(data_dir, log, expected, CONFIG)


def test_torn_tail_reason_names_the_damage(single: Pristine, tmp_path: Path) -> None:
    last = single.batches[-1]
    cases = {
        last.position + 9: "only 9 bytes left",  # the base offset and a byte of the length
        last.position + 70: "runs past the end",
        last.position + last.batch.size - 1: "runs past the end",
    }
    for cut, reason in cases.items():
        data_dir = tmp_path / f"c{cut}"
        seg = single.clone(data_dir) / last.path.name
        os.truncate(seg, cut)
        log, events = open_log(data_dir, CONFIG)
        (event,) = tail_events(events)
        assert reason in event["reason"]
        assert event["path"] == str(seg) and event["position"] == last.position
        log.close()


# -- (b) bit flips in the last batch ----------------------------------------------------------------------------------


def flip_trials(rng: random.Random, size: int, n: int) -> list[tuple[int, int]]:
    every_epoch_bit = [(i, bit) for i in EPOCH_BYTES for bit in range(8)]
    return every_epoch_bit + [(rng.randrange(size), rng.randrange(8)) for _ in range(n)]


def test_bit_flips_in_the_last_batch(single: Pristine, tmp_path: Path) -> None:
    rng = random.Random(0x5EED)
    last = single.batches[-1]
    prefix = [d.raw for d in single.batches[:-1]]
    previous_epoch = single.batches[-2].batch.epoch
    survived = detected = 0
    for trial, (i, bit) in enumerate(flip_trials(rng, last.batch.size, 250)):
        data_dir = tmp_path / f"t{trial}"
        seg = single.clone(data_dir) / last.path.name
        flipped = flip(seg, last.position + i, bit)[last.position :]
        log, events = open_log(data_dir, CONFIG)
        # The oracle. The CRC covers bytes 21.. of the batch; the CRC (17..20) and magic (16) are checked; the
        # length (8..11) decides which bytes the CRC covers, so a flip there fails it; the base offset (0..7) is
        # checked against the offset expected next. partitionLeaderEpoch (12..15) is NOT covered by the CRC
        # (Kafka's design): a flip there that keeps the epoch >= the previous batch's is undetectable — the batch
        # survives carrying the changed epoch; one that makes it lower (or negative) is caught as an epoch going
        # backwards. Whatever is caught here is a damaged tail: cut back to the batches before it.
        new_epoch = struct.unpack_from(">i", flipped, 12)[0]
        if i in EPOCH_BYTES and new_epoch >= previous_epoch:
            survived += 1
            assert tail_events(events) == [], (i, bit)
            assert_log_is(log, [*prefix, flipped])
            assert log.last_epoch == new_epoch
        else:
            detected += 1
            (event,) = tail_events(events)
            assert (event["path"], event["position"]) == (str(seg), last.position), (i, bit)
            assert_log_is(log, prefix)
            assert seg.stat().st_size == last.position
        log.close()
    assert survived >= 25 and detected >= 200  # both sides of the oracle were exercised


# -- (c) damage before the tail: refuse to open ---------------------------------------------------------------------


def expected_after_flip(batches: list[OnDisk], k: int, i: int, flipped_raw: bytes):
    """What opening must do after bit ``i`` of batch ``k`` flipped: ("open", batches) or ("refuse", batch index).

    Every byte but the epoch is checked by the CRC, the magic, the length or the expected offset: damage there is
    seen at batch ``k``, and since a valid batch (or a non-empty segment) follows, the open is refused. The epoch
    is checked only for going backwards, and only where that shows: lowered below the batch before, at ``k``
    itself; raised above the batch after, at ``k + 1`` (which cannot tell it from ``k + 1``'s own epoch lowered —
    when ``k + 1`` is the last batch, that is test (b)'s detected case, a damaged tail, cut); raised or lowered
    within those bounds, not at all (the batch keeps the changed epoch)."""
    raws = [d.raw for d in batches]
    raws[k] = flipped_raw
    if i not in EPOCH_BYTES:
        return ("refuse", k) if k < len(batches) - 1 else ("open", raws[:k])
    floor = 0
    for j, raw in enumerate(raws):
        epoch = read_batch(raw).epoch
        if epoch < floor:
            return ("refuse", j) if j < len(batches) - 1 else ("open", raws[:j])
        floor = epoch
    return ("open", raws)


def check_flip_in_earlier_batch(pristine: Pristine, tmp_path: Path, trials: list[tuple[int, int, int]]) -> tuple:
    refused = opened = 0
    for trial, (k, i, bit) in enumerate(trials):
        target = pristine.batches[k]
        data_dir = tmp_path / f"t{trial}"
        directory = pristine.clone(data_dir)
        seg = directory / target.path.name
        flipped_raw = flip(seg, target.position + i, bit)[target.position : target.position + target.batch.size]
        outcome, detail = expected_after_flip(pristine.batches, k, i, flipped_raw)
        before = dir_bytes(directory)
        if outcome == "refuse":
            refused += 1
            bad = pristine.batches[detail]
            with pytest.raises(LogCorruptionError) as exc:
                MetadataLog.open(data_dir, pristine.config)
            err = exc.value
            where = (k, i, bit)
            assert (err.path, err.position) == (str(directory / bad.path.name), bad.position), where
            assert f"{directory / bad.path.name}: corrupt batch at byte {bad.position}:" in str(err), where
            assert err.reason and err.reason in str(err)
            assert dir_bytes(directory) == before, where  # a refused open changes nothing on disk
        else:
            opened += 1
            log, events = open_log(data_dir, pristine.config)
            assert_log_is(log, detail)
            cut = len(detail) < len(pristine.batches)
            assert len(tail_events(events)) == cut, (k, i, bit)
            log.close()
    return refused, opened


def test_bit_flips_in_an_earlier_batch_refuse_to_open(single: Pristine, tmp_path: Path) -> None:
    rng = random.Random(1234)
    n = len(single.batches)
    trials = [(k, i, bit) for k in range(n - 1) for i in EPOCH_BYTES for bit in (0, 1, 3, 7)]
    for _ in range(300):
        k = rng.randrange(n - 1)
        trials.append((k, rng.randrange(single.batches[k].batch.size), rng.randrange(8)))
    refused, opened = check_flip_in_earlier_batch(single, tmp_path, trials)
    assert refused >= 250 and opened >= 5


def test_bit_flips_in_a_non_last_segment_refuse_to_open(multi: Pristine, tmp_path: Path) -> None:
    rng = random.Random(99)
    last_segment = multi.segments()[-1]
    candidates = [k for k, d in enumerate(multi.batches) if d.path != last_segment]
    tails = [k for k in candidates if k + 1 < len(multi.batches) and multi.batches[k + 1].path != multi.batches[k].path]
    assert tails  # the last batch of each non-last segment: damage there is a segment's tail, not the log's
    trials = [(k, i, rng.randrange(8)) for k in tails for i in (0, 9, 16, 20, 30, multi.batches[k].batch.size - 1)]
    for _ in range(200):
        k = rng.choice(candidates)
        trials.append((k, rng.randrange(multi.batches[k].batch.size), rng.randrange(8)))
    refused, _ = check_flip_in_earlier_batch(multi, tmp_path, trials)
    assert refused >= 200


def test_torn_non_last_segment_refuses_to_open(multi: Pristine, tmp_path: Path) -> None:
    first, second = multi.segments()[:2]
    last_of_first = [d for d in multi.batches if d.path == first][-1]
    cases = {
        # Torn inside the first segment's last batch: refused at that batch, the next segment holds data.
        last_of_first.position + 9: (first, last_of_first.position),
        last_of_first.position + 40: (first, last_of_first.position),
        last_of_first.position + last_of_first.batch.size - 1: (first, last_of_first.position),
        # Only leading zero bytes of the batch left: the first segment ends cleanly before it, and the gap in the
        # offsets shows at the start of the second segment.
        last_of_first.position + 1: (second, 0),
        last_of_first.position: (second, 0),
    }
    for cut, (path, position) in cases.items():
        data_dir = tmp_path / f"c{cut}"
        directory = multi.clone(data_dir)
        os.truncate(directory / first.name, cut)
        before = dir_bytes(directory)
        with pytest.raises(LogCorruptionError) as exc:
            MetadataLog.open(data_dir, MULTI)
        assert (exc.value.path, exc.value.position) == (str(directory / path.name), position), cut
        assert f"{directory / path.name}: corrupt batch at byte {position}:" in str(exc.value)
        assert dir_bytes(directory) == before
    # A whole segment missing from the middle: a gap in the offsets, refused as well.
    data_dir = tmp_path / "gap"
    directory = multi.clone(data_dir)
    (directory / second.name).unlink()
    with pytest.raises(LogCorruptionError) as exc:
        MetadataLog.open(data_dir, MULTI)
    assert exc.value.path == str(directory / multi.segments()[2].name) and exc.value.position == 0


def test_refused_open_releases_its_files(single: Pristine, tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    directory = single.clone(data_dir)
    flip(directory / single.batches[1].path.name, single.batches[1].position + 40, 2)
    fds = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        with pytest.raises(LogCorruptionError):
            MetadataLog.open(data_dir, CONFIG)
    assert len(os.listdir("/proc/self/fd")) == fds


# -- (d) crashes around a segment roll -------------------------------------------------------------------------------


@pytest.mark.parametrize("new_segment", [b"", bytes(8192)], ids=["empty", "preallocated"])
def test_crash_right_after_a_roll(multi: Pristine, tmp_path: Path, new_segment: bytes) -> None:
    directory = multi.clone(tmp_path / "d")
    rolled = directory / f"{multi.end_offset:020d}.log"
    rolled.write_bytes(new_segment)  # created by the roll; the first batch never reached it
    log, events = open_log(tmp_path / "d", MULTI)
    raws = [d.raw for d in multi.batches]
    assert tail_events(events) == []
    assert_log_is(log, raws)
    assert log.segments[-1] == rolled  # kept: it starts where the log ends
    assert log.read(multi.end_offset) == (b"", multi.end_offset)
    info = log.append(data([partition(1)], 4))
    assert (info.base_offset, info.position) == (multi.end_offset, 0)
    assert log.segments[-1] == rolled
    log.close()
    assert rolled.read_bytes() == read_batch(data([partition(1)], 4)).with_offset(multi.end_offset)
    again, events = open_log(tmp_path / "d", MULTI)
    assert tail_events(events) == []
    assert len(again.batches()) == len(raws) + 1
    again.close()


def test_crash_in_the_first_batch_after_a_roll(multi: Pristine, tmp_path: Path) -> None:
    directory = multi.clone(tmp_path / "d")
    rolled = directory / f"{multi.end_offset:020d}.log"
    first = read_batch(data([partition(1), partition(2)], 4)).with_offset(multi.end_offset)
    rolled.write_bytes(first[:100] + bytes(8092))
    log, events = open_log(tmp_path / "d", MULTI)
    (event,) = tail_events(events)
    assert (event["path"], event["position"], event["offset"]) == (str(rolled), 0, multi.end_offset)
    raws = [d.raw for d in multi.batches]
    assert_log_is(log, raws)
    assert rolled.stat().st_size == 0
    append_and_reopen(tmp_path / "d", log, raws, MULTI)


@pytest.mark.parametrize("new_segment", [b"", bytes(8192)], ids=["empty", "preallocated"])
def test_torn_tail_then_an_empty_last_segment(multi: Pristine, tmp_path: Path, new_segment: bytes) -> None:
    directory = multi.clone(tmp_path / "d")
    last_segment = directory / multi.segments()[-1].name
    last = multi.batches[-1]
    assert last.path.name == last_segment.name
    os.truncate(last_segment, last.position + last.batch.size // 2)  # torn...
    empty = directory / f"{multi.end_offset:020d}.log"
    empty.write_bytes(new_segment)  # ...and a roll after it, that never got a batch
    log, events = open_log(tmp_path / "d", MULTI)
    (event,) = tail_events(events)
    assert (event["path"], event["position"]) == (str(last_segment), last.position)
    raws = [d.raw for d in multi.batches[:-1]]
    assert_log_is(log, raws)
    assert not empty.exists()  # beyond the recovered end: removed
    assert log.segments[-1] == last_segment
    append_and_reopen(tmp_path / "d", log, raws, MULTI)
    assert not empty.exists()


# -- (e) pre-allocated zeros are a clean end ---------------------------------------------------------------------------


@pytest.mark.parametrize("zeros", [1, 5, 11, 12, 13, 61, 4096, 100_000])
def test_zeros_after_the_last_batch_are_a_clean_end(single: Pristine, tmp_path: Path, zeros: int) -> None:
    directory = single.clone(tmp_path / "d")
    seg = directory / single.batches[-1].path.name
    with open(seg, "ab") as f:
        f.write(bytes(zeros))
    log, events = open_log(tmp_path / "d", CONFIG)
    assert tail_events(events) == []
    raws = [d.raw for d in single.batches]
    assert_log_is(log, raws)
    append_and_reopen(tmp_path / "d", log, raws, CONFIG)


def test_zeros_after_the_last_batch_of_a_rolled_segment(multi: Pristine, tmp_path: Path) -> None:
    """A roll trims the old segment, but the trim need not reach the disk before a crash."""
    directory = multi.clone(tmp_path / "d")
    first = directory / multi.segments()[0].name
    with open(first, "ab") as f:
        f.write(bytes(8192))
    log, events = open_log(tmp_path / "d", MULTI)
    assert tail_events(events) == []
    raws = [d.raw for d in multi.batches]
    assert_log_is(log, raws)
    for offset in range(multi.end_offset):  # reads stop at the batches, not the zeros
        data_bytes, nxt = log.read(offset, 10**6)
        assert data_bytes and any(data_bytes[:12]) and nxt > offset
    append_and_reopen(tmp_path / "d", log, raws, MULTI)
    assert first.read_bytes() == b"".join(d.raw for d in multi.batches if d.path.name == first.name)


def test_recovery_of_an_unclosed_log(tmp_path: Path) -> None:
    """No close at all (a crash): the files hold pre-allocated zeros and no trimmed state; all flushed data is
    there."""
    log = MetadataLog.open(tmp_path, MULTI)
    for b in multi_segment_batches():
        log.append(b)
    flushed = log.flush()
    raws = [b.buffer for b in log.batches()]
    assert log.segments[-1].stat().st_size > sum(len(r) for r in raws[-3:])  # pre-allocated
    again, events = open_log(tmp_path, MULTI)  # the crashed process's files, as they are
    assert tail_events(events) == []
    assert_log_is(again, raws)
    assert again.end_offset == flushed
    again.close()
    for seg in log._segments:  # release the "crashed" writer's descriptors without closing it cleanly
        os.close(seg.fd)
        seg.fd = -1
