"""One controller node in this process, wired as ``pykraft node`` wires it (the listener's SERVER_OPTIONS, the peer
stream, the quorum admin and the Controller service on one port), for the hostile-input tests. No metrics registry:
it would install the process-wide gc hook for the rest of the run."""

from __future__ import annotations

import asyncio
import resource
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from controller.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl
from controller.quorum_controller import ControllerSettings, QuorumController
from pykraft.api import controller_pb2 as cpb
from pykraft.api import controller_pb2_grpc as cpb_grpc
from pykraft.node import NodeSettings, add_client_services
from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.quorum_state import QuorumStateStore
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.runtime import RaftNode
from quorum.transport.server import new_server

FAST = RaftConfig(election_timeout_ms=50, fetch_timeout_ms=200, request_timeout_ms=200)
CLUSTER_ID = "hostile"
ALLOW = AclPermissionType.ALLOW


@dataclass
class LiveNode:
    node: RaftNode
    controller: QuorumController
    faults: LoggingFaultHandler
    address: str

    @property
    def healthy(self) -> bool:
        """Nothing failed: no fault reported, the controller's state trusted, the Raft core still running."""
        return not self.faults.faults and not self.controller.failed and not self.node.failed

    async def wait_active(self, timeout: float = 10.0) -> None:
        """Active, and its bootstrap records committed: they are written after activation, and a test that checks
        a refused request for leaving the log alone must not see them land during its first request."""
        async with asyncio.timeout(timeout):
            while not (self.controller.active and self.controller.bootstrapped):
                await asyncio.sleep(0.01)

    async def commits(self, name: str) -> bool:
        """A write (an ACL for topic ``name``) goes through the controller and Raft and is committed."""
        before = self.controller.committed_offset
        acl = StandardAcl(ResourceType.TOPIC, name, PatternType.LITERAL, "User:a", "*", AclOperation.READ, ALLOW)
        [result] = await self.controller.create_acls([acl], timeout_ms=10_000)
        return not result.error.failed and self.controller.committed_offset > before

    async def serves(self, channel: grpc.aio.Channel) -> bool:
        """A real client still gets an answer from the controller."""
        stub = cpb_grpc.ControllerStub(channel)
        response = await stub.DescribeCluster(cpb.DescribeClusterRequest(), timeout=10)
        return response.error_code == 0


@asynccontextmanager
async def live_node(tmp_path: Path, settings: ControllerSettings | None = None) -> AsyncIterator[LiveNode]:
    """Node 1, the only voter, leading once its election timeout passed; stopped on the way out."""
    [port] = free_ports(1)
    voters = {1: VoterAddress(1, "127.0.0.1", port)}
    node_settings = NodeSettings(
        node_id=1,
        voters=voters,
        data_dir=tmp_path / "controller",
        cluster_id=CLUSTER_ID,
        raft=FAST,
        controller=settings or ControllerSettings(max_idle_interval_ms=0),
    )
    metadata_log = MetadataLog.open(node_settings.data_dir)
    faults = LoggingFaultHandler()
    node = RaftNode(
        node_id=1,
        voters=voters,
        cluster_id=CLUSTER_ID,
        log=metadata_log,
        store=QuorumStateStore(metadata_log.dir),
        config=FAST,
        faults=faults,
    )
    controller = QuorumController(1, node, node_settings.controller, faults)
    server = new_server()
    node.transport.add_to_server(server)
    add_client_services(server, node_settings, node, controller, voters)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    controller.start()
    node.start()
    live = LiveNode(node, controller, faults, f"127.0.0.1:{port}")
    try:
        await live.wait_active()
        yield live
    finally:
        await controller.close()
        await node.shutdown(graceful=False)
        await server.stop(0)


def rss_bytes() -> int:
    """This process's resident set now (Linux: /proc)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
