"""A broker's clean-shutdown snapshot (broker.observer.MetadataObserver.snapshot_before_close): it waits for its
image to reach the leader's commits while the image keeps moving, not a fixed time, and gives up waiting on an image
that stopped."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from broker import observer
from broker.observer import MetadataObserver
from quorum.log.snapshots import SnapshotId

TARGET = 1000  # the leader's high watermark: caught up once the image's last offset is 999


class FakeObserver:
    """What snapshot_before_close reads of an observer: an image whose offset a test moves, its snapshot
    counters, and the leader's high watermark."""

    broker_id = 101
    high_watermark = TARGET

    def __init__(self) -> None:
        self.offset = 0
        self.forced: list[tuple[int, dict[str, Any]]] = []  # (the image's offset then, the call's keywords)
        snapshots = SimpleNamespace(bytes_since=10 << 20)
        self.image = SimpleNamespace(
            snapshots=snapshots,
            settings=SimpleNamespace(shutdown_snapshot_min_bytes=1 << 20),
            force_snapshot=self._force,
        )

    @property
    def current_metadata_offset(self) -> int:
        return self.offset

    async def _leader_high_watermark(self) -> int:
        return TARGET

    async def _force(self, reason: str, **kwargs: Any) -> SnapshotId:
        self.forced.append((self.offset, kwargs))
        return SnapshotId(self.offset + 1, 7)


async def replay(fake: FakeObserver, step: int, every_s: float, until: int) -> None:
    while fake.offset < until:
        await asyncio.sleep(every_s)
        fake.offset = min(until, fake.offset + step)


@pytest.fixture
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(observer, "SHUTDOWN_STALL_S", 0.3)
    monkeypatch.setattr(observer, "SHUTDOWN_CATCH_UP_S", 5.0)


async def test_an_image_still_moving_is_waited_for_past_the_stall_time(short_waits: None) -> None:
    """Caught up after ~1 s, much longer than a stall: the snapshot holds everything."""
    fake = FakeObserver()
    moving = asyncio.create_task(replay(fake, step=50, every_s=0.05, until=TARGET - 1))
    started = time.monotonic()
    snapshot = await MetadataObserver.snapshot_before_close(fake, timeout_s=20)  # type: ignore[arg-type]
    await moving
    assert time.monotonic() - started >= 0.8
    assert snapshot == SnapshotId(TARGET, 7)
    assert fake.forced == [(TARGET - 1, {})]


async def test_an_image_that_stopped_moving_is_snapshotted_as_it_is(short_waits: None) -> None:
    """It moved a little, then nothing: the wait ends a stall after its last move, long before the cap."""
    fake = FakeObserver()
    await asyncio.create_task(replay(fake, step=100, every_s=0.05, until=300))
    started = time.monotonic()
    snapshot = await MetadataObserver.snapshot_before_close(fake, timeout_s=20)  # type: ignore[arg-type]
    assert 0.25 <= time.monotonic() - started < 2.0
    assert snapshot == SnapshotId(301, 7) and fake.forced[0][0] == 300


async def test_the_wait_is_capped_however_slowly_the_image_moves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Moving, but never reaching the target: snapshotted at the cap (at most half the shutdown's time)."""
    monkeypatch.setattr(observer, "SHUTDOWN_STALL_S", 0.3)
    monkeypatch.setattr(observer, "SHUTDOWN_CATCH_UP_S", 0.6)
    fake = FakeObserver()
    moving = asyncio.create_task(replay(fake, step=1, every_s=0.05, until=TARGET - 1))
    started = time.monotonic()
    await MetadataObserver.snapshot_before_close(fake, timeout_s=20)  # type: ignore[arg-type]
    waited = time.monotonic() - started
    moving.cancel()
    assert 0.55 <= waited < 1.5
    assert 0 < fake.forced[0][0] < TARGET - 1
