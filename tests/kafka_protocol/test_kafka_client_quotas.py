"""DescribeClientQuotas (48) and AlterClientQuotas (49) over the Kafka listener. Neither kafka-python's
KafkaAdminClient (3.0) nor confluent-kafka (2.x) has a client-quota method, so kafka-python's own request and
response classes go over its own connection (its codec, its version negotiation), beside raw v0 and v1 frames through
our codec; each answer equals what the gRPC AdminClient gets, with Kafka's codes."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from kafka_helpers import KafkaNode, kafka_node, raw_connection, raw_request, raw_response

from controller.quota_control import FilterComponent, QuotaAlteration, QuotaOp
from pykraft.kafka.apis.client_quotas import AlterClientQuotasRequest, DescribeClientQuotasRequest
from quorum.errors import Errors

with warnings.catch_warnings():  # kafka-python 3 loads its schemas with importlib.resources' deprecated calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest as KpAlter
    from kafka.protocol.admin import DescribeClientQuotasRequest as KpDescribe
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")

EXACT, DEFAULT, SPECIFIED = 0, 1, 2
Entity = list[tuple[str, str | None]]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    with kafka_node(tmp_path_factory.mktemp("kafka-quotas")) as node:
        yield node


@pytest.fixture(scope="module")
def kp(live: KafkaNode) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=live.bootstrap, request_timeout_ms=10_000, client_id="kp-quotas")
    yield client
    client.close()


def kp_send(kp: KafkaAdminClient, request: Any) -> Any:
    return kp._manager.run(kp._manager.send, request)


def kp_alter(kp: KafkaAdminClient, entries: list[tuple[Entity, list[QuotaOp]]], validate_only: bool = False) -> Any:
    return kp_send(
        kp,
        KpAlter(
            entries=[
                KpAlter.EntryData(
                    entity=[KpAlter.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                    ops=[KpAlter.EntryData.OpData(key=o.key, value=o.value, remove=o.remove) for o in ops],
                )
                for entity, ops in entries
            ],
            validate_only=validate_only,
        ),
    )


def kp_describe(kp: KafkaAdminClient, components: list[FilterComponent], strict: bool = False) -> Any:
    return kp_send(
        kp,
        KpDescribe(
            components=[
                KpDescribe.ComponentData(entity_type=c.entity_type, match_type=c.match_type, match=c.match)
                for c in components
            ],
            strict=strict,
        ),
    )


def described(answer: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """A DescribeClientQuotas answer (kafka-python's or ours) as {sorted entity: {key: value}}."""
    return {
        tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)): {v.key: v.value for v in entry.values}
        for entry in answer.entries
    }


def grpc_described(live: KafkaNode, components: list[FilterComponent], strict: bool = False) -> dict:
    found = live.run(live.admin.describe_client_quotas(components, strict=strict))
    return {tuple(sorted(entity)): values for entity, values in found.items()}


def test_alter_then_describe_through_kafka_python_as_grpc(live: KafkaNode, kp: KafkaAdminClient) -> None:
    alice: Entity = [("user", "alice")]
    defaults: Entity = [("client-id", None)]
    both: Entity = [("user", "alice"), ("client-id", "app")]
    # validate_only: accepted, nothing written
    [entry] = kp_alter(kp, [(alice, [QuotaOp("producer_byte_rate", 1024.0)])], validate_only=True).entries
    assert (entry.error_code, entry.error_message) == (0, None)
    assert grpc_described(live, [FilterComponent("user", SPECIFIED)]) == {}
    answer = kp_alter(
        kp,
        [
            (alice, [QuotaOp("producer_byte_rate", 1024.0), QuotaOp("consumer_byte_rate", 2048.0)]),
            (defaults, [QuotaOp("controller_mutation_rate", 5.0)]),
            (both, [QuotaOp("request_percentage", 50.0)]),
        ],
    )
    assert [(e.error_code, [(x.entity_type, x.entity_name) for x in e.entity]) for e in answer.entries] == [
        (0, alice),
        (0, defaults),
        (0, both),
    ]
    for components, strict in (
        ([FilterComponent("user", EXACT, "alice")], False),
        ([FilterComponent("user", EXACT, "alice")], True),
        ([FilterComponent("client-id", DEFAULT)], False),
        ([FilterComponent("client-id", SPECIFIED)], False),
        ([], False),
    ):
        want = grpc_described(live, components, strict)
        got = kp_describe(kp, components, strict)
        assert (got.error_code, got.error_message) == (0, None)
        assert described(got) == want, (components, strict)
    assert described(kp_describe(kp, [FilterComponent("user", EXACT, "alice")], True)) == {
        (("user", "alice"),): {"producer_byte_rate": 1024.0, "consumer_byte_rate": 2048.0}
    }
    # remove: the key goes; with no key left, the entity goes
    kp_alter(kp, [(alice, [QuotaOp("producer_byte_rate", 0.0, True), QuotaOp("consumer_byte_rate", 0.0, True)])])
    assert grpc_described(live, [FilterComponent("user", EXACT, "alice")], True) == {}
    live.run(
        live.admin.alter_client_quotas(
            [
                QuotaAlteration(defaults, [QuotaOp("controller_mutation_rate", 0.0, True)]),
                QuotaAlteration(both, [QuotaOp("request_percentage", 0.0, True)]),
            ]
        )
    )
    assert grpc_described(live, []) == {}
    asked = live.listener.stats.requests
    assert asked[("AlterClientQuotas", 1)] >= 3 and asked[("DescribeClientQuotas", 1)] >= 5  # kafka-python's v1


ALTER_ERRORS = [
    pytest.param([("user", "bob")], [QuotaOp("bogus_rate", 1.0)], id="unknown-key"),
    pytest.param([("user", "bob")], [QuotaOp("producer_byte_rate", -1.0)], id="not-positive"),
    pytest.param([("user", "bob")], [QuotaOp("producer_byte_rate", 1.5)], id="fractional"),
    pytest.param([("group", "g")], [QuotaOp("producer_byte_rate", 1.0)], id="unknown-entity-type"),
    pytest.param([("user", "a"), ("user", "b")], [QuotaOp("producer_byte_rate", 1.0)], id="entity-type-twice"),
    pytest.param([], [QuotaOp("producer_byte_rate", 1.0)], id="empty-entity"),
    pytest.param([("ip", "not an ip")], [QuotaOp("connection_creation_rate", 1.0)], id="bad-ip"),
    pytest.param([("user", "bob")], [QuotaOp("connection_creation_rate", 1.0)], id="ip-key-on-a-user"),
]


@pytest.mark.parametrize(("entity", "ops"), ALTER_ERRORS)
def test_alter_errors_as_grpc(live: KafkaNode, kp: KafkaAdminClient, entity: Entity, ops: list[QuotaOp]) -> None:
    [grpc] = live.run(live.admin.alter_client_quotas([QuotaAlteration(entity, ops)], validate_only=True))
    want = (int(grpc.error.code), grpc.error.message)
    assert want[0] == Errors.INVALID_REQUEST and want[1], want
    for validate_only in (True, False):
        [entry] = kp_alter(kp, [(entity, ops)], validate_only=validate_only).entries
        assert (entry.error_code, entry.error_message) == want
    assert grpc_described(live, []) == {}


@pytest.mark.parametrize(
    ("components", "code"),
    [
        pytest.param([FilterComponent("user", 9)], Errors.UNSUPPORTED_VERSION, id="unknown-match-type"),
        pytest.param([FilterComponent("group", SPECIFIED)], Errors.UNSUPPORTED_VERSION, id="unknown-entity-type"),
        pytest.param(
            [FilterComponent("user", SPECIFIED), FilterComponent("user", DEFAULT)],
            Errors.INVALID_REQUEST,
            id="entity-type-twice",
        ),
        pytest.param([FilterComponent("user", EXACT, None)], Errors.INVALID_REQUEST, id="exact-without-a-name"),
    ],
)
def test_describe_filter_errors_as_grpc(
    live: KafkaNode, kp: KafkaAdminClient, components: list[FilterComponent], code: int
) -> None:
    """A filter Kafka refuses: the request's error, and no entries (null), as Kafka answers it."""
    from pykraft.client import AdminError

    with pytest.raises(AdminError) as refused:
        live.run(live.admin.describe_client_quotas(components))
    assert refused.value.code == code
    answer = kp_describe(kp, components)
    assert (answer.error_code, f"DescribeClientQuotas: {answer.error_message}") == (code, str(refused.value))
    assert answer.entries is None


def alter_request(*entries: tuple[str | None, str, float]) -> Any:
    """An AlterClientQuotas request in our codec's classes: per (user name or None, key, value) one entity set."""
    entity = AlterClientQuotasRequest.fields[0].type.element
    name_type = entity.fields[0].type.element
    op = entity.fields[1].type.element
    return AlterClientQuotasRequest.cls(
        entries=[
            entity.cls(
                entity=[name_type.cls(entity_type="user", entity_name=name)],
                ops=[op.cls(key=key, value=value, remove=False)],
            )
            for name, key, value in entries
        ],
        validate_only=False,
    )


def test_raw_frames_v0_and_v1(live: KafkaNode) -> None:
    """Our codec at the non-flexible and the flexible version: a default entity (null name) and a float64 value
    round-trip; an entry refused beside an accepted one."""
    component = DescribeClientQuotasRequest.fields[0].type.element
    alter = alter_request((None, "request_percentage", 12.5), ("x", "nope", 1.0))
    describe = DescribeClientQuotasRequest.cls(
        components=[component.cls(entity_type="user", match_type=DEFAULT, match=None)], strict=True
    )
    with raw_connection(live.bootstrap) as sock:
        for version in (0, 1):
            raw_request(sock, 49, version, AlterClientQuotasRequest.encode(alter, version))
            answer = raw_response(sock, 49, version)[1]
            assert [(e.error_code, [(x.entity_type, x.entity_name) for x in e.entity]) for e in answer.entries] == [
                (0, [("user", None)]),
                (Errors.INVALID_REQUEST, [("user", "x")]),
            ]
            assert answer.entries[1].error_message == "Invalid configuration key nope"
            raw_request(sock, 48, version, DescribeClientQuotasRequest.encode(describe, version))
            found = raw_response(sock, 48, version)[1]
            assert (found.error_code, described(found)) == (0, {(("user", None),): {"request_percentage": 12.5}})
    assert grpc_described(live, [FilterComponent("user", DEFAULT)]) == {(("user", None),): {"request_percentage": 12.5}}
    live.run(
        live.admin.alter_client_quotas([QuotaAlteration([("user", None)], [QuotaOp("request_percentage", 0, True)])])
    )


def test_standby_and_authorization(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A standby answers each entry NOT_CONTROLLER; with authorization on, AlterClientQuotas needs ALTER_CONFIGS on
    the CLUSTER (else each entry CLUSTER_AUTHORIZATION_FAILED) and DescribeClientQuotas DESCRIBE_CONFIGS on it (else
    the request's error, no entries), for the plaintext listener's User:ANONYMOUS."""
    from controller.authorizer import AclOperation as Op
    from controller.authorizer import AclPermissionType as Perm
    from controller.authorizer import PatternType as Pat
    from controller.authorizer import ResourceType as Res
    from controller.authorizer import StandardAcl
    from controller.quorum_controller import ControllerSettings

    alter = alter_request(("a", "producer_byte_rate", 10.0), ("b", "producer_byte_rate", 10.0))
    describe = DescribeClientQuotasRequest.cls(components=[], strict=False)
    with kafka_node(tmp_path_factory.mktemp("kafka-quota-standby"), standby=True) as node:
        with raw_connection(node.bootstrap) as sock:
            raw_request(sock, 49, 1, AlterClientQuotasRequest.encode(alter, 1))
            answer = raw_response(sock, 49, 1)[1]
        assert [(e.error_code, e.entity[0].entity_name) for e in answer.entries] == [
            (Errors.NOT_CONTROLLER, "a"),
            (Errors.NOT_CONTROLLER, "b"),
        ]
    settings = ControllerSettings(
        max_idle_interval_ms=0, authorizer_class_name="StandardAuthorizer", allow_everyone_if_no_acl_found=True
    )
    with kafka_node(tmp_path_factory.mktemp("kafka-quota-authz"), settings) as node:
        deny = [
            StandardAcl(Res.CLUSTER, "kafka-cluster", Pat.LITERAL, "User:ANONYMOUS", "*", o, Perm.DENY)
            for o in (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS)
        ]
        assert not any(r.error.failed for r in node.run(node.admin.create_acls(deny)))
        with raw_connection(node.bootstrap) as sock:
            raw_request(sock, 49, 0, AlterClientQuotasRequest.encode(alter, 0))
            answer = raw_response(sock, 49, 0)[1]
            raw_request(sock, 48, 0, DescribeClientQuotasRequest.encode(describe, 0))
            found = raw_response(sock, 48, 0)[1]
        assert {e.error_code for e in answer.entries} == {Errors.CLUSTER_AUTHORIZATION_FAILED}
        assert len(answer.entries) == 2
        assert (found.error_code, found.entries) == (Errors.CLUSTER_AUTHORIZATION_FAILED, None)
        assert not node.controller.quotas.quotas.committed()  # nothing written
