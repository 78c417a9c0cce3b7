"""The peer protocol's transport: requests out to each peer, and the peers' requests in, on gRPC bidi streams or on
frame connections (quorum/transport/frames.py), which carry the same PeerMessages for a fraction of the cost.

Each node keeps one outbound stream per peer (:mod:`quorum.transport.peer_client`: its requests go out, the peer's
responses come back) and accepts inbound streams on its gRPC listener (``Exchange``) and, when started with
:meth:`PeerTransport.listen_frames`, on its frame listener, whose port ``FrameEndpoint`` names to the peers that ask.
Both kinds of inbound stream are served by the same code (:meth:`PeerTransport._serve`). Send never blocks: a gRPC
stream has a bounded queue, a frame connection a bounded write buffer, and a message that does not fit is dropped —
the core retries on its own timeouts, so a slow or dead peer costs bounded memory, never the event loop. On a frame
connection a message is written as it is sent, in the same turn of the loop.

A stream that is reset reports the peer unreachable (the core may then start a pre-vote early). gRPC errors end a
stream and a new one is opened; any other exception in a stream's tasks is a bug of this node and goes to
``on_fault`` (the node's fatal path) — never a stream that silently stops for good.

With :meth:`PeerTransport.secure` (mutual TLS) every inbound stream is checked against the node id its caller's
certificate proves (``authenticate``; on frames, ``listen_frames``' ``authenticate``): a caller that proves none is
refused before any message is read, and a stream is ended at the first message that claims another node (its
source, or the replica or leader id inside it), that is a response, or that only a voter may send (Vote,
BeginQuorumEpoch, EndQuorumEpoch) from a non-voter — before that message reaches the core. Refusals end the stream
with PERMISSION_DENIED (a frame connection is closed). Outbound, ``server_name`` is the name the peer's certificate
must carry (checked instead of the dialled host), so a process with another node's certificate at a voter's address
is not taken for that voter.

Hostile input is bounded (quorum/transport/limits.py says why each size): messages over MAX_MESSAGE_BYTES are
refused (by gRPC with RESOURCE_EXHAUSTED; on frames the connection ends before the body is read); a gRPC connection
holds MAX_STREAMS_PER_CONNECTION calls, and each listener MAX_CONNECTIONS connections; a gRPC connection with no call
open for CONNECTION_MAX_IDLE_MS is closed, and one whose peer stops answering pings too (frames: TCP keepalive);
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

from quorum.fault import spawn
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
    AuthenticateCertificate,
    FrameListener,
    PeerRefused,
    encode_message,
    read_frames,
)
from quorum.transport.limits import (
    HANDSHAKE_TIMEOUT_MS,
    MAX_CONNECTIONS,
    MAX_MESSAGE_BYTES,
    OBSERVER_STREAM_LIMIT,
    PENDING_STREAM_LIMIT,
    QUEUE_LIMIT,
    WRITE_BUFFER_LIMIT,
)
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc
from quorum.transport.peer_client import PeerClient

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
        self._clients = {pid: PeerClient(self, addr) for pid, addr in peers.items() if pid != node_id}
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
        try:
            if isinstance(env.message, REQUEST_TYPES):
                client = self._clients.get(env.destination)
                if client is None:
                    self.dropped += 1
                elif client.writer is not None:
                    self._write_now(client.writer, env)
                else:
                    deadline = time.monotonic() + self.request_timeout_s
                    client.queue.put_nowait((deadline, to_proto(env.source, env.message)))
            else:
                stream = self._inbound.get(env.destination)
                if stream is None:
                    self.dropped += 1
                elif stream.writer is not None:
                    self._write_now(stream.writer, env)
                else:
                    stream.queue.put_nowait(to_proto(env.source, env.message))
        except asyncio.QueueFull:
            self.dropped += 1

    def _write_now(self, writer: asyncio.StreamWriter, env: Envelope) -> None:
        # A peer that stops reading holds at most WRITE_BUFFER_LIMIT of ours; past it, as past a full queue, messages
        # are dropped (the core retries on its timeouts).
        if writer.is_closing() or writer.transport.get_write_buffer_size() > WRITE_BUFFER_LIMIT:
            self.dropped += 1
        else:
            writer.writelines(encode_message(env.source, env.message))

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
