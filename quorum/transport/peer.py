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

With :meth:`PeerTransport.secure` (mutual TLS) every inbound stream is checked against the node id its caller's
certificate proves (``authenticate``): a caller that proves none is refused before any message is read, and a stream
is ended at the first message that claims another node (its source, or the replica or leader id inside it), that is
a response, or that only a voter may send (Vote, BeginQuorumEpoch, EndQuorumEpoch) from a non-voter — before that
message reaches the core. Refusals end the stream with PERMISSION_DENIED. Outbound, ``server_name`` is the name the
peer's certificate must carry (gRPC checks it instead of the dialled host), so a process with another node's
certificate at a voter's address is not taken for that voter.

Hostile input is bounded (the constants below say why each size): gRPC refuses messages over MAX_MESSAGE_BYTES with
RESOURCE_EXHAUSTED; a connection holds MAX_STREAMS_PER_CONNECTION calls and a listener MAX_CONNECTIONS connections,
one with no call open for CONNECTION_MAX_IDLE_MS is closed, and one whose peer stops answering pings too;
inbound streams that have sent nothing yet, and non-voters' streams, are capped, the stalest ended to make room.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator, Callable, Collection

import grpc
import structlog
from google.protobuf.message import DecodeError

from quorum.fault import cancel_until_done, spawn
from quorum.raft.config import VoterAddress
from quorum.raft.messages import (
    REQUEST_TYPES,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Envelope,
    FetchRequest,
    FetchSnapshotRequest,
)
from quorum.transport.convert import from_proto, to_proto
from quorum.transport.frames import (
    READ_LIMIT,
    AuthenticateCertificate,
    FrameListener,
    PeerRefused,
    encode,
    keep_alive,
    let_go,
    read_frames,
)
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

# Message size limits, set deliberately (gRPC's default receive limit is 4 MiB, its send limit unbounded). The
# largest legitimate message on a node's listener is a Raft FetchResponse or FetchSnapshotResponse: up to
# RaftConfig.fetch_max_bytes (8 MiB, Kafka's MAX_FETCH_SIZE_BYTES) of records — and a single batch may reach
# max_batch_bytes (8 MiB) on its own — plus a few dozen bytes of header. The quorum admin's AppendRecords carries at
# most one such batch, a CreateTopics of 10,000 topics with explicit 3-replica assignments is ~0.5 MiB, and ExportLog
# chunks default to 4 MiB. 16 MiB is twice the largest of them; anything bigger is refused by gRPC itself with
# RESOURCE_EXHAUSTED before a byte of it reaches Python.
RAFT_FETCH_MAX_BYTES = 8 * 1024 * 1024
MAX_MESSAGE_BYTES = 2 * RAFT_FETCH_MAX_BYTES
# Slowloris bounds. A connection holds at most this many open calls (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a
# peer uses one; an admin client multiplexes all its calls on one connection (the benchmarks keep 64 to 256 in
# flight). Past the limit, a client that knows it waits for a slot on its side; but calls opened in a burst before
# the server's SETTINGS reach the client are refused (REFUSED_STREAM: UNAVAILABLE): at 100, 128 CreateTopics callers
# starting at once got thousands of UNAVAILABLE in the CreateTopics benchmark, and 1,000 calls at once on a fresh
# channel 636 (grpcio 1.78). 1,024 leaves that far above any client of ours.
MAX_STREAMS_PER_CONNECTION = 1024
# Connections a listener accepts at once: 3-5 voters, one or two per broker (hundreds at most), admin tools. Beyond
# it new connections are refused, so idle connections cost at most this many x the streams above.
MAX_CONNECTIONS = 4096
# A connection that has not finished its HTTP/2 (and TLS) handshake by then is closed (gRPC's default: 120 s).
HANDSHAKE_TIMEOUT_MS = 10_000
# A connection with no call open for this long is closed (HTTP/2 GOAWAY; gRPC's default: never), so connections
# that carry nothing do not hold a place under MAX_CONNECTIONS for ever. Kafka's connections.max.idle.ms default.
# Peers and brokers are never idle (a peer stream stays open, heartbeats every 2 s); an admin client's channel
# reconnects on its next call.
CONNECTION_MAX_IDLE_MS = 600_000
# The server pings each connection this often and closes it when the ack takes longer than the timeout: a peer that
# vanished without closing (a host powered off, a dropped route) stops holding its connection and streams.
SERVER_KEEPALIVE_TIME_MS = 60_000
SERVER_KEEPALIVE_TIMEOUT_MS = 20_000
# Inbound peer streams that have not sent their first message yet. A real peer's stream may stay silent for long (a
# leader sends a follower nothing between elections), so there is no deadline; instead, at this many the oldest is
# ended to make room: an idle stranger costs a bounded amount, and a real peer whose stream is ended reconnects.
PENDING_STREAM_LIMIT = 64
# Inbound streams of non-voters (brokers' observers) at once, one per node id; at the limit the one silent longest is
# ended (a live observer fetches all the time). Voters' streams are never counted nor ended for room.
OBSERVER_STREAM_LIMIT = 1024
QUEUE_LIMIT = 512  # messages waiting per stream
# Bytes a frame connection may hold unsent (a peer that stops reading); more are dropped, as past a full queue. Twice
# the largest message: a fetch answer in full behind another. (On TLS the count is the TLS layer's: the socket's own
# buffer below it adds at most a message and 64 KiB.)
WRITE_BUFFER_LIMIT = 2 * MAX_MESSAGE_BYTES
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
SERVER_OPTIONS = [  # every node listener (peers, quorum admin, Controller service) and the brokers' listener
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
    ("grpc.max_allowed_incoming_connections", MAX_CONNECTIONS),
    ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_MS),
    ("grpc.max_connection_idle_ms", CONNECTION_MAX_IDLE_MS),
    ("grpc.keepalive_time_ms", SERVER_KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", SERVER_KEEPALIVE_TIMEOUT_MS),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.so_reuseport", 0),
]

log = structlog.get_logger("quorum.transport")

Deliver = Callable[[Envelope], None]
OnFault = Callable[[str, BaseException], None]
# The node id a caller's certificate proves; raises PeerRefused when it may not use the peer protocol at all.
Authenticate = Callable[[grpc.aio.ServicerContext], int]
OBSERVER_REQUESTS = (FetchRequest, FetchSnapshotRequest)  # all a non-voter (a broker's observer) may send


def impersonation(env: Envelope, identity: int, voters: Collection[int]) -> str | None:
    """Why ``env`` may not come from a caller proven to be ``identity``; None when it may."""
    message = env.message
    if env.source != identity:
        return f"node {identity} sent a message as node {env.source}"
    if not isinstance(message, REQUEST_TYPES):
        return f"node {identity} sent a {type(message).__name__} on an inbound stream"
    claimed = message.leader_id if isinstance(message, BeginQuorumEpochRequest | EndQuorumEpochRequest) else None
    if claimed is None:
        claimed = message.replica_id
    if claimed != identity:
        return f"node {identity} sent a {type(message).__name__} for node {claimed}"
    if identity not in voters and not isinstance(message, OBSERVER_REQUESTS):
        return f"node {identity} is not a voter and sent a {type(message).__name__}"
    return None


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
        self._voters = frozenset(peers)
        self._inbound: dict[int, _Inbound] = {}  # where our responses to each node go
        self.dropped = 0
        self.refused = 0  # inbound streams ended by secure()'s checks
        self.undecodable = 0  # inbound streams ended at bytes that are no PeerMessage
        self.streams_ended = 0  # inbound streams ended to stay within PENDING_STREAM_LIMIT / OBSERVER_STREAM_LIMIT
        self._pending: dict[int, _Inbound] = {}  # inbound streams with no message yet, oldest first
        self._observers: dict[int, _Inbound] = {}  # non-voters' inbound streams, by node id
        self.channel_credentials: grpc.ChannelCredentials | None = None
        self.server_name: Callable[[int], str] | None = None
        self._authenticate: Authenticate | None = None
        # Frames (quorum/transport/frames.py): whether to dial a peer's frame listener when it names one, with
        # which TLS context (None: plain TCP); and this node's own listener, if it has one.
        self.dial_frames = True
        self.frame_ssl: ssl.SSLContext | None = None
        self.frames_port = 0
        self._frames: FrameListener | None = None

    def secure(
        self,
        channel_credentials: grpc.ChannelCredentials,
        authenticate: Authenticate | None,
        server_name: Callable[[int], str] | None = None,
        frame_ssl: ssl.SSLContext | None = None,
    ) -> None:
        """TLS: dial peers with ``channel_credentials`` (expecting ``server_name(peer)`` in their certificates), and
        check every inbound stream with ``authenticate`` (None: the server asks for no client certificates, so
        there is nothing to check). Frame connections are dialled with ``frame_ssl`` (the same certificates as an
        SSL context); without it, only gRPC streams. Call before :meth:`start`."""
        self.channel_credentials = channel_credentials
        self.server_name = server_name
        self._authenticate = authenticate
        self.frame_ssl = frame_ssl
        self.dial_frames = frame_ssl is not None

    def add_to_server(self, server: grpc.aio.Server) -> None:
        pb_grpc.add_QuorumPeerServicer_to_server(self, server)

    def start(self) -> None:
        for client in self._clients.values():
            client.start()

    @property
    def peers(self) -> list[int]:
        """The nodes this one keeps an outbound stream to."""
        return list(self._clients)

    @property
    def frames_turned_away(self) -> int:
        """Frame connections closed as they came, over the connection cap."""
        return self._frames.turned_away if self._frames is not None else 0

    @property
    def frame_handshakes_failed(self) -> int:
        """Frame connections whose TLS handshake failed or timed out."""
        return self._frames.handshakes_failed if self._frames is not None else 0

    def wire(self, peer: int) -> str | None:
        """How our stream to ``peer`` runs now: "frames" (connected) or "grpc" (a call open, perhaps still waiting
        for the peer), else None."""
        client = self._clients.get(peer)
        return client.wire if client is not None else None

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self._clients.values()), return_exceptions=True)
        if self._frames is not None:
            await self._frames.close()
            self._frames, self.frames_port = None, 0  # FrameEndpoint names no port any more
        for stream in self._inbound.values():
            with contextlib.suppress(asyncio.QueueFull):
                stream.queue.put_nowait(None)

    def send(self, env: Envelope) -> None:
        """Queue ``env`` for its stream's writer; on a frame connection, write it at once (it leaves in this turn of
        the loop, before the fsync that may follow)."""
        message = to_proto(env.source, env.message)
        try:
            if isinstance(env.message, REQUEST_TYPES):
                client = self._clients.get(env.destination)
                if client is None:
                    self.dropped += 1
                elif client.writer is not None:
                    self._write_now(client.writer, message)
                else:
                    client.queue.put_nowait((time.monotonic() + self.request_timeout_s, message))
            else:
                stream = self._inbound.get(env.destination)
                if stream is None:
                    self.dropped += 1
                elif stream.writer is not None:
                    self._write_now(stream.writer, message)
                else:
                    stream.queue.put_nowait(message)
        except asyncio.QueueFull:
            self.dropped += 1

    def _write_now(self, writer: asyncio.StreamWriter, message: pb.PeerMessage) -> None:
        # A peer that stops reading holds at most WRITE_BUFFER_LIMIT of ours; past it, as past a full queue, messages
        # are dropped (the core retries on its timeouts).
        if writer.is_closing() or writer.transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            self.dropped += 1
        else:
            writer.writelines(encode(message))

    # The inbound side: a peer's requests in, our responses out.
    async def Exchange(
        self, request_iterator: AsyncIterator[pb.PeerMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.PeerMessage]:
        identity: int | None = None
        if self._authenticate is not None:
            try:
                identity = self._authenticate(context)
            except PeerRefused as e:
                self._refused(context.peer(), str(e))
                context.set_code(grpc.StatusCode.PERMISSION_DENIED)
                context.set_details(str(e))
                return
        stream = _Inbound(asyncio.Queue(QUEUE_LIMIT))
        messages = _decoded(request_iterator, stream.undecodable)
        async with contextlib.aclosing(self._serve(stream, messages, identity)) as responses:
            async for item in responses:
                yield item
        # The status is set, not raised with context.abort(): in grpcio 1.78 an aborted call keeps its HTTP/2 stream
        # counted as open, and MAX_STREAMS_PER_CONNECTION of them leave the connection refusing every new call.
        if (outcome := self._outcome(stream, context.peer())) is not None:
            context.set_code(outcome[0])
            context.set_details(outcome[1])

    async def FrameEndpoint(
        self, request: pb.FrameEndpointRequest, context: grpc.aio.ServicerContext
    ) -> pb.FrameEndpointResponse:
        return pb.FrameEndpointResponse(port=self.frames_port)

    async def listen_frames(
        self,
        host: str,
        port: int = 0,
        ssl_context: Callable[[], ssl.SSLContext] | None = None,
        authenticate: AuthenticateCertificate | None = None,
    ) -> int:
        """Take peer streams as frames (quorum/transport/frames.py) on ``host:port`` too (0: any free port), and
        name the port to peers that ask. ``ssl_context`` (the context for each new connection) and ``authenticate``
        are this listener's counterparts of :meth:`secure`'s. Returns the port."""
        if self._frames is not None:
            raise RuntimeError(f"node {self.node_id} already takes frames on port {self.frames_port}")
        self._frames = FrameListener(
            self._serve_frames,
            max_connections=MAX_CONNECTIONS,
            handshake_timeout_s=HANDSHAKE_TIMEOUT_MS / 1000,
            ssl_context=ssl_context,
            authenticate=authenticate,
            refuse=self._refused,
            on_fault=lambda e: self.on_fault("serving a peer frame connection", e),
        )
        self.frames_port = await self._frames.start(host, port)
        return self.frames_port

    async def _serve_frames(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, identity: int | None
    ) -> None:
        stream = _Inbound(asyncio.Queue(QUEUE_LIMIT), writer)
        messages = read_frames(reader, MAX_MESSAGE_BYTES, stream.undecodable)
        async with contextlib.aclosing(self._serve(stream, messages, identity)) as responses:
            async for _ in responses:  # send() writes our responses on the connection itself
                pass
        self._outcome(stream, str(writer.get_extra_info("peername")))

    async def _serve(
        self, stream: _Inbound, messages: AsyncIterator[pb.PeerMessage], identity: int | None
    ) -> AsyncIterator[pb.PeerMessage]:
        """Deliver the requests in ``messages`` (each held to ``identity``, when there is one) and yield the
        responses to their sender, until either side ends; then ``stream`` says why (see :meth:`_outcome`)."""
        queue = stream.queue
        self._admit_pending(stream)

        async def read() -> None:
            try:
                async for msg in messages:
                    stream.last_active = time.monotonic()
                    if identity is not None:
                        # Checked before anything else: a stream claiming another node must not even take over
                        # the queue our responses to that node go to.
                        try:
                            env = from_proto(msg, self.node_id)
                        except ValueError as e:
                            log.warning("peer_message_rejected", source=msg.source, error=str(e))
                            continue
                        if (reason := impersonation(env, identity, self._voters)) is not None:
                            stream.refused.append(reason)
                            return
                    if stream.source is None:
                        stream.source = msg.source
                        self._identified(stream, msg.source)
                    if identity is None:
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
        stream.reader = reader
        try:
            while (item := await queue.get()) is not None and stream.ended is None:
                yield item
        finally:
            reader.cancel()
            self._pending.pop(id(stream), None)
            if stream.source is not None:
                if self._inbound.get(stream.source) is stream:
                    del self._inbound[stream.source]
                if self._observers.get(stream.source) is stream:
                    del self._observers[stream.source]

    def _outcome(self, stream: _Inbound, peer: str) -> tuple[grpc.StatusCode, str] | None:
        """Why an inbound stream that is over was ended by this node (None: it was not), counted and logged."""
        if stream.refused:
            self._refused(peer, stream.refused[0])
            return grpc.StatusCode.PERMISSION_DENIED, stream.refused[0]
        if stream.undecodable:
            self.undecodable += 1
            log.warning("peer_message_undecodable", peer=peer, source=stream.source, reason=stream.undecodable[0])
            return grpc.StatusCode.INVALID_ARGUMENT, stream.undecodable[0]
        if stream.ended is not None:
            return grpc.StatusCode.RESOURCE_EXHAUSTED, stream.ended
        return None

    def _admit_pending(self, stream: _Inbound) -> None:
        """Count a new inbound stream as pending (no message yet), ending the oldest pending one at the limit."""
        if len(self._pending) >= PENDING_STREAM_LIMIT:
            oldest = self._pending.pop(next(iter(self._pending)))
            self.streams_ended += 1
            oldest.end(f"{PENDING_STREAM_LIMIT} peer streams were open without sending anything; this was the oldest")
        self._pending[id(stream)] = stream

    def _identified(self, stream: _Inbound, source: int) -> None:
        """``stream`` sent its first message, as ``source``: it becomes the stream our responses to it go to."""
        self._pending.pop(id(stream), None)
        old = self._inbound.get(source)
        self._inbound[source] = stream
        if old is not None:
            with contextlib.suppress(asyncio.QueueFull):
                old.queue.put_nowait(None)
        if source in self._voters:
            return
        self._observers.pop(source, None)  # its old stream, just ended
        if len(self._observers) >= OBSERVER_STREAM_LIMIT:
            silent = min(self._observers, key=lambda n: self._observers[n].last_active)
            self.streams_ended += 1
            self._observers.pop(silent).end(
                f"{OBSERVER_STREAM_LIMIT} non-voters had peer streams open; node {silent}'s was silent longest"
            )
        self._observers[source] = stream

    def _refused(self, peer: str, reason: str) -> None:
        self.refused += 1
        log.warning("peer_refused", peer=peer, reason=reason)


class _Inbound:
    """One inbound stream: its response queue (a frame connection's writer instead, when it is one), and what
    ending it from outside needs."""

    def __init__(self, queue: asyncio.Queue[pb.PeerMessage | None], writer: asyncio.StreamWriter | None = None) -> None:
        self.queue = queue
        self.writer = writer
        self.last_active = time.monotonic()
        self.reader: asyncio.Task[None] | None = None
        self.source: int | None = None  # the node its first message came from
        self.ended: str | None = None  # why it was ended to make room (the caller hears RESOURCE_EXHAUSTED)
        self.refused: list[str] = []  # why its caller may not send what it sent (PERMISSION_DENIED)
        self.undecodable: list[str] = []  # why its bytes were no message (INVALID_ARGUMENT)

    def end(self, reason: str) -> None:
        self.ended = reason
        if self.reader is not None:
            self.reader.cancel()  # its finally wakes the stream's response loop
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(None)


class _PeerClient:
    """The outbound stream to one peer, reopened on one long-lived channel whenever it breaks."""

    def __init__(self, transport: PeerTransport, address: VoterAddress) -> None:
        self.transport = transport
        self.address = address
        self.queue: asyncio.Queue[tuple[float, pb.PeerMessage]] = asyncio.Queue(QUEUE_LIMIT)  # (expiry, request)
        self.writer: asyncio.StreamWriter | None = None  # while a frame connection is up: send() writes on it
        self.wire: str | None = None  # "frames" or "grpc": the stream open now (a frame connection, a gRPC call)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        peer = self.address.node_id
        self._task = spawn(
            self._run(),
            name=f"peer-{peer}",
            on_error=lambda e: self.transport.on_fault(f"running the stream to node {peer}", e),
        )

    async def close(self) -> None:
        task = self._task
        if task is None:
            return
        await cancel_until_done([task])  # a cancellation swallowed on the way (see _run) must not hang close()
        with contextlib.suppress(asyncio.CancelledError, Exception):  # a failure went to on_fault already
            task.result()

    @property
    def target(self) -> str:
        return f"{self.address.host}:{self.address.port}"

    async def _run(self) -> None:
        target = self.target
        peer = self.address.node_id
        credentials, server_name = self.transport.channel_credentials, self.transport.server_name
        if credentials is None:
            channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        else:
            names = [("grpc.ssl_target_name_override", server_name(peer))] if server_name is not None else []
            channel = grpc.aio.secure_channel(target, credentials, options=CHANNEL_OPTIONS + names)
        stub = pb_grpc.QuorumPeerStub(channel)
        backoff = 0.0  # after streams that fail at once, unanswered (the peer refuses them): 20 ms doubling to 1 s
        try:
            while True:
                answered = False
                started = time.monotonic()
                try:
                    port = await self._frame_port(stub) if self.transport.dial_frames else 0
                    if port:
                        answered = await self._exchange_frames(port)
                    else:
                        answered = await self._exchange(stub)
                except grpc.aio.AioRpcError as e:
                    if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                        # close() cancelled us while gRPC read the stream, and gRPC said so as a CANCELLED status:
                        # looping on would swallow the cancellation and keep close() waiting for ever.
                        raise asyncio.CancelledError from e
                    log.info("peer_stream_failed", peer=peer, target=target, code=e.code().name)
                self.transport._unreachable(peer)
                healthy = answered or time.monotonic() - started >= 1.0
                backoff = 0.0 if healthy else min(max(backoff * 2, 0.02), 1.0)
                await asyncio.sleep(backoff)
        finally:
            await channel.close(grace=None)

    async def _frame_port(self, stub: pb_grpc.QuorumPeerStub) -> int:
        """The peer's frame listener port; 0 when it has none (or does not know the call)."""
        try:
            # wait_for_ready: the call waits (gRPC reconnecting on its short backoff) while the peer is down.
            response = await stub.FrameEndpoint(pb.FrameEndpointRequest(), wait_for_ready=True)
        except grpc.aio.AioRpcError as e:
            if e.code() is grpc.StatusCode.UNIMPLEMENTED:
                return 0
            raise
        return response.port if 0 < response.port < 65536 else 0

    async def _exchange(self, stub: pb_grpc.QuorumPeerStub) -> bool:
        """One gRPC stream, until it ends; whether the peer answered on it."""
        peer = self.address.node_id
        answered = False
        call = stub.Exchange(wait_for_ready=True)
        self.wire = "grpc"
        writer = spawn(
            self._write(call),
            name=f"peer-writer-{peer}",
            on_error=lambda e: self.transport.on_fault(f"writing to node {peer}", e),
        )
        try:
            async for msg in call:
                if msg is None:  # gRPC could not decode the bytes (it logged them): a broken or rogue peer,
                    log.warning("peer_message_undecodable", peer=peer, target=self.target)
                    break  # not an answer: its reconnects back off as a refusing peer's do
                if not answered:
                    answered = True
                    log.info("peer_stream_connected", peer=peer, wire="grpc", target=self.target)
                self._received(msg)
        finally:
            writer.cancel()
            self.wire = None
        return answered

    async def _exchange_frames(self, port: int) -> bool:
        """One frame connection to the peer's ``port``, until it ends; whether the peer answered on it."""
        peer, host = self.address.node_id, self.address.host
        context, server_name = self.transport.frame_ssl, self.transport.server_name
        try:
            reader, writer = await asyncio.open_connection(
                host,
                port,
                ssl=context,
                server_hostname=(server_name(peer) if server_name is not None else host) if context else None,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_MS / 1000 if context else None,
                limit=READ_LIMIT,
            )
        except OSError as e:  # refused (the peer restarted on another port), unreachable, or a TLS failure
            log.info("peer_stream_failed", peer=peer, target=f"{host}:{port}", code=type(e).__name__, error=str(e))
            return False
        keep_alive(writer)
        log.info("peer_stream_connected", peer=peer, wire="frames", target=f"{host}:{port}", tls=context is not None)
        now = time.monotonic()
        while not self.queue.empty():  # what waited for the connection goes first, unless it is stale by now
            expiry, message = self.queue.get_nowait()
            if now < expiry:
                writer.writelines(encode(message))
        self.writer, self.wire = writer, "frames"
        answered = False
        problems: list[str] = []
        try:
            async for msg in read_frames(reader, MAX_MESSAGE_BYTES, problems):
                answered = True
                self._received(msg)
            if problems:
                log.warning("peer_message_undecodable", peer=peer, target=f"{host}:{port}", reason=problems[0])
        finally:
            self.writer = self.wire = None
            let_go(writer)
        return answered

    def _received(self, msg: pb.PeerMessage) -> None:
        try:
            env = from_proto(msg, self.transport.node_id)
        except ValueError as e:
            log.warning("peer_message_rejected", source=self.address.node_id, error=str(e))
            return
        self.transport._deliver(env)

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
            # Take nothing from the queue until the stream is up: a request held while the peer was down would go
            # out however stale it had become.
            await call.wait_for_connection()
            while True:
                expiry, message = await self.queue.get()
                if time.monotonic() < expiry:  # else the core has already given up on it and retried
                    await call.write(message)


async def _decoded(messages: AsyncIterator[pb.PeerMessage], undecodable: list[str]) -> AsyncIterator[pb.PeerMessage]:
    """``messages`` until one cannot be decoded: then why is put in ``undecodable`` and the stream is done. (gRPC
    raises DecodeError out of the request iterator; unhandled, it went to on_fault: one garbage frame from anyone who
    could reach the port stopped the node.)"""
    try:
        async for msg in messages:
            yield msg
    except DecodeError as e:
        undecodable.append(f"a message that is no PeerMessage: {e}")


def _log_fault(doing: str, error: BaseException) -> None:
    log.critical("peer_transport_failed", doing=doing, error=f"{type(error).__name__}: {error}")
