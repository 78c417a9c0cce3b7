"""Slowloris: clients that open calls and send nothing, on a live node's listener. Peer streams that never send are
bounded (the oldest past PENDING_STREAM_LIMIT is ended with RESOURCE_EXHAUSTED), non-voters' streams too (the one
silent longest past OBSERVER_STREAM_LIMIT), unary calls by the streams a connection may hold; meanwhile real
clients are answered and the controller commits through Raft."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from hostile_helpers import CLUSTER_ID, live_node

import quorum.transport.peer as peer
import quorum.transport.server as server_module
from pykraft.api import controller_pb2 as cpb
from quorum.transport.limits import MAX_STREAMS_PER_CONNECTION
from quorum.transport.pb import quorum_pb2 as qpb
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc

OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]  # a channel of its own, not shared with the others


async def test_idle_peer_streams_are_bounded_and_raft_goes_on(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live:
        transport = live.node.transport
        channels = [grpc.aio.insecure_channel(live.address, options=OWN_CONNECTION) for _ in range(3)]
        try:
            calls = []
            for i in range(3 * 80):  # 240 idle streams, 80 a connection
                call = qpb_grpc.QuorumPeerStub(channels[i % 3]).Exchange()
                await call.wait_for_connection()
                calls.append(call)
            async with asyncio.timeout(10):
                while transport.streams_ended < len(calls) - peer.PENDING_STREAM_LIMIT:
                    await asyncio.sleep(0.01)
            assert len(transport._pending) == peer.PENDING_STREAM_LIMIT
            # The oldest were ended, and told why; the newest are still open.
            assert await calls[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "sending anything" in await calls[0].details()
            assert not calls[-1].done()

            # Real work goes on: a client is answered, a write commits through Raft.
            async with grpc.aio.insecure_channel(live.address, options=OWN_CONNECTION) as fresh:
                assert await live.serves(fresh)
            assert await live.commits("after-slowloris")
            for call in calls:
                call.cancel()
            async with asyncio.timeout(10):
                while transport._pending:
                    await asyncio.sleep(0.01)
            assert live.healthy
        finally:
            for ch in channels:
                await ch.close()


async def test_non_voter_streams_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer, "OBSERVER_STREAM_LIMIT", 8)
    async with live_node(tmp_path) as live, grpc.aio.insecure_channel(live.address) as channel:
        transport = live.node.transport
        calls = []
        for source in range(100, 120):  # 20 "observers", each fetching once and then silent
            call = qpb_grpc.QuorumPeerStub(channel).Exchange()
            fetch = qpb.FetchRequest(cluster_id=CLUSTER_ID, replica_id=source, leader_epoch=1, max_bytes=1024)
            await call.write(qpb.PeerMessage(source=source, fetch_request=fetch))
            await call.read()  # answered: the stream is identified as node `source`'s
            calls.append(call)
        assert len(transport._observers) == 8 and sorted(transport._observers) == list(range(112, 120))
        assert await calls[0].code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "silent longest" in await calls[0].details()
        assert not calls[-1].done()
        assert await live.serves(channel) and live.healthy
        for call in calls:
            call.cancel()


async def test_idle_unary_calls_take_at_most_a_connections_streams(tmp_path: Path) -> None:
    """A unary call whose request never comes holds one of its connection's MAX_STREAMS_PER_CONNECTION streams; past
    them the client waits on its side, while other connections are served."""
    async with live_node(tmp_path) as live:
        idle = grpc.aio.insecure_channel(live.address, options=OWN_CONNECTION)
        try:
            create = idle.stream_stream(
                "/pykraft.controller.v1.Controller/CreateTopics",
                request_serializer=cpb.CreateTopicsRequest.SerializeToString,
                response_deserializer=cpb.CreateTopicsResponse.FromString,
            )
            calls = []
            for _ in range(MAX_STREAMS_PER_CONNECTION):
                call = create()  # no request is ever written: the server waits for it
                await call.wait_for_connection()
                calls.append(call)
            # The connection is full: one more call on it waits for a free stream, its deadline passes.
            assert not await _answered(idle, timeout=1.0)
            async with grpc.aio.insecure_channel(live.address, options=OWN_CONNECTION) as fresh:
                assert await live.serves(fresh)
            for call in calls:
                call.cancel()
            assert await _answered(idle, timeout=10.0)  # the streams are free again
            assert live.healthy
        finally:
            await idle.close()


async def test_a_burst_of_calls_on_a_new_connection_is_served(tmp_path: Path) -> None:
    """An admin client multiplexes its calls on one connection: a burst of them at its start is within the stream
    bound (with 100 per connection, 128 callers starting at once were refused with UNAVAILABLE)."""
    async with live_node(tmp_path) as live:
        async with grpc.aio.insecure_channel(live.address, options=OWN_CONNECTION) as channel:
            answered = await asyncio.gather(*(_answered(channel, timeout=30.0) for _ in range(300)))
        assert all(answered) and live.healthy


async def _answered(channel: grpc.aio.Channel, timeout: float) -> bool:
    describe = channel.unary_unary(
        "/pykraft.controller.v1.Controller/DescribeCluster",
        request_serializer=cpb.DescribeClusterRequest.SerializeToString,
        response_deserializer=cpb.DescribeClusterResponse.FromString,
    )
    try:
        await describe(cpb.DescribeClusterRequest(), timeout=timeout)
    except grpc.aio.AioRpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
        return False
    return True


async def test_a_connection_without_calls_is_closed_by_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """grpc.max_connection_idle_ms: a connection that carries no call is closed by the server (GOAWAY), so idle
    connections do not hold places under MAX_CONNECTIONS for ever; the client's channel reconnects on its next
    call. (Without the option the channel stays READY: its own idle timeout is 30 minutes.)"""
    idle = [(k, 300 if k == "grpc.max_connection_idle_ms" else v) for k, v in server_module.SERVER_OPTIONS]
    assert ("grpc.max_connection_idle_ms", 300) in idle
    monkeypatch.setattr(server_module, "SERVER_OPTIONS", idle)
    async with live_node(tmp_path) as live:
        channel = grpc.aio.insecure_channel(live.address, options=OWN_CONNECTION)
        try:
            assert await live.serves(channel)
            assert channel.get_state() == grpc.ChannelConnectivity.READY
            async with asyncio.timeout(5):
                while channel.get_state() == grpc.ChannelConnectivity.READY:
                    await channel.wait_for_state_change(grpc.ChannelConnectivity.READY)
            assert channel.get_state() == grpc.ChannelConnectivity.IDLE  # the server went away, not the client
            assert await live.serves(channel)  # and the next call reconnects
        finally:
            await channel.close()
