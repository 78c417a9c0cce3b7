"""Give freed heap memory back to the operating system after state was replaced in bulk.

A snapshot load (a restart, a standby or broker behind the leader's log start) replaces the whole metadata image:
the old one is freed, but glibc keeps freed chunks in its heap and the process's RSS stays at the peak of both
images. ``malloc_trim(0)`` returns the free pages. In process at 300k partitions, a snapshot install left a
broker's RSS +107 B per partition higher; +31 after the trim, which took 2.4 ms. Python's own small-object arenas
are not glibc's heap and are freed by Python when empty; this is for the rest (dict and set tables, large values).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys


@functools.cache
def _malloc_trim() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim  # glibc only: musl and others have none
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> bool:
    """Return the heap's free pages to the OS (glibc's malloc_trim). False where there is no such call."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
