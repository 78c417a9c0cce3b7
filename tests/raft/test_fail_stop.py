"""Fail-stop in one process: a real RaftNode on a real log, with faults injected at the OS call.

A failed fdatasync, a failed rename of quorum-state, an exception out of the core, a listener that cannot apply a
committed batch, and an exception while the transport delivers a message each reach the fault handler once, with
the cause, and the node stops acting (no more input, no more delivery, waiting appends fail). Before, each of
these left the node running but wedged or silently wrong, with nothing logged. (The process-level half — exit code
70 and the log line, then recovery on restart — is tests/cluster/test_fatal_faults.py.)
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from pykraft.testing import free_ports
from quorum.errors import Errors, NotLeaderError
from quorum.fault import LoggingFaultHandler
from quorum.log.batch import build_batch
from quorum.log.log import MetadataLog
from quorum.log.quorum_state import QUORUM_STATE_NAME, QuorumStateStore
from quorum.raft.client import CommittedBatch, LeaderAndEpoch
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.core import SafetyViolation
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Envelope,
    FetchResponse,
    VoteRequest,
)
from quorum.raft.roles import Follower
from quorum.raft.runtime import INLINE_FLUSH_MAX_BYTES, RaftNode
from quorum.transport.peer import PeerTransport

CLUSTER = "fail-stop"
FAST = RaftConfig(election_timeout_ms=50, fetch_timeout_ms=200, request_timeout_ms=200)


def make_node(tmp_path: Path, voters: int = 1) -> RaftNode:
    ports = free_ports(voters)
    addresses = {i + 1: VoterAddress(i + 1, "127.0.0.1", p) for i, p in enumerate(ports)}
    log = MetadataLog.open(tmp_path / "data")
    return RaftNode(
        node_id=1,
        voters=addresses,
        cluster_id=CLUSTER,
        log=log,
        store=QuorumStateStore(log.dir),
        config=FAST,
        faults=LoggingFaultHandler(),
    )


@pytest.fixture
async def leader(tmp_path: Path) -> AsyncIterator[RaftNode]:
    """A single voter that has won its election and committed its LeaderChangeMessage."""
    node = make_node(tmp_path)
    node.start()
    async with asyncio.timeout(10):
        while not (node.core is not None and node.core.is_leader and node.high_watermark > 0):
            await asyncio.sleep(0.01)
    yield node
    await node.shutdown(graceful=False)


@pytest.fixture
async def unattached(tmp_path: Path) -> AsyncIterator[RaftNode]:
    """Node 1 of three voters, started; peers 2 and 3 never come up (messages from them are delivered by hand)."""
    node = make_node(tmp_path, voters=3)
    node.start()
    yield node
    await node.shutdown(graceful=False)


def eio(fd: int) -> None:
    raise OSError(errno.EIO, os.strerror(errno.EIO))


def faults_of(node: RaftNode) -> list:
    return node.faults.faults  # type: ignore[attr-defined]


async def test_a_failed_fdatasync_stops_the_node_instead_of_wedging_it(
    leader: RaftNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    epoch = leader.leader_and_epoch.epoch
    offset = leader.append(epoch, [b"before"])
    assert await asyncio.wait_for(leader.wait_committed(offset, epoch), 5) == offset

    monkeypatch.setattr(os, "fdatasync", eio)
    offset = leader.append(epoch, [b"never acknowledged"])
    # Before: the flush task died unobserved, its in-flight flag stayed set, and this waited for ever.
    with pytest.raises(NotLeaderError, match="fatal fault"):
        await asyncio.wait_for(leader.wait_committed(offset, epoch), 5)
    [fault] = faults_of(leader)
    assert fault.message == "storage fault while flushing the metadata log"
    fields = fault.fields()
    assert fields["errno"] == "EIO" and fields["file"].endswith("00000000000000000000.log"), fields
    assert "fdatasync" in fields["error"], fields
    assert fields["node_id"] == 1 and fields["epoch"] == epoch and fields["role"] == "Leader", fields
    assert fields["high_watermark"] == offset and fields["log_end_offset"] == offset + 1, fields
    assert leader.failed
    with pytest.raises(NotLeaderError, match="stopped"):
        leader.append(epoch, [b"after"])
    await asyncio.sleep(0.3)  # several election timeouts: a stopped node takes no more steps
    assert leader.high_watermark == offset and len(faults_of(leader)) == 1


async def test_a_failed_rename_of_quorum_state_stops_the_node(
    unattached: RaftNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = unattached
    real_replace = os.replace

    def failing_replace(src: object, dst: object, **kw: object) -> None:
        if str(dst).endswith(QUORUM_STATE_NAME):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(src), None, os.fspath(dst))
        real_replace(src, dst, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", failing_replace)
    # A vote request in a later epoch: the node must store the new epoch before it may answer.
    node.transport._deliver(Envelope(2, 1, VoteRequest(CLUSTER, 2, 5, 0, 0, pre_vote=False, correlation_id=1)))
    [fault] = faults_of(node)
    assert fault.message == "storage fault while handling VoteRequest from node 2"
    fields = fault.fields()
    assert fields["errno"] == "ENOSPC" and fields["file"].endswith(QUORUM_STATE_NAME + ".tmp"), fields
    assert node.failed and node.core is not None and node.core.epoch == 0  # nothing acted on the new epoch


async def test_an_exception_out_of_the_core_is_fatal(unattached: RaftNode, monkeypatch: pytest.MonkeyPatch) -> None:
    node = unattached
    assert node.core is not None

    def violate(*args: object) -> None:
        raise SafetyViolation("asked to truncate below the high watermark")

    monkeypatch.setattr(node.core, "handle", violate)
    node.transport._deliver(Envelope(2, 1, BeginQuorumEpochRequest(CLUSTER, 2, 3, correlation_id=1)))
    [fault] = faults_of(node)
    assert fault.message == "fatal error while handling BeginQuorumEpochRequest from node 2"
    fields = fault.fields()
    assert fields["error"] == "SafetyViolation: asked to truncate below the high watermark"
    assert "Traceback" in fields["traceback"] and "violate" in fields["raised_at"], fields
    node.transport._deliver(Envelope(2, 1, BeginQuorumEpochRequest(CLUSTER, 2, 3, correlation_id=2)))
    assert len(faults_of(node)) == 1, "a stopped node takes no more input"


def following(node: RaftNode) -> int:
    """Make node 1 (of 3) follow node 2 in epoch 1; returns the correlation id of the fetch it sends."""
    node.transport._deliver(Envelope(2, 1, BeginQuorumEpochRequest(CLUSTER, 2, 1, correlation_id=1)))
    role = node.core.role  # type: ignore[union-attr]
    assert isinstance(role, Follower) and role.fetch_correlation is not None
    return role.fetch_correlation


def records_from_2(correlation: int, *values: bytes, base_offset: int = 0) -> Envelope:
    batch = build_batch([(None, v) for v in values], base_offset=base_offset, epoch=1)
    return Envelope(2, 1, FetchResponse(Errors.NONE, 1, 2, -1, batch, correlation_id=correlation))


async def test_a_follower_fsyncs_a_small_fetch_on_the_loop_and_acknowledges_it_at_once(unattached: RaftNode) -> None:
    """Kafka's voters flush fetched records in the raft thread before fetching again; a thread's round trip would
    add ~0.2 ms to every commit. A large fetch still goes to the flush thread (the loop applies batches meanwhile)."""
    node = unattached
    first = following(node)
    node.transport._deliver(records_from_2(first, b"a", b"b"))
    # Flushed and acknowledged in the same turn: the next fetch already names offset 2, nothing awaited.
    role = node.core.role  # type: ignore[union-attr]
    assert node.log.flushed_offset == 2 and role.fetch_correlation not in (None, first)
    assert not role.awaiting_flush
    second = role.fetch_correlation
    big = [bytes(1000)] * (INLINE_FLUSH_MAX_BYTES // 1000 + 1)
    node.transport._deliver(records_from_2(second, *big, base_offset=2))
    assert node.log.flushed_offset == 2 and role.awaiting_flush  # on the thread: not done yet
    async with asyncio.timeout(5):
        while role.awaiting_flush:
            await asyncio.sleep(0.01)
    assert node.log.flushed_offset == node.log.end_offset > 2 and not faults_of(node)


async def test_a_failed_fdatasync_on_a_follower_stops_it(unattached: RaftNode, monkeypatch: pytest.MonkeyPatch) -> None:
    node = unattached
    correlation = following(node)
    monkeypatch.setattr(os, "fdatasync", eio)
    node.transport._deliver(records_from_2(correlation, b"never acknowledged"))
    [fault] = faults_of(node)
    assert fault.message == "storage fault while flushing the metadata log"
    fields = fault.fields()
    assert fields["errno"] == "EIO" and fields["role"] == "Follower" and fields["flushed_offset"] == 0, fields
    role = node.core.role  # type: ignore[union-attr]
    assert node.failed and role.awaiting_flush and role.fetch_correlation is None  # nothing acknowledged


class Listener:
    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.applied: list[int] = []

    def handle_commit(self, batch: CommittedBatch) -> None:
        if batch.base_offset <= self.fail_at <= batch.last_offset:
            raise KeyError("no such topic")
        self.applied.append(batch.last_offset)

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


async def test_a_listener_that_cannot_apply_a_committed_batch_is_fatal(leader: RaftNode) -> None:
    epoch = leader.leader_and_epoch.epoch
    offsets = [leader.append(epoch, [f"r{i}".encode()]) for i in range(3)]
    await asyncio.wait_for(leader.wait_committed(offsets[-1], epoch), 5)
    listener = Listener(fail_at=offsets[1])
    leader.register(listener)
    async with asyncio.timeout(5):
        while not faults_of(leader):
            await asyncio.sleep(0.01)
    [fault] = faults_of(leader)
    assert fault.message.startswith("fatal error while applying the committed batch at offsets ")
    assert fault.context["batch_base_offset"] <= offsets[1] <= fault.context["batch_last_offset"]
    assert fault.fields()["error"] == "KeyError: 'no such topic'"
    # Before: logged as listener_failed and skipped, the node went on delivering what came after it.
    assert max(listener.applied) < offsets[1]
    later = Listener(fail_at=-1)
    leader.register(later)
    await asyncio.sleep(0.2)
    assert not later.applied, "a stopped node delivers nothing more"


@pytest.mark.parametrize(
    ("failing", "expected"), [(1, "running the stream to node 2"), (2, "reading an inbound peer stream")]
)
async def test_an_exception_while_the_transport_delivers_goes_to_the_fault_path(failing: int, expected: str) -> None:
    """Before, only gRPC errors were caught around delivery: any other exception ended the stream to that peer for
    good, silently. Now it reaches the node's fatal path, on the outbound side (a response from the peer) and on
    the inbound side (a request from it)."""
    port_1, port_2 = free_ports(2)
    voters = {1: VoterAddress(1, "127.0.0.1", port_1), 2: VoterAddress(2, "127.0.0.1", port_2)}
    faults: dict[int, list[tuple[str, BaseException]]] = {1: [], 2: []}

    def deliver_1(env: Envelope) -> None:  # node 1 receives node 2's response on its outbound stream
        if failing == 1:
            raise ValueError(f"cannot handle {type(env.message).__name__}")

    def deliver_2(env: Envelope) -> None:  # node 2 receives node 1's request on its inbound stream
        if failing == 2:
            raise ValueError(f"cannot handle {type(env.message).__name__}")
        receiver.send(Envelope(2, 1, BeginQuorumEpochResponse(0, 3, 1, env.message.correlation_id)))

    sender = PeerTransport(1, voters, deliver_1, lambda peer: None, on_fault=lambda *f: faults[1].append(f))
    receiver = PeerTransport(2, voters, deliver_2, lambda peer: None, on_fault=lambda *f: faults[2].append(f))
    server = grpc.aio.server()
    receiver.add_to_server(server)
    server.add_insecure_port(f"127.0.0.1:{port_2}")
    await server.start()
    sender.start()
    try:
        sender.send(Envelope(1, 2, BeginQuorumEpochRequest(CLUSTER, 1, 3, correlation_id=1)))
        async with asyncio.timeout(5):
            while not faults[failing]:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        [(doing, error)] = faults[failing]
        assert doing == expected
        names = {1: "BeginQuorumEpochResponse", 2: "BeginQuorumEpochRequest"}
        assert str(error) == f"cannot handle {names[failing]}"
        assert not faults[3 - failing]
    finally:
        await sender.close()
        await server.stop(None)
