"""The outbound side of the peer transport: one stream to one peer, reopened whenever it breaks.

The stream is a frame connection (quorum/transport/frames.py) when the peer names a frame port and this node dials
frames, else a gRPC bidi stream on a channel that lives as long as the node. Either way it waits for the peer to be
reachable (gRPC retries a down peer every <= 100 ms), so a restarted peer hears at once what was queued for it;
requests older than the request timeout are dropped unsent (the core has retried them). A frame port that refuses
is asked for again (the peer restarted, perhaps on another port); one that does not answer in time, or fails TLS,
leaves the gRPC stream in its place until that breaks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

import grpc
import structlog

from quorum.fault import cancel_until_done, spawn
from quorum.raft.config import VoterAddress
from quorum.transport.convert import from_proto
from quorum.transport.frames import READ_LIMIT, encode, keep_alive, let_go, read_frames
from quorum.transport.limits import CHANNEL_OPTIONS, HANDSHAKE_TIMEOUT_MS, MAX_MESSAGE_BYTES, QUEUE_LIMIT
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from quorum.transport.peer import PeerTransport

log = structlog.get_logger("quorum.transport")


class PeerClient:
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
                    if not port:
                        answered = await self._exchange(stub)
                    else:
                        try:
                            reader, writer = await self._connect_frames(port)
                        except ConnectionRefusedError:  # the peer is restarting, perhaps on another port: ask again
                            log.info("peer_stream_failed", peer=peer, port=port, code="ConnectionRefusedError")
                        except (OSError, TimeoutError) as e:
                            # No answer in time (a firewall that passes the voter port only), or a TLS failure: the
                            # gRPC stream, which reached the peer a moment ago, instead.
                            error = str(e) or type(e).__name__
                            log.warning("peer_frames_unusable", peer=peer, port=port, error=error, fallback="grpc")
                            answered = await self._exchange(stub)
                        else:
                            answered = await self._exchange_frames(reader, writer, port)
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

    async def _connect_frames(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A frame connection to the peer's ``port``, within the request timeout. Raises OSError or TimeoutError."""
        peer, host = self.address.node_id, self.address.host
        context, server_name = self.transport.frame_ssl, self.transport.server_name
        async with asyncio.timeout(self.transport.request_timeout_s):
            return await asyncio.open_connection(
                host,
                port,
                ssl=context,
                server_hostname=(server_name(peer) if server_name is not None else host) if context else None,
                ssl_handshake_timeout=HANDSHAKE_TIMEOUT_MS / 1000 if context else None,
                limit=READ_LIMIT,
            )

    async def _exchange_frames(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int) -> bool:
        """One frame connection to the peer, until it ends; whether the peer answered on it."""
        peer, host = self.address.node_id, self.address.host
        keep_alive(writer)
        tls = writer.get_extra_info("ssl_object") is not None
        log.info("peer_stream_connected", peer=peer, wire="frames", target=f"{host}:{port}", tls=tls)
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
