"""The executors' per-range partition fold (audit.fold), against a plain sequential fold of the same rows."""

from __future__ import annotations

import itertools
import random

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.fold import FIELDS, INPUT, SCHEMA, STATE, buckets_of, fold_range, merge_deltas

ROW_TYPES = {
    "topic_id": pa.string(),
    "partition_id": pa.int32(),
    "order": pa.int64(),
    "record_type": pa.string(),
    **{f: pa.list_(pa.int32()) for f in FIELDS[:4]},
    "leader": pa.int32(),
    "leader_recovery_state": pa.int32(),
    "leader_epoch": pa.int32(),
    "partition_epoch": pa.int32(),
}
INPUT_SCHEMA = pa.schema([(n, ROW_TYPES[n]) for n in INPUT])
replica_list = st.lists(st.integers(0, 5), max_size=3)
row = st.fixed_dictionaries(
    {
        "topic_id": st.sampled_from(["AAAA", "BBBB", "CCCC"]),
        "partition_id": st.integers(0, 2),
        "full": st.booleans(),
        **{f: st.none() | replica_list for f in FIELDS[:4]},
        "leader": st.none() | st.integers(-1, 5),
        "leader_recovery_state": st.none() | st.integers(0, 1),
        "leader_epoch": st.integers(0, 9),
        "partition_epoch": st.integers(0, 9),
    }
)


def as_rows(drawn: list[dict]) -> list[dict]:
    """Orders in log order; PartitionRecords carry every field (as the decoder gives them), changes only some."""
    rows = []
    for order, d in enumerate(drawn):
        r = {"topic_id": d["topic_id"], "partition_id": d["partition_id"], "order": 1000 + order}
        if d["full"]:
            r |= {"record_type": "PartitionRecord", "leader_epoch": d["leader_epoch"]}
            r |= {"partition_epoch": d["partition_epoch"], "leader": d["leader"] if d["leader"] is not None else 1}
            r |= {"leader_recovery_state": d["leader_recovery_state"] or 0}
            r |= {f: d[f] or [] for f in FIELDS[:4]}
        else:
            r |= {"record_type": "PartitionChangeRecord", "leader_epoch": None, "partition_epoch": None}
            r |= {f: d[f] for f in FIELDS}
        rows.append(r)
    return rows


def reference(rows: list[dict]) -> dict[tuple[str, int], dict]:
    out: dict[tuple[str, int], dict] = {}
    for r in sorted(rows, key=lambda r: r["order"]):
        key = (r["topic_id"], r["partition_id"])
        d = out.setdefault(key, {"first_order": r["order"], "base_order": None, "leader_epoch": None})
        d.setdefault("partition_epoch", None)
        d.setdefault("changes", 0)
        d["order"] = r["order"]
        if r["record_type"] == "PartitionRecord":
            d.update({f: r[f] for f in FIELDS}, base_order=r["order"], changes=0, leader_changes=0)
            d.update(leader_epoch=r["leader_epoch"], partition_epoch=r["partition_epoch"])
            continue
        d["changes"] += 1
        d["leader_changes"] = d.get("leader_changes", 0) + (r["leader"] is not None)
        for f in FIELDS:
            if r[f] is not None:
                d[f] = r[f]
    for d in out.values():
        d.setdefault("leader_changes", 0)
        for f in FIELDS:
            d.setdefault(f, None)
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=40), st.randoms())
def test_fold_range_equals_a_sequential_fold(drawn: list[dict], rnd: random.Random) -> None:
    rows = as_rows(drawn)
    shuffled = rows[:]
    rnd.shuffle(shuffled)  # the decoder groups rows by type: the fold must not rely on their order
    table = pa.Table.from_pylist(shuffled, schema=INPUT_SCHEMA)
    folded = fold_range(table)
    assert folded.schema == SCHEMA
    got = {(r.pop("topic_id"), r.pop("partition_id")): r for r in folded.to_pylist()}
    assert got == reference(rows)


def drawn_row(full: bool, lists: list[int] | None, leader: int | None, epochs: int = 0) -> dict:
    return {"topic_id": "T", "partition_id": 0, "full": full, **{f: lists for f in FIELDS[:4]}, "leader": leader,
            "leader_recovery_state": None, "leader_epoch": epochs, "partition_epoch": epochs + 2}  # fmt: skip


def test_a_change_before_the_last_partition_record_no_longer_counts() -> None:
    emptied = drawn_row(False, None, None) | {"isr": []}
    rows = as_rows([drawn_row(True, [1, 2], 1), drawn_row(False, None, 2), drawn_row(True, [3], 3, 7), emptied])
    table = pa.Table.from_pylist(rows, schema=INPUT_SCHEMA)
    (delta,) = fold_range(table).to_pylist()
    assert (delta["base_order"], delta["order"], delta["leader"], delta["isr"]) == (1002, 1003, 3, [])
    assert (delta["leader_epoch"], delta["partition_epoch"], delta["leader_changes"], delta["changes"]) == (7, 9, 0, 1)


def test_an_empty_range_folds_to_nothing() -> None:
    empty = INPUT_SCHEMA.empty_table()
    assert fold_range(empty).num_rows == 0


def final_state(d: dict) -> dict:
    return {f: d[f] for f in FIELDS} | {
        "leader_epoch": d["leader_epoch"] + d["leader_changes"],
        "partition_epoch": d["partition_epoch"] + d["changes"],
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=40), st.lists(st.integers(0, 40), max_size=4), st.randoms())
def test_merging_the_deltas_of_consecutive_ranges_gives_the_state(
    drawn: list[dict], cuts: list[int], rnd: random.Random
) -> None:
    """Fold the log's ranges apart, merge their deltas in any order: the state at the end of the log, for every
    partition that has a PartitionRecord."""
    rows = as_rows(drawn)
    bounds = [0, *sorted(set(cuts)), len(rows)]
    deltas = [
        d
        for lo, hi in itertools.pairwise(bounds)
        if lo < hi
        for d in fold_range(pa.Table.from_pylist(rows[lo:hi], schema=INPUT_SCHEMA)).to_pylist()
    ]
    rnd.shuffle(deltas)
    merged = merge_deltas(pa.Table.from_pylist(deltas, schema=SCHEMA))
    assert merged.schema == STATE
    got = {(r.pop("topic_id"), r.pop("partition_id")): r for r in merged.to_pylist()}
    want = {key: final_state(d) for key, d in reference(rows).items() if d["base_order"] is not None}
    assert got == want


def test_a_topics_bucket_depends_on_its_id_alone() -> None:
    """Every range must put a topic's deltas in the same bucket, whatever else the range holds."""
    ids = [f"topic-id-{i}" for i in range(200)]
    one = dict(zip(ids, buckets_of(pa.array(ids), 4), strict=True))
    other = ids[::-3] + ids[:5]
    assert [one[i] for i in other] == list(buckets_of(pa.chunked_array([other[:7], other[7:]]), 4))
    assert set(one.values()) == {0, 1, 2, 3}
