"""The audit's state and analytics tables, computed with pyarrow by the executors' merge job and the driver.

Spark SQL rebuilds the same tables from any rows (:mod:`audit.replay`, ``audit.job.analytics``), and the tests hold
these to it. The job does not use it: the state is small beside the log, and a dozen Spark queries over it cost a
fresh JVM ~10 s of planning, code generation and tiny stages, whatever the number of cores, while the executors
already hold every input in Arrow (``audit.records``). The rules are ``audit.replay``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from audit.fold import STATE

TOPIC_RESOURCE = 2
BROKER_TYPES = (
    "RegisterBrokerRecord",
    "BrokerRegistrationChangeRecord",
    "FenceBrokerRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
)
BROKER_INPUT = ["broker_id", "broker_epoch", "rack", "fenced", "in_controlled_shutdown", "order", "record_type"]
CONFIG_KEY = ["resource_type", "resource_name", "config_name"]
CONFIG_INPUT = [*CONFIG_KEY, "config_value", "order"]
TOPIC_INPUT = ["topic_id", "topic_name", "order", "offset", "file", "position", "append_time", "record_type"]

TOPICS = pa.schema(
    [
        ("topic_id", pa.string()),
        ("topic_name", pa.string()),
        ("created_offset", pa.int64()),
        ("created_time", pa.timestamp("ms")),
    ]
)
PARTITIONS = STATE.insert(1, pa.field("topic_name", pa.string()))  # the folded state, with the topics' names
BROKERS = pa.schema(
    [
        ("broker_id", pa.int32()),
        ("broker_epoch", pa.int64()),
        ("rack", pa.string()),
        ("fenced", pa.bool_()),
        ("in_controlled_shutdown", pa.bool_()),
    ]
)
CONFIGS = pa.schema([(k, pa.int32() if k == "resource_type" else pa.string()) for k in CONFIG_INPUT[:4]])
BROKER_EVENT_INPUT = [*BROKER_INPUT, "offset", "file", "position", "append_time"]
BROKER_EVENTS = pa.schema(
    [
        ("time", pa.timestamp("ms")),  # the batch's
        ("offset", pa.int64()),
        ("broker_id", pa.int32()),
        ("event", pa.string()),  # registered, fenced, unfenced, controlled_shutdown, unregistered (or two of them)
        ("leaders_lost", pa.int64()),  # partitions it led before a leader change in the event's batch, not after
        ("leaders_gained", pa.int64()),
        ("went_offline", pa.int64()),  # of those lost: left with no leader (-1)
        ("leading_after", pa.int64()),  # partitions it leads after the batch
    ]
)
OFFLINE = pa.schema(
    [
        ("topic_id", pa.string()),
        ("topic_name", pa.string()),
        ("partition_id", pa.int32()),
        ("intervals", pa.int64()),  # times it had no leader (leader -1)
        ("total_ms", pa.int64()),  # how long, by the batches' times
        ("max_ms", pa.int64()),
        ("offline_at_end", pa.bool_()),  # still without a leader at the end of the log (counted up to its last batch)
    ]
)


def last_per_key(rows: pa.Table, keys: list[str]) -> pa.Table:
    """Each key's row with the highest ``order``."""
    ordered = rows.sort_by("order")
    numbered = ordered.select(keys).append_column("_i", pa.array(np.arange(ordered.num_rows)))
    last = numbered.group_by(keys, use_threads=False).aggregate([("_i", "max")])
    return ordered.take(last.column("_i_max"))


def _lookup(keys: pa.ChunkedArray | pa.Array, table: pa.Table, key: str, value: str) -> pa.ChunkedArray:
    """``table[value]`` where ``table[key]`` (unique) equals each of ``keys``; null where none does."""
    return table.column(value).take(pc.index_in(keys, value_set=table.column(key).combine_chunks()))


# -- state --------------------------------------------------------------------------------------------------------


def topics(events: pa.Table) -> pa.Table:
    """The live topics: each id's last TopicRecord, unless the id was removed after it. ``events``: the
    TopicRecord and RemoveTopicRecord rows of any set of ids (:data:`TOPIC_INPUT`)."""
    kind = events.column("record_type")
    created = last_per_key(events.filter(pc.equal(kind, "TopicRecord")), ["topic_id"])
    removed = events.filter(pc.equal(kind, "RemoveTopicRecord")).group_by("topic_id").aggregate([("order", "max")])
    removed_at = _lookup(created.column("topic_id"), removed, "topic_id", "order_max")
    live = created.filter(pc.or_kleene(pc.is_null(removed_at), pc.less(removed_at, created.column("order"))))
    return pa.table(
        [live.column(c) for c in ("topic_id", "topic_name", "offset", "append_time")], schema=TOPICS
    ).combine_chunks()


def partitions(state: pa.Table, live: pa.Table) -> pa.Table:
    """The folded partitions (``audit.fold.STATE``) of the ``live`` topics, with their names."""
    names = _lookup(state.column("topic_id"), live, "topic_id", "topic_name")
    named = state.append_column("topic_name", names).filter(pc.is_valid(names))
    return named.select(PARTITIONS.names).cast(PARTITIONS)


def brokers(rows: pa.Table) -> pa.Table:
    """Each broker's last registration, with the later changes to *that* registration (same broker epoch): fenced
    or unfenced, a controlled shutdown, or unregistered (gone). ``rows``: the broker records (:data:`BROKER_INPUT`)."""
    registered: dict[int, dict] = {}
    changes = []
    for row in sorted(rows.to_pylist(), key=lambda r: r["order"]):
        if row["record_type"] == "RegisterBrokerRecord":
            registered[row["broker_id"]] = {**row, "changes": []}
        else:
            changes.append(row)
    for change in changes:
        reg = registered.get(change["broker_id"])
        if reg is not None and change["order"] > reg["order"] and change["broker_epoch"] == reg["broker_epoch"]:
            reg["changes"].append(change)
    out = []
    for broker, reg in registered.items():
        if any(c["record_type"] == "UnregisterBrokerRecord" for c in reg["changes"]):
            continue
        fenced = reg["fenced"]
        for change in reg["changes"]:  # the last change that says fenced (1) or unfenced (-1)
            if change["fenced"] not in (None, 0):
                fenced = change["fenced"]
        shutdown = any(c["in_controlled_shutdown"] == 1 for c in [reg, *reg["changes"]])
        unknown = reg["in_controlled_shutdown"] is None  # and no change says: null, as in SQL
        out.append(
            {
                "broker_id": broker,
                "broker_epoch": reg["broker_epoch"],
                "rack": reg["rack"],
                "fenced": None if fenced is None else fenced == 1,
                "in_controlled_shutdown": True if shutdown else (None if unknown else False),
            }
        )
    return pa.Table.from_pylist(sorted(out, key=lambda b: b["broker_id"]), schema=BROKERS)


def configs(rows: pa.Table, topic_events: pa.Table) -> pa.Table:
    """The last value per key; deleted by a null value, or by removing the topic (by name) after it was set.
    ``rows``: the ConfigRecords (:data:`CONFIG_INPUT`); ``topic_events``: every TopicRecord and RemoveTopicRecord."""
    last = last_per_key(rows, CONFIG_KEY)
    last = last.filter(pc.is_valid(last.column("config_value")))
    events = topic_events.select(["topic_id", "topic_name", "order", "record_type"]).to_pylist()
    names: dict[str, set[str]] = {}
    for e in events:
        if e["record_type"] == "TopicRecord":
            names.setdefault(e["topic_id"], set()).add(e["topic_name"])
    removed: dict[str, int] = {}
    for e in events:
        if e["record_type"] == "RemoveTopicRecord":
            for name in names.get(e["topic_id"], ()):
                removed[name] = max(e["order"], removed.get(name, e["order"]))
    gone = pa.table(
        {"name": pa.array(list(removed), pa.string()), "order": pa.array(list(removed.values()), pa.int64())}
    )
    removed_at = _lookup(last.column("resource_name"), gone, "name", "order")
    topic = pc.equal(last.column("resource_type"), TOPIC_RESOURCE)
    dropped = pc.and_kleene(topic, pc.greater_equal(removed_at, last.column("order")))
    return last.filter(pc.invert(pc.fill_null(dropped, False))).select(CONFIGS.names).cast(CONFIGS)


# -- analytics ----------------------------------------------------------------------------------------------------


def broker_events(rows: pa.Table, changes: pa.Table) -> pa.Table:
    """The leadership timeline per broker: each time it registered, was fenced or unfenced, entered a controlled
    shutdown or unregistered (a change counts only for the broker's registration of the time: same broker epoch),
    with the leader changes in the event's log batch (the controller writes an event's partition changes in its
    batch) that took leaderships from it or gave it some, and how many partitions it leads after that batch.
    ``rows``: the broker records (:data:`BROKER_EVENT_INPUT`); ``changes``: the leadership changes
    (``audit.history.CHANGES``)."""
    registered: dict[int, int | None] = {}
    events = []
    for row in sorted(rows.to_pylist(), key=lambda r: r["order"]):
        kind, broker = row["record_type"], row["broker_id"]
        said = []
        if kind == "RegisterBrokerRecord":
            registered[broker] = row["broker_epoch"]
            said.append("registered")
        elif broker in registered and registered[broker] == row["broker_epoch"]:
            if kind == "UnregisterBrokerRecord":
                del registered[broker]
                said.append("unregistered")
            if row["fenced"] == 1:
                said.append("fenced")
            elif row["fenced"] == -1:
                said.append("unfenced")
            if row["in_controlled_shutdown"] == 1:
                said.append("controlled_shutdown")
        if said:
            events.append({**row, "event": ",".join(said)})
    if not events:
        return BROKER_EVENTS.empty_table()
    batches = {(e["file"], e["position"]) for e in events}
    ordered = changes.sort_by("order")
    near = ordered.filter(pc.is_in(ordered.column("position"), pa.array({p for _, p in batches}, pa.int64())))
    in_batches: dict[tuple[str, int], list[tuple[int | None, int | None, int]]] = {}
    for file, position, previous, leader, order in zip(
        *(near.column(c).to_pylist() for c in ("file", "position", "previous", "leader", "order")), strict=True
    ):
        if (file, position) in batches:
            in_batches.setdefault((file, position), []).append((previous, leader, order))
    counts = _leaders_over_time(ordered)
    out = []
    for e in events:
        moves = in_batches.get((e["file"], e["position"]), [])
        b = e["broker_id"]
        lost = [leader for previous, leader, _ in moves if previous == b and leader is not None and leader != b]
        gained = [1 for previous, leader, _ in moves if leader == b and previous is not None and previous != b]
        upto = max([e["order"], *(order for _, _, order in moves)])
        orders, leading = counts.get(b, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        at = int(np.searchsorted(orders, upto, side="right"))
        out.append(
            {
                "time": e["append_time"],
                "offset": e["offset"],
                "broker_id": b,
                "event": e["event"],
                "leaders_lost": len(lost),
                "leaders_gained": len(gained),
                "went_offline": sum(1 for leader in lost if leader == -1),
                "leading_after": int(leading[at - 1]) if at else 0,
            }
        )
    return pa.Table.from_pylist(out, schema=BROKER_EVENTS)


def _leaders_over_time(changes: pa.Table) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per broker: the orders of the changes that gave it a leadership or took one, and how many partitions it led
    after each (``changes`` in log order)."""
    order = changes.column("order").to_numpy()
    parts = []
    for column, step in (("leader", 1), ("previous", -1)):
        broker = changes.column(column)
        named = pc.fill_null(pc.greater_equal(broker, 0), False).to_numpy(zero_copy_only=False)
        parts.append((broker.to_numpy(zero_copy_only=False)[named].astype(np.int64), order[named], step))
    brokers = np.concatenate([b for b, _, _ in parts])
    orders = np.concatenate([o for _, o, _ in parts])
    steps = np.concatenate([np.full(b.size, s, np.int64) for b, _, s in parts])
    by = np.lexsort((orders, brokers))
    brokers, orders, steps = brokers[by], orders[by], steps[by]
    out = {}
    for b in np.unique(brokers):
        lo, hi = np.searchsorted(brokers, b), np.searchsorted(brokers, b, side="right")
        out[int(b)] = (orders[lo:hi], np.cumsum(steps[lo:hi]))
    return out


def offline_partitions(changes: pa.Table, end_ms: int | None) -> pa.Table:
    """Per partition that was ever without a leader: how many times, for how long in all and at most, by the
    batches' times, from the record that left it leaderless to the one that gave it a leader again (or removed its
    topic); one still leaderless at the end counts up to ``end_ms``, the log's last batch time. ``changes``: the
    leadership changes (``audit.history.CHANGES``)."""
    if changes.num_rows == 0:
        return OFFLINE.empty_table()
    t = changes.sort_by([("topic_id", "ascending"), ("partition_id", "ascending"), ("order", "ascending")])
    topic = t.column("topic_id").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    key = (topic.astype(np.int64) << 32) | t.column("partition_id").to_numpy().astype(np.int64)
    n = t.num_rows
    new = np.ones(n, dtype=bool)
    new[1:] = key[1:] != key[:-1]
    group_end = np.append(np.flatnonzero(new)[1:], n)[np.cumsum(new) - 1]  # one past each row's partition's last
    off = pc.fill_null(pc.equal(t.column("leader"), -1), False).to_numpy(zero_copy_only=False)
    was_off = np.zeros(n, dtype=bool)
    was_off[1:] = off[:-1] & ~new[1:]
    starts = np.flatnonzero(off & ~was_off)
    if starts.size == 0:
        return OFFLINE.empty_table()
    # the first row after each start (of the same partition) that is not leaderless ends it
    next_on = np.minimum.accumulate(np.where(~off, np.arange(n), n)[::-1])[::-1]
    ends = next_on[starts]
    still = ends >= group_end[starts]
    ms = pc.cast(t.column("append_time"), pa.int64()).to_numpy(zero_copy_only=False)
    last = end_ms if end_ms is not None else int(ms.max())
    stop = np.where(still, last, ms[np.minimum(ends, n - 1)])
    intervals = pa.table(
        {
            "topic_id": t.column("topic_id").take(pa.array(starts)),
            "topic_name": t.column("topic_name").take(pa.array(starts)),
            "partition_id": t.column("partition_id").take(pa.array(starts)),
            "ms": pa.array(np.maximum(stop - ms[starts], 0), pa.int64()),
            "open": pa.array(still),
        }
    )
    summary = intervals.group_by(["topic_id", "topic_name", "partition_id"], use_threads=False).aggregate(
        [([], "count_all"), ("ms", "sum"), ("ms", "max"), ("open", "any")]
    )
    return pa.table(
        {
            "topic_id": summary.column("topic_id"),
            "topic_name": summary.column("topic_name"),
            "partition_id": summary.column("partition_id"),
            "intervals": summary.column("count_all"),
            "total_ms": summary.column("ms_sum"),
            "max_ms": summary.column("ms_max"),
            "offline_at_end": summary.column("open_any"),
        },
        schema=OFFLINE,
    ).sort_by([("total_ms", "descending"), ("topic_name", "ascending"), ("partition_id", "ascending")])


def topics_per_minute(created: pa.Table) -> pa.Table:
    """``created``: the TopicRecord rows (``append_time``)."""
    minute = pc.floor_temporal(created.column("append_time"), unit="minute")
    counts = pa.table({"minute": minute}).group_by("minute").aggregate([("minute", "count")])
    return pa.table({"minute": counts.column("minute"), "topics_created": counts.column("minute_count")}).sort_by(
        "minute"
    )


def _sums(table: pa.Table, key: str, columns: list[str], count: str | None = None) -> pa.Table:
    """Per ``key``: the sum of each of ``columns``, and the number of rows as ``count``."""
    grouped = table.group_by(key, use_threads=False).aggregate(
        [(c, "sum") for c in columns] + ([([], "count_all")] if count else [])
    )
    out = {key: grouped.column(key), **{c: grouped.column(f"{c}_sum") for c in columns}}
    if count:
        out[count] = grouped.column("count_all")
    return pa.table(out)


def analytics(partitions_table: pa.Table, brokers_table: pa.Table, configs_table: pa.Table) -> dict[str, pa.Table]:
    """Partitions and leaders per broker and per rack, replication factors, configs in use: from the state tables
    (a row per partition, broker or config: the size of the cluster, not of its log)."""
    replicas = partitions_table.column("replicas").combine_chunks()
    owner = pc.list_parent_indices(replicas)
    broker = pc.list_flatten(replicas)
    leader = partitions_table.column("leader").combine_chunks().take(owner)
    per_replica = pa.table(
        {
            "broker_id": broker,
            "replicas": pa.array(np.ones(len(broker), np.int64)),
            "leaders": pc.cast(pc.fill_null(pc.equal(leader, broker), False), pa.int64()),
        }
    )
    load = _sums(per_replica, "broker_id", ["replicas", "leaders"])
    load = load.join(brokers_table.select(["broker_id", "rack", "fenced"]), "broker_id", join_type="full outer")
    load = pa.table(
        {
            "broker_id": load.column("broker_id"),
            "replicas": pc.fill_null(load.column("replicas"), 0),
            "leaders": pc.fill_null(load.column("leaders"), 0),
            "rack": load.column("rack"),
            "fenced": load.column("fenced"),
        }
    ).sort_by("broker_id")
    named_racks = load.drop_columns(["rack"]).append_column("rack", pc.fill_null(load.column("rack"), "(none)"))
    racks = _sums(named_racks, "rack", ["replicas", "leaders"], "brokers").sort_by("rack")
    per_topic = (
        pa.table(
            {
                "topic_id": partitions_table.column("topic_id"),
                "replication_factor": pc.list_value_length(partitions_table.column("replicas")),
            }
        )
        .group_by("topic_id", use_threads=False)
        .aggregate([("replication_factor", "max"), ([], "count_all")])
    )
    factors = _sums(
        pa.table(
            {
                "replication_factor": per_topic.column("replication_factor_max"),
                "partitions": per_topic.column("count_all"),
            }
        ),
        "replication_factor",
        ["partitions"],
        "topics",
    )
    factors = factors.select(["replication_factor", "topics", "partitions"]).sort_by("replication_factor")
    in_use = (
        configs_table.group_by(["resource_type", "config_name", "config_value"], use_threads=False)
        .aggregate([([], "count_all")])
        .rename_columns(["resource_type", "config_name", "config_value", "resources"])
    )
    in_use = in_use.sort_by([("resources", "descending"), ("config_name", "ascending")])
    return {"brokers_load": load, "racks_load": racks, "replication_factors": factors, "configs_in_use": in_use}


def read_table(directory: Path, schema: pa.Schema) -> pa.Table:
    return pads.dataset(directory, format="parquet", schema=schema).to_table()


def write_table(table: pa.Table, directory: Path, part: str = "part-00000.parquet") -> None:
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / part)


# -- the report's overview and warnings ----------------------------------------------------------------------------

TOPICS_OVERVIEW = pa.schema(
    [
        ("topic_name", pa.string()),
        ("topic_id", pa.string()),
        ("partitions", pa.int64()),
        ("replication_factor", pa.int64()),
        ("configs_overridden", pa.int64()),
        ("created_offset", pa.int64()),
        ("created_time", pa.timestamp("ms")),
        ("deleted", pa.bool_()),
        ("deleted_offset", pa.int64()),
    ]
)


def topics_overview(events: pa.Table, partitions_table: pa.Table, configs_table: pa.Table) -> pa.Table:
    """Every topic id's last creation, live or deleted, by name: its partitions and replication factor (live ones:
    from the state), the configs set on it, when it was created and whether (and where) it was deleted.
    ``events``: every TopicRecord and RemoveTopicRecord (:data:`TOPIC_INPUT`)."""
    kind = events.column("record_type")
    created = last_per_key(events.filter(pc.equal(kind, "TopicRecord")), ["topic_id"])
    if created.num_rows == 0:
        return TOPICS_OVERVIEW.empty_table()
    removals = events.filter(pc.equal(kind, "RemoveTopicRecord"))
    removed = last_per_key(removals, ["topic_id"]) if removals.num_rows else removals
    removed_order = _lookup(created.column("topic_id"), removed, "topic_id", "order")
    deleted = pc.fill_null(pc.greater(removed_order, created.column("order")), False)
    sizes = pa.table(
        {
            "topic_id": partitions_table.column("topic_id"),
            "rf": pc.list_value_length(partitions_table.column("replicas")),
        }
    )
    per_topic = sizes.group_by("topic_id", use_threads=False).aggregate([([], "count_all"), ("rf", "max")])
    topic_configs = configs_table.filter(pc.equal(configs_table.column("resource_type"), TOPIC_RESOURCE))
    per_name = topic_configs.group_by("resource_name", use_threads=False).aggregate([([], "count_all")])
    live = pc.invert(deleted)
    configured = pc.fill_null(_lookup(created.column("topic_name"), per_name, "resource_name", "count_all"), 0)
    return pa.table(
        {
            "topic_name": created.column("topic_name"),
            "topic_id": created.column("topic_id"),
            "partitions": _lookup(created.column("topic_id"), per_topic, "topic_id", "count_all"),
            "replication_factor": pc.cast(
                _lookup(created.column("topic_id"), per_topic, "topic_id", "rf_max"), pa.int64()
            ),
            "configs_overridden": pc.if_else(live, configured, None),
            "created_offset": created.column("offset"),
            "created_time": created.column("append_time"),
            "deleted": deleted,
            "deleted_offset": pc.if_else(
                deleted, _lookup(created.column("topic_id"), removed, "topic_id", "offset"), None
            ),
        },
        schema=TOPICS_OVERVIEW,
    ).sort_by([("topic_name", "ascending"), ("created_offset", "ascending")])


def warnings(partitions_table: pa.Table, brokers_table: pa.Table, rows: int) -> dict[str, dict]:
    """What a reader must see first, from the state at the end of the log (or the audited offset): partitions led by
    a fenced broker, partitions without a leader (-1), partitions led by a broker that is not registered. Each: the
    count, per broker (where one is named), and the first ``rows`` partitions."""
    leader = partitions_table.column("leader")
    brokers = brokers_table.column("broker_id").combine_chunks()
    fenced = brokers_table.filter(pc.fill_null(brokers_table.column("fenced"), False)).column("broker_id")
    masks = {
        "leaders_on_fenced_brokers": pc.is_in(leader, value_set=fenced.combine_chunks()),
        "offline_partitions": pc.equal(leader, -1),
        "leaders_not_registered": pc.and_(pc.greater_equal(leader, 0), pc.invert(pc.is_in(leader, value_set=brokers))),
    }
    out = {}
    for name, mask in masks.items():
        hit = partitions_table.filter(pc.fill_null(mask, False))
        entry: dict[str, Any] = {"count": hit.num_rows}
        if name != "offline_partitions":
            counts = pc.value_counts(hit.column("leader")).to_pylist() if hit.num_rows else []
            entry["by_broker"] = {c["values"]: c["counts"] for c in sorted(counts, key=lambda c: c["values"])}
        first = hit.sort_by([("topic_name", "ascending"), ("partition_id", "ascending")]).slice(0, rows)
        entry["rows"] = first.select(["topic_name", "partition_id", "leader", "replicas", "isr"]).to_pylist()
        out[name] = entry
    return out
