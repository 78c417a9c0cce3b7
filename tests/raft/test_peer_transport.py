"""The gRPC peer transport on its own, in one process: a request waits for a peer that is down and reaches it
once it is up (a restarted voter hears the EndQuorumEpoch or BeginQuorumEpoch queued for it), a request older than
the request timeout is dropped unsent, and a peer that refuses the stream is retried with a growing backoff."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from pykraft.testing import free_ports
from quorum.raft.config import VoterAddress
from quorum.raft.messages import BeginQuorumEpochRequest, Envelope
from quorum.transport.peer import PeerTransport

pytestmark = pytest.mark.asyncio


def begin_epoch(epoch: int) -> Envelope:
    return Envelope(1, 2, BeginQuorumEpochRequest("cluster", 1, epoch, correlation_id=epoch))


async def test_a_request_waits_for_a_down_peer_unless_it_expires() -> None:
    port_1, port_2 = free_ports(2)
    voters = {1: VoterAddress(1, "127.0.0.1", port_1), 2: VoterAddress(2, "127.0.0.1", port_2)}
    received: list[Envelope] = []
    sender = PeerTransport(1, voters, lambda env: None, lambda peer: None, request_timeout_ms=1000)
    sender.start()
    server: grpc.aio.Server | None = None
    try:
        sender.send(begin_epoch(1))  # expires before node 2 is up
        await asyncio.sleep(1.1)
        sender.send(begin_epoch(2))  # node 2 comes up well within its timeout
        receiver = PeerTransport(2, voters, received.append, lambda peer: None)
        server = grpc.aio.server()
        receiver.add_to_server(server)
        server.add_insecure_port(f"127.0.0.1:{port_2}")
        await server.start()
        async with asyncio.timeout(5):
            while not received:
                await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)  # anything else queued would have arrived by now
        assert [env.message.leader_epoch for env in received] == [2]
        assert received[0].source == 1
    finally:
        await sender.close()
        if server is not None:
            await server.stop(None)


async def test_a_peer_refusing_the_stream_is_retried_with_backoff() -> None:
    port_1, port_2 = free_ports(2)
    voters = {1: VoterAddress(1, "127.0.0.1", port_1), 2: VoterAddress(2, "127.0.0.1", port_2)}
    server = grpc.aio.server()  # no QuorumPeer service: every stream fails with UNIMPLEMENTED
    server.add_insecure_port(f"127.0.0.1:{port_2}")
    await server.start()
    failures: list[int] = []
    sender = PeerTransport(1, voters, lambda env: None, failures.append)
    sender.start()
    try:
        await asyncio.sleep(1.5)
    finally:
        await sender.close()
        await server.stop(None)
    # 0, 20, 40, 80, 160, 320, 640 ms of backoff: about 7 attempts in 1.5 s; without backoff it would be ~75.
    assert 3 <= len(failures) <= 12, failures
    assert set(failures) == {2}


async def test_close_ends_a_client_whose_cancellation_grpc_reports_as_a_cancelled_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gRPC may report the cancellation of a task reading a stream as an AioRpcError(CANCELLED) rather than a
    CancelledError (a CI run once hung for ever in a transport's close()): the client must end all the same."""
    from quorum.transport import peer

    started = asyncio.Event()
    reported: list[bool] = []

    class Call:
        async def wait_for_connection(self) -> None:
            await asyncio.Event().wait()

        def __aiter__(self) -> Call:
            return self

        async def __anext__(self) -> None:
            started.set()
            try:
                await asyncio.Event().wait()  # a peer that never connects (wait_for_ready)
            except asyncio.CancelledError:
                if reported:  # once is the case under test; after it, end as usual (so a failing run ends too)
                    raise
                reported.append(True)
                status = grpc.StatusCode.CANCELLED
                raise grpc.aio.AioRpcError(status, grpc.aio.Metadata(), grpc.aio.Metadata()) from None

    class Stub:
        def __init__(self, channel: object) -> None:
            pass

        def Exchange(self, wait_for_ready: bool = False) -> Call:  # gRPC's method name
            return Call()

        async def FrameEndpoint(self, request: object, wait_for_ready: bool = False) -> None:  # a peer without it
            status = grpc.StatusCode.UNIMPLEMENTED
            raise grpc.aio.AioRpcError(status, grpc.aio.Metadata(), grpc.aio.Metadata())

    monkeypatch.setattr(peer.pb_grpc, "QuorumPeerStub", Stub)
    port_1, port_2 = free_ports(2)
    voters = {1: VoterAddress(1, "127.0.0.1", port_1), 2: VoterAddress(2, "127.0.0.1", port_2)}
    transport = PeerTransport(1, voters, lambda env: None, lambda peer: None)
    transport.start()
    async with asyncio.timeout(5):
        await started.wait()
    closing = asyncio.create_task(transport.close())
    done, _ = await asyncio.wait({closing}, timeout=5)
    assert done, "close() still waits for a client that took its cancellation for a failed stream"
    assert reported == [True]
