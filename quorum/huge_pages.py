"""Keep a node's dense heap in transparent huge pages, so that the peers of a crashed node learn of it sooner.

A process killed with SIGKILL closes its sockets only after the kernel has freed its memory (``do_exit`` releases
the address space before the files), and the followers of a killed leader learn of the crash from those sockets.
Freeing costs ~70 ns per 4 KiB page. Measured here (a process holding 300 MiB of small Python objects and one TCP
connection, SIGKILLed; the time until its peer read the end): 35-42 ms in 4 KiB pages, 10-14 ms with ~85% of it in
2 MiB pages. A controller holds ~300 MiB at two million partitions: without huge pages, that is most of what a
kill -9 failover there waits for beyond an empty cluster's.

Where THP is ``madvise`` (most distributions' default) CPython's heap never gets huge pages: its object allocator
maps 1 MiB arenas itself and never advises them. ``PYTHONMALLOC=malloc`` with glibc's ``glibc.malloc.hugetlb=1``
would put every allocation in them, but cost 15-20% more CPU creating topics here. Instead, after the process's
anonymous memory in small pages has grown by :data:`GROWTH_BYTES` and settled, a thread asks the kernel to collapse
the dense 2 MiB ranges of it into huge pages (``MADV_COLLAPSE``, Linux 6.1+; the contents do not change). Sparse
ranges (thread stacks, arenas barely used) are left as they are: the resident size grows by at most 1/7 of what is
collapsed. Where the kernel cannot (older, THP ``never``, not Linux), the node says so once and runs as before.
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import functools
import os
import time
from dataclasses import dataclass

import structlog

from quorum import memory

log = structlog.get_logger("quorum.huge_pages")

HUGE = 2 << 20  # x86-64's and arm64's (4 KiB granule) PMD size
PAGE = 4096
MIN_RESIDENT = 448  # of a huge page's 512 small pages: denser ranges are collapsed (RSS grows <= 1/7 of them)
GROWTH_BYTES = 64 << 20  # anonymous memory in small pages grown by this much since the last pass: collapse
SETTLED_BYTES_PER_S = 2 << 20  # ... once it grows slower than this (a bulk load is over)
CHECK_INTERVAL_S = 2.0  # a restarted node's loaded snapshot is collapsed a few seconds after it starts
MADV_COLLAPSE = 25


class Unsupported(Exception):
    """The kernel cannot collapse memory into huge pages here."""


@dataclass(frozen=True)
class Collapsed:
    asked_bytes: int  # the dense ranges handed to the kernel
    refused: int  # ranges it could not collapse now (no free huge page: EAGAIN, ENOMEM); retried next time
    seconds: float


@functools.cache
def _libc() -> ctypes.CDLL | None:
    libc = memory.libc()
    if libc is None or os.sysconf("SC_PAGE_SIZE") != PAGE:
        return None
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    return libc


def collapsible_ranges(smaps: str) -> list[tuple[int, int]]:
    """From ``/proc/self/smaps`` text: the 2 MiB-aligned parts (start, end) of the private writable anonymous
    mappings (the heap, CPython's arenas, large allocations; not files, shared memory or the main stack) that hold at
    least a huge page's worth of resident memory in small pages."""
    ranges = []
    span: tuple[int, int] | None = None
    rss = 0
    for line in smaps.splitlines():
        fields = line.split(maxsplit=5)
        if fields and "-" in fields[0] and len(fields) >= 5:  # a mapping's first line: range perms offset dev inode
            span = None
            if fields[1] == "rw-p" and fields[4] == "0" and (len(fields) < 6 or fields[5].strip() in ("", "[heap]")):
                lo, hi = (int(x, 16) for x in fields[0].split("-"))
                lo, hi = -(-lo // HUGE) * HUGE, hi // HUGE * HUGE
                span = (lo, hi) if hi > lo else None
        elif span is not None and fields[0] == "Rss:":
            rss = int(fields[1]) << 10
        elif span is not None and fields[0] == "AnonHugePages:":
            if rss - (int(fields[1]) << 10) >= HUGE:
                ranges.append(span)
            span = None
    return ranges


def dense_runs(start: int, residency: bytes, min_resident: int = MIN_RESIDENT) -> list[tuple[int, int]]:
    """Runs (address, length) of consecutive 2 MiB ranges, from ``start`` (aligned), that have at least
    ``min_resident`` of their small pages resident: ``residency`` is ``mincore``'s vector (bit 0 of a byte per 4 KiB
    page) for whole huge pages."""
    per = HUGE // PAGE
    runs: list[tuple[int, int]] = []
    for i in range(len(residency) // per):
        chunk = residency[i * per : (i + 1) * per]
        if per - chunk.count(0) < min_resident:  # the kernel sets only bit 0, so count the zero bytes
            continue
        address = start + i * HUGE
        if runs and runs[-1][0] + runs[-1][1] == address:
            runs[-1] = (runs[-1][0], runs[-1][1] + HUGE)
        else:
            runs.append((address, HUGE))
    return runs


def collapse_dense_memory() -> Collapsed:
    """Ask the kernel to back every dense 2 MiB range of this process's anonymous memory with a huge page. Blocks
    for as long as the kernel copies (~0.4-3 ms per MiB here): run it off the event loop. Raises
    :class:`Unsupported` where the kernel cannot."""
    libc = _libc()
    if libc is None:
        raise Unsupported("not Linux with 4 KiB pages and a C library to call")
    started = time.perf_counter()
    with open("/proc/self/smaps") as f:
        ranges = collapsible_ranges(f.read())
    asked = refused = 0
    for lo, hi in ranges:
        pages = (hi - lo) // PAGE
        vector = (ctypes.c_ubyte * pages)()
        if libc.mincore(lo, hi - lo, vector) != 0:
            continue  # unmapped since /proc/self/smaps was read (an arena freed)
        for address, length in dense_runs(lo, bytes(vector)):
            if libc.madvise(address, length, MADV_COLLAPSE) == 0:
                asked += length
                continue
            error = ctypes.get_errno()
            if error == errno.EINVAL and not asked and not refused:
                raise Unsupported(f"madvise(MADV_COLLAPSE): {os.strerror(error)} (Linux 6.1+ with THP not 'never')")
            refused += 1  # EAGAIN/ENOMEM (no huge page free now), or the range went away meanwhile
    return Collapsed(asked, refused, time.perf_counter() - started)


def small_page_bytes() -> int:
    """This process's resident anonymous memory in small pages (``/proc/self/smaps_rollup``)."""
    values = {}
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("Anonymous", "AnonHugePages"):
                values[name] = int(rest.split()[0]) << 10
    return values.get("Anonymous", 0) - values.get("AnonHugePages", 0)


def has_children() -> bool:
    """Whether a child forked by this process lives (a snapshot's writer): it shares our pages until it exits."""
    try:
        with open(f"/proc/self/task/{os.getpid()}/children") as f:
            return bool(f.read().strip())
    except OSError:
        return False


async def collapse_periodically(
    interval_s: float = CHECK_INTERVAL_S, growth: int = GROWTH_BYTES, settled_rate: float = SETTLED_BYTES_PER_S
) -> None:
    """Every ``interval_s``: once the anonymous memory in small pages has grown by ``growth`` above its level after
    the last pass (or its lowest since), and then settled (grew slower than ``settled_rate`` bytes per second in the
    last interval), collapse the dense ranges from a thread (logged: ``huge_pages_collapsed``). That is new memory,
    and huge pages split since: written after a fork (a snapshot's child: the parent's first write to a shared huge
    page splits it), or partly given back (``malloc_trim``, an arena freed). Waiting for the memory to settle makes a
    bulk load (topics created by the hundred thousand) one pass at its end rather than one per ``growth``: a pass
    costs the kernel ~3 ms of CPU per MiB here. Not while a forked child lives: collapsing a page shared with it
    copies the page, and both processes would hold it until the child exits. The level is read from a thread too
    (reading it walks the page tables: ~10 ms at 460 MiB in small pages, ~1 ms in huge ones). Returns where the
    kernel cannot."""
    if _libc() is None:
        log.info("huge_pages_unavailable", reason="not Linux with 4 KiB pages")
        return
    level, previous = 0, await asyncio.to_thread(small_page_bytes)  # what the node started with counts as grown
    while True:
        await asyncio.sleep(interval_s)
        now = await asyncio.to_thread(small_page_bytes)
        settled, previous = now - previous < settled_rate * interval_s, now
        if now - level < growth or not settled or has_children():
            level = min(level, now)
            continue
        try:
            done = await asyncio.to_thread(collapse_dense_memory)
        except Unsupported as e:
            log.info("huge_pages_unavailable", reason=str(e))
            return
        level = previous = await asyncio.to_thread(small_page_bytes)
        log.info(
            "huge_pages_collapsed",
            asked_mib=round(done.asked_bytes / 2**20, 1),
            refused=done.refused,
            small_pages_mib=round(level / 2**20, 1),
            ms=round(done.seconds * 1000, 1),
        )
