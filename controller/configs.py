"""Topic and broker configurations: Kafka 4.0's topic-level configs (``LogConfig``/``TopicConfig``) and the broker
configs this product uses or that back a topic config, with their types, defaults and validators, so CreateTopics and
IncrementalAlterConfigs reject exactly what Kafka rejects, with Kafka's messages; which broker configs Kafka lets you
change at run time (``DynamicBrokerConfig``); and the broker configs each topic config falls back to
(``ServerTopicConfigSynonyms``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from quorum.errors import Errors, KafkaError

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC, as written in ConfigRecord.ResourceType
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER: resource name a broker id, or "" for the cluster-wide default
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
    dynamic: bool = False  # broker configs: changeable at run time (Kafka's DynamicBrokerConfig.AllDynamicConfigs)

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


def render_value(value: Any) -> str:
    """A parsed value as Kafka's ConfigDef.convertToString writes it."""
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


_DEFAULTS = tuple((name, render_value(TOPIC_CONFIGS[name].default), DEFAULT_CONFIG) for name in sorted(TOPIC_CONFIGS))


def effective_topic_configs(configs: dict[str, str]) -> tuple[tuple[str, str, int], ...]:
    """``(name, value, config source)`` for every topic config, sorted by name, as CreateTopics v5+ reports."""
    if not configs:
        return _DEFAULTS
    return tuple(
        (name, configs[name], DYNAMIC_TOPIC_CONFIG) if name in configs else default
        for default in _DEFAULTS
        for name in (default[0],)
    )


def check_remote_storage(parsed: dict[str, Any]) -> None:
    """Kafka's LogConfig.validate with tiered storage disabled cluster-wide (this product has none)."""
    if parsed.get("remote.storage.enable"):
        raise InvalidConfigError(
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage."
        )


# -- broker configs ----------------------------------------------------------------------------------------------


def _broker(name: str, type_: str, default: Any, check: Callable[[Any], str | None] | None = None) -> ConfigDef:
    return ConfigDef(name, type_, default, check)


def _dynamic(name: str, type_: str, default: Any, check: Callable[[Any], str | None] | None = None) -> ConfigDef:
    return ConfigDef(name, type_, default, check, dynamic=True)


def _same_as_topic(name: str) -> ConfigDef:
    return replace(TOPIC_CONFIGS[name], dynamic=True)


# Kafka 4.0's definitions (KafkaConfig, ServerLogConfigs, CleanerConfig, ReplicationConfigs, QuotaConfig). Dynamic:
# the first broker synonym of every topic config (DynamicLogConfig) and the replication throttle rates; the
# alternative units (log.retention.hours, log.roll.hours, ...) and everything else are read-only.
BROKER_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in (
        _broker("auto.leader.rebalance.enable", "boolean", True),
        _broker("broker.session.timeout.ms", "int", 9000),
        _same_as_topic("compression.gzip.level"),
        _same_as_topic("compression.lz4.level"),
        _same_as_topic("compression.type"),
        _same_as_topic("compression.zstd.level"),
        _broker("default.replication.factor", "int", 1),
        _broker("delete.topic.enable", "boolean", True),
        _dynamic("follower.replication.throttled.rate", "long", LONG_MAX, at_least(0)),
        _broker("leader.imbalance.check.interval.seconds", "long", 300, at_least(1)),
        _broker("leader.imbalance.per.broker.percentage", "int", 10),
        _dynamic("leader.replication.throttled.rate", "long", LONG_MAX, at_least(0)),
        _dynamic("log.cleaner.delete.retention.ms", "long", 86400000, at_least(0)),
        _dynamic("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, at_least(1)),
        _dynamic("log.cleaner.min.cleanable.ratio", "double", 0.5, between(0, 1)),
        _dynamic("log.cleaner.min.compaction.lag.ms", "long", 0, at_least(0)),
        _dynamic("log.cleanup.policy", "list", "delete", subset_of("compact", "delete")),
        _dynamic("log.flush.interval.messages", "long", LONG_MAX, at_least(1)),
        _dynamic("log.flush.interval.ms", "long", None),
        _broker("log.flush.scheduler.interval.ms", "long", LONG_MAX),
        _dynamic("log.index.interval.bytes", "int", 4096, at_least(0)),
        _dynamic("log.index.size.max.bytes", "int", 10485760, at_least(4)),
        _dynamic("log.local.retention.bytes", "long", -2, at_least(-2)),
        _dynamic("log.local.retention.ms", "long", -2, at_least(-2)),
        _dynamic("log.message.timestamp.after.max.ms", "long", LONG_MAX, at_least(0)),
        _dynamic("log.message.timestamp.before.max.ms", "long", LONG_MAX, at_least(0)),
        _dynamic("log.message.timestamp.type", "string", "CreateTime", one_of("CreateTime", "LogAppendTime")),
        _dynamic("log.preallocate", "boolean", False),
        _dynamic("log.retention.bytes", "long", -1),
        _broker("log.retention.hours", "int", 168),
        _broker("log.retention.minutes", "int", None),
        _dynamic("log.retention.ms", "long", None),
        _broker("log.roll.hours", "int", 168, at_least(1)),
        _broker("log.roll.jitter.hours", "int", 0, at_least(0)),
        _dynamic("log.roll.jitter.ms", "long", None),
        _dynamic("log.roll.ms", "long", None),
        _dynamic("log.segment.bytes", "int", 1073741824, at_least(14)),
        _dynamic("log.segment.delete.delay.ms", "long", 60000, at_least(0)),
        _dynamic("message.max.bytes", "int", 1048588, at_least(0)),
        _same_as_topic("min.insync.replicas"),
        _broker("num.partitions", "int", 1, at_least(1)),
        # Kafka's intra-broker (log dir) move throttle: stored and cleared as Kafka's tools do; brokers here have no
        # log dirs to move between, so nothing reads it.
        _dynamic("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX, at_least(0)),
        _broker("replica.lag.time.max.ms", "long", 30000),
        _same_as_topic("unclean.leader.election.enable"),
    )
}

_MINUTE_MS = 60_000
_HOUR_MS = 3_600_000

# ServerTopicConfigSynonyms: topic config -> the broker configs it falls back to, in precedence order, each with the
# factor that turns its unit into the topic config's (log.retention.hours=1 is retention.ms=3600000).
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    "cleanup.policy": (("log.cleanup.policy", 1),),
    "compression.gzip.level": (("compression.gzip.level", 1),),
    "compression.lz4.level": (("compression.lz4.level", 1),),
    "compression.type": (("compression.type", 1),),
    "compression.zstd.level": (("compression.zstd.level", 1),),
    "delete.retention.ms": (("log.cleaner.delete.retention.ms", 1),),
    "file.delete.delay.ms": (("log.segment.delete.delay.ms", 1),),
    "flush.messages": (("log.flush.interval.messages", 1),),
    "flush.ms": (("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)),
    "index.interval.bytes": (("log.index.interval.bytes", 1),),
    "local.retention.bytes": (("log.local.retention.bytes", 1),),
    "local.retention.ms": (("log.local.retention.ms", 1),),
    "max.compaction.lag.ms": (("log.cleaner.max.compaction.lag.ms", 1),),
    "max.message.bytes": (("message.max.bytes", 1),),
    "message.timestamp.after.max.ms": (("log.message.timestamp.after.max.ms", 1),),
    "message.timestamp.before.max.ms": (("log.message.timestamp.before.max.ms", 1),),
    "message.timestamp.type": (("log.message.timestamp.type", 1),),
    "min.cleanable.dirty.ratio": (("log.cleaner.min.cleanable.ratio", 1),),
    "min.compaction.lag.ms": (("log.cleaner.min.compaction.lag.ms", 1),),
    "min.insync.replicas": (("min.insync.replicas", 1),),
    "preallocate": (("log.preallocate", 1),),
    "retention.bytes": (("log.retention.bytes", 1),),
    "retention.ms": (("log.retention.ms", 1), ("log.retention.minutes", _MINUTE_MS), ("log.retention.hours", _HOUR_MS)),
    "segment.bytes": (("log.segment.bytes", 1),),
    "segment.index.bytes": (("log.index.size.max.bytes", 1),),
    "segment.jitter.ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "unclean.leader.election.enable": (("unclean.leader.election.enable", 1),),
}

_BROKER_SYNONYM_GROUPS = (
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
)


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the broker configs that set the same thing as ``name``,
    in precedence order (``name`` among them)."""
    if name == "log.flush.interval.ms":  # log.flush.scheduler.interval.ms is its fallback, not the reverse
        return ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")
    return next((group for group in _BROKER_SYNONYM_GROUPS if name in group), (name,))


# One line per config for DescribeConfigs' documentation (topic and broker configs; a shared name shares its line).
CONFIG_DOCS: dict[str, str] = {
    "auto.leader.rebalance.enable": "Move leadership back to preferred replicas when leaders are out of balance.",
    "broker.session.timeout.ms": "How long a broker may go without a heartbeat before it is fenced.",
    "cleanup.policy": "What happens to old segments: delete them, compact them, or both.",
    "compression.gzip.level": "The gzip level used when compression.type is gzip.",
    "compression.lz4.level": "The lz4 level used when compression.type is lz4.",
    "compression.type": "The compression of stored batches; producer keeps the producer's own.",
    "compression.zstd.level": "The zstd level used when compression.type is zstd.",
    "default.replication.factor": "The replication factor of a topic created without one.",
    "delete.retention.ms": "How long delete tombstones are kept in a compacted topic.",
    "delete.topic.enable": "Whether topics may be deleted.",
    "file.delete.delay.ms": "How long a removed segment waits before its file is deleted.",
    "flush.messages": "Force an fsync after this many messages.",
    "flush.ms": "Force an fsync after this many milliseconds.",
    "follower.replication.throttled.rate": "Bytes per second a follower may fetch for throttled replicas.",
    "follower.replication.throttled.replicas": "Replicas (partition:broker, or *) whose fetches are throttled.",
    "index.interval.bytes": "How many bytes lie between two offset index entries.",
    "leader.imbalance.check.interval.seconds": "How often the controller checks leader balance.",
    "leader.imbalance.per.broker.percentage": "The share of misplaced leaders per broker that triggers a rebalance.",
    "leader.replication.throttled.rate": "Bytes per second a leader may send for throttled replicas.",
    "replica.alter.log.dirs.io.max.bytes.per.second": "Bytes per second a log dir move may copy (no effect here).",
    "leader.replication.throttled.replicas": "Replicas (partition:broker, or *) whose leader sends are throttled.",
    "local.retention.bytes": "Bytes kept locally when tiered storage is on (-2: as retention.bytes).",
    "local.retention.ms": "Milliseconds kept locally when tiered storage is on (-2: as retention.ms).",
    "log.cleaner.delete.retention.ms": "The default delete.retention.ms.",
    "log.cleaner.max.compaction.lag.ms": "The default max.compaction.lag.ms.",
    "log.cleaner.min.cleanable.ratio": "The default min.cleanable.dirty.ratio.",
    "log.cleaner.min.compaction.lag.ms": "The default min.compaction.lag.ms.",
    "log.cleanup.policy": "The default cleanup.policy.",
    "log.flush.interval.messages": "The default flush.messages.",
    "log.flush.interval.ms": "The default flush.ms; unset: log.flush.scheduler.interval.ms.",
    "log.flush.scheduler.interval.ms": "How often the flusher checks for logs to fsync.",
    "log.index.interval.bytes": "The default index.interval.bytes.",
    "log.index.size.max.bytes": "The default segment.index.bytes.",
    "log.local.retention.bytes": "The default local.retention.bytes.",
    "log.local.retention.ms": "The default local.retention.ms.",
    "log.message.timestamp.after.max.ms": "The default message.timestamp.after.max.ms.",
    "log.message.timestamp.before.max.ms": "The default message.timestamp.before.max.ms.",
    "log.message.timestamp.type": "The default message.timestamp.type.",
    "log.preallocate": "The default preallocate.",
    "log.retention.bytes": "The default retention.bytes.",
    "log.retention.hours": "The default retention.ms, in hours; used when neither ms nor minutes is set.",
    "log.retention.minutes": "The default retention.ms, in minutes; used when log.retention.ms is not set.",
    "log.retention.ms": "The default retention.ms.",
    "log.roll.hours": "The default segment.ms, in hours; used when log.roll.ms is not set.",
    "log.roll.jitter.hours": "The default segment.jitter.ms, in hours; used when log.roll.jitter.ms is not set.",
    "log.roll.jitter.ms": "The default segment.jitter.ms.",
    "log.roll.ms": "The default segment.ms.",
    "log.segment.bytes": "The default segment.bytes.",
    "log.segment.delete.delay.ms": "The default file.delete.delay.ms.",
    "max.compaction.lag.ms": "The longest a message may stay uncompacted.",
    "max.message.bytes": "The largest record batch the topic accepts.",
    "message.max.bytes": "The default max.message.bytes.",
    "message.timestamp.after.max.ms": "How far a message timestamp may lie in the future.",
    "message.timestamp.before.max.ms": "How far a message timestamp may lie in the past.",
    "message.timestamp.type": "Whether message timestamps are the producer's (CreateTime) or the broker's.",
    "min.cleanable.dirty.ratio": "The dirty share of a log at which the cleaner compacts it.",
    "min.compaction.lag.ms": "The shortest a message stays uncompacted.",
    "min.insync.replicas": "The fewest in-sync replicas an acks=all write needs.",
    "num.partitions": "The partition count of a topic created without one.",
    "preallocate": "Whether a new segment's file is preallocated.",
    "remote.log.copy.disable": "Stop copying segments to tiered storage, keeping what is there.",
    "remote.log.delete.on.disable": "Delete tiered data when tiered storage is turned off.",
    "remote.storage.enable": "Whether the topic uses tiered storage.",
    "replica.lag.time.max.ms": "How long a follower may lag before it leaves the ISR.",
    "retention.bytes": "The most bytes a partition keeps before old segments go (-1: no limit).",
    "retention.ms": "How long messages are kept (-1: forever).",
    "segment.bytes": "The size at which a segment is rolled.",
    "segment.index.bytes": "The size of a segment's offset index.",
    "segment.jitter.ms": "The most random jitter subtracted from segment.ms.",
    "segment.ms": "The age at which a segment is rolled even if not full.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become leader, losing data.",
}
