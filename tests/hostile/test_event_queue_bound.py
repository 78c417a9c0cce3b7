"""The controller's event queue is bounded: appends past ``max_size`` are refused at once with REQUEST_TIMED_OUT (a
retriable code; nothing was run), counted in ``pykraft_controller_events_rejected``; internal events (activation,
periodic work) are never refused; and a node flooded past the bound answers the flood quickly and keeps serving."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest
from hostile_helpers import live_node

from controller.event_queue import MAX_QUEUED_EVENTS, Event, EventQueue
from controller.quota_control import CLIENT_ID, CONTROLLER_MUTATION_RATE, QuotaAlteration, QuotaOp
from pykraft.api import controller_pb2 as cpb
from pykraft.api import controller_pb2_grpc as cpb_grpc
from pykraft.client import AdminClient, AdminError, NewTopic
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


async def test_the_admin_client_retries_a_full_queue_with_backoff_but_not_a_real_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full queue's REQUEST_TIMED_OUT says the request was never queued: the AdminClient resends it (a write too)
    with exponential backoff and jitter until it is served or its deadline comes; any other REQUEST_TIMED_OUT may
    have been applied (``... (it may still complete)``) and is returned as it is, sent once."""
    async with live_node(tmp_path) as live, AdminClient(live.address, retry_backoff_ms=20) as admin:
        controller = live.controller
        controller.queue.max_size = 0
        loop = asyncio.get_running_loop()
        loop.call_later(0.3, setattr, controller.queue, "max_size", MAX_QUEUED_EVENTS)
        started = time.monotonic()
        alteration = QuotaAlteration([(CLIENT_ID, "app")], [QuotaOp(CONTROLLER_MUTATION_RATE, 5.0)])
        [result] = await admin.alter_client_quotas([alteration], timeout_ms=10_000)  # a write
        assert not result.error.failed
        assert controller.quotas.lookup(((CLIENT_ID, "app"),), CONTROLLER_MUTATION_RATE) == 5.0
        assert admin.queue_full_retries >= 3 and time.monotonic() - started >= 0.3  # 20, 40, 80, 160 ms ...
        assert controller.queue.stats.rejected == admin.queue_full_retries

        # Past the deadline the caller gets the refusal itself.
        controller.queue.max_size = 0
        with pytest.raises(AdminError, match="event queue is full") as refused:
            await admin.describe_cluster(timeout_ms=300)
        assert refused.value.code == Errors.REQUEST_TIMED_OUT
        # ... also when a backoff's sleep overruns the deadline (a busy loop wakes it late; every sleep in the
        # process is late for this one call).
        sleep = asyncio.sleep
        monkeypatch.setattr("pykraft.client.asyncio.sleep", lambda pause: sleep(pause + 0.4))
        with pytest.raises(AdminError, match="event queue is full") as refused:
            await admin.describe_cluster(timeout_ms=300)
        monkeypatch.undo()
        controller.queue.max_size = MAX_QUEUED_EVENTS

        sent: list[str] = []

        async def timed_out(topics: list[object], **kw: object) -> list[object]:
            sent.append("createTopics")
            raise KafkaError("createTopics timed out after 5 ms (it may still complete)", Errors.REQUEST_TIMED_OUT)

        monkeypatch.setattr(controller, "create_topics", timed_out)
        retries = admin.queue_full_retries
        with pytest.raises(AdminError, match="may still complete"):
            await admin.create_topics([NewTopic("maybe-created", 1, 1)], timeout_ms=5_000)
        assert sent == ["createTopics"] and admin.queue_full_retries == retries
