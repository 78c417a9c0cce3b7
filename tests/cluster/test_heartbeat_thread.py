"""A broker's heartbeats do not wait for its main loop: a loop held up for longer than the session timeout (as by a
large snapshot loading into the image) does not get a live broker fenced, as a Kafka broker's separate heartbeat
thread keeps it unfenced. The controller runs as its own process, so only the broker's loop is held."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pykraft.broker import BrokerAgent
from pykraft.client import AdminClient
from pykraft.testing import Cluster, free_ports

SESSION_TIMEOUT_MS = 1500


@pytest.fixture
async def controller(tmp_path: Path) -> AsyncIterator[Cluster]:
    cluster = Cluster(
        tmp_path,
        size=1,
        extra_args=["--override", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}"],
    )
    cluster.start()
    try:
        await cluster.wait_for_leader(timeout=30)
        yield cluster
    finally:
        cluster.stop()


async def is_fenced(admin: AdminClient, broker_id: int) -> bool:
    brokers = {b.broker_id: b for b in (await admin.describe_cluster()).brokers}
    return brokers[broker_id].fenced


async def test_a_busy_main_loop_does_not_get_the_broker_fenced(
    controller: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    (listener_port,) = free_ports(1)
    bootstrap = ",".join(f"127.0.0.1:{n.port}" for n in controller.nodes.values())
    agent = BrokerAgent(101, None, bootstrap, ("127.0.0.1", listener_port), heartbeat_interval_ms=200)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        async with AdminClient(bootstrap) as admin, asyncio.timeout(30):
            while agent.fenced or await is_fenced(admin, 101):
                await asyncio.sleep(0.05)
            # The main loop does nothing else for twice the session timeout (and the controller's check after).
            time.sleep(2 * SESSION_TIMEOUT_MS / 1000 + 1)
            # Asked before any heartbeat this loop sends could unfence it again.
            described = await admin.describe_cluster()
            [broker] = described.brokers
            assert broker.last_heartbeat_age_ms < SESSION_TIMEOUT_MS, broker
        [node] = controller.nodes.values()
        fencings = [line for line in node.log_path.read_text().splitlines() if "brokers_fenced" in line]
        assert not fencings, f"the broker was fenced while its main loop was busy: {fencings}"
        assert not agent.fenced
        stop.set()
        await asyncio.wait_for(task, 30)
    finally:
        task.cancel()
    # Two loops in one process must not share grpc.aio: its poller's events went to either loop, and the other
    # one's read failed ("Exception in callback PollerCompletionQueue._handle_events ... BlockingIOError").
    failures = [r.getMessage() for r in caplog.records if r.name == "asyncio" and r.levelname == "ERROR"]
    assert not failures, failures
