"""CreateTopics conformance: one row per rule of Kafka's controller (ControllerApis + ReplicationControlManager),
with the exact error code and a message that names the field or value, each row run for real and validate-only."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from ctl_helpers import SharedLog, active_cluster, by_name

from controller.configs import DYNAMIC_TOPIC_CONFIG, TOPIC_CONFIGS
from controller.records import ConfigRecord, PartitionRecord, TopicRecord
from controller.replication_control import NewTopic
from quorum.errors import Errors

OK = Errors.NONE
E = Errors

# The default cluster: three unfenced brokers on three racks, and a fenced one (registered, so it may follow).
DEFAULT_BROKERS = [(1, "a", False), (2, "b", False), (3, "c", False), (4, "a", True)]
ALL_FENCED = [(1, "a", True), (2, "b", True)]
EXISTING = [NewTopic("existing", 1, 1), NewTopic("a.b", 1, 1), NewTopic("x_y", 1, 1)]
NUM_PARTITIONS = 3  # num.partitions of the controller under test
DEFAULT_RF = 2  # default.replication.factor


@dataclass(frozen=True)
class Expect:
    name: str
    code: Errors
    fragments: tuple[str, ...] = ()  # the message must contain each
    partitions: int | None = None
    replication_factor: int | None = None


def expect(name: str, code: Errors, *fragments: str, partitions: int | None = None, rf: int | None = None) -> Expect:
    return Expect(name, code, fragments, partitions, rf)


def row(id_: str, topics: list[NewTopic], *expected: Expect, cluster: str = "default"):
    return pytest.param(topics, list(expected), cluster, id=id_)


def t(name: str = "t", partitions: int = -1, rf: int = -1, assignments=(), **configs: str | None) -> NewTopic:
    """A NewTopic; configs as keyword arguments with '_' for '.' (retention_ms=...)."""
    return NewTopic(
        name, partitions, rf, tuple(assignments), tuple((k.replace("_", "."), v) for k, v in configs.items())
    )


def cfg(name: str, pairs: list[tuple[str, str | None]], partitions: int = -1, rf: int = -1, assignments=()) -> NewTopic:
    return NewTopic(name, partitions, rf, tuple(assignments), tuple(pairs))


TABLE = [
    # -- names (Topic.validate) -> 17 ----------------------------------------------------------------------------
    row("name-one-char", [t("a")], expect("a", OK)),
    row("name-every-legal-char", [t("Az09._-")], expect("Az09._-", OK)),
    row("name-249-chars", [t("n" * 249)], expect("n" * 249, OK)),
    row("name-empty", [t("")], expect("", E.INVALID_TOPIC_EXCEPTION, "empty")),
    row("name-dot", [t(".")], expect(".", E.INVALID_TOPIC_EXCEPTION, '"."')),
    row("name-dotdot", [t("..")], expect("..", E.INVALID_TOPIC_EXCEPTION, '".."')),
    row("name-250-chars", [t("n" * 250)], expect("n" * 250, E.INVALID_TOPIC_EXCEPTION, "249", "n" * 250)),
    row("name-space", [t("a b")], expect("a b", E.INVALID_TOPIC_EXCEPTION, '"a b"')),
    row("name-non-ascii", [t("ü")], expect("ü", E.INVALID_TOPIC_EXCEPTION, "ü")),
    row("name-slash", [t("a/b")], expect("a/b", E.INVALID_TOPIC_EXCEPTION, "a/b")),
    # -- collisions by '.'/'_' with an EXISTING topic -> 17 ------------------------------------------------------
    row(
        "collides-dot-with-existing-underscore", [t("x.y")], expect("x.y", E.INVALID_TOPIC_EXCEPTION, "collides", "x_y")
    ),
    row(
        "collides-underscore-with-existing-dot", [t("a_b")], expect("a_b", E.INVALID_TOPIC_EXCEPTION, "collides", "a.b")
    ),
    row("no-collision-within-one-request", [t("p.q"), t("p_q")], expect("p.q", OK), expect("p_q", OK)),
    # -- existing -> 36 (it wins over the collision an existing 'a.b' has with itself, as in Kafka) --------------
    row("exists", [t("existing")], expect("existing", E.TOPIC_ALREADY_EXISTS, "'existing'", "already exists")),
    row("exists-with-collision-chars", [t("a.b")], expect("a.b", E.TOPIC_ALREADY_EXISTS, "'a.b'", "already exists")),
    # -- ControllerApis: duplicates and the metadata topic -> 42 -------------------------------------------------
    row(
        "duplicate-in-request-answered-once",  # as Kafka's ControllerApis: refused names come after the rest
        [t("dup"), t("other"), t("dup")],
        expect("other", OK),
        expect("dup", E.INVALID_REQUEST, "Duplicate topic name."),
    ),
    row("duplicate-with-invalid-name", [t("a b"), t("a b")], expect("a b", E.INVALID_REQUEST, "Duplicate topic name.")),
    row("duplicate-existing", [t("existing"), t("existing")], expect("existing", E.INVALID_REQUEST, "Duplicate")),
    row(
        "metadata-topic",
        [t("__cluster_metadata")],
        expect("__cluster_metadata", E.INVALID_REQUEST, "__cluster_metadata"),
    ),
    # -- partitions and replication factor ------------------------------------------------------------------------
    row("defaults-for-minus-one", [t("d")], expect("d", OK, partitions=NUM_PARTITIONS, rf=DEFAULT_RF)),
    row("explicit-counts", [t("e", 5, 3)], expect("e", OK, partitions=5, rf=3)),
    row("default-partitions-explicit-rf", [t("e", -1, 1)], expect("e", OK, partitions=NUM_PARTITIONS, rf=1)),
    row("explicit-partitions-default-rf", [t("e", 7, -1)], expect("e", OK, partitions=7, rf=DEFAULT_RF)),
    row("partitions-zero", [t("t", 0, 1)], expect("t", E.INVALID_PARTITIONS, "Number of partitions")),
    row("partitions-minus-two", [t("t", -2, 1)], expect("t", E.INVALID_PARTITIONS, "Number of partitions")),
    row("rf-zero", [t("t", 1, 0)], expect("t", E.INVALID_REPLICATION_FACTOR, "Replication factor")),
    row("rf-minus-two", [t("t", 1, -2)], expect("t", E.INVALID_REPLICATION_FACTOR, "Replication factor")),
    row("rf-above-registered", [t("t", 1, 5)], expect("t", E.INVALID_REPLICATION_FACTOR, "5", "4 broker(s)")),
    row("rf-counts-fenced-brokers", [t("t", 2, 4)], expect("t", OK, partitions=2, rf=4)),
    row("all-fenced", [t("t", 1, 1)], expect("t", E.INVALID_REPLICATION_FACTOR, "fenced"), cluster="fenced"),
    row("all-fenced-defaults", [t("t")], expect("t", E.INVALID_REPLICATION_FACTOR, "fenced"), cluster="fenced"),
    # -- manual assignments -> 39 (or 42 beside a count / factor) ------------------------------------------------
    row("manual-ok", [t("m", assignments=[(0, (1, 2)), (1, (2, 3))])], expect("m", OK, partitions=2, rf=2)),
    row("manual-ok-unordered", [t("m", assignments=[(1, (3,)), (0, (2,))])], expect("m", OK, partitions=2, rf=1)),
    row(
        "manual-gap",
        [t("m", assignments=[(0, (1, 2)), (2, (2, 3))])],
        expect("m", E.INVALID_REPLICA_ASSIGNMENT, "consecutive"),
    ),
    row(
        "manual-not-from-zero",
        [t("m", assignments=[(1, (1, 2))])],
        expect("m", E.INVALID_REPLICA_ASSIGNMENT, "consecutive"),
    ),
    row(
        "manual-repeated-index",
        [t("m", assignments=[(0, (1, 2)), (0, (2, 3))])],
        expect("m", E.INVALID_REPLICA_ASSIGNMENT, "multiple", "partition 0"),
    ),
    row(
        "manual-broker-twice",
        [t("m", assignments=[(0, (2, 1, 2))])],
        expect("m", E.INVALID_REPLICA_ASSIGNMENT, "broker 2", "more than once"),
    ),
    row(
        "manual-unequal-sizes",
        [t("m", assignments=[(0, (1, 2)), (1, (3,))])],
        expect("m", E.INVALID_REPLICA_ASSIGNMENT, "1 replica(s)", "2 replica(s)"),
    ),
    row(
        "manual-unregistered-broker",
        [t("m", assignments=[(0, (1, 99))])],
        expect("m", E.INVALID_REPLICA_ASSIGNMENT, "broker 99", "registered"),
    ),
    row(
        "manual-all-fenced-partition",
        [t("m", assignments=[(0, (1,)), (1, (4,))])],
        expect("m", E.INVALID_REPLICA_ASSIGNMENT, "partition 1", "fenced"),
    ),
    row("manual-empty-replicas", [t("m", assignments=[(0, ())])], expect("m", E.INVALID_REPLICA_ASSIGNMENT, "empty")),
    row(
        "manual-with-partition-count",
        [t("m", 1, assignments=[(0, (1, 2))])],
        expect("m", E.INVALID_REQUEST, "numPartitions"),
    ),
    row(
        "manual-with-replication-factor",
        [t("m", -1, 2, assignments=[(0, (1, 2))])],
        expect("m", E.INVALID_REQUEST, "replication factor"),
    ),
    # -- configs -> 40 -------------------------------------------------------------------------------------------
    row("config-unknown", [cfg("c", [("foo.bar", "1")])], expect("c", E.INVALID_CONFIG, "foo.bar")),
    row("config-not-a-number", [t("c", retention_ms="abc")], expect("c", E.INVALID_CONFIG, "retention.ms", "abc")),
    row(
        "config-retention-ms-minus-two",
        [t("c", retention_ms="-2")],
        expect("c", E.INVALID_CONFIG, "retention.ms", "-2"),
    ),
    row(
        "config-cleanup-policy-foo",
        [t("c", cleanup_policy="foo")],
        expect("c", E.INVALID_CONFIG, "cleanup.policy", "foo"),
    ),
    row("config-cleanup-policy-empty", [t("c", cleanup_policy="")], expect("c", E.INVALID_CONFIG, "cleanup.policy")),
    row(
        "config-min-isr-zero",
        [cfg("c", [("min.insync.replicas", "0")])],
        expect("c", E.INVALID_CONFIG, "min.insync.replicas", "0"),
    ),
    row(
        "config-min-isr-above-rf",
        [cfg("c", [("min.insync.replicas", "3")], 1, 2)],
        expect("c", E.INVALID_CONFIG, "min.insync.replicas", "3"),
    ),
    row(
        "config-min-isr-above-default-rf",
        [cfg("c", [("min.insync.replicas", "3")])],
        expect("c", E.INVALID_CONFIG, "min.insync.replicas", "3"),
    ),
    row(
        "config-min-isr-above-manual-rf",
        [cfg("c", [("min.insync.replicas", "2")], assignments=[(0, (1,))])],
        expect("c", E.INVALID_CONFIG, "min.insync.replicas", "2"),
    ),
    row("config-segment-bytes-13", [t("c", segment_bytes="13")], expect("c", E.INVALID_CONFIG, "segment.bytes", "13")),
    row(
        "config-segment-bytes-overflows-int",
        [t("c", segment_bytes="2147483648")],
        expect("c", E.INVALID_CONFIG, "segment.bytes", "2147483648"),
    ),
    row(
        "config-max-message-bytes-minus-one",
        [cfg("c", [("max.message.bytes", "-1")])],
        expect("c", E.INVALID_CONFIG, "max.message.bytes", "-1"),
    ),
    row(
        "config-dirty-ratio-1.5",
        [cfg("c", [("min.cleanable.dirty.ratio", "1.5")])],
        expect("c", E.INVALID_CONFIG, "min.cleanable.dirty.ratio", "1.5"),
    ),
    row(
        "config-compaction-lags-crossed",
        [cfg("c", [("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")])],
        expect("c", E.INVALID_CONFIG, "min.compaction.lag.ms", "max.compaction.lag.ms"),
    ),
    row("config-boolean-yes", [t("c", preallocate="yes")], expect("c", E.INVALID_CONFIG, "preallocate", "yes")),
    row(
        "config-compression-type",
        [cfg("c", [("compression.type", "brotli")])],
        expect("c", E.INVALID_CONFIG, "compression.type", "brotli"),
    ),
    row("config-null-value", [cfg("c", [("retention.ms", None)])], expect("c", E.INVALID_CONFIG, "retention.ms")),
    row("config-valid-compact-delete", [t("c", cleanup_policy="compact,delete")], expect("c", OK)),
    row("config-valid-delete-compact", [t("c", cleanup_policy="delete,compact")], expect("c", OK)),
    row(
        "config-valid-edges",
        [
            cfg(
                "c",
                [
                    ("retention.ms", "-1"),
                    ("retention.bytes", "-1"),
                    ("segment.bytes", "14"),
                    ("max.message.bytes", "0"),
                    ("min.cleanable.dirty.ratio", "1"),
                    ("min.insync.replicas", "2"),
                    ("compression.type", "zstd"),
                    ("min.compaction.lag.ms", "5"),
                    ("max.compaction.lag.ms", "5"),
                ],
            )
        ],
        expect("c", OK, rf=DEFAULT_RF),
    ),
    # -- Kafka's order of checks ----------------------------------------------------------------------------------
    row("order-bad-name-before-bad-rf", [t("a b", 1, 0)], expect("a b", E.INVALID_TOPIC_EXCEPTION)),
    row("order-bad-name-before-bad-config", [t("a b", cleanup_policy="foo")], expect("a b", E.INVALID_TOPIC_EXCEPTION)),
    row(
        "order-collision-before-bad-config", [t("a_b", cleanup_policy="foo")], expect("a_b", E.INVALID_TOPIC_EXCEPTION)
    ),
    row(
        "order-exists-before-bad-config",
        [t("existing", cleanup_policy="foo")],
        expect("existing", E.TOPIC_ALREADY_EXISTS),
    ),
    row(
        "order-exists-before-null-config",
        [cfg("existing", [("retention.ms", None)])],
        expect("existing", E.TOPIC_ALREADY_EXISTS),
    ),
    row(
        "order-null-before-unknown-config",
        [cfg("c", [("foo.bar", "1"), ("retention.ms", None)])],
        expect("c", E.INVALID_CONFIG, "Null", "retention.ms"),
    ),
    row(
        "order-bad-config-before-bad-rf",
        [t("c", 1, 0, cleanup_policy="foo")],
        expect("c", E.INVALID_CONFIG, "cleanup.policy"),
    ),
    row("order-bad-config-before-bad-partitions", [t("c", 0, 1, retention_ms="-2")], expect("c", E.INVALID_CONFIG)),
    row("order-bad-config-before-too-many-replicas", [t("c", 1, 9, retention_ms="-2")], expect("c", E.INVALID_CONFIG)),
    row(
        "order-bad-config-before-manual-request",
        [t("c", 2, 2, assignments=[(0, (1, 1))], cleanup_policy="foo")],
        expect("c", E.INVALID_CONFIG),
    ),
    row("order-rf-before-partitions", [t("t", 0, 0)], expect("t", E.INVALID_REPLICATION_FACTOR)),
    row(
        "order-manual-request-before-assignment",
        [t("m", -1, 2, assignments=[(0, (1, 1))])],
        expect("m", E.INVALID_REQUEST),
    ),
    row(
        "order-too-many-replicas-before-min-isr",
        [cfg("c", [("min.insync.replicas", "6")], 1, 5)],
        expect("c", E.INVALID_REPLICATION_FACTOR),
    ),
    row(
        "order-duplicate-before-metadata-topic",
        [t("__cluster_metadata"), t("__cluster_metadata")],
        expect("__cluster_metadata", E.INVALID_REQUEST, "Duplicate"),
    ),
    # -- each topic its own result --------------------------------------------------------------------------------
    row(
        "independent-results",
        [
            t("good1"),
            t("bad name"),
            t("good2", 2, 1),
            t("existing"),
            t("bad-rf", 1, 0),
            t("good3", cleanup_policy="compact"),
        ],
        expect("good1", OK),
        expect("bad name", E.INVALID_TOPIC_EXCEPTION),
        expect("good2", OK, partitions=2, rf=1),
        expect("existing", E.TOPIC_ALREADY_EXISTS),
        expect("bad-rf", E.INVALID_REPLICATION_FACTOR),
        expect("good3", OK),
    ),
]


async def make_cluster(log: SharedLog, kind: str):
    from ctl_helpers import quiet_settings

    settings = quiet_settings(num_partitions=NUM_PARTITIONS, default_replication_factor=DEFAULT_RF)
    if kind == "fenced":
        return await active_cluster(log, ALL_FENCED, settings)
    return await active_cluster(log, DEFAULT_BROKERS, settings, EXISTING)


@pytest.mark.parametrize("validate_only", [False, True], ids=["create", "validate-only"])
@pytest.mark.parametrize(("topics", "expected", "cluster"), TABLE)
async def test_create_topics_table(
    log: SharedLog, topics: list[NewTopic], expected: list[Expect], cluster: str, validate_only: bool
) -> None:
    ctl, _, _ = await make_cluster(log, cluster)
    appends_before = len(log.append_calls)
    entries_before = len(log.entries)
    topics_before = dict(ctl.replication.topics_by_name.committed())

    results = await ctl.create_topics(topics, validate_only=validate_only)

    assert [r.name for r in results] == [e.name for e in expected]  # request order, refused names last, once
    for result, want in zip(results, expected, strict=True):
        assert result.error.code == want.code, (result.name, result.error)
        for fragment in want.fragments:
            assert fragment in (result.error.message or ""), (fragment, result.error.message)
        if want.code == OK:
            assert result.error.message is None
            assert result.topic_id is not None
            if want.partitions is not None:
                assert result.num_partitions == want.partitions
            if want.replication_factor is not None:
                assert result.replication_factor == want.replication_factor
        else:
            assert result.topic_id is None
            assert result.num_partitions == -1 and result.replication_factor == -1

    created = [e.name for e in expected if e.code == OK]
    if validate_only or not created:
        assert len(log.append_calls) == appends_before  # nothing written
        assert len(log.entries) == entries_before
        assert dict(ctl.replication.topics_by_name) == topics_before
    else:
        assert len(log.append_calls) == appends_before + 1  # one atomic batch for the whole request
        names = [r.name for r in log.records(entries_before) if isinstance(r, TopicRecord)]
        assert names == created
        described = {d.name: d for d in await ctl.describe_topics(created)}
        for want in expected:
            if want.code == OK:
                d = described[want.name]
                assert not d.error.failed
                assert d.topic_id == by_name(results)[want.name].topic_id
                if want.partitions is not None:
                    assert len(d.partitions) == want.partitions


async def test_validate_only_gives_the_same_answers_and_then_creation_still_works(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    request = [t("v1", 4, 3, retention_ms="1000"), t("bad name"), t("v2", assignments=[(0, (3, 1))])]
    checked = await ctl.create_topics(request, validate_only=True)
    created = await ctl.create_topics(request)
    assert [(r.name, r.error, r.num_partitions, r.replication_factor, r.configs) for r in checked] == [
        (r.name, r.error, r.num_partitions, r.replication_factor, r.configs) for r in created
    ]
    assert created[0].error.code == OK and created[2].error.code == OK


async def test_success_result_reports_effective_configs(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    [r] = await ctl.create_topics([t("c", cleanup_policy="compact", retention_ms="1000")])
    configs = {name: (value, source) for name, value, source in r.configs}
    assert set(configs) == set(TOPIC_CONFIGS)
    assert configs["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert configs["retention.ms"] == ("1000", DYNAMIC_TOPIC_CONFIG)
    assert configs["segment.bytes"][1] != DYNAMIC_TOPIC_CONFIG
    [d] = await ctl.describe_topics(["c"])
    assert dict(d.configs) == {"cleanup.policy": "compact", "retention.ms": "1000"}


async def test_records_form_one_atomic_batch_topic_after_topic(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    appends_before = len(log.append_calls)
    first = len(log.entries)
    request = [
        cfg(
            "one",
            [("cleanup.policy", "compact,delete"), ("retention.ms", "1000")],
            assignments=[(0, (1, 2)), (1, (2, 3))],
        ),
        t("bad name"),
        t("two", 3, 1),
        cfg("three", [("segment.bytes", "1048576")], assignments=[(0, (3,))]),
    ]
    results = by_name(await ctl.create_topics(request))

    assert len(log.append_calls) == appends_before + 1
    node, values = log.append_calls[-1]
    assert node == 1 and len(values) == len(log.entries) - first
    kinds = [
        (type(r).__name__, getattr(r, "name", None) or getattr(r, "partition_id", None)) for r in log.records(first)
    ]
    assert kinds == [
        ("TopicRecord", "one"),
        ("ConfigRecord", "cleanup.policy"),
        ("ConfigRecord", "retention.ms"),
        ("PartitionRecord", 0),
        ("PartitionRecord", 1),
        ("TopicRecord", "two"),
        ("PartitionRecord", 0),
        ("PartitionRecord", 1),
        ("PartitionRecord", 2),
        ("TopicRecord", "three"),
        ("ConfigRecord", "segment.bytes"),
        ("PartitionRecord", 0),
    ]
    records = log.records(first)
    current = None
    for r in records:
        if isinstance(r, TopicRecord):
            current = r
            assert r.topic_id == results[r.name].topic_id
        elif isinstance(r, ConfigRecord):
            assert (r.resource_type, r.resource_name) == (2, current.name)
        else:
            assert isinstance(r, PartitionRecord) and r.topic_id == current.topic_id
            assert (r.leader_epoch, r.partition_epoch) == (0, 0)
    assert [r.value for r in records if isinstance(r, ConfigRecord)] == ["compact,delete", "1000", "1048576"]
    assert [(r.replicas, r.isr, r.leader) for r in records[3:5]] == [([1, 2], [1, 2], 1), ([2, 3], [2, 3], 2)]


async def test_leader_is_first_active_replica_and_isr_the_active_replicas(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")  # broker 4 is fenced
    first = len(log.entries)
    results = await ctl.create_topics(
        [
            t("manual", assignments=[(0, (4, 1, 2)), (1, (2, 4, 3)), (2, (3, 2, 4))]),
            t("auto", 24, 4),  # every broker a replica of every partition, the fenced one included
        ]
    )
    assert all(r.error.code == OK for r in results)
    parts = [r for r in log.records(first) if isinstance(r, PartitionRecord)]
    assert [(p.replicas, p.isr, p.leader) for p in parts[:3]] == [
        ([4, 1, 2], [1, 2], 1),
        ([2, 4, 3], [2, 3], 2),
        ([3, 2, 4], [3, 2], 3),
    ]
    for p in parts[3:]:
        assert sorted(p.replicas) == [1, 2, 3, 4]
        assert p.leader != 4 and p.leader == p.isr[0]
        assert p.isr == [b for b in p.replicas if b != 4]
    [manual] = await ctl.describe_topics(["manual"])
    assert [(i, p.leader, p.isr) for i, p in manual.partitions] == [(0, 1, (1, 2)), (1, 2, (2, 3)), (2, 3, (3, 2))]


async def test_more_than_10000_records_fails_every_topic_and_writes_nothing(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    appends_before = len(log.append_calls)
    # 1 TopicRecord + 10,000 PartitionRecords + the small topic's 2 records: over Kafka's MAX_RECORDS_PER_USER_OP.
    for validate_only in (True, False):
        results = await ctl.create_topics(
            [t("small", 1, 1), t("huge", 10_000, 1), t("bad name")], validate_only=validate_only
        )
        assert [r.error.code for r in results] == [E.POLICY_VIOLATION] * 3
        assert all("excessively large" in (r.error.message or "") for r in results)
    assert len(log.append_calls) == appends_before
    assert "small" not in ctl.replication.topics_by_name and "huge" not in ctl.replication.topics_by_name


async def test_exactly_10000_records_is_allowed(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    [r] = await ctl.create_topics([t("big", 9_999, 1)])  # 1 + 9,999 records
    assert r.error.code == OK and r.num_partitions == 9_999


async def test_generating_records_changes_nothing_until_replay(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    result = ctl.replication.create_topics([t("pure", 2, 2)], validate_only=False)
    assert [type(r).__name__ for r in result.records] == ["TopicRecord", "PartitionRecord", "PartitionRecord"]
    assert "pure" not in ctl.replication.topics_by_name
    assert len(ctl.replication.partitions) == len(ctl.replication.partitions.committed())
    # the same request generated again is not refused as existing: nothing was remembered
    again = ctl.replication.create_topics([t("pure", 2, 2)], validate_only=False)
    assert again.response[0].error.code == OK


async def test_empty_request_answers_nothing(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    appends_before = len(log.append_calls)
    assert await ctl.create_topics([]) == []
    assert len(log.append_calls) == appends_before


async def test_topic_created_then_collision_and_existence_follow_it(log: SharedLog) -> None:
    ctl, _, _ = await make_cluster(log, "default")
    assert [r.error.code for r in await ctl.create_topics([t("new.topic")])] == [OK]
    codes = {r.name: r.error.code for r in await ctl.create_topics([t("new_topic"), t("new.topic")])}
    assert codes == {"new_topic": E.INVALID_TOPIC_EXCEPTION, "new.topic": E.TOPIC_ALREADY_EXISTS}
