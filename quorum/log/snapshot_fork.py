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
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import os
import signal
from collections.abc import Iterable
from concurrent.futures import Executor
from itertools import islice
from typing import NoReturn

from quorum.log.snapshots import SYNC_BYTES, SnapshotFileWriter

CHUNK_RECORDS = 10_000
CHILD_NICE = 10  # background work: the node's own loop (Raft, requests) comes first when cores are short
PR_SET_PDEATHSIG = 1
_ANSWER_LIMIT = 4096


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

    def __init__(self, pid: int, answer: int, file: SnapshotFileWriter) -> None:
        self.pid = pid
        self._answer = answer  # the read end of its answer pipe
        self._file = file
        self._done = False
        self.cpu_seconds: float | None = None  # the child's user + system CPU, once it has been reaped by wait()

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
            self.cpu_seconds = usage.ru_utime + usage.ru_stime
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


def start_child(file: SnapshotFileWriter, records: Iterable[bytes]) -> ChildWriter:
    """Fork now; the child appends ``records`` to ``file`` and finishes it (footer, fsync). ``records`` may read the
    parent's live state: the child sees it as it is at this instant, whatever the parent changes afterwards (so
    a caller at a committed batch boundary need not copy anything)."""
    read_end, write_end = os.pipe()
    # The parent's collections after the fork would write to every object they scan, copying their pages while the
    # child lives (measured: a 590 ms full collection, and young ones of 140 ms, in a node writing its snapshot):
    # freeze them first, as CPython's documentation advises before a fork. (A cycle among them that becomes garbage
    # later is never collected: rare, and small.)
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        _child(file, records, write_end)
    os.close(write_end)
    return ChildWriter(pid, read_end, file)


async def write_in_child(file: SnapshotFileWriter, records: Iterable[bytes], executor: Executor) -> tuple[int, int]:
    """:func:`start_child`, then :meth:`ChildWriter.wait`."""
    return await start_child(file, records).wait(executor)


def _read_answer(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, _ANSWER_LIMIT):
        out += chunk
    return out


def _child(file: SnapshotFileWriter, records: Iterable[bytes], answer: int) -> NoReturn:
    status = 1
    try:
        try:
            _isolate(keep={file.fd, answer})
            gc.disable()  # nothing here lives past the exit; a collection would only copy pages
            os.nice(CHILD_NICE)
            file.sync_bytes = SYNC_BYTES  # synced as it goes: the parent's log fsyncs never wait for 240 MiB at once
            it = iter(records)
            count = 0
            while chunk := list(islice(it, CHUNK_RECORDS)):
                file.append(chunk)
                count += len(chunk)
            size = file.finish()
            os.write(answer, f"ok {size} {count}".encode())
            status = 0
        except BaseException as e:
            os.write(answer, f"error {type(e).__name__}: {e}".encode(errors="replace")[:_ANSWER_LIMIT])
    finally:
        os._exit(status)


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
