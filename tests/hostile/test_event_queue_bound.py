"""The controller's event queue is bounded: appends past ``max_size`` are refused at once with REQUEST_TIMED_OUT (a
retriable code; nothing was run), counted in ``pykraft_controller_events_rejected``; internal events (activation,
periodic work) are never refused; and a node flooded past the bound answers the flood quickly and keeps serving."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
from hostile_helpers import live_node

from controller.event_queue import MAX_QUEUED_EVENTS, Event, EventQueue
from pykraft.api import controller_pb2 as cpb
from pykraft.api import controller_pb2_grpc as cpb_grpc
from pykraft.metrics import ControllerCollector
from quorum.errors import Errors, KafkaError


async def test_appends_past_the_bound_are_refused_at_once() -> None:
    queue = EventQueue("test", max_size=3)
    futures = [queue.append(Event(f"e{i}", lambda i=i: i)) for i in range(5)]
    assert [f.done() for f in futures] == [False, False, False, True, True]
    for refused in futures[3:]:
        error = refused.exception()
        assert isinstance(error, KafkaError) and error.code == Errors.REQUEST_TIMED_OUT
        assert "event queue is full (3 requests waiting)" in str(error) and "was not run" in str(error)
    assert queue.stats.rejected == 2
    activation = queue.prepend(Event("activation", lambda: "first"))  # internal: never refused
    queue.schedule("tick", time.monotonic(), Event("tick", lambda: "tick"))
    queue.start()
    try:
        assert await activation == "first"
        assert await asyncio.gather(*futures[:3]) == [0, 1, 2]
        assert await queue.append(Event("after", lambda: "room again")) == "room again"
    finally:
        await queue.close(KafkaError("closed"))


async def test_a_flood_past_the_bound_is_refused_quickly_and_the_node_keeps_serving(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live:
        controller = live.controller
        controller.queue.max_size = 50
        started = time.monotonic()
        results = await asyncio.gather(*(controller.describe_cluster() for _ in range(2000)), return_exceptions=True)
        took = time.monotonic() - started
        refused = [r for r in results if isinstance(r, KafkaError)]
        assert all(r.code == Errors.REQUEST_TIMED_OUT for r in refused), refused[:3]
        assert len(refused) >= 1000 and len(refused) == controller.queue.stats.rejected, len(refused)
        assert len(results) - len(refused) >= 50  # what fitted was served
        assert took < 5, took
        metrics = {m.name: m for m in ControllerCollector(controller).collect()}
        assert metrics["pykraft_controller_events_rejected"].samples[0].value == len(refused)

        # Over gRPC: the refusal is the response's error code and message, the next request is served again.
        async with grpc.aio.insecure_channel(live.address) as channel:
            controller.queue.max_size = 0
            response = await cpb_grpc.ControllerStub(channel).DescribeCluster(cpb.DescribeClusterRequest(), timeout=5)
            assert response.error_code == Errors.REQUEST_TIMED_OUT and "event queue is full" in response.error_message
            controller.queue.max_size = MAX_QUEUED_EVENTS
            assert await live.serves(channel)
        assert await live.commits("after-the-flood") and live.healthy
