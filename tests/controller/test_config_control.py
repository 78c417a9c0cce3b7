"""ConfigControl: IncrementalAlterConfigs (every operation, every error with its code and a message naming the key or
value, the records), DescribeConfigs (values, sources, synonyms), the effective topic and broker configs the
controller acts on, and replay through the timeline (commit, revert)."""

from __future__ import annotations

import pytest

from controller.config_control import ConfigControl
from controller.configs import BROKER_CONFIGS, TOPIC_CONFIGS
from controller.records import ConfigRecord
from controller.requests import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigResource,
    ConfigResourceResult,
    ConfigSource,
    ConfigSynonym,
)
from controller.results import MAX_RECORDS_PER_USER_OP, ApiError
from controller.timeline import Timeline
from quorum.errors import Errors

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = AlterConfigOp.SET, AlterConfigOp.DELETE, AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT
NODE = 1  # the controller's own node id (not a registered broker)
BROKERS = {101, 102}
TOPICS = {"orders", "payments"}
S = ConfigSource
E = Errors
IR, IC = Errors.INVALID_REQUEST, Errors.INVALID_CONFIG


class Harness:
    def __init__(self, static: dict[str, str] | None = None) -> None:
        self.timeline = Timeline()
        self.control = ConfigControl(
            self.timeline,
            static,
            topic_exists=lambda name: name in TOPICS,
            broker_registered=lambda broker: broker in BROKERS,
            node_id=NODE,
        )
        self.offset = 0

    def alter(self, *resources: AlterConfigsResource, validate_only: bool = False, commit: bool = True):
        result = self.control.incremental_alter_configs(list(resources), validate_only)
        self.replay(*result.records, commit=commit)
        return result

    def replay(self, *records: ConfigRecord, commit: bool = True) -> None:
        for record in records:
            self.offset += 1
            self.timeline.offset = self.offset
            try:
                self.control.replay(record)
            finally:
                self.timeline.offset = None
        if commit:
            self.timeline.commit_through(self.offset)

    def fails(self, resource: AlterConfigsResource) -> tuple[Errors, str | None]:
        """The one resource's error, the same for real and validate-only, neither writing a record."""
        answers = set()
        for validate_only in (True, False):
            result = self.alter(resource, validate_only=validate_only)
            assert result.records == []
            [answer] = result.response
            assert (answer.resource_type, answer.resource_name) == (resource.resource_type, resource.resource_name)
            answers.add((answer.error.code, answer.error.message))
        [answer] = answers
        return answer

    def configs(self, resource_type: int, name: str) -> dict[str, str]:
        return dict(self.control.configs.get((resource_type, name), ()))

    def describe(self, resource_type: int, name: str, keys: tuple[str, ...] | None = None, **kw):
        [result] = self.control.describe_configs([ConfigResource(resource_type, name, keys)], **kw)
        return result


def res(resource_type: int, name: str, *configs: tuple[int, str, str | None]) -> AlterConfigsResource:
    return AlterConfigsResource(resource_type, name, tuple(AlterableConfig(n, op, v) for op, n, v in configs))


def rec(resource_type: int, name: str, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=value)


def t(*configs: tuple[int, str, str | None], name: str = "orders") -> AlterConfigsResource:
    return res(TOPIC, name, *configs)


def b(name: str, *configs: tuple[int, str, str | None]) -> AlterConfigsResource:
    return res(BROKER, name, *configs)


def ok(resource_type: int, name: str) -> ConfigResourceResult:
    return ConfigResourceResult(resource_type, name)


def failed(resource_type: int, name: str, code: Errors, message: str) -> ConfigResourceResult:
    return ConfigResourceResult(resource_type, name, ApiError(code, message))


@pytest.fixture
def h() -> Harness:
    return Harness()


# -- operations ----------------------------------------------------------------------------------------------------


def test_set_writes_one_record_per_changed_key_and_replay_applies_it(h: Harness) -> None:
    result = h.alter(res(TOPIC, "orders", (SET, "retention.ms", "1000"), (SET, "min.insync.replicas", "2")))
    assert result.response == [ok(TOPIC, "orders")]
    assert result.records == [
        rec(TOPIC, "orders", "retention.ms", "1000"),
        rec(TOPIC, "orders", "min.insync.replicas", "2"),
    ]
    assert h.configs(TOPIC, "orders") == {"retention.ms": "1000", "min.insync.replicas": "2"}
    assert h.control.configs[(TOPIC, "orders")] == (("min.insync.replicas", "2"), ("retention.ms", "1000"))
    # setting the same value again changes nothing: no record for a topic
    again = h.alter(res(TOPIC, "orders", (SET, "retention.ms", "1000"), (SET, "min.insync.replicas", "3")))
    assert again.response == [ok(TOPIC, "orders")]
    assert again.records == [rec(TOPIC, "orders", "min.insync.replicas", "3")]


def test_delete_removes_the_key_and_an_unset_topic_key_writes_nothing(h: Harness) -> None:
    h.alter(res(TOPIC, "orders", (SET, "retention.ms", "1000"), (SET, "segment.ms", "5000")))
    result = h.alter(res(TOPIC, "orders", (DELETE, "retention.ms", None), (DELETE, "flush.ms", None)))
    assert result.response == [ok(TOPIC, "orders")]
    assert result.records == [rec(TOPIC, "orders", "retention.ms", None)]
    assert h.configs(TOPIC, "orders") == {"segment.ms": "5000"}
    h.alter(res(TOPIC, "orders", (DELETE, "segment.ms", "ignored")))  # a DELETE may carry a value
    assert (TOPIC, "orders") not in h.control.configs  # the empty resource is gone


def test_broker_resources_get_a_record_for_every_key_even_unchanged(h: Harness) -> None:
    h.alter(res(BROKER, "", (SET, "log.retention.ms", "1000")))
    result = h.alter(res(BROKER, "", (SET, "log.retention.ms", "1000"), (DELETE, "message.max.bytes", None)))
    assert result.response == [ok(BROKER, "")]
    assert result.records == [  # KAFKA-14136: brokers reload on each one
        rec(BROKER, "", "log.retention.ms", "1000"),
        rec(BROKER, "", "message.max.bytes", None),
    ]


def test_append_and_subtract_on_cleanup_policy_start_from_the_default(h: Harness) -> None:
    result = h.alter(t((APPEND, "cleanup.policy", "compact")))
    assert result.records == [rec(TOPIC, "orders", "cleanup.policy", "delete,compact")]
    assert h.control.topic_config("orders", "cleanup.policy") == ["delete", "compact"]
    assert h.alter(t((APPEND, "cleanup.policy", "compact,delete"))).records == []  # both present
    result = h.alter(t((SUBTRACT, "cleanup.policy", "delete")))
    assert result.records == [rec(TOPIC, "orders", "cleanup.policy", "compact")]
    # subtracting the last element leaves an empty list, which cleanup.policy refuses
    empty = "Invalid value  for configuration cleanup.policy: Empty list not allowed; valid values: [compact, delete]"
    assert h.fails(t((SUBTRACT, "cleanup.policy", "compact"))) == (E.INVALID_CONFIG, empty)
    assert h.configs(TOPIC, "orders") == {"cleanup.policy": "compact"}
    result = h.alter(t((SUBTRACT, "cleanup.policy", "compact"), name="payments"))  # from the default
    assert result.records == [rec(TOPIC, "payments", "cleanup.policy", "delete")]


def test_append_and_subtract_on_throttled_replicas(h: Harness) -> None:
    key = "leader.replication.throttled.replicas"
    assert h.alter(t((APPEND, key, "0:101"))).records == [rec(TOPIC, "orders", key, "0:101")]
    result = h.alter(t((APPEND, key, "1:102,0:101,")))  # Java's split drops the trailing ""
    assert result.records == [rec(TOPIC, "orders", key, "0:101,1:102")]
    assert h.control.topic_config("orders", key) == ["0:101", "1:102"]
    assert h.alter(t((SUBTRACT, key, "0:101,9:109"))).records == [rec(TOPIC, "orders", key, "1:102")]
    assert h.alter(t((SUBTRACT, key, "1:102"))).records == [rec(TOPIC, "orders", key, "")]  # valid when empty
    assert h.control.topic_config("orders", key) == []
    assert h.fails(t((APPEND, key, "0-101"))) == (
        E.INVALID_CONFIG,
        f"Invalid value 0-101 for configuration {key}: "
        "Value should be either '*' or a comma-separated list of [partitionId]:[brokerId] pairs",
    )


def test_append_drops_empty_parts_of_the_current_value(h: Harness) -> None:
    key = "follower.replication.throttled.replicas"
    h.replay(rec(TOPIC, "orders", key, ",0:101,,"))
    assert h.alter(t((APPEND, key, "1:101"))).records == [rec(TOPIC, "orders", key, "0:101,1:101")]


def test_append_on_a_broker_list_config(h: Harness) -> None:
    result = h.alter(b("", (APPEND, "log.cleanup.policy", "compact")))
    assert result.records == [rec(BROKER, "", "log.cleanup.policy", "delete,compact")]


# -- errors: each answered with its code and a message naming the key or value, for real and validate-only ----------

BAD = "Invalid value "
ERRORS = [
    # the request (ControllerApis and the forwarding broker's preprocessing)
    (t((SET, "segment.ms", "5"), (7, "retention.ms", "1")), IR, "Unknown operations type 7 for config retention.ms"),
    (
        t((SET, "retention.ms", None), (DELETE, "segment.ms", None), (APPEND, "cleanup.policy", None)),
        IR,
        "Null value not supported for : retention.ms, cleanup.policy",
    ),
    (t((SET, "a.b", "1"), (APPEND, "a.b", "x")), IR, "Error due to duplicate config keys: a.b"),
    (res(8, "1", (SET, "kafka.server", "DEBUG")), IR, "Unknown resource type BROKER_LOGGER"),
    (res(32, "group", (SET, "consumer.session.timeout.ms", "1")), IR, "Unknown resource type GROUP"),
    # APPEND and SUBTRACT need a LIST key
    (t((APPEND, "retention.ms", "1")), IC, "Can't APPEND to key retention.ms because its type is not LIST."),
    (t((SUBTRACT, "segment.ms", "1")), IC, "Can't SUBTRACT to key segment.ms because its type is not LIST."),
    (t((APPEND, "no.such.key", "1")), IC, "Can't APPEND to key no.such.key because its type is not LIST."),
    (b("", (APPEND, "log.roll.ms", "1")), IC, "Can't APPEND to key log.roll.ms because its type is not LIST."),
    # topics: name, configs, then existence (configs first, as Kafka)
    (t((SET, "retention.ms", "1"), name=""), IR, "Default topic resources are not allowed."),
    (
        t((SET, "retention.ms", "1"), name="bad/name"),
        E.INVALID_TOPIC_EXCEPTION,
        "Topic name \"bad/name\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
    ),
    (t((SET, "retention.ms", "1"), name="ghost"), E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'ghost' does not exist."),
    (
        t((SET, "retention.ms", "x"), name="ghost"),
        IC,
        f"{BAD}x for configuration retention.ms: Not a number of type LONG",
    ),
    (t((SET, "retention.msec", "1")), IC, "Unknown topic config name: retention.msec"),
    (t((SET, "retention.ms", "-2")), IC, f"{BAD}-2 for configuration retention.ms: Value must be at least -1"),
    (t((SET, "segment.bytes", "1")), IC, f"{BAD}1 for configuration segment.bytes: Value must be at least 14"),
    (t((SET, "segment.bytes", "1_000")), IC, f"{BAD}1_000 for configuration segment.bytes: Not a number of type INT"),
    (
        t((SET, "preallocate", "yes")),
        IC,
        f"{BAD}yes for configuration preallocate: Expected value to be either true or false",
    ),
    (
        t((SET, "remote.storage.enable", "true")),
        IC,
        "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.",
    ),
    # brokers: name, what may change dynamically and its values (INVALID_REQUEST: KAFKA-13609), then existence
    (b("abc", (SET, "message.max.bytes", "1")), IR, "Unable to parse broker name as a base 10 number."),
    (b("05", (SET, "message.max.bytes", "1")), IR, "Unable to parse broker name as a base 10 number."),
    (b("-1", (SET, "message.max.bytes", "1")), IR, "Invalid negative broker ID."),
    (b("7", (SET, "message.max.bytes", "1")), E.BROKER_ID_NOT_REGISTERED, "No node with id 7 found."),
    (
        b("", (SET, "num.partitions", "3"), (SET, "log.retention.hours", "1"), (SET, "log.retention.ms", "1")),
        IR,
        "Cannot update these configs dynamically: Set(log.retention.hours, num.partitions)",
    ),
    (
        b("9", (SET, "replica.lag.time.max.ms", "1")),
        IR,
        "Cannot update these configs dynamically: Set(replica.lag.time.max.ms)",
    ),
    (
        b("", (SET, "min.insync.replicas", "2x")),
        IR,
        f"{BAD}2x for configuration min.insync.replicas: Not a number of type INT",
    ),
    (
        b("101", (SET, "leader.replication.throttled.rate", "-1")),
        IR,
        f"{BAD}-1 for configuration leader.replication.throttled.rate: Value must be at least 0",
    ),
    (
        b("", (SET, "compression.type", "brotli")),
        IR,
        f"{BAD}brotli for configuration compression.type: "
        "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
    ),
]


@pytest.mark.parametrize(("resource", "code", "message"), ERRORS)
def test_errors(h: Harness, resource: AlterConfigsResource, code: Errors, message: str) -> None:
    assert h.fails(resource) == (code, message)
    assert dict(h.control.configs.items()) == {} and not h.timeline.pending


def test_duplicate_resource_fails_once_and_the_others_go_on(h: Harness) -> None:
    result = h.alter(
        t((SET, "retention.ms", "1")),
        b("", (SET, "log.retention.ms", "5")),
        t((SET, "segment.ms", "2")),
        t((SET, "segment.ms", "3")),
    )
    assert result.response == [failed(TOPIC, "orders", E.INVALID_REQUEST, "Duplicate resource."), ok(BROKER, "")]
    assert result.records == [rec(BROKER, "", "log.retention.ms", "5")]


def test_an_unknown_resource_type_is_answered_each_time(h: Harness) -> None:
    result = h.alter(res(1, "x", (SET, "a", "b")), res(1, "x", (SET, "a", "b")))
    assert result.response == [failed(1, "x", E.UNSUPPORTED_VERSION, "Unknown resource type 1.")] * 2


def test_topic_configs_are_validated_merged_with_what_is_set(h: Harness) -> None:
    h.alter(t((SET, "max.compaction.lag.ms", "100")))
    assert h.fails(t((SET, "min.compaction.lag.ms", "200"))) == (
        E.INVALID_CONFIG,
        "conflict topic config setting min.compaction.lag.ms (200) > max.compaction.lag.ms (100)",
    )
    # deleting the max in the same request makes it valid
    result = h.alter(t((SET, "min.compaction.lag.ms", "200"), (DELETE, "max.compaction.lag.ms", None)))
    assert result.response == [ok(TOPIC, "orders")]


def test_min_insync_replicas_is_not_compared_to_the_replication_factor_on_alter(h: Harness) -> None:
    assert h.alter(t((SET, "min.insync.replicas", "99"))).response == [ok(TOPIC, "orders")]


def test_a_failed_resource_drops_only_its_own_records(h: Harness) -> None:
    result = h.alter(
        t((SET, "retention.ms", "1")),
        t((SET, "retention.ms", "1"), name="ghost"),
        b("101", (SET, "min.insync.replicas", "2")),
    )
    assert result.response == [
        ok(TOPIC, "orders"),
        failed(TOPIC, "ghost", E.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'ghost' does not exist."),
        ok(BROKER, "101"),
    ]
    assert result.records == [rec(TOPIC, "orders", "retention.ms", "1"), rec(BROKER, "101", "min.insync.replicas", "2")]


def test_validate_only_answers_the_same_and_writes_nothing(h: Harness) -> None:
    request = [t((SET, "retention.ms", "1")), b("", (SET, "message.max.bytes", "5"))]
    dry = h.alter(*request, validate_only=True)
    assert dry.response == [ok(TOPIC, "orders"), ok(BROKER, "")]
    assert dry.records == []
    assert dict(h.control.configs.items()) == {} and not h.timeline.pending
    assert h.alter(*request).response == dry.response


def test_too_many_records_fail_the_whole_request(h: Harness) -> None:
    keys = [(SET, f"custom.{i}", "x") for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    assert h.fails(b("", *keys)) == (E.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")


def test_broker_resources_that_may_change(h: Harness) -> None:
    result = h.alter(
        b("", (SET, "unclean.leader.election.enable", "true"), (SET, "my.custom.setting", "x")),  # custom: accepted
        b("101", (SET, "follower.replication.throttled.rate", "1048576")),
        b(str(NODE), (SET, "min.insync.replicas", "2")),  # this node, though no broker registered it
        b("102", (DELETE, "num.partitions", None)),  # deleting a read-only config is no update
    )
    assert result.response == [ok(BROKER, ""), ok(BROKER, "101"), ok(BROKER, str(NODE)), ok(BROKER, "102")]
    assert len(result.records) == 5


# -- effective values --------------------------------------------------------------------------------------------


def test_topic_config_precedence_topic_node_cluster_static_default() -> None:
    h = Harness({"log.retention.hours": "24", "unclean.leader.election.enable": "true"})
    c = h.control
    assert c.topic_config("orders", "retention.ms") == 24 * 3_600_000
    assert c.topic_config("orders", "unclean.leader.election.enable") is True
    assert c.topic_config("orders", "min.insync.replicas") == 1  # the default
    assert c.topic_config("orders", "segment.ms") == 604800000
    h.alter(res(BROKER, "", (SET, "log.retention.ms", "3000"), (SET, "unclean.leader.election.enable", "false")))
    assert c.topic_config("orders", "retention.ms") == 3000
    assert c.topic_config("orders", "unclean.leader.election.enable") is False
    h.alter(res(BROKER, "101", (SET, "log.retention.ms", "2000")))  # another broker's: not this node's
    assert c.topic_config("orders", "retention.ms") == 3000
    h.alter(res(BROKER, str(NODE), (SET, "log.retention.ms", "1000"), (SET, "min.insync.replicas", "2")))
    assert c.topic_config("orders", "retention.ms") == 1000
    assert c.topic_config("orders", "min.insync.replicas") == 2
    h.alter(res(TOPIC, "orders", (SET, "retention.ms", "500"), (SET, "min.insync.replicas", "3")))
    assert c.topic_config("orders", "retention.ms") == 500
    assert c.topic_config("orders", "min.insync.replicas") == 3
    assert c.topic_config("payments", "retention.ms") == 1000
    h.alter(res(TOPIC, "orders", (DELETE, "retention.ms", None)))
    assert c.topic_config("orders", "retention.ms") == 1000
    with pytest.raises(KeyError, match=r"Unknown topic config name: log\.retention\.ms"):
        c.topic_config("orders", "log.retention.ms")


@pytest.mark.parametrize(
    ("static", "expected"),
    [
        ({}, 604800000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "7"}, 7),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.roll.hours": "2"}, None),  # not retention: segment.ms below
    ],
)
def test_retention_ms_from_its_broker_synonyms(static: dict[str, str], expected: int | None) -> None:
    c = Harness(static).control
    if expected is None:
        assert c.topic_config("orders", "segment.ms") == 7_200_000
    else:
        assert c.topic_config("orders", "retention.ms") == expected


def test_a_value_that_does_not_parse_is_passed_over() -> None:
    h = Harness({"min.insync.replicas": "2"})
    h.replay(rec(BROKER, "", "min.insync.replicas", "lots"))  # written by something that did not validate it
    assert h.control.topic_config("orders", "min.insync.replicas") == 2
    assert h.control.broker_config("min.insync.replicas") == 2


def test_broker_config_precedence() -> None:
    h = Harness({"min.insync.replicas": "2", "auto.leader.rebalance.enable": "false"})
    c = h.control
    assert c.broker_config("min.insync.replicas") == 2
    assert c.broker_config("auto.leader.rebalance.enable") is False
    assert c.broker_config("broker.session.timeout.ms") == 9000
    assert c.broker_config("log.retention.ms") is None  # no default, synonyms not consulted
    h.alter(res(BROKER, "", (SET, "min.insync.replicas", "3")))
    assert c.broker_config("min.insync.replicas") == 3
    assert c.broker_config("min.insync.replicas", 101) == 3
    h.alter(res(BROKER, "101", (SET, "min.insync.replicas", "4")))
    assert c.broker_config("min.insync.replicas", 101) == 4
    assert c.broker_config("min.insync.replicas", 102) == 3
    assert c.broker_config("min.insync.replicas") == 3  # this node's
    h.alter(res(BROKER, str(NODE), (SET, "leader.replication.throttled.rate", "10")))
    assert c.broker_config("leader.replication.throttled.rate") == 10
    assert (
        c.broker_config("leader.replication.throttled.rate", 101)
        == BROKER_CONFIGS["leader.replication.throttled.rate"].default
    )
    with pytest.raises(KeyError, match=r"Unknown broker config name: retention\.ms"):
        c.broker_config("retention.ms")


# -- DescribeConfigs ---------------------------------------------------------------------------------------------


def test_describe_topic_every_config_with_its_source() -> None:
    h = Harness({"log.retention.hours": "24", "log.segment.bytes": "2048"})
    h.alter(res(BROKER, "", (SET, "min.insync.replicas", "2"), (SET, "log.segment.bytes", "4096")))
    h.alter(res(BROKER, str(NODE), (SET, "compression.type", "zstd")))
    h.alter(res(TOPIC, "orders", (SET, "cleanup.policy", "compact")))
    result = h.describe(TOPIC, "orders", include_synonyms=True)
    assert result.error.code == Errors.NONE
    entries = {e.name: e for e in result.configs}
    assert sorted(entries) == sorted(TOPIC_CONFIGS)
    assert [e.name for e in result.configs] == sorted(TOPIC_CONFIGS)
    got = {n: (e.value, e.source) for n, e in entries.items()}
    assert got["cleanup.policy"] == ("compact", S.DYNAMIC_TOPIC_CONFIG)
    assert got["compression.type"] == ("zstd", S.DYNAMIC_BROKER_CONFIG)
    assert got["min.insync.replicas"] == ("2", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert got["segment.bytes"] == ("4096", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert got["retention.ms"] == ("86400000", S.STATIC_BROKER_CONFIG)
    assert got["max.message.bytes"] == ("1048588", S.DEFAULT_CONFIG)
    assert got["remote.storage.enable"] == ("false", S.DEFAULT_CONFIG)
    assert got["flush.ms"] == (str(2**63 - 1), S.DEFAULT_CONFIG)
    assert entries["cleanup.policy"].config_type == "list" and entries["retention.ms"].config_type == "long"
    assert not any(e.read_only or e.is_sensitive for e in result.configs)
    # synonyms: every level that has a value, highest precedence first
    assert entries["cleanup.policy"].synonyms == (
        ConfigSynonym("cleanup.policy", "compact", S.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.cleanup.policy", "delete", S.DEFAULT_CONFIG),
    )
    assert entries["segment.bytes"].synonyms == (
        ConfigSynonym("log.segment.bytes", "4096", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", "2048", S.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", S.DEFAULT_CONFIG),
    )
    assert entries["retention.ms"].synonyms == (
        ConfigSynonym("log.retention.hours", "24", S.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", S.DEFAULT_CONFIG),
    )
    assert entries["remote.storage.enable"].synonyms == ()  # no broker synonym
    assert all(e.documentation is None for e in result.configs)


def test_describe_topic_synonyms_order_across_all_levels() -> None:
    h = Harness({"log.retention.ms": "4", "log.retention.minutes": "3"})
    h.alter(res(BROKER, "", (SET, "log.retention.ms", "2")))
    h.alter(res(BROKER, str(NODE), (SET, "log.retention.ms", "1")))
    h.alter(res(TOPIC, "orders", (SET, "retention.ms", "0")))
    [entry] = h.describe(TOPIC, "orders", ("retention.ms",), include_synonyms=True).configs
    assert (entry.value, entry.source) == ("0", S.DYNAMIC_TOPIC_CONFIG)
    assert entry.synonyms == (
        ConfigSynonym("retention.ms", "0", S.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.retention.ms", "1", S.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.ms", "2", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("log.retention.ms", "4", S.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.minutes", "3", S.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", S.DEFAULT_CONFIG),
    )
    h.alter(res(TOPIC, "orders", (DELETE, "retention.ms", None)))
    h.alter(res(BROKER, str(NODE), (DELETE, "log.retention.ms", None)))
    [entry] = h.describe(TOPIC, "orders", ("retention.ms",), include_synonyms=True).configs
    assert (entry.value, entry.source) == ("2", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert entry.synonyms[0] == ConfigSynonym("log.retention.ms", "2", S.DYNAMIC_DEFAULT_BROKER_CONFIG)


def test_describe_topic_keys_documentation_and_errors(h: Harness) -> None:
    result = h.describe(TOPIC, "orders", ("retention.ms", "no.such.key", "segment.ms"), include_documentation=True)
    assert [(e.name, e.value, e.synonyms) for e in result.configs] == [
        ("retention.ms", "604800000", ()),
        ("segment.ms", "604800000", ()),
    ]
    assert result.configs[0].documentation == "How long messages are kept (-1: forever)."
    assert len(h.describe(TOPIC, "orders", ()).configs) == len(TOPIC_CONFIGS)  # empty keys: every config
    missing = h.describe(TOPIC, "ghost")
    assert missing.error == ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'ghost' does not exist.")
    assert missing.configs == ()
    assert h.describe(TOPIC, "").error == ApiError(
        Errors.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
    )
    assert h.describe(16, "subscription").error == ApiError(
        Errors.INVALID_REQUEST, "Unsupported resource type: CLIENT_METRICS"
    )
    assert h.describe(3, "x").error == ApiError(Errors.INVALID_REQUEST, "Unsupported resource type: UNKNOWN")


def test_describe_broker_every_config_with_source_and_read_only() -> None:
    h = Harness({"num.partitions": "6", "log.retention.ms": "9"})
    h.alter(res(BROKER, "", (SET, "min.insync.replicas", "2"), (SET, "secret.thing", "hunter2")))
    h.alter(res(BROKER, "101", (SET, "min.insync.replicas", "3"), (SET, "message.max.bytes", "1000")))
    result = h.describe(BROKER, "101", include_synonyms=True)
    entries = {e.name: e for e in result.configs}
    assert sorted(entries) == sorted([*BROKER_CONFIGS, "secret.thing"])
    got = {n: (e.value, e.source, e.read_only) for n, e in entries.items()}
    assert got["min.insync.replicas"] == ("3", S.DYNAMIC_BROKER_CONFIG, False)
    assert got["message.max.bytes"] == ("1000", S.DYNAMIC_BROKER_CONFIG, False)
    assert got["num.partitions"] == ("6", S.STATIC_BROKER_CONFIG, True)
    assert got["broker.session.timeout.ms"] == ("9000", S.DEFAULT_CONFIG, True)
    assert got["log.retention.minutes"] == (None, S.DEFAULT_CONFIG, True)
    assert got["unclean.leader.election.enable"] == ("false", S.DEFAULT_CONFIG, False)
    assert entries["min.insync.replicas"].synonyms == (
        ConfigSynonym("min.insync.replicas", "3", S.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("min.insync.replicas", "2", S.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("min.insync.replicas", "1", S.DEFAULT_CONFIG),
    )
    # a custom config: unknown type, so sensitive and hidden, as Kafka shows it
    secret = entries["secret.thing"]
    assert (secret.value, secret.is_sensitive, secret.config_type) == (None, True, "unknown")
    assert secret.source == S.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert secret.synonyms == (ConfigSynonym("secret.thing", None, S.DYNAMIC_DEFAULT_BROKER_CONFIG),)
    # log.retention.hours: Kafka drops synonyms of higher precedence with another name (log.retention.ms here)
    assert entries["log.retention.hours"].synonyms == (ConfigSynonym("log.retention.hours", "168", S.DEFAULT_CONFIG),)
    assert entries["log.retention.ms"].synonyms == (
        ConfigSynonym("log.retention.ms", "9", S.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", S.DEFAULT_CONFIG),
    )
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == ("9", S.STATIC_BROKER_CONFIG)


def test_describe_cluster_default_shows_only_what_is_set_there() -> None:
    h = Harness({"num.partitions": "6"})
    h.alter(res(BROKER, "", (SET, "min.insync.replicas", "2")))
    h.alter(res(BROKER, str(NODE), (SET, "min.insync.replicas", "3")))
    [entry] = h.describe(BROKER, "", include_synonyms=True).configs
    assert (entry.name, entry.value, entry.source) == ("min.insync.replicas", "2", S.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert entry.synonyms == (ConfigSynonym("min.insync.replicas", "2", S.DYNAMIC_DEFAULT_BROKER_CONFIG),)


def test_describe_broker_errors(h: Harness) -> None:
    assert h.describe(BROKER, "x1").error == ApiError(
        Errors.INVALID_REQUEST, "Broker id must be an integer, but it is: x1"
    )
    assert h.describe(BROKER, "7").error == ApiError(Errors.BROKER_ID_NOT_REGISTERED, "No node with id 7 found.")
    assert h.describe(BROKER, str(NODE)).error.code == Errors.NONE


# -- replay, deletion and the timeline ---------------------------------------------------------------------------


def test_delete_topic_configs_forgets_the_topic(h: Harness) -> None:
    h.alter(res(TOPIC, "orders", (SET, "retention.ms", "5")), res(TOPIC, "payments", (SET, "retention.ms", "6")))
    h.timeline.offset = 100
    h.control.delete_topic_configs("orders")
    h.control.delete_topic_configs("never-configured")
    h.timeline.offset = None
    assert h.control.topic_config("orders", "retention.ms") == 604800000
    assert h.control.configs.committed()[(TOPIC, "orders")] == (("retention.ms", "5"),)  # until committed
    h.timeline.commit_through(100)
    assert (TOPIC, "orders") not in h.control.configs.committed()
    assert h.configs(TOPIC, "payments") == {"retention.ms": "6"}


def test_uncommitted_changes_are_read_latest_but_described_committed_and_revert(h: Harness) -> None:
    h.alter(res(TOPIC, "orders", (SET, "retention.ms", "5")))
    h.alter(res(TOPIC, "orders", (SET, "retention.ms", "6"), (SET, "segment.ms", "7")), commit=False)
    assert h.control.topic_config("orders", "retention.ms") == 6  # the write path sees the latest state
    committed = {e.name: e.value for e in h.describe(TOPIC, "orders", ("retention.ms", "segment.ms")).configs}
    assert committed == {"retention.ms": "5", "segment.ms": "604800000"}
    latest = h.describe(TOPIC, "orders", ("retention.ms", "segment.ms"), committed=False).configs
    assert {e.name: e.value for e in latest} == {"retention.ms": "6", "segment.ms": "7"}
    # the next request is generated against the latest state
    again = h.alter(res(TOPIC, "orders", (SET, "retention.ms", "6")), commit=False)
    assert again.records == []
    h.timeline.revert()  # leadership lost: the uncommitted changes go
    assert h.control.topic_config("orders", "retention.ms") == 5
    assert h.configs(TOPIC, "orders") == {"retention.ms": "5"}


def test_a_standby_replays_committed_records_directly() -> None:
    timeline = Timeline()
    control = ConfigControl(timeline, node_id=NODE)
    control.replay(rec(BROKER, "", "min.insync.replicas", "2"))
    control.replay(rec(BROKER, "", "log.retention.ms", "10"))
    control.replay(rec(BROKER, "", "min.insync.replicas", None))
    assert control.configs.committed() == {(BROKER, ""): (("log.retention.ms", "10"),)}
    assert not timeline.pending
    assert control.topic_config("anything", "retention.ms") == 10  # the default existence check admits all
