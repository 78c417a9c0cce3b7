"""The legacy AlterConfigs (key 33) over the Kafka listener: confluent-kafka's ``alter_configs`` replaces a resource's
dynamic configs as Kafka's controller does (a key not named is removed), with the codes and messages the gRPC
client's ``alter_configs`` gets; kafka-python's ``incremental=False`` path; raw v0 and v2 frames."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient as CkAdmin
from confluent_kafka.admin import ConfigResource as CkConfigResource
from kafka_helpers import KafkaNode, kafka_node, raw_connection, raw_request, raw_response

from controller.requests import ConfigResource
from pykraft.client import NewTopic
from pykraft.kafka.apis.alter_configs import AlterConfigsRequest
from quorum.errors import Errors

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' deprecated calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import KafkaAdminClient
pytestmark = [
    pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning"),  # it is what we test
]

TOPIC_RES, BROKER_RES = 2, 4
_Resource = AlterConfigsRequest.fields[0].type.element
_Config = _Resource.fields[2].type.element


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    with kafka_node(tmp_path_factory.mktemp("kafka-alter-configs")) as node:
        created = node.run(node.admin.create_topics([NewTopic(t, 1, 2) for t in ("legacy", "kept", "raw")]))
        assert all(r.error_code == 0 for r in created.values())
        yield node


@pytest.fixture(scope="module")
def ck(live: KafkaNode) -> CkAdmin:
    return CkAdmin({"bootstrap.servers": live.bootstrap, "client.id": "ck-legacy", "log_level": 3})


def dynamic(live: KafkaNode, kind: int, name: str) -> dict[str, str | None]:
    """The resource's dynamic configs, as gRPC describes them."""
    [described] = live.run(live.admin.describe_configs([ConfigResource(kind, name)]))
    own = 1 if kind == TOPIC_RES else 2  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG: set on the resource itself
    return {c.name: c.value for c in described.configs if c.source == own}


def reset(live: KafkaNode, kind: int, name: str, **configs: str) -> None:
    """The resource's dynamic configs exactly these, through the gRPC client's legacy alter_configs."""
    wanted = {k.replace("_", "."): v for k, v in configs.items()}
    [result] = live.run(live.admin.alter_configs({ConfigResource(kind, name): wanted}))
    assert not result.error.failed and dynamic(live, kind, name) == wanted


def ck_alter(ck: CkAdmin, kind: CkConfigResource.Type, name: str, validate_only: bool = False, **configs: str):
    resource = CkConfigResource(kind, name, set_config={k.replace("_", "."): v for k, v in configs.items()})
    [future] = ck.alter_configs([resource], validate_only=validate_only, request_timeout=10).values()
    try:
        future.result(10)
    except KafkaException as e:
        return e.args[0].code(), e.args[0].str()
    return 0, None


def test_confluent_alter_configs_replaces_the_topics_dynamic_configs(live: KafkaNode, ck: CkAdmin) -> None:
    reset(live, TOPIC_RES, "legacy", retention_ms="1000", cleanup_policy="compact")
    assert dynamic(live, TOPIC_RES, "legacy") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    # validate_only: accepted, nothing written
    assert ck_alter(ck, CkConfigResource.Type.TOPIC, "legacy", True, retention_ms="2000") == (0, None)
    assert dynamic(live, TOPIC_RES, "legacy") == {"retention.ms": "1000", "cleanup.policy": "compact"}
    # for real: retention.ms changed, cleanup.policy (not named) removed, as gRPC's alter_configs would
    assert ck_alter(ck, CkConfigResource.Type.TOPIC, "legacy", retention_ms="2000", segment_ms="3600000") == (0, None)
    assert dynamic(live, TOPIC_RES, "legacy") == {"retention.ms": "2000", "segment.ms": "3600000"}
    [grpc] = live.run(live.admin.alter_configs({ConfigResource(TOPIC_RES, "legacy"): {"retention.ms": "2000"}}))
    assert not grpc.error.failed and dynamic(live, TOPIC_RES, "legacy") == {"retention.ms": "2000"}
    assert sum(n for (api, _), n in live.listener.stats.requests.items() if api == "AlterConfigs") >= 2


@pytest.mark.parametrize(
    ("kind", "name", "configs", "code"),
    [
        pytest.param(TOPIC_RES, "kept", {"no.such.config": "1"}, Errors.INVALID_CONFIG, id="unknown-config"),
        pytest.param(TOPIC_RES, "kept", {"retention.ms": "soon"}, Errors.INVALID_CONFIG, id="bad-value"),
        pytest.param(TOPIC_RES, "ghost", {"retention.ms": "1"}, Errors.UNKNOWN_TOPIC_OR_PARTITION, id="no-topic"),
        pytest.param(BROKER_RES, "1", {"num.partitions": "3"}, Errors.INVALID_REQUEST, id="broker-static"),
        pytest.param(BROKER_RES, "1", {"log.flush.interval.ms": "x"}, Errors.INVALID_REQUEST, id="broker-bad-value"),
    ],
)
def test_errors_through_confluent_as_grpc(
    live: KafkaNode, ck: CkAdmin, kind: int, name: str, configs: dict[str, str], code: int
) -> None:
    """Each refusal: gRPC's code and message, through librdkafka (a BROKER resource goes to that node: ours, 1);
    nothing changes on the resource, which keeps its configs."""
    reset(live, TOPIC_RES, "kept", retention_ms="4000")
    for validate_only in (True, False):
        [grpc] = live.run(live.admin.alter_configs({ConfigResource(kind, name): configs}, validate_only=validate_only))
        want = (int(grpc.error.code), grpc.error.message)
        assert want[0] == code, want
        ck_type = CkConfigResource.Type.TOPIC if kind == TOPIC_RES else CkConfigResource.Type.BROKER
        resource = CkConfigResource(ck_type, name, set_config=configs)
        [future] = ck.alter_configs([resource], validate_only=validate_only, request_timeout=10).values()
        with pytest.raises(KafkaException) as refused:
            future.result(10)
        assert (refused.value.args[0].code(), refused.value.args[0].str()) == want
    assert dynamic(live, TOPIC_RES, "kept") == {"retention.ms": "4000"}


def test_broker_resource_through_confluent(live: KafkaNode, ck: CkAdmin) -> None:
    reset(live, BROKER_RES, "1", log_flush_interval_ms="5000", log_cleaner_delete_retention_ms="20000")
    assert ck_alter(ck, CkConfigResource.Type.BROKER, "1", log_flush_interval_ms="6000") == (0, None)
    configs = {
        c.name: (c.value, c.source)
        for c in live.run(live.admin.describe_configs([ConfigResource(BROKER_RES, "1")]))[0].configs
    }
    assert configs["log.flush.interval.ms"] == ("6000", 2)  # DYNAMIC_BROKER_CONFIG
    assert configs["log.cleaner.delete.retention.ms"][1] != 2  # not named: no longer set on the broker


def test_kafka_python_legacy_path(live: KafkaNode) -> None:
    """kafka-python's incremental=False sends AlterConfigs and first re-sends the resource's other modified configs
    itself (it knows the API resets them), so only the key named changes. (It re-sends every value whose source is
    not the default, inherited broker values too, so the broker is cleared first.)"""
    reset(live, BROKER_RES, "1")
    reset(live, TOPIC_RES, "kept", retention_ms="4000", cleanup_policy="compact")
    client = KafkaAdminClient(bootstrap_servers=live.bootstrap, request_timeout_ms=10_000, client_id="kp-legacy")
    try:
        before = sum(live.listener.stats.requests.get(("AlterConfigs", v), 0) for v in (0, 1, 2))
        answer = client.alter_configs(
            [KpConfigResource("TOPIC", "kept", configs={"retention.ms": "5000"})], incremental=False
        )
        assert answer == {"topic": {"kept": "OK"}}
        bad = client.alter_configs(
            [KpConfigResource("TOPIC", "ghost", configs={"retention.ms": "1"})],
            incremental=False,
            raise_on_unknown=False,
        )
        assert (
            bad["topic"]["ghost"].startswith("[Error 3] ")
            and "The topic 'ghost' does not exist." in bad["topic"]["ghost"]
        )
        after = sum(live.listener.stats.requests.get(("AlterConfigs", v), 0) for v in (0, 1, 2))
        assert after - before >= 2
    finally:
        client.close()
    assert dynamic(live, TOPIC_RES, "kept") == {"retention.ms": "5000", "cleanup.policy": "compact"}


def test_raw_frames_v0_and_v2(live: KafkaNode) -> None:
    """Our codec at a non-flexible and the flexible version: a resource named twice is answered once, INVALID_REQUEST
    "Duplicate resource.", an unknown type UNSUPPORTED_VERSION, and a null value INVALID_REQUEST, as gRPC answers;
    the valid resource beside them is applied."""
    request = AlterConfigsRequest.cls(
        resources=[
            _Resource.cls(
                resource_type=TOPIC_RES, resource_name="kept", configs=[_Config.cls(name="retention.ms", value="1")]
            ),
            _Resource.cls(resource_type=TOPIC_RES, resource_name="kept", configs=[]),
            _Resource.cls(resource_type=99, resource_name="x", configs=[]),
            _Resource.cls(
                resource_type=TOPIC_RES, resource_name="legacy", configs=[_Config.cls(name="retention.ms", value=None)]
            ),
            _Resource.cls(
                resource_type=TOPIC_RES, resource_name="raw", configs=[_Config.cls(name="retention.ms", value="7000")]
            ),
        ],
        validate_only=False,
    )
    reset(live, TOPIC_RES, "kept", retention_ms="4000")
    expected = {
        (TOPIC_RES, "kept"): (Errors.INVALID_REQUEST, "Duplicate resource."),
        (99, "x"): (Errors.UNSUPPORTED_VERSION, "Unknown resource type 99."),
        (TOPIC_RES, "legacy"): (Errors.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (TOPIC_RES, "raw"): (0, None),
    }
    with raw_connection(live.bootstrap) as sock:
        for version in (0, 2):
            raw_request(sock, 33, version, AlterConfigsRequest.encode(request, version))
            answer = raw_response(sock, 33, version)[1]
            got = {(r.resource_type, r.resource_name): (r.error_code, r.error_message) for r in answer.responses}
            assert len(answer.responses) == len(expected) and got == expected, version
    assert dynamic(live, TOPIC_RES, "kept") == {"retention.ms": "4000"}
    assert dynamic(live, TOPIC_RES, "raw") == {"retention.ms": "7000"}


def test_authorized_as_incremental_alter_configs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """ALTER_CONFIGS on the topic (else TOPIC_AUTHORIZATION_FAILED, 29) or on the CLUSTER for a broker (else
    CLUSTER_AUTHORIZATION_FAILED, 31), for the plaintext listener's User:ANONYMOUS, as gRPC's callers."""
    from controller.authorizer import AclOperation as Op
    from controller.authorizer import AclPermissionType as Perm
    from controller.authorizer import PatternType as Pat
    from controller.authorizer import ResourceType as Res
    from controller.authorizer import StandardAcl
    from controller.quorum_controller import ControllerSettings

    settings = ControllerSettings(
        max_idle_interval_ms=0, authorizer_class_name="StandardAuthorizer", allow_everyone_if_no_acl_found=True
    )
    with kafka_node(tmp_path_factory.mktemp("kafka-legacy-authz"), settings) as node:
        created = node.run(node.admin.create_topics([NewTopic("open", 1, 1), NewTopic("secret", 1, 1)]))
        assert all(r.error_code == 0 for r in created.values())
        deny = [
            StandardAcl(Res.TOPIC, "secret", Pat.LITERAL, "User:ANONYMOUS", "*", Op.ALTER_CONFIGS, Perm.DENY),
            StandardAcl(Res.CLUSTER, "kafka-cluster", Pat.LITERAL, "User:ANONYMOUS", "*", Op.ALTER_CONFIGS, Perm.DENY),
        ]
        assert not any(r.error.failed for r in node.run(node.admin.create_acls(deny)))
        ck = CkAdmin({"bootstrap.servers": node.bootstrap, "log_level": 3})
        assert ck_alter(ck, CkConfigResource.Type.TOPIC, "open", retention_ms="1000") == (0, None)
        code, message = ck_alter(ck, CkConfigResource.Type.TOPIC, "secret", retention_ms="1000")
        assert code == Errors.TOPIC_AUTHORIZATION_FAILED and "ALTER_CONFIGS" in (message or ""), message
        code, _ = ck_alter(ck, CkConfigResource.Type.BROKER, "1", log_flush_interval_ms="1000")
        assert code == Errors.CLUSTER_AUTHORIZATION_FAILED
        assert dynamic(node, TOPIC_RES, "open") == {"retention.ms": "1000"} and dynamic(node, TOPIC_RES, "secret") == {}
