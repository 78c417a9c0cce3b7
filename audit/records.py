"""The ``records`` table: the decoded log as Parquet, partitioned by record type (``record_type=TopicRecord/…``),
and beside it the summaries the executors compute while decoding (:data:`SUMMARIES`): one row per log batch for
the offset, epoch and CRC checks, the partitions' state, and what the other invariant checks start from.

Every later step of the audit reads this table, so decoding happens once. The executors write it themselves with
pyarrow, straight from the Arrow batches they decode: the rows never cross into the JVM to be converted and
encoded there (on 5M records, local[2], that crossing and Spark's Parquet writer cost more than the decoding).
Partitioning by type lets each step read only the types it needs: most steps want a few thousand TopicRecords or
broker records, not millions of partition changes.

The output directory must be one the executors and the driver share (a local path with ``local[*]``; a shared
mount on a cluster) — as must the log directory, which the executors read by path too.
"""

from __future__ import annotations

import shutil
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

from audit.decode import FileRange, spark_schema
from audit.fold import INPUT as FOLD_INPUT
from audit.fold import STATE, buckets_of, fold_range, merge_deltas, topic_spans
from audit.record_checks import (
    EPOCH_INPUT,
    FINDINGS,
    MENTIONS,
    REGISTRATIONS,
    SUSPECTS,
    TOPIC_EVENTS,
    epoch_regressions,
    findings,
    mentions,
    orphan_suspects,
)
from audit.record_checks import INPUT as CHECK_INPUT
from audit.source import DEFAULT_SPLIT_BYTES, plan, read_range

NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"  # how Spark names the partition of a null value (error rows)


@dataclass(frozen=True)
class Written:
    records: int  # rows, error rows included
    errors: int
    last_offset: int | None


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
PARTITION_INPUT = list(dict.fromkeys([*FOLD_INPUT, *CHECK_INPUT]))
SUMMARIES = (  # beside `records`
    "batches",
    "partition_state",
    "record_findings",
    "orphan_suspects",
    "broker_mentions",
    "broker_registrations",
)
BUCKETS = "by_topic"  # deltas, topic events, PartitionRecords: a directory per bucket of topics; merged, then removed


def _part(index: int) -> str:
    return f"part-{index:05d}.parquet"


def _write_range(index: int, r: FileRange, first_log_offset: int, out: str, buckets: int) -> Written:
    """Decode one range into ``out/records``, its summaries into the :data:`SUMMARIES` tables beside it, and its
    partition deltas and topic events into the :data:`BUCKETS`."""
    writers: dict[str | None, pq.ParquetWriter] = {}
    summaries: list[pa.Table] = []
    partition_rows: list[pa.RecordBatch] = []
    topic_events: list[pa.RecordBatch] = []
    partition_records: list[pa.RecordBatch] = []
    registrations: list[pa.RecordBatch] = []
    records = errors = 0
    last: int | None = None
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
            if kind in PARTITION_TYPES:
                partition_rows.append(batch.select(PARTITION_INPUT))
                if kind == "PartitionRecord":
                    partition_records.append(batch.select(EPOCH_INPUT))
            elif kind in ("TopicRecord", "RemoveTopicRecord"):
                topic_events.append(batch.select(TOPIC_EVENTS))
            elif kind == "RegisterBrokerRecord":
                registrations.append(batch.select(REGISTRATIONS.names))
            summaries.append(_batch_summary(batch))
            records += batch.num_rows
            errors += batch.num_rows - batch.column("error").null_count
            top = pc.max(batch.column("offset")).as_py()
            if top is not None and (last is None or top > last):
                last = top
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
            }
        )
        pq.write_table(table, Path(out) / "batches" / _part(index))
    if registrations:
        pq.write_table(pa.Table.from_batches(registrations), Path(out) / "broker_registrations" / _part(index))
    by_topic = {"events": pa.Table.from_batches(topic_events)} if topic_events else {}
    if partition_records:
        by_topic["epochs"] = pa.Table.from_batches(partition_records)
    if partition_rows:
        partitions = pa.Table.from_batches(partition_rows)
        pq.write_table(findings(partitions), Path(out) / "record_findings" / _part(index))
        pq.write_table(mentions(partitions), Path(out) / "broker_mentions" / _part(index))
        by_topic["deltas"] = fold_range(partitions.select(FOLD_INPUT))
    for name, table in by_topic.items():
        bucket = buckets_of(table.column("topic_id"), buckets)
        for b in range(buckets):
            pq.write_table(table.filter(bucket == b), Path(out) / BUCKETS / f"{b:05d}" / f"{name}-{index:05d}.parquet")
    return Written(records, errors, last)


def _merge_bucket(bucket: int, out: str) -> int:
    """One bucket of topics, from every range's deltas, topic events and PartitionRecords: the partitions' state
    (:mod:`audit.fold`), the topics whose partition rows need checking against their lifetimes
    (:func:`audit.record_checks.orphan_suspects`), and the partition epochs that go back."""
    directory = Path(out) / BUCKETS / f"{bucket:05d}"
    deltas, events, epochs = (
        [pq.read_table(f) for f in sorted(directory.glob(f"{name}-*.parquet"))]
        for name in ("deltas", "events", "epochs")
    )
    if epochs:
        regressions = epoch_regressions(pa.concat_tables(epochs))
        pq.write_table(regressions, Path(out) / "record_findings" / f"epochs-{bucket:05d}.parquet")
    if deltas:
        merged = pa.concat_tables(deltas)
        state = merge_deltas(merged)
        spans = topic_spans(merged)
        suspects = orphan_suspects(spans, pa.concat_tables(events) if events else None)
    else:
        state, suspects = STATE.empty_table(), SUSPECTS.empty_table()
    pq.write_table(state, Path(out) / "partition_state" / _part(bucket))
    pq.write_table(suspects, Path(out) / "orphan_suspects" / _part(bucket))
    return state.num_rows


def write_records(spark: SparkSession, log_dir: str | Path, out: str | Path, *, from_start: bool = False) -> Written:
    """Decode ``log_dir`` on the executors into ``out/records`` and the :data:`SUMMARIES` beside it, all replaced
    if present: ``batches`` (one row per log batch, :func:`audit.invariants.batches_of`), ``partition_state``
    (:mod:`audit.fold`), and what the invariant checks need (:mod:`audit.record_checks`). The driver gets three
    numbers.

    Two Spark jobs: the first decodes the log's ranges and folds each range's partition records into deltas, put
    in buckets by topic with the topics' events; the second merges each bucket's deltas from every range, in log
    order, into the partitions' state, and checks the bucket's partition rows lie in their topics' lifetimes: a
    shuffle through the shared output directory. (Merging the 5M-record benchmark log's ~800k deltas with a
    Spark shuffle, sort and aggregate took 4.3 s in a fresh JVM; this job takes 0.3 s.)"""
    out = Path(out).resolve()
    for table in (out / "records", out / BUCKETS, *(out / name for name in SUMMARIES)):
        if table.exists():
            shutil.rmtree(table)
        table.mkdir(parents=True)
    parallelism = spark.sparkContext.defaultParallelism
    ranges, first = plan(log_dir, from_start, DEFAULT_SPLIT_BYTES, 4 * parallelism)
    if not ranges:
        shutil.rmtree(out / BUCKETS)
        return Written(0, 0, None)
    for b in range(parallelism):
        (out / BUCKETS / f"{b:05d}").mkdir()
    tasks = spark.sparkContext.parallelize(list(enumerate(ranges)), len(ranges))
    parts = tasks.map(lambda task: _write_range(task[0], task[1], first, str(out), parallelism)).collect()
    buckets = spark.sparkContext.parallelize(range(parallelism), parallelism)
    buckets.map(lambda bucket: _merge_bucket(bucket, str(out))).collect()
    shutil.rmtree(out / BUCKETS)
    last = [p.last_offset for p in parts if p.last_offset is not None]
    return Written(sum(p.records for p in parts), sum(p.errors for p in parts), max(last) if last else None)


BATCHES_SCHEMA = StructType(
    [
        StructField("file", StringType()),
        StructField("position", LongType()),
        StructField("source", StringType()),
        StructField("offset", LongType()),
        StructField("last", LongType()),
        StructField("epoch", IntegerType()),
        StructField("crc_valid", BooleanType()),
    ]
)


@dataclass(frozen=True)
class Summaries:
    """What the executors computed from the rows while decoding them (:func:`write_records`): the tables that can
    be large, as DataFrames; the small ones are read straight from their files (:meth:`small`)."""

    directory: Path
    batches: DataFrame
    partition_state: DataFrame  # at the end of the log; no topic names (they come from the topics' replay)
    record_findings: DataFrame

    def small(self, name: str) -> pa.Table:
        """``orphan_suspects``, ``broker_mentions`` or ``broker_registrations`` (the driver shares the directory)."""
        schema = {"orphan_suspects": SUSPECTS, "broker_mentions": MENTIONS, "broker_registrations": REGISTRATIONS}[name]
        return pads.dataset(self.directory / name, format="parquet", schema=schema).to_table()


def read_summaries(spark: SparkSession, out: str | Path) -> Summaries:
    def read(name: str, schema: StructType) -> DataFrame:
        return spark.read.schema(schema).parquet(str(Path(out) / name))

    return Summaries(
        Path(out),
        read("batches", BATCHES_SCHEMA),
        read("partition_state", from_arrow_schema(STATE)),
        read("record_findings", from_arrow_schema(FINDINGS)),
    )


def read_records(spark: SparkSession, out: str | Path) -> DataFrame:
    path = str(Path(out) / "records")
    return spark.read.schema(table_schema()).option("basePath", path).parquet(path)
