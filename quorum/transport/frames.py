"""The peer stream as length-prefixed frames on a TCP (or TLS) connection, beside the gRPC stream.

Each frame is a 4-byte big-endian length and that many bytes of one PeerMessage. As on the gRPC stream, the node that
connects writes its requests and reads the responses; the node that listens reads requests and writes responses.
What one message costs is the reason: a request and its answer on an open grpc.aio bidi stream took ~200 us and
~130 us of CPU at each end here, on frames ~110 us and ~55 us (benchmarks/peer_wire.py), and every commit costs the
leader such an exchange with each follower. The voter port stays the only address a peer needs: the gRPC call
``FrameEndpoint`` there names the frame port.

The peer transport (:mod:`quorum.transport.peer`) serves a frame connection with the same code as a gRPC stream: the
identity checks, the limits on pending and non-voters' streams, the bounded queues. The listener adds what gRPC gave:
a frame over ``max_bytes`` ends its connection before its body is read, at most ``max_connections`` connections are
open at once (more are closed as they come), a TLS handshake must end within ``handshake_timeout_s``, and TCP
keepalive drops a connection whose peer vanished without closing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import Any, NamedTuple

import structlog
from google.protobuf.message import DecodeError

from quorum.fault import spawn
from quorum.log.varint import uvarint
from quorum.raft import messages as m
from quorum.transport.convert import to_proto
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.sockets import accept_forever, accepted_streams, listening_socket, stop_listening

FRAME = struct.Struct(">I")
# The stream reader's buffer limit: it stops reading the socket past twice this, until a frame is taken out. A whole
# fetch answer (8 MiB) fits below it, so a node catching up is not paused inside each answer: every pause costs a
# turn of its event loop, and a busy loop turns slowly. (That is also why brokers' observers stay on gRPC, whose
# threads read whatever the loop does: broker/observer.py.)
READ_LIMIT = 8 * 1024 * 1024
# Keepalive on every frame connection: a peer silent this long is probed, and dropped after the probes go unanswered
# (about idle + interval x count); the gRPC channels' keepalive is 10 s + 5 s.
KEEPALIVE_IDLE_S = 10
KEEPALIVE_INTERVAL_S = 5
KEEPALIVE_COUNT = 2

log = structlog.get_logger("quorum.transport")


class PeerRefused(Exception):
    """The caller of an inbound peer stream may not use it (see :meth:`quorum.transport.peer.PeerTransport.secure`)."""


# (reader, writer, the node id the peer's certificate proves or None) -> served until the connection ends
Serve = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int | None], Awaitable[None]]
# The DER certificate the peer presented (None: none) -> the node id it proves; raises PeerRefused to refuse it.
AuthenticateCertificate = Callable[[bytes | None], int]


def encode(message: pb.PeerMessage) -> list[bytes]:
    body = message.SerializeToString()
    return [FRAME.pack(len(body)), body]


class _Bulk(NamedTuple):
    name: str  # the message's bytes field
    body_tag: bytes  # the PeerMessage oneof field's key (length-delimited)
    tag: bytes  # the bytes field's key within it


def _key(field: Any) -> bytes:
    return uvarint(field.number << 3 | 2)  # wire type 2: length-delimited


def _bulk(body: str, name: str) -> _Bulk:
    outer = pb.PeerMessage.DESCRIPTOR.fields_by_name[body]
    return _Bulk(name, _key(outer), _key(outer.message_type.fields_by_name[name]))


_BULK = {
    m.FetchResponse: _bulk("fetch_response", "records"),
    m.FetchSnapshotResponse: _bulk("fetch_snapshot_response", "data"),
}
BULK_MIN = 64 * 1024  # smaller payloads take the plain path: the copies cost less than the extra parts


def encode_message(source: int, message: m.Message) -> list[bytes]:
    """``message``'s frame, as :func:`encode` of its protobuf; but a fetch answer's records or a snapshot chunk's
    bytes (up to 8 MiB) are not copied into a protobuf and out again. The frame holds the message without them,
    then a second serialized PeerMessage holding only them: protobuf's parser merges the two (a message field
    seen twice is merged), so a reader decodes the frame as before. In a leader serving a 236 MiB snapshot, py-spy
    put that conversion and serialization at over half of its CPU; in process they took 4-5 ms per 8 MiB chunk,
    0.2 ms now."""
    bulk = _BULK.get(type(message))
    payload: bytes = getattr(message, bulk.name) if bulk is not None else b""
    if bulk is None or len(payload) < BULK_MIN:
        return encode(to_proto(source, message))
    head = to_proto(source, replace(message, **{bulk.name: b""})).SerializeToString()  # type: ignore[type-var]
    inner = bulk.tag + uvarint(len(payload))
    outer = bulk.body_tag + uvarint(len(inner) + len(payload)) + inner
    return [FRAME.pack(len(head) + len(outer) + len(payload)), head, outer, payload]


async def read_frames(
    reader: asyncio.StreamReader, max_bytes: int, problems: list[str]
) -> AsyncIterator[pb.PeerMessage]:
    """The messages on ``reader`` until the connection ends. A frame that is too big or no PeerMessage ends it too,
    with why put in ``problems``."""
    while True:
        try:
            header = await reader.readexactly(FRAME.size)
            (size,) = FRAME.unpack(header)
            if size > max_bytes:
                problems.append(f"a frame of {size} bytes, over the {max_bytes}-byte limit")
                return
            body = await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            return  # the peer closed or reset the connection: an ordinary end
        try:
            message = pb.PeerMessage.FromString(body)
        except DecodeError as e:
            problems.append(f"a message that is no PeerMessage: {e}")
            return
        yield message


def keep_alive(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    with contextlib.suppress(OSError, AttributeError):  # a platform without the TCP_KEEP* options keeps its defaults
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_COUNT)


def let_go(writer: asyncio.StreamWriter) -> None:
    """End a connection that is over at once. Not ``close()``: it waits for unsent bytes to drain (and a TLS
    shutdown for the peer's answer, up to 30 s), so a peer that stops reading would keep the socket and its buffer
    for ever, no longer counted under the connection cap. What is unsent is of no use to a peer whose stream is
    over."""
    writer.transport.abort()


class FrameListener:
    """Accepts frame connections and hands each to ``serve``, within the bounds above."""

    def __init__(
        self,
        serve: Serve,
        *,
        max_connections: int,
        handshake_timeout_s: float,
        on_fault: Callable[[BaseException], None],
        ssl_context: Callable[[], ssl.SSLContext] | None = None,
        authenticate: AuthenticateCertificate | None = None,
        refuse: Callable[[str, str], None] | None = None,
    ) -> None:
        """``on_fault``: where an exception out of the listener's tasks goes (a bug: the node's fatal path);
        ``ssl_context``: the TLS context for each new connection (asked afresh each time: certificates are renewed);
        ``authenticate``: which node the peer's certificate proves — a connection it refuses is closed, and
        ``refuse(peer, why)`` told."""
        self._serve = serve
        self.max_connections = max_connections
        self.handshake_timeout_s = handshake_timeout_s
        self._ssl = ssl_context
        self._authenticate = authenticate
        self._refuse = refuse
        self._on_fault = on_fault
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.turned_away = 0  # connections closed on accept, over max_connections
        self.handshakes_failed = 0

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: any free port); returns the port. Raises OSError."""
        self._sock = sock = await listening_socket(host, port)
        accepting = accept_forever(sock, self._admit, "peer_frames_accept_failed")
        self._accepting = spawn(accepting, name="peer-frames-accept", on_error=self._on_fault)
        return int(sock.getsockname()[1])

    async def close(self) -> None:
        await stop_listening(self._accepting, self._sock, self._connections)

    def _admit(self, conn: socket.socket, address: Any) -> None:
        if len(self._connections) >= self.max_connections:
            conn.close()
            self.turned_away += 1
            return
        task = spawn(self._connection(conn, str(address[0])), name="peer-frames", on_error=self._on_fault)
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _connection(self, conn: socket.socket, host: str) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            context = self._ssl() if self._ssl is not None else None
            try:
                reader, writer = await accepted_streams(conn, context, self.handshake_timeout_s, READ_LIMIT)
            except (OSError, EOFError) as e:
                self.handshakes_failed += 1
                log.info("peer_handshake_failed", peer=host, error=str(e) or type(e).__name__)
                return
            keep_alive(writer)
            identity = None
            if self._authenticate is not None:
                ssl_object = writer.get_extra_info("ssl_object")
                certificate = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
                try:
                    identity = self._authenticate(certificate)
                except PeerRefused as e:
                    if self._refuse is not None:
                        self._refuse(host, str(e))
                    return
            await self._serve(reader, writer, identity)
        finally:
            if writer is not None:
                let_go(writer)
            else:
                conn.close()
