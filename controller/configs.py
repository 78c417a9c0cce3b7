"""Topic configurations: Kafka 4.0's topic-level configs (``LogConfig``/``TopicConfig``) with their types, defaults
and validators, so CreateTopics rejects exactly what Kafka's controller rejects, with Kafka's messages."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from quorum.errors import Errors, KafkaError

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC, as written in ConfigRecord.ResourceType
LONG_MAX = 2**63 - 1
_INTEGER = re.compile(r"[+-]?\d+")

# ConfigSource ids of DescribeConfigs / CreateTopics responses.
DYNAMIC_TOPIC_CONFIG = 1
DEFAULT_CONFIG = 5


class InvalidConfigError(KafkaError):
    code = Errors.INVALID_CONFIG


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: str  # int, long, double, boolean, string, list
    default: Any
    check: Callable[[Any], str | None] | None = None  # returns what is wrong, or None
    sensitive: bool = False

    def parse(self, raw: str) -> Any:
        """Parse and validate ``raw`` as Kafka's ConfigDef does; raises InvalidConfigError naming name and value."""
        text = raw.strip()
        try:
            value: Any
            if self.type in ("int", "long"):
                if not _INTEGER.fullmatch(text):  # Java's parseInt/parseLong: no "1_000", no "1.0"
                    raise ValueError
                value = int(text)
                bound = 2**31 if self.type == "int" else 2**63
                if not -bound <= value < bound:
                    raise ValueError
            elif self.type == "double":
                value = float(text)
            elif self.type == "boolean":
                if text.lower() not in ("true", "false"):
                    raise ValueError
                value = text.lower() == "true"
            elif self.type == "list":
                value = [part.strip() for part in text.split(",")] if text else []
            else:
                value = text  # Kafka trims strings too
        except ValueError:
            kind = {"int": "INT", "long": "LONG", "double": "DOUBLE", "boolean": "BOOLEAN"}.get(self.type, self.type)
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {self.name}: Expected value to be either true or false"
                if kind == "BOOLEAN"
                else f"Invalid value {raw} for configuration {self.name}: Not a number of type {kind}"
            ) from None
        problem = self.check(value) if self.check else None
        if problem:
            raise InvalidConfigError(f"Invalid value {raw} for configuration {self.name}: {problem}")
        return value


def at_least(minimum: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= minimum else f"Value must be at least {minimum}"


def between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: (
        None if lo <= v <= hi else f"Value must be no more than {hi}" if v > hi else f"Value must be at least {lo}"
    )


def one_of(*choices: str, case_insensitive: bool = False) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        ok = v.lower() in {c.lower() for c in choices} if case_insensitive else v in choices
        return None if ok else f"String must be one of: {', '.join(choices)}"

    return check


def subset_of(*choices: str) -> Callable[[Any], str | None]:
    def check(values: list[str]) -> str | None:
        if not values:
            return f"Empty list not allowed; valid values: [{', '.join(choices)}]"
        bad = [v for v in values if v not in choices]
        return f"Invalid value {bad[0]}; valid values: [{', '.join(choices)}]" if bad else None

    return check


def _throttled_replicas(values: list[str]) -> str | None:
    if values == ["*"]:
        return None
    for item in values:
        partition, colon, broker = item.partition(":")
        if not colon or not partition.strip().isdigit() or not broker.strip().isdigit():
            return "Value should be either '*' or a comma-separated list of [partitionId]:[brokerId] pairs"
    return None


def _gzip_level(v: int) -> str | None:
    return None if v == -1 or 1 <= v <= 9 else "Value must be -1 or in [1, 9]"


TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in (
        ConfigDef("cleanup.policy", "list", "delete", subset_of("compact", "delete")),
        ConfigDef("compression.gzip.level", "int", -1, _gzip_level),
        ConfigDef("compression.lz4.level", "int", 9, between(1, 17)),
        ConfigDef(
            "compression.type",
            "string",
            "producer",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer", case_insensitive=True),
        ),
        ConfigDef("compression.zstd.level", "int", 3, between(-131072, 22)),
        ConfigDef("delete.retention.ms", "long", 86400000, at_least(0)),
        ConfigDef("file.delete.delay.ms", "long", 60000, at_least(0)),
        ConfigDef("flush.messages", "long", LONG_MAX, at_least(1)),
        ConfigDef("flush.ms", "long", LONG_MAX, at_least(0)),
        ConfigDef("follower.replication.throttled.replicas", "list", "", _throttled_replicas),
        ConfigDef("index.interval.bytes", "int", 4096, at_least(0)),
        ConfigDef("leader.replication.throttled.replicas", "list", "", _throttled_replicas),
        ConfigDef("local.retention.bytes", "long", -2, at_least(-2)),
        ConfigDef("local.retention.ms", "long", -2, at_least(-2)),
        ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, at_least(1)),
        ConfigDef("max.message.bytes", "int", 1048588, at_least(0)),
        ConfigDef("message.timestamp.after.max.ms", "long", LONG_MAX, at_least(0)),
        ConfigDef("message.timestamp.before.max.ms", "long", LONG_MAX, at_least(0)),
        ConfigDef("message.timestamp.type", "string", "CreateTime", one_of("CreateTime", "LogAppendTime")),
        ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, between(0, 1)),
        ConfigDef("min.compaction.lag.ms", "long", 0, at_least(0)),
        ConfigDef("min.insync.replicas", "int", 1, at_least(1)),
        ConfigDef("preallocate", "boolean", False),
        ConfigDef("remote.log.copy.disable", "boolean", False),
        ConfigDef("remote.log.delete.on.disable", "boolean", False),
        ConfigDef("remote.storage.enable", "boolean", False),
        ConfigDef("retention.bytes", "long", -1),
        ConfigDef("retention.ms", "long", 604800000, at_least(-1)),
        ConfigDef("segment.bytes", "int", 1073741824, at_least(14)),
        ConfigDef("segment.index.bytes", "int", 10485760, at_least(4)),
        ConfigDef("segment.jitter.ms", "long", 0, at_least(0)),
        ConfigDef("segment.ms", "long", 604800000, at_least(1)),
        ConfigDef("unclean.leader.election.enable", "boolean", False),
    )
}


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def parse_topic_configs(configs: dict[str, str]) -> dict[str, Any]:
    """Check each config's name, type and range, and the rules between them that Kafka's LogConfig.validate
    enforces (min.compaction.lag.ms <= max.compaction.lag.ms). Raises InvalidConfigError naming config and value."""
    parsed: dict[str, Any] = {}
    for name, raw in configs.items():
        definition = TOPIC_CONFIGS.get(name)
        if definition is None:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        parsed[name] = definition.parse(raw)
    low = parsed.get("min.compaction.lag.ms", TOPIC_CONFIGS["min.compaction.lag.ms"].default)
    high = parsed.get("max.compaction.lag.ms", TOPIC_CONFIGS["max.compaction.lag.ms"].default)
    if low > high:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({low}) > max.compaction.lag.ms ({high})"
        )
    return parsed


def check_min_insync_replicas(parsed: dict[str, Any], replication_factor: int) -> None:
    """min.insync.replicas above the replication factor makes a topic that no acks=all write can reach: refused
    at creation."""
    value = parsed.get("min.insync.replicas", TOPIC_CONFIGS["min.insync.replicas"].default)
    if value > replication_factor:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration min.insync.replicas: it exceeds the replication factor "
            f"{replication_factor}, so no write with acks=all could ever succeed"
        )


_DEFAULTS = tuple((name, _render(TOPIC_CONFIGS[name].default), DEFAULT_CONFIG) for name in sorted(TOPIC_CONFIGS))


def effective_topic_configs(configs: dict[str, str]) -> tuple[tuple[str, str, int], ...]:
    """``(name, value, config source)`` for every topic config, sorted by name, as CreateTopics v5+ reports."""
    if not configs:
        return _DEFAULTS
    return tuple(
        (name, configs[name], DYNAMIC_TOPIC_CONFIG) if name in configs else default
        for default in _DEFAULTS
        for name in (default[0],)
    )
