"""The Spark side of the audit, with one SparkSession for the module: the ``cluster_metadata`` data source, the
replay (against the live controller's own replay rules), the invariant checks, and the ``pykraft audit`` CLI."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from audit_helpers import (
    TS,
    LogBuilder,
    acl_entry,
    acl_log,
    assert_same_state,
    audit_state,
    change,
    controller_replay,
    leader_change,
    partition,
    pchange,
    register,
    snapshot_bytes,
    snapshot_name,
    topic_config,
    uid,
)
from pyspark.sql import functions as F

from audit.decode import FileRange, arrow_schema, decode_range, spark_schema
from audit.invariants import batches_of, check_all
from audit.job import OUTPUT_TABLES, analytics, read_rows, run_audit
from audit.record_checks import COLUMNS
from audit.records import BATCHES, BUCKETS, read_records, write_tables
from audit.replay import State, replay
from audit.spark import LOCAL_JVM
from controller.records import (
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    NoOpRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    serialize,
)
from quorum.log.log import METADATA_PARTITION_DIR

REPO = Path(__file__).resolve().parents[2]


def sort_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: (r["order"] is None, r["order"], r["file"], r["position"]))


def spark_rows(df: Any) -> list[dict]:
    return sort_rows(df.toArrow().to_pylist())


def decoded(path: Path, source: str, *, with_json: bool) -> list[dict]:
    r = FileRange(str(path), 0, path.stat().st_size, source)
    return pa.Table.from_batches(list(decode_range(r, with_json=with_json)), schema=arrow_schema(with_json)).to_pylist()


# -- the data source ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def segmented(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path], int]:
    """Three segments (the last one ending in garbage) and a snapshot whose end offset falls in the second."""
    root = tmp_path_factory.mktemp("segmented")
    log = LogBuilder()
    files: dict[str, Path] = {}
    for name, first_topic in (("seg0", 0), ("seg1", 40), ("seg2", 80)):
        log.batches.clear()
        base = log.next_offset
        for i in range(first_topic, first_topic + 40, 4):
            log.add(*(TopicRecord(name=f"t{j}", topic_id=uid(j)) for j in range(i, i + 3)), partition(uid(i), 0, [1]))
        files[name] = log.write(root, f"{base:020d}.log")
    files["seg2"].write_bytes(files["seg2"].read_bytes() + b"\x13\x37garbage" * 20)
    end_offset = 55  # inside seg1 (offsets 40..79)
    files["snapshot"] = root / METADATA_PARTITION_DIR / snapshot_name(end_offset, 1)
    files["snapshot"].write_bytes(
        snapshot_bytes([TopicRecord(name=f"t{j}", topic_id=uid(j)) for j in range(0, 42)], epoch=1, per_batch=5)
    )
    return root, files, end_offset


def test_the_local_jvm_runs_with_the_audits_jit_and_gc_flags(spark: Any) -> None:
    if "PYKRAFT_SPARK_JAVA_OPTIONS" in os.environ:
        pytest.skip("the flags are overridden here")
    jvm_args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert set(LOCAL_JVM.split()) <= set(jvm_args), jvm_args


def test_data_source_rows_equal_decode_range(spark: Any, segmented: tuple[Path, dict[str, Path], int]) -> None:
    root, files, _ = segmented
    df = (
        spark.read.format("cluster_metadata")
        .option("fromStart", "true")
        .option("json", "true")
        .option("splitBytes", "1500")  # several partitions per segment
        .load(str(root))
    )
    assert df.schema == spark_schema(True)
    expected = [row for name in ("seg0", "seg1", "seg2") for row in decoded(files[name], "log", with_json=True)]
    rows = spark_rows(df)
    assert len(rows) == len(expected) == 3 * 40 + 1  # every record, and the garbage as one error row
    assert rows == sort_rows(expected)
    assert [r["file"] for r in rows if r["error"] is not None] == [str(files["seg2"])]


def test_data_source_reads_the_newest_snapshot_and_the_log_after_it(
    spark: Any, segmented: tuple[Path, dict[str, Path], int]
) -> None:
    root, files, end_offset = segmented
    older = files["snapshot"].with_name(snapshot_name(20, 1))  # an older snapshot is not read
    older.write_bytes(snapshot_bytes([NoOpRecord()], epoch=1))
    try:
        rows = spark_rows(spark.read.format("cluster_metadata").load(str(root / METADATA_PARTITION_DIR)))
    finally:
        older.unlink()
    snapshot = decoded(files["snapshot"], "snapshot", with_json=False)
    log = [
        row
        for name in ("seg1", "seg2")  # seg0 ends before the snapshot's end offset: not read
        for row in decoded(files[name], "log", with_json=False)
        if row["offset"] is None or row["offset"] >= end_offset
    ]
    assert rows == sort_rows(snapshot + log)
    assert rows[0]["source"] == "snapshot" and rows[0]["record_type"] == "SnapshotHeaderRecord"
    assert [r["offset"] for r in rows if r["source"] == "log" and r["error"] is None] == list(range(end_offset, 120))


# -- replay: the audit against the controller's own rules --------------------------------------------------------------


A, B, G1, G2 = uid(1), uid(2), uid(3), uid(4)


def history() -> tuple[LogBuilder, int]:
    """A known history over two leader epochs; returns it and the last offset of the first epoch."""
    b = LogBuilder(epoch=1)
    b.add(leader_change(1), control=True)
    b.add(FeatureLevelRecord(name="metadata.version", feature_level=22))
    racks = {1: "r1", 2: "r2", 3: "r3", 4: None, 5: "r1", 6: "r2"}
    first = b.next_offset
    e = {broker: first + i for i, broker in enumerate(racks)}  # a broker epoch is its registration's offset
    b.add(*(register(broker, e[broker], rack) for broker, rack in racks.items()))
    b.add(*(change(broker, e[broker], fenced=-1) for broker in (1, 2, 3, 5, 6)), UnfenceBrokerRecord(id=4, epoch=e[4]))
    b.add(
        TopicRecord(name="alpha", topic_id=A),
        topic_config("alpha", "retention.ms", "1000"),
        topic_config("alpha", "cleanup.policy", "delete"),
        partition(A, 0, [1, 2, 3]),
        partition(A, 1, [2, 3, 1]),
        partition(A, 2, [3, 1, 2]),
    )
    b.add(
        TopicRecord(name="beta", topic_id=B),
        topic_config("beta", "segment.bytes", "1048576"),
        partition(B, 0, [1, 2]),
        partition(B, 1, [2, 1]),
    )
    b.add(TopicRecord(name="gamma", topic_id=G1), topic_config("gamma", "retention.ms", "5"), partition(G1, 0, [3]))
    b.add(pchange(A, 0, isr=[1, 2]), pchange(A, 1, leader=3), pchange(A, 2, leader=-1, isr=[3]))
    b.add(
        topic_config("alpha", "retention.ms", "2000"),  # overwritten
        topic_config("alpha", "cleanup.policy", None),  # deleted
        ConfigRecord(resource_type=4, resource_name="1", name="log.retention.ms", value="1"),  # a broker's
        ConfigRecord(resource_type=4, resource_name="", name="num.io.threads", value="8"),  # the cluster default
    )
    b.add(acl_entry(1, "User:alice", 3), acl_entry(2, "User:*", 2, 4, "kafka-cluster"))  # READ orders; ALL, cluster
    cut = b.next_offset - 1
    b.epoch = 2
    b.add(leader_change(2), control=True)
    b.add(RemoveTopicRecord(topic_id=B))
    # broker 3: controlled shutdown (leadership moved away), fenced, then registered again
    b.add(pchange(A, 1, leader=2, isr=[2, 1]), change(3, e[3], shutdown=1))
    b.add(change(3, e[3], fenced=1))
    e3 = b.add(register(3, b.next_offset, "r3"))
    b.add(change(3, e3, fenced=-1))
    b.add(FenceBrokerRecord(id=4, epoch=e[4]))
    # broker 2 registers again on another rack; a change naming its old registration changes nothing
    e2 = b.add(register(2, b.next_offset, "r2-new"))
    b.add(change(2, e2, fenced=-1))
    b.add(change(2, e[2], fenced=1))
    b.add(
        UnregisterBrokerRecord(broker_id=5, broker_epoch=e[5]),
        UnregisterBrokerRecord(broker_id=6, broker_epoch=999),  # a stale epoch: ignored
    )
    b.add(change(6, e[6], shutdown=1))  # stays in controlled shutdown, unfenced
    b.add(change(1, e[1], fenced=1), change(1, e[1], fenced=-1), change(1, e[1]))  # fenced, unfenced, no change
    # gamma removed and created again under a new id; its old config goes with it
    b.add(
        RemoveTopicRecord(topic_id=G1),
        TopicRecord(name="gamma", topic_id=G2),
        topic_config("gamma", "min.insync.replicas", "1"),
        partition(G2, 0, [1, 2]),
        partition(G2, 1, [2, 1]),
    )
    # alpha-2 set again by a full PartitionRecord (its earlier change no longer counts), then given a leader again;
    # a reassignment of alpha-0 onto broker 4
    b.add(partition(A, 2, [3, 1, 2], isr=[3], leader=3, leader_epoch=5, partition_epoch=7))
    b.add(
        pchange(A, 2, leader=2, isr=[3, 2]),
        pchange(A, 0, replicas=[1, 2, 3, 4], adding_replicas=[4], removing_replicas=[1]),
        pchange(A, 0, isr=[1, 2, 4]),
        pchange(A, 0, replicas=[2, 3, 4], isr=[2, 4], leader=2, adding_replicas=[], removing_replicas=[]),
    )
    b.add(topic_config("gamma", "min.insync.replicas", "2"), NoOpRecord())
    b.add(pchange(G2, 0, isr=[1]), pchange(G2, 0, isr=[1, 2]))  # partition epoch +2, leader epoch unchanged
    b.add(pchange(A, 1, leader=1), pchange(A, 1, leader=1))  # the same leader again: its epoch still goes up
    # gamma-0 loses its leader, and gets one back by an unclean election; alpha gets a partition more
    b.add(pchange(G2, 0, leader=-1), timestamp=TS + 1000)
    b.add(pchange(G2, 0, leader=2, isr=[2], leader_recovery_state=1), timestamp=TS + 4000)
    b.add(partition(A, 3, [1, 2, 3]), timestamp=TS + 5000)
    # broker 1 fenced: the leaderships it holds move in the same batch, then it is unfenced
    b.add(
        pchange(A, 1, leader=2, isr=[2]),
        pchange(A, 3, leader=2, isr=[2, 3]),
        change(1, e[1], fenced=1),
        timestamp=TS + 6000,
    )
    b.add(change(1, e[1], fenced=-1), timestamp=TS + 9000)
    b.add(RemoveAccessControlEntryRecord(id=uid(101)), acl_entry(3, "User:bob", 4), timestamp=TS + 9500)
    return b, cut


@pytest.fixture(scope="module")
def known(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[LogBuilder, int, Any]:
    root = tmp_path_factory.mktemp("history")
    log, cut = history()
    log.write(root)
    rows = read_rows(spark, root).cache()
    yield log, cut, rows
    rows.unpersist()


def test_replay_equals_the_controllers_replay(known: tuple[LogBuilder, int, Any]) -> None:
    log, _, rows = known
    expected = controller_replay(log.records)
    # the history did what it says (the reference is not vacuous)
    assert set(expected["topics"]) == {str(A), str(G2)}
    assert (expected["brokers"][2]["rack"], expected["brokers"][2]["fenced"]) == ("r2-new", False)
    assert (expected["brokers"][4]["fenced"], expected["brokers"][6]["in_controlled_shutdown"]) == (True, True)
    assert 5 not in expected["brokers"] and not expected["brokers"][3]["in_controlled_shutdown"]
    assert expected["partitions"][(str(A), 0)]["replicas"] == [2, 3, 4]
    assert expected["partitions"][(str(A), 1)]["leader_epoch"] == 5
    assert expected["partitions"][(str(G2), 0)]["leader_recovery_state"] == 1 and len(expected["partitions"]) == 6
    assert (
        expected["partitions"][(str(A), 2)]["leader_epoch"],
        expected["partitions"][(str(A), 2)]["partition_epoch"],
    ) == (6, 8)
    assert expected["configs"][(2, "gamma", "min.insync.replicas")] == "2"
    assert (2, "gamma", "retention.ms") not in expected["configs"]
    assert (2, "beta", "segment.bytes") not in expected["configs"]
    assert_same_state(audit_state(replay(rows)), expected)


def test_as_of_offset_gives_the_state_at_that_offset(known: tuple[LogBuilder, int, Any]) -> None:
    log, cut, rows = known
    expected = controller_replay(log.records, upto=cut)
    assert set(expected["topics"]) == {str(A), str(B), str(G1)}
    assert not any(b["fenced"] for b in expected["brokers"].values()) and len(expected["brokers"]) == 6
    assert_same_state(audit_state(replay(rows, as_of_offset=cut)), expected)
    middle = cut + 5  # after broker 3's shutdown, before it registers again
    assert_same_state(audit_state(replay(rows, as_of_offset=middle)), controller_replay(log.records, upto=middle))


def test_a_clean_log_has_no_violations(known: tuple[LogBuilder, int, Any]) -> None:
    _, _, rows = known
    violations = check_all(rows, replay(rows))
    assert violations.columns == COLUMNS
    assert [r.asDict() for r in violations.collect()] == []


def churn(seed: int) -> LogBuilder:
    """Many small batches of partition changes over three topics, with PartitionRecords that reset a partition
    part way and a topic removed and created again: a log the job splits into several ranges."""
    rng = random.Random(seed)
    b = LogBuilder()
    b.add(*(register(broker, broker, f"r{broker % 2}") for broker in range(1, 6)))
    live = {}
    for n, name in enumerate(("t0", "t1", "t2")):
        live[name] = uid(100 + n)
        b.add(TopicRecord(name=name, topic_id=live[name]), *(partition(live[name], i, [1, 2, 3]) for i in range(4)))
    for step in range(400):
        name = rng.choice(sorted(live))
        tid, index = live[name], rng.randrange(4)
        if step == 200:  # t2 removed and created again under a new id
            b.add(RemoveTopicRecord(topic_id=live["t2"]))
            live["t2"] = uid(200)
            b.add(TopicRecord(name="t2", topic_id=live["t2"]), *(partition(live["t2"], i, [3, 4]) for i in range(4)))
        elif rng.random() < 0.05:
            replicas = rng.sample(range(1, 6), 3)
            b.add(partition(tid, index, replicas, leader_epoch=rng.randrange(20), partition_epoch=rng.randrange(20)))
        else:
            fields = {"isr": rng.sample(range(1, 6), rng.randint(1, 3))} if rng.random() < 0.7 else {}
            if rng.random() < 0.4:
                fields["leader"] = rng.choice([-1, *range(1, 6)])
            if rng.random() < 0.1:
                fields |= {"replicas": rng.sample(range(1, 6), 4), "adding_replicas": [rng.randrange(1, 6)]}
            b.add(pchange(tid, index, **fields))
    return b


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, datetime):  # Spark's are UTC-aware, the job's naive UTC
        return value.replace(tzinfo=None)
    return value


def _comparable(rows: list[dict]) -> list[tuple]:
    return sorted((tuple((k, _plain(v)) for k, v in sorted(r.items())) for r in rows), key=repr)


def job_tables(spark: Any, log: Path, out: Path, as_of: int | None = None) -> dict[str, list[tuple]]:
    """Every table ``pykraft audit`` writes (its job: the executors' pyarrow), rows in a comparable order."""
    run_audit(spark, log, out, as_of_offset=as_of, report=False)
    return {
        name: _comparable(pads.dataset(out / name, format="parquet").to_table().to_pylist()) for name in OUTPUT_TABLES
    }


def query_tables(spark: Any, log: Path, as_of: int | None = None) -> dict[str, list[tuple]]:
    """The same tables as Spark queries over the data source's rows (audit.replay, check_all, analytics)."""
    rows = read_rows(spark, log).cache()
    try:
        state = replay(rows, as_of)
        frames = {
            "topics": state.topics,
            "partitions": state.partitions,
            "brokers": state.brokers,
            "configs": state.configs,
            **analytics(rows, state, as_of),
            "violations": check_all(rows, state, as_of),
        }
        return {name: _comparable(df.toArrow().to_pylist()) for name, df in frames.items()}
    finally:
        rows.unpersist()


def job_state(spark: Any, out: Path) -> State:
    return State(*(spark.read.parquet(str(out / name)) for name in ("topics", "partitions", "brokers", "configs")))


def test_the_jobs_tables_are_the_controllers_state_and_the_queries_tables(spark: Any, tmp_path: Path) -> None:
    """The job folds partitions on the executors range by range (audit.fold), merges the deltas per bucket of
    topics and builds every table with pyarrow (audit.tables): the state is the controller's, and every table
    the Spark queries' over the rows, however the log was split."""
    filled: set[str] = set()
    for name, log in (("history", history()[0]), ("churn", churn(7))):
        directory = tmp_path / name / METADATA_PARTITION_DIR
        directory.mkdir(parents=True)
        n = len(log.batches)
        for part in range(4):  # four segments: at least four ranges, whatever the split size
            batches = log.batches[part * n // 4 : (part + 1) * n // 4]
            base = int.from_bytes(batches[0][:8], "big")
            (directory / f"{base:020d}.log").write_bytes(b"".join(batches))
        out = tmp_path / f"{name}-out"
        tables = job_tables(spark, tmp_path / name, out)
        expected = controller_replay(log.records)
        assert_same_state(audit_state(job_state(spark, out)), expected)
        assert not (out / BUCKETS).exists()  # the deltas were merged, then removed
        assert tables == query_tables(spark, tmp_path / name)
        filled |= {name for name, rows in tables.items() if rows}
    assert filled == set(OUTPUT_TABLES), filled  # every table was compared with something in it
    # (PartitionRecords with random epochs: some go back, in another range than the record before them)
    assert "partition_epochs_increase" in {dict(v)["check"] for v in tables["violations"]}
    # (and replicas set with random adding replicas: reassignments left in progress, or ended by a PartitionRecord)
    reassignment_checks = {"reassignment_within_replicas", "reassignment_ends_at_target_or_original"}
    assert reassignment_checks <= {dict(v)["check"] for v in tables["violations"]}
    # The churn log was split: partitions span segments, so ranges, and the merge did real work.
    rows = read_records(spark, out)
    ranges_per_partition = (
        rows.where(F.col("record_type").isin("PartitionRecord", "PartitionChangeRecord"))
        .groupBy("topic_id", "partition_id")
        .agg(F.countDistinct("file").alias("n"))
    )
    assert ranges_per_partition.agg(F.max("n")).first()[0] > 2


# -- invariants --------------------------------------------------------------------------------------------------------


def broken_log() -> tuple[LogBuilder, dict[tuple[str, int | None], int], int]:
    """A log that breaks every invariant, each at a known place. Returns it, the expected findings (check,
    offset) -> count, and the byte position of the garbage at its end."""
    b = LogBuilder(epoch=1)
    expect: dict[tuple[str, int | None], int] = {}

    def at(check: str, offset: int | None) -> None:
        expect[(check, offset)] = expect.get((check, offset), 0) + 1

    t = {n: uid(100 + n) for n in range(12)}
    b.add(register(1, 0, "r1"), register(2, 1, "r2"), register(3, 2, "r3"))
    b.add(TopicRecord(name="t1", topic_id=t[1]), partition(t[1], 0, [1, 2]), partition(t[1], 1, [2, 1]))
    at("topic_ids_unique", b.add(TopicRecord(name="t1-copy", topic_id=t[1])))  # a second topic with t1's id
    b.add(TopicRecord(name="t2", topic_id=t[2]), partition(t[2], 0, [1]))
    at("one_live_topic_id_per_name", b.add(TopicRecord(name="t2", topic_id=t[3])))  # t2 still lives
    at("partition_of_existing_topic", b.add(partition(uid(999), 0, [1, 2])))  # no such topic
    created = b.add(TopicRecord(name="t4", topic_id=t[4]), partition(t[4], 0, [1]), partition(t[4], 2, [1]))
    at("partitions_added_in_order", created + 2)  # the next partition is 1
    at("partition_ids_contiguous", None)  # t4 has partitions 0 and 2
    b.add(TopicRecord(name="t5", topic_id=t[5]))
    at("replicas_distinct", b.add(partition(t[5], 0, [1, 1], [1])))
    b.add(TopicRecord(name="t6", topic_id=t[6]))
    at("isr_subset_of_replicas", b.add(partition(t[6], 0, [1, 2], [1, 3])))
    at("isr_subset_of_replicas", None)  # and so the final state
    b.add(TopicRecord(name="t7", topic_id=t[7]))
    at("leader_in_isr", b.add(partition(t[7], 0, [1, 2], [2], leader=1)))
    at("leader_in_isr", None)
    b.add(partition(t[1], 0, [1, 2], leader_epoch=5, partition_epoch=5))
    at("partition_epochs_increase", b.add(partition(t[1], 0, [1, 2], leader_epoch=3, partition_epoch=3)))
    b.add(TopicRecord(name="t9", topic_id=t[9]))
    at("brokers_registered", b.add(partition(t[9], 0, [1, 9], [1, 9])))  # broker 9 never registered
    at("brokers_registered", b.add(partition(t[9], 1, [4, 1], [4, 1], leader=4)))  # broker 4 registers only later
    b.add(register(4, 3, "r1"))
    # after every registration: broker 11 was never registered (the fast path of the check)
    at("brokers_registered", b.add(pchange(t[9], 0, replicas=[1, 11], isr=[1, 11])))
    at("brokers_registered", b.add(pchange(t[9], 0, isr=[11, 1])))  # named by the ISR alone
    b.add(TopicRecord(name="t10", topic_id=t[10]), partition(t[10], 0, [1, 2]))
    b.add(RemoveTopicRecord(topic_id=t[10]))
    at("partition_of_existing_topic", b.add(pchange(t[10], 0, isr=[1])))  # t10 is gone
    at("remove_of_existing_topic", b.add(RemoveTopicRecord(topic_id=t[10])))  # and cannot go again
    at("config_of_existing_topic", b.add(topic_config("t10", "retention.ms", "1")))  # nor be configured
    b.add(acl_entry(1, "User:alice", 3))
    b.add(RemoveAccessControlEntryRecord(id=uid(101)))
    at("remove_of_existing_acl", b.add(RemoveAccessControlEntryRecord(id=uid(101))))  # removed already
    at("remove_of_existing_acl", b.add(RemoveAccessControlEntryRecord(id=uid(102))))  # never created
    b.add(TopicRecord(name="t11", topic_id=t[11]), partition(t[11], 0, [1, 2]), partition(t[11], 1, [1, 2]))
    at("isr_not_empty", b.add(pchange(t[11], 0, leader=-1, isr=[])))
    at("leader_in_isr", b.add(pchange(t[11], 1, leader=3)))  # broker 3 is no replica
    at("leader_in_isr", None)
    at("isr_subset_of_replicas", b.add(pchange(t[11], 0, replicas=[2, 3], isr=[1])))
    at("isr_subset_of_replicas", None)
    at("partition_exists", b.add(pchange(t[11], 5, isr=[1])))  # t11 has two partitions
    # an unknown record type last in its batch: a finding of its own, not a gap in the offsets
    at("readable", b.add_raw([serialize(NoOpRecord()), bytes([1, 200, 1, 0])]) + 1)
    b.add(NoOpRecord())
    at("offsets_contiguous", b.add(NoOpRecord(), base_offset=b.next_offset + 5))  # five offsets missing
    b.epoch = 2
    b.add(NoOpRecord())
    at("epochs_non_decreasing", b.add(NoOpRecord(), epoch=1))
    crc_offset = b.add(NoOpRecord(), NoOpRecord())
    bad = bytearray(b.batches[-1])
    bad[17] ^= 0xFF  # the stored CRC: every record still reads, the check fails
    b.batches[-1] = bytes(bad)
    at("crc_valid", crc_offset)
    b.add(NoOpRecord())
    garbage_at = sum(len(x) for x in b.batches)
    b.batches.append(b"\x01\x02 this is not a batch " * 8)
    at("readable", None)
    return b, expect, garbage_at


@pytest.mark.parametrize("via", ["rows", "executors"])
def test_every_invariant_fires_where_it_is_broken(spark: Any, tmp_path: Path, via: str) -> None:
    """Over the data source's rows alone, and as the audit job finds them: on its executors, and over the rows
    again for the suspects its summaries name."""
    log, expected, garbage_at = broken_log()
    path = log.write(tmp_path / "log")
    if via == "rows":
        rows = read_rows(spark, tmp_path / "log").cache()
        try:
            found = [r.asDict() for r in check_all(rows, replay(rows)).collect()]
        finally:
            rows.unpersist()
    else:
        run_audit(spark, tmp_path / "log", tmp_path / "out", report=False)
        found = pads.dataset(tmp_path / "out" / "violations", format="parquet").to_table().to_pylist()
    got: dict[tuple[str, int | None], int] = {}
    for v in found:
        got[(v["check"], v["offset"])] = got.get((v["check"], v["offset"]), 0) + 1
        assert v["explanation"], v
    assert dict(sorted(got.items(), key=repr)) == dict(sorted(expected.items(), key=repr))
    by_check = {v["check"]: v for v in found if v["offset"] is not None or v["check"] == "readable"}
    garbage = next(v for v in found if v["check"] == "readable" and v["offset"] is None)
    assert garbage["file"] == str(path) and garbage["position"] == garbage_at
    assert str(path) in garbage["explanation"] and f"byte {garbage_at}" in garbage["explanation"]
    crc = by_check["crc_valid"]
    assert crc["file"] == str(path) and f"batch at byte {crc['position']}" in crc["explanation"]
    unregistered = [v["explanation"] for v in found if v["check"] == "brokers_registered"]
    assert sorted(int(e.split("names broker ")[1].split(",")[0]) for e in unregistered) == [4, 9, 11, 11], unregistered
    assert "epoch 1 follows epoch 2" in by_check["epochs_non_decreasing"]["explanation"]
    orphans = sorted(v["explanation"] for v in found if v["check"] == "partition_of_existing_topic")
    assert orphans[0].endswith("was removed before it") and orphans[1].endswith("does not exist yet"), orphans


def test_a_cut_of_the_log_gives_the_same_tables_from_the_job_and_the_queries(spark: Any, tmp_path: Path) -> None:
    """--as-of-offset, on a log that breaks every invariant: the job leaves the records after the cut out of the
    state and the checks (it still writes them to the records table) and gets every table the queries get."""
    log, expected, _ = broken_log()
    log.write(tmp_path / "log")
    named_early = sorted(offset for check, offset in expected if check == "brokers_registered")
    (repeat,) = [offset for check, offset in expected if check == "replicas_distinct"]
    # before the per-record findings; after broker 4 is named, before it registers and 11 is named; the end
    at: dict[int | None, dict[str, list[tuple]]] = {}
    for cut in (repeat - 1, named_early[1], None):
        at[cut] = job_tables(spark, tmp_path / "log", tmp_path / f"out-{cut}", cut)
        assert at[cut] == query_tables(spark, tmp_path / "log", cut), cut
    found = {cut: [dict(v) for v in tables["violations"]] for cut, tables in at.items()}
    assert "replicas_distinct" not in {v["check"] for v in found[repeat - 1]}
    assert "replicas_distinct" in {v["check"] for v in found[None]}
    unregistered = [v["offset"] for v in found[named_early[1]] if v["check"] == "brokers_registered"]
    assert sorted(unregistered) == named_early[:2], unregistered


def test_records_table_holds_exactly_the_data_source_rows(spark: Any, tmp_path: Path) -> None:
    """The executors write the records table with pyarrow, a directory per record type; read back, it is the
    data source's rows, column for column, error rows (a null type) included."""
    log, _, _ = broken_log()
    log.write(tmp_path / "log")
    written = write_tables(spark, tmp_path / "log", tmp_path / "out")
    table = read_records(spark, tmp_path / "out")
    source = read_rows(spark, tmp_path / "log")
    assert sorted(table.columns) == sorted(source.columns)
    key = ["offset", "position", "record_type", "error"]
    got = sorted(tuple(map(str, r)) for r in table.select(*source.columns).collect())
    want = sorted(tuple(map(str, r)) for r in source.collect())
    assert got == want
    assert written.records == len(want) and written.errors == sum(1 for r in source.collect() if r["error"])
    assert written.last_offset == max(r["offset"] for r in source.select(*key).collect() if r["offset"] is not None)
    dirs = sorted(p.name for p in (tmp_path / "out" / "records").iterdir())
    assert "record_type=TopicRecord" in dirs and "record_type=__HIVE_DEFAULT_PARTITION__" in dirs, dirs
    # The batches table the executors wrote is what batches_of computes from the rows.
    ours = sorted(tuple(map(str, r)) for r in spark.read.parquet(str(tmp_path / "out" / "batches")).collect())
    assert ours == sorted(tuple(map(str, r)) for r in batches_of(source).select(*BATCHES.names).collect())
    # Rewriting replaces the table; a type's filter reads only its directory.
    write_tables(spark, tmp_path / "log", tmp_path / "out")
    assert read_records(spark, tmp_path / "out").count() == len(want)
    topics = read_records(spark, tmp_path / "out").where("record_type = 'TopicRecord'")
    assert "PartitionFilters: [isnotnull(record_type" in topics._jdf.queryExecution().executedPlan().toString()


def test_run_audit_in_a_long_lived_session_leaves_nothing_cached(spark: Any, tmp_path: Path) -> None:
    """A notebook audits many logs in one session: each run must release the tables it persisted (they piled
    up and slowed a second 5M-record audit from 77 s to 115 s), and give the same answer every time."""
    log, expected, _ = broken_log()
    log.write(tmp_path / "log")
    cached_before = spark.sparkContext._jsc.getPersistentRDDs().size()
    first = run_audit(spark, tmp_path / "log", tmp_path / "out1", report=False)
    second = run_audit(spark, tmp_path / "log", tmp_path / "out2", report=False)
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == cached_before
    assert first.violations == second.violations and first.tables == second.tables
    assert sum(first.violations.values()) == sum(expected.values())


def test_the_report_says_who_may_do_what(spark: Any, tmp_path: Path) -> None:
    """The ACLs in force with when each was created, those removed, and the risky grants as warnings: in the text,
    summary.json and report.html (the tables themselves: test_acls_audit.py)."""
    o, _ = acl_log(tmp_path / "log")
    result = run_audit(spark, tmp_path / "log", tmp_path / "out")
    text = result.text()
    assert "acls 5 in force (8 created, 3 removed)" in text, text
    assert "warning: 4 risky ACL(s) in force (ALLOW to every user (User:*): 2," in text, text
    line = f"  User:alice from * ALLOW ALL on CLUSTER kafka-cluster (LITERAL), created at offset {o['cluster_all']}: "
    assert line + "ALLOW of ALL operations from any host (*); ALLOW of ALL on the CLUSTER" in text, text
    assert "User:* from * ALLOW DESCRIBE on GROUP g1 (LITERAL), found in the snapshot: ALLOW to every" in text, text
    assert result.tables["acls"] == 8
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["acls"] == {"in_force": 5, "created": 8, "removed": 3}
    risky = summary["warnings"]["risky_acls"]
    assert risky["count"] == 4 and [r["created_offset"] for r in risky["rows"]] == [
        None, o["cluster_all"], o["more"], o["replaced"]
    ]  # fmt: skip
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'id="warning-risky_acls"' in page and "4 risky ACL(s) in force" in page
    in_force = page.split('id="acls-in-force"')[1].split("</table>")[0]
    removed = page.split('id="acls-removed"')[1].split("</table>")[0]
    assert in_force.count("<tr>") == 6 and removed.count("<tr>") == 4  # with the header rows
    assert "User:bob" in removed and "User:bob" not in in_force and "(in the snapshot)" in in_force
    assert page.count('data-kind="acl_') == 9


# -- the CLI -----------------------------------------------------------------------------------------------------------


ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYKRAFT_SHUFFLE_PARTITIONS": "2"}  # the job's knob; default 8


def pykraft(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft", *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, env=ENV, check=False,
    )  # fmt: skip


@dataclass
class CliRun:
    data: Path
    out: Path
    returncode: int
    stdout: str
    stderr: str
    files: dict[str, Any]  # what the test must know about its input


def damaged_log(data: Path) -> dict[str, Any]:
    """A whole segment, a segment cut in its last batch, a garbage file, and one that cannot be read at all."""
    log = LogBuilder()
    log.add(register(1, 0, "r1"))
    log.add(TopicRecord(name="whole", topic_id=uid(1)), partition(uid(1), 0, [1]), partition(uid(1), 1, [1]))
    log.write(data)
    log.batches.clear()
    second = log.next_offset
    log.add(TopicRecord(name="kept", topic_id=uid(2)), partition(uid(2), 0, [1]))
    log.add(TopicRecord(name="lost", topic_id=uid(3)), partition(uid(3), 0, [1]))
    truncated = log.write(data, f"{second:020d}.log")
    truncated.write_bytes(truncated.read_bytes()[:-10])
    garbage = data / METADATA_PARTITION_DIR / f"{log.next_offset:020d}.log"
    garbage.write_bytes(bytes(range(256)) * 12)
    unreadable = data / METADATA_PARTITION_DIR / f"{log.next_offset + 100:020d}.log"
    unreadable.mkdir()  # as a file without read permission would be (these tests may run as root)
    return {"truncated": truncated, "garbage": garbage, "unreadable": unreadable, "cut_at": len(log.batches[0])}


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CliRun]:
    """``pykraft audit`` (a JVM each) on a demo log and on a damaged one."""
    root = tmp_path_factory.mktemp("cli")
    demo, damaged = root / "demo", root / "damaged"
    for _ in range(2):  # two leader epochs, two topics
        assert pykraft("demo", "--data-dir", str(demo)).returncode == 0
    runs = {}
    for name, data, files in (("demo", demo, {}), ("damaged", damaged, damaged_log(damaged))):
        out = root / f"{name}-out"
        done = pykraft("audit", str(data), "--out", str(out), "--master", "local[2]", timeout=400)
        runs[name] = CliRun(data, out, done.returncode, done.stdout, done.stderr, files)
    return runs


def test_cli_audits_a_demo_log(cli_runs: dict[str, CliRun]) -> None:
    run = cli_runs["demo"]
    output, out = run.stdout + run.stderr, run.out
    assert run.returncode == 0, output
    assert "at org.apache" not in output and "Traceback" not in output
    assert re.search(r"^audited 26 records from 1 file\(s\); last offset 25$", run.stdout, re.M), run.stdout
    assert "topics 2, partitions 6, brokers 3 (0 fenced), configs 2" in run.stdout
    assert "violations: none" in run.stdout
    tables = {"topics": 2, "partitions": 6, "brokers": 3, "configs": 2, "violations": 0}
    for name, count in tables.items():
        assert pq.read_table(out / name).num_rows == count, name
    for name in ("topics_per_minute", "brokers_load", "racks_load", "replication_factors", "configs_in_use"):
        assert pq.read_table(out / name).num_rows > 0, name
    partitions = pq.read_table(out / "partitions").to_pylist()
    assert {p["topic_name"] for p in partitions} == {"demo-1", "demo-2"}
    assert {len(p["replicas"]) for p in partitions} == {3}
    html = (out / "report.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', html)
    assert images, "report.html shows no charts"
    for image in images:
        assert (out / image).is_file() and (out / image).read_bytes()[:4] == b"\x89PNG", image
    summary = json.loads((out / "summary.json").read_text())
    assert summary["records"] == 26 and summary["tables"]["topics"] == 2 and summary["violations"] == {}


@pytest.mark.parametrize("case", ["missing directory", "empty directory", "no log files"])
def test_cli_bad_input_is_one_line(tmp_path: Path, case: str) -> None:
    target = tmp_path / "logs"
    if case != "missing directory":
        target.mkdir()
    if case == "no log files":
        (target / "notes.txt").write_text("not a log")
    done = pykraft("audit", str(target), "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pykraft audit: ") and str(target) in lines[0], done.stderr


def test_cli_reports_damage_and_audits_the_rest(cli_runs: dict[str, CliRun]) -> None:
    """A truncated segment, a garbage file and one that cannot be read at all: each one finding (file and byte),
    every readable record audited."""
    run = cli_runs["damaged"]
    output, out, files = run.stdout + run.stderr, run.out, run.files
    truncated, garbage, unreadable = (str(files[k]) for k in ("truncated", "garbage", "unreadable"))
    cut_at = files["cut_at"]  # the start of the batch that was cut
    assert "at org.apache" not in output and "Traceback" not in output
    assert run.returncode == 1, output  # findings: exit 1, after the summary
    assert "audited" in run.stdout and "violations: readable 3" in run.stdout, run.stdout
    violations = {v["file"]: v for v in pq.read_table(out / "violations").to_pylist()}
    assert set(violations) == {truncated, garbage, unreadable}
    assert violations[unreadable]["explanation"].startswith(f"{unreadable}: cannot read")
    assert violations[truncated]["position"] == cut_at and f"byte {cut_at}" in violations[truncated]["explanation"]
    assert violations[garbage]["position"] == 0
    assert sorted(t["topic_name"] for t in pq.read_table(out / "topics").to_pylist()) == ["kept", "whole"]
    assert pq.read_table(out / "partitions").num_rows == 3
