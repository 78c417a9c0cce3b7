"""Partition lifecycles without Spark: the audit job's tasks run in this process (audit.records.build_tables) over
logs with elections (fencing, controlled shutdown, an unclean election), ISR changes, deletion and re-creation
under the same name, added partitions and configs set and deleted. The state must be the controller's own replay;
the partition walk (audit.history) must find each broken rule at the record that breaks it; the leadership
timeline and offline intervals (audit.tables) must be the ones the log was built to have."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from audit_helpers import (
    TS,
    LogBuilder,
    assert_same_state,
    change,
    controller_replay,
    partition,
    pchange,
    register,
    topic_config,
    uid,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import history, tables
from audit.records import RECORD_FIELDS, build_tables, in_process, read_summary, records_of
from controller.records import ConfigRecord, NoOpRecord, RemoveTopicRecord, TopicRecord

O1, O2, L = uid(41), uid(42), uid(43)


def at(seconds: float) -> int:
    return TS + int(seconds * 1000)


def lifecycle() -> tuple[LogBuilder, dict[str, int]]:
    """Three brokers and two topics through fencing, a controlled shutdown, an unclean election, ISR changes, added
    partitions, and the deletion of a topic whose name is then created again; returns the log and the offsets of
    some of its records."""
    b = LogBuilder()
    e = {broker: broker - 1 for broker in (1, 2, 3)}  # a broker epoch is its registration's offset
    b.add(*(register(broker, e[broker], f"r{broker}") for broker in (1, 2, 3)), timestamp=at(0))
    b.add(*(change(broker, e[broker], fenced=-1) for broker in (1, 2, 3)), timestamp=at(1))
    b.add(
        TopicRecord(name="orders", topic_id=O1),
        topic_config("orders", "retention.ms", "1000"),
        partition(O1, 0, [1, 2, 3]),
        partition(O1, 1, [2, 3, 1]),
        partition(O1, 2, [3, 1, 2]),
        timestamp=at(2),
    )
    b.add(TopicRecord(name="logs", topic_id=L), partition(L, 0, [2]), timestamp=at(2))
    b.add(
        ConfigRecord(resource_type=4, resource_name="", name="num.io.threads", value="8"),  # the cluster default
        ConfigRecord(resource_type=4, resource_name="1", name="log.retention.ms", value="1"),  # broker 1's
        timestamp=at(3),
    )
    # broker 1 fenced: it leaves every ISR, its leadership moves (the records before the fencing, as Kafka writes)
    fenced_1 = b.add(
        pchange(O1, 0, leader=2, isr=[2, 3]),
        pchange(O1, 1, isr=[2, 3]),
        pchange(O1, 2, isr=[3, 2]),
        change(1, e[1], fenced=1),
        timestamp=at(10),
    )
    # broker 2 shuts down: its leaderships move; logs-0 has no other replica and stays leaderless
    shutdown_2 = b.add(
        change(2, e[2], shutdown=1),
        pchange(O1, 0, leader=3, isr=[3]),
        pchange(O1, 1, leader=3, isr=[3]),
        pchange(L, 0, leader=-1),
        timestamp=at(20),
    )
    b.add(change(2, 999, fenced=1), timestamp=at(21))  # an old registration's: no event
    # broker 3 fenced: no replica left to lead
    fenced_3 = b.add(
        pchange(O1, 0, leader=-1),
        pchange(O1, 1, leader=-1),
        pchange(O1, 2, leader=-1, isr=[2]),
        change(3, e[3], fenced=1),
        timestamp=at(30),
    )
    b.add(change(1, e[1], fenced=-1), timestamp=at(40))
    unclean = b.add(pchange(O1, 0, leader=1, isr=[1], leader_recovery_state=1), timestamp=at(45))
    added = b.add(partition(O1, 3, [1, 2, 3], isr=[1], leader=1), timestamp=at(60))  # CreatePartitions
    e[3] = b.add(register(3, b.next_offset, "r3"), timestamp=at(70))  # broker 3 comes back
    unfenced_3 = b.add(change(3, e[3], fenced=-1), pchange(O1, 1, leader=3), timestamp=at(71))
    b.add(pchange(O1, 0, isr=[1, 3], leader_recovery_state=0), timestamp=at(75))  # AlterPartition: expand, recovered
    b.add(pchange(O1, 0, isr=[1]), timestamp=at(76))  # and shrink
    removed = b.add(RemoveTopicRecord(topic_id=O1), timestamp=at(80))
    b.add(
        TopicRecord(name="orders", topic_id=O2),  # the name again, a new id
        topic_config("orders", "cleanup.policy", "compact"),
        partition(O2, 0, [1, 3]),
        partition(O2, 1, [3, 1]),
        timestamp=at(90),
    )
    b.add(topic_config("orders", "segment.bytes", "1024"), timestamp=at(92))
    b.add(
        topic_config("orders", "segment.bytes", None),
        ConfigRecord(resource_type=4, resource_name="1", name="log.retention.ms", value=None),
        timestamp=at(95),
    )
    b.add(NoOpRecord(), timestamp=at(100))
    offsets = {"fenced_1": fenced_1 + 3, "shutdown_2": shutdown_2, "fenced_3": fenced_3 + 3, "unclean": unclean}
    return b, offsets | {"added": added, "unfenced_3": unfenced_3, "removed": removed, "registered_3": e[3]}


def audit(log: LogBuilder, root: Path, segments: int = 1) -> dict[str, Any]:
    """The audit job's tables, its tasks run here; the log in ``segments`` files (a range each, at least)."""
    directory = root / "log" / "__cluster_metadata-0"
    directory.mkdir(parents=True)
    n = len(log.batches)
    for part in range(segments):
        batches = log.batches[part * n // segments : (part + 1) * n // segments]
        base = int.from_bytes(batches[0][:8], "big")
        (directory / f"{base:020d}.log").write_bytes(b"".join(batches))
    out = root / "out"
    written = build_tables(in_process, 2, root / "log", out)
    read = {name: pads.dataset(out / name, format="parquet").to_table() for name in (*TABLE_NAMES,)}
    changes = read_summary(out, "leader_changes")
    read["leader_changes"] = changes
    broker_rows = records_of(out, tables.BROKER_TYPES, tables.BROKER_EVENT_INPUT)
    read["broker_events"] = tables.broker_events(broker_rows, changes)
    read["offline_partitions"] = tables.offline_partitions(changes, written.last_time)
    read["written"] = written
    return read


TABLE_NAMES = ("topics", "partitions", "brokers", "configs", "violations")


def state_of(read: dict[str, Any]) -> dict[str, dict]:
    """The job's state tables in the shape of ``controller_replay``."""
    partitions = {}
    for r in read["partitions"].to_pylist():
        partitions[(r["topic_id"], r["partition_id"])] = {
            "replicas": r["replicas"],
            "isr": r["isr"],
            "leader": r["leader"],
            "leader_epoch": r["leader_epoch"],
            "partition_epoch": r["partition_epoch"],
            "removing_replicas": r["removing_replicas"] or [],
            "adding_replicas": r["adding_replicas"] or [],
            "leader_recovery_state": r["leader_recovery_state"],
        }
    return {
        "topics": {r["topic_id"]: (r["topic_name"], r["created_offset"]) for r in read["topics"].to_pylist()},
        "partitions": partitions,
        "brokers": {
            r["broker_id"]: {k: r[k] for k in ("broker_epoch", "rack", "fenced", "in_controlled_shutdown")}
            for r in read["brokers"].to_pylist()
        },
        "configs": {
            (r["resource_type"], r["resource_name"], r["config_name"]): r["config_value"]
            for r in read["configs"].to_pylist()
        },
    }


@pytest.mark.parametrize("segments", [1, 3])
def test_a_lifecycle_replays_to_the_controllers_state_and_breaks_nothing(tmp_path: Path, segments: int) -> None:
    log, _ = lifecycle()
    read = audit(log, tmp_path, segments)
    expected = controller_replay(log.records)
    # the log did what it says (the reference is not vacuous)
    assert set(expected["topics"]) == {str(O2), str(L)}
    assert expected["partitions"][(str(L), 0)]["leader"] == -1
    assert expected["configs"] == {(4, "", "num.io.threads"): "8", (2, "orders", "cleanup.policy"): "compact"}
    assert_same_state(state_of(read), expected)
    assert read["violations"].to_pylist() == []


def test_the_lifecycle_state_at_each_step_is_the_controllers(tmp_path: Path) -> None:
    """The O1 partitions' leader, ISR, epochs and recovery state after the unclean election, before the removal."""
    log, offsets = lifecycle()
    for cut in (offsets["unclean"], offsets["removed"] - 1):
        log.write(tmp_path / str(cut))
        out = tmp_path / f"out-{cut}"
        build_tables(in_process, 2, tmp_path / str(cut), out, as_of_offset=cut)
        read = {name: pads.dataset(out / name, format="parquet").to_table() for name in TABLE_NAMES}
        expected = controller_replay(log.records, upto=cut)
        assert_same_state(state_of(read), expected)
        p0 = expected["partitions"][(str(O1), 0)]
        if cut == offsets["unclean"]:
            assert (p0["leader"], p0["isr"], p0["leader_recovery_state"]) == (1, [1], 1)
            assert (p0["leader_epoch"], p0["partition_epoch"]) == (4, 4)
        else:
            assert (p0["leader"], p0["isr"], p0["leader_recovery_state"]) == (1, [1], 0)
            assert (p0["leader_epoch"], p0["partition_epoch"]) == (4, 6)


def test_the_timeline_counts_each_brokers_leaderships_around_its_events(tmp_path: Path) -> None:
    log, offsets = lifecycle()
    read = audit(log, tmp_path, 3)
    columns = ("offset", "broker_id", "event", "leaders_lost", "leaders_gained", "went_offline", "leading_after")
    got = [tuple(r[c] for c in columns) for r in read["broker_events"].to_pylist()]
    assert got == [
        (0, 1, "registered", 0, 0, 0, 0),
        (1, 2, "registered", 0, 0, 0, 0),
        (2, 3, "registered", 0, 0, 0, 0),
        (3, 1, "unfenced", 0, 0, 0, 0),
        (4, 2, "unfenced", 0, 0, 0, 0),
        (5, 3, "unfenced", 0, 0, 0, 0),
        (offsets["fenced_1"], 1, "fenced", 1, 0, 0, 0),
        (offsets["shutdown_2"], 2, "controlled_shutdown", 3, 0, 1, 0),
        (offsets["fenced_3"], 3, "fenced", 3, 0, 3, 0),
        (offsets["fenced_3"] + 1, 1, "unfenced", 0, 0, 0, 0),  # (the unclean election came later, alone)
        (offsets["registered_3"], 3, "registered", 0, 0, 0, 0),
        (offsets["unfenced_3"], 3, "unfenced", 0, 1, 0, 1),
    ]
    fenced = read["broker_events"].to_pylist()[6]
    assert fenced["time"] == datetime.fromtimestamp(at(10) / 1000, UTC).replace(tzinfo=None)  # its batch's


def test_offline_intervals_run_from_losing_the_leader_to_the_next_one_the_removal_or_the_end(tmp_path: Path) -> None:
    log, _ = lifecycle()
    read = audit(log, tmp_path, 3)
    got = {
        (r["topic_name"], r["topic_id"], r["partition_id"]): (
            r["intervals"],
            r["total_ms"],
            r["max_ms"],
            r["offline_at_end"],
        )
        for r in read["offline_partitions"].to_pylist()
    }
    assert got == {
        ("logs", str(L), 0): (1, 80_000, 80_000, True),  # from the shutdown (20 s) to the log's last batch (100 s)
        ("orders", str(O1), 2): (1, 50_000, 50_000, False),  # until the topic was removed (80 s)
        ("orders", str(O1), 1): (1, 41_000, 41_000, False),  # until broker 3 came back (71 s)
        ("orders", str(O1), 0): (1, 15_000, 15_000, False),  # until the unclean election (45 s)
    }
    assert [r["partition_id"] for r in read["offline_partitions"].to_pylist()] == [0, 2, 1, 0]  # longest first
    assert read["written"].last_time == at(100)


def broken() -> tuple[LogBuilder, dict[tuple[str, int | None], int]]:
    """A log that breaks each rule of the partition walk and the topic and config checks once, at a known offset."""
    b = LogBuilder()
    expect: dict[tuple[str, int | None], int] = {}

    def found(check: str, offset: int | None) -> None:
        expect[(check, offset)] = expect.get((check, offset), 0) + 1

    T, X, X2 = uid(51), uid(52), uid(53)
    b.add(register(1, 0), register(2, 1), register(3, 2))
    b.add(TopicRecord(name="t", topic_id=T), *(partition(T, i, [1, 2]) for i in range(7)))
    found("isr_not_empty", b.add(pchange(T, 0, leader=-1, isr=[])))
    found("isr_subset_of_replicas", b.add(pchange(T, 1, isr=[1, 3])))
    found("isr_subset_of_replicas", None)  # and so the final state
    found("isr_subset_of_replicas", b.add(pchange(T, 2, replicas=[2, 3])))  # the replicas leave the ISR behind
    found("isr_subset_of_replicas", None)
    found("leader_in_isr", b.add(pchange(T, 3, leader=3)))
    found("leader_in_isr", None)
    found("leader_in_isr", b.add(pchange(T, 4, isr=[2])))  # the leader (1) shrunk out of the ISR
    found("leader_in_isr", None)
    found("partition_epochs_increase", b.add(partition(T, 5, [1, 2])))  # exists: the same epochs again
    b.add(partition(T, 5, [1, 2], leader_epoch=3, partition_epoch=3))  # epochs on: fine
    b.add(pchange(T, 6, isr=[1]))  # leader epoch 0, partition epoch 1
    found("partition_epochs_increase", b.add(partition(T, 6, [1, 2], [2, 1], leader=2, partition_epoch=2)))
    found("partition_exists", b.add(pchange(T, 9, isr=[1])))  # t has partitions 0..6
    found("partitions_added_in_order", b.add(partition(T, 8, [1, 2])))  # the next one is 7
    found("partition_ids_contiguous", None)
    found("remove_of_existing_topic", b.add(RemoveTopicRecord(topic_id=uid(777))))  # never created
    b.add(TopicRecord(name="gone", topic_id=X), partition(X, 0, [1]), topic_config("gone", "retention.ms", "1"))
    b.add(RemoveTopicRecord(topic_id=X))
    found("remove_of_existing_topic", b.add(RemoveTopicRecord(topic_id=X)))  # removed already
    found("config_of_existing_topic", b.add(topic_config("gone", "retention.ms", "2")))
    b.add(TopicRecord(name="gone", topic_id=X2), partition(X2, 0, [1]), topic_config("gone", "retention.ms", "3"))
    return b, expect


def test_each_rule_is_found_at_the_record_that_breaks_it(tmp_path: Path) -> None:
    log, expected = broken()
    read = audit(log, tmp_path, 2)
    got: dict[tuple[str, int | None], int] = {}
    for v in read["violations"].to_pylist():
        got[(v["check"], v["offset"])] = got.get((v["check"], v["offset"]), 0) + 1
    assert dict(sorted(got.items(), key=repr)) == dict(sorted(expected.items(), key=repr))
    by_offset = {(v["check"], v["offset"]): v["explanation"] for v in read["violations"].to_pylist()}
    T = str(uid(51))
    explained = {check: text for (check, offset), text in by_offset.items() if offset is not None}
    assert explained["isr_not_empty"] == f"PartitionChangeRecord leaves partition 0 of topic id {T} with an empty ISR"
    assert explained["partition_exists"] == (
        f"PartitionChangeRecord for partition 9 of topic id {T}, which the topic does not have"
    )
    assert explained["partitions_added_in_order"] == (
        f"PartitionRecord creates partition 8 of topic id {T} while the topic has 7 partition(s): the next partition "
        "is 7"
    )
    assert explained["config_of_existing_topic"] == (
        f"ConfigRecord sets retention.ms of topic 'gone', removed (topic id {uid(52)})"
    )
    epochs = sorted(text for (check, _), text in by_offset.items() if check == "partition_epochs_increase")
    assert epochs == [
        f"PartitionRecord for partition 5 of topic id {T}, which exists, goes from leader 1 / leader epoch 0 / "
        "partition epoch 0 to leader 1 / 0 / 0",
        f"PartitionRecord for partition 6 of topic id {T}, which exists, goes from leader 1 / leader epoch 0 / "
        "partition epoch 1 to leader 2 / 0 / 2",
    ]
    # the findings point at the records: file and byte of their batch
    for v in read["violations"].to_pylist():
        assert (v["file"] is None) == (v["offset"] is None), v


def rows_of(rows: list[dict]) -> pa.Table:
    schema = pa.schema([f for f in RECORD_FIELDS if f.name in history.INPUT])
    return pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)


def test_the_walk_ignores_rows_outside_their_topics_lifetimes_and_ends_partitions_at_removal() -> None:
    def row(kind: str, order: int, **fields: Any) -> dict:
        return {"record_type": kind, "order": order, "offset": order, "file": "f", "position": order} | fields

    full = {"replicas": [1, 2], "isr": [1, 2], "leader": 1, "leader_epoch": 0, "partition_epoch": 0}
    rows = rows_of(
        [
            row("PartitionRecord", 1, topic_id="A", partition_id=0, **full),  # before its topic: an orphan
            row("TopicRecord", 2, topic_id="A", topic_name="a"),
            row("PartitionRecord", 3, topic_id="A", partition_id=0, **full),
            row("PartitionChangeRecord", 4, topic_id="A", partition_id=0, leader=-1),
            row("RemoveTopicRecord", 5, topic_id="A"),
            row("PartitionChangeRecord", 6, topic_id="A", partition_id=0, isr=[]),  # after it: an orphan
            row("TopicRecord", 7, topic_id="A", topic_name="a2"),  # the id again (topic_ids_unique's)
            row("PartitionRecord", 8, topic_id="A", partition_id=0, **full),  # a new partition of the new lifetime
        ]
    )
    found, changes = history.walk(rows)
    assert found.num_rows == 0
    assert [(c["order"], c["topic_name"], c["previous"], c["leader"]) for c in changes.to_pylist()] == [
        (3, "a", None, 1),
        (4, "a", 1, -1),
        (8, "a2", None, 1),
        (5, "a", -1, None),  # the removal ends it
    ]


def test_the_report_shows_the_timeline_and_the_offline_partitions_without_none(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from audit.report import write_report

    log, _ = lifecycle()
    read = audit(log, tmp_path, 1)
    collected = {
        name: read[name].to_pylist()
        for name in ("broker_events", "offline_partitions", "violations", "topics", "partitions")
    }
    collected["brokers_load"] = [{"broker_id": 1, "replicas": 3, "leaders": 1, "rack": None, "fenced": None}]
    result = SimpleNamespace(
        records=len(log.records),
        tables={"topics": 2},
        violations={},
        summary={
            "log_dir": "log",
            "files": 1,
            "last_offset": log.next_offset - 1,
            "offline": {"partitions": 4, "intervals": 4, "total_ms": 186_000, "max_ms": 80_000, "at_end": 1},
        },
    )
    page = write_report(tmp_path / "out", result, collected).read_text()
    assert "None" not in page  # an empty cell is empty
    assert "<h2>Leadership timeline</h2>" in page and "controlled_shutdown" in page
    assert "4 partition(s) were without a leader (-1) 4 time(s), 186.0 s in all, 80.0 s at most; 1 still" in page
    for chart in ("leadership_moves.png", "offline_partitions.png"):
        assert f'<img src="{chart}"' in page and (tmp_path / "out" / chart).read_bytes()[:4] == b"\x89PNG"


brokers = st.lists(st.integers(1, 4), max_size=3, unique=True)
drawn_row = st.one_of(
    st.fixed_dictionaries(
        {"record_type": st.sampled_from(["TopicRecord", "RemoveTopicRecord"]), "topic_id": st.sampled_from("AB")}
    ),
    st.fixed_dictionaries(
        {
            "record_type": st.just("PartitionRecord"),
            "topic_id": st.sampled_from("AB"),
            "partition_id": st.integers(0, 2),
            "replicas": brokers,
            "isr": brokers,
            "leader": st.integers(-1, 4),
            "leader_epoch": st.integers(0, 3),
            "partition_epoch": st.integers(0, 3),
        }
    ),
    st.fixed_dictionaries(
        {
            "record_type": st.just("PartitionChangeRecord"),
            "topic_id": st.sampled_from("AB"),
            "partition_id": st.integers(0, 2),
            "replicas": st.none() | brokers,
            "isr": st.none() | brokers,
            "leader": st.none() | st.integers(-1, 4),
        }
    ),
)


def walked_by_hand(rows: list[dict]) -> tuple[list[tuple[str, int]], list[tuple]]:
    """The walk's rules, one record at a time."""
    found, changes = [], []
    live: dict[str, dict] = {}  # topic id -> {"name", "parts": {index: state}, "count"}
    for r in rows:
        kind, topic, o = r["record_type"], r["topic_id"], r["order"]
        if kind == "TopicRecord":
            live[topic] = {"name": r["topic_name"], "parts": {}}
            continue
        if kind == "RemoveTopicRecord":
            gone = live.pop(topic, None)
            for index, p in (gone or {"parts": {}})["parts"].items():
                changes.append((o, topic, index, p["leader"], None))
            continue
        if topic not in live:
            continue
        parts, index = live[topic]["parts"], r["partition_id"]
        p = parts.get(index)
        if kind == "PartitionRecord":
            new = {k: r[k] for k in ("replicas", "isr", "leader", "leader_epoch", "partition_epoch")}
            if p is None:
                if index != len(parts):
                    found.append(("partitions_added_in_order", o))
            elif (
                new["partition_epoch"] <= p["partition_epoch"]
                or new["leader_epoch"] < p["leader_epoch"]
                or (new["leader"] != p["leader"] and new["leader_epoch"] <= p["leader_epoch"])
            ):
                found.append(("partition_epochs_increase", o))
            changes.append((o, topic, index, None if p is None else p["leader"], new["leader"]))
            parts[index] = new
            if not new["isr"]:
                found.append(("isr_not_empty", o))
            continue
        if p is None:
            found.append(("partition_exists", o))
            continue
        before = p["leader"]
        q = dict(p, partition_epoch=p["partition_epoch"] + 1)
        for f in ("replicas", "isr", "leader"):
            if r[f] is not None:
                q[f] = r[f]
        if r["leader"] is not None:
            q["leader_epoch"] += 1
            changes.append((o, topic, index, before, q["leader"]))
        parts[index] = q
        if r["isr"] is not None and not r["isr"]:
            found.append(("isr_not_empty", o))
        if (r["isr"] is not None or r["replicas"] is not None) and not set(q["isr"]) <= set(q["replicas"]):
            found.append(("isr_subset_of_replicas", o))
        if (r["isr"] is not None or r["leader"] is not None) and q["leader"] != -1 and q["leader"] not in q["isr"]:
            found.append(("leader_in_isr", o))
    return sorted(found), sorted(changes, key=repr)


@settings(max_examples=300, deadline=None)
@given(st.lists(drawn_row, max_size=40), st.randoms())
def test_the_walk_is_the_rules_applied_record_by_record(drawn: list[dict], rnd: Any) -> None:
    rows = []
    for i, d in enumerate(drawn):
        row = d | {"order": 10 + i, "offset": 10 + i, "file": "f", "position": i}
        if d["record_type"] == "TopicRecord":
            row["topic_name"] = f"{d['topic_id'].lower()}{i}"
        rows.append(row)
    want_found, want_changes = walked_by_hand(rows)
    shuffled = rows[:]
    rnd.shuffle(shuffled)  # the walk must not rely on the rows' order
    found, changes = history.walk(rows_of(shuffled))
    assert sorted(zip(found.column("check").to_pylist(), found.column("order").to_pylist(), strict=True)) == want_found
    got = [(c["order"], c["topic_id"], c["partition_id"], c["previous"], c["leader"]) for c in changes.to_pylist()]
    assert sorted(got, key=repr) == want_changes
