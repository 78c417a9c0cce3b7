"""Writing a snapshot in a forked child (quorum.log.snapshot_fork): the same bytes as writing it in process, a
failure in the child reported with its message and no file left, a cancelled write kills the child."""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from quorum.log.snapshot_fork import SnapshotChildError, start_child, supported, write_in_child
from quorum.log.snapshots import SnapshotFile, SnapshotFileWriter, SnapshotId

SNAPSHOT = SnapshotId(5000, 3)
RECORDS = [bytes([0, 3, 1]) + i.to_bytes(4, "big") * 8 for i in range(25_000)]  # framed-looking, distinct


@pytest.fixture
def executor():
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool


def writer(directory: Path) -> SnapshotFileWriter:
    return SnapshotFileWriter(directory, SNAPSHOT, 1234, max_batch_bytes=64 * 1024, timestamp_ms=99)


async def test_the_child_writes_what_the_process_would(tmp_path: Path, executor: ThreadPoolExecutor) -> None:
    assert supported()  # tests/conftest.py turned gRPC's fork support off, as pykraft does in a node
    (tmp_path / "here").mkdir()
    (tmp_path / "child").mkdir()
    here = writer(tmp_path / "here")
    here.append(RECORDS)
    expected_size = here.freeze()
    file = writer(tmp_path / "child")
    size, count = await write_in_child(file, iter(RECORDS), executor)
    assert (size, count) == (expected_size, len(RECORDS))
    assert file.path.exists() and not file.final_path.exists()  # the parent publishes
    file.publish(size)
    got = (tmp_path / "child" / SNAPSHOT.file_name).read_bytes()
    assert got == (tmp_path / "here" / SNAPSHOT.file_name).read_bytes()
    assert not list((tmp_path / "child").glob("*.part"))
    with SnapshotFile.open(file.final_path) as f:
        assert f.validate().data_records == len(RECORDS)


def busy(records: list[bytes]):
    start = time.process_time()  # the CPU clock of the process running it
    while time.process_time() - start < 0.3:
        pass
    yield from records


@pytest.mark.parametrize(
    "records",
    [lambda: busy(RECORDS), lambda: lambda n: [iter(RECORDS[:10]), busy(RECORDS[10:])]],
    ids=["child", "helper"],
)
async def test_the_cpu_seconds_are_reported_the_helpers_included(
    tmp_path: Path, executor: ThreadPoolExecutor, records
) -> None:
    file = writer(tmp_path)
    child = start_child(file, records())
    assert child.cpu_seconds is None  # not reaped yet
    await child.wait(executor)
    assert child.cpu_seconds is not None and 0.3 <= child.cpu_seconds < 5
    file.abort()


def failing():
    yield from RECORDS[:100]
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    ("records", "error"),
    [
        (failing, r"writing snapshot 5000-3 in a child process: OSError: \[Errno 28\] No space left on device"),
        (lambda: lambda n: [iter(RECORDS[:100]), failing()], r"piece 1: OSError: \[Errno 28\] No space left"),
        (lambda: lambda n: [iter(RECORDS)] * (n + 1), r"ValueError: 3 runs of records for 2 processes"),  # none lost
    ],
    ids=["child", "helper", "too-many-runs"],
)
async def test_a_failure_is_reported_and_leaves_no_file(tmp_path: Path, executor: ThreadPoolExecutor, records, error):
    file = writer(tmp_path)
    with pytest.raises(SnapshotChildError, match=error):
        await write_in_child(file, records(), executor)
    file.abort()
    assert list(tmp_path.iterdir()) == []


def endless(marker: Path):
    """Records without end, from a process that first writes its pid to ``marker``."""
    marker.write_text(str(os.getpid()))
    while True:
        time.sleep(0.01)
        yield RECORDS[0]


async def test_a_cancelled_write_kills_the_child(tmp_path: Path, executor: ThreadPoolExecutor) -> None:
    marker = tmp_path / "child-started"
    file = writer(tmp_path)
    task = asyncio.ensure_future(write_in_child(file, endless(marker), executor))
    for _ in range(500):
        if marker.exists() and marker.read_text():  # written, not just created (write_text is not atomic)
            break
        await asyncio.sleep(0.01)
    pid = int(marker.read_text())
    assert pid != os.getpid()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone, and reaped
    file.abort()


def test_a_child_nobody_waits_for_is_killed_and_reaped(tmp_path: Path) -> None:
    """A write abandoned between the fork and the wait (the snapshot's task cancelled before it ran)."""

    def records():
        while True:
            time.sleep(0.01)
            yield RECORDS[0]

    file = writer(tmp_path)
    child = start_child(file, records())
    os.kill(child.pid, 0)  # running
    child.kill()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)  # reaped: no zombie left
    child.kill()  # twice: nothing more to do
    file.abort()
    assert list(tmp_path.iterdir()) == []


# -- the records in runs: the child's helpers encode all but the first at the same time ---------------------------


def in_runs(*runs: list[bytes]):
    asked: list[int] = []

    def split(n: int) -> list[list[bytes]]:
        asked.append(n)  # in the child: the parent never sees it
        return list(runs)

    return split, asked


async def test_runs_written_by_helpers_hold_every_record_in_order(tmp_path: Path, executor: ThreadPoolExecutor):
    split, asked = in_runs(RECORDS[:10_000], RECORDS[10_000:])
    file = writer(tmp_path)
    child = start_child(file, split)
    size, count = await child.wait(executor)
    assert asked == []  # asked in the child, as the image it reads is the child's
    assert count == len(RECORDS) and size == file.path.stat().st_size
    assert sorted(p.name for p in tmp_path.iterdir()) == [file.path.name]  # the helper's piece was removed
    file.publish(size)
    with SnapshotFile.open(file.final_path) as f:
        info = f.validate()  # offsets run on from the child's records into the piece's, CRCs hold
        batches = list(f.data_batches())
    assert info.data_records == len(RECORDS)
    assert [r.value for b in batches for r in b.records()] == RECORDS
    assert [r.offset for b in batches for r in b.records()] == list(range(1, len(RECORDS) + 1))


def test_a_killed_childs_helpers_die_and_their_pieces_are_removed(tmp_path: Path) -> None:
    marker = tmp_path / "helper-started"
    file = writer(tmp_path)
    child = start_child(file, lambda n: [iter(RECORDS[:10]), endless(marker)])
    for _ in range(500):
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.01)
    helper = int(marker.read_text())
    assert helper not in (os.getpid(), child.pid)
    assert (tmp_path / f"{SNAPSHOT.file_name[: -len('.checkpoint')]}.piece-1.checkpoint.part").exists()
    child.kill()
    for _ in range(500):  # the kernel kills the helper once its parent is gone (PR_SET_PDEATHSIG)
        if not alive(helper):
            break
        time.sleep(0.01)
    else:
        pytest.fail(f"helper {helper} outlived the child it belongs to")
    file.abort()
    marker.unlink()
    assert list(tmp_path.iterdir()) == []


def alive(pid: int) -> bool:
    """Running: a zombie (dead, not yet reaped by whoever inherited it) is not."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
