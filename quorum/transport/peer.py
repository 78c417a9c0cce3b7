"""grpc.aio transport for the peer protocol.

Each node keeps one outbound bidi stream per peer (its requests go out, the peer's responses come back) and
accepts inbound streams (requests come in, its responses go back on the same stream). Send never blocks: every
stream has a bounded queue, and a message that does not fit is dropped — the core retries on its own timeouts, so
a slow or dead peer costs memory bounded by the queue, never the event loop.

A stream that fails to connect or is reset reports the peer unreachable (the core may then start a pre-vote early);
the client reconnects with exponential backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import grpc
import structlog

from quorum.raft.config import VoterAddress
from quorum.raft.messages import REQUEST_TYPES, Envelope
from quorum.transport.convert import from_proto, to_proto
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a full 8 MiB fetch plus headroom
QUEUE_LIMIT = 512  # messages waiting per stream
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]
SERVER_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.so_reuseport", 0),
]

log = structlog.get_logger("quorum.transport")

Deliver = Callable[[Envelope], None]


class PeerTransport(pb_grpc.QuorumPeerServicer):
    def __init__(
        self, node_id: int, peers: dict[int, VoterAddress], deliver: Deliver, unreachable: Callable[[int], None]
    ) -> None:
        self.node_id = node_id
        self._deliver = deliver
        self._unreachable = unreachable
        self._clients = {pid: _PeerClient(self, addr) for pid, addr in peers.items() if pid != node_id}
        self._inbound: dict[int, asyncio.Queue[pb.PeerMessage | None]] = {}
        self.dropped = 0

    def add_to_server(self, server: grpc.aio.Server) -> None:
        pb_grpc.add_QuorumPeerServicer_to_server(self, server)

    def start(self) -> None:
        for client in self._clients.values():
            client.start()

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._clients.values()), return_exceptions=True)
        for q in self._inbound.values():
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(None)

    def send(self, env: Envelope) -> None:
        message = to_proto(env.source, env.message)
        if isinstance(env.message, REQUEST_TYPES):
            client = self._clients.get(env.destination)
            queue = client.queue if client is not None else None
        else:
            queue = self._inbound.get(env.destination)
        if queue is None:
            self.dropped += 1
            return
        try:
            queue.put_nowait(message)
        except asyncio.QueueFull:
            self.dropped += 1

    # The inbound side: a peer's requests in, our responses out.
    async def Exchange(
        self, request_iterator: AsyncIterator[pb.PeerMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.PeerMessage]:
        queue: asyncio.Queue[pb.PeerMessage | None] = asyncio.Queue(QUEUE_LIMIT)
        source: list[int] = []

        async def read() -> None:
            try:
                async for msg in request_iterator:
                    if not source:
                        source.append(msg.source)
                        old = self._inbound.get(msg.source)
                        self._inbound[msg.source] = queue
                        if old is not None:
                            with contextlib.suppress(asyncio.QueueFull):
                                old.put_nowait(None)
                    try:
                        env = from_proto(msg, self.node_id)
                    except ValueError as e:
                        log.warning("peer_message_rejected", source=msg.source, error=str(e))
                        continue
                    self._deliver(env)
            finally:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            reader.cancel()
            if source and self._inbound.get(source[0]) is queue:
                del self._inbound[source[0]]


class _PeerClient:
    """The outbound stream to one peer, reconnecting forever."""

    def __init__(self, transport: PeerTransport, address: VoterAddress) -> None:
        self.transport = transport
        self.address = address
        self.queue: asyncio.Queue[pb.PeerMessage] = asyncio.Queue(QUEUE_LIMIT)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"peer-{self.address.node_id}")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        backoff = 0.05
        target = f"{self.address.host}:{self.address.port}"
        peer = self.address.node_id
        while True:
            channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
            writer: asyncio.Task[None] | None = None
            connected = False
            try:
                call = pb_grpc.QuorumPeerStub(channel).Exchange()
                writer = asyncio.create_task(self._write(call))
                async for msg in call:
                    connected = True
                    backoff = 0.05
                    try:
                        env = from_proto(msg, self.transport.node_id)
                    except ValueError as e:
                        log.warning("peer_message_rejected", source=peer, error=str(e))
                        continue
                    self.transport._deliver(env)
            except grpc.aio.AioRpcError as e:
                if connected or e.code() != grpc.StatusCode.UNAVAILABLE or backoff <= 0.05:
                    log.info("peer_stream_failed", peer=peer, target=target, code=e.code().name)
            except asyncio.CancelledError:
                raise
            finally:
                if writer is not None:
                    writer.cancel()
                await channel.close(grace=None)
            # The stream is gone: queued requests are stale (the core resends on its timeouts).
            while not self.queue.empty():
                self.queue.get_nowait()
            self.transport._unreachable(peer)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            while True:
                await call.write(await self.queue.get())
