"""quorum.memory.release_freed_memory gives glibc's freed heap pages back: without it, freeing leaves the RSS."""

from __future__ import annotations

import asyncio
import gc

import pytest
from structlog.testing import capture_logs

from quorum.memory import _malloc_trim, release_freed_memory, release_periodically


def rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(_malloc_trim() is None, reason="no glibc malloc_trim here")
def test_freed_heap_pages_go_back_to_the_os() -> None:
    blocks = [bytes(2000) + bytes([i % 256]) for i in range(40_000)]  # ~80 MB from malloc (over pymalloc's 512 B)
    keep = blocks[-1]  # the last block stays: the heap's top is not free, so free() alone returns nothing
    before = rss()
    del blocks
    gc.collect()
    freed = rss()
    assert release_freed_memory()
    after = rss()
    assert keep
    assert freed - after > 40 << 20, (before >> 20, freed >> 20, after >> 20)


@pytest.mark.skipif(_malloc_trim() is None, reason="no glibc malloc_trim here")
async def test_a_running_node_gives_back_what_a_burst_freed() -> None:
    blocks = [bytes(2000) + bytes([i % 256]) for i in range(40_000)]
    keep = blocks[-1]
    del blocks
    freed = rss()
    with capture_logs() as logs:
        task = asyncio.ensure_future(release_periodically(interval_s=0.01))
        await asyncio.sleep(0.2)
        task.cancel()
    assert keep and freed - rss() > 40 << 20
    released = [e for e in logs if e["event"] == "memory_released"]
    assert released and released[0]["mib"] > 40
