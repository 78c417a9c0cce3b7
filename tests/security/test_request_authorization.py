"""Every request the controller serves, authorized as Kafka's ControllerApis does, over real mutual-TLS connections
to an in-process node with ``authorizer.class.name`` set and ``super.users=User:admin``.

Per API (one table): User:alice without ACLs gets Kafka's code — TOPIC_AUTHORIZATION_FAILED per topic or config
resource, CLUSTER_AUTHORIZATION_FAILED for the whole request (or per broker config resource) — and, after the ACL
the API needs is added, the answer the super user would get. Then the rules around them: DENY beats ALLOW,
PREFIXED patterns, CREATE implies neither DESCRIBE nor DESCRIBE_CONFIGS, topics withheld from a listing, unknown
versus refused in DeleteTopics, hosts, and the switch off."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from authz_helpers import Clients, acl, controllers, grant, unfenced_broker, wait_for_leader
from structlog.testing import capture_logs

from controller.authorizer import AclOperation as Op
from controller.authorizer import PatternType as Pat
from controller.authorizer import ResourceType as Res
from controller.records import NoOpRecord, serialize
from pykraft.api import controller_pb2 as pb
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from quorum.errors import Errors
from quorum.transport.pb import quorum_pb2 as qpb
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc

ALICE = "User:alice"
Deleted, Grown = pb.DeleteTopicsRequest.DeleteTopicState, pb.CreatePartitionsRequest.CreatePartitionsTopic
IsrMember = pb.AlterPartitionRequest.BrokerState
TAF, CAF = Errors.TOPIC_AUTHORIZATION_FAILED, Errors.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), ["controller-1", "alice", "bob", "admin"])


@dataclass
class Ctx:
    clients: Clients
    admin: Any  # ControllerStub of User:admin (a super user)
    alice: Any
    bob: Any
    broker_epoch: int
    orders_id: str
    leader_epoch: int
    partition_epoch: int


@pytest.fixture
async def ctx(tmp_path: Path, certs: dict[str, CertFiles]) -> AsyncIterator[Ctx]:
    """One node leading, broker 1 registered and unfenced, topic orders (1 partition) made by the super user."""
    async with controllers(tmp_path, certs) as nodes:
        node = await wait_for_leader(nodes)
        clients = Clients(certs, node.client_port)
        admin = clients.stub("admin")
        epoch = await unfenced_broker(admin)
        created = await admin.CreateTopics(
            pb.CreateTopicsRequest(topics=[topic(name="orders", num_partitions=1)]), timeout=10
        )
        assert created.topics[0].error_code == 0, created
        described = await admin.DescribeTopics(pb.DescribeTopicsRequest(names=["orders"]), timeout=10)
        p = described.topics[0].partitions[0]
        yield Ctx(
            clients,
            admin,
            clients.stub("alice"),
            clients.stub("bob"),
            epoch,
            created.topics[0].topic_id,
            p.leader_epoch,
            p.partition_epoch,
        )
        await clients.close()


def topic(name: str, num_partitions: int = -1, **kw: Any) -> pb.CreateTopicsRequest.Topic:
    return pb.CreateTopicsRequest.Topic(name=name, num_partitions=num_partitions, replication_factor=-1, **kw)


Call = Callable[[Any, Ctx], Awaitable[int]]  # (stub, ctx) -> the code the row is about


def first(field: str) -> Callable[[Any], int]:
    return lambda response: getattr(response, field)[0].error_code


def rpc(method: str, request: Callable[[Ctx], Any], code: Callable[[Any], int] = lambda r: r.error_code) -> Call:
    async def call(stub: Any, c: Ctx) -> int:
        return int(code(await getattr(stub, method)(request(c), timeout=10)))

    return call


TOPIC_CONFIG = pb.IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0, value="1000")
BROKER_CONFIG = pb.IncrementalAlterConfigsRequest.AlterableConfig(
    name="compression.type", config_operation=0, value="gzip"
)
ANY_FILTER = pb.AclBindingFilter(resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1)

# (id, call, the ACL alice needs as (operation, resource type, name), the code without it)
TABLE: list[tuple[str, Call, tuple[int, int, str], int]] = [
    (
        "CreateTopics",
        rpc(
            "CreateTopics",
            lambda c: pb.CreateTopicsRequest(topics=[topic(name="payments", num_partitions=1)]),
            first("topics"),
        ),
        (Op.CREATE, Res.TOPIC, "payments"),
        TAF,
    ),
    (
        "CreateTopics-cluster",
        rpc(
            "CreateTopics",
            lambda c: pb.CreateTopicsRequest(topics=[topic(name="payments", num_partitions=1)]),
            first("topics"),
        ),
        (Op.CREATE, Res.CLUSTER, ""),
        TAF,
    ),
    (
        "DescribeTopics",
        rpc("DescribeTopics", lambda c: pb.DescribeTopicsRequest(names=["orders"]), first("topics")),
        (Op.DESCRIBE, Res.TOPIC, "orders"),
        TAF,
    ),
    (
        "DeleteTopics",
        rpc(
            "DeleteTopics",
            lambda c: pb.DeleteTopicsRequest(topics=[Deleted(name="orders")]),
            first("responses"),
        ),
        (Op.DELETE, Res.TOPIC, "orders"),
        TAF,
    ),
    (
        "DeleteTopics-by-id",
        rpc(
            "DeleteTopics",
            lambda c: pb.DeleteTopicsRequest(topics=[Deleted(topic_id=c.orders_id)]),
            first("responses"),
        ),
        (Op.DELETE, Res.TOPIC, "orders"),
        TAF,
    ),
    (
        "CreatePartitions",
        rpc(
            "CreatePartitions",
            lambda c: pb.CreatePartitionsRequest(topics=[Grown(name="orders", count=2)]),
            first("results"),
        ),
        (Op.ALTER, Res.TOPIC, "orders"),
        TAF,
    ),
    (
        "IncrementalAlterConfigs-topic",
        rpc(
            "IncrementalAlterConfigs",
            lambda c: pb.IncrementalAlterConfigsRequest(
                resources=[
                    pb.IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=2, resource_name="orders", configs=[TOPIC_CONFIG]
                    )
                ]
            ),
            first("responses"),
        ),
        (Op.ALTER_CONFIGS, Res.TOPIC, "orders"),
        TAF,
    ),
    (
        "IncrementalAlterConfigs-broker",
        rpc(
            "IncrementalAlterConfigs",
            lambda c: pb.IncrementalAlterConfigsRequest(
                resources=[
                    pb.IncrementalAlterConfigsRequest.AlterConfigsResource(
                        resource_type=4, resource_name="1", configs=[BROKER_CONFIG]
                    )
                ]
            ),
            first("responses"),
        ),
        (Op.ALTER_CONFIGS, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "DescribeConfigs-topic",
        rpc(
            "DescribeConfigs",
            lambda c: pb.DescribeConfigsRequest(
                resources=[pb.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="orders")]
            ),
            first("results"),
        ),
        (Op.DESCRIBE_CONFIGS, Res.TOPIC, "orders"),
        TAF,
    ),
    (
        "DescribeConfigs-broker",
        rpc(
            "DescribeConfigs",
            lambda c: pb.DescribeConfigsRequest(
                resources=[pb.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="1")]
            ),
            first("results"),
        ),
        (Op.DESCRIBE_CONFIGS, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "DescribeCluster",
        rpc("DescribeCluster", lambda c: pb.DescribeClusterRequest()),
        (Op.DESCRIBE, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "RegisterBroker",
        rpc(
            "RegisterBroker",
            lambda c: pb.RegisterBrokerRequest(
                broker_id=2,
                incarnation_id="AAAAAAAAAAAAAAAAAAAAAQ",
                listeners=[pb.Listener(name="P", host="h", port=9)],
            ),
        ),
        (Op.CLUSTER_ACTION, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "BrokerHeartbeat",
        rpc(
            "BrokerHeartbeat",
            lambda c: pb.BrokerHeartbeatRequest(broker_id=1, broker_epoch=c.broker_epoch, current_metadata_offset=1),
        ),
        (Op.CLUSTER_ACTION, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "AlterPartition",
        rpc(
            "AlterPartition",
            lambda c: pb.AlterPartitionRequest(
                broker_id=1,
                broker_epoch=c.broker_epoch,
                topics=[
                    pb.AlterPartitionRequest.TopicData(
                        topic_id=c.orders_id,
                        partitions=[
                            pb.AlterPartitionRequest.PartitionData(
                                partition_index=0,
                                leader_epoch=c.leader_epoch,
                                partition_epoch=c.partition_epoch,
                                new_isr_with_epochs=[IsrMember(broker_id=1, broker_epoch=c.broker_epoch)],
                            )
                        ],
                    )
                ],
            ),
        ),
        (Op.CLUSTER_ACTION, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "ElectLeaders",
        rpc(
            "ElectLeaders",
            lambda c: pb.ElectLeadersRequest(
                topic_partitions=pb.ElectLeadersRequest.TopicPartitionsList(
                    topics=[pb.ElectLeadersRequest.TopicPartitions(topic="orders", partitions=[0])]
                )
            ),
        ),
        (Op.ALTER, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "AlterPartitionReassignments",
        rpc(
            "AlterPartitionReassignments",
            lambda c: pb.AlterPartitionReassignmentsRequest(
                topics=[
                    pb.AlterPartitionReassignmentsRequest.ReassignableTopic(
                        name="orders",
                        partitions=[
                            pb.AlterPartitionReassignmentsRequest.ReassignablePartition(
                                partition_index=0,
                                replicas=pb.AlterPartitionReassignmentsRequest.ReplicaList(broker_ids=[1]),
                            )
                        ],
                    )
                ]
            ),
        ),
        (Op.ALTER, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "ListPartitionReassignments",
        rpc("ListPartitionReassignments", lambda c: pb.ListPartitionReassignmentsRequest()),
        (Op.DESCRIBE, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "CreateAcls",
        rpc("CreateAcls", lambda c: pb.CreateAclsRequest(creations=[acl("User:bob", Op.READ)])),
        (Op.ALTER, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "DescribeAcls",
        rpc("DescribeAcls", lambda c: pb.DescribeAclsRequest(filter=ANY_FILTER)),
        (Op.DESCRIBE, Res.CLUSTER, ""),
        CAF,
    ),
    (
        "DeleteAcls",
        rpc("DeleteAcls", lambda c: pb.DeleteAclsRequest(filters=[ANY_FILTER])),
        (Op.ALTER, Res.CLUSTER, ""),
        CAF,
    ),
    ("CreateSnapshot", rpc("CreateSnapshot", lambda c: pb.CreateSnapshotRequest()), (Op.ALTER, Res.CLUSTER, ""), CAF),
]


@pytest.mark.parametrize(("call", "needs", "denied"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE])
async def test_each_api_needs_its_acl(ctx: Ctx, call: Call, needs: tuple[int, int, str], denied: int) -> None:
    assert await call(ctx.alice, ctx) == denied
    operation, rtype, name = needs
    # What alice needs is not enough for bob, nor is the wrong operation for alice.
    wrong = Op.CREATE if operation in (Op.DESCRIBE, Op.DESCRIBE_CONFIGS) else Op.DESCRIBE_CONFIGS  # implies neither
    await grant(ctx.admin, acl("User:bob", operation, rtype, name), acl(ALICE, wrong, rtype, name))
    assert await call(ctx.alice, ctx) == denied
    await grant(ctx.admin, acl(ALICE, operation, rtype, name))
    assert await call(ctx.alice, ctx) == Errors.NONE


async def test_denials_name_what_was_refused(ctx: Ctx) -> None:
    with capture_logs() as logs:
        r = await ctx.alice.DescribeCluster(pb.DescribeClusterRequest(), timeout=10)
    denied = [e for e in logs if e["event"] == "authorization_denied"]
    assert denied == [
        {
            "event": "authorization_denied",
            "log_level": "info",
            "principal": ALICE,
            "host": "127.0.0.1",
            "operation": "DESCRIBE",
            "resource_type": "CLUSTER",
            "resource_name": "kafka-cluster",
        }
    ]
    [request] = [e for e in logs if e["event"] == "request"]  # the request line names who asked
    assert (request["api"], request["error_code"], request["principal"], request["host"]) == (
        "DescribeCluster",
        CAF,
        ALICE,
        "127.0.0.1",
    )
    assert (r.error_code, r.error_message) == (
        CAF,
        "Cluster authorization failed: principal User:alice from host 127.0.0.1 may not DESCRIBE CLUSTER kafka-cluster",
    )
    assert not r.brokers and not r.cluster_id
    r = await ctx.alice.CreateTopics(pb.CreateTopicsRequest(topics=[topic(name="pay")]))
    assert r.topics[0].error_message == (
        "Topic authorization failed: principal User:alice from host 127.0.0.1 may not CREATE TOPIC pay"
    )


async def test_super_users_need_no_acl(ctx: Ctx) -> None:
    codes = {name: await call(ctx.admin, ctx) for name, call, _, _ in TABLE}  # in turn: orders goes at DeleteTopics
    assert not {name: code for name, code in codes.items() if code in (TAF, CAF)}
    assert codes["DescribeCluster"] == codes["CreateAcls"] == codes["CreateSnapshot"] == Errors.NONE


async def test_deny_beats_allow_and_prefixed_patterns_apply(ctx: Ctx) -> None:
    await grant(
        ctx.admin,
        acl(ALICE, Op.CREATE, Res.TOPIC, "pay", pattern=Pat.PREFIXED),
        acl("User:*", Op.CREATE, Res.TOPIC, "pay.secret", perm=2),  # DENY, for everyone
    )
    topics = [topic(name=n) for n in ("pay.eu", "pay.secret", "paz")]
    r = await ctx.alice.CreateTopics(pb.CreateTopicsRequest(topics=topics), timeout=10)
    assert {t.name: t.error_code for t in r.topics} == {"pay.eu": 0, "pay.secret": TAF, "paz": TAF}
    # The controller's results first, then the refusals (Kafka's ControllerApis order).
    assert [t.name for t in r.topics] == ["pay.eu", "pay.secret", "paz"]


async def test_create_implies_neither_describe_nor_describe_configs(ctx: Ctx) -> None:
    await grant(ctx.admin, acl(ALICE, Op.CREATE, Res.TOPIC, "payments"))
    r = await ctx.alice.CreateTopics(
        pb.CreateTopicsRequest(topics=[topic(name="payments", num_partitions=3)]), timeout=10
    )
    t = r.topics[0]
    assert (t.error_code, t.topic_config_error_code, t.num_partitions, t.replication_factor) == (0, TAF, -1, -1)
    assert t.topic_id and not t.configs
    described = await ctx.alice.DescribeTopics(pb.DescribeTopicsRequest(names=["payments"]), timeout=10)
    assert described.topics[0].error_code == TAF and not described.topics[0].partitions
    # DESCRIBE_CONFIGS (implied by ALTER_CONFIGS) brings the configs back to the creator.
    await grant(ctx.admin, acl(ALICE, Op.ALTER_CONFIGS, Res.TOPIC, "pay2"), acl(ALICE, Op.CREATE, Res.TOPIC, "pay2"))
    r = await ctx.alice.CreateTopics(pb.CreateTopicsRequest(topics=[topic(name="pay2", num_partitions=3)]), timeout=10)
    t = r.topics[0]
    assert (t.error_code, t.topic_config_error_code, t.num_partitions) == (0, 0, 3) and t.configs


async def test_describe_topics_withholds_what_one_may_not_describe(ctx: Ctx) -> None:
    for name in ("pay.eu", "pay.us", "secret"):
        await ctx.admin.CreateTopics(
            pb.CreateTopicsRequest(
                topics=[
                    topic(name=name, configs=[pb.CreateTopicsRequest.TopicConfig(name="retention.ms", value="1000")])
                ]
            ),
            timeout=10,
        )
    everything = await ctx.alice.DescribeTopics(pb.DescribeTopicsRequest(), timeout=10)
    assert everything.error_code == 0 and not everything.topics
    await grant(ctx.admin, acl(ALICE, Op.DESCRIBE, Res.TOPIC, "pay", pattern=Pat.PREFIXED))
    everything = await ctx.alice.DescribeTopics(pb.DescribeTopicsRequest(), timeout=10)
    assert [t.name for t in everything.topics] == ["pay.eu", "pay.us"]
    assert all(not t.configs for t in everything.topics)  # configs need DESCRIBE_CONFIGS
    # Named: refused names keep their place, answered alike whether they exist or not.
    named = await ctx.alice.DescribeTopics(pb.DescribeTopicsRequest(names=["secret", "pay.eu", "ghost"]), timeout=10)
    assert [(t.name, t.error_code, t.topic_id) for t in named.topics] == [
        ("secret", TAF, ""),
        ("pay.eu", 0, everything.topics[0].topic_id),
        ("ghost", TAF, ""),
    ]
    await grant(ctx.admin, acl(ALICE, Op.DESCRIBE_CONFIGS, Res.TOPIC, "pay.eu"))
    named = await ctx.alice.DescribeTopics(pb.DescribeTopicsRequest(names=["pay.eu"]), timeout=10)
    assert dict(named.topics[0].configs) == {"retention.ms": "1000"}


async def test_delete_topics_tells_unknown_from_refused_only_to_who_may_describe(ctx: Ctx) -> None:
    request = pb.DeleteTopicsRequest(topics=[Deleted(name="ghost"), Deleted(topic_id=ctx.orders_id)])
    r = await ctx.alice.DeleteTopics(request, timeout=10)
    assert [(x.name, x.topic_id, x.error_code) for x in r.responses] == [("ghost", "", TAF), ("", ctx.orders_id, TAF)]
    await grant(ctx.admin, acl(ALICE, Op.DESCRIBE, Res.TOPIC, "ghost"), acl(ALICE, Op.DESCRIBE, Res.TOPIC, "orders"))
    r = await ctx.alice.DeleteTopics(request, timeout=10)
    assert [(x.name, x.topic_id, x.error_code) for x in r.responses] == [
        ("ghost", "", Errors.UNKNOWN_TOPIC_OR_PARTITION),
        ("orders", ctx.orders_id, TAF),  # may describe it: the name is told
    ]
    await grant(ctx.admin, acl(ALICE, Op.DELETE, Res.CLUSTER, ""))  # DELETE on the CLUSTER: every topic
    r = await ctx.alice.DeleteTopics(request, timeout=10)
    assert [x.error_code for x in r.responses] == [Errors.UNKNOWN_TOPIC_OR_PARTITION, 0]


async def test_acl_hosts_match_the_client_address(ctx: Ctx) -> None:
    await grant(ctx.admin, acl(ALICE, Op.DESCRIBE, Res.CLUSTER, "", host="10.0.0.9"))
    assert (await ctx.alice.DescribeCluster(pb.DescribeClusterRequest(), timeout=10)).error_code == CAF
    await grant(ctx.admin, acl(ALICE, Op.DESCRIBE, Res.CLUSTER, "", host="127.0.0.1"))
    assert (await ctx.alice.DescribeCluster(pb.DescribeClusterRequest(), timeout=10)).error_code == 0


async def test_quorum_admin_writes_and_exports_need_cluster_action(ctx: Ctx) -> None:
    alice = ctx.clients.admin_stub("alice")
    append = qpb.AppendRecordsRequest(records=[serialize(NoOpRecord())], timeout_ms=5000)
    assert (await alice.AppendRecords(append, timeout=10)).error_code == CAF
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        async for _ in alice.ExportLog(qpb.ExportLogRequest(), timeout=10):
            pass
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "CLUSTER_AUTHORIZATION_FAILED" in (refused.value.details() or "")
    assert (await alice.DescribeQuorum(qpb.DescribeQuorumRequest(), timeout=10)).role == "Leader"  # not checked
    await grant(ctx.admin, acl(ALICE, Op.CLUSTER_ACTION, Res.CLUSTER, ""))
    assert (await alice.AppendRecords(append, timeout=10)).error_code == 0
    chunks = [c async for c in alice.ExportLog(qpb.ExportLogRequest(), timeout=10)]
    assert chunks and chunks[0].high_watermark > 0


async def test_switch_off_authorizes_nothing(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    async with controllers(tmp_path, certs, authorizer_class_name="") as nodes:
        node = await wait_for_leader(nodes)
        clients = Clients(certs, node.client_port)
        try:
            bob = clients.stub("bob")
            assert (await bob.DescribeCluster(pb.DescribeClusterRequest(), timeout=10)).error_code == 0
            r = await bob.CreateAcls(pb.CreateAclsRequest(creations=[acl("User:bob", Op.READ)]), timeout=10)
            assert r.error_code == 0
            await unfenced_broker(bob)
            r = await bob.CreateTopics(pb.CreateTopicsRequest(topics=[topic(name="x")]))
            assert r.topics[0].error_code == 0 and r.topics[0].configs  # ACLs exist, but nothing is enforced
        finally:
            await clients.close()


async def test_a_certificate_no_mapping_rule_takes_is_refused(
    tmp_path: Path, certs: dict[str, CertFiles], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka closes a connection whose certificate DN no ssl.principal.mapping.rules rule takes: the call ends
    UNAUTHENTICATED before anything is authorized. The status is set, not raised with context.abort(): in grpcio
    1.78 an aborted call may stay counted as an open HTTP/2 stream, so with 4 streams a connection the refusals
    used up alice's connection and her later calls waited for a stream until their deadline."""
    server = grpc.aio.server
    monkeypatch.setattr(grpc.aio, "server", lambda: server(options=[("grpc.max_concurrent_streams", 4)]))
    async with controllers(tmp_path, certs, mapping_rules="RULE:^CN=admin$/admin/") as nodes:
        node = await wait_for_leader(nodes)
        clients = Clients(certs, node.client_port)
        try:
            request = pb.DescribeClusterRequest()
            assert (await clients.stub("admin").DescribeCluster(request, timeout=10)).error_code == 0
            alice = clients.stub("alice")
            quorum_admin = qpb_grpc.QuorumAdminStub(clients.channel("alice"))
            for _ in range(12):
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await alice.DescribeCluster(request, timeout=5)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value
                assert "no principal for the client certificate" in (refused.value.details() or "")
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await quorum_admin.AppendRecords(qpb.AppendRecordsRequest(records=[b"x"]), timeout=5)
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value
        finally:
            await clients.close()
