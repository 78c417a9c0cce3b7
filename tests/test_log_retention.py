"""The log beside its snapshots: retention (snapshots and segments deleted, the log start moving, the epoch checkpoint
trimmed), installing a snapshot fetched from the leader, and opening after a crash in the middle of each step."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from quorum.log.batch import build_batch
from quorum.log.epoch_cache import CHECKPOINT_NAME, EpochCache
from quorum.log.log import METADATA_PARTITION_DIR, LogConfig, LogCorruptionError, MetadataLog
from quorum.log.snapshots import SnapshotFileWriter, SnapshotId

SMALL = LogConfig(segment_bytes=2048, retention_bytes=-1, retention_ms=-1)


def batch(i: int, epoch: int) -> bytes:
    return build_batch([(None, b"value-%06d" % i + b"x" * 200)], epoch=epoch, timestamp=1_700_000_000_000 + i)


def fill(log: MetadataLog, count: int, epoch_of: dict[int, int] | None = None) -> None:
    """Append ``count`` one-record batches; the epoch goes up every 10 offsets unless ``epoch_of`` says."""
    for _ in range(count):
        i = log.end_offset
        log.append(batch(i, (epoch_of or {}).get(i, 1 + i // 10)))
    log.flush()


def snapshot(log: MetadataLog, end: int, epoch: int, records: int = 3) -> SnapshotId:
    sid = SnapshotId(end, epoch)
    w = SnapshotFileWriter(log.dir, sid, 1_700_000_000_000)
    w.append([b"state-%d" % i for i in range(records)])
    w.freeze()
    log.snapshot_frozen(sid)
    return sid


def open_log(tmp_path: Path, config: LogConfig = SMALL) -> MetadataLog:
    return MetadataLog.open(tmp_path, config)


def test_clean_deletes_segments_below_the_oldest_snapshot_kept(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=2048, retention_bytes=0, retention_ms=-1))
    fill(log, 60)
    assert len(log.segments) > 4
    bases = [int(p.name[:20]) for p in log.segments]
    sid = snapshot(log, 35, log.end_offset_for_epoch(4)[0])
    freed = log.clean()
    assert freed > 0
    # Every segment wholly below offset 35 went; the one holding 35 stayed.
    assert log.start_offset == max(b for b in bases if b <= 35)
    assert log.latest_snapshot() == sid
    assert log.batches(log.start_offset)[0].base_offset == log.start_offset
    # The epoch checkpoint starts at the new log start once the next flush wrote it, and a reopen agrees.
    log.flush()
    entries = EpochCache.read(log.dir / CHECKPOINT_NAME).entries
    assert entries[0][1] == log.start_offset
    start, end, last_epoch = log.start_offset, log.end_offset, log.last_epoch
    log.close()
    again = open_log(tmp_path)
    assert (again.start_offset, again.end_offset, again.last_epoch) == (start, end, last_epoch)
    assert again.epochs.entries == entries
    again.close()


def test_clean_keeps_the_newest_snapshot_and_at_most_three(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=2048, retention_bytes=-1, retention_ms=-1))
    fill(log, 60)
    ids = [snapshot(log, end, 1 + (end - 1) // 10) for end in (10, 20, 30, 40, 50)]
    log.clean()
    assert log.snapshots.ids == ids[-3:]
    assert sorted(p.name for p in log.dir.glob("*.checkpoint")) == [i.file_name for i in ids[-3:]]
    # Nothing over the size or age limits: segments below the oldest snapshot kept stay.
    assert log.start_offset == 0
    # Over the size limit: everything but the newest snapshot goes, and the segments it covers.
    log.config = LogConfig(segment_bytes=2048, retention_bytes=0, retention_ms=-1)
    log.clean()
    assert log.snapshots.ids == [ids[-1]]
    assert 0 < log.start_offset <= 50
    log.close()


def test_clean_keeps_the_log_a_replica_still_catching_up_needs(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=2048, retention_bytes=1, retention_ms=60_000))
    fill(log, 60)
    bases = [int(p.name[:20]) for p in log.segments]
    w = SnapshotFileWriter(log.dir, SnapshotId(50, 5), 1_700_000_000_000)
    w.append([b"s" * 1000] * 30)  # bigger than the log: with it, the two are always over the limit below
    w.freeze()
    log.snapshot_frozen(SnapshotId(50, 5))
    holding = max(b for b in bases if b <= 22)  # the segment a replica fetching offset 22 reads next
    log.config = LogConfig(segment_bytes=2048, retention_bytes=log.size_bytes, retention_ms=60_000)
    log.clean(catch_up_from=22)
    # Over the size limit (the snapshot counts), yet the log alone is within it: what offset 22 needs stays.
    assert log.start_offset == holding
    log.clean(catch_up_from=35)  # it went on fetching: what is below it goes
    assert log.start_offset == max(b for b in bases if b <= 35)
    # The log alone over the limit: its oldest segments go until it is within it, needed or not (the replica
    # then fetches the snapshot).
    limit = log.size_bytes - 1
    log.config = LogConfig(segment_bytes=2048, retention_bytes=limit, retention_ms=60_000)
    log.clean(catch_up_from=35)
    assert log.start_offset == min(b for b in bases if b > 35) and log.size_bytes <= limit
    log.close()


def test_clean_by_age_ignores_replicas_catching_up(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=2048, retention_bytes=-1, retention_ms=60_000))
    fill(log, 60)
    snapshot(log, 50, 5)
    hour_ago = os.stat(log.segments[0]).st_mtime - 3600
    for p in log.segments:
        os.utime(p, (hour_ago, hour_ago))
    log.clean(catch_up_from=0)
    assert 0 < log.start_offset <= 50
    log.close()


def test_clean_by_age(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=2048, retention_bytes=-1, retention_ms=60_000))
    fill(log, 60)
    old, new = snapshot(log, 20, 2), snapshot(log, 50, 5)
    log.clean()
    assert log.snapshots.ids == [old, new] and log.start_offset == 0  # nothing is a minute old yet
    hour_ago = os.stat(log.segments[0]).st_mtime - 3600
    for p in [*log.segments, log.snapshots.path(old)]:
        os.utime(p, (hour_ago, hour_ago))
    log.clean()
    assert log.snapshots.ids == [new]
    assert 0 < log.start_offset <= 50
    log.close()


def test_install_snapshot_empties_the_log_to_start_at_it(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 25)
    sid = SnapshotId(500, 9)
    src = tmp_path / "leader" / METADATA_PARTITION_DIR
    src.mkdir(parents=True)
    writer = SnapshotFileWriter(src, sid, 1_700_000_000_000)
    writer.append([b"leader-state"] * 10)
    writer.freeze()
    data = (src / sid.file_name).read_bytes()
    install = log.begin_snapshot(sid)
    for pos in range(0, len(data), 97):
        install.write(pos, data[pos : pos + 97])
    with capture_logs() as logs:
        assert log.install_snapshot(install) == 500
    assert any(e["event"] == "log_truncated_to_snapshot" for e in logs)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (500, 500, 9)
    assert log.latest_snapshot() == sid and (log.dir / sid.file_name).read_bytes() == data
    assert log.end_offset_for_epoch(9) == (9, 500)
    log.append(batch(500, 10))
    log.flush()
    log.close()
    again = open_log(tmp_path)
    assert (again.start_offset, again.end_offset, again.last_epoch) == (500, 501, 10)
    assert again.end_offset_for_epoch(9) == (9, 500)
    again.close()


def test_a_crash_between_freezing_and_emptying_the_log_is_finished_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 25)
    log.close()
    # The fetched snapshot was frozen, then the process died before the log was emptied.
    SnapshotFileWriter(tmp_path / METADATA_PARTITION_DIR, SnapshotId(300, 7), 0).freeze()
    with capture_logs() as logs:
        log = open_log(tmp_path)
    assert any(e["event"] == "log_truncated_to_snapshot" for e in logs)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (300, 300, 7)
    log.close()


def test_a_crash_after_every_segment_was_deleted(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 25)
    snapshot(log, 300, 7)
    log.close()
    for seg in (tmp_path / METADATA_PARTITION_DIR).glob("*.log"):
        seg.unlink()
    log = open_log(tmp_path)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (300, 300, 7)
    log.close()


def test_damaged_newest_snapshot_is_set_aside_and_the_older_one_used(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 40)
    older, newer = snapshot(log, 20, 2), snapshot(log, 30, 3)
    log.close()
    path = tmp_path / METADATA_PARTITION_DIR / newer.file_name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with capture_logs() as logs:
        log = open_log(tmp_path)
    damaged = [e for e in logs if e["event"] == "snapshot_damaged"]
    assert len(damaged) == 1 and damaged[0]["path"] == str(path) and damaged[0]["next_candidate"] == str(older)
    assert log.latest_snapshot() == older
    assert not path.exists() and path.with_name(path.name + ".damaged").exists()
    log.close()


def test_a_log_start_beyond_every_valid_snapshot_refuses_to_open(tmp_path: Path) -> None:
    log = open_log(tmp_path, LogConfig(segment_bytes=2048, retention_bytes=0, retention_ms=-1))
    fill(log, 60)
    sid = snapshot(log, 45, 5)
    log.clean()
    start = log.start_offset
    assert start > 0
    log.close()
    path = tmp_path / METADATA_PARTITION_DIR / sid.file_name
    path.write_bytes(path.read_bytes()[:-10])  # the only snapshot is truncated: offsets below the start are gone
    with pytest.raises(LogCorruptionError, match=f"the log starts at offset {start} and no valid snapshot"):
        open_log(tmp_path)


def test_partial_snapshot_files_are_removed_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 5)
    w = SnapshotFileWriter(log.dir, SnapshotId(5, 1), 0)
    w.append([b"x"])
    log.close()  # the writer never froze: a crash mid-write
    part = next((tmp_path / METADATA_PARTITION_DIR).glob("*.part"))
    log = open_log(tmp_path)
    assert not part.exists() and log.latest_snapshot() is None
    log.close()
    w.abort()


def installed_at(tmp_path: Path, log: MetadataLog, sid: SnapshotId) -> None:
    src = tmp_path / "leader" / METADATA_PARTITION_DIR
    src.mkdir(parents=True, exist_ok=True)
    writer = SnapshotFileWriter(src, sid, 1_700_000_000_000)
    writer.append([b"leader-state"])
    writer.freeze()
    install = log.begin_snapshot(sid)
    install.write(0, (src / sid.file_name).read_bytes())
    log.install_snapshot(install)


def test_a_log_starting_at_a_snapshot_answers_for_the_snapshot_epoch(tmp_path: Path) -> None:
    """After an install, then batches of a later epoch, then retention trimming the epoch cache from its start, a
    follower fetching at (snapshot end, snapshot epoch) is not diverging (or it would be sent the snapshot again);
    truncated back to the snapshot, the empty log's last epoch is the snapshot's, not 0 (or its votes would
    under-report its log)."""
    log = open_log(tmp_path)
    installed_at(tmp_path, log, SnapshotId(100, 4))
    log.append(batch(100, 6))
    log.append(batch(101, 6))
    log.flush()
    log.clean()
    assert log.epochs.entries[0] == (6, 100)  # Kafka's truncateFromStart: epoch 4 ended at the log start
    assert log.end_offset_for_epoch(4) == (4, 100)
    assert log.end_offset_for_epoch(5) == (4, 100)
    assert log.end_offset_for_epoch(3) == (-1, -1)
    assert log.end_offset_for_epoch(6) == (6, 102)
    log.truncate_to(100)
    assert (log.end_offset, log.last_epoch) == (100, 4)
    log.close()


def test_an_interrupted_install_over_a_longer_divergent_log_is_finished_at_open(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    fill(log, 30, {i: 2 for i in range(30)})  # a stale log of epoch 2, longer than the snapshot
    log.close()
    SnapshotFileWriter(tmp_path / METADATA_PARTITION_DIR, SnapshotId(20, 5), 0).freeze()
    log = open_log(tmp_path)
    assert (log.start_offset, log.end_offset, log.last_epoch) == (20, 20, 5)
    log.close()
