"""Writing a snapshot in a forked child process, as Redis writes its RDB files.

Encoding a few million records takes seconds of CPU. On the event loop, even in small chunks, it held up the node's
Raft traffic: in a scale run, commits stopped for the whole 1.3 s a 600k-partition snapshot took to write. A child
forked at the moment of the snapshot holds a copy-on-write image of the parent's memory as it was then — exactly
the captured state, whatever the parent changes afterwards — and encodes, writes and fsyncs the ``.part`` file on
its own, on another core; the parent only waits for its answer and then renames the file (:meth:`publish
<quorum.log.snapshots.SnapshotFileWriter.publish>`).

The child runs nothing but the encoding and the file writes. Right after the fork it drops every inherited file
descriptor but the snapshot file's and its answer pipe (a listening socket or the data directory's lock held by
a child outliving its parent would keep a restarted node from binding or starting), resets the signal handlers,
lowers its priority (nice 10: the node's own loop comes first when cores are short), syncs the file every 8 MiB as
it writes (``SYNC_BYTES``: the node's log fsyncs never wait behind the whole file's dirty pages), asks the kernel
to kill it if the parent dies (``PR_SET_PDEATHSIG``: a parent killed -9 leaves a ``.part`` that the next start
removes, not a writer), and ends with ``os._exit`` (no cleanup of the parent's objects, no flushing of its
buffers). Its memory: the pages it touches (reference counts of the objects it reads) are copied, up to the size of
the state it encodes, for the seconds it runs.

Given the records as runs, the child forks ``HELPERS`` helpers of its own, each encoding one run into a piece file
while the child encodes the first; it then appends their batches (see :func:`_child`). A helper is isolated as the
child is and dies with it; a killed child's pieces are removed by its parent, and any left by a crash at start.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import os
import signal
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import NoReturn

from quorum.log.files import remove_gradually
from quorum.log.snapshots import SYNC_BYTES, SnapshotFileWriter

CHUNK_RECORDS = 10_000
CHILD_NICE = 10  # background work: the node's own loop (Raft, requests) comes first when cores are short
HELPERS = 1  # processes the child forks to encode a run of the records each, beside its own run
PR_SET_PDEATHSIG = 1
_ANSWER_LIMIT = 4096

# The records: all of them, or a function that cuts them into at most n consecutive runs (called in the child,
# where it may take its time), the first written by the child, each other by a helper process at the same time.
Records = Iterable[bytes] | Callable[[int], Sequence[Iterable[bytes]]]


class SnapshotChildError(OSError):
    """The child writing a snapshot failed (its message), or died (its exit status)."""


def supported() -> bool:
    """POSIX, and gRPC's fork support off (it restarts gRPC's threads in the child, which crash there once the
    inherited descriptors are closed; ``pykraft`` turns it off before importing grpc)."""
    fork_support = os.environ.get("GRPC_ENABLE_FORK_SUPPORT", "").strip().lower()
    return hasattr(os, "fork") and os.name == "posix" and fork_support in ("0", "false", "no")


class ChildWriter:
    """A child forked by :func:`start_child`, writing one snapshot: :meth:`wait` for its answer, or :meth:`kill`
    it (a write abandoned before anyone waited for it)."""

    def __init__(self, pid: int, answer: int, file: SnapshotFileWriter, pieces: list[Path]) -> None:
        self.pid = pid
        self._answer = answer  # the read end of its answer pipe
        self._file = file
        self._pieces = pieces  # its helpers' files
        self._done = False
        self.cpu_seconds: float | None = None  # the child's (and its helpers') CPU, once reaped by wait()

    async def wait(self, executor: Executor) -> tuple[int, int]:
        """The file's size and the records written, once the child has finished (its executor thread blocks, the
        event loop does not). The caller then publishes the file, or aborts it if this raises. Cancelled: the
        child is killed."""
        loop = asyncio.get_running_loop()
        self._done = True
        try:
            answer = await loop.run_in_executor(executor, _read_answer, self._answer)
        except asyncio.CancelledError:
            os.kill(self.pid, signal.SIGKILL)
            raise
        finally:
            _, status, usage = await asyncio.shield(loop.run_in_executor(executor, os.wait4, self.pid, 0))
            os.close(self._answer)
            self.cpu_seconds = usage.ru_utime + usage.ru_stime  # its reaped helpers' included (RUSAGE_CHILDREN)
            self._remove_pieces()
        text = answer.decode(errors="replace")
        snapshot_id = self._file.snapshot_id
        if status == 0 and text.startswith("ok "):
            size, count = text[3:].split()
            return int(size), int(count)
        if text.startswith("error "):
            raise SnapshotChildError(f"writing snapshot {snapshot_id} in a child process: {text[6:]}")
        code = os.waitstatus_to_exitcode(status)
        raise SnapshotChildError(f"the child process writing snapshot {snapshot_id} ended with status {code}")

    def kill(self) -> None:
        """Stop and reap a child nobody waits for (a no-op once :meth:`wait` has started)."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self._answer)
        self._remove_pieces()

    def _remove_pieces(self) -> None:
        # A child that finished removed its pieces; one killed (its helpers die with it) may have left them.
        for path in self._pieces:
            remove_gradually(path)


def start_child(file: SnapshotFileWriter, records: Records) -> ChildWriter:
    """Fork now; the child appends ``records`` to ``file`` and finishes it (footer, fsync). ``records`` may read the
    parent's live state: the child sees it as it is at this instant, whatever the parent changes afterwards (so
    a caller at a committed batch boundary need not copy anything). Given as a function, it is asked for
    ``1 + HELPERS`` runs, and the child's helpers encode all but the first at the same time (see :func:`_child`)."""
    read_end, write_end = os.pipe()
    # Every descriptor the child and its helpers use is opened here, before the fork: the child closes all the
    # others, whose Python objects still think they own them, and one of those closing "its" descriptor (at a
    # fork, or when freed) would close whatever the child had opened under that number since (seen: a helper's
    # answer pipe, closed under it).
    helpers = [_Helper(file.piece(n), *os.pipe()) for n in range(1, HELPERS + 1)] if callable(records) else []
    # The parent's collections after the fork would write to every object they scan, copying their pages while the
    # child lives (measured: a 590 ms full collection, and young ones of 140 ms, in a node writing its snapshot):
    # freeze them first, as CPython's documentation advises before a fork. (A cycle among them that becomes garbage
    # later is never collected: rare, and small.)
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        _child(file, records, write_end, helpers)
    os.close(write_end)
    for helper in helpers:
        helper.close()
    return ChildWriter(pid, read_end, file, [helper.piece.path for helper in helpers])


@dataclass
class _Helper:
    """What a helper writes: its piece of the snapshot, and its answer pipe."""

    piece: SnapshotFileWriter
    answer: int  # read end
    answer_write: int
    pid: int = 0  # once forked, until reaped

    def close(self) -> None:
        """Close this process's descriptors (the piece's file stays)."""
        self.piece.detach()
        for fd in (self.answer, self.answer_write):
            with contextlib.suppress(OSError):
                os.close(fd)


async def write_in_child(file: SnapshotFileWriter, records: Records, executor: Executor) -> tuple[int, int]:
    """:func:`start_child`, then :meth:`ChildWriter.wait`."""
    return await start_child(file, records).wait(executor)


def _read_answer(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, _ANSWER_LIMIT):
        out += chunk
    return out


def _child(file: SnapshotFileWriter, records: Records, answer: int, helpers: list[_Helper]) -> NoReturn:
    """Encoding is nearly all of a snapshot's CPU, and a Python process encodes on one core: a 2M-partition
    snapshot took 2.1 CPU s here alone, 3.0 s in a loaded scale run, where a process at nice 10 got a fifth of a
    core. So the records come in runs, and a helper forked by the child encodes each run but the first into a piece
    file of its own (no fsync: read back at once) while the child writes the first; the child then appends the
    pieces' batches, renumbered (:meth:`~quorum.log.snapshots.SnapshotFileWriter.append_piece`), and removes them."""
    status = 1
    try:
        try:
            _isolate(keep={file.fd, answer, *(fd for h in helpers for fd in (h.piece.fd, h.answer, h.answer_write))})
            gc.disable()  # nothing here lives past the exit; a collection would only copy pages
            os.nice(CHILD_NICE)
            runs = records(1 + len(helpers)) if callable(records) else [records]
            if not 1 <= len(runs) <= 1 + len(helpers):
                raise ValueError(f"{len(runs)} runs of records for {1 + len(helpers)} processes")
            for helper, run in zip(helpers, runs[1:], strict=False):
                _start_helper(helper, run)
            file.sync_bytes = SYNC_BYTES  # synced as it goes: the parent's log fsyncs never wait for 240 MiB at once
            count = _append_all(file, runs[0])
            for number, helper in enumerate(helpers, 1):
                if not helper.pid:
                    break  # fewer runs than helpers: the rest had nothing to do
                text = _read_answer(helper.answer).decode(errors="replace")
                _, code = os.waitpid(helper.pid, 0)
                helper.pid = 0  # reaped: its pid may be another process's from now on
                if code != 0 or text != "ok":
                    raise SnapshotChildError(f"piece {number}: {text or os.waitstatus_to_exitcode(code)}")
                count += file.append_piece(helper.piece.path)
            size = file.finish()
            os.write(answer, f"ok {size} {count}".encode())
            status = 0
        except BaseException as e:
            os.write(answer, f"error {type(e).__name__}: {e}".encode(errors="replace")[:_ANSWER_LIMIT])
    finally:
        for helper in helpers:
            if helper.pid:  # not reaped: still running after a failure
                with contextlib.suppress(OSError):
                    os.kill(helper.pid, signal.SIGKILL)
            remove_gradually(helper.piece.path)
        os._exit(status)


def _start_helper(helper: _Helper, records: Iterable[bytes]) -> None:
    piece, answer = helper.piece, helper.answer_write
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            try:
                _isolate(keep={piece.fd, answer})  # dies with the child that forked it
                _append_all(piece, records)
                piece.finish(sync=False)
                os.write(answer, b"ok")
                status = 0
            except BaseException as e:
                os.write(answer, f"{type(e).__name__}: {e}".encode(errors="replace")[:_ANSWER_LIMIT])
        finally:
            os._exit(status)
    helper.pid = pid
    os.close(answer)  # the helper's; the child reads to the end of the pipe once the helper exits
    piece.detach()  # the helper writes the file


def _append_all(file: SnapshotFileWriter, records: Iterable[bytes]) -> int:
    it = iter(records)
    count = 0
    while chunk := list(islice(it, CHUNK_RECORDS)):
        file.append(chunk)
        count += len(chunk)
    return count


def _isolate(keep: set[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    signal.set_wakeup_fd(-1)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: a child that outlives its parent finishes its file, which the next start removes
    if os.getppid() == 1:  # the parent died before prctl: nobody waits for this
        os._exit(1)
    low = 3
    for fd in sorted(keep):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)
