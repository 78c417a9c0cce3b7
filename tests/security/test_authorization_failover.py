"""Three in-process voters with authorization on: every node replays the same ACLs, a standby answers NOT_CONTROLLER
before authorizing anything (the client then asks the controller), and after the active controller stops the new
one refuses and allows exactly what the old one did."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from authz_helpers import STEADY, Clients, acl, controllers, grant, wait_for_leader

from controller.authorizer import CLUSTER_NAME, AuthorizationResult
from controller.authorizer import AclOperation as Op
from controller.authorizer import AclPermissionType as Perm
from controller.authorizer import PatternType as Pat
from controller.authorizer import ResourceType as Res
from pykraft.api import controller_pb2 as pb
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from quorum.errors import Errors


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), ["controller-1", "alice", "bob", "admin"])


async def codes(clients: Clients, who: str) -> tuple[int, int]:
    """(DescribeCluster's code, DescribeTopics' code for pay.eu) for ``who`` at the node ``clients`` dial."""
    stub = clients.stub(who)
    cluster = await stub.DescribeCluster(pb.DescribeClusterRequest(), timeout=10)
    topics = await stub.DescribeTopics(pb.DescribeTopicsRequest(names=["pay.eu"]), timeout=10)
    return cluster.error_code, topics.error_code or topics.topics[0].error_code


async def test_a_new_controller_enforces_the_same_acls(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    async with controllers(tmp_path, certs, size=3, raft_config=STEADY) as nodes:
        leader = await wait_for_leader(nodes)
        clients = {n: Clients(certs, node.client_port) for n, node in nodes.items()}
        try:
            await grant(
                clients[leader.node_id].stub("admin"),
                acl("User:*", Op.DESCRIBE, Res.CLUSTER),
                acl("User:bob", Op.DESCRIBE, Res.CLUSTER, perm=Perm.DENY),
                acl("User:alice", Op.DESCRIBE, Res.TOPIC, "pay", pattern=Pat.PREFIXED),
            )
            async with asyncio.timeout(10):  # committed, hence replayed into every node's authorizer
                while any(len(n.controller.authorizer) < 3 for n in nodes.values()):
                    await asyncio.sleep(0.01)
            for n in nodes.values():
                decide = n.controller.authorizer.authorize
                assert (
                    decide("User:alice", "127.0.0.1", Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)
                    is AuthorizationResult.ALLOWED
                )
                assert (
                    decide("User:bob", "127.0.0.1", Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME)
                    is AuthorizationResult.DENIED
                )

            expected = {
                "alice": (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION),  # may describe pay.*: it does not exist
                "bob": (Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TOPIC_AUTHORIZATION_FAILED),
            }
            standby = next(n for n in nodes if n != leader.node_id)
            for who in expected:
                assert await codes(clients[leader.node_id], who) == expected[who]
                # A standby refuses nobody: NOT_CONTROLLER first, as without authorization.
                assert await codes(clients[standby], who) == (Errors.NOT_CONTROLLER, Errors.NOT_CONTROLLER)

            await leader.stop()
            successor = await wait_for_leader({n: node for n, node in nodes.items() if not node.stopped})
            assert successor.node_id != leader.node_id
            for who in expected:
                assert await codes(clients[successor.node_id], who) == expected[who]
        finally:
            for c in clients.values():
                await c.close()
