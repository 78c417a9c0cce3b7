"""quorum.huge_pages moves a node's dense anonymous memory into transparent huge pages, and leaves sparse memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from quorum.huge_pages import HUGE, MIN_RESIDENT, PAGE, collapsible_ranges, dense_runs

PER = HUGE // PAGE


def _thp_mode() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            return f.read().split("[")[1].split("]")[0]
    except (OSError, IndexError):
        return "none"


# Where THP is "always" the kernel gives CPython's arenas huge pages as they fault in: the periodic passes' premise
# (a heap growing in small pages) does not hold there.
needs_madvise_mode = pytest.mark.skipif(_thp_mode() == "always", reason="THP 'always': the heap grows in huge pages")


def _mapping(span: str, perms: str, inode: str, name: str, rss_kib: int, huge_kib: int) -> str:
    head = f"{span} {perms} 00000000 00:00 {inode} {name}".rstrip()
    fields = f"Size: 999 kB\nRss: {rss_kib} kB\nAnonymous: {rss_kib} kB\nAnonHugePages: {huge_kib} kB\nVmFlags: rd wr"
    return f"{head}\n{fields}"


def test_only_private_writable_anonymous_mappings_with_a_huge_page_in_small_pages_count() -> None:
    smaps = "\n".join(
        [
            _mapping("00400000-00600000", "r-xp", "1234", "/usr/bin/python3.11", 2048, 0),  # text
            _mapping("00800000-00c00000", "rw-p", "1234", "/usr/bin/python3.11", 4096, 0),  # a file's data
            _mapping("01000000-01a00000", "rw-p", "0", "[heap]", 10240, 0),
            _mapping("7f0000100000-7f0000700000", "rw-p", "0", "", 6144, 0),  # arenas: 1 MiB in and short
            _mapping("7f0001000000-7f0001400000", "rw-s", "77", "/dev/zero (deleted)", 4096, 0),  # shared
            _mapping("7f0002000000-7f0002100000", "rw-p", "0", "", 1024, 0),  # 1 MiB: no whole huge page
            _mapping("7f0003000000-7f0003400000", "---p", "0", "", 0, 0),  # a guard
            _mapping("7f0004000000-7f0004800000", "rw-p", "0", "", 8192, 6144),  # 2 MiB still small: again
            _mapping("7f0005000000-7f0005800000", "rw-p", "0", "", 8192, 7168),  # 1 MiB small: no
            _mapping("7ffc00000000-7ffc00400000", "rw-p", "0", "[stack]", 4096, 0),
        ]
    )
    assert collapsible_ranges(smaps) == [
        (0x01000000, 0x01A00000),
        (0x7F0000200000, 0x7F0000600000),
        (0x7F0004000000, 0x7F0004800000),
    ]


def test_dense_runs_join_neighbouring_dense_huge_pages_and_skip_sparse_ones() -> None:
    dense, barely, sparse = b"\x01" * PER, b"\x01" * MIN_RESIDENT + b"\x00" * (PER - MIN_RESIDENT), b"\x00" * PER
    short = b"\x01" * (MIN_RESIDENT - 1) + b"\x00" * (PER - MIN_RESIDENT + 1)
    start = 0x7F0000000000
    vector = dense + barely + sparse + short + dense + dense
    assert dense_runs(start, vector) == [(start, 2 * HUGE), (start + 4 * HUGE, 2 * HUGE)]
    assert dense_runs(start, sparse + short) == []
    assert dense_runs(start, b"") == []


_CHILD = """
import json, mmap
from quorum.huge_pages import Unsupported, collapse_dense_memory

def rollup():
    with open("/proc/self/smaps_rollup") as f:
        return {l.split(":")[0]: int(l.split()[1]) << 10 for l in f if l.split(":")[0] in ("Rss", "AnonHugePages")}

heap = [(i, str(i)) for i in range(1_000_000)]  # ~100 MiB of small objects in CPython's own arenas
sparse = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for offset in range(0, len(sparse), 2 << 20):
    sparse[offset] = 1  # one small page in each huge page: collapsing it would make 2 MiB resident
before = rollup()
try:
    done = collapse_dense_memory()
except Unsupported as e:
    print(json.dumps({"unsupported": str(e)}))
else:
    print(json.dumps({"before": before, "after": rollup(), "asked": done.asked_bytes, "refused": done.refused}))
"""


def test_a_dense_heap_goes_into_huge_pages_and_a_sparse_mapping_does_not_grow() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    if "unsupported" in got:
        pytest.skip(f"no huge page collapse on this kernel: {got['unsupported']}")
    before, after = got["before"], got["after"]
    huge = after["AnonHugePages"] - before["AnonHugePages"]
    assert after["AnonHugePages"] >= 64 << 20, got  # most of the ~100 MiB heap
    assert got["asked"] >= huge - HUGE, got
    # The sparse mapping's 32 huge pages, if collapsed, would add 62 MiB; the dense ones add at most 1/8 of theirs.
    assert after["Rss"] - before["Rss"] <= huge // 7 + (4 << 20), got


_PERIODIC = """
import asyncio, json, os, time
from structlog.testing import capture_logs
from quorum.huge_pages import collapse_periodically

async def passes(logs, n):
    for _ in range(600):  # a pass may take a while on a busy machine (the kernel compacts for huge pages)
        if sum(e["event"] == "huge_pages_collapsed" for e in logs) >= n or len(logs) > n:
            return
        await asyncio.sleep(0.05)

async def main():
    with capture_logs() as logs:
        task = asyncio.ensure_future(collapse_periodically(interval_s=0.05, growth=32 << 20, settled_rate=160 << 20))
        await asyncio.sleep(0.3)
        quiet = len(logs)  # no growth yet: no pass
        heap = []
        for step in range(8):  # growing by over a quarter of the threshold in every interval: no pass yet
            heap += [[i, str(i)] for i in range(step * 125_000, (step + 1) * 125_000)]  # ~15 MiB
            await asyncio.sleep(0.001)
        growing = len(logs)
        await passes(logs, 1)
        child = os.fork()  # as a snapshot's writer: it shares every page until it exits
        if child == 0:
            time.sleep(1.0)
            os._exit(0)
        for item in heap:
            item[0] += 1  # the parent writes: each shared huge page is split, its written pages copied
        await asyncio.sleep(0.5)
        while_child = len(logs)
        os.waitpid(child, 0)
        await passes(logs, 2)
        await asyncio.sleep(0.3)  # a few more intervals: nothing grew, so no third pass
        task.cancel()
    report = {"quiet": quiet, "growing": growing, "while_child": while_child, "events": [dict(e) for e in logs]}
    print(json.dumps(report))

asyncio.run(main())
"""


@needs_madvise_mode
def test_a_node_collapses_once_growth_settled_and_again_after_a_fork_split_its_huge_pages() -> None:
    out = subprocess.run([sys.executable, "-c", _PERIODIC], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    events = got["events"]
    if events and events[0]["event"] == "huge_pages_unavailable":
        pytest.skip(f"no huge page collapse on this kernel: {events[0]['reason']}")
    assert got["quiet"] == 0 and got["growing"] == 0, got  # nothing grown; then not settled
    assert got["while_child"] == 1, got  # the growth's pass, none while the child shared the pages
    collapsed = [e for e in events if e["event"] == "huge_pages_collapsed"]
    assert len(collapsed) == 2, got  # then the split pages once, and nothing after
    assert collapsed[0]["asked_mib"] >= 64 and collapsed[1]["asked_mib"] >= 32, got


_PRELOADED = """
import asyncio, json
from structlog.testing import capture_logs
from quorum.huge_pages import collapse_periodically

async def main():
    heap = [[i, str(i)] for i in range(1_000_000)]  # as a snapshot loaded before the node's tasks start
    with capture_logs() as logs:
        task = asyncio.ensure_future(collapse_periodically(interval_s=0.05, growth=32 << 20, settled_rate=160 << 20))
        for _ in range(600):
            if logs:
                break
            await asyncio.sleep(0.05)
        task.cancel()
    print(json.dumps({"events": [dict(e) for e in logs], "kept": len(heap)}))

asyncio.run(main())
"""


@needs_madvise_mode
def test_what_a_node_started_with_is_collapsed_too() -> None:
    out = subprocess.run([sys.executable, "-c", _PRELOADED], capture_output=True, text=True, timeout=120, check=True)
    events = json.loads(out.stdout)["events"]
    if events and events[0]["event"] == "huge_pages_unavailable":
        pytest.skip(f"no huge page collapse on this kernel: {events[0]['reason']}")
    assert events and events[0]["event"] == "huge_pages_collapsed" and events[0]["asked_mib"] >= 64, events
