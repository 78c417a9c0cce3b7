"""Notice when this process's event loop ran late, and say whether it was busy or kept from running.

Everything a node does runs on one event loop: a commit waits for every callback ahead of it. At 2M partitions a
client's commits waited up to 250 ms at a time with nothing in any node's log to say why. A timer now runs every
:data:`INTERVAL_S`; when it runs :data:`STALL_S` or more after it was due, ``loop_stalled`` is logged with

- ``late_ms``: how long the loop could not run it;
- ``cpu_ms``: the CPU the loop's thread used since the timer's previous run. Close to ``late_ms`` (plus the
  interval), the loop was busy: one long callback, or a collection (``gc_ms``, the collector's pauses in that
  time, also logged as ``gc_pause``). Far below it, the thread did not run;
- ``wait_ms``: of the time it did not run, how long it was ready but waited for a core (the kernel's run-queue
  delay, ``/proc/thread-self/schedstat``): the machine was saturated, or the process is niced. The rest it slept:
  in a blocking system call made on the loop, in a page fault, or while the machine's own CPU was taken from it
  (a virtual machine's steal time, which no thread sees);
- ``gc_ms``: the time the garbage collector stood still meanwhile.

Prometheus: ``pykraft_loop_stalls``, ``pykraft_loop_stall_seconds`` (both counters) and
``pykraft_loop_stall_max_seconds``. The timer runs 20 times a second: ~2 ms of CPU a second in an
otherwise idle process here (every 20 ms, as first written, cost twice that).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable

import structlog

from pykraft import gc_pauses

log = structlog.get_logger("pykraft.loop")

INTERVAL_S = 0.05
STALL_S = 0.05
SCHEDSTAT = "/proc/thread-self/schedstat"


class RunQueueWait:
    """Seconds the calling thread has spent ready to run but waiting for a core, from the kernel's schedstat of the
    thread that opened it (read with one ``pread``, ~1 us); ``None`` where the kernel does not keep it."""

    def __init__(self, path: str = SCHEDSTAT) -> None:
        try:
            self._fd: int | None = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self._fd = None

    def __call__(self) -> float | None:
        if self._fd is None:
            return None
        # "<on cpu ns> <waiting on a run queue ns> <timeslices>"
        return int(os.pread(self._fd, 128, 0).split()[1]) / 1e9

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class LoopStalls:
    """Counts and logs the times the loop ran a timer :data:`STALL_S` or more late."""

    def __init__(
        self,
        interval_s: float = INTERVAL_S,
        stall_s: float = STALL_S,
        cpu: Callable[[], float] = time.thread_time,
        gc_seconds: Callable[[], float] | None = None,
        waited: Callable[[], float | None] | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.stall_s = stall_s
        self._cpu = cpu
        self._gc_seconds = gc_seconds or gc_pauses.total_seconds
        self._waited_given = waited
        self._waited_own: RunQueueWait | None = None  # opened on the loop's thread by start()
        self.count = 0
        self.seconds = 0.0
        self.longest = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._cpu_at = 0.0
        self._gc_at = 0.0
        self._waited_at: float | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start watching ``loop`` (from within it, so that the run-queue wait read is its thread's); again on
        another loop restarts it there."""
        self.stop()
        self._loop = loop
        if self._waited_given is None:
            self._waited_own = RunQueueWait()
        self._schedule(loop.time())

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._waited_own is not None:
            self._waited_own.close()
            self._waited_own = None

    def _waited(self) -> float | None:
        reader = self._waited_given or self._waited_own
        return reader() if reader is not None else None

    def _schedule(self, now: float) -> None:
        assert self._loop is not None
        self._due = now + self.interval_s
        self._cpu_at, self._gc_at, self._waited_at = self._cpu(), self._gc_seconds(), self._waited()
        self._handle = self._loop.call_at(self._due, self._tick)

    def _tick(self) -> None:
        assert self._loop is not None
        now = self._loop.time()
        late = now - self._due
        if late >= self.stall_s:
            self.count += 1
            self.seconds += late
            self.longest = max(self.longest, late)
            waited = self._waited()
            log.warning(
                "loop_stalled",
                late_ms=round(late * 1000, 1),
                cpu_ms=round((self._cpu() - self._cpu_at) * 1000, 1),
                wait_ms=None
                if waited is None or self._waited_at is None
                else round((waited - self._waited_at) * 1000, 1),
                gc_ms=round((self._gc_seconds() - self._gc_at) * 1000, 1),
            )
        self._schedule(now)


STALLS = LoopStalls()


def watch() -> LoopStalls:
    """Watch the running loop (the process's one :data:`STALLS`)."""
    STALLS.start(asyncio.get_running_loop())
    return STALLS
