"""Kafka's error codes for the admin APIs beyond CreateTopics, through kafka-python's KafkaAdminClient and
confluent-kafka's AdminClient (librdkafka): each case gets the code Kafka documents and the answer (code and
message) the gRPC AdminClient gets on the same node. Where a client checks an input itself and never sends it, the
row says so and that client is left out of it; where a client's API drops the answer's code, the client's own
request and response classes (its codec, its connection) are used instead."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import ElectionType as CkElection
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AlterConfigOpType,
    ConfigEntry,
)
from confluent_kafka.admin import AdminClient as CkAdmin
from confluent_kafka.admin import ConfigResource as CkConfigResource
from confluent_kafka.admin import NewPartitions as CkNewPartitions
from confluent_kafka.admin import ResourcePatternType as CkPattern
from confluent_kafka.admin import ResourceType as CkResource
from kafka_helpers import KafkaNode, kafka_node, raw_connection, raw_request, raw_response

from controller.authorizer import AclBindingFilter as GrpcAclFilter
from controller.quorum_controller import ControllerSettings
from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource, ConfigResource
from controller.requests import NewPartitions as CtlNewPartitions
from pykraft.api import controller_pb2 as pb
from pykraft.client import AdminError, NewPartitions, NewTopic
from pykraft.kafka.apis.alter_configs import AlterConfigsRequest
from pykraft.kafka.apis.create_acls import CreateAclsRequest
from pykraft.kafka.apis.create_partitions import CreatePartitionsRequest
from pykraft.kafka.apis.delete_acls import DeleteAclsRequest
from pykraft.kafka.apis.delete_topics import DeleteTopicsRequest
from pykraft.kafka.apis.describe_configs import DescribeConfigsRequest
from pykraft.kafka.apis.elect_leaders import ElectLeadersRequest
from pykraft.kafka.apis.incremental_alter_configs import IncrementalAlterConfigsRequest
from pykraft.kafka.apis.partition_reassignments import AlterPartitionReassignmentsRequest
from quorum.errors import Errors
from quorum.log.message import Uuid

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' deprecated calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import TopicPartition as KpTopicPartition
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.admin import ResourceType as KpResource
    from kafka.errors import for_code
    from kafka.protocol.admin import DescribeConfigsRequest as KpDescribeConfigsRequest
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")

TOPIC, TOPIC_PARTITIONS = "codes", 2  # RF 2 over brokers 101-103
CONTROLLER_BROKER = "1"  # the node's own id: a BROKER resource the clients route to the node they reach


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    with kafka_node(tmp_path_factory.mktemp("kafka-codes")) as node:
        assert node.run(node.admin.create_topics([NewTopic(TOPIC, TOPIC_PARTITIONS, 2)]))[TOPIC].error_code == 0
        yield node


@pytest.fixture(scope="module")
def kp(live: KafkaNode) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=live.bootstrap, request_timeout_ms=10_000, client_id="kp-codes")
    yield client
    client.close()


@pytest.fixture(scope="module")
def ck(live: KafkaNode) -> CkAdmin:
    return CkAdmin({"bootstrap.servers": live.bootstrap, "client.id": "ck-codes", "log_level": 3})


def ck_answer(future: object) -> tuple[int, str | None]:
    """A confluent-kafka future's (code, message); (0, None) when it succeeded."""
    try:
        future.result(10)  # type: ignore[attr-defined]
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()
    return 0, None


def ck_same(got: tuple[int, str | None], want: tuple[int, str | None]) -> bool:
    """The same code, and the same message unless the version librdkafka sent has no message field (its own text
    for the code then, "Broker: ...")."""
    return got[0] == want[0] and (got[1] == want[1] or bool(got[1] and got[1].startswith("Broker: ")))


def grpc_answer(error: object) -> tuple[int, str | None]:
    return int(error.code), (error.message or None) if error.code else None  # type: ignore[attr-defined]


def partitions_of(live: KafkaNode, topic: str = TOPIC) -> int:
    [described] = live.run(live.admin.describe_topics([topic]))
    return len(described.partitions)


# -- Metadata --------------------------------------------------------------------------------------------------------


def test_describe_an_unknown_topic(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    [grpc] = live.run(live.admin.describe_topics(["ghost"]))
    assert grpc.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    [k] = kp.describe_topics(["ghost"])
    assert (k["name"], k["error_code"], k["partitions"]) == ("ghost", grpc.error_code, [])
    with pytest.raises(KafkaException) as refused:
        ck.describe_topics(TopicCollection(["ghost"]))["ghost"].result(10)
    assert refused.value.args[0].code() == grpc.error_code
    assert ck.list_topics(topic="ghost", timeout=10).topics["ghost"].error.code() == grpc.error_code
    assert "ghost" not in {d.name for d in live.run(live.admin.describe_topics())}  # never auto-created


# -- DeleteTopics ----------------------------------------------------------------------------------------------------


def test_delete_unknown_topic_and_unknown_topic_id(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    [grpc] = live.run(live.admin.delete_topics(["ghost"]))
    assert grpc_answer(grpc.error)[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    [k] = kp.delete_topics(["ghost"], raise_errors=False)["topics"]
    assert (k["error_code"], k["error_message"]) == grpc_answer(grpc.error)
    assert ck_same(ck_answer(ck.delete_topics(["ghost"], request_timeout=10)["ghost"]), grpc_answer(grpc.error))

    # by id (DeleteTopics v6): confluent-kafka's delete_topics takes names only, so kafka-python alone
    missing = Uuid.random()
    [grpc] = live.run(live.admin.delete_topics([], topic_ids=[str(missing)]))
    assert grpc_answer(grpc.error)[0] == Errors.UNKNOWN_TOPIC_ID
    [k] = kp.delete_topics([uuid.UUID(bytes=bytes(missing))], raise_errors=False)["topics"]
    assert (k["error_code"], k["error_message"], k["name"]) == (*grpc_answer(grpc.error), None)
    assert partitions_of(live) == TOPIC_PARTITIONS


def test_delete_when_deletion_is_disabled(tmp_path_factory: pytest.TempPathFactory) -> None:
    settings = ControllerSettings(max_idle_interval_ms=0, delete_topic_enable=False)
    with kafka_node(tmp_path_factory.mktemp("kafka-nodelete"), settings, brokers=((101, "r", False),)) as node:
        assert node.run(node.admin.create_topics([NewTopic("kept", 1, 1)]))["kept"].error_code == 0
        with pytest.raises(AdminError) as refused:  # a request-level refusal: the gRPC client raises it
            node.run(node.admin.delete_topics(["kept"]))
        want = (int(refused.value.code), "Topic deletion is disabled.")
        assert str(refused.value) == f"DeleteTopics: {want[1]}"
        assert want[0] == Errors.TOPIC_DELETION_DISABLED
        kp = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10_000)
        try:
            [k] = kp.delete_topics(["kept"], raise_errors=False)["topics"]
        finally:
            kp.close()
        assert (k["error_code"], k["error_message"]) == want
        ck = CkAdmin({"bootstrap.servers": node.bootstrap, "log_level": 3})
        assert ck_same(ck_answer(ck.delete_topics(["kept"], request_timeout=10)["kept"]), want)
        # before v3 there is no TOPIC_DELETION_DISABLED: Kafka's controller answers INVALID_REQUEST
        request = DeleteTopicsRequest.cls(topic_names=["kept"], timeout_ms=10_000)
        with raw_connection(node.bootstrap) as sock:
            for version, code in ((0, Errors.INVALID_REQUEST), (2, Errors.INVALID_REQUEST), (3, want[0])):
                raw_request(sock, 20, version, DeleteTopicsRequest.encode(request, version))
                [result] = raw_response(sock, 20, version)[1].responses
                assert (result.name, result.error_code) == ("kept", code), version
        assert partitions_of(node, "kept") == 1


# -- CreatePartitions ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "count", "assignment", "code"),
    [
        pytest.param(TOPIC, TOPIC_PARTITIONS, None, Errors.INVALID_PARTITIONS, id="count-equal-to-current"),
        pytest.param(TOPIC, 1, None, Errors.INVALID_PARTITIONS, id="count-below-current"),
        pytest.param("ghost", 4, None, Errors.UNKNOWN_TOPIC_OR_PARTITION, id="unknown-topic"),
        pytest.param(TOPIC, 3, [[101, 999]], Errors.INVALID_REPLICA_ASSIGNMENT, id="unregistered-broker"),
        pytest.param(TOPIC, 3, [[101, 101]], Errors.INVALID_REPLICA_ASSIGNMENT, id="duplicate-broker"),
        pytest.param(TOPIC, 3, [[101]], Errors.INVALID_REPLICA_ASSIGNMENT, id="replication-factor-differs"),
        pytest.param(TOPIC, 4, [[101, 102]], Errors.INVALID_REPLICA_ASSIGNMENT, id="fewer-assignments-than-added"),
        pytest.param(TOPIC, 3, [[101, 102]], Errors.NONE, id="valid"),
    ],
)
def test_create_partitions_codes(
    live: KafkaNode,
    kp: KafkaAdminClient,
    ck: CkAdmin,
    topic: str,
    count: int,
    assignment: list[list[int]] | None,
    code: int,
) -> None:
    """validate_only, so rows are independent (the valid row proves validate_only writes nothing)."""
    grpc = live.run(live.admin.create_partitions({topic: NewPartitions(count, assignment)}, validate_only=True))
    want = grpc_answer(grpc[topic].error)
    assert want[0] == code, want
    [k] = kp.create_partitions(
        {topic: KpNewPartitions(count, assignment)}, validate_only=True, raise_errors=False
    ).results
    assert (k.error_code, k.error_message or None) == want
    kwargs = {"replica_assignment": assignment} if assignment is not None else {}
    futures = ck.create_partitions([CkNewPartitions(topic, count, **kwargs)], validate_only=True, request_timeout=10)
    assert ck_same(ck_answer(futures[topic]), want)
    assert partitions_of(live) == TOPIC_PARTITIONS


def test_create_partitions_topic_named_twice(live: KafkaNode, ck: CkAdmin) -> None:
    """A topic named twice is INVALID_REQUEST "Duplicate topic name." once per occurrence, as Kafka's
    ControllerApis answers it. kafka-python cannot send it (it takes a dict); librdkafka sends it and then refuses
    an answer naming a topic twice (_BAD_MSG, -199: "Broker returned topic ... multiple times"), as it would
    Kafka's; so the answer is read from raw requests through our codec, beside gRPC's."""
    futures = ck.create_partitions(
        [CkNewPartitions(TOPIC, 3), CkNewPartitions(TOPIC, 4)], validate_only=True, request_timeout=10
    )
    code, message = ck_answer(futures[TOPIC])
    assert code == KafkaError._BAD_MSG and "parse" in (message or "")
    request = pb.CreatePartitionsRequest(validate_only=True, timeout_ms=10_000)
    request.topics.add(name=TOPIC, count=3)
    request.topics.add(name=TOPIC, count=4)
    grpc = live.run(live.admin._call("CreatePartitions", request))
    want = [(r.name, r.error_code, r.error_message) for r in grpc.results]
    assert want == [(TOPIC, Errors.INVALID_REQUEST, "Duplicate topic name.")] * 2, want
    topic = CreatePartitionsRequest.fields[0].type.element
    raw = CreatePartitionsRequest.cls(
        topics=[topic.cls(name=TOPIC, count=3, assignments=None), topic.cls(name=TOPIC, count=4, assignments=None)],
        timeout_ms=10_000,
        validate_only=True,
    )
    with raw_connection(live.bootstrap) as sock:
        for version in (0, 3):
            raw_request(sock, 37, version, CreatePartitionsRequest.encode(raw, version))
            answer = raw_response(sock, 37, version)[1]
            assert [(r.name, r.error_code, r.error_message) for r in answer.results] == want
    assert partitions_of(live) == TOPIC_PARTITIONS


# -- IncrementalAlterConfigs -----------------------------------------------------------------------------------------

TOPIC_RES, BROKER_RES = 2, 4


@pytest.mark.parametrize(
    ("kind", "name", "key", "value", "code"),
    [
        pytest.param(TOPIC_RES, TOPIC, "retention.ms", ("APPEND", "5"), Errors.INVALID_CONFIG, id="append-not-list"),
        pytest.param(TOPIC_RES, TOPIC, "no.such.config", "1", Errors.INVALID_CONFIG, id="unknown-topic-config"),
        pytest.param(TOPIC_RES, TOPIC, "retention.ms", "soon", Errors.INVALID_CONFIG, id="not-a-number"),
        pytest.param(TOPIC_RES, TOPIC, "cleanup.policy", "shred", Errors.INVALID_CONFIG, id="not-in-the-list"),
        pytest.param(TOPIC_RES, TOPIC, "min.insync.replicas", "0", Errors.INVALID_CONFIG, id="below-the-minimum"),
        pytest.param(TOPIC_RES, "ghost", "retention.ms", "1000", Errors.UNKNOWN_TOPIC_OR_PARTITION, id="no-topic"),
        pytest.param(TOPIC_RES, TOPIC, "retention.ms", "1000", Errors.NONE, id="topic-ok"),
        pytest.param(BROKER_RES, CONTROLLER_BROKER, "log.flush.interval.ms", "2000", Errors.NONE, id="broker-ok"),
        pytest.param(BROKER_RES, CONTROLLER_BROKER, "num.partitions", "7", Errors.INVALID_REQUEST, id="broker-static"),
        pytest.param(
            BROKER_RES, CONTROLLER_BROKER, "log.flush.interval.ms", "x", Errors.INVALID_REQUEST, id="broker-bad-value"
        ),
    ],
)
def test_incremental_alter_configs_codes(
    live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin, kind: int, name: str, key: str, value: str, code: int
) -> None:
    """validate_only SETs. kafka-python checks names against DescribeConfigs before sending unless told not to
    (raise_on_unknown=False), and sends a BROKER resource to that broker, as librdkafka does: hence the node's id."""
    op, value = value if isinstance(value, tuple) else ("SET", value)
    resource = AlterConfigsResource(kind, name, (AlterableConfig(key, AlterConfigOp[op], value),))
    [grpc] = live.run(live.admin.incremental_alter_configs([resource], validate_only=True))
    want = grpc_answer(grpc.error)
    assert want[0] == code, want
    kind_name = "TOPIC" if kind == TOPIC_RES else "BROKER"
    answer = kp.alter_configs(
        [KpConfigResource(kind_name, name, configs={key: (op, value)})],
        validate_only=True,
        raise_on_unknown=False,
        incremental=True,
    )
    result = answer[kind_name.lower()][name]
    assert result == "OK" if code == 0 else result.startswith(f"[Error {code}] ") and want[1] in result
    ck_type = CkConfigResource.Type.TOPIC if kind == TOPIC_RES else CkConfigResource.Type.BROKER
    entries = [ConfigEntry(key, value, incremental_operation=AlterConfigOpType[op])]
    [future] = ck.incremental_alter_configs(
        [CkConfigResource(ck_type, name, incremental_configs=entries)], validate_only=True, request_timeout=10
    ).values()
    assert ck_same(ck_answer(future), want)
    [after] = live.run(live.admin.describe_configs([ConfigResource(TOPIC_RES, TOPIC)]))
    assert {c.name: c.value for c in after.configs}["retention.ms"] == "604800000"  # nothing written


def test_a_config_resource_named_twice(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    """INVALID_REQUEST "Duplicate resource." once, nothing applied, as gRPC and Kafka's controller answer it, for
    IncrementalAlterConfigs and the legacy AlterConfigs. librdkafka refuses the incremental one itself (_INVALID_ARG,
    -186, never sent) but sends the legacy one."""
    twice = [AlterConfigsResource(TOPIC_RES, TOPIC, (AlterableConfig("retention.ms", AlterConfigOp.SET, "1000"),))] * 2
    [grpc] = live.run(live.admin.incremental_alter_configs(twice))
    want = grpc_answer(grpc.error)
    assert want == (Errors.INVALID_REQUEST, "Duplicate resource.")
    [legacy] = live.run(live.admin.alter_configs({ConfigResource(TOPIC_RES, TOPIC): {"retention.ms": "1000"}}))
    assert not legacy.error.failed  # a dict cannot name it twice: the raw call
    request = pb.AlterConfigsRequest(timeout_ms=10_000)
    for _ in range(2):
        request.resources.add(resource_type=TOPIC_RES, resource_name=TOPIC).configs.add(name="retention.ms", value="5")
    [legacy_twice] = live.run(live.admin._call("AlterConfigs", request)).responses
    assert (legacy_twice.error_code, legacy_twice.error_message) == want
    for incremental in (True, False):
        answer = kp.alter_configs(
            [KpConfigResource("TOPIC", TOPIC, configs={"retention.ms": "5"})] * 2,
            raise_on_unknown=False,
            incremental=incremental,
        )
        assert answer == {"topic": {TOPIC: f"[Error 42] InvalidRequestError: {want[1]}"}}
    entries = [ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.SET)]
    resource = CkConfigResource(CkConfigResource.Type.TOPIC, TOPIC, incremental_configs=entries)
    [future] = ck.incremental_alter_configs([resource, resource], request_timeout=10).values()
    assert ck_answer(future)[0] == KafkaError._INVALID_ARG
    resource = CkConfigResource(CkConfigResource.Type.TOPIC, TOPIC, set_config={"retention.ms": "5"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # alter_configs is deprecated: still sent by some
        [future] = ck.alter_configs([resource, resource], request_timeout=10).values()
    assert ck_answer(future) == want
    [after] = live.run(live.admin.describe_configs([ConfigResource(TOPIC_RES, TOPIC)]))
    assert {c.name: c.value for c in after.configs}["retention.ms"] == "1000"
    live.run(live.admin.alter_configs({ConfigResource(TOPIC_RES, TOPIC): {}}))  # back to no dynamic config


# -- DescribeConfigs -------------------------------------------------------------------------------------------------


def test_describe_configs_unknown_topic_synonyms_and_documentation(
    live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin
) -> None:
    [grpc] = live.run(live.admin.describe_configs([ConfigResource(TOPIC_RES, "ghost")]))
    want = grpc_answer(grpc.error)
    assert want[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION
    [future] = ck.describe_configs([CkConfigResource(CkConfigResource.Type.TOPIC, "ghost")]).values()
    assert ck_same(ck_answer(future), want)
    # kafka-python's describe_configs drops each result's error code (an unknown topic is just no configs), so
    # its own DescribeConfigsRequest, over its own connection, shows what it received
    assert kp.describe_configs([KpConfigResource("TOPIC", "ghost")], config_filter="all") == {"topic": {"ghost": {}}}
    request = KpDescribeConfigsRequest(resources=[(TOPIC_RES, "ghost", None)], include_synonyms=True)
    [result] = kp._manager.run(kp._manager.send, request).results
    assert (result.error_code, result.error_message) == want

    # synonyms: a topic config set on the topic and cluster-wide, seen through both as gRPC sees it
    set_both = [
        AlterConfigsResource(BROKER_RES, "", (AlterableConfig("log.retention.ms", AlterConfigOp.SET, "7200000"),)),
        AlterConfigsResource(TOPIC_RES, TOPIC, (AlterableConfig("retention.ms", AlterConfigOp.SET, "3600000"),)),
    ]
    assert not any(r.error.failed for r in live.run(live.admin.incremental_alter_configs(set_both)))
    try:
        [grpc] = live.run(live.admin.describe_configs([ConfigResource(TOPIC_RES, TOPIC)], include_synonyms=True))
        want_synonyms = {c.name: [(s.name, s.value, int(s.source)) for s in c.synonyms] for c in grpc.configs}
        assert want_synonyms["retention.ms"][:2] == [("retention.ms", "3600000", 1), ("log.retention.ms", "7200000", 3)]
        described = kp.describe_configs([KpConfigResource("TOPIC", TOPIC)], include_synonyms=True, config_filter="all")
        got = {
            name: [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]
            for name, entry in described["topic"][TOPIC].items()
        }
        names = {1: "DYNAMIC_TOPIC_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
        assert got == {n: [(a, b, names.get(c, c)) for a, b, c in s] for n, s in want_synonyms.items()}
        [future] = ck.describe_configs([CkConfigResource(CkConfigResource.Type.TOPIC, TOPIC)]).values()
        entries = future.result(10)  # librdkafka always asks for synonyms
        assert {
            name: [(s.name, s.value, int(s.source)) for s in e.synonyms.values()] for name, e in entries.items()
        } == want_synonyms

        # documentation (v3+): no client asks for it, so a raw v4 request beside gRPC's
        [grpc] = live.run(live.admin.describe_configs([ConfigResource(TOPIC_RES, TOPIC)], include_documentation=True))
        resource = DescribeConfigsRequest.fields[0].type.element
        request = DescribeConfigsRequest.cls(
            resources=[resource.cls(resource_type=TOPIC_RES, resource_name=TOPIC, configuration_keys=None)],
            include_synonyms=False,
            include_documentation=True,
        )
        with raw_connection(live.bootstrap) as sock:
            for version in (3, 4):
                raw_request(sock, 32, version, DescribeConfigsRequest.encode(request, version))
                [raw] = raw_response(sock, 32, version)[1].results
                assert {c.name: c.documentation for c in raw.configs} == {c.name: c.documentation for c in grpc.configs}
        assert "kept" in {c.name: c.documentation for c in grpc.configs}["retention.ms"]
    finally:
        live.run(
            live.admin.incremental_alter_configs(
                [
                    AlterConfigsResource(BROKER_RES, "", (AlterableConfig("log.retention.ms", 1, None),)),
                    AlterConfigsResource(TOPIC_RES, TOPIC, (AlterableConfig("retention.ms", 1, None),)),
                ]
            )
        )


def test_describe_broker_configs_through_both_clients(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    """The node's own id as a BROKER resource (the clients send it to that node): every config, value and source
    as gRPC describes them."""
    [grpc] = live.run(live.admin.describe_configs([ConfigResource(BROKER_RES, CONTROLLER_BROKER)]))
    want = {c.name: (c.value, int(c.source), c.read_only) for c in grpc.configs}
    assert not grpc.error.failed and "log.retention.ms" in want
    described = kp.describe_configs([KpConfigResource("BROKER", CONTROLLER_BROKER)], config_filter="all")
    sources = {1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG", 3: "DYNAMIC_DEFAULT_BROKER_CONFIG"}
    sources |= {4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG"}
    assert {name: (e["value"], e["config_source"], e["read_only"]) for name, e in described["broker"]["1"].items()} == {
        name: (v, sources[src], ro) for name, (v, src, ro) in want.items()
    }
    [future] = ck.describe_configs([CkConfigResource(CkConfigResource.Type.BROKER, CONTROLLER_BROKER)]).values()
    assert {name: (e.value, int(e.source), e.is_read_only) for name, e in future.result(10).items()} == want


# -- ElectLeaders ----------------------------------------------------------------------------------------------------


def kp_election_results(answer: Any) -> dict[tuple[str, int], tuple[int, str | None]]:
    """kafka-python's ElectLeaders answer: (error code, message) per (topic, partition)."""
    return {
        (t.topic, p.partition_id): (p.error_code, p.error_message)
        for t in answer.replica_election_results
        for p in t.partition_result
    }


@pytest.mark.parametrize(
    ("election", "partitions", "code"),
    [
        pytest.param(0, [(TOPIC, 0), (TOPIC, 1)], Errors.ELECTION_NOT_NEEDED, id="preferred-already-leader"),
        pytest.param(1, [(TOPIC, 0)], Errors.ELECTION_NOT_NEEDED, id="unclean-with-a-leader"),
        pytest.param(0, [(TOPIC, 7)], Errors.UNKNOWN_TOPIC_OR_PARTITION, id="unknown-partition"),
        pytest.param(0, [("ghost", 0)], Errors.UNKNOWN_TOPIC_OR_PARTITION, id="unknown-topic"),
        pytest.param(1, [("ghost", 0)], Errors.UNKNOWN_TOPIC_OR_PARTITION, id="unclean-unknown-topic"),
    ],
)
def test_elect_leaders_codes(
    live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin, election: int, partitions: list[tuple[str, int]], code: int
) -> None:
    grpc = live.run(live.admin.elect_leaders(election, partitions))
    want = {(r.topic, r.partition): grpc_answer(r.error) for r in grpc}
    assert set(want) == set(partitions) and {c for c, _ in want.values()} == {code}
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    answer = kp.elect_leaders(election, by_topic, raise_errors=False)
    assert answer.error_code == 0
    assert kp_election_results(answer) == want
    ck_type = CkElection.UNCLEAN if election else CkElection.PREFERRED
    results = ck.elect_leaders(ck_type, [CkTopicPartition(t, p) for t, p in partitions]).result(10)
    got = {(tp.topic, tp.partition): (tp.error.code(), tp.error.str()) for tp in results}
    assert got.keys() == want.keys() and all(ck_same(got[tp], want[tp]) for tp in want)


# -- reassignments ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "partition", "replicas", "code"),
    [
        pytest.param("ghost", 0, [101, 102], Errors.UNKNOWN_TOPIC_OR_PARTITION, id="unknown-topic"),
        pytest.param(TOPIC, 9, [101, 102], Errors.UNKNOWN_TOPIC_OR_PARTITION, id="unknown-partition"),
        pytest.param(TOPIC, 0, [101, 999], Errors.INVALID_REPLICA_ASSIGNMENT, id="unregistered-broker"),
        pytest.param(TOPIC, 0, [101, 101], Errors.INVALID_REPLICA_ASSIGNMENT, id="duplicate-broker"),
        pytest.param(TOPIC, 0, [], Errors.INVALID_REPLICA_ASSIGNMENT, id="empty"),
        pytest.param(TOPIC, 1, None, Errors.NO_REASSIGNMENT_IN_PROGRESS, id="cancel-of-none"),
    ],
)
def test_reassignment_codes(
    live: KafkaNode, kp: KafkaAdminClient, topic: str, partition: int, replicas: list[int] | None, code: int
) -> None:
    """kafka-python (confluent-kafka 2.x has no reassignment API); an empty list kafka-python refuses itself, so
    that row goes as a raw request through our codec."""
    grpc = live.run(live.admin.alter_partition_reassignments({(topic, partition): replicas}))
    want = grpc_answer(grpc[(topic, partition)])
    assert want[0] == code, want
    if replicas == []:
        with pytest.raises(ValueError, match="must be non-empty"):
            kp.alter_partition_reassignments({KpTopicPartition(topic, partition): replicas})
        t = AlterPartitionReassignmentsRequest.fields[1].type.element
        p = t.fields[1].type.element
        request = AlterPartitionReassignmentsRequest.cls(
            timeout_ms=10_000, topics=[t.cls(name=topic, partitions=[p.cls(partition_index=partition, replicas=[])])]
        )
        with raw_connection(live.bootstrap) as sock:
            raw_request(sock, 45, 0, AlterPartitionReassignmentsRequest.encode(request, 0))
            answer = raw_response(sock, 45, 0)[1]
        [[raw]] = [t.partitions for t in answer.responses]
        assert (answer.error_code, raw.error_code, raw.error_message) == (0, *want)
    else:
        tp = KpTopicPartition(topic, partition)
        got = kp.alter_partition_reassignments({tp: replicas})
        assert got == {tp: for_code(code)}  # kafka-python keeps the class of the error, not its message
    assert live.run(live.admin.list_partition_reassignments()) == {}


# -- ACLs ------------------------------------------------------------------------------------------------------------


def test_acl_invalid_filters_and_bindings(live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin) -> None:
    """A filter with an UNKNOWN part: librdkafka refuses to build it (ValueError) and never sends it; kafka-python
    sends it and gets INVALID_REQUEST, as gRPC does. An ACL that is not concrete (a MATCH pattern): both send it."""
    from controller.authorizer import AclOperation as Op
    from controller.authorizer import AclPermissionType as Perm
    from controller.authorizer import PatternType as Pat
    from controller.authorizer import ResourceType as Res

    with pytest.raises(ValueError, match="UNKNOWN"):
        AclBindingFilter(CkResource.UNKNOWN, None, CkPattern.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    for resource_type, pattern, operation in ((Res.UNKNOWN, Pat.ANY, Op.ANY), (Res.ANY, Pat.UNKNOWN, Op.ANY)):
        grpc_filter = GrpcAclFilter(resource_type, None, pattern, None, None, operation, Perm.ANY)
        with pytest.raises(Exception) as grpc_error:
            live.run(live.admin.describe_acls(grpc_filter))
        kp_filter = ACLFilter(
            None,
            None,
            ACLOperation(int(operation)),
            ACLPermissionType.ANY,
            ResourcePatternFilter(KpResource(int(resource_type)), None, ACLResourcePatternType(int(pattern))),
        )
        with pytest.raises(Exception) as kp_error:
            kp.describe_acls(kp_filter)
        assert kp_error.value.errno == Errors.INVALID_REQUEST == grpc_error.value.code  # type: ignore[attr-defined]
        [(_, matches, error)] = kp.delete_acls([kp_filter])
        assert (matches, error.errno) == ([], Errors.INVALID_REQUEST)
    # bindings both clients can build but the controller refuses: INVALID_REQUEST with gRPC's message
    # (a MATCH or ANY pattern, or an UNKNOWN part, both clients refuse to build)
    from controller.authorizer import StandardAcl

    for resource_type, name, principal in ((Res.CLUSTER, "other", "User:x"), (Res.TOPIC, "t", "alice")):
        acl = StandardAcl(resource_type, name, Pat.LITERAL, principal, "*", Op.READ, Perm.ALLOW)
        [grpc] = live.run(live.admin.create_acls([acl]))
        want = grpc_answer(grpc.error)
        assert want[0] == Errors.INVALID_REQUEST and want[1]
        binding = AclBinding(
            CkResource(int(resource_type)),
            name,
            CkPattern.LITERAL,
            principal,
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        assert ck_same(ck_answer(ck.create_acls([binding], request_timeout=10)[binding]), want)
        kp_acl = ACL(
            principal,
            "*",
            ACLOperation.READ,
            ACLPermissionType.ALLOW,
            ResourcePattern(KpResource(int(resource_type)), name, ACLResourcePatternType.LITERAL),
        )
        assert [e.errno for e in kp.create_acls([kp_acl])["failed"]] == [want[0]]  # its error classes only
    assert live.run(live.admin.describe_acls()) == []


# -- NOT_CONTROLLER on a standby -------------------------------------------------------------------------------------


def test_standby_answers_every_mutation_not_controller(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Both clients send admin mutations only to the controller Metadata names, and a standby names none (they wait
    for one), so the standby's answers are read from raw requests: NOT_CONTROLLER (41) for each topic, resource or
    partition, as Kafka's controllers answer requests they cannot serve."""
    cp_topic = CreatePartitionsRequest.fields[0].type.element
    iac_resource = IncrementalAlterConfigsRequest.fields[0].type.element
    iac_config = iac_resource.fields[2].type.element
    el_topic = ElectLeadersRequest.fields[1].type.element
    ra_topic = AlterPartitionReassignmentsRequest.fields[1].type.element
    ra_partition = ra_topic.fields[1].type.element
    requests = [
        (37, 3, CreatePartitionsRequest.cls(topics=[cp_topic.cls(name="t", count=3, assignments=None)])),
        (
            44,
            1,
            IncrementalAlterConfigsRequest.cls(
                resources=[
                    iac_resource.cls(
                        resource_type=2,
                        resource_name="t",
                        configs=[iac_config.cls(name="retention.ms", config_operation=0, value="1")],
                    )
                ]
            ),
        ),
        (43, 2, ElectLeadersRequest.cls(election_type=0, topic_partitions=[el_topic.cls(topic="t", partitions=[0])])),
        (
            45,
            0,
            AlterPartitionReassignmentsRequest.cls(
                topics=[ra_topic.cls(name="t", partitions=[ra_partition.cls(partition_index=0, replicas=[1])])]
            ),
        ),
    ]
    ac_resource = AlterConfigsRequest.fields[0].type.element
    ac_config = ac_resource.fields[2].type.element
    requests.append(
        (
            33,
            2,
            AlterConfigsRequest.cls(
                resources=[
                    ac_resource.cls(
                        resource_type=2, resource_name="t", configs=[ac_config.cls(name="retention.ms", value="1")]
                    )
                ]
            ),
        )
    )
    acl = CreateAclsRequest.fields[0].type.element
    acl_filter = DeleteAclsRequest.fields[0].type.element
    requests += [
        (
            30,
            3,
            CreateAclsRequest.cls(
                creations=[
                    acl.cls(
                        resource_type=2,
                        resource_name="t",
                        resource_pattern_type=3,
                        principal="User:x",
                        host="*",
                        operation=3,
                        permission_type=3,
                    )
                ]
            ),
        ),
        (
            31,
            3,
            DeleteAclsRequest.cls(
                filters=[
                    acl_filter.cls(
                        resource_type_filter=1,
                        resource_name_filter=None,
                        pattern_type_filter=1,
                        principal_filter=None,
                        host_filter=None,
                        operation=1,
                        permission_type=1,
                    )
                ]
            ),
        ),
    ]
    from pykraft.kafka.registry import APIS

    with kafka_node(tmp_path_factory.mktemp("kafka-standby-codes"), standby=True) as node:
        with raw_connection(node.bootstrap) as sock:
            for key, version, request in requests:
                raw_request(sock, key, version, APIS[key].request.encode(request, version))
                answer = raw_response(sock, key, version)[1]
                codes = [getattr(answer, "error_code", 0)]
                entries = [getattr(answer, f, None) for f in ("results", "responses", "filter_results")]
                for r in next((e for e in entries if e), []):
                    codes.extend(p.error_code for p in getattr(r, "partitions", None) or [r])
                for r in getattr(answer, "replica_election_results", []):
                    codes.extend(p.error_code for p in r.partition_result)
                assert Errors.NOT_CONTROLLER in codes and set(codes) <= {0, Errors.NOT_CONTROLLER}, (key, codes)
        assert node.controller.committed_offset < 1


# -- names gRPC refuses as unset fields ------------------------------------------------------------------------------


def test_empty_topic_names_and_negative_partitions_are_answered_per_entry(
    live: KafkaNode, kp: KafkaAdminClient, ck: CkAdmin
) -> None:
    """Both clients send an empty topic name and a negative partition index. Over gRPC those are proto3 fields left
    unset, refused for the whole request (INVALID_REQUEST); over Kafka's protocol they are names like any other, and
    Kafka's controller answers each UNKNOWN_TOPIC_OR_PARTITION alone while the rest of the request goes on — as the
    controller here answers them (its messages)."""
    from controller.requests import ReassignablePartition, ReassignableTopic

    with pytest.raises(AdminError) as refused:  # gRPC: unchanged
        live.run(live.admin.delete_topics(["", "ghost"]))
    assert refused.value.code == Errors.INVALID_REQUEST
    controller = live.controller

    # DeleteTopics: the empty name alone fails
    [k_empty, k_ghost] = kp.delete_topics(["", "ghost"], raise_errors=False)["topics"]
    assert [(t["name"], t["error_code"], t["error_message"]) for t in (k_empty, k_ghost)] == [
        ("", Errors.UNKNOWN_TOPIC_OR_PARTITION, "Topic '' does not exist."),
        ("ghost", Errors.UNKNOWN_TOPIC_OR_PARTITION, "Topic 'ghost' does not exist."),
    ]
    assert ck_answer(ck.delete_topics([""], request_timeout=10)[""])[0] == Errors.UNKNOWN_TOPIC_OR_PARTITION

    # CreatePartitions
    [want] = live.run(controller.create_partitions([CtlNewPartitions("", 3, None)], validate_only=True))
    assert want.error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    [k] = kp.create_partitions({"": KpNewPartitions(3)}, validate_only=True, raise_errors=False).results
    assert (k.error_code, k.error_message) == grpc_answer(want.error)
    futures = ck.create_partitions([CkNewPartitions("", 3)], validate_only=True, request_timeout=10)
    assert ck_same(ck_answer(futures[""]), grpc_answer(want.error))

    # ElectLeaders: the valid partition beside them is answered as usual
    asked = [("", 0), (TOPIC, -1), (TOPIC, 0)]
    want_elect = {(r.topic, r.partition): grpc_answer(r.error) for r in live.run(controller.elect_leaders(0, asked))}
    assert [want_elect[p][0] for p in asked] == [3, 3, Errors.ELECTION_NOT_NEEDED]
    answer = kp.elect_leaders(0, {"": [0], TOPIC: [-1, 0]}, raise_errors=False)
    assert answer.error_code == 0
    assert kp_election_results(answer) == want_elect
    with pytest.raises(ValueError, match="negative"):  # librdkafka's own check: never sent
        ck.elect_leaders(CkElection.PREFERRED, [CkTopicPartition(TOPIC, -1)])
    sendable = [("", 0), (TOPIC, 0)]
    results = ck.elect_leaders(CkElection.PREFERRED, [CkTopicPartition(t, p) for t, p in sendable]).result(10)
    got = {(tp.topic, tp.partition): (tp.error.code(), tp.error.str()) for tp in results}
    assert got.keys() == set(sendable) and all(ck_same(got[tp], want_elect[tp]) for tp in sendable)

    # AlterPartitionReassignments (kafka-python)
    moves = [ReassignableTopic("", (ReassignablePartition(0, (101, 102)),))]
    moves.append(ReassignableTopic(TOPIC, (ReassignablePartition(-1, (101, 102)),)))
    want_moves = {
        (t.name, p.partition_index): p.error.code
        for t in live.run(controller.alter_partition_reassignments(moves))
        for p in t.partitions
    }
    got_moves = kp.alter_partition_reassignments(
        {KpTopicPartition("", 0): [101, 102], KpTopicPartition(TOPIC, -1): [101, 102]}
    )
    assert (
        {(tp.topic, tp.partition): e.errno for tp, e in got_moves.items()}
        == want_moves
        == {
            ("", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
            (TOPIC, -1): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        }
    )
    listed = kp.list_partition_reassignments([KpTopicPartition("", 0), KpTopicPartition(TOPIC, -1)])
    assert listed == {}
    assert partitions_of(live) == TOPIC_PARTITIONS
