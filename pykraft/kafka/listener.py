"""The Kafka listener: an asyncio server on the node's loop answering Kafka's binary protocol.

One request at a time per connection, answered in the order sent (Kafka's broker mutes a connection while its
request is served, so pipelined requests are answered in order). A frame that cannot be a request — a negative size,
one above ``socket.request.max.bytes``, an unknown api key, a version of an API other than ApiVersions that we do not
serve, a truncated or malformed header or body — closes that connection after one ``kafka_frame_refused`` log line,
and changes nothing: the frame is refused before any handler runs. An ApiVersions request at a version we do not
know is answered at v0 with UNSUPPORTED_VERSION and our ranges (KIP-511).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from pykraft.kafka import apis  # noqa: F401  (registers every API)
from pykraft.kafka.apis.api_versions import ApiVersionsResponse, supported_versions
from pykraft.kafka.protocol import (
    API_VERSIONS_KEY,
    DEFAULT_MAX_REQUEST_BYTES,
    decode_request_header,
    peek_header,
    response_frame,
    response_header_version,
)
from pykraft.kafka.registry import APIS, CallContext, ConnectionAbort, ListenerInfo, RequestContext
from quorum.errors import Errors
from quorum.histogram import Histogram
from quorum.log.message import DecodeError, EncodeError

if TYPE_CHECKING:
    from pykraft.service import ControllerService

log = structlog.get_logger("pykraft.kafka")
DEFAULT_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms
UNSUPPORTED = -1  # the version counted for an ApiVersions request at a version we do not know


@dataclass
class ListenerStats:
    """What the metrics collector reads: per (api, version) counts and latency, refusals by reason."""

    requests: Counter[tuple[str, int]] = field(default_factory=Counter)
    errors: Counter[tuple[str, int]] = field(default_factory=Counter)
    latency: dict[str, Histogram] = field(default_factory=dict)
    refused: Counter[str] = field(default_factory=Counter)
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
    ) -> None:
        self.service = service
        self.info = info
        self.max_request_bytes = max_request_bytes
        self.idle_s = idle_ms / 1000  # connections.max.idle.ms: a connection silent this long is closed
        self.stats = ListenerStats()
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve_connection, host, port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.stats.connections += 1
        self.stats.connections_total += 1
        peername = writer.get_extra_info("peername") or ("?", 0)
        host, port = str(peername[0]), int(peername[1])
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
                try:
                    # a frame trickled in slower than the idle bound allows is as good as idle (slowloris)
                    async with asyncio.timeout(self.idle_s):
                        frame = await reader.readexactly(size)
                except asyncio.IncompleteReadError as e:
                    raise FrameRefused("truncated", f"the frame has {len(e.partial)} of its {size} bytes") from None
                except TimeoutError:
                    raise FrameRefused("truncated", f"{size} bytes did not come in {self.idle_s} s") from None
                writer.write(await self._answer(frame, peer))
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
        finally:
            self.stats.connections -= 1
            self._connections.discard(task)
            writer.close()

    async def _answer(self, frame: bytes, peer: str) -> bytes:
        """The response frame to one request frame (raises :class:`FrameRefused` for a frame to refuse)."""
        try:
            api_key, version, correlation_id = peek_header(frame)
        except DecodeError as e:
            raise FrameRefused("header", str(e)) from None
        api = APIS.get(api_key)
        if api is None:
            raise FrameRefused("api_key", f"unknown api key {api_key} (version {version})")
        if not api.supports(version):
            if api_key == API_VERSIONS_KEY:  # KIP-511: answer at v0 with our ranges, whatever the body
                # one series for every unknown version: a client's choice must not grow the metrics
                self._count("ApiVersions", UNSUPPORTED, Errors.UNSUPPORTED_VERSION, 0.0)
                body = ApiVersionsResponse.encode(supported_versions(Errors.UNSUPPORTED_VERSION), 0)
                return response_frame(correlation_id, body, 0)
            raise FrameRefused("version", f"{api.name} v{version} is not served (v{api.min_version}-{api.max_version})")
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
        ctx = RequestContext(header, self.info, self.service, CallContext(peer, header.client_id))
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
