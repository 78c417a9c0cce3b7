"""ConfigControl.legacy_alter_configs, Kafka's old AlterConfigs: a resource's dynamic configs become exactly the
request's (a key not named is removed), checked as incremental SETs are, with Kafka's codes per resource;
validate_only answers the same and writes nothing."""

from __future__ import annotations

import pytest
from test_config_control import Harness as ConfigHarness

from controller.records import ConfigRecord
from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource, ConfigResourceResult
from controller.results import ApiError
from quorum.errors import Errors

TOPIC, BROKER = 2, 4


class Harness(ConfigHarness):
    """IncrementalAlterConfigs' harness (its ConfigControl, replay through the timeline), with the legacy call."""

    def legacy(self, *resources: AlterConfigsResource, validate_only: bool = False):
        result = self.control.legacy_alter_configs(list(resources), validate_only)
        self.replay(*result.records)
        return result

    def incremental_set(self, resource_type: int, name: str, **configs: str) -> None:
        result = self.control.incremental_alter_configs([res(resource_type, name, **configs)], False)
        assert not any(r.error.failed for r in result.response)
        self.replay(*result.records)


def res(resource_type: int, name: str, **configs: str | None) -> AlterConfigsResource:
    """A legacy resource: names with '_' for '.', each config's op unused (SET)."""
    return AlterConfigsResource(
        resource_type,
        name,
        tuple(AlterableConfig(k.replace("_", "."), AlterConfigOp.SET, v) for k, v in configs.items()),
    )


def rec(resource_type: int, name: str, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=value)


def failed(resource_type: int, name: str, code: Errors, message: str) -> ConfigResourceResult:
    return ConfigResourceResult(resource_type, name, ApiError(code, message))


@pytest.fixture
def h() -> Harness:
    h = Harness()
    h.incremental_set(TOPIC, "orders", retention_ms="1000", cleanup_policy="compact")
    h.incremental_set(BROKER, "", log_retention_ms="7200000", log_flush_interval_ms="5000")
    return h


def test_a_config_not_named_is_removed_and_one_named_is_set(h: Harness) -> None:
    result = h.legacy(res(TOPIC, "orders", retention_ms="2000", min_insync_replicas="2"))
    assert result.response == [ConfigResourceResult(TOPIC, "orders")]
    assert result.records == [
        rec(TOPIC, "orders", "retention.ms", "2000"),
        rec(TOPIC, "orders", "min.insync.replicas", "2"),
        rec(TOPIC, "orders", "cleanup.policy", None),
    ]
    assert h.configs(TOPIC, "orders") == {"retention.ms": "2000", "min.insync.replicas": "2"}


def test_an_unchanged_topic_key_writes_nothing_and_an_empty_request_clears_the_resource(h: Harness) -> None:
    result = h.legacy(res(TOPIC, "orders", retention_ms="1000", cleanup_policy="compact"))
    assert result.records == [] and result.response == [ConfigResourceResult(TOPIC, "orders")]
    assert h.legacy(res(TOPIC, "orders")).records == [
        rec(TOPIC, "orders", "cleanup.policy", None),
        rec(TOPIC, "orders", "retention.ms", None),
    ]
    assert h.configs(TOPIC, "orders") == {}


def test_broker_resources_get_a_record_for_every_key_and_lose_the_others(h: Harness) -> None:
    # KAFKA-14136: brokers reload on every broker record, so even an unchanged key is written
    result = h.legacy(res(BROKER, "", log_retention_ms="7200000"))
    assert result.records == [
        rec(BROKER, "", "log.retention.ms", "7200000"),
        rec(BROKER, "", "log.flush.interval.ms", None),
    ]
    assert h.configs(BROKER, "") == {"log.retention.ms": "7200000"}


def test_validate_only_answers_the_same_and_writes_nothing(h: Harness) -> None:
    request = [res(TOPIC, "orders", retention_ms="5"), res(TOPIC, "ghost", retention_ms="5")]
    real_answer = h.control.legacy_alter_configs(request, False).response
    dry = h.legacy(*request, validate_only=True)
    assert dry.records == [] and dry.response == real_answer
    assert [r.error.code for r in dry.response] == [Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION]
    assert h.configs(TOPIC, "orders") == {"retention.ms": "1000", "cleanup.policy": "compact"}


@pytest.mark.parametrize(
    ("resource", "code", "message"),
    [
        (res(TOPIC, "orders", no_such_config="1"), Errors.INVALID_CONFIG, "Unknown topic config name: no.such.config"),
        (res(TOPIC, "orders", retention_ms="soon"), Errors.INVALID_CONFIG, "retention.ms"),
        (res(TOPIC, "ghost", retention_ms="1"), Errors.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'ghost' does not exist."),
        (res(TOPIC, "", retention_ms="1"), Errors.INVALID_REQUEST, "Default topic resources are not allowed."),
        (
            res(TOPIC, "orders", retention_ms=None),
            Errors.INVALID_REQUEST,
            "Null value not supported for : retention.ms",
        ),
        (res(BROKER, "1", num_partitions="3"), Errors.INVALID_REQUEST, "Cannot update these configs dynamically"),
        (res(BROKER, "999", log_retention_ms="1"), Errors.BROKER_ID_NOT_REGISTERED, "No node with id 999 found."),
        (res(BROKER, "x", log_retention_ms="1"), Errors.INVALID_REQUEST, "Unable to parse broker name"),
        (res(8, "1", kafka_server="DEBUG"), Errors.INVALID_REQUEST, "Unknown resource type BROKER_LOGGER"),
    ],
)
def test_errors_per_resource(h: Harness, resource: AlterConfigsResource, code: Errors, message: str) -> None:
    """Each failure is that resource's alone (the valid resource beside it is written) and removes nothing."""
    before = h.configs(TOPIC, "orders")
    result = h.legacy(resource, res(TOPIC, "payments", retention_ms="3000"))
    [bad, good] = result.response
    assert (bad.resource_type, bad.resource_name, bad.error.code) == (
        resource.resource_type,
        resource.resource_name,
        code,
    )
    assert message in (bad.error.message or "")
    assert not good.error.failed and result.records == [rec(TOPIC, "payments", "retention.ms", "3000")]
    assert h.configs(TOPIC, "orders") == before


def test_request_level_checks_as_kafkas_controller(h: Harness) -> None:
    """An unknown resource type is UNSUPPORTED_VERSION each time; a resource named twice is answered once, INVALID_
    REQUEST, and not applied; a key named twice is INVALID_REQUEST (the forwarding broker's check)."""
    twice = res(TOPIC, "orders", retention_ms="9")
    result = h.legacy(res(99, "x"), twice, res(99, "x"), twice)
    assert result.response == [
        failed(99, "x", Errors.UNSUPPORTED_VERSION, "Unknown resource type 99."),
        failed(TOPIC, "orders", Errors.INVALID_REQUEST, "Duplicate resource."),
        failed(99, "x", Errors.UNSUPPORTED_VERSION, "Unknown resource type 99."),
    ]
    assert result.records == []
    keys = AlterConfigsResource(TOPIC, "orders", (AlterableConfig("retention.ms", 0, "1"),) * 2)
    [answer] = h.legacy(keys).response
    assert answer.error == ApiError(Errors.INVALID_REQUEST, "Error due to duplicate config keys: retention.ms")
