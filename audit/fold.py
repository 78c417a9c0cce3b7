"""Partition state folded on the executors, one log range at a time, while they decode it.

Partition changes are most of a busy log (4.35M of 5M records in the benchmark's), and replaying them row by row
in Spark means grouping millions of rows that carry arrays — an aggregation Spark can only sort. But the fold is
associative: within one range (consecutive batches, in offset order) each partition's rows reduce to one *delta* —
its last PartitionRecord (if the range has one) and, after it, the last value each field was set to and how many
changes (and leader changes) followed. Deltas of consecutive ranges combine the same way the rows do
(:func:`merge_deltas`), so the state is a merge of a few rows per partition and range, not of every record
(``audit.records.write_tables`` runs both).

The fold is the controller's rule (``audit.replay`` states it): a PartitionRecord resets the partition; each later
PartitionChangeRecord overrides the fields it carries (the leader recovery state too), a new leader bumping the
leader epoch and every change the partition epoch.
"""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KEY = ["topic_id", "partition_id"]
FIELDS = ["replicas", "isr", "removing_replicas", "adding_replicas", "leader", "leader_recovery_state"]
INPUT = [*KEY, "order", "record_type", *FIELDS, "leader_epoch", "partition_epoch"]

SCHEMA = pa.schema(
    [
        ("topic_id", pa.string()),
        ("partition_id", pa.int32()),
        ("first_order", pa.int64()),  # of the partition's first row in the range
        ("order", pa.int64()),  # of its last row
        ("base_order", pa.int64()),  # of its last PartitionRecord in the range; null if none
        ("leader_epoch", pa.int32()),  # the base's; null without one
        ("partition_epoch", pa.int32()),
        *[(f, pa.list_(pa.int32())) for f in FIELDS[:4]],
        ("leader", pa.int32()),
        ("leader_recovery_state", pa.int32()),
        ("leader_changes", pa.int64()),  # changes after the base (all of them, without one) that set a leader
        ("changes", pa.int64()),
    ]
)


STATE = pa.schema(
    [
        ("topic_id", pa.string()),
        ("partition_id", pa.int32()),
        *[(f, pa.list_(pa.int32())) for f in FIELDS[:4]],
        ("leader", pa.int32()),
        ("leader_epoch", pa.int32()),
        ("partition_epoch", pa.int32()),
        ("leader_recovery_state", pa.int32()),  # 0 recovered, 1 recovering (after an unclean election)
    ]
)


class PartitionGroups:
    """Rows grouped by partition, in log order within each: a numpy sort on integer keys (a topic id's
    dictionary code and the partition id), three times faster than sorting the strings."""

    def __init__(self, rows: pa.Table) -> None:
        topic_code = rows.column("topic_id").combine_chunks().dictionary_encode().indices.to_numpy()
        partition = rows.column("partition_id").to_numpy().astype(np.int64)
        unsorted_key = (topic_code.astype(np.int64) << 32) | (partition & 0xFFFFFFFF)
        by_key = np.lexsort((rows.column("order").to_numpy(), unsorted_key))
        key = unsorted_key[by_key]
        self.n = n = rows.num_rows
        self.table = rows.take(by_key).combine_chunks()
        new = np.ones(n, dtype=bool)
        new[1:] = key[1:] != key[:-1]
        self.starts = np.flatnonzero(new)
        self.ends = np.append(self.starts[1:], n) - 1
        self.index = np.arange(n)

    def column(self, name: str) -> pa.Array:
        return self.table.column(name).chunk(0)

    def flags(self, array: pa.Array) -> np.ndarray:
        return array.to_numpy(zero_copy_only=False)

    def last_where(self, mask: np.ndarray) -> np.ndarray:
        """Per partition: the index of its last row where ``mask`` holds (below its start if none)."""
        return np.maximum.accumulate(np.where(mask, self.index, -1))[self.ends]

    def last_value(self, name: str, first_considered: np.ndarray) -> pa.Array:
        """Per partition: ``name``'s last non-null value among its rows from ``first_considered`` on."""
        column = self.column(name)
        at = self.last_where(self.flags(column.is_valid()))
        return column.take(pa.array(at, mask=at < first_considered))

    def first(self, name: str) -> pa.Array:
        return self.column(name).take(pa.array(self.starts))


def fold_range(rows: pa.Table) -> pa.Table:
    """One delta row per partition in ``rows`` (its PartitionRecord and PartitionChangeRecord rows, decoded and
    error-free, in any order; columns :data:`INPUT`)."""
    if rows.num_rows == 0:
        return SCHEMA.empty_table()
    g = PartitionGroups(rows)
    starts, ends = g.starts, g.ends
    full = g.flags(pc.equal(g.column("record_type"), "PartitionRecord"))
    base = g.last_where(full)
    has_base = base >= starts
    first_considered = np.where(has_base, base, starts)  # the base, or every row without one
    orders = g.column("order")
    base_index = pa.array(base, mask=~has_base)
    leader_set = (~full) & g.flags(g.column("leader").is_valid())
    counted = np.cumsum(leader_set)
    leaders_before = np.where(has_base, counted[np.maximum(base, 0)], counted[starts] - leader_set[starts])
    return pa.table(
        {
            "topic_id": g.first("topic_id"),
            "partition_id": g.first("partition_id"),
            "first_order": orders.take(pa.array(starts)),
            "order": orders.take(pa.array(ends)),
            "base_order": orders.take(base_index),
            "leader_epoch": g.column("leader_epoch").take(base_index),
            "partition_epoch": g.column("partition_epoch").take(base_index),
            **{name: g.last_value(name, first_considered) for name in FIELDS},
            "leader_changes": pa.array(counted[ends] - leaders_before, pa.int64()),
            "changes": pa.array(np.where(has_base, ends - base, ends - starts + 1), pa.int64()),
        },
        schema=SCHEMA,
    )


def merge_deltas(deltas: pa.Table) -> pa.Table:
    """The partitions' state from their deltas (every delta of each partition, from any ranges, in any order;
    columns :data:`SCHEMA`): the same fold again, a delta with a base resetting the partition. A partition with
    no PartitionRecord has no state."""
    if deltas.num_rows == 0:
        return STATE.empty_table()
    g = PartitionGroups(deltas)
    last_base = g.last_where(g.flags(g.column("base_order").is_valid()))
    has_base = last_base >= g.starts
    base, ends = last_base[has_base], g.ends[has_base]
    at_base = pa.array(base)

    def at_base_plus(epoch: str, counts: str) -> pa.Array:
        """The base's epoch plus ``counts`` summed over the partition's deltas from the base on."""
        c = g.column(counts).to_numpy()
        total = np.cumsum(c)
        start = g.column(epoch).take(at_base).to_numpy()
        return pa.array(start + total[ends] - total[base] + c[base], pa.int32())

    return pa.table(
        {
            "topic_id": g.column("topic_id").take(at_base),
            "partition_id": g.column("partition_id").take(at_base),
            **{name: g.last_value(name, np.maximum(last_base, g.starts)).filter(has_base) for name in FIELDS},
            "leader_epoch": at_base_plus("leader_epoch", "leader_changes"),
            "partition_epoch": at_base_plus("partition_epoch", "changes"),
        },
        schema=STATE,
    )


SPANS = pa.schema([("topic_id", pa.string()), ("first_order", pa.int64()), ("last_order", pa.int64())])


def topic_spans(deltas: pa.Table) -> pa.Table:
    """Per topic id: the orders of its first and last partition rows (a topic's deltas all in ``deltas``)."""
    spans = deltas.group_by("topic_id").aggregate([("first_order", "min"), ("order", "max")])
    return pa.table(
        {
            "topic_id": spans.column("topic_id"),
            "first_order": spans.column("first_order_min"),
            "last_order": spans.column("order_max"),
        },
        schema=SPANS,
    )


def buckets_of(topic_ids: pa.Array | pa.ChunkedArray, buckets: int) -> np.ndarray:
    """A bucket per row by its topic id, the same in every process (Python's own str hash is salted per process):
    every delta of a topic lands in one bucket, whichever range it came from."""
    ids = topic_ids.combine_chunks() if isinstance(topic_ids, pa.ChunkedArray) else topic_ids
    encoded = ids.dictionary_encode()
    per_id = np.array([zlib.crc32(v.encode()) % buckets for v in encoded.dictionary.to_pylist()], dtype=np.int64)
    return per_id[encoded.indices.to_numpy()] if per_id.size else np.zeros(0, dtype=np.int64)
