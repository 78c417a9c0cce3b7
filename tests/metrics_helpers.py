"""A real controller node in this process (single voter: Raft over gRPC, the QuorumController, the quorum admin
and Controller services), its metrics served over HTTP on loopback from the registry ``pykraft node
--metrics-port`` serves, and a scrape parsed into samples."""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from controller.quorum_controller import ControllerSettings, QuorumController
from controller.records import deserialize
from pykraft.client import AdminClient
from pykraft.metrics import node_registry
from pykraft.service import ControllerService
from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.message import Uuid
from quorum.log.quorum_state import QuorumStateStore
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.runtime import RaftNode
from quorum.transport.admin import QuorumAdminService

FAST = RaftConfig(election_timeout_ms=50, fetch_timeout_ms=200, request_timeout_ms=200)


@dataclass
class LiveNode:
    node: RaftNode
    controller: QuorumController
    admin: AdminClient
    metrics_port: int
    voters: dict[int, VoterAddress]

    def scrape_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            return r.read().decode()

    async def scrape(self) -> Scrape:
        return Scrape(await asyncio.to_thread(self.scrape_text))


class Scrape:
    """A /metrics answer: every sample, and the names of the families that had samples."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.samples: list[Sample] = []
        self.families: dict[str, str] = {}  # family name -> type
        for family in text_string_to_metric_families(text):
            if family.samples:
                self.families[family.name] = family.type
            self.samples.extend(family.samples)
        self.names = {s.name for s in self.samples}

    def values(self, name: str, **labels: str) -> list[float]:
        return [s.value for s in self.samples if s.name == name and labels.items() <= s.labels.items()]

    def value(self, name: str, **labels: str) -> float:
        found = self.values(name, **labels)
        assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
        return found[0]


@asynccontextmanager
async def live_node(tmp_path: Path, settings: ControllerSettings | None = None) -> AsyncIterator[LiveNode]:
    """Node 1, leading alone once its election timeout passed; stopped (servers included) on the way out."""
    port, metrics_port = free_ports(2)
    voters = {1: VoterAddress(1, "127.0.0.1", port)}
    metadata_log = MetadataLog.open(tmp_path / "controller")
    faults = LoggingFaultHandler()
    node = RaftNode(
        node_id=1,
        voters=voters,
        cluster_id="metrics",
        log=metadata_log,
        store=QuorumStateStore(metadata_log.dir),
        config=FAST,
        faults=faults,
    )
    controller = QuorumController(1, node, settings or ControllerSettings(max_idle_interval_ms=0), faults)
    server = grpc.aio.server()
    node.transport.add_to_server(server)
    QuorumAdminService(node, deserialize).add_to_server(server)  # DescribeQuorum: observers ask it when caught up
    ControllerService(controller, "metrics", voters).add_to_server(server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    controller.start()
    node.start()
    http, _ = start_http_server(metrics_port, addr="127.0.0.1", registry=node_registry(node, controller, faults))
    try:
        async with AdminClient(f"127.0.0.1:{port}", request_timeout_ms=5000, default_api_timeout_ms=15_000) as admin:
            yield LiveNode(node, controller, admin, metrics_port, voters)
    finally:
        http.shutdown()
        http.server_close()
        await controller.close()
        await node.shutdown(graceful=False)
        await server.stop(0)


async def unfenced_brokers(admin: AdminClient, broker_ids: list[int]) -> dict[int, int]:
    """Register the brokers and heartbeat until each is unfenced; their epochs."""
    epochs = {
        b: await admin.register_broker(b, str(Uuid.random()), None, [("PLAINTEXT", "127.0.0.1", 9000 + b)])
        for b in broker_ids
    }
    async with asyncio.timeout(10):
        for b, epoch in epochs.items():
            while (await admin.heartbeat(b, epoch, 1 << 40)).is_fenced:
                await asyncio.sleep(0.02)
    return epochs
