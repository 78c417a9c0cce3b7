"""The audit's ``timeline``: what changed when, a row per change, in words a person reads.

Broker registrations, fencings, unfencings, controlled shutdowns and unregistrations; a partition's leader, ISR and
replicas changing ("leader 101 -> 102", "isr 101,102,103 -> 101,102"); config changes; topics created and deleted;
ACLs created and removed.
Each row has the record's offset and its batch's append time, a kind, a subject (``broker 101``, a topic, a
topic-partition, ``TOPIC orders``) and the detail.

The executors compute it beside the tables (``audit.records``): the merge job's task per bucket of topics the
partitions' changes (:func:`partition_events`: each partition's rows in log order, vectorized: a log of millions of
PartitionChangeRecords never reaches the driver), its last task the brokers', configs' and topics' rows. The driver
reads back only the newest rows for the report (:func:`newest`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from audit import acls

TIMELINE = pa.schema(
    [
        ("order", pa.int64()),  # the replay order (snapshot rows first)
        ("offset", pa.int64()),
        ("time", pa.timestamp("ms")),  # the batch's append time
        ("kind", pa.string()),  # one of KINDS
        ("subject", pa.string()),  # broker 101, a topic, a topic-partition, a config resource
        ("detail", pa.string()),
    ]
)
KINDS = (
    "broker_registered",
    "broker_fenced",
    "broker_unfenced",
    "controlled_shutdown",
    "broker_unregistered",
    "leader",
    "isr",
    "replicas",
    "config",
    "topic_created",
    "topic_deleted",
    "acl_created",
    "acl_removed",
)
# Kafka's ConfigResource.Type ids (the ConfigRecord's ResourceType).
RESOURCE_TYPES = {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
PARTITION_FIELDS = ("leader", "isr", "replicas")
INPUT = ["topic_id", "topic_name", "partition_id", "record_type", "order", "offset", "append_time", *PARTITION_FIELDS]


def resource_type_name(value: int | None) -> str:
    return "" if value is None else RESOURCE_TYPES.get(value, str(value))


def _rows(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=TIMELINE) if rows else TIMELINE.empty_table()


def _text(column: pa.Array) -> pa.Array:
    """A field's value as the page shows it: a number, or a list joined by commas."""
    if pa.types.is_list(column.type):
        return pc.binary_join(pc.cast(column, pa.list_(pa.string())), ",")
    return pc.cast(column, pa.string())


def partition_events(rows: pa.Table) -> pa.Table:
    """The leader, ISR and replicas changes of ``rows``: partition rows and the topics' events (TopicRecord,
    RemoveTopicRecord, for the names) of whole topics, any order; columns :data:`INPUT`. A row per field a record
    changes (one setting a field to the value it had is no change; the record creating a partition is its topic's
    creation)."""
    kind = rows.column("record_type")
    created = rows.filter(pc.equal(kind, "TopicRecord")).sort_by("order")
    part = rows.filter(pc.is_in(kind, value_set=pa.array(["PartitionRecord", "PartitionChangeRecord"])))
    if part.num_rows == 0:
        return TIMELINE.empty_table()
    part = part.sort_by([("topic_id", "ascending"), ("partition_id", "ascending"), ("order", "ascending")])
    part = part.combine_chunks()
    codes = part.column("topic_id").combine_chunks().dictionary_encode().indices.to_numpy(zero_copy_only=False)
    pid = part.column("partition_id").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    key = (codes.astype(np.int64) << 32) | (pid & 0xFFFFFFFF)
    n = part.num_rows
    new = np.ones(n, dtype=bool)
    new[1:] = key[1:] != key[:-1]
    seg_start = np.flatnonzero(new)[np.cumsum(new) - 1]
    # each topic id's name: its last TopicRecord's (all of an id's events are in these rows)
    names = {
        t: name for t, name in zip(*(created.column(c).to_pylist() for c in ("topic_id", "topic_name")), strict=True)
    }
    ids = part.column("topic_id").combine_chunks().dictionary_encode()
    labels = pa.array([names.get(t) or f"topic id {t}" for t in ids.dictionary.to_pylist()], pa.string()).take(
        ids.indices
    )
    subject = pc.binary_join_element_wise(labels, pc.cast(part.column("partition_id"), pa.string()), "-")
    out = []
    for field in PARTITION_FIELDS:
        column = part.column(field).combine_chunks()
        sets = column.is_valid().to_numpy(zero_copy_only=False)
        last = np.maximum.accumulate(np.where(sets, np.arange(n), -1))
        before = np.append(-1, last[:-1])  # the last row before each that set the field
        at = np.flatnonzero(sets & (before >= seg_start))
        if at.size == 0:
            continue
        text = _text(column)
        old, now = text.take(pa.array(before[at])), text.take(pa.array(at))
        changed = pc.not_equal(old, now)
        at, old, now = pc.filter(pa.array(at), changed), old.filter(changed), now.filter(changed)
        if field == "leader":
            now = pc.if_else(pc.equal(now, "-1"), "-1 (no leader)", now)
        taken = part.take(at)
        out.append(
            pa.table(
                {
                    "order": taken.column("order"),
                    "offset": taken.column("offset"),
                    "time": taken.column("append_time"),
                    "kind": pa.array([field] * len(at), pa.string()),
                    "subject": subject.take(at),
                    "detail": pc.binary_join_element_wise(field, old, "->", now, " "),
                },
                schema=TIMELINE,
            )
        )
    return pa.concat_tables([TIMELINE.empty_table(), *out]).sort_by("order")


def broker_events(rows: pa.Table) -> pa.Table:
    """Registrations, fencings, unfencings, controlled shutdowns and unregistrations. A change counts only for the
    broker's registration of the time (same broker epoch), as in ``audit.tables.broker_events``. ``rows``: the
    broker records (``audit.tables.BROKER_EVENT_INPUT``)."""
    registered: dict[int, int | None] = {}
    out = []
    for row in sorted(rows.to_pylist(), key=lambda r: r["order"]):
        kind, broker = row["record_type"], row["broker_id"]
        said: list[tuple[str, str]] = []
        if kind == "RegisterBrokerRecord":
            registered[broker] = row["broker_epoch"]
            detail = f"broker epoch {row['broker_epoch']}" + (f", rack {row['rack']}" if row["rack"] else "")
            said.append(("broker_registered", detail + (", fenced" if row["fenced"] == 1 else ", unfenced")))
        elif broker in registered and registered[broker] == row["broker_epoch"]:
            epoch = f"broker epoch {row['broker_epoch']}"
            if kind == "UnregisterBrokerRecord":
                del registered[broker]
                said.append(("broker_unregistered", epoch))
            if row["fenced"] == 1:
                said.append(("broker_fenced", f"{epoch} ({kind})"))
            elif row["fenced"] == -1:
                said.append(("broker_unfenced", f"{epoch} ({kind})"))
            if row["in_controlled_shutdown"] == 1:
                said.append(("controlled_shutdown", f"{epoch}: in controlled shutdown"))
        for event, detail in said:
            out.append(
                {
                    "order": row["order"],
                    "offset": row["offset"],
                    "time": row["append_time"],
                    "kind": event,
                    "subject": f"broker {broker}",
                    "detail": detail,
                }
            )
    return _rows(out)


def config_events(rows: pa.Table) -> pa.Table:
    """A row per ConfigRecord that changes a value: set (and what it was), or deleted (a null value). ``rows``: the
    ConfigRecords (resource type and name, config name and value, order, offset, append_time)."""
    last: dict[tuple, str | None] = {}
    out = []
    for row in sorted(rows.to_pylist(), key=lambda r: r["order"]):
        key = (row["resource_type"], row["resource_name"], row["config_name"])
        value, was = row["config_value"], last.get(key)
        last[key] = value
        if value == was:
            continue
        name = row["config_name"]
        if value is None:
            detail = f"{name} deleted (was {was})"
        else:
            detail = f"{name} = {value}" + ("" if was is None else f" (was {was})")
        resource = row["resource_name"] or "(default)"
        out.append(
            {
                "order": row["order"],
                "offset": row["offset"],
                "time": row["append_time"],
                "kind": "config",
                "subject": f"{resource_type_name(row['resource_type'])} {resource}",
                "detail": detail,
            }
        )
    return _rows(out)


def topic_events(events: pa.Table) -> pa.Table:
    """Topics created and deleted. ``events``: every TopicRecord and RemoveTopicRecord
    (``audit.tables.TOPIC_INPUT``)."""
    names: dict[str, str] = {}
    out = []
    for row in sorted(events.to_pylist(), key=lambda r: r["order"]):
        created = row["record_type"] == "TopicRecord"
        if created:
            names[row["topic_id"]] = row["topic_name"]
        name = names.get(row["topic_id"])
        out.append(
            {
                "order": row["order"],
                "offset": row["offset"],
                "time": row["append_time"],
                "kind": "topic_created" if created else "topic_deleted",
                "subject": name if name is not None else f"topic id {row['topic_id']}",
                "detail": f"topic id {row['topic_id']}",
            }
        )
    return _rows(out)


def acl_events(rows: pa.Table) -> pa.Table:
    """ACLs created and removed (``audit.acls``). ``rows``: the ACL records (``audit.acls.INPUT``)."""
    return _rows(acls.events(rows))


def newest(directory: Path, limit: int) -> tuple[list[dict], int]:
    """The newest ``limit`` rows of the timeline table (in log order), and how many it has: the driver reads the
    ``order`` column, then only the rows at or after the limit's."""
    data = pads.dataset(directory, format="parquet", schema=TIMELINE)
    orders = data.to_table(columns=["order"]).column("order").to_numpy()
    total = orders.size
    if total == 0:
        return [], 0
    if total > limit:
        cut = int(np.partition(orders, total - limit)[total - limit])
        table = data.to_table(filter=pc.field("order") >= cut)
    else:
        table = data.to_table()
    table = table.sort_by([("order", "ascending"), ("kind", "ascending")])
    return table.slice(max(table.num_rows - limit, 0)).to_pylist(), total
