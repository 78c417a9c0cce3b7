"""``pykraft audit``: read an exported ``__cluster_metadata`` directory with Spark, rebuild the state, check the
invariants, compute analytics, and write Parquet tables, ``report.html`` and a short summary.

Decoding happens once, into the ``records`` Parquet table and the summaries beside it (:mod:`audit.records`);
every later step reads those.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.dataset as pads
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit.invariants import check_all
from audit.records import read_records, read_summaries, write_records
from audit.replay import State, replay
from audit.source import select_files


@dataclass
class AuditResult:
    out: Path
    records: int
    batches_with_errors: int
    tables: dict[str, int] = field(default_factory=dict)
    violations: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        s = self.summary
        lines = [
            f"audited {self.records:,} records from {s['files']} file(s); last offset {s['last_offset']}",
            f"topics {self.tables['topics']:,}, partitions {self.tables['partitions']:,}, brokers "
            f"{self.tables['brokers']:,} ({s['fenced_brokers']} fenced), configs {self.tables['configs']:,}",
        ]
        if self.violations:
            lines.append("violations: " + ", ".join(f"{k} {v}" for k, v in sorted(self.violations.items())))
        else:
            lines.append("violations: none")
        lines.append(f"tables and report.html in {self.out} ({self.seconds['total']:.1f} s)")
        return "\n".join(lines)


CONCURRENT_JOBS = int(os.environ.get("PYKRAFT_AUDIT_JOBS", "2"))  # 4 measured no faster on 2 cores


def read_rows(
    spark: SparkSession, log_dir: str | Path, *, from_start: bool = False, json_column: bool = False
) -> DataFrame:
    reader = spark.read.format("cluster_metadata").option("fromStart", str(from_start).lower())
    reader = reader.option("minPartitions", 4 * spark.sparkContext.defaultParallelism)
    return reader.option("json", str(json_column).lower()).load(str(log_dir))


def analytics(rows: DataFrame, state: State) -> dict[str, DataFrame]:
    per_minute = (
        rows.where("record_type = 'TopicRecord' AND error IS NULL")
        .groupBy(F.date_trunc("minute", "append_time").alias("minute"))
        .agg(F.count("*").alias("topics_created"))
        .orderBy("minute")
    )
    replicas = state.partitions.select("topic_name", "partition_id", "leader", F.explode("replicas").alias("broker_id"))
    per_broker = (
        replicas.groupBy("broker_id")
        .agg(
            F.count("*").alias("replicas"),
            F.sum(F.when(F.col("leader") == F.col("broker_id"), 1).otherwise(0)).alias("leaders"),
        )
        .join(state.brokers.select("broker_id", "rack", "fenced"), "broker_id", "full")
        .fillna({"replicas": 0, "leaders": 0})
        .orderBy("broker_id")
    )
    per_rack = (
        per_broker.groupBy(F.coalesce("rack", F.lit("(none)")).alias("rack"))
        .agg(F.sum("replicas").alias("replicas"), F.sum("leaders").alias("leaders"), F.count("*").alias("brokers"))
        .orderBy("rack")
    )
    factors = (
        state.partitions.groupBy("topic_id", "topic_name")
        .agg(F.max(F.size("replicas")).alias("replication_factor"), F.count("*").alias("partitions"))
        .groupBy("replication_factor")
        .agg(F.count("*").alias("topics"), F.sum("partitions").alias("partitions"))
        .orderBy("replication_factor")
    )
    configs_in_use = (
        state.configs.groupBy("resource_type", "config_name", "config_value")
        .agg(F.count("*").alias("resources"))
        .orderBy(F.col("resources").desc(), "config_name")
    )
    return {
        "topics_per_minute": per_minute,
        "brokers_load": per_broker,
        "racks_load": per_rack,
        "replication_factors": factors,
        "configs_in_use": configs_in_use,
    }


def run_audit(
    spark: SparkSession,
    log_dir: str | Path,
    out: str | Path,
    *,
    as_of_offset: int | None = None,
    from_start: bool = False,
    report: bool = True,
) -> AuditResult:
    started = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = select_files(log_dir, from_start)
    # Decode once, into the `records` table: every later step reads its Parquet (column-pruned, vectorised, only
    # the record types it needs), and analysts get the decoded log.
    written = write_records(spark, log_dir, out, from_start=from_start)
    rows = read_records(spark, out)
    t_decode = time.perf_counter()
    summaries = read_summaries(spark, out)
    state = replay(rows, as_of_offset, summaries.partition_state)
    # The state tables feed the invariants, the analytics and their own Parquet files: compute each once.
    level = StorageLevel.MEMORY_AND_DISK
    state = State(
        state.topics.persist(level),
        state.partitions.persist(level),
        state.brokers.persist(level),
        state.configs.persist(level),
    )
    tables: dict[str, DataFrame] = {
        "topics": state.topics,
        "partitions": state.partitions,
        "brokers": state.brokers,
        "configs": state.configs,
        **analytics(rows, state),
    }
    counts: dict[str, int] = {"records": written.records}
    collected: dict[str, list[dict[str, Any]]] = {}
    per_table: dict[str, float] = {}  # each table's job, from submitted to done

    def write(name: str) -> float:
        t = time.perf_counter()
        tables[name].write.mode("overwrite").parquet(str(out / name))
        return time.perf_counter() - t

    try:
        # Most of these jobs are small and many of their stages have a task or two: run a few at once, so their
        # planning, code generation and tasks share the cores. The state tables first (the rest read their
        # caches), while a thread of its own builds the invariant checks' plan.
        state_tables = ["topics", "partitions", "brokers", "configs"]
        with ThreadPoolExecutor(CONCURRENT_JOBS + 1) as pool:
            checked = pool.submit(check_all, rows, state, as_of_offset, summaries)
            per_table.update(zip(state_tables, pool.map(write, state_tables), strict=True))
            tables["violations"] = checked.result()
            rest = [name for name in tables if name not in state_tables]
            per_table.update(zip(rest, pool.map(write, rest), strict=True))
        for name in tables:
            # The driver reads what it needs back from the files (it shares them): row counts from their footers,
            # the first rows for the report, a column or two. No Spark job per count and no table kept cached.
            written_table = pads.dataset(out / name, format="parquet")
            counts[name] = written_table.count_rows()
            if name not in ("partitions", "topics", "configs") or counts[name] <= 2000:
                collected[name] = written_table.head(2000).to_pylist()
        checks = pads.dataset(out / "violations", format="parquet").to_table(columns=["check"]).column("check")
        violation_counts = {c["values"]: c["counts"] for c in pc.value_counts(checks).to_pylist()}
        brokers = pads.dataset(out / "brokers", format="parquet").to_table(columns=["fenced"])
        fenced = len(brokers.filter(pc.field("fenced")))
    finally:
        for df in (state.topics, state.partitions, state.brokers, state.configs):
            df.unpersist()  # a long-lived session (a notebook, the benchmark) must not keep every run's tables
    t_tables = time.perf_counter()
    result = AuditResult(
        out=out,
        records=written.records,
        batches_with_errors=written.errors,
        tables=counts,
        violations=violation_counts,
        summary={
            "files": len(files),
            "last_offset": written.last_offset,
            "fenced_brokers": fenced,
            "as_of_offset": as_of_offset,
            "log_dir": str(log_dir),
        },
    )
    if report:
        from audit.report import write_report

        write_report(out, result, collected)
    done = time.perf_counter()
    result.seconds = {
        "decode": t_decode - started,
        "tables": t_tables - t_decode,
        "report": done - t_tables,
        "total": done - started,
        **{f"table {name}": secs for name, secs in per_table.items()},
    }
    (out / "summary.json").write_text(
        json.dumps(
            {
                **result.summary,
                "records": result.records,
                "tables": counts,
                "violations": violation_counts,
                "seconds": result.seconds,
            },
            default=str,
            indent=2,
        )
    )
    return result
