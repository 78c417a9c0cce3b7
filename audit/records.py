"""The audit job's two Spark jobs (:func:`write_tables`): the ``records`` table — the decoded log as Parquet,
partitioned by record type (``record_type=TopicRecord/…``) — with the summaries the executors compute while
decoding (:data:`SUMMARIES`), then from those the audit's tables (:data:`TABLES`): the state, most findings,
topics created per minute, and the timeline of what changed when (:mod:`audit.timeline`).

Decoding happens once. The executors write the records table themselves with pyarrow, straight from the Arrow
batches they decode: the rows never cross into the JVM to be converted and encoded there (on 5M records,
local[2], that crossing and Spark's Parquet writer cost more than the decoding).
Partitioning by type lets a later read take only the types it needs: the brokers and configs, or the suspects'
rows, not millions of partition changes.

The output directory must be one the executors and the driver share (a local path with ``local[*]``; a shared
mount on a cluster) — as must the log directory, which the executors read by path too.
"""

from __future__ import annotations

import shutil
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from audit import acls, history, reassignments, tables, timeline
from audit.decode import FileRange, arrow_schema, spark_schema
from audit.fold import INPUT as FOLD_INPUT
from audit.fold import STATE, buckets_of, fold_range, merge_deltas, topic_spans
from audit.record_checks import (
    COLUMNS,
    FINDINGS,
    MENTIONS,
    REGISTRATIONS,
    SUSPECTS,
    batch_findings,
    configs_of_removed_topics,
    findings,
    live_name_clashes,
    mentions,
    orphan_suspects,
    removals_of_unknown_acls,
    removals_of_unknown_topics,
    reused_topic_ids,
    state_findings,
    unreadable,
)
from audit.record_checks import INPUT as CHECK_INPUT
from audit.source import DEFAULT_SPLIT_BYTES, plan, read_range

RECORD_FIELDS = list(arrow_schema(False))
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # how Spark names the partition of a null value (error rows)


@dataclass(frozen=True)
class Written:
    records: int  # rows, error rows included
    errors: int
    last_offset: int | None
    last_time: int | None = None  # the latest batch time of the records audited (ms), for what is still open there


def table_schema() -> StructType:
    """The table as Spark reads it back: the decoded columns, then the partition column last."""
    fields = [f for f in spark_schema(False).fields if f.name != "record_type"]
    return StructType([*fields, StructField("record_type", StringType())])


def _batch_summary(batch: pa.RecordBatch) -> pa.Table:
    """Per log batch in ``batch``'s rows: first and last offset, epoch, CRC verdict (see invariants.batches_of)."""
    rows = pa.table(
        {
            "position": batch.column("position"),
            "offset": batch.column("offset"),
            "epoch": batch.column("epoch"),
            "crc_valid": pc.cast(batch.column("crc_valid"), pa.int8()),
        }
    ).filter(pc.is_valid(batch.column("offset")))
    return rows.group_by("position").aggregate(
        [("offset", "min"), ("offset", "max"), ("epoch", "min"), ("crc_valid", "min")]
    )


PARTITION_TYPES = ("PartitionRecord", "PartitionChangeRecord")
WALK_INPUT = list(dict.fromkeys([*history.INPUT, *reassignments.INPUT]))  # the merge job's walks
PARTITION_INPUT = list(dict.fromkeys([*FOLD_INPUT, *CHECK_INPUT, *WALK_INPUT]))
BATCHES = pa.schema(  # a row per log batch
    [
        ("file", pa.string()),
        ("position", pa.int64()),
        ("source", pa.string()),
        ("offset", pa.int64()),  # of its first record
        ("last", pa.int64()),  # of its last record
        ("epoch", pa.int32()),
        ("crc_valid", pa.bool_()),
    ]
)
SUMMARIES = (
    "batches",
    "orphan_suspects",
    "broker_mentions",
    "broker_registrations",
    "leader_changes",
    "reassignment_moves",
)
# the state, the checks, and what changed when (audit.timeline)
TABLES = ("topics", "partitions", "brokers", "configs", "acls", "violations", "topics_per_minute", "timeline")
BUCKETS = "by_topic"  # deltas, topic events, partition rows: a directory per bucket of topics; merged, then removed


def _part(index: int) -> str:
    return f"part-{index:05d}.parquet"


def _violations(found: list[pa.Table], out: str, name: str, *, always: bool = True) -> None:
    """Into the violations table. (A decode task writes only what it found; the merge job's tasks always write,
    so that the table has files, and a schema, when nothing is found.)"""
    table = pa.concat_tables([FINDINGS.empty_table(), *found]).select(COLUMNS)
    if table.num_rows or always:
        pq.write_table(table, Path(out) / "violations" / f"{name}.parquet")


def _write_range(index: int, r: FileRange, first_log_offset: int, out: str, buckets: int, as_of: int | None) -> Written:
    """Decode one range into ``out/records``, its summaries into the :data:`SUMMARIES` tables beside it, the
    findings of its records into ``violations``, and its partition deltas and topic events into the
    :data:`BUCKETS`. Records after ``as_of`` are written, and left out of the rest."""
    writers: dict[str | None, pq.ParquetWriter] = {}
    summaries: list[pa.Table] = []
    found: list[pa.Table] = []
    partition_rows: list[pa.RecordBatch] = []
    topic_events: list[pa.RecordBatch] = []
    registrations: list[pa.RecordBatch] = []
    records = errors = 0
    last: int | None = None
    last_time: int | None = None
    try:
        for batch in read_range(r, False, first_log_offset):
            if batch.num_rows == 0:
                continue
            # Each decoded batch holds one record type (or only error rows, whose type is null).
            kind = batch.column("record_type")[0].as_py()
            data = batch.drop_columns(["record_type"])
            writer = writers.get(kind)
            if writer is None:
                name = NULL_PARTITION if kind is None else urllib.parse.quote(kind, safe="")
                directory = Path(out) / "records" / f"record_type={name}"
                directory.mkdir(parents=True, exist_ok=True)
                writer = writers[kind] = pq.ParquetWriter(directory / f"part-{index:05d}.parquet", data.schema)
            writer.write_batch(data)
            kept = batch if as_of is None else batch.filter(pc.less_equal(batch.column("order"), as_of))
            if kind is None:
                found.append(unreadable(batch))
            elif kind in PARTITION_TYPES:
                partition_rows.append(kept.select(PARTITION_INPUT))
            elif kind in ("TopicRecord", "RemoveTopicRecord"):
                topic_events.append(kept.select(tables.TOPIC_INPUT))
            elif kind == "RegisterBrokerRecord":
                registrations.append(kept.select(REGISTRATIONS.names))
            summaries.append(_batch_summary(batch))
            records += batch.num_rows
            errors += batch.num_rows - batch.column("error").null_count
            top = pc.max(batch.column("offset")).as_py()
            if top is not None and (last is None or top > last):
                last = top
            latest = pc.max(pc.cast(kept.column("append_time"), pa.timestamp("ms", tz="UTC"), safe=False))
            if kind is not None and latest.is_valid and (last_time is None or latest.value > last_time):
                last_time = latest.value
    finally:
        for writer in writers.values():
            writer.close()
    if summaries:
        # A log batch's records are spread over the buckets of their types: combine the partial summaries.
        combined = (
            pa.concat_tables(summaries)
            .group_by("position")
            .aggregate([("offset_min", "min"), ("offset_max", "max"), ("epoch_min", "min"), ("crc_valid_min", "min")])
        )
        n = combined.num_rows
        table = pa.table(
            {
                "file": pa.array([r.path] * n, pa.string()),
                "position": combined.column("position"),
                "source": pa.array([r.source] * n, pa.string()),
                "offset": combined.column("offset_min_min"),
                "last": combined.column("offset_max_max"),
                "epoch": combined.column("epoch_min_min"),
                "crc_valid": pc.cast(combined.column("crc_valid_min_min"), pa.bool_()),
            },
            schema=BATCHES,
        )
        pq.write_table(table, Path(out) / "batches" / _part(index))
    if registrations:
        pq.write_table(pa.Table.from_batches(registrations), Path(out) / "broker_registrations" / _part(index))
    by_topic = {"events": pa.Table.from_batches(topic_events)} if topic_events else {}
    if partition_rows:
        partitions = pa.Table.from_batches(partition_rows)
        found.append(findings(partitions))
        pq.write_table(mentions(partitions), Path(out) / "broker_mentions" / _part(index))
        by_topic["deltas"] = fold_range(partitions.select(FOLD_INPUT))
        by_topic["rows"] = partitions.select([c for c in WALK_INPUT if c != "topic_name"])
    _violations(found, out, f"records-{index:05d}", always=False)
    for name, table in by_topic.items():
        bucket = buckets_of(table.column("topic_id"), buckets)
        for b in range(buckets):
            pq.write_table(table.filter(bucket == b), Path(out) / BUCKETS / f"{b:05d}" / f"{name}-{index:05d}.parquet")
    return Written(records, errors, last, last_time)


def _merge_bucket(bucket: int, out: str) -> None:
    """One bucket of topics, from every range's deltas, topic events and partition rows: the live topics and
    their partitions (:mod:`audit.fold`, :mod:`audit.tables`), the checks of the topics' records (each partition's
    walked in log order: :mod:`audit.history`, :mod:`audit.reassignments`) and final state, the leadership changes,
    the reassignments, and the topics whose partition rows need checking against their lifetimes
    (:func:`audit.record_checks.orphan_suspects`)."""
    directory = Path(out) / BUCKETS / f"{bucket:05d}"
    deltas, events, partition_rows = (
        [pq.read_table(f) for f in sorted(directory.glob(f"{name}-*.parquet"))] for name in ("deltas", "events", "rows")
    )
    topic_events = pa.concat_tables(events) if events else _schema_of(tables.TOPIC_INPUT).empty_table()
    live = tables.topics(topic_events)
    created = topic_events.filter(pc.equal(topic_events.column("record_type"), "TopicRecord"))
    found = [reused_topic_ids(created)]
    walked = pa.concat_tables(_history_input(topic_events, partition_rows))
    walk_found, leader_changes = history.walk(walked)
    moves_found, moves = reassignments.walk(walked)
    found += [walk_found, moves_found]
    pq.write_table(leader_changes, Path(out) / "leader_changes" / _part(bucket))
    pq.write_table(moves, Path(out) / "reassignment_moves" / _part(bucket))
    pq.write_table(timeline.partition_events(walked), Path(out) / "timeline" / _part(bucket))
    if deltas:
        merged = pa.concat_tables(deltas)
        state = merge_deltas(merged)
        suspects = orphan_suspects(topic_spans(merged), topic_events)
    else:
        state, suspects = STATE.empty_table(), SUSPECTS.empty_table()
    partitions = tables.partitions(state, live)
    found.append(state_findings(partitions))
    pq.write_table(live, Path(out) / "topics" / _part(bucket))
    pq.write_table(partitions, Path(out) / "partitions" / _part(bucket))
    pq.write_table(suspects, Path(out) / "orphan_suspects" / _part(bucket))
    _violations(found, out, f"merge-{bucket:05d}")


def _history_input(topic_events: pa.Table, partition_rows: list[pa.Table]) -> list[pa.Table]:
    """Topic events and partition rows, each with every column of :data:`WALK_INPUT` (nulls where it has none)."""
    schema = _schema_of(WALK_INPUT)
    out = []
    for t in (topic_events, *partition_rows):
        has = t.column_names
        columns = [t.column(f.name) if f.name in has else pa.nulls(t.num_rows, f.type) for f in schema]
        out.append(pa.table(columns, schema=schema))
    return out


def _schema_of(columns: list[str]) -> pa.Schema:
    """These columns of the decoded rows, with their types."""
    return pa.schema([field for field in RECORD_FIELDS if field.name in columns])


def records_of(out: str | Path, kinds: tuple[str, ...], columns: list[str], as_of: int | None = None) -> pa.Table:
    """The rows of these record types (up to ``as_of``), from the records table the decode job wrote."""
    schema = _schema_of(columns)
    stored = [c for c in schema.names if c != "record_type"]  # (the directory's name)
    parts = []
    for kind in kinds:
        directory = Path(out) / "records" / f"record_type={urllib.parse.quote(kind, safe='')}"
        if directory.exists():
            rows = pads.dataset(directory, format="parquet").to_table(columns=stored)
            parts.append(rows.append_column("record_type", pa.array([kind] * rows.num_rows, pa.string())))
    rows = pa.concat_tables(parts).select(schema.names).cast(schema) if parts else schema.empty_table()
    return rows if as_of is None else rows.filter(pc.less_equal(rows.column("order"), as_of))


def _merge_rest(out: str, as_of: int | None) -> None:
    """What is not kept per topic, beside the buckets: the brokers, the configs, the ACLs, topics created per
    minute, and the checks along the log's batches and across topic names."""
    events = records_of(out, ("TopicRecord", "RemoveTopicRecord"), tables.TOPIC_INPUT, as_of)
    created = events.filter(pc.equal(events.column("record_type"), "TopicRecord"))
    brokers = records_of(out, tables.BROKER_TYPES, tables.BROKER_EVENT_INPUT, as_of)
    configs = records_of(
        out, ("ConfigRecord",), [*tables.CONFIG_INPUT, "offset", "file", "position", "append_time"], as_of
    )
    tables.write_table(tables.brokers(brokers), Path(out) / "brokers")
    tables.write_table(tables.configs(configs, events), Path(out) / "configs")
    tables.write_table(tables.topics_per_minute(created), Path(out) / "topics_per_minute")
    acl_rows = records_of(out, acls.TYPES, acls.INPUT, as_of)
    tables.write_table(acls.acls(acl_rows), Path(out) / "acls")
    changes = [
        timeline.broker_events(brokers),
        timeline.config_events(configs),
        timeline.topic_events(events),
        timeline.acl_events(acl_rows),
    ]
    tables.write_table(pa.concat_tables(changes).sort_by("order"), Path(out) / "timeline", "rest.parquet")
    batches = tables.read_table(Path(out) / "batches", BATCHES)
    found = [
        batch_findings(batches),
        live_name_clashes(events),
        removals_of_unknown_topics(events),
        configs_of_removed_topics(configs, events),
        removals_of_unknown_acls(acl_rows),
    ]
    _violations(found, out, "rest")


Tasks = Callable[[Callable[[Any], Any], list[Any]], list[Any]]  # runs a function over items, one task each


def write_tables(
    spark: SparkSession,
    log_dir: str | Path,
    out: str | Path,
    *,
    from_start: bool = False,
    as_of_offset: int | None = None,
) -> Written:
    """:func:`build_tables` with Spark's executors running the tasks."""
    context = spark.sparkContext

    def on_executors(task: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        return context.parallelize(items, len(items)).map(task).collect()

    return build_tables(
        on_executors, context.defaultParallelism, log_dir, out, from_start=from_start, as_of_offset=as_of_offset
    )


def in_process(task: Callable[[Any], Any], items: list[Any]) -> list[Any]:
    """Tasks run one after the other in this process (tests; no Spark)."""
    return [task(item) for item in items]


def build_tables(
    run: Tasks,
    parallelism: int,
    log_dir: str | Path,
    out: str | Path,
    *,
    from_start: bool = False,
    as_of_offset: int | None = None,
) -> Written:
    """Decode ``log_dir`` on the executors into ``out/records`` and, from what they compute while decoding, the
    audit's tables (:data:`TABLES`: the state at the end of the log or at ``as_of_offset``, and the findings),
    with the :data:`SUMMARIES` beside them; each replaced if present. The driver gets three numbers.

    Two Spark jobs: the first decodes the log's ranges and folds each range's partition records into deltas, put
    in buckets by topic with the topics' events; the second merges each bucket's deltas from every range, in log
    order, into the partitions' state and checks the bucket's topics (a shuffle through the shared output
    directory), while one more task of it rebuilds the brokers and configs and checks the log's batches. (Merging
    the 5M-record benchmark log's ~800k deltas with a Spark shuffle, sort and aggregate took 4.3 s in a fresh
    JVM; the whole merge job, every table included, took 1.1 s.)"""
    out = Path(out).resolve()
    for table in (out / "records", out / BUCKETS, *(out / name for name in (*SUMMARIES, *TABLES))):
        if table.exists():
            shutil.rmtree(table)
        table.mkdir(parents=True)
    ranges, first = plan(log_dir, from_start, DEFAULT_SPLIT_BYTES, 4 * parallelism)
    for b in range(parallelism):
        (out / BUCKETS / f"{b:05d}").mkdir()
    parts: list[Written] = []
    if ranges:
        parts = run(
            lambda task: _write_range(task[0], task[1], first, str(out), parallelism, as_of_offset),
            list(enumerate(ranges)),
        )
    run(
        lambda b: _merge_bucket(b, str(out)) if b < parallelism else _merge_rest(str(out), as_of_offset),
        list(range(parallelism + 1)),
    )
    shutil.rmtree(out / BUCKETS)
    last = [p.last_offset for p in parts if p.last_offset is not None]
    times = [p.last_time for p in parts if p.last_time is not None]
    return Written(
        sum(p.records for p in parts),
        sum(p.errors for p in parts),
        max(last) if last else None,
        max(times) if times else None,
    )


def read_summary(out: str | Path, name: str) -> pa.Table:
    """One of the :data:`SUMMARIES` but ``batches`` (the driver shares the directory)."""
    schema = {
        "orphan_suspects": SUSPECTS,
        "broker_mentions": MENTIONS,
        "broker_registrations": REGISTRATIONS,
        "leader_changes": history.CHANGES,
        "reassignment_moves": reassignments.MOVES,
    }[name]
    return tables.read_table(Path(out) / name, schema)


def read_records(spark: SparkSession, out: str | Path) -> DataFrame:
    path = str(Path(out) / "records")
    return spark.read.schema(table_schema()).option("basePath", path).parquet(path)
