"""The ``records`` table: the decoded log as Parquet, partitioned by record type (``record_type=TopicRecord/…``).

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

import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StringType, StructField, StructType

from audit.decode import FileRange, spark_schema
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


def _write_range(index: int, r: FileRange, first_log_offset: int, out: str) -> Written:
    writers: dict[str | None, pq.ParquetWriter] = {}
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
                directory = Path(out) / f"record_type={name}"
                directory.mkdir(parents=True, exist_ok=True)
                writer = writers[kind] = pq.ParquetWriter(directory / f"part-{index:05d}.parquet", data.schema)
            writer.write_batch(data)
            records += batch.num_rows
            errors += batch.num_rows - batch.column("error").null_count
            top = pc.max(batch.column("offset")).as_py()
            if top is not None and (last is None or top > last):
                last = top
    finally:
        for writer in writers.values():
            writer.close()
    return Written(records, errors, last)


def write_records(spark: SparkSession, log_dir: str | Path, out: str | Path, *, from_start: bool = False) -> Written:
    """Decode ``log_dir`` on the executors into ``out`` (replaced if present); the driver gets three numbers."""
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    ranges, first = plan(log_dir, from_start, DEFAULT_SPLIT_BYTES, 4 * spark.sparkContext.defaultParallelism)
    if not ranges:
        return Written(0, 0, None)
    target = str(out.resolve())
    tasks = spark.sparkContext.parallelize(list(enumerate(ranges)), len(ranges))
    parts = tasks.map(lambda task: _write_range(task[0], task[1], first, target)).collect()
    last = [p.last_offset for p in parts if p.last_offset is not None]
    return Written(sum(p.records for p in parts), sum(p.errors for p in parts), max(last) if last else None)


def read_records(spark: SparkSession, out: str | Path) -> DataFrame:
    return spark.read.schema(table_schema()).option("basePath", str(out)).parquet(str(out))
