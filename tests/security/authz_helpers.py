"""In-process controllers for the authorization tests: each node runs Raft on a plaintext peer server and the
Controller and quorum admin services on a mutual-TLS listener on 127.0.0.1 (so each request has a principal from
its client certificate), with ``authorizer.class.name`` set; clients are raw gRPC stubs holding one certificate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from controller.authorizer import CLUSTER_NAME, PatternType, ResourceType
from controller.authorizer import AclPermissionType as Perm
from controller.quorum_controller import ControllerSettings, QuorumController
from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.authorization import controller_authorization
from pykraft.security.ca import CertFiles
from pykraft.security.tls import TlsSettings, channel_credentials, server_credentials
from pykraft.service import ControllerService
from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.message import Uuid
from quorum.log.quorum_state import QuorumStateStore
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.runtime import RaftNode
from quorum.transport.admin import QuorumAdminService
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc

FAST = RaftConfig(election_timeout_ms=50, fetch_timeout_ms=200, request_timeout_ms=200)  # one voter: nobody to wait for
# Several voters on a loaded machine: a follower waits well past the leader's longest fetch wait before it stands, so
# the leader a test found stays the leader until the test stops it.
STEADY = RaftConfig(election_timeout_ms=300, fetch_timeout_ms=1500, request_timeout_ms=500, fetch_max_wait_ms=100)
PRINCIPALS = ["controller-1", "alice", "bob", "admin"]


def settings(**kw: object) -> ControllerSettings:
    base: dict[str, object] = {
        "max_idle_interval_ms": 0,
        "super_users": "User:admin",
        "authorizer_class_name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    }
    return ControllerSettings(**{**base, **kw})  # type: ignore[arg-type]


@dataclass
class Node:
    node_id: int
    raft: RaftNode
    controller: QuorumController
    client_port: int
    servers: list[grpc.aio.Server] = field(default_factory=list)
    stopped: bool = False

    async def stop(self) -> None:
        if self.stopped:
            return
        self.stopped = True
        await self.controller.close()
        await self.raft.shutdown(graceful=False)
        for server in self.servers:
            await server.stop(grace=0)


@asynccontextmanager
async def controllers(
    tmp_path: Path,
    certs: dict[str, CertFiles],
    size: int = 1,
    *,
    mapping_rules: str | None = None,
    raft_config: RaftConfig = FAST,
    **kw: object,
) -> AsyncIterator[dict[int, Node]]:
    """``size`` voters (``kw``: their ControllerSettings); stopped (servers included) on the way out."""
    ports = free_ports(2 * size)
    voters = {i + 1: VoterAddress(i + 1, "127.0.0.1", ports[i]) for i in range(size)}
    server_tls = TlsSettings(
        certificate=certs["controller-1"].certificate,
        key=certs["controller-1"].key,
        ca=certs["controller-1"].ca,
        principal_mapping_rules=mapping_rules,
    )
    nodes: dict[int, Node] = {}
    async with AsyncExitStack() as stack:
        for node_id in voters:
            metadata_log = MetadataLog.open(tmp_path / f"node-{node_id}")
            faults = LoggingFaultHandler()
            raft = RaftNode(
                node_id=node_id,
                voters=voters,
                cluster_id="authz",
                log=metadata_log,
                store=QuorumStateStore(metadata_log.dir),
                config=raft_config,
                faults=faults,
            )
            controller = QuorumController(node_id, raft, settings(**kw), faults)
            peers = grpc.aio.server()
            raft.transport.add_to_server(peers)
            peers.add_insecure_port(f"127.0.0.1:{voters[node_id].port}")
            clients = grpc.aio.server()
            mapper = server_tls.mapper()
            authorization = controller_authorization(controller, mapper)
            QuorumAdminService(
                raft,
                raw_appends=True,
                authorize=authorization.quorum_admin_check if authorization.enabled else None,
            ).add_to_server(clients)
            ControllerService(controller, "authz", voters, mapper=mapper).add_to_server(clients)
            client_port = ports[size + node_id - 1]
            clients.add_secure_port(f"127.0.0.1:{client_port}", server_credentials(server_tls))
            node = nodes[node_id] = Node(node_id, raft, controller, client_port, [peers, clients])
            stack.push_async_callback(node.stop)
            await peers.start()
            await clients.start()
            controller.start()
            raft.start()
        yield nodes


async def wait_for_leader(nodes: dict[int, Node], timeout: float = 10) -> Node:
    async with asyncio.timeout(timeout):
        while True:
            for n in nodes.values():
                if not n.stopped and n.controller.active and n.raft.high_watermark > 0:
                    return n
            await asyncio.sleep(0.01)


class Clients:
    """A Controller stub per principal against one node's TLS listener (channels closed by :meth:`close`)."""

    def __init__(self, certs: dict[str, CertFiles], port: int) -> None:
        self.certs, self.port = certs, port
        self._channels: list[grpc.aio.Channel] = []

    def channel(self, who: str) -> grpc.aio.Channel:
        files = self.certs[who]
        credentials = channel_credentials(TlsSettings(certificate=files.certificate, key=files.key, ca=files.ca))
        channel = grpc.aio.secure_channel(f"127.0.0.1:{self.port}", credentials)
        self._channels.append(channel)
        return channel

    def stub(self, who: str) -> pb_grpc.ControllerStub:
        return pb_grpc.ControllerStub(self.channel(who))

    def admin_stub(self, who: str) -> qpb_grpc.QuorumAdminStub:
        return qpb_grpc.QuorumAdminStub(self.channel(who))

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


def acl(
    principal: str,
    op: int,
    rtype: int = ResourceType.TOPIC,
    name: str = "orders",
    *,
    perm: int = Perm.ALLOW,
    pattern: int = PatternType.LITERAL,
    host: str = "*",
) -> pb.CreateAclsRequest.AclCreation:
    if rtype == ResourceType.CLUSTER:
        name = CLUSTER_NAME
    return pb.CreateAclsRequest.AclCreation(
        resource_type=rtype,
        resource_name=name,
        resource_pattern_type=pattern,
        principal=principal,
        host=host,
        operation=op,
        permission_type=perm,
    )


async def grant(admin: pb_grpc.ControllerStub, *creations: pb.CreateAclsRequest.AclCreation) -> None:
    response = await admin.CreateAcls(pb.CreateAclsRequest(creations=list(creations)), timeout=10)
    assert response.error_code == 0, response.error_message
    assert [r.error_code for r in response.results] == [0] * len(creations), response


async def unfenced_broker(admin: pb_grpc.ControllerStub, broker_id: int = 1) -> int:
    """Register broker ``broker_id`` and heartbeat it until unfenced; its epoch."""
    registered = await admin.RegisterBroker(
        pb.RegisterBrokerRequest(
            broker_id=broker_id,
            incarnation_id=str(Uuid.random()),
            listeners=[pb.Listener(name="PLAINTEXT", host="127.0.0.1", port=9092)],
        ),
        timeout=10,
    )
    assert registered.error_code == 0, registered.error_message
    async with asyncio.timeout(10):
        while True:
            beat = await admin.BrokerHeartbeat(
                pb.BrokerHeartbeatRequest(
                    broker_id=broker_id, broker_epoch=registered.broker_epoch, current_metadata_offset=1 << 40
                ),
                timeout=10,
            )
            assert beat.error_code == 0, beat.error_message
            if not beat.is_fenced:
                return registered.broker_epoch
            await asyncio.sleep(0.02)
