"""Partition reassignments without Spark: logs of reassignments written as Kafka's controller writes them (the
target replicas first, then the ones being removed; adding and removing cleared by empty lists), audited by the
job's tasks in this process (audit.records.build_tables). Each reassignment must be found with its start, end,
replicas and outcome, however the log is split; the walk's rule must fire at the record that breaks it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from audit_helpers import (
    TS,
    LogBuilder,
    change,
    partition,
    pchange,
    register,
    snapshot_bytes,
    snapshot_name,
    uid,
)

from audit import reassignments
from audit.records import RECORD_FIELDS, build_tables, in_process, read_summary
from controller.records import NoOpRecord, RemoveTopicRecord, TopicRecord

M, D, K = uid(61), uid(62), uid(63)


def at(seconds: float) -> int:
    return TS + int(seconds * 1000)


def moves_log() -> tuple[LogBuilder, dict[str, int]]:
    """Six brokers; topic "moves" (five partitions) and "doomed" (one) through a completed reassignment, a cancelled
    one, one superseded by a new target and then completed, an instant reorder and an instant shrink, one whose
    topic is deleted in flight and one still in progress at the end. Returns the log and the offsets of its
    reassignments' records."""
    b = LogBuilder()
    b.add(*(register(broker, broker - 1, f"r{broker % 3}") for broker in range(1, 7)), timestamp=at(0))
    b.add(*(change(broker, broker - 1, fenced=-1) for broker in range(1, 7)), timestamp=at(1))
    b.add(
        TopicRecord(name="moves", topic_id=M),
        partition(M, 0, [1, 2, 3]),
        partition(M, 1, [2, 3, 1]),
        partition(M, 2, [3, 1, 2]),
        partition(M, 3, [1, 2, 3]),
        partition(M, 4, [4, 5, 6]),
        timestamp=at(2),
    )
    b.add(TopicRecord(name="doomed", topic_id=D), partition(D, 0, [1, 2]), timestamp=at(2))
    o: dict[str, int] = {}
    # moves-0: [1,2,3] -> [4,2,3]: 4 added, caught up, 1 (the leader) removed
    o["completed"] = b.add(
        pchange(M, 0, replicas=[4, 2, 3, 1], adding_replicas=[4], removing_replicas=[1]), timestamp=at(10)
    )
    b.add(pchange(M, 0, isr=[1, 2, 3, 4]), timestamp=at(12))
    o["completed_end"] = b.add(
        pchange(M, 0, replicas=[4, 2, 3], isr=[2, 3, 4], leader=2, adding_replicas=[], removing_replicas=[]),
        timestamp=at(15),
    )
    # moves-1: [2,3,1] -> [5,6,1], cancelled: Kafka reverts to the in-progress replicas minus the adding ones
    o["cancelled"] = b.add(
        pchange(M, 1, replicas=[5, 6, 1, 2, 3], adding_replicas=[5, 6], removing_replicas=[2, 3]), timestamp=at(20)
    )
    o["cancelled_end"] = b.add(
        pchange(M, 1, replicas=[1, 2, 3], adding_replicas=[], removing_replicas=[]), timestamp=at(30)
    )
    # moves-2: [3,1,2] -> [4,5,6], then, in flight, -> [4,7,1] (from the union), completed; its leader 3 leaves
    o["superseded"] = b.add(
        pchange(M, 2, replicas=[4, 5, 6, 1, 2, 3], adding_replicas=[4, 5, 6], removing_replicas=[1, 2, 3]),
        timestamp=at(40),
    )
    b.add(pchange(M, 2, isr=[3, 1, 2, 4]), timestamp=at(42))
    b.add(
        pchange(M, 2, replicas=[4, 7, 1, 2, 3, 5, 6], adding_replicas=[7], removing_replicas=[2, 3, 5, 6]),
        timestamp=at(45),
    )
    b.add(pchange(M, 2, isr=[3, 1, 2, 4, 7]), timestamp=at(48))
    o["superseded_end"] = b.add(
        pchange(M, 2, replicas=[4, 7, 1], isr=[1, 4, 7], leader=4, adding_replicas=[], removing_replicas=[]),
        timestamp=at(50),
    )
    # moves-3: a reorder, then a shrink whose remaining replicas are in the ISR: each done in one record
    o["reorder"] = b.add(pchange(M, 3, replicas=[2, 1, 3]), timestamp=at(60))
    o["shrink"] = b.add(pchange(M, 3, replicas=[2, 1], isr=[2, 1]), timestamp=at(62))
    b.add(pchange(M, 3, isr=[1]), timestamp=at(63))  # neither: the replicas stay
    # doomed-0: [1,2] -> [3,1,2] in flight when the topic is deleted
    o["doomed"] = b.add(pchange(D, 0, replicas=[3, 1, 2], adding_replicas=[3]), timestamp=at(70))
    o["doomed_end"] = b.add(RemoveTopicRecord(topic_id=D), timestamp=at(80))
    # moves-4: [4,5,6] -> [1,5,6], still moving at the end, its leader elected twice meanwhile
    o["open"] = b.add(
        pchange(M, 4, replicas=[1, 5, 6, 4], adding_replicas=[1], removing_replicas=[4]), timestamp=at(90)
    )
    b.add(pchange(M, 4, leader=5, isr=[5, 6]), timestamp=at(91))
    b.add(pchange(M, 4, leader=5), timestamp=at(92))  # the same leader again: an epoch bump, no change
    b.add(pchange(M, 4, leader=6), timestamp=at(93))
    b.add(NoOpRecord(), timestamp=at(100))
    return b, o


def audit(log: LogBuilder, root: Path, segments: int = 1) -> dict[str, Any]:
    """The job's reassignments table and violations, its tasks run here; the log in ``segments`` files."""
    directory = root / "log" / "__cluster_metadata-0"
    directory.mkdir(parents=True)
    n = len(log.batches)
    for part in range(segments):
        batches = log.batches[part * n // segments : (part + 1) * n // segments]
        base = int.from_bytes(batches[0][:8], "big")
        (directory / f"{base:020d}.log").write_bytes(b"".join(batches))
    out = root / "out"
    written = build_tables(in_process, 2, root / "log", out)
    return {
        "reassignments": reassignments.table(read_summary(out, "reassignment_moves"), written.last_time),
        "violations": pads.dataset(out / "violations", format="parquet").to_table().to_pylist(),
    }


def time_at(seconds: float) -> datetime:
    return datetime.fromtimestamp(at(seconds) / 1000, UTC).replace(tzinfo=None)


COLUMNS = (
    "topic_name", "partition_id", "start_offset", "end_offset", "duration_ms", "original_replicas", "target_replicas",
    "final_replicas", "adding_replicas", "removing_replicas", "outcome", "target_changes", "leader_changes",
)  # fmt: skip


@pytest.mark.parametrize("segments", [1, 3])
def test_each_reassignment_is_found_with_its_replicas_and_outcome(tmp_path: Path, segments: int) -> None:
    log, o = moves_log()
    read = audit(log, tmp_path, segments)
    assert read["violations"] == []
    rows = read["reassignments"].to_pylist()
    got = [tuple(r[c] for c in COLUMNS) for r in rows]
    assert got == [  # newest first
        ("moves", 4, o["open"], None, 10_000, [4, 5, 6], [1, 5, 6], [1, 5, 6, 4], [1], [4], "in progress", 0, 2),
        (
            "doomed", 0, o["doomed"], o["doomed_end"], 10_000, [1, 2], [3, 1, 2], [3, 1, 2], [3], [], "topic deleted",
            0, 0,
        ),
        ("moves", 3, o["shrink"], o["shrink"], 0, [2, 1, 3], [2, 1], [2, 1], [], [], "completed", 0, 0),
        ("moves", 3, o["reorder"], o["reorder"], 0, [1, 2, 3], [2, 1, 3], [2, 1, 3], [], [], "completed", 0, 0),
        (
            "moves", 2, o["superseded"], o["superseded_end"], 10_000, [3, 1, 2], [4, 7, 1], [4, 7, 1], [7],
            [2, 3, 5, 6], "completed", 1, 1,
        ),
        (
            "moves", 1, o["cancelled"], o["cancelled_end"], 10_000, [2, 3, 1], [5, 6, 1], [1, 2, 3], [5, 6], [2, 3],
            "cancelled", 0, 0,
        ),
        (
            "moves", 0, o["completed"], o["completed_end"], 5_000, [1, 2, 3], [4, 2, 3], [4, 2, 3], [4], [1],
            "completed", 0, 1,
        ),
    ]  # fmt: skip
    by_start = {r["start_offset"]: r for r in rows}
    assert by_start[o["completed"]]["start_time"] == time_at(10)  # the batches' times
    assert by_start[o["completed"]]["end_time"] == time_at(15)
    assert by_start[o["open"]]["end_time"] is None  # counted up to the log's last batch (100 s)
    assert by_start[o["doomed"]]["end_time"] == time_at(80)
    assert not any(r["found_in_progress"] for r in rows)
    assert read["reassignments"].schema == reassignments.REASSIGNMENTS
    assert reassignments.outcomes(read["reassignments"]) == {
        "completed": 4,
        "cancelled": 1,
        "topic deleted": 1,
        "in progress": 1,
    }


def test_a_cut_of_the_log_leaves_a_reassignment_in_progress(tmp_path: Path) -> None:
    """--as-of-offset between a reassignment's start and its end: in progress, counted up to the cut's last batch."""
    log, o = moves_log()
    log.write(tmp_path / "log")
    written = build_tables(in_process, 2, tmp_path / "log", tmp_path / "out", as_of_offset=o["completed_end"] - 1)
    table = reassignments.table(read_summary(tmp_path / "out", "reassignment_moves"), written.last_time)
    assert [(r["partition_id"], r["outcome"], r["end_offset"], r["duration_ms"]) for r in table.to_pylist()] == [
        (0, "in progress", None, 2_000)  # from 10 s to the batch at 12 s
    ]


def test_a_snapshot_taken_mid_move_starts_it_at_its_partition_record(tmp_path: Path) -> None:
    """The newest snapshot and the log after it: the reassignment in flight in the snapshot is found at its
    PartitionRecord (an offset within the snapshot) and completed in the log."""
    moving = partition(K, 0, [4, 2, 3, 1], isr=[1, 2, 3])
    moving.adding_replicas, moving.removing_replicas = [4], [1]
    records = [register(b, b - 1) for b in range(1, 5)] + [TopicRecord(name="k", topic_id=K), moving]
    directory = tmp_path / "log" / "__cluster_metadata-0"
    directory.mkdir(parents=True)
    (directory / snapshot_name(10, 1)).write_bytes(snapshot_bytes(records, epoch=1))
    log = LogBuilder(next_offset=10)
    log.add(pchange(K, 0, isr=[1, 2, 3, 4]), timestamp=at(5))
    end = log.add(
        pchange(K, 0, replicas=[4, 2, 3], isr=[2, 3, 4], leader=2, adding_replicas=[], removing_replicas=[]),
        timestamp=at(8),
    )
    (directory / f"{10:020d}.log").write_bytes(log.data())
    written = build_tables(in_process, 2, tmp_path / "log", tmp_path / "out")
    table = reassignments.table(read_summary(tmp_path / "out", "reassignment_moves"), written.last_time)
    (move,) = table.to_pylist()
    assert move["found_in_progress"] and move["outcome"] == "completed"
    assert (move["start_offset"], move["end_offset"]) == (records.index(moving) + 1, end)  # (after the header)
    assert (move["original_replicas"], move["target_replicas"], move["final_replicas"]) == (
        [2, 3, 1],
        [4, 2, 3],
        [4, 2, 3],
    )
    assert move["start_time"] == time_at(0) and move["duration_ms"] == 8_000  # the snapshot's batch time: TS
    assert move["leader_changes"] == 1


def rows_of(rows: list[dict]) -> pa.Table:
    """Walk rows (every column the walk takes; nulls where a row has none), numbered in the order given."""
    schema = pa.schema([f for f in RECORD_FIELDS if f.name in reassignments.INPUT])
    numbered = [
        {"order": i, "offset": i, "file": "f", "position": i, "append_time": None} | r for i, r in enumerate(rows)
    ]
    return pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in numbered], schema=schema)


def test_a_partition_record_mid_move_starts_it_as_found_and_a_new_lifetime_ends_it() -> None:
    """A log that starts mid-move (a snapshot's PartitionRecord with adding and removing replicas): the original
    replicas are the in-progress ones minus the adding ones. A TopicRecord giving the id a new lifetime ends it as
    a removal would; rows outside every lifetime are left out."""
    full = {"record_type": "PartitionRecord", "topic_id": "K", "partition_id": 0, "leader": 1}
    found, moves = reassignments.walk(
        rows_of(
            [
                full | {"replicas": [3, 1, 2], "adding_replicas": [3], "removing_replicas": []},  # no topic yet
                {"record_type": "TopicRecord", "topic_id": "K", "topic_name": "k"},
                full | {"replicas": [4, 2, 1], "adding_replicas": [4], "removing_replicas": [1]},
                {"record_type": "TopicRecord", "topic_id": "K", "topic_name": "k2"},
            ]
        )
    )
    assert found.num_rows == 0
    (move,) = moves.to_pylist()
    assert (move["topic_name"], move["start_offset"], move["end_offset"], move["outcome"]) == (
        "k",
        2,
        3,
        "topic deleted",
    )
    assert move["found_in_progress"] and move["original_replicas"] == [2, 1] and move["target_replicas"] == [4, 2]


def test_the_walks_rules_fire_at_the_record_that_breaks_them() -> None:
    full = {"record_type": "PartitionRecord", "topic_id": "K", "replicas": [1, 2], "leader": 1}
    change_ = {"record_type": "PartitionChangeRecord", "topic_id": "K"}
    found, moves = reassignments.walk(
        rows_of(
            [
                {"record_type": "TopicRecord", "topic_id": "K", "topic_name": "k"},
                full | {"partition_id": 0, "adding_replicas": [], "removing_replicas": []},
                full | {"partition_id": 1},  # (lists left null: as empty)
                change_ | {"partition_id": 0, "adding_replicas": [3]},  # 3 is no replica: 3
                change_ | {"partition_id": 0, "removing_replicas": [4]},  # nor 4 (and 3 still): 4
                change_ | {"partition_id": 1, "replicas": [3, 1, 2], "adding_replicas": [3], "removing_replicas": [1]},
                change_ | {"partition_id": 1, "adding_replicas": [], "removing_replicas": []},  # replicas stay: 6
            ]
        )
    )
    assert [(f["check"], f["offset"]) for f in found.to_pylist()] == [
        ("reassignment_within_replicas", 3),
        ("reassignment_within_replicas", 4),
        ("reassignment_ends_at_target_or_original", 6),
    ]
    explained = found.column("explanation").to_pylist()
    assert explained[1] == (
        "PartitionChangeRecord leaves partition 0 of topic id K with adding [3] and removing [4] not among its "
        "replicas [1,2]"
    )
    assert explained[2] == (
        "PartitionChangeRecord ends the reassignment of partition 1 of topic id K with replicas [3,1,2], neither its "
        "target [3,2] nor its original replicas [1,2]"
    )
    assert sorted((m["partition_id"], m["outcome"]) for m in moves.to_pylist()) == [(0, "in progress"), (1, "other")]


def test_a_log_without_reassignments_has_none(tmp_path: Path) -> None:
    b = LogBuilder()
    b.add(register(1, 0), TopicRecord(name="t", topic_id=K), partition(K, 0, [1]), pchange(K, 0, leader=-1))
    read = audit(b, tmp_path)
    assert read["reassignments"].num_rows == 0 and read["violations"] == []
    assert reassignments.outcomes(read["reassignments"]) == {}


def test_the_report_lists_the_reassignments_newest_first_with_a_count_by_outcome(tmp_path: Path) -> None:
    from audit.report import write_report

    log, _ = moves_log()
    table = audit(log, tmp_path)["reassignments"]
    result = SimpleNamespace(
        records=len(log.records),
        tables={"reassignments": table.num_rows},
        violations={},
        summary={
            "log_dir": "log",
            "files": 1,
            "last_offset": log.next_offset - 1,
            "reassignments": reassignments.outcomes(table),
        },
    )
    page = write_report(tmp_path / "out", result, {"reassignments": table.to_pylist()}).read_text()
    section = page.split("<h2>Reassignments</h2>")[1]
    assert "7 reassignment(s): 4 completed, 1 cancelled, 1 topic deleted, 1 in progress." in section
    assert "None" not in section  # an open reassignment's end is an empty cell
    assert section.index("moves-4") < section.index("doomed-0") < section.index("moves-0")
    assert "<td>4,7,1</td>" in section and "<td>2,3,5,6</td>" in section and "<td>5.0 s</td>" in section
    result.summary["reassignments"] = {}
    assert "No partition was reassigned." in write_report(tmp_path / "out", result, {}).read_text()
