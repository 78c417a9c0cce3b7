"""A broker's reads from its own metadata image are authorized as the controllers' are: one in-process voter with
authorization on, a broker's metadata observer replicating its log, and the broker's Controller service over the
image (``pykraft.broker.image_services``) on a mutual-TLS listener whose ``ssl.principal.mapping.rules`` name alice's
certificate ``User:carol`` (so the rules the broker is given are the ones it uses)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from authz_helpers import FAST, Clients, acl, controllers, grant, settings, unfenced_broker, wait_for_leader

from broker.observer import MetadataObserver
from controller.authorizer import AclOperation as Op
from controller.authorizer import ResourceType as Res
from pykraft.api import broker_pb2, broker_pb2_grpc
from pykraft.api import controller_pb2 as pb
from pykraft.broker import describe_check, image_services
from pykraft.replica.data_plane import FetchService
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import ReplicaConfig
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.tls import TlsSettings, server_credentials
from pykraft.testing import free_ports
from quorum.errors import Errors
from quorum.raft.config import VoterAddress

RULES = r"RULE:^CN=alice$/carol/,RULE:^CN=((\\.|[^,\\])*)(,.*)?$/$1/,DEFAULT"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    names = ["controller-1", "broker-101", "alice", "bob", "admin"]
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), names)


async def reads(stub: object) -> dict[str, int]:
    """Each read the broker answers from its image: its request-level code, or the topic's / config resource's."""
    topics = await stub.DescribeTopics(pb.DescribeTopicsRequest(names=["orders"]), timeout=10)
    configs = await stub.DescribeConfigs(
        pb.DescribeConfigsRequest(
            resources=[pb.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="orders")]
        ),
        timeout=10,
    )
    acls = await stub.DescribeAcls(
        pb.DescribeAclsRequest(filter=pb.AclBindingFilter(resource_type_filter=1, pattern_type_filter=1,
                                                          operation=1, permission_type=1)),
        timeout=10,
    )  # fmt: skip
    moves = await stub.ListPartitionReassignments(pb.ListPartitionReassignmentsRequest(), timeout=10)
    return {
        "DescribeCluster": (await stub.DescribeCluster(pb.DescribeClusterRequest(), timeout=10)).error_code,
        "DescribeTopics": topics.error_code or topics.topics[0].error_code,
        "DescribeConfigs": configs.error_code or configs.results[0].error_code,
        "DescribeAcls": acls.error_code,
        "ListPartitionReassignments": moves.error_code,
    }


REFUSED = {
    "DescribeCluster": Errors.CLUSTER_AUTHORIZATION_FAILED,
    "DescribeTopics": Errors.TOPIC_AUTHORIZATION_FAILED,
    "DescribeConfigs": Errors.TOPIC_AUTHORIZATION_FAILED,
    "DescribeAcls": Errors.CLUSTER_AUTHORIZATION_FAILED,
    "ListPartitionReassignments": Errors.CLUSTER_AUTHORIZATION_FAILED,
}
SERVED = dict.fromkeys(REFUSED, Errors.NONE)


def replica_service(observer: MetadataObserver, tls: TlsSettings) -> FetchService:
    """The broker listener's fetch service with the DescribeReplicas check a broker agent gives it."""
    manager = ReplicaManager(101, ReplicaConfig(), clock=lambda: 0, broker_epoch=lambda: 1)
    return FetchService(manager, check_describe=describe_check(observer, tls))


async def probe(clients: Clients, who: str) -> str:
    """DescribeReplicas (Kafka's DescribeLogDirs): its answer has no error code, a refusal is PERMISSION_DENIED."""
    try:
        await broker_pb2_grpc.ReplicaFetchStub(clients.channel(who)).DescribeReplicas(
            broker_pb2.DescribeReplicasRequest(), timeout=10
        )
    except grpc.aio.AioRpcError as e:
        return f"{e.code().name}: {e.details()}"
    return "OK"


async def test_a_brokers_image_authorizes_the_reads_it_answers(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    async with controllers(tmp_path, certs) as nodes:
        leader = await wait_for_leader(nodes)
        controller = Clients(certs, leader.client_port)
        admin = controller.stub("admin")
        await unfenced_broker(admin, 1)
        created = await admin.CreateTopics(
            pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name="orders", num_partitions=1,
                                                                        replication_factor=1)]),
            timeout=10,
        )  # fmt: skip
        assert created.error_code == 0 and created.topics[0].error_code == 0, created
        peer = leader.raft.voters[leader.node_id]
        voters = {leader.node_id: VoterAddress(leader.node_id, peer.host, peer.port)}
        observer = MetadataObserver(101, voters, "authz", tmp_path / "broker-101", FAST, None, settings())
        files = certs["broker-101"]
        tls = TlsSettings(certificate=files.certificate, key=files.key, ca=files.ca, principal_mapping_rules=RULES)
        server = grpc.aio.server()
        for add in image_services(observer, tls):
            add(server)
        broker_pb2_grpc.add_ReplicaFetchServicer_to_server(replica_service(observer, tls), server)
        (port,) = free_ports(1)
        server.add_secure_port(f"127.0.0.1:{port}", server_credentials(tls))
        broker = Clients(certs, port)
        await server.start()
        observer.start()
        try:
            for who in ("alice", "bob"):
                assert await reads(broker.stub(who)) == REFUSED, who
            assert (await probe(broker, "alice")).startswith("PERMISSION_DENIED: Cluster authorization failed")
            async with asyncio.timeout(10):  # the image holds the topic
                while await reads(broker.stub("admin")) != SERVED:  # super.users: everything
                    await asyncio.sleep(0.05)
            # A write is the controller's: NOT_CONTROLLER before anything is authorized, as on a standby.
            write = await broker.stub("bob").CreateTopics(
                pb.CreateTopicsRequest(topics=[pb.CreateTopicsRequest.Topic(name="t", num_partitions=1)]), timeout=10
            )
            assert write.error_code == Errors.NOT_CONTROLLER

            await grant(
                admin,
                acl("User:carol", Op.DESCRIBE, Res.CLUSTER),
                acl("User:carol", Op.DESCRIBE, Res.TOPIC, "orders"),
                acl("User:carol", Op.DESCRIBE_CONFIGS, Res.TOPIC, "orders"),
                acl("User:alice", Op.ALL, Res.CLUSTER),  # alice's name before the broker's rules: no use there
            )
            async with asyncio.timeout(10):  # committed, then replayed into the broker's image
                while len(observer.image.authorizer) < 4:
                    await asyncio.sleep(0.01)
            assert await reads(broker.stub("alice")) == SERVED  # as User:carol
            assert await reads(broker.stub("bob")) == REFUSED
            assert await probe(broker, "alice") == "OK"
            refused = "PERMISSION_DENIED: Cluster authorization failed: principal User:bob from host 127.0.0.1 may not"
            assert (await probe(broker, "bob")).startswith(refused + " DESCRIBE CLUSTER kafka-cluster")
            assert await probe(broker, "admin") == "OK"
        finally:
            await broker.close()
            await controller.close()
            await server.stop(grace=0)
            await observer.close()
