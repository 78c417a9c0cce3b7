"""Each partition's records walked in log order, in numpy: the state after every record, the rules that need it,
and the leadership changes the report's timeline is made of.

A partition lives within one lifetime of its topic id (a TopicRecord, up to the id's next TopicRecord or
RemoveTopicRecord); rows outside every lifetime are ``partition_of_existing_topic``'s (``audit.invariants``) and
are left out here. Within a lifetime the first PartitionRecord creates the partition; from it on, the state after
each row is the last value each field was set to (a PartitionRecord sets them all), the leader epoch the base's
plus the changes that set a leader, the partition epoch the base's plus every change: Kafka's
``PartitionRegistration.merge``, as :mod:`audit.fold` folds it. The rules, each at the record that breaks it:

- ``isr_not_empty``: a record sets an empty ISR;
- ``isr_subset_of_replicas``, ``leader_in_isr``: a PartitionChangeRecord that sets the ISR, the replicas or the
  leader leaves the partition with an ISR outside its replicas, or a leader (not -1) outside its ISR (a
  PartitionRecord's own fields are checked while decoding: ``audit.record_checks.findings``);
- ``partition_epochs_increase``: a PartitionRecord for a partition that exists must move its epochs on as merge
  would: the partition epoch up, the leader epoch not down, and up if it names another leader;
- ``partition_exists``: a PartitionChangeRecord for a partition its (live) topic does not have;
- ``partitions_added_in_order``: a PartitionRecord creating a partition must create the next one (the topic's
  partition count so far: Kafka's CreatePartitions numbers new partitions from it).

The audit job walks each bucket of topics in its merge task (``audit.records``); ``audit.invariants`` and
``audit.job.analytics`` run the same walk over any rows, in one task.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from audit.record_checks import FINDINGS, _elements, _keys, _within

TOPIC_EVENT_TYPES = ("TopicRecord", "RemoveTopicRecord")
PARTITION_TYPES = ("PartitionRecord", "PartitionChangeRecord")
WHERE = ("order", "offset", "file", "position", "append_time")  # a leadership change's record
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
    "isr",
    "leader",
    "leader_epoch",
    "partition_epoch",
]
CHANGES = pa.schema(  # a row per record that sets a partition's leader, and one per partition its topic's removal ends
    [
        ("topic_id", pa.string()),
        ("topic_name", pa.string()),
        ("partition_id", pa.int32()),
        ("order", pa.int64()),
        ("offset", pa.int64()),
        ("file", pa.string()),
        ("position", pa.int64()),  # with file: the log batch
        ("append_time", pa.timestamp("ms")),
        ("previous", pa.int32()),  # the leader before; null for a new partition
        ("leader", pa.int32()),  # -1 no leader; null: the topic was removed
    ]
)


def _empty() -> tuple[pa.Table, pa.Table]:
    return FINDINGS.empty_table(), CHANGES.empty_table()


def _flags(array: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(array.to_numpy(zero_copy_only=False), dtype=bool)


def _ints(array: pa.Array | pa.ChunkedArray, null: int) -> np.ndarray:
    return np.asarray(array.fill_null(null).to_numpy(zero_copy_only=False), dtype=np.int64)


def _last_set(mask: np.ndarray) -> np.ndarray:
    """Per row: the index of the last row at or before it where ``mask`` holds (-1 if none)."""
    return np.maximum.accumulate(np.where(mask, np.arange(mask.size), -1)) if mask.size else mask.astype(np.int64)


def _not_within(lists: pa.Array, at: np.ndarray, within: pa.Array, within_at: np.ndarray) -> np.ndarray:
    """Per pair k: whether ``lists[at[k]]`` has an element outside ``within[within_at[k]]``."""
    n = at.size
    rows, values = _elements(lists.take(pa.array(at)))
    allowed = np.sort(_keys(*_elements(within.take(pa.array(within_at)))))
    outside = np.zeros(n, dtype=bool)
    outside[rows[~_within(_keys(rows, values), allowed)]] = True
    return outside


def _in_lists(values: np.ndarray, lists: pa.Array, at: np.ndarray) -> np.ndarray:
    """Per pair k: whether ``values[k]`` is an element of ``lists[at[k]]``."""
    keys = np.sort(_keys(*_elements(lists.take(pa.array(at)))))
    return _within(_keys(np.arange(values.size, dtype=np.int64), values), keys)


def walk(rows: pa.Table) -> tuple[pa.Table, pa.Table]:
    """The findings (:data:`audit.record_checks.FINDINGS`) and the leadership changes (:data:`CHANGES`) of
    ``rows``: the partition rows and topic events (TopicRecord, RemoveTopicRecord) of whole topic ids, decoded and
    error-free, in any order; columns :data:`INPUT`."""
    if rows.num_rows == 0:
        return _empty()
    rows = rows.combine_chunks()
    kind = rows.column("record_type")
    event = _flags(pc.is_in(kind, value_set=pa.array(TOPIC_EVENT_TYPES)))
    codes = rows.column("topic_id").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    codes = np.asarray(codes, dtype=np.int64)
    order = rows.column("order").to_numpy()

    # -- lifetimes: each partition row's last topic event before it (in the events' own sorted order)
    by_time = np.lexsort((order, codes))
    is_event = event[by_time]
    event_rank = np.cumsum(is_event) - 1
    last_event_sorted = np.maximum.accumulate(np.where(is_event, event_rank, -1))
    events = by_time[is_event]  # row indexes of the events, by (topic, order)
    last_event = np.full(rows.num_rows, -1, dtype=np.int64)
    last_event[by_time] = last_event_sorted
    created = _flags(pc.equal(kind, "TopicRecord"))
    part = ~event & (last_event >= 0)
    if not part.any():  # no partition row follows a topic event
        return _empty()
    born_row = np.where(part, events[np.maximum(last_event, 0)], -1)
    part &= codes[np.maximum(born_row, 0)] == codes
    part &= created[np.maximum(born_row, 0)]
    if not part.any():
        return _empty()
    # the event that ends each lifetime, if any: the id's next event
    following = np.where(last_event + 1 < events.size, events[np.minimum(last_event + 1, events.size - 1)], -1)
    ends_row = np.where(part & (following >= 0) & (codes[np.maximum(following, 0)] == codes), following, -1)

    # -- each partition's rows within its lifetime, in log order
    take = np.flatnonzero(part)
    # a partition of a lifetime: the lifetime's event (its index among the events sorted by topic) and the index
    lifetime = last_event[take]
    key = (lifetime << 32) | (_ints(rows.column("partition_id"), -1)[take] & 0xFFFFFFFF)
    grouped = np.lexsort((order[take], key))
    at = take[grouped]  # row index of each walked row (only the columns needed are taken, and at few rows)
    n = at.size
    key, lifetime = key[grouped], lifetime[grouped]
    pid = _ints(rows.column("partition_id"), -1)[at]
    new_segment = np.ones(n, dtype=bool)
    new_segment[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(new_segment)
    seg = np.cumsum(new_segment) - 1
    seg_start = starts[seg]
    index = np.arange(n)

    full = _flags(pc.equal(kind, "PartitionRecord"))[at]
    isr, replicas, leader_col = (rows.column(c).combine_chunks() for c in ("isr", "replicas", "leader"))
    sets_isr = full | _flags(isr.is_valid())[at]
    sets_replicas = full | _flags(replicas.is_valid())[at]
    sets_leader = full | _flags(leader_col.is_valid())[at]
    leader = _ints(leader_col, -1)[at]
    base = _last_set(full)
    has_state = base >= seg_start  # at or after the partition's first PartitionRecord in this lifetime
    base_before = np.append(-1, base[:-1])
    first_base = full & (base_before < seg_start)  # creates the partition
    existed = has_state & ~first_base  # the partition existed before this row
    last_isr, last_replicas, last_leader = _last_set(sets_isr), _last_set(sets_replicas), _last_set(sets_leader)
    before = np.maximum(index - 1, 0)

    # epochs after each row: the base's plus the changes since it
    leader_changes = np.cumsum(sets_leader & ~full)
    base_at = np.maximum(base, 0)
    leader_epoch = _ints(rows.column("leader_epoch"), 0)[at[base_at]] + leader_changes - leader_changes[base_at]
    partition_epoch = _ints(rows.column("partition_epoch"), 0)[at[base_at]] + index - base_at
    previous_leader = leader[last_leader[before]]

    found: list[tuple[str, int, str]] = []  # (check, walked row, explanation)

    def where(i: int) -> str:
        return f"partition {pid[i]} of topic id {rows.column('topic_id')[int(at[i])].as_py()}"

    for i in np.flatnonzero(~has_state):
        found.append(("partition_exists", i, f"PartitionChangeRecord for {where(i)}, which the topic does not have"))
    empty = pc.list_value_length(isr).fill_null(1).to_numpy(zero_copy_only=False)[at] == 0
    for i in np.flatnonzero(sets_isr & has_state & empty):
        found.append(("isr_not_empty", i, f"{kind[int(at[i])].as_py()} leaves {where(i)} with an empty ISR"))

    changed = np.flatnonzero(has_state & ~full)
    wide = changed[sets_isr[changed] | sets_replicas[changed]]
    if wide.size:
        for i in wide[_not_within(isr, at[last_isr[wide]], replicas, at[last_replicas[wide]])]:
            s = ",".join(map(str, isr[int(at[last_isr[i]])].as_py()))
            r = ",".join(map(str, replicas[int(at[last_replicas[i]])].as_py()))
            found.append(("isr_subset_of_replicas", i, f"{where(i)}: ISR [{s}] is not within replicas [{r}]"))
    led = changed[sets_isr[changed] | sets_leader[changed]]
    if led.size:
        leaders = leader[last_leader[led]]
        outside = (leaders != -1) & ~_in_lists(leaders, isr, at[last_isr[led]])
        for i in led[outside]:
            s = ",".join(map(str, isr[int(at[last_isr[i]])].as_py()))
            found.append(("leader_in_isr", i, f"{where(i)}: leader {leader[last_leader[i]]} is not in ISR [{s}]"))

    again = np.flatnonzero(full & existed)
    back = (
        (partition_epoch[again] <= partition_epoch[again - 1])
        | (leader_epoch[again] < leader_epoch[again - 1])
        | ((leader[again] != previous_leader[again]) & (leader_epoch[again] <= leader_epoch[again - 1]))
    )
    for i in again[back]:
        found.append(
            (
                "partition_epochs_increase",
                i,
                f"PartitionRecord for {where(i)}, which exists, goes from leader {previous_leader[i]} / leader epoch "
                f"{leader_epoch[i - 1]} / partition epoch {partition_epoch[i - 1]} to leader {leader[i]} / "
                f"{leader_epoch[i]} / {partition_epoch[i]}",
            )
        )

    # partitions created in a lifetime, in log order: each must be the next index
    created_at = np.flatnonzero(first_base)
    by_creation = created_at[np.lexsort((order[at[created_at]], lifetime[created_at]))]
    new_lifetime = np.ones(by_creation.size, dtype=bool)
    new_lifetime[1:] = lifetime[by_creation][1:] != lifetime[by_creation][:-1]
    first_of_lifetime = np.flatnonzero(new_lifetime)
    count = np.arange(by_creation.size) - first_of_lifetime[np.cumsum(new_lifetime) - 1]
    skipped = pid[by_creation] != count
    for i, expected in zip(by_creation[skipped], count[skipped], strict=True):
        found.append(
            (
                "partitions_added_in_order",
                i,
                f"PartitionRecord creates {where(i)} while the topic has {expected} partition(s): the next "
                f"partition is {expected}",
            )
        )

    findings = _findings(rows, [(check, int(at[i]), text) for check, i, text in found])

    # -- leadership changes, and the end of each partition whose topic is removed
    moved = np.flatnonzero(has_state & sets_leader)
    names = rows.column("topic_name")
    changes = pa.table(
        {
            "topic_id": rows.column("topic_id").take(pa.array(at[moved])),
            "topic_name": names.take(pa.array(born_row[at[moved]])),
            "partition_id": pa.array(pid[moved], pa.int32()),
            **{
                c: rows.column(c).take(pa.array(at[moved]))
                for c in ("order", "offset", "file", "position", "append_time")
            },
            "previous": pa.array(previous_leader[moved], pa.int32(), mask=first_base[moved]),
            "leader": pa.array(leader[moved], pa.int32()),
        },
        schema=CHANGES,
    )
    last_rows = np.append(starts[1:], n) - 1
    ends = ends_row[at[last_rows]]
    removed = (ends >= 0) & has_state[last_rows]
    removed &= _flags(pc.equal(kind.take(pa.array(np.maximum(ends, 0))), "RemoveTopicRecord"))
    if removed.any():
        gone, by = last_rows[removed], pa.array(ends[removed])
        changes = pa.concat_tables(
            [
                changes,
                pa.table(
                    {
                        "topic_id": rows.column("topic_id").take(pa.array(at[gone])),
                        "topic_name": names.take(pa.array(born_row[at[gone]])),
                        "partition_id": pa.array(pid[gone], pa.int32()),
                        **{c: rows.column(c).take(by) for c in WHERE},
                        "previous": pa.array(leader[last_leader[gone]], pa.int32()),
                        "leader": pa.nulls(gone.size, pa.int32()),
                    },
                    schema=CHANGES,
                ),
            ]
        )
    return findings, changes


def _findings(t: pa.Table, found: list[tuple[str, int, str]]) -> pa.Table:
    """Findings at rows of ``t``: (check, row index, explanation)."""
    if not found:
        return FINDINGS.empty_table()
    at = pa.array([i for _, i, _ in found], pa.int64())
    return pa.table(
        {
            "check": pa.array([c for c, _, _ in found], pa.string()),
            **{c: t.column(c).take(at) for c in ("offset", "file", "position")},
            "explanation": pa.array([e for _, _, e in found], pa.string()),
            "order": t.column("order").take(at),
        },
        schema=FINDINGS,
    )


def findings(rows: pa.Table) -> pa.Table:
    return walk(rows)[0]


def changes(rows: pa.Table) -> pa.Table:
    return walk(rows)[1]
