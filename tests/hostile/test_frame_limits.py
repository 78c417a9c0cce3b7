"""Hostile input on a node's peer frame listener (quorum/transport/frames.py), in process: bytes that are no
PeerMessage and a header announcing more than MAX_MESSAGE_BYTES end their connection (the second before any body is
read) and are counted, connections past the cap are closed as they come, silent connections past
PENDING_STREAM_LIMIT end the oldest, a peer that never reads its answers holds at most WRITE_BUFFER_LIMIT (plus one
message) and the rest is dropped, and a TLS listener drops plaintext, certificate-less and foreign-CA clients and
abandons a handshake that never comes. After each, a well-formed peer is still served: its request is delivered and
the answer reaches it. And a connection that ends with answers its peer never read lets go of its socket and buffer
at once (it used to keep them for ever, outside MAX_CONNECTIONS)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import quorum.transport.peer as peer
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.peer_identity import certificate_authenticator
from pykraft.security.ssl_context import server_ssl_context
from pykraft.security.tls import TlsSettings, client_ssl_context
from quorum.errors import Errors
from quorum.raft.config import VoterAddress
from quorum.raft.messages import Envelope, FetchRequest, FetchResponse, Message, VoteRequest
from quorum.transport.convert import to_proto
from quorum.transport.frames import FRAME, AuthenticateCertificate, encode
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.peer import MAX_MESSAGE_BYTES, PeerTransport

VOTERS = {1: VoterAddress(1, "127.0.0.1", 1), 2: VoterAddress(2, "127.0.0.1", 1)}  # node 1 listens; 2 is a voter
OBSERVER = 101  # a broker's observer: not a voter
GARBAGE = [b"\xff\xff\xff", b"\x0a\x05ab", b"\x08", b"\x82\x01\x03\x0a\x01\xff"]  # the last: a string not UTF-8


def fetch(replica: int, correlation_id: int = 1, cluster_id: str = "c") -> FetchRequest:
    return FetchRequest(cluster_id, replica, 1, 0, 0, 1024, 0, correlation_id=correlation_id)


def answer(correlation_id: int, records: bytes = b"r") -> FetchResponse:
    return FetchResponse(Errors.NONE, 1, 1, 0, records=records, correlation_id=correlation_id)


def frame(source: int, message: Message) -> bytes:
    return b"".join(encode(to_proto(source, message)))


async def read_message(reader: asyncio.StreamReader, timeout: float = 5.0) -> pb.PeerMessage:
    async with asyncio.timeout(timeout):
        (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
        return pb.PeerMessage.FromString(await reader.readexactly(size))


async def ended(reader: asyncio.StreamReader, timeout: float = 2.0) -> bytes:
    """What the server sent before it closed the connection (a reset counts as closed too); fails the test when the
    connection is still open after ``timeout``."""
    received = b""
    async with asyncio.timeout(timeout):
        while True:
            try:
                chunk = await reader.read(65536)
            except (ConnectionResetError, ssl.SSLError):
                return received
            if not chunk:
                return received
            received += chunk


async def still_open(reader: asyncio.StreamReader, wait: float = 0.2) -> bool:
    """Nothing arrives and the connection is not closed within ``wait``."""
    try:
        await asyncio.wait_for(reader.read(1), wait)
    except TimeoutError:
        return True
    return False


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.005)


async def reaches(count: Callable[[], int], value: int, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while count() != value:
            await asyncio.sleep(0.005)


@dataclass
class Listener:
    transport: PeerTransport
    port: int
    received: list[Envelope]
    faults: list[str]
    writers: list[asyncio.StreamWriter] = field(default_factory=list)

    async def connect(self, rcvbuf: int | None = None) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connecting: the window it advertises stays small
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        try:
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", self.port))
        except BaseException:
            sock.close()
            raise
        reader, writer = await asyncio.open_connection(sock=sock)
        self.writers.append(writer)
        return reader, writer

    async def connect_tls(
        self, context: ssl.SSLContext, server_name: str = "controller-1"
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.port, ssl=context, server_hostname=server_name, ssl_handshake_timeout=5
        )
        self.writers.append(writer)
        return reader, writer

    async def round_trip(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, source: int, correlation_id: int
    ) -> None:
        """``source``'s request on this connection reaches the core, and the core's answer comes back on it."""
        before = len(self.received)
        writer.write(frame(source, fetch(source, correlation_id)))
        await eventually(lambda: len(self.received) > before)
        assert self.received[before:] == [Envelope(source, 1, fetch(source, correlation_id))]
        dropped = self.transport.dropped
        self.transport.send(Envelope(1, source, answer(correlation_id, b"answer")))
        assert self.transport.dropped == dropped
        message = await read_message(reader)
        assert message.source == 1 and message.WhichOneof("body") == "fetch_response"
        assert message.fetch_response.correlation_id == correlation_id
        assert message.fetch_response.records == b"answer"

    async def serves_a_new_connection(self, source: int = OBSERVER, correlation_id: int = 99) -> None:
        reader, writer = await self.connect()
        await self.round_trip(reader, writer, source, correlation_id)
        writer.close()


@asynccontextmanager
async def listening(
    ssl_context: Callable[[], ssl.SSLContext] | None = None, authenticate: AuthenticateCertificate | None = None
) -> AsyncIterator[Listener]:
    """Node 1's peer transport with a frame listener on a free port; every client connection closed on the way out,
    and no fault reported meanwhile."""
    received: list[Envelope] = []
    faults: list[str] = []
    transport = PeerTransport(
        1,
        VOTERS,
        deliver=received.append,
        unreachable=lambda node: None,
        on_fault=lambda doing, e: faults.append(f"{doing}: {e!r}"),
    )
    listener: Listener | None = None
    try:
        port = await transport.listen_frames("127.0.0.1", 0, ssl_context=ssl_context, authenticate=authenticate)
        assert port > 0 and transport.frames_port == port
        listener = Listener(transport, port, received, faults)
        yield listener
        assert not faults, faults
    finally:
        for writer in listener.writers if listener is not None else []:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
        await transport.close()


@pytest.mark.parametrize("garbage", GARBAGE)
async def test_a_frame_that_is_no_peer_message_ends_its_connection_not_the_listener(garbage: bytes) -> None:
    async with listening() as node:
        transport = node.transport
        reader, writer = await node.connect()
        writer.write(FRAME.pack(len(garbage)) + garbage)
        assert await ended(reader) == b""
        assert transport.undecodable == 1
        assert node.received == [] and not transport._pending and not transport._inbound

        # The listener goes on: a well-formed peer is served on a new connection.
        await node.serves_a_new_connection()
        assert transport.undecodable == 1 and transport.dropped == 0


async def test_garbage_after_a_request_ends_that_peers_stream() -> None:
    async with listening() as node:
        transport = node.transport
        reader, writer = await node.connect()
        await node.round_trip(reader, writer, OBSERVER, correlation_id=1)
        writer.write(FRAME.pack(3) + b"\xff\xff\xff")
        assert await ended(reader) == b""
        assert transport.undecodable == 1 and len(node.received) == 1
        # The stream our answers to node 101 went to is gone with the connection: an answer now is dropped.
        assert OBSERVER not in transport._inbound
        transport.send(Envelope(1, OBSERVER, answer(2)))
        assert transport.dropped == 1
        await node.serves_a_new_connection()


async def test_a_frame_over_the_message_limit_ends_the_connection_before_its_body() -> None:
    async with listening() as node:
        transport = node.transport
        reader, writer = await node.connect()
        writer.write(FRAME.pack(MAX_MESSAGE_BYTES + 1))  # the header alone: no body byte ever comes
        assert await ended(reader) == b""
        assert transport.undecodable == 1 and node.received == []

        reader, writer = await node.connect()
        writer.write(FRAME.pack(0xFFFFFFFF))
        assert await ended(reader) == b""
        assert transport.undecodable == 2 and node.received == []

        # A frame of exactly MAX_MESSAGE_BYTES is a message like any other.
        cluster_id = "x" * (MAX_MESSAGE_BYTES - 64)
        while (size := to_proto(OBSERVER, fetch(OBSERVER, 5, cluster_id)).ByteSize()) != MAX_MESSAGE_BYTES:
            cluster_id = "x" * (len(cluster_id) + MAX_MESSAGE_BYTES - size)
        reader, writer = await node.connect()
        writer.write(frame(OBSERVER, fetch(OBSERVER, 5, cluster_id)))
        await eventually(lambda: len(node.received) == 1)
        assert node.received[0].message == fetch(OBSERVER, 5, cluster_id)
        node.received.clear()
        await node.round_trip(reader, writer, OBSERVER, correlation_id=6)
        assert transport.undecodable == 2


async def test_connections_over_the_cap_are_closed_as_they_come(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer, "MAX_CONNECTIONS", 4)
    async with listening() as node:
        frames = node.transport._frames
        assert frames is not None and frames.max_connections == 4
        held = [await node.connect() for _ in range(4)]
        await eventually(lambda: len(frames._connections) == 4)
        extra = [await node.connect() for _ in range(3)]
        for reader, _ in extra:
            assert await ended(reader) == b""
        assert frames.turned_away == 3
        # The held ones are still open, and served.
        for reader, _ in held:
            assert await still_open(reader, wait=0.05)
        await node.round_trip(*held[0], source=OBSERVER, correlation_id=1)
        assert frames.turned_away == 3

        for _, writer in held:
            writer.close()
        await eventually(lambda: not frames._connections)
        await node.serves_a_new_connection()
        assert frames.turned_away == 3


async def test_silent_connections_past_the_pending_limit_end_the_oldest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peer, "PENDING_STREAM_LIMIT", 3)
    async with listening() as node:
        transport = node.transport
        # A peer that has sent a request is no longer pending: the limit does not touch it.
        identified = await node.connect()
        await node.round_trip(*identified, source=OBSERVER, correlation_id=1)
        assert not transport._pending

        silent = []
        for i in range(3):
            silent.append(await node.connect())
            await reaches(lambda: len(transport._pending), i + 1)
        assert transport.streams_ended == 0
        silent.append(await node.connect())
        await eventually(lambda: transport.streams_ended == 1)
        assert await ended(silent[0][0]) == b""
        for reader, _ in silent[1:]:
            assert await still_open(reader, wait=0.05)
        assert len(transport._pending) == 3

        # One more ends the next oldest; the identified peer is served throughout.
        silent.append(await node.connect())
        await eventually(lambda: transport.streams_ended == 2)
        assert await ended(silent[1][0]) == b""
        assert await still_open(silent[2][0], wait=0.05)
        await node.round_trip(*identified, source=OBSERVER, correlation_id=2)
        # A silent connection that speaks is identified, and leaves the pending ones.
        await node.round_trip(*silent[2], source=2, correlation_id=3)
        assert len(transport._pending) == 2 and transport.streams_ended == 2
        assert transport.undecodable == 0 and transport.dropped == 0


async def test_a_peer_that_never_reads_holds_at_most_the_write_buffer_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 64 * 1024
    monkeypatch.setattr(peer, "WRITE_BUFFER_LIMIT", limit)
    async with listening() as node:
        transport = node.transport
        reader, writer = await node.connect(rcvbuf=4096)
        await node.round_trip(reader, writer, OBSERVER, correlation_id=0)
        inbound = transport._inbound[OBSERVER].writer
        assert inbound is not None

        records = b"r" * (256 * 1024)
        frame_size = len(frame(1, answer(1, records)))
        written: list[int] = []
        peak = 0
        correlation_id = 0
        while transport.dropped < 20:
            correlation_id += 1
            assert correlation_id < 400, f"nothing dropped after {correlation_id} answers nobody read"
            dropped = transport.dropped
            transport.send(Envelope(1, OBSERVER, answer(correlation_id, records)))
            if transport.dropped == dropped:
                written.append(correlation_id)
            peak = max(peak, inbound.transport.get_write_buffer_size())
            await asyncio.sleep(0)  # the loop may flush what the kernel takes
        assert peak <= limit + frame_size, (peak, limit, frame_size)
        assert len(written) + transport.dropped == correlation_id

        # Each answer written arrives whole and in order once the peer reads; nothing more.
        for expected in written:
            message = await read_message(reader)
            assert message.fetch_response.correlation_id == expected
            assert message.fetch_response.records == records
        assert await still_open(reader, wait=0.1)
        await eventually(lambda: inbound.transport.get_write_buffer_size() == 0)
        # The connection drained is written to again.
        await node.round_trip(reader, writer, OBSERVER, correlation_id=1000)
        assert transport.dropped == 20


NAMES = ["controller-1", "controller-2", "controller-3", "broker-101", "admin"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), NAMES)


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    """broker-101's name, from another CA."""
    return ensure_cluster_certificates(tmp_path_factory.mktemp("other-ca"), ["broker-101"])["broker-101"]


def client(files: CertFiles | None, ca: Path) -> ssl.SSLContext:
    """A client that trusts ``ca`` (the listener's) and presents ``files``' certificate (None: none)."""
    certificate, key = (files.certificate, files.key) if files is not None else (None, None)
    return client_ssl_context(TlsSettings(certificate=certificate, key=key, ca=ca))


@asynccontextmanager
async def tls_listening(
    certs: dict[str, CertFiles], monkeypatch: pytest.MonkeyPatch, handshake_timeout_ms: int = 300
) -> AsyncIterator[Listener]:
    monkeypatch.setattr(peer, "HANDSHAKE_TIMEOUT_MS", handshake_timeout_ms)
    own = certs["controller-1"]
    settings = TlsSettings(certificate=own.certificate, key=own.key, ca=own.ca)
    context = server_ssl_context(settings, client_auth_required=True)
    authenticate = certificate_authenticator(settings.mapper(), VOTERS)
    async with listening(ssl_context=lambda: context, authenticate=authenticate) as node:
        frames = node.transport._frames
        assert frames is not None and frames.handshake_timeout_s == handshake_timeout_ms / 1000
        yield node


async def test_a_tls_listener_serves_the_node_a_certificate_proves_and_no_other(
    certs: dict[str, CertFiles], monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = certs["controller-1"].ca
    async with tls_listening(certs, monkeypatch) as node:
        transport = node.transport
        reader, writer = await node.connect_tls(client(certs["broker-101"], ca))
        await node.round_trip(reader, writer, OBSERVER, correlation_id=1)
        reader, writer = await node.connect_tls(client(certs["controller-2"], ca))
        await node.round_trip(reader, writer, 2, correlation_id=2)
        assert transport.refused == 0

        # A certificate that proves no voter or broker is refused once the handshake is done, before any message.
        for who in ("controller-3", "admin"):
            reader, writer = await node.connect_tls(client(certs[who], ca))
            assert await ended(reader) == b""
        assert transport.refused == 2
        # A broker claiming a voter, or sending what only a voter may: its connection ends at that message.
        reader, writer = await node.connect_tls(client(certs["broker-101"], ca))
        writer.write(frame(2, fetch(2)))
        assert await ended(reader) == b""
        reader, writer = await node.connect_tls(client(certs["broker-101"], ca))
        writer.write(frame(OBSERVER, VoteRequest("c", OBSERVER, 5, 1, 10, pre_vote=False, correlation_id=1)))
        assert await ended(reader) == b""
        assert transport.refused == 4
        frames = transport._frames
        assert frames is not None and frames.handshakes_failed == 0 and len(node.received) == 2


async def test_a_tls_listener_drops_plaintext_and_clients_without_a_certificate_of_its_ca(
    certs: dict[str, CertFiles], stranger: CertFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = certs["controller-1"].ca
    async with tls_listening(certs, monkeypatch, handshake_timeout_ms=5000) as node:
        frames = node.transport._frames
        assert frames is not None
        # Plaintext: a peer that speaks frames without TLS, then an HTTP request.
        for junk in (frame(OBSERVER, fetch(OBSERVER)), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):
            reader, writer = await node.connect()
            writer.write(junk)
            started = time.monotonic()
            await ended(reader)  # a TLS alert may come first
            assert time.monotonic() - started < 1.0  # dropped at once, not after the 5 s handshake timeout
        await eventually(lambda: frames.handshakes_failed == 2)

        # No client certificate, or one from another CA: the server's side of the handshake fails.
        for files in (None, stranger):
            failed = frames.handshakes_failed
            try:
                reader, writer = await node.connect_tls(client(files, ca))
            except (ssl.SSLError, ConnectionResetError):
                pass  # the client saw the refusal during its own handshake
            else:  # TLS 1.3: the client is done first, and hears the refusal when it reads
                writer.write(frame(OBSERVER, fetch(OBSERVER)))
                await ended(reader)
            await reaches(lambda: frames.handshakes_failed, failed + 1)
        assert frames.handshakes_failed == 4
        assert node.received == [] and node.transport.refused == 0
        await eventually(lambda: not frames._connections)

        # And a peer with the right certificate is served after all that.
        reader, writer = await node.connect_tls(client(certs["broker-101"], ca))
        await node.round_trip(reader, writer, OBSERVER, correlation_id=1)
        assert frames.handshakes_failed == 4


@pytest.mark.parametrize("start", [b"", b"\x16\x03\x01"], ids=["nothing", "a partial record header"])
async def test_a_tls_handshake_that_never_comes_is_abandoned_after_the_timeout(
    certs: dict[str, CertFiles], monkeypatch: pytest.MonkeyPatch, start: bytes
) -> None:
    async with tls_listening(certs, monkeypatch) as node:
        frames = node.transport._frames
        assert frames is not None
        started = time.monotonic()
        reader, writer = await node.connect()
        writer.write(start)
        assert await ended(reader, timeout=2.0) == b""
        elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < 2.0, elapsed
        assert frames.handshakes_failed == 1
        assert not node.transport._pending and node.received == []
        await eventually(lambda: not frames._connections)


async def test_a_connection_that_ends_with_its_answers_unread_is_let_go(monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 64 * 1024
    monkeypatch.setattr(peer, "WRITE_BUFFER_LIMIT", limit)
    monkeypatch.setattr(peer, "MAX_CONNECTIONS", 4)
    async with listening() as node:
        transport, frames = node.transport, node.transport._frames
        assert frames is not None
        ended_writers = []
        for source in range(OBSERVER, OBSERVER + 6):  # one connection at a time, more than the cap in all
            _, writer = await node.connect(rcvbuf=4096)
            writer.write(frame(source, fetch(source)))
            await reaches(lambda: len(transport._inbound), 1)  # identified as `source`
            assert list(transport._inbound) == [source]
            inbound = transport._inbound[source].writer
            assert inbound is not None
            dropped = transport.dropped
            for i in range(400):
                transport.send(Envelope(1, source, answer(i, b"r" * (256 * 1024))))
                if transport.dropped > dropped:
                    break
                await asyncio.sleep(0)
            assert transport.dropped > dropped
            writer.write_eof()  # done sending; it never reads what it was sent
            await eventually(lambda: not frames._connections)  # the connection is over for the listener
            ended_writers.append(inbound)
        # ... and so it should be for the process: its socket closed, its buffer freed.
        async with asyncio.timeout(2):
            for inbound in ended_writers:
                with contextlib.suppress(ConnectionError):  # closed with an error is closed too
                    await inbound.wait_closed()
