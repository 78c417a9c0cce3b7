"""The invariant checks of the audit job's tasks, in numpy and pyarrow: beside the decoding, and in the merge job.

Partition records are most of a busy log, and the rules that look at one record alone — replicas distinct, ISR
within replicas, leader in the ISR — are a few numpy passes over a range's Arrow columns, where a Spark query would
read every record's arrays back from Parquet to find the (rare) few that break them: each range gives its
findings directly (:func:`findings`). The rules that need the whole log start from the buckets of topics or small
summaries: the merge job walks each bucket's partitions in log order (:mod:`audit.history`: the state after each
change, the epochs, added partitions) and finds the topics whose partition rows leave their lifetime
(:func:`orphan_suspects`); the driver compares the brokers each range names with their first
registrations (:func:`early_brokers`). Rows are read again only for a suspect
(:func:`audit.invariants.suspects_findings`). The merge job also checks the log's batches, the topic and config records
and the final state (the last section). ``audit.invariants`` states every rule as a Spark query over any rows (with
``mapInArrow`` for the per-record ones), and the tests hold these to it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

INPUT = ["topic_id", "partition_id", "record_type", "order", "offset", "file", "position", "replicas", "isr", "leader"]

FINDINGS = pa.schema(
    [
        ("check", pa.string()),
        ("offset", pa.int64()),
        ("file", pa.string()),
        ("position", pa.int64()),
        ("explanation", pa.string()),
        ("order", pa.int64()),  # for a cut of the log (--as-of-offset)
    ]
)
COLUMNS = FINDINGS.names[:5]  # of the violations table
MENTIONS = pa.schema([("broker_id", pa.int32()), ("first_order", pa.int64())])


def _found(check: str, rows: list[dict], explanations: list[str]) -> pa.Table:
    """Findings of ``check`` at ``rows`` (each with the offset, file, position and order it has, if any)."""
    return pa.table(
        {
            "check": [check] * len(rows),
            **{name: [row.get(name) for row in rows] for name in ("offset", "file", "position")},
            "explanation": explanations,
            "order": [row.get("order") for row in rows],
        },
        schema=FINDINGS,
    )


def _elements(lists: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(row index, value) of every element of a list column; null lists have none."""
    rows = pc.list_parent_indices(lists).to_numpy().astype(np.int64)
    return rows, pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def _keys(rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """One int64 per (row, value): set operations within each row become operations on whole columns."""
    return (rows << 32) | (values & 0xFFFFFFFF)


def _within(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """``np.isin`` for a sorted right side: a binary search (numpy's isin hashes both sides, 20x slower here)."""
    if sorted_keys.size == 0:
        return np.zeros(keys.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), sorted_keys.size - 1)
    return sorted_keys[at] == keys


def _rows_where(n: int, rows: np.ndarray) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return mask


def _column(t: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    column = t.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def findings(rows: pa.Table | pa.RecordBatch) -> pa.Table:
    """Findings of the per-record rules in partition rows (decoded, error-free; columns :data:`INPUT`)."""
    n = rows.num_rows
    if n == 0:
        return FINDINGS.empty_table()
    replicas, isr = _column(rows, "replicas"), _column(rows, "isr")
    full = pc.equal(_column(rows, "record_type"), "PartitionRecord").to_numpy(zero_copy_only=False)
    both = full & replicas.is_valid().to_numpy(zero_copy_only=False) & isr.is_valid().to_numpy(zero_copy_only=False)

    replica_keys = np.sort(_keys(*_elements(replicas)))
    repeat = _rows_where(n, replica_keys[1:][replica_keys[1:] == replica_keys[:-1]] >> 32)
    isr_rows, isr_values = _elements(isr)
    isr_keys = _keys(isr_rows, isr_values)
    outside = both & _rows_where(n, isr_rows[~_within(isr_keys, replica_keys)])
    leader = _column(rows, "leader")
    leader_values = leader.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    leader_in = _within(_keys(np.arange(n, dtype=np.int64), leader_values), np.sort(isr_keys))
    leaderless = full & isr.is_valid().to_numpy(zero_copy_only=False) & (leader_values != -1) & ~leader_in

    broken = np.flatnonzero(repeat | outside | leaderless)
    if broken.size == 0:
        return FINDINGS.empty_table()
    out: dict[str, list] = {name: [] for name in FINDINGS.names}
    few = rows.take(pa.array(broken))  # the explanations are built only for the rows that break a rule
    for i, row in zip(broken, few.to_pylist(), strict=True):
        where = f"partition {row['partition_id']} of topic id {row['topic_id']}"
        r, s = ",".join(map(str, row["replicas"] or [])), ",".join(map(str, row["isr"] or []))
        for check, hit, text in (
            ("replicas_distinct", repeat[i], f"{where} lists replicas {r} with a repeat"),
            ("isr_subset_of_replicas", outside[i], f"{where}: ISR [{s}] is not within replicas [{r}]"),
            ("leader_in_isr", leaderless[i], f"{where}: leader {row['leader']} is not in ISR [{s}]"),
        ):
            if hit:
                for name, value in (("check", check), ("explanation", text)):
                    out[name].append(value)
                for name in ("offset", "file", "position", "order"):
                    out[name].append(row[name])
    return pa.table(out, schema=FINDINGS)


def mentions(rows: pa.Table | pa.RecordBatch) -> pa.Table:
    """Each broker the rows name (in replicas or ISR), with the order of the first row that names it."""
    orders = _column(rows, "order").to_numpy()
    named = [_elements(_column(rows, name)) for name in ("replicas", "isr")]
    brokers = np.concatenate([values for _, values in named])
    first = np.concatenate([orders[at] for at, _ in named])
    table = pa.table({"broker_id": pa.array(brokers, pa.int32()), "first_order": pa.array(first, pa.int64())})
    summary = table.group_by("broker_id").aggregate([("first_order", "min")])
    return pa.table(
        {"broker_id": summary.column("broker_id"), "first_order": summary.column("first_order_min")}, schema=MENTIONS
    )


def over_partition(
    check: Callable[[pa.Table], pa.Table],
) -> Callable[[Iterable[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``check`` for ``DataFrame.mapInArrow`` (rows that did not come through the executors' decode): once over all
    the rows of a Spark partition."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = list(batches)
        if rows:
            yield from check(pa.Table.from_batches(rows)).to_batches()

    return run


# -- the checks that need the whole log, settled from small summaries ---------------------------------------------

TOPIC_EVENTS = ["topic_id", "order", "record_type"]  # the TopicRecord and RemoveTopicRecord rows
REGISTRATIONS = pa.schema([("broker_id", pa.int32()), ("order", pa.int64())])  # of the RegisterBrokerRecord rows
SUSPECTS = pa.schema([("topic_id", pa.string())])


def orphan_suspects(spans: pa.Table, events: pa.Table | None) -> pa.Table:
    """The topic ids whose partition rows do not all lie in one lifetime of the id (a creation, up to the id's
    next event). ``spans``: per topic id, the orders of its first and last partition rows (``first_order``,
    ``last_order``); ``events``: every TopicRecord and RemoveTopicRecord of those ids (:data:`TOPIC_EVENTS`).
    Only their rows need a closer look (``audit.invariants``); none in a sound log."""
    lifetimes: dict[str, list[tuple[int, int | None]]] = {}
    ordered = {} if events is None else events.sort_by([("topic_id", "ascending"), ("order", "ascending")]).to_pydict()
    rows = list(zip(*(ordered.get(c, []) for c in TOPIC_EVENTS), strict=True))
    for i, (topic, order, kind) in enumerate(rows):
        if kind == "TopicRecord":
            following = rows[i + 1] if i + 1 < len(rows) and rows[i + 1][0] == topic else None
            lifetimes.setdefault(topic, []).append((order, None if following is None else following[1]))
    suspects = [
        topic
        for topic, first, last in zip(
            spans.column("topic_id").to_pylist(),
            spans.column("first_order").to_pylist(),
            spans.column("last_order").to_pylist(),
            strict=True,
        )
        if not any(born < first and (ends is None or ends > last) for born, ends in lifetimes.get(topic, ()))
    ]
    return pa.table({"topic_id": pa.array(sorted(suspects), pa.string())}, schema=SUSPECTS)


def early_brokers(mentions: pa.Table, registrations: pa.Table) -> tuple[list[int], dict[int, int]]:
    """The brokers named (``mentions``: broker_id, first_order, any number of rows per broker) before their first
    registration (``registrations``: :data:`REGISTRATIONS`) or never registered; and each broker's first
    registration."""
    first: dict[int, int] = {}
    for broker, order in zip(
        registrations.column("broker_id").to_pylist(), registrations.column("order").to_pylist(), strict=True
    ):
        first[broker] = min(order, first.get(broker, order))
    named: dict[int, int] = {}
    for broker, order in zip(
        mentions.column("broker_id").to_pylist(), mentions.column("first_order").to_pylist(), strict=True
    ):
        named[broker] = min(order, named.get(broker, order))
    return sorted(b for b, order in named.items() if first.get(b, order + 1) > order), first


# -- the checks the merge job runs over whole tables: the log's batches, topic records, the final state ----------


def unreadable(errors: pa.Table | pa.RecordBatch) -> pa.Table:
    """readable: each row that did not decode (``errors``: rows with ``error`` set) says why."""
    rows = errors.select(["offset", "file", "position", "order", "error"]).to_pylist()
    return _found("readable", rows, [row["error"] for row in rows])


def batch_findings(batches: pa.Table) -> pa.Table:
    """crc_valid over every batch; offsets_contiguous and epochs_non_decreasing along the log's batches in offset
    order. ``batches``: a row per batch (``audit.records``: file, position, source, offset, last, epoch,
    crc_valid)."""
    bad = batches.filter(pc.invert(batches.column("crc_valid"))).to_pylist()
    found = [
        _found(
            "crc_valid",
            bad,
            [f"batch at byte {b['position']} (offsets {b['offset']}-{b['last']}) fails its CRC-32C check" for b in bad],
        )
    ]
    log = batches.filter(pc.equal(batches.column("source"), "log")).sort_by("offset")
    if log.num_rows > 1:
        offset, last = log.column("offset").to_numpy(), log.column("last").to_numpy()
        epoch = log.column("epoch").fill_null(0).to_numpy()
        known = log.column("epoch").is_valid().to_numpy(zero_copy_only=False)  # a null epoch compares with nothing
        gaps = np.flatnonzero(offset[1:] != last[:-1] + 1) + 1
        back = np.flatnonzero(known[1:] & known[:-1] & (epoch[1:] < epoch[:-1])) + 1
        for check, at, explain in (
            ("offsets_contiguous", gaps, "batch starts at offset {}, but the batch before ended at {}"),
            ("epochs_non_decreasing", back, "epoch {} follows epoch {}"),
        ):
            column = offset if check == "offsets_contiguous" else epoch
            before = last if check == "offsets_contiguous" else epoch
            rows = log.take(pa.array(at)).to_pylist()
            found.append(_found(check, rows, [explain.format(column[i], before[i - 1]) for i in at]))
    return pa.concat_tables(found)


def reused_topic_ids(created: pa.Table) -> pa.Table:
    """topic_ids_unique: each TopicRecord after the first with its id (``created``: every TopicRecord of those
    ids, with ``topic_name``, ``order`` and where it lies)."""
    found, first = [], {}
    for row in created.sort_by("order").to_pylist():
        if row["topic_id"] in first:
            found.append(row)
        else:
            first[row["topic_id"]] = row["topic_name"]
    explanations = [
        f"topic id {r['topic_id']} is reused for topic '{r['topic_name']}' (first used for '{first[r['topic_id']]}')"
        for r in found
    ]
    return _found("topic_ids_unique", found, explanations)


def live_name_clashes(events: pa.Table) -> pa.Table:
    """one_live_topic_id_per_name: a TopicRecord giving a name a new id while the id the name had before is still
    live (not removed before it). ``events``: every TopicRecord and RemoveTopicRecord."""
    rows = events.sort_by("order").to_pylist()
    removals: dict[str, list[int]] = {}
    for row in rows:
        if row["record_type"] == "RemoveTopicRecord":
            removals.setdefault(row["topic_id"], []).append(row["order"])
    found, explanations, named = [], [], {}
    for row in rows:
        if row["record_type"] != "TopicRecord":
            continue
        before = named.get(row["topic_name"])
        named[row["topic_name"]] = row["topic_id"]
        if before is None or before == row["topic_id"] or row["topic_id"] is None:
            continue
        # a finding per removal of the id before that comes later (or one if it was never removed), as a join would
        later = [o for o in removals.get(before, [None]) if o is None or o > row["order"]]
        found += [row] * len(later)
        explanations += [
            f"topic '{row['topic_name']}' gets id {row['topic_id']} while id {before} is still live"
        ] * len(later)
    return _found("one_live_topic_id_per_name", found, explanations)


def state_findings(partitions: pa.Table) -> pa.Table:
    """The final state (``audit.tables.PARTITIONS``, whole topics) holds the rules too: ISR within replicas,
    leader in the ISR or -1, and each topic's partition ids 0..n-1."""
    n = partitions.num_rows
    if n == 0:
        return FINDINGS.empty_table()
    replicas, isr = _column(partitions, "replicas"), _column(partitions, "isr")
    replica_keys = np.sort(_keys(*_elements(replicas)))
    isr_rows, isr_values = _elements(isr)
    isr_keys = _keys(isr_rows, isr_values)
    outside = replicas.is_valid().to_numpy(zero_copy_only=False) & _rows_where(
        n, isr_rows[~_within(isr_keys, replica_keys)]
    )
    leader = _column(partitions, "leader").fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    leader_in = _within(_keys(np.arange(n, dtype=np.int64), leader), np.sort(isr_keys))
    leaderless = isr.is_valid().to_numpy(zero_copy_only=False) & (leader != -1) & ~leader_in

    def where(mask: np.ndarray) -> list[dict]:
        return partitions.take(pa.array(np.flatnonzero(mask))).to_pylist()

    def listed(values: list[int] | None) -> str:
        return ",".join(map(str, values or []))

    wide, leaderless_rows = where(outside), where(leaderless)
    found = [
        _found(
            "isr_subset_of_replicas",
            [{} for _ in wide],
            [
                f"final state: partition {p['topic_name']}-{p['partition_id']} has ISR [{listed(p['isr'])}] outside "
                f"replicas [{listed(p['replicas'])}]"
                for p in wide
            ],
        ),
        _found(
            "leader_in_isr",
            [{} for _ in leaderless_rows],
            [
                f"final state: partition {p['topic_name']}-{p['partition_id']} has leader {p['leader']} outside ISR "
                f"[{listed(p['isr'])}]"
                for p in leaderless_rows
            ],
        ),
    ]
    spans = partitions.group_by(["topic_id", "topic_name"], use_threads=False).aggregate(
        [([], "count_all"), ("partition_id", "min"), ("partition_id", "max")]
    )
    count, lo, hi = (spans.column(c).to_numpy() for c in ("count_all", "partition_id_min", "partition_id_max"))
    gaps = spans.filter(pa.array((lo != 0) | (hi != count - 1))).to_pylist()
    found.append(
        _found(
            "partition_ids_contiguous",
            [{} for _ in gaps],
            [
                f"topic '{g['topic_name']}' has {g['count_all']} partitions numbered {g['partition_id_min']}.."
                f"{g['partition_id_max']}"
                for g in gaps
            ],
        )
    )
    return pa.concat_tables(found)


def removals_of_unknown_topics(events: pa.Table) -> pa.Table:
    """remove_of_existing_topic: a RemoveTopicRecord whose id is not live where it lies (never created, or removed
    already). ``events``: every TopicRecord and RemoveTopicRecord (with where each lies)."""
    found, explanations, live = [], [], set()
    for row in events.sort_by("order").to_pylist():
        if row["record_type"] == "TopicRecord":
            live.add(row["topic_id"])
        elif row["topic_id"] in live:
            live.remove(row["topic_id"])
        else:
            found.append(row)
            explanations.append(f"RemoveTopicRecord for topic id {row['topic_id']}, which does not exist")
    return _found("remove_of_existing_topic", found, explanations)


def removals_of_unknown_acls(rows: pa.Table) -> pa.Table:
    """remove_of_existing_acl: a RemoveAccessControlEntryRecord whose id names no ACL in force where it lies (never
    created, or removed already): the controller's replay stops on it (Kafka's too). ``rows``: the ACL records
    (``audit.acls.INPUT``)."""
    found, explanations, live = [], [], set()
    for row in rows.sort_by("order").to_pylist():
        if row["record_type"] != "RemoveAccessControlEntryRecord":
            live.add(row["acl_id"])
        elif row["acl_id"] in live:
            live.remove(row["acl_id"])
        else:
            found.append(row)
            explanations.append(f"RemoveAccessControlEntryRecord for ACL id {row['acl_id']}, which does not exist")
    return _found("remove_of_existing_acl", found, explanations)


def configs_of_removed_topics(configs: pa.Table, events: pa.Table, topic_resource: int = 2) -> pa.Table:
    """config_of_existing_topic: a topic's ConfigRecord naming a topic that was removed and not created again
    before it (the name is free: nothing can be configured under it). ``configs``: the ConfigRecords (resource
    type and name, config name, order, where each lies); ``events``: every TopicRecord and RemoveTopicRecord."""
    topic = configs.filter(pc.equal(configs.column("resource_type"), topic_resource))
    if topic.num_rows == 0:
        return FINDINGS.empty_table()
    timeline = sorted(
        [(row["order"], 0, row) for row in events.to_pylist()] + [(row["order"], 1, row) for row in topic.to_pylist()],
        key=lambda item: (item[0], item[1]),
    )
    names: dict[str, str] = {}  # topic id -> its name
    live: dict[str, str] = {}  # name -> its live id
    removed: dict[str, str] = {}  # name -> the id it had when removed (while no topic has it)
    found, explanations = [], []
    for _, is_config, row in timeline:
        if is_config:
            name = row["resource_name"]
            if name not in live and name in removed:
                found.append(row)
                explanations.append(
                    f"ConfigRecord sets {row['config_name']} of topic '{name}', removed (topic id {removed[name]})"
                )
        elif row["record_type"] == "TopicRecord":
            names[row["topic_id"]] = row["topic_name"]
            live[row["topic_name"]] = row["topic_id"]
            removed.pop(row["topic_name"], None)
        else:
            name = names.get(row["topic_id"])
            if name is not None and live.get(name) == row["topic_id"]:
                del live[name]
                removed[name] = row["topic_id"]
    return _found("config_of_existing_topic", found, explanations)
