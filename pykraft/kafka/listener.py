"""The Kafka listener: an asyncio server on the node's loop answering Kafka's binary protocol.

One request at a time per connection, answered in the order sent (Kafka's broker mutes a connection while its
request is served, so pipelined requests are answered in order). A frame that cannot be a request — a negative size,
one above ``socket.request.max.bytes``, an api key Kafka does not define, a truncated or malformed header or body —
closes that connection after one ``kafka_frame_refused`` log line, and changes nothing: the frame is refused before
any handler runs. A request of a Kafka API we do not serve, or at a version we do not serve, is answered as KIP-511
answers an ApiVersions request at a version it does not know: ApiVersions v0 with UNSUPPORTED_VERSION and our
ranges, and the connection stays open.

With the node on TLS (``security.protocol=SSL``) this is an SSL listener (Kafka's ``CONTROLLER://`` listener with
the ``ssl.*`` settings): each connection handshakes with the node's own certificate, taken afresh from the files for
each new connection (:class:`~pykraft.security.ssl_context.ReloadingSslContext`), and with ``ssl.client.auth=required``
only a client certificate from ``ssl.ca.location`` gets in. Its principal is what gRPC's would be: the certificate's
DN through ``ssl.principal.mapping.rules``; a DN no rule maps closes the connection, as Kafka refuses it. A handshake
not done in ``HANDSHAKE_TIMEOUT_S`` is abandoned (a silent client holds nothing for longer).

Connections are accepted by our own loop so that a connection over the bounds — ``max.connections`` in all,
``max.connections.per.ip`` from one address — is closed at once, before any handshake or read, and counted
(``connections_refused``); Kafka's defaults (unlimited) are not ours, see :data:`DEFAULT_MAX_CONNECTIONS`. Frames
being read across all connections hold at most ``queued.max.request.bytes`` at once (a reader over it waits for
room, under the idle deadline), so hostile clients cannot grow memory past the bounds whatever sizes they announce.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog

from pykraft.kafka import apis  # noqa: F401  (registers every API)
from pykraft.kafka.apis.api_versions import ApiVersionsResponse, supported_versions
from pykraft.kafka.protocol import (
    DEFAULT_MAX_REQUEST_BYTES,
    decode_request_header,
    peek_header,
    response_frame,
    response_header_version,
)
from pykraft.kafka.registry import APIS, CallContext, ConnectionAbort, ListenerInfo, RequestContext
from pykraft.security.principal import NoMatchingRule, principal_from_auth_context
from quorum.errors import Errors
from quorum.fault import spawn
from quorum.histogram import Histogram
from quorum.log.message import DecodeError, EncodeError
from quorum.transport.limits import HANDSHAKE_TIMEOUT_MS, MAX_CONNECTIONS
from quorum.transport.sockets import accept_forever, accepted_streams, listening_socket, stop_listening

if TYPE_CHECKING:
    from pykraft.security.ssl_context import ReloadingSslContext
    from pykraft.service import ControllerService

log = structlog.get_logger("pykraft.kafka")
DEFAULT_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms
# max.connections: Kafka's default is unlimited; ours is the gRPC listeners' cap (quorum/transport/peer.py), so one
# node's admin surface holds as many connections on either front door. max.connections.per.ip: a quarter of it, so
# one host cannot take every place (an admin tool or benchmark uses a handful).
DEFAULT_MAX_CONNECTIONS = MAX_CONNECTIONS
DEFAULT_MAX_CONNECTIONS_PER_IP = MAX_CONNECTIONS // 4
# queued.max.request.bytes (Kafka: unlimited): the bytes of frames being read at once, over every connection; at
# least one frame of socket.request.max.bytes fits.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 256 * 1024 * 1024
HANDSHAKE_TIMEOUT_S = HANDSHAKE_TIMEOUT_MS / 1000  # as the gRPC listeners'
REFUSAL_LOG_INTERVAL_S = 1.0  # a flood of refused connections logs one line a second, with the count since the last
UNSUPPORTED = -1  # the version counted for a request at a version (or of an API) we do not serve
# Kafka 4.1 defines api keys 0-92 (the last, DeleteShareGroupOffsets): a key past them is no Kafka request at all
MAX_KAFKA_API_KEY = 92


@dataclass
class ListenerStats:
    """What the metrics collector reads: per (api, version) counts and latency, refusals by reason."""

    requests: Counter[tuple[str, int]] = field(default_factory=Counter)
    errors: Counter[tuple[str, int]] = field(default_factory=Counter)
    latency: dict[str, Histogram] = field(default_factory=dict)
    refused: Counter[str] = field(default_factory=Counter)
    # connections closed before any request: limit, per_ip_limit (over a bound), handshake (TLS failed or too
    # slow), principal (a certificate no mapping rule takes)
    connections_refused: Counter[str] = field(default_factory=Counter)
    connections: int = 0
    connections_total: int = 0


class FrameRefused(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


class KafkaListener:
    def __init__(
        self,
        service: ControllerService,
        info: ListenerInfo,
        *,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        idle_ms: int = DEFAULT_IDLE_MS,
        tls: ReloadingSslContext | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_connections_per_ip: int = DEFAULT_MAX_CONNECTIONS_PER_IP,
        queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
    ) -> None:
        if max_connections < 1 or max_connections_per_ip < 1:
            raise ValueError("max.connections and max.connections.per.ip must be at least 1")
        self.service = service
        self.info = info
        self.max_request_bytes = max_request_bytes
        self.idle_s = idle_ms / 1000  # connections.max.idle.ms: a connection silent this long is closed
        self.tls = tls  # None: plaintext
        # The node's own rules, as its gRPC listeners use them: checked once per connection here, so that a
        # certificate no rule maps closes the connection before any request (Kafka's NoMatchingRule).
        self.mapper = tls.tls.mapper() if tls is not None else None
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.queued_max_request_bytes = queued_max_request_bytes
        self.handshake_timeout_s = handshake_timeout_s
        self.stats = ListenerStats()
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._per_ip: Counter[str] = Counter()  # open connections by client address; no entry at zero
        self._queued = 0  # bytes of the frames being read or answered now
        self._freed = asyncio.Event()  # set (and replaced) whenever queued bytes are released
        self._refusals_unlogged = 0
        self._refusal_logged_at = -REFUSAL_LOG_INTERVAL_S

    @property
    def port(self) -> int:
        assert self._sock is not None
        return int(self._sock.getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        """Listen on ``host:port`` (the first address it resolves to; port 0: any free one). Raises OSError."""
        self._sock = sock = await listening_socket(host, port)
        accepting = accept_forever(sock, self._admit, "kafka_accept_failed")
        self._accepting = spawn(accepting, name="kafka-accept", on_error=_accept_failed)

    async def stop(self) -> None:
        await stop_listening(self._accepting, self._sock, self._connections)

    def _admit(self, conn: socket.socket, address: Any) -> None:
        host, port = str(address[0]), int(address[1])
        if self.stats.connections >= self.max_connections:
            self._refuse(conn, host, port, "limit", self.max_connections)
            return
        if self._per_ip[host] >= self.max_connections_per_ip:
            self._refuse(conn, host, port, "per_ip_limit", self.max_connections_per_ip)
            return
        self._per_ip[host] += 1
        self.stats.connections += 1
        self.stats.connections_total += 1
        task = spawn(self._serve_socket(conn, host, port), name=f"kafka-{host}:{port}", on_error=_serve_failed)
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    def _refuse(self, conn: socket.socket, host: str, port: int, reason: str, limit: int) -> None:
        """Close a connection over a bound at once (nothing read, no handshake), count it, and log it — one line a
        second at most under a flood, with how many were refused since the last line."""
        conn.close()
        self.stats.connections_refused[reason] += 1
        self._refusals_unlogged += 1
        now = time.monotonic()
        if now - self._refusal_logged_at >= REFUSAL_LOG_INTERVAL_S:
            log.warning(
                "kafka_connection_refused",
                peer=f"{host}:{port}",
                reason=reason,
                limit=limit,
                connections=self.stats.connections,
                refused_since_last_line=self._refusals_unlogged,
            )
            self._refusal_logged_at, self._refusals_unlogged = now, 0

    async def _serve_socket(self, conn: socket.socket, host: str, port: int) -> None:
        """One accepted connection: the TLS handshake (if any) and its principal, then its requests."""
        writer: asyncio.StreamWriter | None = None
        try:
            context = self.tls.context() if self.tls is not None else None
            try:
                reader, writer = await accepted_streams(conn, context, self.handshake_timeout_s)
            except (OSError, EOFError) as e:
                self.stats.connections_refused["handshake"] += 1
                log.info("kafka_handshake_failed", peer=f"{host}:{port}", error=str(e) or type(e).__name__)
                return
            try:
                auth = self._auth_context(writer)
            except NoMatchingRule as e:
                self.stats.connections_refused["principal"] += 1
                log.info("principal_refused", host=host, port=port, reason=str(e))
                return
            await self._serve(reader, writer, host, port, auth)
        finally:
            self.stats.connections -= 1
            self._per_ip[host] -= 1
            if self._per_ip[host] <= 0:
                del self._per_ip[host]
            if writer is not None:
                writer.close()
            else:
                conn.close()

    def _auth_context(self, writer: asyncio.StreamWriter) -> dict[str, list[bytes]]:
        """The connection's security as gRPC's auth context shows it, so that the Controller service names the
        caller with the same function as for gRPC; raises NoMatchingRule for a certificate no rule maps."""
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is None or self.mapper is None:
            return {}  # plaintext: User:ANONYMOUS
        auth = {"transport_security_type": [b"ssl"]}
        der = ssl_object.getpeercert(binary_form=True)
        if der:  # none with ssl.client.auth=none: User:ANONYMOUS
            auth["x509_pem_cert"] = [ssl.DER_cert_to_PEM_cert(der).encode()]
        principal = principal_from_auth_context(auth, self.mapper)
        log.debug("kafka_connection_authenticated", principal=str(principal))
        return auth

    async def _reserve(self, size: int) -> None:
        """Wait until a frame of ``size`` bytes fits under queued.max.request.bytes (one frame always fits)."""
        while self._queued and self._queued + size > self.queued_max_request_bytes:
            await self._freed.wait()
        self._queued += size

    def _release(self, size: int) -> None:
        self._queued -= size
        self._freed.set()  # wakes every waiter to check again; later ones wait on a new event
        self._freed = asyncio.Event()

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        auth: dict[str, list[bytes]],
    ) -> None:
        peer = f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
        try:
            while True:
                try:
                    async with asyncio.timeout(self.idle_s):
                        size_bytes = await reader.readexactly(4)
                except TimeoutError:
                    log.debug("kafka_connection_idle", peer=f"{host}:{port}", idle_s=self.idle_s)
                    return
                except asyncio.IncompleteReadError as e:
                    if e.partial:
                        raise FrameRefused("truncated", f"{len(e.partial)} bytes of a frame size") from None
                    return  # the client closed between requests
                size = int.from_bytes(size_bytes, "big", signed=True)
                if size < 0 or size > self.max_request_bytes:
                    raise FrameRefused("size", f"frame size {size} is outside 0..{self.max_request_bytes}")
                reserved = False
                try:
                    try:
                        # a frame trickled in slower than the idle bound allows is as good as idle (slowloris)
                        async with asyncio.timeout(self.idle_s):
                            await self._reserve(size)
                            reserved = True
                            frame = await reader.readexactly(size)
                    except asyncio.IncompleteReadError as e:
                        raise FrameRefused("truncated", f"the frame has {len(e.partial)} of its {size} bytes") from None
                    except TimeoutError:
                        raise FrameRefused("truncated", f"{size} bytes did not come in {self.idle_s} s") from None
                    writer.write(await self._answer(frame, peer, auth))
                    del frame
                finally:
                    if reserved:
                        self._release(size)
                await writer.drain()
        except FrameRefused as e:
            self.stats.refused[e.reason] += 1
            log.warning("kafka_frame_refused", peer=f"{host}:{port}", reason=e.reason, detail=str(e))
        except ConnectionAbort as e:
            self.stats.refused["aborted"] += 1
            log.warning("kafka_frame_refused", peer=f"{host}:{port}", reason="aborted", detail=str(e))
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception as e:  # a handler's bug: this connection ends, the node goes on
            self.stats.refused["internal"] += 1
            log.exception("kafka_request_failed", peer=f"{host}:{port}", error=f"{type(e).__name__}: {e}")

    async def _answer(self, frame: bytes, peer: str, auth: dict[str, list[bytes]]) -> bytes:
        """The response frame to one request frame (raises :class:`FrameRefused` for a frame to refuse)."""
        try:
            api_key, version, correlation_id = peek_header(frame)
        except DecodeError as e:
            raise FrameRefused("header", str(e)) from None
        api = APIS.get(api_key)
        if api is None and not 0 <= api_key <= MAX_KAFKA_API_KEY:
            raise FrameRefused("api_key", f"unknown api key {api_key} (version {version})")
        if api is None or not api.supports(version):
            # KIP-511's answer: ApiVersions v0 with UNSUPPORTED_VERSION and our ranges, whatever the body. Kafka gives
            # it to an ApiVersions request only and closes the connection on any other API or version it does not
            # serve; we give it to every request of a Kafka API we do not serve (or not at that version), and keep
            # the connection: a client that negotiated never sends one, and one that did not learns our ranges.
            name = api.name if api is not None else f"ApiKey{api_key}"
            # one series per API for every unknown version: a client's choice must not grow the metrics
            self._count(name, UNSUPPORTED, Errors.UNSUPPORTED_VERSION, 0.0)
            # DEBUG: the connection stays open, so a line per request at INFO would let one client fill the disk
            log.debug("kafka_request_unsupported", peer=peer, api=name, version=version, correlation_id=correlation_id)
            body = ApiVersionsResponse.encode(supported_versions(Errors.UNSUPPORTED_VERSION), 0)
            return response_frame(correlation_id, body, 0)
        flexible = api.request.is_flexible(version)
        try:
            header, pos = decode_request_header(frame, flexible)
            # Bytes after the body are ignored, as Kafka's request parsing does: librdkafka 2.x sends three more
            # than Metadata v12 has when it asks for every topic.
            request, _end = api.request.decoder(version)(frame, pos)
        except DecodeError as e:
            raise FrameRefused("body", f"{api.name} v{version}: {e}") from None
        except (IndexError, struct.error, UnicodeDecodeError, ValueError) as e:
            raise FrameRefused("body", f"{api.name} v{version}: malformed body ({e or type(e).__name__})") from None
        started = time.monotonic()
        ctx = RequestContext(header, self.info, self.service, CallContext(peer, header.client_id, auth))
        response = await api.handler(ctx, request, version)
        try:
            body = api.response.encode(response, version)
        except EncodeError as e:  # our bug, not the client's: say so, and do not answer garbage
            log.error("kafka_response_unencodable", api=api.name, version=version, error=str(e))
            raise FrameRefused("response", str(e)) from None
        elapsed = time.monotonic() - started
        error = _first_error(response)
        self._count(api.name, version, error, elapsed)
        (log.info if api.mutates else log.debug)(
            "kafka_request",
            api=api.name,
            version=version,
            client_id=header.client_id,
            correlation_id=correlation_id,
            error_code=error,
            latency_ms=round(elapsed * 1000, 2),
        )
        return response_frame(correlation_id, body, response_header_version(api_key, flexible))

    def _count(self, name: str, version: int, error: int, elapsed: float) -> None:
        self.stats.requests[(name, version)] += 1
        if error:
            self.stats.errors[(name, version)] += 1
        histogram = self.stats.latency.get(name)
        if histogram is None:
            histogram = self.stats.latency[name] = Histogram()
        histogram.observe(elapsed)


def _first_error(response: object) -> int:
    """The response's top-level error code, else the first per-item one (for the log line and the metric)."""
    code = getattr(response, "error_code", 0)
    if code:
        return int(code)
    for attr in ("topics", "responses", "results"):
        for item in getattr(response, attr, None) or ():
            code = getattr(item, "error_code", 0)
            if code:
                return int(code)
    return 0


def _accept_failed(e: BaseException) -> None:
    # _accept catches what an accept raises; ending anyway is our bug, and the port no longer takes connections
    log.error("kafka_accept_stopped", error=f"{type(e).__name__}: {e}")


def _serve_failed(e: BaseException) -> None:
    # _serve_socket ends its connection on any exception it sees; one escaping it is our bug, logged, not fatal
    log.error("kafka_connection_failed", error=f"{type(e).__name__}: {e}")
