"""Give freed heap memory back to the operating system: after state was replaced in bulk, and periodically.

A snapshot load (a restart, a standby or broker behind the leader's log start) replaces the whole metadata image:
the old one is freed, but glibc keeps freed chunks in its heap and the process's RSS stays at the peak of both
images. ``malloc_trim(0)`` returns the free pages. In process at 300k partitions, a snapshot install left a
broker's RSS +107 B per partition higher; +31 after the trim, which took 2.4 ms. Python's own small-object arenas
are not glibc's heap and are freed by Python when empty; this is for the rest (dict and set tables, large values).

A running node frees large buffers all the time (fetch answers, FetchSnapshot chunks, protobuf arenas, snapshot
captures), and glibc raises its mmap threshold after freeing a large mapped block, so later ones of that size come
from the heap and stay with the process once freed. On live brokers at 300k partitions after a creation,
``malloc_trim(0)`` gave back 22-34 MiB each (75-115 B per partition) and 11-15 MiB per controller:
:func:`release_periodically` runs it every :data:`RELEASE_INTERVAL_S`, as Dask's workers trim theirs.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import gc
import os
import sys
import time

import structlog

log = structlog.get_logger("quorum.memory")

# Set by a process that freezes the survivors of its full collections (pykraft/gc_pauses.py): see settle_bulk_load.
freezes_long_lived = False

RELEASE_INTERVAL_S = 10.0  # how often a running node gives free pages back (a few ms each: see release_periodically)
REPORT_BYTES = 64 << 20  # a release at least this large is logged


@functools.cache
def libc() -> ctypes.CDLL | None:
    """Linux's C library, for calls the os module lacks (errno kept for ``ctypes.get_errno``); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None


@functools.cache
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    return getattr(libc(), "malloc_trim", None)  # glibc only: musl and others have none


def release_freed_memory() -> bool:
    """Return the heap's free pages to the OS (glibc's malloc_trim). False where there is no such call."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def release_periodically(interval_s: float = RELEASE_INTERVAL_S) -> None:
    """Every ``interval_s``, :func:`release_freed_memory`; a release of :data:`REPORT_BYTES` or more is logged
    (``memory_released``). Returns at once where there is nothing to call."""
    if _malloc_trim() is None:
        return
    while True:
        await asyncio.sleep(interval_s)
        before = _rss()
        started = time.perf_counter()
        release_freed_memory()
        released = before - _rss()
        if released >= REPORT_BYTES:
            log.info(
                "memory_released",
                mib=round(released / 2**20, 1),
                ms=round((time.perf_counter() - started) * 1000, 1),
            )


def settle_bulk_load() -> None:
    """After state was loaded in bulk with the collector disabled (every new object in its youngest generation):
    where the process freezes long-lived objects, freeze them now, without scanning them (a full collection of 2M
    partitions' objects took 105 ms, measured here); else one full collection moves them to the oldest generation
    at once, rather than three later collections walking them one generation at a time."""
    if freezes_long_lived:
        gc.freeze()
    else:
        gc.collect()
