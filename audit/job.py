"""``pykraft audit``: read an exported ``__cluster_metadata`` directory with Spark, rebuild the state, check the
invariants, compute analytics, and write Parquet tables, ``report.html`` and a short summary.

Two Spark jobs decode the log and build the tables on the executors (:mod:`audit.records`), the timeline of what
changed when among them (:mod:`audit.timeline`); the driver reads small tables back for the analytics
(:mod:`audit.tables`), the warnings (leaders on fenced brokers, partitions without a leader) and the report, which
opens with the export's manifest when there is one.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from audit import acls, history, reassignments, tables, timeline
from audit.invariants import suspects_findings
from audit.record_checks import over_partition
from audit.records import read_records, read_summary, records_of, write_tables
from audit.replay import State, records_as_of
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
        acl_counts = s.get("acls")
        if acl_counts:
            lines.append(
                f"acls {acl_counts['in_force']:,} in force ({acl_counts['created']:,} created, "
                f"{acl_counts['removed']:,} removed)"
            )
        for warning in warning_lines(s.get("warnings")):
            lines.append("warning: " + warning)
        for acl in (s.get("warnings") or {}).get("risky_acls", {}).get("rows", []):
            offset = acl["created_offset"]
            at = "found in the snapshot" if offset is None else f"created at offset {offset}"
            lines.append(f"  {acls.describe(acl)}, {at}: {'; '.join(acl['risks'])}")
        moves = s.get("reassignments")
        if moves:
            counted = ", ".join(f"{n} {outcome}" for outcome, n in moves.items())
            lines.append(f"reassignments {sum(moves.values()):,}: {counted}")
        if self.violations:
            lines.append("violations: " + ", ".join(f"{k} {v}" for k, v in sorted(self.violations.items())))
        else:
            lines.append("violations: none")
        lines.append(f"tables and report.html in {self.out} ({self.seconds['total']:.1f} s)")
        return "\n".join(lines)


ANALYTICS_INPUTS = {"partitions": tables.PARTITIONS, "brokers": tables.BROKERS, "configs": tables.CONFIGS}
OUTPUT_TABLES = (
    "topics",
    "partitions",
    "brokers",
    "configs",
    "acls",
    "topics_per_minute",
    "brokers_load",
    "racks_load",
    "replication_factors",
    "configs_in_use",
    "broker_events",
    "offline_partitions",
    "reassignments",
    "violations",
    "timeline",
)
TIMELINE_SHOWN = 2000  # the newest rows of the timeline the report shows (the table has them all)
TOPICS_SHOWN = 2000
WARNING_ROWS = 20


def warning_lines(warnings: dict[str, Any] | None) -> list[str]:
    """The warnings in words: leaders on fenced brokers (by broker), partitions without a leader, leaders on brokers
    that are not registered, risky ACLs in force (by risk: :func:`audit.acls.risky`)."""
    if not warnings:
        return []
    lines = []
    fenced = warnings.get("leaders_on_fenced_brokers", {})
    if fenced.get("count"):
        by = ", ".join(f"broker {b}: {n:,}" for b, n in fenced["by_broker"].items())
        lines.append(f"{fenced['count']:,} partition(s) led by a fenced broker ({by})")
    offline = warnings.get("offline_partitions", {})
    if offline.get("count"):
        lines.append(f"{offline['count']:,} partition(s) without a leader (leader -1)")
    unknown = warnings.get("leaders_not_registered", {})
    if unknown.get("count"):
        by = ", ".join(f"broker {b}: {n:,}" for b, n in unknown["by_broker"].items())
        lines.append(f"{unknown['count']:,} partition(s) led by a broker that is not registered ({by})")
    risky = warnings.get("risky_acls", {})
    if risky.get("count"):
        by = ", ".join(f"{acls.RISKS[r]}: {n:,}" for r, n in risky["by_risk"].items())
        lines.append(f"{risky['count']:,} risky ACL(s) in force ({by})")
    return lines


def read_rows(
    spark: SparkSession, log_dir: str | Path, *, from_start: bool = False, json_column: bool = False
) -> DataFrame:
    reader = spark.read.format("cluster_metadata").option("fromStart", str(from_start).lower())
    reader = reader.option("minPartitions", 4 * spark.sparkContext.defaultParallelism)
    return reader.option("json", str(json_column).lower()).load(str(log_dir))


def analytics(rows: DataFrame, state: State, as_of_offset: int | None = None) -> dict[str, DataFrame]:
    """The analytics tables of any rows and their replayed state, as Spark queries (the job computes the same
    with pyarrow: :func:`audit.tables.analytics`)."""
    per_minute = (
        records_as_of(rows, as_of_offset)
        .where("record_type = 'TopicRecord'")
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
        "acls": rows.sparkSession.createDataFrame(acls_of(records_as_of(rows, as_of_offset))),
        **leadership(rows, as_of_offset),
    }


def _walk(r: DataFrame, walk: Callable[[pa.Table], pa.Table], schema: pa.Schema) -> pa.Table:
    """One of the walks over every partition row and topic event in log order (:mod:`audit.history`,
    :mod:`audit.reassignments`, :mod:`audit.timeline`), run in one task; its ``schema`` table back on the driver."""
    columns = list(dict.fromkeys([*history.INPUT, *reassignments.INPUT]))
    walked = r.where(F.col("record_type").isin(*history.PARTITION_TYPES, *history.TOPIC_EVENT_TYPES)).select(*columns)
    spark_schema = from_arrow_schema(schema)
    as_spark = to_arrow_schema(spark_schema, timezone="UTC")  # (Spark takes microseconds)
    return (
        walked.coalesce(1)
        .mapInArrow(over_partition(lambda t: walk(t).cast(as_spark)), spark_schema)
        .toArrow()
        .cast(schema)
    )


def _end_ms(r: DataFrame) -> int | None:
    last = r.agg(F.max("append_time")).first()[0]
    return None if last is None else int(last.timestamp() * 1000)


def leadership(rows: DataFrame, as_of_offset: int | None = None) -> dict[str, DataFrame]:
    """The leadership timeline per broker, the partitions' offline intervals and the reassignments of any rows: the
    leadership changes walked from all the partition rows in one task (:mod:`audit.history`), then the job's own
    functions (:func:`audit.tables.broker_events`, :func:`audit.tables.offline_partitions`) on the driver; the
    reassignments likewise (:func:`reassignments_of`)."""
    r = records_as_of(rows, as_of_offset)
    changes = _walk(r, history.changes, history.CHANGES)
    brokers = r.where(F.col("record_type").isin(*tables.BROKER_TYPES)).select(*tables.BROKER_EVENT_INPUT).toArrow()
    end_ms = _end_ms(r)
    spark = rows.sparkSession
    return {
        "broker_events": spark.createDataFrame(tables.broker_events(brokers, changes)),
        "offline_partitions": spark.createDataFrame(tables.offline_partitions(changes, end_ms)),
        "reassignments": spark.createDataFrame(reassignments_of(r, end_ms)),
        "timeline": spark.createDataFrame(timeline_of(r)),
    }


def timeline_of(r: DataFrame) -> pa.Table:
    """The timeline of decoded rows (:func:`audit.replay.records_as_of`): the partitions' changes walked in one
    task, the brokers', configs' and topics' rows on the driver (the job's functions, as it does)."""
    partitions = _walk(r, timeline.partition_events, timeline.TIMELINE)

    def rows(kinds: tuple[str, ...], columns: list[str]) -> pa.Table:
        return r.where(F.col("record_type").isin(*kinds)).select(*columns).toArrow()

    where = ["order", "offset", "append_time"]
    return pa.concat_tables(
        [
            partitions,
            timeline.broker_events(rows(tables.BROKER_TYPES, tables.BROKER_EVENT_INPUT)),
            timeline.config_events(rows(("ConfigRecord",), [*tables.CONFIG_KEY, "config_value", *where])),
            timeline.topic_events(rows(history.TOPIC_EVENT_TYPES, tables.TOPIC_INPUT)),
            timeline.acl_events(rows(acls.TYPES, acls.INPUT)),
        ]
    ).sort_by("order")


def acls_of(r: DataFrame) -> pa.Table:
    """The ACLs of decoded rows (:func:`audit.replay.records_as_of`): their records read back to the driver (they
    are few), the table made there (:func:`audit.acls.acls`, as the job's last task does)."""
    return acls.acls(r.where(F.col("record_type").isin(*acls.TYPES)).select(*acls.INPUT).toArrow())


def reassignments_of(r: DataFrame, end_ms: int | None) -> pa.Table:
    """The reassignments of decoded rows (:func:`audit.replay.records_as_of`): the partition rows walked in one task
    (:mod:`audit.reassignments`), the table made on the driver (the job's function, as it does)."""
    return reassignments.table(_walk(r, reassignments.moves, reassignments.MOVES), end_ms)


def _size(files: list[Path]) -> str:
    total = sum(f.stat().st_size for f in files if f.exists())
    return f"{total / 1e6:,.1f} MB" if total >= 1e5 else f"{total / 1e3:,.1f} kB"


def run_audit(
    spark: SparkSession,
    log_dir: str | Path,
    out: str | Path,
    *,
    as_of_offset: int | None = None,
    from_start: bool = False,
    report: bool = True,
    manifest: dict[str, Any] | None = None,
    progress: Callable[[str], None] | None = None,
) -> AuditResult:
    """Audit ``log_dir`` into ``out``. ``manifest``: the export's (checked) manifest.json, shown first in the report
    and kept in summary.json; ``progress``: told a line as each stage starts (None: silent)."""
    say = progress or (lambda _: None)
    started = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = select_files(log_dir, from_start)
    say(f"decoding {len(files)} file(s) ({_size(files)}) and building the tables on the executors…")
    # The executors decode the log into the records table and build the state tables and most findings from
    # what they decode (audit.records): two Spark jobs.
    written = write_tables(spark, log_dir, out, from_start=from_start, as_of_offset=as_of_offset)
    t_executors = time.perf_counter()
    say(
        f"decoded {written.records:,} records in {t_executors - started:.1f} s; checking suspects and building the "
        "analytics…"
    )
    late = suspects_findings(
        read_records(spark, out),
        as_of_offset,
        *(read_summary(out, name) for name in ("orphan_suspects", "broker_mentions", "broker_registrations")),
    )
    if late is not None:  # a broken log: its suspects' rows are read again
        late.write.mode("append").parquet(str(out / "violations"))
    state = {name: tables.read_table(out / name, schema) for name, schema in ANALYTICS_INPUTS.items()}
    changes = read_summary(out, "leader_changes")
    broker_rows = records_of(out, tables.BROKER_TYPES, tables.BROKER_EVENT_INPUT, as_of_offset)
    found = tables.analytics(state["partitions"], state["brokers"], state["configs"]) | {
        "broker_events": tables.broker_events(broker_rows, changes),
        "offline_partitions": tables.offline_partitions(changes, written.last_time),
        "reassignments": reassignments.table(read_summary(out, "reassignment_moves"), written.last_time),
    }
    for name, table in found.items():
        shutil.rmtree(out / name, ignore_errors=True)
        tables.write_table(table, out / name)
    offline = found["offline_partitions"]
    counts: dict[str, int] = {"records": written.records}
    collected: dict[str, list[dict[str, Any]]] = {}
    for name in OUTPUT_TABLES:
        # The driver reads what it needs back from the files (it shares them): row counts from their footers,
        # the first rows for the report, a column or two.
        written_table = pads.dataset(out / name, format="parquet")
        counts[name] = written_table.count_rows()
        if name not in ("partitions", "topics", "configs", "timeline") or counts[name] <= 2000:
            collected[name] = written_table.head(2000).to_pylist()
    collected["timeline"], _ = timeline.newest(out / "timeline", TIMELINE_SHOWN)
    events = records_of(out, history.TOPIC_EVENT_TYPES, tables.TOPIC_INPUT, as_of_offset)
    overview = tables.topics_overview(events, state["partitions"], state["configs"])
    collected["topics_overview"] = overview.slice(0, TOPICS_SHOWN).to_pylist()
    checks = pads.dataset(out / "violations", format="parquet").to_table(columns=["check"]).column("check")
    violation_counts = {c["values"]: c["counts"] for c in pc.value_counts(checks).to_pylist()}
    fenced = len(state["brokers"].filter(pc.field("fenced")))
    warned = tables.warnings(state["partitions"], state["brokers"], WARNING_ROWS)
    acl_table = tables.read_table(out / "acls", acls.ACLS)
    warned["risky_acls"] = acls.risky(acl_table, WARNING_ROWS)
    in_force = pc.sum(pc.cast(acl_table.column("in_force"), pa.int64())).as_py() or 0
    t_tables = time.perf_counter()
    result = AuditResult(
        out=out,
        records=written.records,
        batches_with_errors=written.errors,
        tables=counts,
        violations=violation_counts,
        summary={
            "manifest": None if manifest is None else {k: v for k, v in manifest.items() if k != "files"},
            "files": len(files),
            "last_offset": written.last_offset,
            "fenced_brokers": fenced,
            "offline": {
                "partitions": offline.num_rows,
                "intervals": pc.sum(offline.column("intervals")).as_py() or 0,
                "total_ms": pc.sum(offline.column("total_ms")).as_py() or 0,
                "max_ms": pc.max(offline.column("max_ms")).as_py() or 0,
                "at_end": pc.sum(pc.cast(offline.column("offline_at_end"), "int64")).as_py() or 0,
            },
            "warnings": {
                name: {k: v for k, v in entry.items() if k != "rows" or name == "risky_acls"}
                for name, entry in warned.items()
            },
            "acls": {"in_force": in_force, "created": acl_table.num_rows, "removed": acl_table.num_rows - in_force},
            "reassignments": reassignments.outcomes(found["reassignments"]),
            "topics_total": overview.num_rows,
            "as_of_offset": as_of_offset,
            "log_dir": str(log_dir),
        },
    )
    if manifest is not None:
        listed = manifest.get("files") or {}
        result.summary["manifest"]["file_count"] = len(listed)
        result.summary["manifest"]["bytes"] = sum(f.get("bytes", 0) for f in listed.values() if isinstance(f, dict))
    if report:
        from audit.report import write_report

        say(f"writing report… ({counts['violations']:,} finding(s), {counts['timeline']:,} timeline row(s))")
        names = (
            state["partitions"].select(["topic_name", "topic_id"]).group_by(["topic_name", "topic_id"]).aggregate([])
        )
        topic_ids = dict(zip(names.column("topic_name").to_pylist(), names.column("topic_id").to_pylist(), strict=True))
        write_report(out, result, collected, warnings=warned, topic_ids=topic_ids)
    done = time.perf_counter()
    result.seconds = {
        "executors": t_executors - started,
        "driver": t_tables - t_executors,
        "report": done - t_tables,
        "total": done - started,
    }
    say(f"done in {done - started:.1f} s")
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
