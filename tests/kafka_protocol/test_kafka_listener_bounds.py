"""The Kafka listener's bounds: ``max.connections`` and ``max.connections.per.ip`` (a connection over either is closed
at once, logged and counted, the others still served) and ``queued.max.request.bytes`` (frames being read wait for
room rather than grow memory). A listener alone on the test's loop: ApiVersions needs no controller."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from kafka_helpers import read_frame
from prometheus_client import CollectorRegistry, generate_latest

from pykraft.cli import build_parser
from pykraft.kafka.apis.api_versions import ApiVersionsRequest
from pykraft.kafka.listener import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP,
    DEFAULT_QUEUED_MAX_REQUEST_BYTES,
    KafkaListener,
)
from pykraft.kafka.metrics import KafkaListenerCollector
from pykraft.kafka.protocol import RequestHeader, encode_request
from pykraft.kafka.registry import ListenerInfo
from pykraft.node import ConfigError, NodeSettings, settings_from_args

API_VERSIONS = encode_request(
    RequestHeader(18, 3, 9, "bounds", 2), ApiVersionsRequest.encode(ApiVersionsRequest.cls(), 3)
)


@pytest.fixture
async def make_listener() -> AsyncIterator[Callable[..., Any]]:
    started: list[KafkaListener] = []

    async def make(**options: Any) -> KafkaListener:
        listener = KafkaListener(None, ListenerInfo(1, "bounds"), **options)  # type: ignore[arg-type]
        await listener.start("127.0.0.1", 0)
        started.append(listener)
        return listener

    yield make
    for listener in started:
        await listener.stop()


def connect(listener: KafkaListener, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", listener.port), timeout=5, source_address=(source, 0))


def answered(sock: socket.socket) -> bool:
    try:
        sock.sendall(API_VERSIONS)
        return read_frame(sock) is not None
    except OSError:
        return False


def closed_at_once(sock: socket.socket) -> bool:
    """True when the listener closed the connection without reading a request (EOF or reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


async def until(condition: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_the_connection_past_max_connections_is_closed_and_the_others_still_work(
    make_listener: Callable[..., Any],
) -> None:
    listener = await make_listener(max_connections=3)
    socks = [connect(listener) for _ in range(3)]
    try:
        assert all([await asyncio.to_thread(answered, s) for s in socks])
        with structlog.testing.capture_logs() as logs:
            extra = connect(listener)
            assert await asyncio.to_thread(closed_at_once, extra)
            extra.close()
        refused = [e for e in logs if e["event"] == "kafka_connection_refused"]
        assert [(e["reason"], e["limit"]) for e in refused] == [("limit", 3)], logs
        assert listener.stats.connections_refused == {"limit": 1} and listener.stats.connections == 3
        assert all([await asyncio.to_thread(answered, s) for s in socks])  # the three are still served
        exposition = generate_latest(registry(listener)).decode()
        assert 'pykraft_kafka_listener_connections_refused_total{reason="limit"} 1.0' in exposition
        socks.pop().close()  # a place frees up: the next connection is served
        await until(lambda: listener.stats.connections == 2)
        socks.append(connect(listener))
        assert await asyncio.to_thread(answered, socks[-1])
    finally:
        for s in socks:
            s.close()
    await until(lambda: listener.stats.connections == 0)
    assert not listener._per_ip  # nothing kept per address once its connections are gone


async def test_max_connections_per_ip_refuses_one_address_only(make_listener: Callable[..., Any]) -> None:
    listener = await make_listener(max_connections=10, max_connections_per_ip=2)
    mine = [connect(listener) for _ in range(2)]
    try:
        assert all([await asyncio.to_thread(answered, s) for s in mine])
        with connect(listener) as third:
            assert await asyncio.to_thread(closed_at_once, third)
        with connect(listener, source="127.0.0.2") as other:  # another address has its own places
            assert await asyncio.to_thread(answered, other)
        assert listener.stats.connections_refused == {"per_ip_limit": 1}
    finally:
        for s in mine:
            s.close()


async def test_frames_being_read_wait_for_room_under_queued_max_request_bytes(
    make_listener: Callable[..., Any],
) -> None:
    """A client announcing a frame of the whole budget and trickling it holds the budget: another's request waits
    (its bytes are not read into memory) until the first gives up, then it is answered."""
    listener = await make_listener(max_request_bytes=1000, queued_max_request_bytes=1000)
    hog = connect(listener)
    patient = connect(listener)
    try:
        hog.sendall((1000).to_bytes(4, "big") + b"x" * 10)
        await until(lambda: listener._queued == 1000)
        patient.settimeout(0.3)
        patient.sendall(API_VERSIONS)
        with pytest.raises(TimeoutError):
            await asyncio.to_thread(patient.recv, 1)
        assert listener._queued == 1000
        hog.close()
        patient.settimeout(5)
        assert await asyncio.to_thread(read_frame, patient) is not None
        await until(lambda: listener._queued == 0)
    finally:
        hog.close()
        patient.close()


def registry(listener: KafkaListener) -> CollectorRegistry:
    out = CollectorRegistry()
    out.register(KafkaListenerCollector(listener))
    return out


def node_settings(tmp_path: Path, *overrides: str) -> NodeSettings:
    argv = ["node", "--node-id", "1", "--controller-quorum-voters", "1@127.0.0.1:19091", "--data-dir", str(tmp_path)]
    for override in overrides:
        argv += ["--override", override]
    return settings_from_args(build_parser().parse_args(argv))


def test_the_bounds_are_node_settings_with_bounded_defaults(tmp_path: Path) -> None:
    default = node_settings(tmp_path)
    assert (default.kafka_max_connections, default.kafka_max_connections_per_ip) == (
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_MAX_CONNECTIONS_PER_IP,
    )
    assert default.kafka_queued_max_request_bytes == DEFAULT_QUEUED_MAX_REQUEST_BYTES
    set_ = node_settings(tmp_path, "max.connections=10", "max.connections.per.ip=3", "queued.max.request.bytes=4096")
    assert (set_.kafka_max_connections, set_.kafka_max_connections_per_ip) == (10, 3)
    assert set_.kafka_queued_max_request_bytes == 4096
    for bad in ("max.connections=0", "max.connections.per.ip=-1", "queued.max.request.bytes=0"):
        with pytest.raises(ConfigError, match=bad.split("=")[0]):
            node_settings(tmp_path, bad)  # Kafka's unlimited (-1) is not on offer
