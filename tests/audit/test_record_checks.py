"""The executors' per-record partition checks (audit.record_checks), against the rules applied row by row."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.record_checks import (
    FINDINGS,
    INPUT,
    MENTIONS,
    early_brokers,
    findings,
    mentions,
    orphan_suspects,
)

ROW_TYPES = {
    "topic_id": pa.string(),
    "partition_id": pa.int32(),
    "record_type": pa.string(),
    "order": pa.int64(),
    "offset": pa.int64(),
    "file": pa.string(),
    "position": pa.int64(),
    "replicas": pa.list_(pa.int32()),
    "isr": pa.list_(pa.int32()),
    "leader": pa.int32(),
}
INPUT_SCHEMA = pa.schema([(n, ROW_TYPES[n]) for n in INPUT])
brokers = st.lists(st.integers(-3, 6), max_size=4)
row = st.fixed_dictionaries(
    {
        "topic_id": st.sampled_from(["AAAA", "BBBB"]),
        "partition_id": st.integers(0, 3),
        "record_type": st.sampled_from(["PartitionRecord", "PartitionChangeRecord"]),
        "replicas": st.none() | brokers,
        "isr": st.none() | brokers,
        "leader": st.none() | st.integers(-1, 6),
    }
)


def table(drawn: list[dict]) -> pa.Table:
    rows = [d | {"order": 10 + i, "offset": 10 + i, "file": "f.log", "position": 7 * i} for i, d in enumerate(drawn)]
    return pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)


def reference(drawn: list[dict]) -> list[tuple[str, int]]:
    out = []
    for i, d in enumerate(drawn):
        replicas, isr, leader = d["replicas"], d["isr"], d["leader"]
        full = d["record_type"] == "PartitionRecord"
        if replicas is not None and len(set(replicas)) != len(replicas):
            out.append(("replicas_distinct", 10 + i))
        if full and replicas is not None and isr is not None and not set(isr) <= set(replicas):
            out.append(("isr_subset_of_replicas", 10 + i))
        if full and isr is not None and leader is not None and leader != -1 and leader not in isr:
            out.append(("leader_in_isr", 10 + i))
    return sorted(out)


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=30))
def test_findings_are_the_rules_applied_row_by_row(drawn: list[dict]) -> None:
    got = findings(table(drawn))
    assert got.schema == FINDINGS
    assert sorted(zip(got.column("check").to_pylist(), got.column("offset").to_pylist(), strict=True)) == reference(
        drawn
    )
    for f in got.to_pylist():
        assert f["order"] == f["offset"] and f["file"] == "f.log" and f["position"] == 7 * (f["offset"] - 10)


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=30))
def test_mentions_give_each_named_broker_its_first_order(drawn: list[dict]) -> None:
    want: dict[int, int] = {}
    for i, d in enumerate(drawn):
        for b in (d["replicas"] or []) + (d["isr"] or []):
            want.setdefault(b, 10 + i)
    got = mentions(table(drawn))
    assert got.schema == MENTIONS
    assert dict(zip(got.column("broker_id").to_pylist(), got.column("first_order").to_pylist(), strict=True)) == want


def test_explanations_name_the_partition_and_the_values() -> None:
    drawn = [
        {"topic_id": "T", "partition_id": 4, "record_type": "PartitionRecord", "replicas": [1, 1], "isr": [1, 2]}
        | {"leader": 3}
    ]
    by_check = {f["check"]: f["explanation"] for f in findings(table(drawn)).to_pylist()}
    assert by_check == {
        "replicas_distinct": "partition 4 of topic id T lists replicas 1,1 with a repeat",
        "isr_subset_of_replicas": "partition 4 of topic id T: ISR [1,2] is not within replicas [1,1]",
        "leader_in_isr": "partition 4 of topic id T: leader 3 is not in ISR [1,2]",
    }


def test_no_rows_no_findings_no_mentions() -> None:
    assert findings(table([])).num_rows == 0 and mentions(table([])).num_rows == 0


def spans(*rows: tuple[str, int, int]) -> pa.Table:
    topic, first, last = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table({"topic_id": list(topic), "first_order": list(first), "last_order": list(last)})


def events(*rows: tuple[str, int, str]) -> pa.Table:
    topic, order, kind = zip(*rows, strict=True) if rows else ((), (), ())
    types = {"topic_id": pa.string(), "order": pa.int64(), "record_type": pa.string()}
    return pa.table({"topic_id": list(topic), "order": list(order), "record_type": list(kind)}, schema=pa.schema(types))


def test_orphan_suspects_are_the_topics_whose_rows_leave_one_lifetime() -> None:
    log = events(
        ("live", 1, "TopicRecord"),
        ("gone", 2, "TopicRecord"),
        ("gone", 9, "RemoveTopicRecord"),
        ("again", 20, "RemoveTopicRecord"),  # an id removed, then created again
        ("again", 3, "TopicRecord"),
        ("again", 30, "TopicRecord"),
    )
    rows = spans(
        ("live", 2, 100),  # inside its lifetime
        ("gone", 3, 8),  # inside, before the removal
        ("again", 31, 40),  # inside the second lifetime
        ("late", 5, 5),  # never created
        ("early", 1, 1),
    )
    assert orphan_suspects(rows, log).column("topic_id").to_pylist() == ["early", "late"]
    after = spans(("gone", 3, 10), ("again", 4, 31), ("live", 1, 2))  # past a removal; across two; at creation
    assert orphan_suspects(after, log).column("topic_id").to_pylist() == ["again", "gone", "live"]
    assert orphan_suspects(spans(("x", 1, 1)), None).column("topic_id").to_pylist() == ["x"]


def test_early_brokers_are_named_before_their_first_registration() -> None:
    named = pa.table({"broker_id": [1, 2, 3, 2, 4], "first_order": [10, 10, 10, 3, 50]})
    registered = pa.table({"broker_id": [1, 2, 4, 4], "order": [5, 7, 60, 40]})
    early, first = early_brokers(named, registered)
    assert early == [2, 3] and first == {1: 5, 2: 7, 4: 40}  # 2 named at 3; 3 never registered
