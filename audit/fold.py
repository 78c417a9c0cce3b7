"""Partition state folded on the executors, one log range at a time, while they decode it.

Partition changes are most of a busy log (4.35M of 5M records in the benchmark's), and replaying them row by row
in Spark means grouping millions of rows that carry arrays — an aggregation Spark can only sort. But the fold is
associative: within one range (consecutive batches, in offset order) each partition's rows reduce to one *delta* —
its last PartitionRecord (if the range has one) and, after it, the last value each field was set to and how many
changes (and leader changes) followed. Deltas of consecutive ranges combine the same way the rows do, so the
driver's Spark job folds a few rows per partition and range instead of every record
(``audit.replay.merge_folds``).

The fold is the controller's rule (``audit.replay`` states it): a PartitionRecord resets the partition; each later
PartitionChangeRecord overrides the fields it carries, a new leader bumping the leader epoch and every change the
partition epoch.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

KEY = ["topic_id", "partition_id"]
FIELDS = ["replicas", "isr", "removing_replicas", "adding_replicas", "leader"]
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
        ("leader_changes", pa.int64()),  # changes after the base (all of them, without one) that set a leader
        ("changes", pa.int64()),
    ]
)


def fold_range(rows: pa.Table) -> pa.Table:
    """One delta row per partition in ``rows`` (its PartitionRecord and PartitionChangeRecord rows, decoded and
    error-free, in any order; columns :data:`INPUT`)."""
    n = rows.num_rows
    if n == 0:
        return SCHEMA.empty_table()
    # Group by partition, in log order within each: a numpy sort on integer keys (a topic id's dictionary code
    # and the partition id), three times faster than sorting the strings.
    topic_code = rows.column("topic_id").combine_chunks().dictionary_encode().indices.to_numpy()
    partition = rows.column("partition_id").to_numpy().astype(np.int64)
    unsorted_key = (topic_code.astype(np.int64) << 32) | (partition & 0xFFFFFFFF)
    by_key = np.lexsort((rows.column("order").to_numpy(), unsorted_key))
    key = unsorted_key[by_key]
    t = rows.take(by_key).combine_chunks()
    tid, pid = t.column("topic_id").chunk(0), t.column("partition_id").chunk(0)
    new = np.ones(n, dtype=bool)
    new[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], n) - 1
    idx = np.arange(n)
    full = pc.equal(t.column("record_type"), "PartitionRecord").to_numpy(zero_copy_only=False)

    def last_where(mask: np.ndarray) -> np.ndarray:
        """Per partition: the index of its last row where ``mask`` holds (below its start if none)."""
        return np.maximum.accumulate(np.where(mask, idx, -1))[ends]

    base = last_where(full)
    has_base = base >= starts
    first_considered = np.where(has_base, base, starts)  # the base, or every row without one

    def last_value(name: str) -> pa.Array:
        column = t.column(name).chunk(0)
        at = last_where(column.is_valid().to_numpy(zero_copy_only=False))
        return column.take(pa.array(at, mask=at < first_considered))

    orders = t.column("order").chunk(0)
    base_index = pa.array(base, mask=~has_base)
    leader_set = (~full) & t.column("leader").chunk(0).is_valid().to_numpy(zero_copy_only=False)
    counted = np.cumsum(leader_set)
    leaders_before = np.where(has_base, counted[np.maximum(base, 0)], counted[starts] - leader_set[starts])
    return pa.table(
        {
            "topic_id": tid.take(pa.array(starts)),
            "partition_id": pid.take(pa.array(starts)),
            "first_order": orders.take(pa.array(starts)),
            "order": orders.take(pa.array(ends)),
            "base_order": orders.take(base_index),
            "leader_epoch": t.column("leader_epoch").chunk(0).take(base_index),
            "partition_epoch": t.column("partition_epoch").chunk(0).take(base_index),
            **{name: last_value(name) for name in FIELDS},
            "leader_changes": pa.array(counted[ends] - leaders_before, pa.int64()),
            "changes": pa.array(np.where(has_base, ends - base, ends - starts + 1), pa.int64()),
        },
        schema=SCHEMA,
    )
