"""The Kafka listener driven by clients nobody here wrote — kafka-python's KafkaAdminClient and confluent-kafka's
AdminClient (librdkafka) — against one in-process node: what they create, list, describe and delete is what the gRPC
AdminClient sees, and our CreateTopics conformance table's codes come out the same through both."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient as CkAdmin
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry
from confluent_kafka.admin import ConfigResource as CkConfigResource
from confluent_kafka.admin import NewPartitions as CkNewPartitions
from confluent_kafka.admin import NewTopic as CkNewTopic
from kafka_helpers import KafkaNode, kafka_node, raw_connection, raw_request, raw_response

from controller.quorum_controller import ControllerSettings
from controller.requests import ConfigResource, ConfigResourceType
from pykraft.api import controller_pb2 as pb
from pykraft.client import NewPartitions as PyNewPartitions
from pykraft.client import NewTopic
from pykraft.kafka.apis.api_versions import ApiVersionsRequest
from pykraft.kafka.apis.delete_topics import DeleteTopicsRequest
from pykraft.kafka.apis.metadata import MetadataRequest
from quorum.errors import Errors
from quorum.log.message import Uuid

sys.path.append(str(Path(__file__).parents[1] / "controller"))  # the conformance table, read not copied
from test_create_topics import DEFAULT_BROKERS, DEFAULT_RF, EXISTING, NUM_PARTITIONS, TABLE

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' deprecated calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.admin import NewTopic as KpNewTopic
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")

# The conformance table's cluster: brokers 1-3 unfenced on racks a-c, broker 4 registered and fenced.
BROKERS = [(b, rack, fenced) for b, rack, fenced in DEFAULT_BROKERS]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    settings = ControllerSettings(
        max_idle_interval_ms=0, num_partitions=NUM_PARTITIONS, default_replication_factor=DEFAULT_RF
    )
    with kafka_node(tmp_path_factory.mktemp("kafka-clients"), settings, BROKERS) as node:
        existing = [NewTopic(t.name, t.num_partitions, t.replication_factor) for t in EXISTING]
        assert all(r.error_code == 0 for r in node.run(node.admin.create_topics(existing)).values())
        yield node


@pytest.fixture(scope="module")
def kp(live: KafkaNode) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=live.bootstrap, request_timeout_ms=10_000, client_id="kp-test")
    yield client
    client.close()


@pytest.fixture(scope="module")
def ck(live: KafkaNode) -> CkAdmin:
    return CkAdmin({"bootstrap.servers": live.bootstrap, "client.id": "ck-test", "log_level": 3})


def grpc_topics(live: KafkaNode, names: list[str] | None = None) -> dict[str, object]:
    return {d.name: d for d in live.run(live.admin.describe_topics(names))}


def test_create_list_describe_delete_through_both_clients(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    answer = kp.create_topics([KpNewTopic("kp-orders", 4, 2, topic_configs={"retention.ms": "3600000"})])
    [created] = answer["topics"]
    assert (created["error_code"], created["num_partitions"], created["replication_factor"]) == (0, 4, 2)
    assert created["configs"]["retention.ms"]["value"] == "3600000"
    futures = ck.create_topics([CkNewTopic("ck-pay", 2, 3, config={"cleanup.policy": "compact"})], request_timeout=10)
    assert futures["ck-pay"].result(10) is None
    seen = grpc_topics(live, ["kp-orders", "ck-pay"])
    assert (
        seen["kp-orders"].configs["retention.ms"] == "3600000" and seen["ck-pay"].configs["cleanup.policy"] == "compact"
    )

    # listed by both, as gRPC lists them
    everything = set(grpc_topics(live))
    assert set(kp.list_topics()) == everything
    assert set(ck.list_topics(timeout=10).topics) == everything

    # described by both: ids, leaders, replicas, ISR, epochs as gRPC has them
    for name in ("kp-orders", "ck-pay"):
        grpc = seen[name]
        want = [(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr) for p in grpc.partitions]
        [kd] = kp.describe_topics([name])
        assert kd["error_code"] == 0
        assert [
            (p["partition_index"], p["leader_id"], p["leader_epoch"], p["replica_nodes"], p["isr_nodes"])
            for p in sorted(kd["partitions"], key=lambda p: p["partition_index"])
        ] == want
        cd = ck.describe_topics(TopicCollection([name]))[name].result(10)
        uuid = cd.topic_id
        raw = uuid.get_most_significant_bits().to_bytes(8, "big", signed=True)
        assert str(Uuid(raw + uuid.get_least_significant_bits().to_bytes(8, "big", signed=True))) == grpc.topic_id
        assert kd["topic_id"].replace("-", "") == Uuid(grpc.topic_id).hex()
        assert [
            (p.id, p.leader.id if p.leader else -1, [r.id for r in p.replicas], [r.id for r in p.isr])
            for p in cd.partitions
        ] == [(i, leader, replicas, isr) for i, leader, _epoch, replicas, isr in want]

    # missing topics: UNKNOWN_TOPIC_OR_PARTITION, and nothing is auto-created
    with raw_connection(live.bootstrap) as sock:
        request = MetadataRequest.cls(topics=[MetadataRequest.fields[0].type.element.cls(name="nope")])
        raw_request(sock, 3, 12, MetadataRequest.encode(request, 12))
        _, answer = raw_response(sock, 3, 12)
    assert [(t.name, t.error_code) for t in answer.topics] == [("nope", Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    assert "nope" not in grpc_topics(live)

    # deleted by each
    assert [t["error_code"] for t in kp.delete_topics(["kp-orders"])["topics"]] == [0]
    assert ck.delete_topics(["ck-pay"], request_timeout=10)["ck-pay"].result(10) is None
    assert not {"kp-orders", "ck-pay"} & set(grpc_topics(live))
    # and a second delete is UNKNOWN_TOPIC_OR_PARTITION through both
    assert [t["error_code"] for t in kp.delete_topics(["kp-orders"], raise_errors=False)["topics"]] == [3]
    with pytest.raises(KafkaException) as e:
        ck.delete_topics(["ck-pay"], request_timeout=10)["ck-pay"].result(10)
    assert e.value.args[0].code() == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_and_delete_by_topic_id(live: KafkaNode) -> None:
    created = live.run(live.admin.create_topics([NewTopic("by-id", 1, 1)]))["by-id"]
    assert created.error_code == 0
    # Metadata v12 by id: the name found, an unknown id UNKNOWN_TOPIC_ID with a null name
    wanted = MetadataRequest.fields[0].type.element
    metadata = MetadataRequest.cls(
        topics=[wanted.cls(name=None, topic_id=Uuid(created.topic_id)), wanted.cls(name=None, topic_id=Uuid.random())]
    )
    with raw_connection(live.bootstrap) as sock:
        raw_request(sock, 3, 12, MetadataRequest.encode(metadata, 12))
        _, found = raw_response(sock, 3, 12)
    assert [(t.name, t.error_code, str(t.topic_id) == created.topic_id) for t in found.topics] == [
        ("by-id", 0, True),
        (None, Errors.UNKNOWN_TOPIC_ID, False),
    ]
    state = DeleteTopicsRequest.fields[0].type.element
    request = DeleteTopicsRequest.cls(
        topics=[state.cls(topic_id=Uuid(created.topic_id)), state.cls(topic_id=Uuid.random())], timeout_ms=10_000
    )
    with raw_connection(live.bootstrap) as sock:
        raw_request(sock, 20, 6, DeleteTopicsRequest.encode(request, 6))
        _, answer = raw_response(sock, 20, 6)
    assert [(r.name, r.error_code) for r in answer.responses] == [("by-id", 0), (None, Errors.UNKNOWN_TOPIC_ID)]
    assert "by-id" not in grpc_topics(live)


def test_describe_cluster_through_both_clients(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    grpc = live.run(live.admin.describe_cluster())
    want = sorted((b.broker_id, b.rack) for b in grpc.brokers)
    kd = kp.describe_cluster()
    assert (kd["cluster_id"], kd["controller_id"]) == (grpc.cluster_id, grpc.controller_id)
    assert sorted((b["broker_id"], b["rack"]) for b in kd["brokers"]) == want
    # librdkafka builds describe_cluster from a Metadata answer, whose "brokers" are the controller's Kafka
    # listener (the brokers' registered listeners do not speak Kafka's protocol) under its own id and under each
    # unfenced registered broker's: here brokers 2 and 3 (1 is the controller's id in this fake cluster, 4 is fenced)
    at = ("127.0.0.1", live.listener.port)
    cd = ck.describe_cluster(request_timeout=10).result(10)
    assert cd.cluster_id == grpc.cluster_id and cd.controller.id == grpc.controller_id == 1
    assert sorted((n.id, n.host, n.port) for n in cd.nodes) == [(i, *at) for i in (1, 2, 3)]
    md = ck.list_topics(timeout=10)
    assert md.controller_id == 1 and {b.id: (b.host, b.port) for b in md.brokers.values()} == {i: at for i in (1, 2, 3)}


def test_a_registered_brokers_configs_through_both_clients(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    """Both clients send a BROKER resource's requests to the node of that id: Metadata names broker 2 at the
    controller's listener, so its configs are changed and described there, as gRPC sees them."""

    def grpc_value() -> str | None:
        [result] = live.run(live.admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "2")]))
        return {c.name: c.value for c in result.configs}.get("leader.replication.throttled.rate")

    entries = [ConfigEntry("leader.replication.throttled.rate", "7000", incremental_operation=AlterConfigOpType.SET)]
    [future] = ck.incremental_alter_configs([CkConfigResource("BROKER", "2", incremental_configs=entries)]).values()
    assert future.result(10) is None and grpc_value() == "7000"
    [future] = ck.describe_configs([CkConfigResource("BROKER", "2")], request_timeout=10).values()
    assert future.result(10)["leader.replication.throttled.rate"].value == "7000"
    kp.alter_configs([KpConfigResource("BROKER", "2", configs={"leader.replication.throttled.rate": "8000"})])
    assert grpc_value() == "8000"


def _kp_topic(t: NewTopic) -> KpNewTopic:
    return KpNewTopic(
        t.name,
        t.num_partitions,
        t.replication_factor,
        replica_assignments={i: list(b) for i, b in t.assignments} or None,
        topic_configs=dict(t.configs) or None,
    )


def _ck_topic(t: NewTopic) -> CkNewTopic:
    kwargs: dict[str, object] = {}
    partitions = t.num_partitions
    if t.assignments:  # librdkafka wants the count of the assignment's partitions (it sends -1)
        kwargs["replica_assignment"] = [list(b) for _, b in t.assignments]
        partitions = len(t.assignments)
    if t.configs:
        kwargs["config"] = dict(t.configs)
    return CkNewTopic(t.name, partitions, t.replication_factor, **kwargs)


def _kp_expressible(topics: list[NewTopic]) -> bool:
    # kafka-python takes assignments as a dict: a partition named twice cannot be sent
    return all(len({i for i, _ in t.assignments}) == len(t.assignments) for t in topics)


def _ck_expressible(topics: list[NewTopic]) -> bool:
    # librdkafka takes assignments as a list (partition i at index i), config values as strings, and refuses
    # duplicate names, or a count beside an assignment, before sending
    names = [t.name for t in topics]
    return len(set(names)) == len(names) and all(
        [i for i, _ in t.assignments] == list(range(len(t.assignments)))
        and all(v is not None for _, v in t.configs)
        and not (t.assignments and (t.num_partitions != -1 or t.replication_factor != -1))
        for t in topics
    )


DEFAULT_ROWS = [p for p in TABLE if p.values[2] == "default"]


@pytest.mark.parametrize(("topics", "expected", "cluster"), DEFAULT_ROWS)
def test_create_topics_conformance_through_both_clients(
    live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin, topics: list[NewTopic], expected: list, cluster: str
) -> None:
    """Validate-only (nothing changes, so rows are independent): the codes and messages gRPC gives, and the table
    expects, come out of both clients."""
    request = pb.CreateTopicsRequest(validate_only=True, timeout_ms=10_000)
    for t in topics:
        topic = request.topics.add(
            name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor
        )
        for i, brokers in t.assignments:
            topic.assignments.add(partition_index=i, broker_ids=brokers)
        for name, value in t.configs:
            config = topic.configs.add(name=name)
            if value is not None:
                config.value = value
    grpc = live.run(live.admin._call("CreateTopics", request)).topics
    want = {e.name: int(e.code) for e in expected}
    assert {r.name: r.error_code for r in grpc} == want
    messages = {r.name: r.error_message for r in grpc}
    if _kp_expressible(topics):
        answer = kp.create_topics([_kp_topic(t) for t in topics], validate_only=True, raise_errors=False)
        got = {t["name"]: t["error_code"] for t in answer["topics"]}
        assert got == want
        for t in answer["topics"]:
            assert (t["error_message"] or None) == (messages[t["name"]] or None)
    if _ck_expressible(topics):
        try:
            futures = ck.create_topics([_ck_topic(t) for t in topics], validate_only=True, request_timeout=10)
        except ValueError as e:  # librdkafka checks counts (1..100000 or -1) and assignments before sending
            assert "out of expected range" in str(e) or "replica_assignment must be" in str(e)
            return
        for name, future in futures.items():
            try:
                future.result(10)
                code, message = 0, None
            except KafkaException as e:
                code, message = e.args[0].code(), e.args[0].str()
            assert code == want[name], (name, message)
            if code:
                assert message == messages[name]


def test_api_versions_unsupported_version_answered_at_v0_and_connection_kept(live: KafkaNode) -> None:
    with raw_connection(live.bootstrap) as sock:
        raw_request(sock, 18, 99, b"\x00garbage", correlation_id=7)
        correlation_id, answer = raw_response(sock, 18, 0)
        assert correlation_id == 7 and answer.error_code == Errors.UNSUPPORTED_VERSION
        ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert ranges[18] == (0, 3) and ranges[3] == (0, 12) and ranges[19] == (0, 7) and ranges[20] == (0, 6)
        # the same connection answers the next request, in order with a pipelined third
        raw_request(sock, 18, 3, ApiVersionsRequest.encode(ApiVersionsRequest.cls(), 3), correlation_id=8)
        raw_request(sock, 3, 1, MetadataRequest.encode(MetadataRequest.cls(topics=None), 1), correlation_id=9)
        assert raw_response(sock, 18, 3)[0] == 8
        correlation_id, metadata = raw_response(sock, 3, 1)
        assert correlation_id == 9 and metadata.controller_id == 1


def test_client_versions_and_metrics(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    """What the clients asked at which version (the listener's per-API counts, the metric's source)."""
    kp.list_topics()
    ck.list_topics(timeout=10)
    asked = live.listener.stats.requests
    assert asked[("Metadata", 12)] >= 2 and asked[("ApiVersions", 3)] >= 2
    assert live.listener.stats.latency["Metadata"].count >= 2


def grpc_configs(live: KafkaNode, topic: str) -> dict[str, tuple[str | None, int]]:
    [result] = live.run(live.admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]))
    return {c.name: (c.value, c.source) for c in result.configs}


def test_partitions_and_configs_through_both_clients(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    assert live.run(live.admin.create_topics([NewTopic("grow", 2, 2)]))["grow"].error_code == 0

    def partitions() -> int:
        return len(grpc_topics(live, ["grow"])["grow"].partitions)

    kp.create_partitions({"grow": KpNewPartitions(4)})
    assert partitions() == 4
    assert ck.create_partitions([CkNewPartitions("grow", 6)], request_timeout=10)["grow"].result(10) is None
    assert partitions() == 6
    # fewer partitions: INVALID_PARTITIONS through both, with gRPC's message
    grpc = live.run(live.admin.create_partitions({"grow": PyNewPartitions(3)}, validate_only=True))["grow"]
    assert grpc.error.code == Errors.INVALID_PARTITIONS
    [kp_result] = kp.create_partitions({"grow": KpNewPartitions(3)}, raise_errors=False).results
    assert (kp_result.error_code, kp_result.error_message) == (Errors.INVALID_PARTITIONS, grpc.error.message)
    with pytest.raises(KafkaException) as e:
        ck.create_partitions([CkNewPartitions("grow", 3)], request_timeout=10)["grow"].result(10)
    assert (e.value.args[0].code(), e.value.args[0].str()) == (Errors.INVALID_PARTITIONS, grpc.error.message)
    assert partitions() == 6

    # configs: kafka-python (IncrementalAlterConfigs SET), confluent (incremental SET and DELETE)
    kp.alter_configs([KpConfigResource("TOPIC", "grow", configs={"retention.ms": "1000"})])
    assert grpc_configs(live, "grow")["retention.ms"][0] == "1000"
    entries = [
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ]
    resource = CkConfigResource(CkConfigResource.Type.TOPIC, "grow", incremental_configs=entries)
    [future] = ck.incremental_alter_configs([resource]).values()
    assert future.result(10) is None
    configs = grpc_configs(live, "grow")
    assert configs["cleanup.policy"][0] == "compact" and configs["retention.ms"][0] == "604800000"
    # described by both as gRPC describes them
    [future] = ck.describe_configs([CkConfigResource(CkConfigResource.Type.TOPIC, "grow")]).values()
    assert {name: (e.value, int(e.source)) for name, e in future.result(10).items()} == configs
    kd = kp.describe_configs([KpConfigResource("TOPIC", "grow")], config_filter="all")["topic"]["grow"]
    assert {name: e["value"] for name, e in kd.items()} == {name: value for name, (value, _) in configs.items()}
    assert kd["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    # a bad value: INVALID_CONFIG through both
    [future] = ck.incremental_alter_configs(
        [
            CkConfigResource(
                CkConfigResource.Type.TOPIC,
                "grow",
                incremental_configs=[ConfigEntry("retention.ms", "-5", incremental_operation=AlterConfigOpType.SET)],
            )
        ]
    ).values()
    with pytest.raises(KafkaException) as e:
        future.result(10)
    assert e.value.args[0].code() == Errors.INVALID_CONFIG and "retention.ms" in e.value.args[0].str()


def test_acls_through_confluent_kafka(live: KafkaNode, ck: CkAdmin) -> None:
    from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
    from confluent_kafka.admin import ResourcePatternType as CkPattern
    from confluent_kafka.admin import ResourceType as CkResource

    binding = AclBinding(
        CkResource.TOPIC, "pay", CkPattern.PREFIXED, "User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW
    )
    assert ck.create_acls([binding], request_timeout=10)[binding].result(10) is None
    grpc = live.run(live.admin.describe_acls())
    assert [(a.resource_name, a.pattern_type, a.principal, a.operation) for a in grpc] == [("pay", 4, "User:alice", 3)]
    everything = AclBindingFilter(
        CkResource.ANY, None, CkPattern.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    assert ck.describe_acls(everything, request_timeout=10).result(10) == [binding]
    # an ACL with an empty name: refused by the controller, with its message
    bad = AclBinding(
        CkResource.TOPIC, "", CkPattern.LITERAL, "User:bob", "*", AclOperation.READ, AclPermissionType.ALLOW
    )
    with pytest.raises(KafkaException) as e:
        ck.create_acls([bad], request_timeout=10)[bad].result(10)
    refusal = e.value.args[0]
    assert (refusal.code(), refusal.str()) == (Errors.INVALID_REQUEST, "Resource name should not be empty")
    assert ck.delete_acls([everything], request_timeout=10)[everything].result(10) == [binding]
    assert live.run(live.admin.describe_acls()) == []


def test_elect_leaders_through_both_clients(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    from confluent_kafka import ElectionType as CkElection
    from confluent_kafka import TopicPartition

    assert live.run(live.admin.create_topics([NewTopic("elect", 2, 2)]))["elect"].error_code == 0
    # leaders are the preferred replicas already: ELECTION_NOT_NEEDED for each, as gRPC answers
    grpc = live.run(live.admin.elect_leaders(0, [("elect", 0), ("elect", 1)]))
    want = {(r.topic, r.partition): r.error.code for r in grpc}
    assert set(want.values()) == {Errors.ELECTION_NOT_NEEDED}
    answer = kp.elect_leaders(0, {"elect": [0, 1]}, raise_errors=False)
    got = {(t.topic, p.partition_id): p.error_code for t in answer.replica_election_results for p in t.partition_result}
    assert got == want
    futures = ck.elect_leaders(CkElection.PREFERRED, [TopicPartition("elect", 0), TopicPartition("elect", 1)])
    results = futures.result(10)  # each TopicPartition with its error set
    assert {(tp.topic, tp.partition): tp.error.code() if tp.error else 0 for tp in results} == want


def test_reassignments_through_kafka_python(live: KafkaNode, kp: KafkaAdminClient) -> None:
    from kafka import TopicPartition as KpTopicPartition

    created = live.run(live.admin.create_topics([NewTopic("moving", replica_assignment={0: [1, 2]})]))
    assert created["moving"].error_code == 0
    tp = KpTopicPartition("moving", 0)
    answer = kp.alter_partition_reassignments({tp: [2, 3]})
    assert answer == {tp: None} or all(not v for v in answer.values()), answer
    # the fake brokers never catch up: the move stays in progress, as gRPC lists it
    grpc = live.run(live.admin.list_partition_reassignments())
    [(key, moving)] = grpc.items()
    assert key == ("moving", 0) and (moving.adding_replicas, moving.removing_replicas) == ([3], [1])
    listed = kp.list_partition_reassignments()
    assert {(t.topic, t.partition): (v["adding_replicas"], v["removing_replicas"]) for t, v in listed.items()} == {
        ("moving", 0): ([3], [1])
    }
    kp.alter_partition_reassignments({tp: None})  # cancelled
    assert kp.list_partition_reassignments() == {} and live.run(live.admin.list_partition_reassignments()) == {}


def test_describe_quorum_on_the_leader(live: KafkaNode) -> None:
    from pykraft.kafka.apis.describe_quorum import DescribeQuorumRequest

    topic = DescribeQuorumRequest.fields[0].type.element
    partition = topic.fields[1].type.element
    request = DescribeQuorumRequest.cls(
        topics=[
            topic.cls(topic_name="__cluster_metadata", partitions=[partition.cls(partition_index=0)]),
            topic.cls(topic_name="orders", partitions=[partition.cls(partition_index=0)]),
        ]
    )
    with raw_connection(live.bootstrap) as sock:
        for version in (0, 2):
            raw_request(sock, 55, version, DescribeQuorumRequest.encode(request, version))
            _, answer = raw_response(sock, 55, version)
            [metadata], [other] = (t.partitions for t in answer.topics)
            assert (metadata.error_code, metadata.leader_id) == (0, 1)
            assert metadata.leader_epoch == live.controller.leader.epoch
            assert 0 < metadata.high_watermark <= live.controller.committed_offset + 1
            assert [(v.replica_id, v.log_end_offset >= metadata.high_watermark) for v in metadata.current_voters] == [
                (1, True)
            ]
            assert other.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
            if version == 2:
                assert [(n.node_id, [(x.host, x.port) for x in n.listeners]) for n in answer.nodes] == [
                    (1, [("127.0.0.1", live.listener.port)])
                ]
