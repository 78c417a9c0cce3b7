"""A broker applies what its metadata image commits within IMAGE_POLL_INTERVAL_S, however long its previous read of
the image took: a replica applied late is fetched late, and its leader shrinks a follower that has not fetched a new
partition within replica.lag.time.max.ms. (It used to wait five times as long as the last read took: after a
snapshot install read on a starved broker, ~40 s, and tens of thousands of ISR shrinks followed in the scale run.)"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import generate_latest

sys.path.append(str(Path(__file__).parent / "controller"))  # the controller tests' fakes, read not copied

from ctl_helpers import SharedLog, active_cluster, quiet_settings, settle, start_controller

from controller.replication_control import NewTopic
from pykraft.broker_metrics import broker_registry
from pykraft.replica import data_plane, image_metadata
from pykraft.replica.data_plane import DataPlane
from pykraft.replica.partition import ReplicaConfig
from quorum.fault import LoggingFaultHandler

ME = 0


def _topics(p: DataPlane) -> set[str]:
    return {q.topic for q in p.manager.partitions.values()}


async def _until(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.01)
    return bool(condition())  # type: ignore[operator]


async def _image_fed_plane() -> tuple[DataPlane, Any, Any]:
    """A data plane fed by a standby's image (its QuorumController), the active controller, and the standby."""
    log = SharedLog()
    standby, _ = await start_controller(log, 7, quiet_settings(serve_local_reads=True))  # the broker's image
    brokers = [(ME, None, False), (1, None, False), (2, None, False)]
    ctl, _, epochs = await active_cluster(log, brokers, topics=[NewTopic("first", 3, 3)])
    await settle()
    p = DataPlane(ME, ("127.0.0.1", 0), None, lambda: epochs[ME], ReplicaConfig(), LoggingFaultHandler(), image=standby)  # type: ignore[arg-type]
    p._sync_fetchers = lambda: None  # type: ignore[method-assign]  # no fetcher tasks: nothing is fetched here
    return p, ctl, standby


async def test_a_costly_image_read_does_not_delay_the_next_one(monkeypatch: pytest.MonkeyPatch) -> None:
    p, ctl, _ = await _image_fed_plane()
    # Every read of the image looks as if it took 30 s (a full read on a starved broker): its timer jumps.
    jumps = itertools.count(0.0, 30.0)
    monkeypatch.setattr(data_plane, "time", SimpleNamespace(perf_counter=lambda: next(jumps), monotonic=time.monotonic))
    poller = asyncio.get_running_loop().create_task(p._poll_metadata())
    try:
        assert await _until(lambda: "first" in _topics(p), 2.0)
        assert p.last_poll_ms >= 30_000
        await ctl.create_topics([NewTopic("second", 3, 3)])
        await settle()
        assert await _until(lambda: "second" in _topics(p), 10 * data_plane.IMAGE_POLL_INTERVAL_S)
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)


async def test_the_replicas_applied_offset_follows_the_image_once_its_partitions_are_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``pykraft_broker_replicas_applied_offset``: the image's offset whose partitions the replica manager holds
    (the image replays first; a delta is applied after it, a slice at a time)."""
    p, ctl, standby = await _image_fed_plane()
    assert p.applied_offset == -1
    await p.poll_metadata_once()
    assert p.applied_offset == standby.committed_offset > 0 and _topics(p) == {"first"}
    await ctl.create_topics([NewTopic("second", 3, 3)])
    await settle()
    before = p.applied_offset
    assert standby.committed_offset > before  # the image holds the topic; the replica manager not yet
    seen_between_slices = []

    async def sleep(_: float) -> None:
        seen_between_slices.append(p.applied_offset)

    monkeypatch.setattr(image_metadata, "APPLY_SLICE", 1)
    monkeypatch.setattr(image_metadata, "asyncio", SimpleNamespace(sleep=sleep))
    await p.poll_metadata_once()
    assert seen_between_slices == [before, before]  # three partitions, three slices: still the old offset between
    assert p.applied_offset == standby.committed_offset and "second" in _topics(p)
    text = generate_latest(broker_registry(p.manager, replicas_applied=lambda: p.applied_offset)).decode()
    assert f'pykraft_broker_replicas_applied_offset{{broker_id="{ME}"}} {float(p.applied_offset)}' in text
    assert "pykraft_broker_replicas_applied_offset" not in generate_latest(broker_registry(p.manager)).decode()
