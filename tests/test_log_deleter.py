"""Retention's files deleted off the event loop (quorum.log.deleter): the log's state moves at once, the files go
later in order, a failure stops the rest and is raised, an install waits for them, a crash before they ran leaves a
log that opens; each deletion renames its files durably before it removes them, cut a chunk at a time from the end,
and the open removes what a crash between the two left."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest
from test_log_retention import fill, installed_at, snapshot

import quorum.log.deleter as deleter_module
from quorum.log.deleter import DELETED_SUFFIX, FileDeleter
from quorum.log.files import remove_gradually
from quorum.log.log import METADATA_PARTITION_DIR, LogConfig, MetadataLog
from quorum.log.snapshots import SnapshotFileWriter, SnapshotId, list_snapshots

CONFIG = LogConfig(segment_bytes=2048, retention_bytes=0, retention_ms=-1)


def on_disk(log: MetadataLog) -> list[str]:
    return sorted(p.name for p in log.dir.iterdir() if p.suffix in (".log", ".checkpoint"))


def log_with_a_snapshot(data_dir: Path) -> tuple[MetadataLog, SnapshotId]:
    """60 batches in 2 KiB segments and a snapshot at offset 35: retention can delete the segments below it."""
    log = MetadataLog.open(data_dir, CONFIG)
    fill(log, 60)
    return log, snapshot(log, 35, log.end_offset_for_epoch(4)[0])


def held_deleter(log: MetadataLog) -> threading.Event:
    """Start the log's background deleter, held by a first job until the returned event is set."""
    gate = threading.Event()
    log.deleter.start_background("test-delete")
    log.deleter.run(lambda: gate.wait(10))
    return gate


def test_retention_moves_the_log_start_at_once_and_the_files_go_later(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path, CONFIG)
    fill(log, 60)
    first = snapshot(log, 20, log.end_offset_for_epoch(2)[0])
    newest = snapshot(log, 35, log.end_offset_for_epoch(4)[0])
    before = on_disk(log)
    gate = held_deleter(log)

    freed = log.clean()

    assert freed > 0 and log.start_offset > 0 and log.snapshots.ids == [newest]
    with pytest.raises(ValueError):
        log.read(0)
    assert log.batches(log.start_offset)[0].base_offset == log.start_offset
    assert on_disk(log) == before  # nothing was unlinked yet: the thread is held
    gate.set()
    log.deleter.drain()
    below = {n for n in before if n.endswith(".log") and int(n[:20]) < log.start_offset}
    assert set(before) - set(on_disk(log)) == below | {first.file_name}
    assert list_snapshots(log.dir) == [newest]
    log.close()
    again = MetadataLog.open(tmp_path, CONFIG)
    assert again.start_offset == log.start_offset
    again.close()


def test_a_failed_deletion_stops_the_later_ones_and_the_next_clean_raises_it(tmp_path: Path) -> None:
    log, _ = log_with_a_snapshot(tmp_path)
    gate = held_deleter(log)

    def broken() -> None:
        raise OSError(5, "Input/output error")

    log.deleter.run(broken)
    before = on_disk(log)
    log.clean()  # its deletions queue behind the failing one
    gate.set()
    with pytest.raises(OSError, match="Input/output error"):
        log.deleter.drain()
    assert on_disk(log) == before  # none ran after the failure: an older segment left behind a newer one's hole
    with pytest.raises(OSError, match="Input/output error"):
        log.clean()


def test_an_install_waits_for_pending_deletions_before_it_replaces_the_log(tmp_path: Path) -> None:
    log, _ = log_with_a_snapshot(tmp_path)
    gate = held_deleter(log)
    log.clean()
    doomed = [n for n in on_disk(log) if n.endswith(".log") and int(n[:20]) < log.start_offset]
    assert doomed
    done = threading.Event()
    install = threading.Thread(target=lambda: (installed_at(tmp_path, log, SnapshotId(500, 9)), done.set()))
    install.start()
    assert not done.wait(0.2)  # held: it waits for the retention deletions queued before it
    gate.set()
    install.join(10)
    assert done.is_set()
    assert not set(doomed) & set(on_disk(log))
    assert log.start_offset == log.end_offset == 500
    log.close()


def test_a_crash_before_the_deletions_ran_opens_with_the_longer_log_and_retention_deletes_it_again(
    tmp_path: Path,
) -> None:
    log, newest = log_with_a_snapshot(tmp_path / "live")
    gate = held_deleter(log)
    log.clean()
    moved_to = log.start_offset
    # The crash: the directory as it is now, with the deletions still waiting.
    shutil.copytree(log.dir, tmp_path / "crashed" / METADATA_PARTITION_DIR)
    gate.set()
    log.close()

    again = MetadataLog.open(tmp_path / "crashed", CONFIG)
    assert again.start_offset == 0 < moved_to and again.latest_snapshot() == newest
    assert again.clean() > 0  # inline here: no background thread started
    assert again.start_offset == moved_to
    assert not any(int(n[:20]) < moved_to for n in on_disk(again) if n.endswith(".log"))
    again.close()


def test_the_deleter_runs_inline_until_started(tmp_path: Path) -> None:
    deleter = FileDeleter(tmp_path)
    f = tmp_path / "x"
    f.write_bytes(b"1")
    deleter.delete([f, tmp_path / "missing"])  # one not there: already deleted
    assert not f.exists() and not list(tmp_path.iterdir())
    w = SnapshotFileWriter(tmp_path, SnapshotId(5, 1), 0)
    w.append([b"state"])
    w.freeze()
    deleter.start_background("test-delete")
    deleter.delete([tmp_path / SnapshotId(5, 1).file_name])
    deleter.close()
    assert list_snapshots(tmp_path) == []


def test_a_file_is_cut_from_its_end_a_chunk_at_a_time_then_unlinked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "big"
    f.write_bytes(b"x" * 20)
    cuts: list[int] = []
    real = os.truncate
    monkeypatch.setattr(os, "truncate", lambda path, size: (cuts.append(size), real(path, size))[1])
    assert remove_gradually(f, chunk_bytes=8)
    assert cuts == [12, 4] and not f.exists()  # each cut frees one chunk; what is left goes with the unlink
    assert not remove_gradually(f, chunk_bytes=8)  # not there: nothing to do
    small = tmp_path / "small"
    small.write_bytes(b"x" * 8)
    assert remove_gradually(small, chunk_bytes=8) and cuts == [12, 4]


def test_a_deletion_renames_durably_before_it_removes_and_a_crash_between_leaves_what_the_open_removes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, newest = log_with_a_snapshot(tmp_path / "live")
    steps: list[str] = []
    monkeypatch.setattr(deleter_module, "fsync_dir", lambda d: steps.append("fsync"))

    def crash(path: Path) -> bool:  # the process dies before the first removal
        steps.append("remove")
        shutil.copytree(log.dir, tmp_path / "crashed" / METADATA_PARTITION_DIR)
        raise SystemExit("crash")

    monkeypatch.setattr(deleter_module, "remove_gradually", crash)
    with pytest.raises(SystemExit):
        log.clean()
    assert steps == ["fsync", "remove"]  # every file of the deletion out of the log, durably, before any removal
    crashed = tmp_path / "crashed" / METADATA_PARTITION_DIR
    left = sorted(p.name for p in crashed.iterdir() if p.name.endswith(DELETED_SUFFIX))
    assert left and all(n.endswith((".log.deleted", ".index.deleted")) for n in left)
    monkeypatch.undo()

    again = MetadataLog.open(tmp_path / "crashed", CONFIG)
    assert not any(p.name.endswith(DELETED_SUFFIX) for p in again.dir.iterdir())  # the open removed them
    assert again.latest_snapshot() == newest
    assert again.start_offset > 0  # the first segment is gone: the log starts at the next, contiguous
    assert again.batches(again.start_offset)[0].base_offset == again.start_offset
    again.close()
