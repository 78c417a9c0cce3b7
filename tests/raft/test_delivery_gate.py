"""A node's delivery gate (RaftNode.delivery_gate): awaited between chunks of committed batches, it holds delivery
while closed (a broker's image waits there for its replicas) and lets it run on once open."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.quorum_state import QuorumStateStore
from quorum.raft import runtime
from quorum.raft.client import CommittedBatch, LeaderAndEpoch
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.runtime import RaftNode


class Listener:
    def __init__(self) -> None:
        self.applied: list[int] = []

    def handle_commit(self, batch: CommittedBatch) -> None:
        self.applied.append(batch.last_offset)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[RaftNode]:
    log = MetadataLog.open(tmp_path / "data")
    [port] = free_ports(1)
    node = RaftNode(
        node_id=1,
        voters={1: VoterAddress(1, "127.0.0.1", port)},
        cluster_id="gate-test-cluster-id0",
        log=log,
        store=QuorumStateStore(log.dir),
        config=RaftConfig(election_timeout_ms=50, fetch_timeout_ms=200, append_linger_ms=0),
        faults=LoggingFaultHandler(),
    )
    node.start()
    async with asyncio.timeout(10):
        while not (node.core is not None and node.core.is_leader and node.high_watermark > 0):
            await asyncio.sleep(0.01)
    yield node
    await node.shutdown(graceful=False)


async def test_a_closed_gate_holds_delivery_between_chunks(leader: RaftNode, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "DELIVERY_CHUNK_BYTES", 1)  # one batch a chunk
    epoch = leader.leader_and_epoch.epoch
    last = 0
    for i in range(20):
        last = leader.append(epoch, [b"record-%d" % i])
        await asyncio.sleep(0.005)  # a batch each
    await asyncio.wait_for(leader.wait_committed(last, epoch), 5)
    gate = asyncio.Event()
    waits = 0

    async def wait_for_gate() -> None:
        nonlocal waits
        waits += 1
        await gate.wait()

    leader.delivery_gate = wait_for_gate
    listener = Listener()
    leader.register(listener)
    await asyncio.sleep(0.3)
    assert waits == 1 and len(listener.applied) == 1, (waits, listener.applied)  # the first chunk, then it waits
    gate.set()
    async with asyncio.timeout(5):
        while not listener.applied or listener.applied[-1] < last:
            await asyncio.sleep(0.01)
    assert waits >= 10  # between every chunk
