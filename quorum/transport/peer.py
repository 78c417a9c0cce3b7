"""grpc.aio transport for the peer protocol.

Each node keeps one outbound bidi stream per peer (its requests go out, the peer's responses come back) and
accepts inbound streams (requests come in, its responses go back on the same stream). Send never blocks: every
stream has a bounded queue, and a message that does not fit is dropped — the core retries on its own timeouts, so
a slow or dead peer costs memory bounded by the queue, never the event loop.

A stream that is reset reports the peer unreachable (the core may then start a pre-vote early). Each peer has one
channel for the node's life; a new stream waits for it to be ready (gRPC reconnects with a short backoff), so a
restarted peer is reached within ~0.1 s — and hears at once the EndQuorumEpoch or BeginQuorumEpoch queued for it.
Requests that waited longer than the request timeout are dropped unsent: the core has retried them by then.

gRPC errors end a stream and a new one is opened; any other exception in a stream's tasks is a bug of this node
and goes to ``on_fault`` (the node's fatal path) — never a stream that silently stops for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

import grpc
import structlog

from quorum.fault import spawn
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
    # Reconnect attempts to a loopback or LAN peer cost next to nothing; a short ceiling means a restarted voter
    # hears the leader (or a resigning leader's EndQuorumEpoch) within ~0.1 s instead of up to a second.
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 100),
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
OnFault = Callable[[str, BaseException], None]


class PeerTransport(pb_grpc.QuorumPeerServicer):
    def __init__(
        self,
        node_id: int,
        peers: dict[int, VoterAddress],
        deliver: Deliver,
        unreachable: Callable[[int], None],
        request_timeout_ms: int = 2000,
        on_fault: OnFault | None = None,
    ) -> None:
        self.node_id = node_id
        self.request_timeout_s = request_timeout_ms / 1000
        self._deliver = deliver
        self._unreachable = unreachable
        self.on_fault: OnFault = on_fault or _log_fault
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
        try:
            if isinstance(env.message, REQUEST_TYPES):
                client = self._clients.get(env.destination)
                if client is None:
                    self.dropped += 1
                    return
                client.queue.put_nowait((time.monotonic() + self.request_timeout_s, message))
            else:
                queue = self._inbound.get(env.destination)
                if queue is None:
                    self.dropped += 1
                    return
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

        name = f"peer-inbound-{self.node_id}"
        reader = spawn(read(), name=name, on_error=lambda e: self.on_fault("reading an inbound peer stream", e))
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            reader.cancel()
            if source and self._inbound.get(source[0]) is queue:
                del self._inbound[source[0]]


class _PeerClient:
    """The outbound stream to one peer, reopened on one long-lived channel whenever it breaks."""

    def __init__(self, transport: PeerTransport, address: VoterAddress) -> None:
        self.transport = transport
        self.address = address
        self.queue: asyncio.Queue[tuple[float, pb.PeerMessage]] = asyncio.Queue(QUEUE_LIMIT)  # (expiry, request)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        peer = self.address.node_id
        self._task = spawn(
            self._run(),
            name=f"peer-{peer}",
            on_error=lambda e: self.transport.on_fault(f"running the stream to node {peer}", e),
        )

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # a failure went to on_fault already
                await self._task

    async def _run(self) -> None:
        target = f"{self.address.host}:{self.address.port}"
        peer = self.address.node_id
        channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        backoff = 0.0  # after streams that fail at once, unanswered (the peer refuses them): 20 ms doubling to 1 s
        try:
            while True:
                writer: asyncio.Task[None] | None = None
                answered = False
                started = time.monotonic()
                try:
                    # wait_for_ready: the call waits (gRPC reconnecting on its short backoff) instead of failing
                    # fast while the peer is down.
                    call = pb_grpc.QuorumPeerStub(channel).Exchange(wait_for_ready=True)
                    writer = spawn(
                        self._write(call),
                        name=f"peer-writer-{peer}",
                        on_error=lambda e: self.transport.on_fault(f"writing to node {peer}", e),
                    )
                    async for msg in call:
                        answered = True
                        try:
                            env = from_proto(msg, self.transport.node_id)
                        except ValueError as e:
                            log.warning("peer_message_rejected", source=peer, error=str(e))
                            continue
                        self.transport._deliver(env)
                except grpc.aio.AioRpcError as e:
                    log.info("peer_stream_failed", peer=peer, target=target, code=e.code().name)
                finally:
                    if writer is not None:
                        writer.cancel()
                self.transport._unreachable(peer)
                healthy = answered or time.monotonic() - started >= 1.0
                backoff = 0.0 if healthy else min(max(backoff * 2, 0.02), 1.0)
                await asyncio.sleep(backoff)
        finally:
            await channel.close(grace=None)

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            # Take nothing from the queue until the stream is up: a request held while the peer was down would go
            # out however stale it had become.
            await call.wait_for_connection()
            while True:
                expiry, message = await self.queue.get()
                if time.monotonic() < expiry:  # else the core has already given up on it and retried
                    await call.write(message)


def _log_fault(doing: str, error: BaseException) -> None:
    log.critical("peer_transport_failed", doing=doing, error=f"{type(error).__name__}: {error}")
