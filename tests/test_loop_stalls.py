"""The event loop's stall monitor: a loop held by a callback is logged as busy (its CPU), a loop whose thread did
not run as idle, a thread kept from a core with the time it waited for one, short delays are not logged, and the
counts reach Prometheus."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable

import pytest
import structlog
from prometheus_client import CollectorRegistry

from pykraft.loop_stalls import LoopStalls, RunQueueWait
from pykraft.metrics import LoopStallCollector


async def settle(stalls: LoopStalls) -> None:
    """Let the monitor run a few times undisturbed."""
    await asyncio.sleep(stalls.interval_s * 3)


@contextlib.asynccontextmanager
async def watching(
    gc_seconds: Callable[[], float] = lambda: 0.0, waited: Callable[[], float | None] | None = None
) -> AsyncIterator[LoopStalls]:
    """A monitor (10 ms ticks, 50 ms stalls) on the running loop, settled before the body and stopped after it."""
    stalls = LoopStalls(interval_s=0.01, stall_s=0.05, gc_seconds=gc_seconds, waited=waited)
    stalls.start(asyncio.get_running_loop())
    try:
        await settle(stalls)
        yield stalls
    finally:
        stalls.stop()


@pytest.mark.asyncio
async def test_a_busy_callback_is_logged_with_its_cpu() -> None:
    async with watching() as stalls:
        with structlog.testing.capture_logs() as logs:
            end = time.thread_time() + 0.15
            while time.thread_time() < end:  # holds the loop for 150 ms of CPU
                pass
            await settle(stalls)
    events = [e for e in logs if e["event"] == "loop_stalled"]
    assert len(events) == 1 and stalls.count == 1
    assert 140 <= events[0]["late_ms"] <= 10_000
    assert events[0]["cpu_ms"] >= 150  # busy: the thread ran all the time it held the loop
    assert stalls.longest == pytest.approx(events[0]["late_ms"] / 1000, abs=0.001)


@pytest.mark.asyncio
async def test_a_thread_that_did_not_run_is_logged_with_little_cpu() -> None:
    async with watching() as stalls:
        with structlog.testing.capture_logs() as logs:
            time.sleep(0.15)  # a blocking call on the loop: the thread waits, uses no CPU
            await settle(stalls)
    events = [e for e in logs if e["event"] == "loop_stalled"]
    assert len(events) == 1
    assert events[0]["late_ms"] >= 130 and events[0]["cpu_ms"] < 50
    assert events[0]["wait_ms"] is None or events[0]["wait_ms"] < 50  # it slept: it was not waiting for a core


@pytest.mark.asyncio
async def test_the_run_queue_wait_is_the_difference_over_the_stall() -> None:
    waited = [1.0]
    async with watching(waited=lambda: waited[0]) as stalls:
        with structlog.testing.capture_logs() as logs:
            waited[0] += 0.09  # the kernel's count of the thread's time ready but not running
            time.sleep(0.1)
            await settle(stalls)
    assert [e["wait_ms"] for e in logs if e["event"] == "loop_stalled"] == [90.0]


# A loop niced to 10 sharing its one core with a spinner at nice 0 runs a callback of 20 ms of CPU: the callback takes
# several times that, the thread ready but waiting for the core. Prints the stalls it logged.
STARVED = """
import asyncio, json, os, subprocess, sys, time
import structlog
from pykraft.loop_stalls import LoopStalls
core = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {core})
spin = "import time\\nend = time.monotonic() + 10\\nwhile time.monotonic() < end: pass"
spinner = subprocess.Popen([sys.executable, "-c", spin])
os.nice(10)
async def main():
    stalls = LoopStalls(interval_s=0.01, stall_s=0.05)
    stalls.start(asyncio.get_running_loop())
    await asyncio.sleep(0.2)
    end = time.thread_time() + 0.02
    while time.thread_time() < end:
        pass
    await asyncio.sleep(0.2)
    stalls.stop()
try:
    with structlog.testing.capture_logs() as logs:
        asyncio.run(main())
finally:
    spinner.kill()
print(json.dumps([e for e in logs if e["event"] == "loop_stalled"]))
"""


@pytest.mark.skipif(RunQueueWait()() is None, reason="the kernel keeps no run-queue delay (schedstat)")
def test_a_thread_kept_from_its_core_is_logged_with_its_wait() -> None:
    out = subprocess.run([sys.executable, "-c", STARVED], capture_output=True, text=True, timeout=60, check=True)
    events = json.loads(out.stdout)
    assert events, "a niced loop sharing its core with a spinner never ran late"
    late = sum(e["late_ms"] for e in events)
    assert sum(e["wait_ms"] for e in events) >= 0.5 * late, events  # most of it ready, waiting for the core
    assert sum(e["cpu_ms"] for e in events) < 0.5 * late, events


def test_the_run_queue_wait_is_the_calling_threads() -> None:
    reader = RunQueueWait()
    try:
        first = reader()
        if first is None:
            pytest.skip("the kernel keeps no run-queue delay (schedstat)")
        assert first >= 0 and reader() >= first
    finally:
        reader.close()
    assert reader() is None  # closed
    assert RunQueueWait(os.devnull + "-missing")() is None


@pytest.mark.asyncio
async def test_short_delays_are_not_stalls_and_the_collector_time_is_named() -> None:
    gc_s = [0.0]
    async with watching(lambda: gc_s[0]) as stalls:
        with structlog.testing.capture_logs() as logs:
            time.sleep(0.01)
            await settle(stalls)
            assert not logs and stalls.count == 0
            gc_s[0] += 0.07  # a collection's pause, as the gc hook counts it
            time.sleep(0.08)
            await settle(stalls)
    events = [e for e in logs if e["event"] == "loop_stalled"]
    assert len(events) == 1 and events[0]["gc_ms"] == 70.0


@pytest.mark.asyncio
async def test_counts_reach_prometheus() -> None:
    async with watching() as stalls:
        time.sleep(0.1)
        await settle(stalls)
    registry = CollectorRegistry()
    registry.register(LoopStallCollector(stalls))
    assert registry.get_sample_value("pykraft_loop_stalls_total") == 1
    assert registry.get_sample_value("pykraft_loop_stall_seconds_total") >= 0.08
    assert registry.get_sample_value("pykraft_loop_stall_max_seconds") >= 0.08
