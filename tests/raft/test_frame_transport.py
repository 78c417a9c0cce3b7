"""The peer transport's frame connections, in one process: a node that names a frame listener (FrameEndpoint) is
dialled there and both directions go over frames; a node without one, or a dialler told not to, keeps the gRPC
stream; a peer restarted on another frame port is found again and hears what was queued for it, except requests
older than the request timeout; and a frame port that cannot be used leaves the gRPC stream in its place."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import pytest
import structlog

from pykraft.testing import free_ports
from quorum.errors import Errors
from quorum.raft.config import VoterAddress
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    Envelope,
    FetchResponse,
    FetchSnapshotResponse,
)
from quorum.transport.convert import from_proto, to_proto
from quorum.transport.frames import BULK_MIN, FRAME, encode_message
from quorum.transport.pb.quorum_pb2 import PeerMessage
from quorum.transport.peer import PeerTransport

pytestmark = pytest.mark.asyncio


def voters_on(ports: list[int]) -> dict[int, VoterAddress]:
    return {i + 1: VoterAddress(i + 1, "127.0.0.1", port) for i, port in enumerate(ports)}


class Peer:
    """A node's peer transport on a gRPC server, and on a frame listener unless ``frames`` is False."""

    def __init__(self, node_id: int, voters: dict[int, VoterAddress], *, frames: bool = True, timeout_ms: int = 2000):
        self.node_id = node_id
        self.voters = voters
        self.frames = frames
        self.received: list[Envelope] = []
        self.unreachable: list[int] = []
        self.transport = PeerTransport(
            node_id, voters, self.received.append, self.unreachable.append, request_timeout_ms=timeout_ms
        )
        self.server = grpc.aio.server()
        self.transport.add_to_server(self.server)
        self.server.add_insecure_port(f"127.0.0.1:{voters[node_id].port}")

    async def start(self) -> Peer:
        if self.frames:  # before the voter port serves, as a node does: FrameEndpoint names it from the start
            await self.transport.listen_frames("127.0.0.1", 0)
        await self.server.start()
        self.transport.start()
        return self

    async def stop(self) -> None:
        await self.transport.close()
        await self.server.stop(None)

    async def wait_for(self, count: int, timeout: float = 5.0) -> list[Envelope]:
        async with asyncio.timeout(timeout):
            while len(self.received) < count:
                await asyncio.sleep(0.005)
        return self.received


@asynccontextmanager
async def running(*peers: Peer) -> AsyncIterator[None]:
    try:
        for peer in peers:
            await peer.start()
        yield
    finally:
        for peer in peers:
            await peer.stop()


def begin(epoch: int, source: int = 1) -> Envelope:
    return Envelope(source, 2, BeginQuorumEpochRequest("c", source, epoch, correlation_id=epoch))


def answer(epoch: int) -> Envelope:
    return Envelope(2, 1, BeginQuorumEpochResponse(Errors.NONE, epoch, 1, correlation_id=epoch))


async def test_a_request_and_its_response_go_over_frames() -> None:
    voters = voters_on(free_ports(2))
    one, two = Peer(1, voters), Peer(2, voters)
    async with running(one, two):
        for epoch in range(1, 4):
            one.transport.send(begin(epoch))
        received = await two.wait_for(3)
        assert [env.message.leader_epoch for env in received] == [1, 2, 3]  # in order
        assert one.transport.wire(2) == "frames"
        two.transport.send(answer(3))
        [response] = await one.wait_for(1)
        assert (response.source, response.message) == (2, answer(3).message)
        assert two.transport._frames is not None and len(two.transport._frames._connections) == 1
        assert one.transport.dropped == two.transport.dropped == 0


@pytest.mark.parametrize("who", ["listener", "dialler"])
async def test_without_frames_on_either_side_the_stream_is_grpc(who: str) -> None:
    voters = voters_on(free_ports(2))
    one, two = Peer(1, voters), Peer(2, voters, frames=who != "listener")
    if who == "dialler":
        one.transport.dial_frames = False
    async with running(one, two):
        one.transport.send(begin(1))
        await two.wait_for(1)
        two.transport.send(answer(1))
        await one.wait_for(1)
        assert one.transport.wire(2) == "grpc"
        assert two.transport._frames is None or not two.transport._frames._connections


async def test_a_peer_restarted_on_another_frame_port_is_found_again_and_hears_what_waited() -> None:
    voters = voters_on(free_ports(2))
    one = Peer(1, voters, timeout_ms=1500)
    two = Peer(2, voters)
    async with running(one):
        await two.start()
        one.transport.send(begin(1))
        await two.wait_for(1)
        old_port = two.transport.frames_port
        await two.stop()
        one.transport.send(begin(2))  # expires while node 2 is down
        await asyncio.sleep(1.6)
        one.transport.send(begin(3))  # well within its timeout when node 2 is back
        two = Peer(2, voters)
        try:
            await two.start()
            assert two.transport.frames_port != old_port
            await two.wait_for(1)
            await asyncio.sleep(0.2)  # anything else queued would have arrived by now
            assert [env.message.leader_epoch for env in two.received] == [3]
            assert one.transport.wire(2) == "frames"
            assert 2 in one.unreachable  # the broken connection was reported
        finally:
            await two.stop()


async def test_a_frame_port_that_cannot_be_used_falls_back_to_the_grpc_stream() -> None:
    """The dialler expects TLS on frames, the listener speaks plain TCP: the handshake fails, and rather than retry
    a connection that will never work, the dialler takes the gRPC stream, which reached the peer a moment ago."""
    voters = voters_on(free_ports(2))
    one, two = Peer(1, voters), Peer(2, voters)
    one.transport.frame_ssl = ssl.create_default_context()
    async with running(one, two):
        with structlog.testing.capture_logs() as logs:
            one.transport.send(begin(1))
            await two.wait_for(1)
        assert one.transport.wire(2) == "grpc"
        assert [e["fallback"] for e in logs if e["event"] == "peer_frames_unusable"] == ["grpc"]
        two.transport.send(answer(1))
        await one.wait_for(1)


def bulk_answers(size: int) -> list[Envelope]:
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    return [
        Envelope(2, 1, FetchResponse(Errors.NONE, 3, 2, 41, payload, correlation_id=7)),
        Envelope(2, 1, FetchSnapshotResponse(Errors.NONE, 3, 2, 900, 2, 9 << 20, 1 << 20, payload, 8)),
    ]


@pytest.mark.parametrize("size", [0, BULK_MIN - 1, BULK_MIN, 3 << 20])
def test_a_fetch_answer_frame_decodes_as_its_protobuf_and_holds_its_bytes_uncopied(size: int) -> None:
    for env in bulk_answers(size):
        parts = encode_message(env.source, env.message)
        frame = b"".join(parts)
        assert FRAME.unpack_from(frame)[0] == len(frame) - FRAME.size
        decoded = PeerMessage()
        decoded.ParseFromString(frame[FRAME.size :])
        assert decoded == to_proto(env.source, env.message)  # the two serialized messages merge into the one
        assert from_proto(decoded, 1) == env
        m = env.message
        payload = m.data if isinstance(m, FetchSnapshotResponse) else m.records  # type: ignore[union-attr]
        assert (parts[-1] is payload) == (size >= BULK_MIN)


async def test_fetch_answers_of_megabytes_go_over_frames_whole() -> None:
    voters = voters_on(free_ports(2))
    one, two = Peer(1, voters), Peer(2, voters)
    async with running(one, two):
        one.transport.send(begin(1))
        await two.wait_for(1)
        answers = bulk_answers(8 << 20)
        for env in answers:
            two.transport.send(env)
        received = await one.wait_for(2)
        assert received == answers and one.transport.wire(2) == "frames"
        assert one.transport.dropped == two.transport.dropped == 0
