"""The event loop's stall monitor: a loop held by a callback is logged as busy (its CPU), a loop whose thread did
not run as idle, short delays are not logged, and the counts reach Prometheus."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest
import structlog
from prometheus_client import CollectorRegistry

from pykraft.loop_stalls import LoopStalls
from pykraft.metrics import LoopStallCollector


async def settle(stalls: LoopStalls) -> None:
    """Let the monitor run a few times undisturbed."""
    await asyncio.sleep(stalls.interval_s * 3)


@contextlib.asynccontextmanager
async def watching(gc_seconds: Callable[[], float] = lambda: 0.0) -> AsyncIterator[LoopStalls]:
    """A monitor (10 ms ticks, 50 ms stalls) on the running loop, settled before the body and stopped after it."""
    stalls = LoopStalls(interval_s=0.01, stall_s=0.05, gc_seconds=gc_seconds)
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
