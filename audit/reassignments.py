"""Partition reassignments (Kafka's KIP-455) read from the log alone: when each started and ended, the replicas
before and after, and how it ended.

A reassignment is in progress while a partition's ``adding_replicas`` or ``removing_replicas`` is non-empty. The
record that makes one of them non-empty starts it (a PartitionChangeRecord; or a PartitionRecord, when the log
starts mid-move: a snapshot's), with ``replicas`` the target followed by the replicas being removed. Later records
may change the ISR and the leader, or set a new target (a reassignment of a partition in flight starts from the
union: replicas, adding and removing change again). The record that leaves both empty ends it (a
PartitionChangeRecord sets them to empty lists; null is "unchanged"), and the replicas it leaves tell how:

- *completed*: the replicas are the target, the in-progress replicas minus the removing ones (or the record set
  the replicas to a new target, reached at once);
- *cancelled*: the replicas are the original ones, the in-progress replicas minus the adding ones (Kafka's
  revert);
- *other*: neither (``reassignment_ends_at_target_or_original``: no controller writes that).

A PartitionChangeRecord that changes the replicas with nothing being added or removed before or after it (a
reorder, or a shrink whose remaining replicas are all in the ISR) is a reassignment completed in that record
(duration 0). A RemoveTopicRecord ends the topic's reassignments (*topic deleted*; so does a TopicRecord that gives
the id a new lifetime); one still open at the end of the rows is *in progress*. Times are the batches' (records
have none), offsets the records'.

The walk takes the same rows as :mod:`audit.history` (partition rows and topic events of whole topic ids, in any
order; rows outside their topic's lifetimes are left out) and two more columns, the adding and removing replicas.
Only the partitions that ever set their replicas in a PartitionChangeRecord, or have adding or removing replicas,
are walked record by record (in Python: numpy picks them out first). It also checks the rule
``reassignment_within_replicas``: a record that sets a partition's replicas, adding or removing replicas leaves
every adding and every removing replica among the replicas (a reassignment's replicas are the target and the
replicas being removed; a new target starts from them all). Adding and removing replicas may overlap: Kafka's
controller keeps the adding replicas of a reassignment in flight when a new target adds none, and removes the ones
the new target leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.history import TOPIC_EVENT_TYPES
from audit.record_checks import FINDINGS

INPUT = [
    "topic_id",
    "topic_name",
    "partition_id",
    "record_type",
    "order",
    "offset",
    "file",
    "position",
    "append_time",
    "replicas",
    "leader",
    "adding_replicas",
    "removing_replicas",
]
COMPLETED, CANCELLED, TOPIC_DELETED, IN_PROGRESS = "completed", "cancelled", "topic deleted", "in progress"
OTHER = "other"  # ended with neither its target nor its original replicas: a broken log
OUTCOMES = (COMPLETED, CANCELLED, TOPIC_DELETED, IN_PROGRESS, OTHER)

_BROKERS = pa.list_(pa.int32())
REASSIGNMENTS = pa.schema(  # a row per reassignment
    [
        ("topic_id", pa.string()),
        ("topic_name", pa.string()),
        ("partition_id", pa.int32()),
        ("start_offset", pa.int64()),
        ("start_time", pa.timestamp("ms")),  # the batch's
        ("end_offset", pa.int64()),  # null: in progress
        ("end_time", pa.timestamp("ms")),
        ("duration_ms", pa.int64()),  # in progress: up to the log's last batch
        ("original_replicas", _BROKERS),  # before the start (found in progress: the replicas minus the adding ones)
        ("target_replicas", _BROKERS),  # the last target
        ("final_replicas", _BROKERS),  # when it ended (in progress: at the end of the log)
        ("adding_replicas", _BROKERS),  # while in progress (the last values before the end)
        ("removing_replicas", _BROKERS),
        ("outcome", pa.string()),  # OUTCOMES
        ("target_changes", pa.int64()),  # new targets set while in flight
        ("leader_changes", pa.int64()),  # records from the start to the end that gave the partition another leader
        ("found_in_progress", pa.bool_()),  # started before the rows: a PartitionRecord (a snapshot's) was mid-move
    ]
)
MOVES = REASSIGNMENTS.append(pa.field("start_order", pa.int64()))  # what the walk gives; duration null in progress


@dataclass
class _Partition:
    replicas: list[int]
    adding: list[int]
    removing: list[int]
    leader: int | None

    @property
    def moving(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> list[int]:
        return [r for r in self.replicas if r not in self.removing]

    @property
    def original(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]


def _listed(values: list[int]) -> str:
    return ",".join(map(str, values))


def _flags(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _non_empty(lists: pa.Array) -> np.ndarray:
    return np.asarray(pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)) > 0


def _relevant(rows: pa.Table) -> pa.Table | None:
    """The rows of the partitions that ever set their replicas in a PartitionChangeRecord or have adding or
    removing replicas, with their topics' events; None if there are none."""
    kind, replicas, adding, removing, topic = (
        rows.column(c).combine_chunks()
        for c in ("record_type", "replicas", "adding_replicas", "removing_replicas", "topic_id")
    )
    change = _flags(pc.equal(kind, "PartitionChangeRecord").fill_null(False))
    hit = (change & _flags(replicas.is_valid())) | _non_empty(adding) | _non_empty(removing)
    if not hit.any():
        return None
    codes = topic.dictionary_encode().indices.fill_null(-1).to_numpy(zero_copy_only=False)
    codes = np.asarray(codes, dtype=np.int64)
    pid = np.asarray(rows.column("partition_id").fill_null(-1).to_numpy(zero_copy_only=False), dtype=np.int64)
    key = (codes << 32) | (pid & 0xFFFFFFFF)
    event = _flags(pc.is_in(kind, value_set=pa.array(TOPIC_EVENT_TYPES)).fill_null(False))
    keep = np.isin(key, np.unique(key[hit])) | (event & np.isin(codes, np.unique(codes[hit])))
    return rows.filter(pa.array(keep)).select(INPUT).sort_by("order")


class _Walk:
    """The rows of :func:`_relevant`, one at a time in log order."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}  # live topic id -> its name
        self.parts: dict[str, dict[int, _Partition]] = {}  # live topic id -> its partitions
        self.open: dict[tuple[str, int], dict[str, Any]] = {}
        self.moves: list[dict[str, Any]] = []
        self.found: list[tuple[str, dict[str, Any], str]] = []  # (check, row, explanation)

    def row(self, r: dict[str, Any]) -> None:
        kind, tid = r["record_type"], r["topic_id"]
        if kind in TOPIC_EVENT_TYPES:
            for pid, p in sorted(self.parts.pop(tid, {}).items()):
                move = self.open.pop((tid, pid), None)
                if move is not None:
                    self._end(move, r, p, TOPIC_DELETED)
            self.names.pop(tid, None)
            if kind == "TopicRecord":
                self.names[tid] = r["topic_name"]
                self.parts[tid] = {}
            return
        if tid not in self.names:
            return  # outside its topic's lifetimes (partition_of_existing_topic's)
        parts, pid = self.parts[tid], r["partition_id"]
        before = parts.get(pid)
        full = kind == "PartitionRecord"
        if full:
            lists = (list(r[c] or []) for c in ("replicas", "adding_replicas", "removing_replicas"))
            after = _Partition(*lists, leader=r["leader"])
        elif before is None:
            return  # a partition its topic does not have (partition_exists')
        else:
            after = _Partition(
                before.replicas if r["replicas"] is None else list(r["replicas"]),
                before.adding if r["adding_replicas"] is None else list(r["adding_replicas"]),
                before.removing if r["removing_replicas"] is None else list(r["removing_replicas"]),
                before.leader if r["leader"] is None else r["leader"],
            )
        parts[pid] = after
        sets = full or any(r[c] is not None for c in ("replicas", "adding_replicas", "removing_replicas"))
        if sets and after.moving:
            self._check(r, after)
        key = (tid, pid)
        move = self.open.get(key)
        new_leader = before is not None and after.leader != before.leader
        if move is not None:
            move["leader_changes"] += new_leader
        if before is None or not before.moving:
            if after.moving:
                self.open[key] = self._start(r, before, after, new_leader)
            elif not full and r["replicas"] is not None and after.replicas != before.replicas:
                move = self._start(r, before, after, new_leader)
                move["target_replicas"] = after.replicas
                self._end(move, r, after, COMPLETED)
            return
        assert move is not None
        if after.moving:
            if after.target != before.target:
                move["target_changes"] += 1
            move.update(target_replicas=after.target, adding_replicas=after.adding, removing_replicas=after.removing)
            return
        del self.open[key]
        if after.replicas == before.target:
            self._end(move, r, after, COMPLETED)
        elif after.replicas == before.original:
            self._end(move, r, after, CANCELLED)
        elif not full and r["replicas"] is not None:  # a new target, reached in the same record
            move["target_replicas"] = after.replicas
            move["target_changes"] += 1
            self._end(move, r, after, COMPLETED)
        else:
            self.found.append(
                (
                    "reassignment_ends_at_target_or_original",
                    r,
                    f"{kind} ends the reassignment of {self._where(r)} with replicas [{_listed(after.replicas)}], "
                    f"neither its target [{_listed(before.target)}] nor its original replicas "
                    f"[{_listed(before.original)}]",
                )
            )
            self._end(move, r, after, OTHER)

    def _start(self, r: dict[str, Any], before: _Partition | None, after: _Partition, new_leader: bool) -> dict:
        return {
            "topic_id": r["topic_id"],
            "topic_name": self.names[r["topic_id"]],
            "partition_id": r["partition_id"],
            "start_order": r["order"],
            "start_offset": r["offset"],
            "start_time": r["append_time"],
            "original_replicas": after.original if before is None else before.replicas,
            "target_replicas": after.target,
            "adding_replicas": after.adding,
            "removing_replicas": after.removing,
            "target_changes": 0,
            "leader_changes": int(new_leader),
            "found_in_progress": r["record_type"] == "PartitionRecord",
        }

    def _end(self, move: dict[str, Any], r: dict[str, Any] | None, p: _Partition, outcome: str) -> None:
        move["final_replicas"] = p.replicas
        move["outcome"] = outcome
        if r is not None:
            move["end_offset"], move["end_time"] = r["offset"], r["append_time"]
            start, end = move["start_time"], r["append_time"]
            move["duration_ms"] = None if start is None or end is None else max(end - start, 0)
        self.moves.append(move)

    def close(self) -> None:
        """The reassignments still open at the end of the rows."""
        for (tid, pid), move in sorted(self.open.items(), key=lambda item: item[1]["start_order"]):
            self._end(move, None, self.parts[tid][pid], IN_PROGRESS)
        self.open = {}

    def _where(self, r: dict[str, Any]) -> str:
        return f"partition {r['partition_id']} of topic id {r['topic_id']}"

    def _check(self, r: dict[str, Any], p: _Partition) -> None:
        problems = []
        for name, values in (("adding", p.adding), ("removing", p.removing)):
            outside = [b for b in values if b not in p.replicas]
            if outside:
                problems.append(f"{name} [{_listed(outside)}]")
        if problems:
            text = (
                f"{r['record_type']} leaves {self._where(r)} with {' and '.join(problems)} not among its replicas "
                f"[{_listed(p.replicas)}]"
            )
            self.found.append(("reassignment_within_replicas", r, text))


def walk(rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The findings (:data:`audit.record_checks.FINDINGS`) and the reassignments (:data:`MOVES`) of ``rows``:
    partition rows and topic events of whole topic ids, decoded and error-free, in any order; columns
    :data:`INPUT` (more are fine)."""
    if rows.num_rows == 0:
        return FINDINGS.empty_table(), MOVES.empty_table()
    relevant = _relevant(rows.combine_chunks())
    if relevant is None:
        return FINDINGS.empty_table(), MOVES.empty_table()
    ms = pc.cast(relevant.column("append_time"), pa.timestamp("ms", tz="UTC"), safe=False).cast(pa.int64())
    w = _Walk()
    for r in relevant.drop_columns(["append_time"]).append_column("append_time", ms).to_pylist():
        w.row(r)
    w.close()
    found = pa.table(
        {
            "check": pa.array([c for c, _, _ in w.found], pa.string()),
            **{c: [r[c] for _, r, _ in w.found] for c in ("offset", "file", "position")},
            "explanation": pa.array([e for _, _, e in w.found], pa.string()),
            "order": [r["order"] for _, r, _ in w.found],
        },
        schema=FINDINGS,
    )
    moves = {f.name: [m.get(f.name) for m in w.moves] for f in MOVES}
    for c in ("start_time", "end_time"):
        moves[c] = pa.array(moves[c], pa.int64()).cast(pa.timestamp("ms"))
    return found, pa.table(moves, schema=MOVES)


def findings(rows: pa.Table) -> pa.Table:
    return walk(rows)[0]


def moves(rows: pa.Table) -> pa.Table:
    return walk(rows)[1]


def table(walked: pa.Table, end_ms: int | None) -> pa.Table:
    """The reassignments table from the walk's moves (:data:`MOVES`, of any buckets of topics), newest first; one
    in progress counts its duration up to ``end_ms``, the log's last batch time (null without one)."""
    ordered = walked.sort_by([("start_order", "descending"), ("topic_id", "ascending"), ("partition_id", "ascending")])
    start_time = ordered.column("start_time").cast(pa.int64())
    start = np.asarray(start_time.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    open_ = _flags(ordered.column("end_offset").is_null())
    unknown = ~open_ | (end_ms is None) | _flags(start_time.is_null())
    so_far = pa.array(np.maximum((end_ms or 0) - start, 0), pa.int64(), mask=unknown)
    duration = pc.if_else(pa.array(open_), so_far, ordered.column("duration_ms").combine_chunks())
    at = ordered.schema.get_field_index("duration_ms")
    return ordered.set_column(at, "duration_ms", duration).select(REASSIGNMENTS.names).cast(REASSIGNMENTS)


def outcomes(reassignments: pa.Table) -> dict[str, int]:
    """How many reassignments ended each way (only the outcomes that occur)."""
    counts = pc.value_counts(reassignments.column("outcome").combine_chunks()).to_pylist()
    by = {c["values"]: c["counts"] for c in counts}
    return {o: by[o] for o in OUTCOMES if o in by}
