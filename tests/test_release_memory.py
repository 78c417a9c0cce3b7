"""quorum.memory.release_freed_memory gives glibc's freed heap pages back: without it, freeing leaves the RSS."""

from __future__ import annotations

import gc

import pytest

from quorum.memory import _malloc_trim, release_freed_memory


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
