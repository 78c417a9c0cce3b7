"""Who may do what over the Kafka listener: a standby answers mutations NOT_CONTROLLER (41) and names no controller
it does not know; a node with authorization on decides Kafka requests by the same ACLs as gRPC ones, for the
plaintext listener's User:ANONYMOUS."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from kafka_helpers import KafkaNode, kafka_node, raw_connection, raw_request, raw_response

from controller.authorizer import AclOperation as Op
from controller.authorizer import AclPermissionType as Perm
from controller.authorizer import PatternType as Pat
from controller.authorizer import ResourceType as Res
from controller.authorizer import StandardAcl
from controller.quorum_controller import ControllerSettings
from pykraft.kafka.apis.create_topics import CreateTopicsRequest
from pykraft.kafka.apis.delete_topics import DeleteTopicsRequest
from pykraft.kafka.apis.describe_acls import DescribeAclsRequest
from pykraft.kafka.apis.describe_cluster import DescribeClusterRequest
from pykraft.kafka.apis.describe_quorum import DescribeQuorumRequest
from pykraft.kafka.apis.metadata import MetadataRequest
from quorum.errors import Errors

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' deprecated calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient, NewTopic

_Topic = CreateTopicsRequest.fields[0].type.element
ANY_NAME = {"resource_name_filter": None, "principal_filter": None, "host_filter": None}  # null: any


@pytest.fixture(scope="module")
def standby(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    with kafka_node(tmp_path_factory.mktemp("kafka-standby"), standby=True) as node:
        yield node


def test_standby_refuses_mutations_with_not_controller(standby: KafkaNode) -> None:
    create = CreateTopicsRequest.cls(topics=[_Topic.cls(name="a", num_partitions=1, replication_factor=1)])
    delete = DeleteTopicsRequest.cls(topic_names=["a", "b"], timeout_ms=1000)
    with raw_connection(standby.bootstrap) as sock:
        for version in (4, 7):  # non-flexible and flexible
            raw_request(sock, 19, version, CreateTopicsRequest.encode(create, version))
            [result] = raw_response(sock, 19, version)[1].topics
            assert (result.name, result.error_code) == ("a", Errors.NOT_CONTROLLER)
            assert result.error_message is None if version == 0 else "not the controller" in result.error_message
        raw_request(sock, 20, 5, DeleteTopicsRequest.encode(delete, 5))
        answer = raw_response(sock, 20, 5)[1]
        assert [(r.name, r.error_code) for r in answer.responses] == [("a", 41), ("b", 41)]
        # Metadata: no leader known, so no controller named; the node itself is the one "broker" to ask again
        raw_request(sock, 3, 12, MetadataRequest.encode(MetadataRequest.cls(topics=None), 12))
        metadata = raw_response(sock, 3, 12)[1]
        assert metadata.controller_id == -1 and [b.node_id for b in metadata.brokers] == [1]
        assert metadata.topics == []
        # KIP-919's DescribeCluster for controllers is any controller's to answer
        raw_request(sock, 60, 1, DescribeClusterRequest.encode(DescribeClusterRequest.cls(endpoint_type=2), 1))
        described = raw_response(sock, 60, 1)[1]
        assert described.error_code == 0 and described.endpoint_type == 2
        assert [(b.broker_id, b.port) for b in described.brokers] == [(1, standby.listener.port)]
        raw_request(sock, 60, 1, DescribeClusterRequest.encode(DescribeClusterRequest.cls(), 1))
        assert raw_response(sock, 60, 1)[1].error_code == Errors.NOT_CONTROLLER
        # DescribeQuorum: only the leader describes the quorum
        topic = DescribeQuorumRequest.fields[0].type.element
        partition = topic.fields[1].type.element
        quorum = DescribeQuorumRequest.cls(
            topics=[topic.cls(topic_name="__cluster_metadata", partitions=[partition.cls(partition_index=0)])]
        )
        raw_request(sock, 55, 1, DescribeQuorumRequest.encode(quorum, 1))
        [[described_partition]] = [t.partitions for t in raw_response(sock, 55, 1)[1].topics]
        assert described_partition.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert standby.controller.committed_offset < 1


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    # No ACL on a resource: everyone may (so the test's own gRPC setup passes); one DENY makes a resource guarded.
    settings = ControllerSettings(
        max_idle_interval_ms=0, authorizer_class_name="StandardAuthorizer", allow_everyone_if_no_acl_found=True
    )
    with kafka_node(tmp_path_factory.mktemp("kafka-authz"), settings) as node:
        # CREATE on the CLUSTER would allow every topic (Kafka's rule): denied, so topics are decided one by one
        deny = [
            StandardAcl(Res.TOPIC, "secret", Pat.PREFIXED, "User:ANONYMOUS", "*", Op.ALL, Perm.DENY),
            StandardAcl(Res.CLUSTER, "kafka-cluster", Pat.LITERAL, "User:ANONYMOUS", "*", Op.CREATE, Perm.DENY),
            # with an ACL on the CLUSTER, DescribeAcls (DESCRIBE on it) needs its own
            StandardAcl(Res.CLUSTER, "kafka-cluster", Pat.LITERAL, "User:ANONYMOUS", "*", Op.DESCRIBE, Perm.ALLOW),
        ]
        assert not any(r.error.failed for r in node.run(node.admin.create_acls(deny)))
        yield node


def test_kafka_requests_are_authorized_as_user_anonymous(guarded: KafkaNode) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client = KafkaAdminClient(bootstrap_servers=guarded.bootstrap, request_timeout_ms=10_000)
    try:
        answer = client.create_topics(
            [NewTopic("open", 1, 1), NewTopic("secret-plans", 1, 1)], raise_errors=False, timeout_ms=10_000
        )
        codes = {t["name"]: (t["error_code"], t["error_message"]) for t in answer["topics"]}
        assert codes["open"] == (0, None)
        code, message = codes["secret-plans"]
        assert code == Errors.TOPIC_AUTHORIZATION_FAILED
        assert "principal User:ANONYMOUS from host 127.0.0.1 may not CREATE TOPIC secret-plans" in message
        names = set(client.list_topics())
        assert "open" in names and "secret-plans" not in names
        # DescribeAcls through the same gRPC call
        with raw_connection(guarded.bootstrap) as sock:
            request = DescribeAclsRequest.cls(
                resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1, **ANY_NAME
            )
            raw_request(sock, 29, 3, DescribeAclsRequest.encode(request, 3))
            acls = raw_response(sock, 29, 3)[1]
        assert acls.error_code == 0
        listed = [
            (r.resource_name, r.pattern_type, sorted((a.operation, a.permission_type) for a in r.acls))
            for r in acls.resources
        ]
        assert sorted(listed) == [
            ("kafka-cluster", Pat.LITERAL, [(Op.CREATE, Perm.DENY), (Op.DESCRIBE, Perm.ALLOW)]),
            ("secret", Pat.PREFIXED, [(Op.ALL, Perm.DENY)]),
        ]
    finally:
        client.close()
