"""A real controller node in this process with a Kafka listener, run on its own event loop in a thread so that the
blocking Kafka clients (kafka-python, confluent-kafka) can drive it from the test's thread; brokers registered and
kept unfenced by heartbeats, and a gRPC AdminClient on the node's loop for comparisons."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from controller.quorum_controller import ControllerSettings, QuorumController
from controller.records import deserialize
from pykraft.client import AdminClient
from pykraft.kafka.listener import KafkaListener
from pykraft.kafka.registry import ListenerInfo
from pykraft.loop_thread import LoopThread
from pykraft.security.ssl_context import ReloadingSslContext
from pykraft.security.tls import ClientAuth, TlsSettings
from pykraft.service import ControllerService
from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.message import Uuid
from quorum.log.quorum_state import QuorumStateStore
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.runtime import RaftNode
from quorum.transport.admin import QuorumAdminService

T = TypeVar("T")
FAST = RaftConfig(election_timeout_ms=50, fetch_timeout_ms=200, request_timeout_ms=200)
BROKERS = ((101, "rack-1", False), (102, "rack-0", False), (103, "rack-1", False))  # (id, rack, fenced)
CLUSTER_ID = "kafka-wire"


@dataclass
class KafkaNode:
    thread: LoopThread
    controller: QuorumController
    admin: AdminClient  # gRPC, lives on the node's loop: call it through run()
    listener: KafkaListener
    grpc_bootstrap: str

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.listener.port}"

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return self.thread.call(coro, timeout)


async def _heartbeats(admin: AdminClient, epochs: dict[int, int]) -> None:
    while True:
        for b, epoch in epochs.items():
            with contextlib.suppress(Exception):
                await admin.heartbeat(b, epoch, 1 << 40)
        await asyncio.sleep(0.5)


@contextlib.contextmanager
def kafka_node(
    tmp_path: Path,
    settings: ControllerSettings | None = None,
    brokers: Sequence[tuple[int, str, bool]] = BROKERS,
    *,
    standby: bool = False,
    tls: TlsSettings | None = None,
    listener_options: dict[str, Any] | None = None,
) -> Iterator[KafkaNode]:
    """Node 1, leading alone, with its Kafka listener and ``brokers`` registered (those not fenced kept unfenced
    by heartbeats); stopped on the way out. ``standby``: a second voter that never answers, so node 1 never leads
    (and no broker registers). ``tls``: the node's own settings, making the Kafka listener an SSL one (its gRPC
    server, which the helper's admin client uses, stays plaintext: ``User:ANONYMOUS``); ``listener_options``: more
    KafkaListener arguments (its bounds)."""
    thread = LoopThread("kafka-node")
    port, silent = free_ports(2)
    voters = {1: VoterAddress(1, "127.0.0.1", port)}
    if standby:
        voters[2] = VoterAddress(2, "127.0.0.1", silent)
        brokers = ()
    faults = LoggingFaultHandler()
    state: dict[str, Any] = {}

    async def start() -> KafkaNode:
        metadata_log = MetadataLog.open(tmp_path / "controller")
        node = RaftNode(
            node_id=1,
            voters=voters,
            cluster_id=CLUSTER_ID,
            log=metadata_log,
            store=QuorumStateStore(metadata_log.dir),
            config=FAST,
            faults=faults,
        )
        controller = QuorumController(1, node, settings or ControllerSettings(max_idle_interval_ms=0), faults)
        server = grpc.aio.server()
        node.transport.add_to_server(server)
        QuorumAdminService(node, deserialize).add_to_server(server)
        service = ControllerService(controller, CLUSTER_ID, voters, mapper=tls.mapper() if tls else None)
        service.add_to_server(server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        controller.start()
        node.start()
        info = ListenerInfo(1, CLUSTER_ID)
        ssl_context = None
        if tls is not None:
            required = tls.client_auth is ClientAuth.REQUIRED
            ssl_context = ReloadingSslContext(tls, client_auth_required=required, name="kafka")
        listener = KafkaListener(service, info, tls=ssl_context, **(listener_options or {}))
        await listener.start("127.0.0.1", 0)
        info.listeners[1] = ("127.0.0.1", listener.port)
        admin = AdminClient(f"127.0.0.1:{port}", request_timeout_ms=5000, default_api_timeout_ms=15_000)
        await admin.__aenter__()
        epochs = {
            b: await admin.register_broker(b, str(Uuid.random()), rack, [("PLAINTEXT", "127.0.0.1", 9000 + b)])
            for b, rack, fenced in brokers
        }
        for b, _rack, fenced in brokers:
            if fenced:  # registered, never heard from again: fenced
                del epochs[b]
        async with asyncio.timeout(10):
            for b, epoch in epochs.items():
                while (await admin.heartbeat(b, epoch, 1 << 40)).is_fenced:
                    await asyncio.sleep(0.02)
        state.update(node=node, server=server, heartbeats=asyncio.create_task(_heartbeats(admin, epochs)))
        return KafkaNode(thread, controller, admin, listener, f"127.0.0.1:{port}")

    async def stop(live: KafkaNode) -> None:
        state["heartbeats"].cancel()
        await live.listener.stop()
        await live.admin.__aexit__(None, None, None)
        await live.controller.close()
        await state["node"].shutdown(graceful=False)
        await state["server"].stop(0)

    live = thread.call(start(), 30)
    try:
        yield live
    finally:
        thread.call(stop(live), 30)
        asyncio.run(thread.close())


def raw_connection(bootstrap: str, timeout: float = 5) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout)


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame's payload (header and body), or None when the server closed the connection."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        try:
            chunk = sock.recv(n - len(data))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def raw_request(sock: socket.socket, api_key: int, version: int, body: bytes, correlation_id: int = 1) -> None:
    """Send one request, its header v1 or v2 as the API version's flexibility says."""
    from pykraft.kafka.protocol import RequestHeader, encode_request
    from pykraft.kafka.registry import APIS

    flexible = APIS[api_key].request.is_flexible(version) if api_key in APIS else False
    sock.sendall(encode_request(RequestHeader(api_key, version, correlation_id, "raw", 2 if flexible else 1), body))


def raw_response(sock: socket.socket, api_key: int, version: int) -> tuple[int, Any]:
    """The next response: its correlation id and its body decoded at ``version``."""
    from pykraft.kafka.protocol import response_header_version
    from pykraft.kafka.registry import APIS

    frame = read_frame(sock)
    assert frame is not None, "the listener closed the connection"
    spec = APIS[api_key].response
    (correlation_id,) = struct.unpack_from(">i", frame)
    start = 4 + response_header_version(api_key, spec.is_flexible(version))
    return correlation_id, spec.decode(frame[start:], version)
