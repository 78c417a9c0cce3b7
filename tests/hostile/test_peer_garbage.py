"""Bytes that are no PeerMessage on a peer stream, found by the fuzzer: inbound, gRPC raised DecodeError out of the
request iterator into the stream's reader, whose failure is the node's fatal path — one garbage frame from anyone
who could reach the port stopped the node. Now the stream ends with INVALID_ARGUMENT and the node goes on. Outbound
(a rogue or broken server at a peer's address), gRPC hands the reader None, which failed the same way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
from hostile_helpers import live_node

from pykraft.testing import free_ports
from quorum.raft.config import VoterAddress
from quorum.raft.messages import Envelope, FetchRequest
from quorum.transport.peer import PeerTransport


async def test_an_undecodable_frame_ends_the_stream_not_the_node(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live, grpc.aio.insecure_channel(live.address) as channel:
        exchange = channel.stream_stream("/pykraft.quorum.v1.QuorumPeer/Exchange")
        stream = exchange()
        await stream.write(b"\xff\xff\xff")  # a field with a truncated varint key: no PeerMessage
        assert await stream.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "no PeerMessage" in await stream.details()
        assert live.node.transport.undecodable == 1
        await asyncio.sleep(0.1)
        assert live.healthy, live.faults.faults
        assert await live.serves(channel) and await live.commits("after-garbage")


async def test_garbage_from_a_rogue_peer_server_is_not_a_fault() -> None:
    [port] = free_ports(1)
    answered = asyncio.Event()
    streams = [0]

    async def exchange(requests, context):  # type: ignore[no-untyped-def]
        streams[0] += 1
        answered.set()
        yield b"\xff\xff\xff"  # not a PeerMessage, at once on every stream
        async for _ in requests:
            pass

    handler = grpc.stream_stream_rpc_method_handler(exchange)
    server = grpc.aio.server()
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("pykraft.quorum.v1.QuorumPeer", {"Exchange": handler})]
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    faults: list[str] = []
    unreachable: list[int] = []
    transport = PeerTransport(
        1,
        {1: VoterAddress(1, "127.0.0.1", 1), 2: VoterAddress(2, "127.0.0.1", port)},
        deliver=lambda env: None,
        unreachable=unreachable.append,
        on_fault=lambda doing, e: faults.append(f"{doing}: {e!r}"),
    )
    transport.start()
    try:
        transport.send(Envelope(1, 2, FetchRequest("c", 1, 1, 0, 0, 1024, 0, 1)))
        async with asyncio.timeout(10):
            await answered.wait()
            while not unreachable:
                await asyncio.sleep(0.01)
        assert not faults and unreachable[0] == 2
        # Garbage is no answer: the transport reconnects with backoff (20 ms doubling), not in a tight loop.
        await asyncio.sleep(1.0)
        assert streams[0] < 15, streams
    finally:
        await transport.close()
        await server.stop(0)
