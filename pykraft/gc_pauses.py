"""Keep the garbage collector's stop-the-world pauses short in a long-running node.

CPython's full (generation 2) collection scans every tracked object. A controller holding tens of thousands of
topics has a million of them: measured here, a full collection of ~500k objects paused the loop for 0.1–0.4 s —
longer than a Raft fetch round and heading for the election timeout as the state grows. After each full
collection the survivors are frozen (``gc.freeze``): they are long-lived state, and later full collections scan
only what was allocated since. The price: a reference cycle among frozen objects that later becomes garbage is
never collected. The controller's state (tuples, NamedTuples, dicts of them) holds no cycles, and
reference counting still frees everything acyclic, frozen or not.

Pauses longer than ``SLOW_PAUSE_S`` are logged, so an operator can see them.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import structlog

from quorum import memory

log = structlog.get_logger("pykraft.gc")

SLOW_PAUSE_S = 0.05


class GcPauses:
    """Installed once per process: counts pauses, freezes survivors of full collections, logs slow pauses."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.pauses = [0, 0, 0]  # collections per generation
        self.seconds = [0.0, 0.0, 0.0]  # total pause per generation
        self.longest = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
            return
        if self.started is None:
            return
        pause = time.perf_counter() - self.started
        self.started = None
        generation = info["generation"]
        self.pauses[generation] += 1
        self.seconds[generation] += pause
        self.longest = max(self.longest, pause)
        if generation == 2:
            gc.freeze()
        if pause >= SLOW_PAUSE_S:
            log.warning(
                "gc_pause",
                generation=generation,
                pause_ms=round(pause * 1000, 1),
                collected=info["collected"],
            )  # not gc.get_freeze_count(): it walks every frozen object (~0.1 s at 2M), costlier than the pause


_installed: GcPauses | None = None


def install() -> GcPauses:
    """Idempotent: one callback per process."""
    global _installed
    if _installed is None:
        _installed = GcPauses()
        gc.callbacks.append(_installed)
        memory.freezes_long_lived = True  # a snapshot load freezes what it loaded, as a full collection would
    return _installed


def total_seconds() -> float:
    """The pauses counted so far, summed (0 where nothing is installed)."""
    return sum(_installed.seconds) if _installed is not None else 0.0


def uninstall() -> None:
    """Undo :func:`install` (a process that ran a node in process and goes on without it: the tests)."""
    global _installed
    if _installed is not None:
        if _installed in gc.callbacks:
            gc.callbacks.remove(_installed)
        _installed = None
        memory.freezes_long_lived = False
