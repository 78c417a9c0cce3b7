"""Invariant checks over the log's rows and the replayed state. Each violation is a row: which check, the offset
(and file and batch position) where it shows, and an explanation that names the values involved."""

from __future__ import annotations

from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from audit import acls, history, reassignments
from audit.record_checks import (
    COLUMNS,
    FINDINGS,
    MENTIONS,
    REGISTRATIONS,
    TOPIC_EVENTS,
    configs_of_removed_topics,
    early_brokers,
    findings,
    mentions,
    orphan_suspects,
    over_partition,
    removals_of_unknown_acls,
    removals_of_unknown_topics,
)
from audit.record_checks import INPUT as CHECK_INPUT
from audit.replay import State, records_as_of


def _finding(df: DataFrame, check: str | F.Column, explanation: F.Column) -> DataFrame:
    return df.select(
        F.lit(check).alias("check"),  # a Column passes through
        F.col("offset").cast("long").alias("offset"),
        F.col("file"),
        F.col("position").cast("long").alias("position"),
        explanation.alias("explanation"),
    )


def _nowhere(df: DataFrame) -> DataFrame:
    """Rows about the final state: no offset, file or position to point at."""
    return df.select(
        "*",
        F.lit(None).cast("long").alias("offset"),
        F.lit(None).cast("string").alias("file"),
        F.lit(None).cast("long").alias("position"),
    )


def batches_of(rows: DataFrame) -> DataFrame:
    """One row per batch that holds records: where it lies, its first and last record offsets, epoch, CRC check.
    (The audit job has the executors write this table while decoding; this computes the same from the rows.)
    A record that did not decode (an unknown apiKey, say) still holds its offset: it counts here, or its batch
    would seem to end early and the next one to leave a gap."""
    return (
        rows.where(F.col("offset").isNotNull())
        .groupBy("file", "position")
        .agg(
            F.first("source").alias("source"),
            F.min("offset").alias("offset"),
            F.max("offset").alias("last"),
            F.min("epoch").alias("epoch"),
            F.min(F.col("crc_valid").cast("int")).cast("boolean").alias("crc_valid"),
        )
    )


def _orphans(r: DataFrame, part_rows: DataFrame, where: F.Column, suspects: list[str]) -> DataFrame | None:
    """partition_of_existing_topic: partition records whose topic id is not live where they lie. A topic id lives
    from a creation to the id's next event. Only the rows of the ``suspects`` (the topics whose partition rows
    do not all lie in one lifetime, :func:`audit.record_checks.orphan_suspects`; none in a sound log) are matched
    with lifetimes one by one. None when there are none."""
    if not suspects:
        return None
    topic_events = r.where(F.col("record_type").isin("TopicRecord", "RemoveTopicRecord"))
    lifetimes = (
        topic_events.where(F.col("topic_id").isin(suspects))
        .select(
            F.col("topic_id").alias("_tid"),
            F.col("order").alias("_born"),
            F.lead("order").over(Window.partitionBy("topic_id").orderBy("order")).alias("_ends"),
            "record_type",
        )
        .where("record_type = 'TopicRecord'")
        .drop("record_type")
    )
    within = (
        (F.col("_tid") == F.col("topic_id"))
        & (F.col("_born") < F.col("order"))
        & (F.col("_ends").isNull() | (F.col("_ends") > F.col("order")))
    )
    orphans = part_rows.where(F.col("topic_id").isin(suspects)).join(F.broadcast(lifetimes), within, "left_anti")
    # The explanation ends in whether the topic id ever existed before the record.
    first_born = lifetimes.groupBy(F.col("_tid").alias("topic_id")).agg(F.min("_born").alias("_b"))
    end = F.when(F.col("_b") < F.col("order"), "was removed before it").otherwise("does not exist yet")
    return _finding(
        orphans.join(F.broadcast(first_born), "topic_id", "left"),
        "partition_of_existing_topic",
        F.concat(F.format_string("%s for %s, which ", "record_type", where), end),
    )


def _unregistered(
    part_rows: DataFrame, where: F.Column, suspects: list[int], first: dict[int, int]
) -> DataFrame | None:
    """brokers_registered: records naming a broker (in replicas or ISR) before its first registration (``first``,
    per broker). Only records naming one of the ``suspects`` (the brokers named too early,
    :func:`audit.record_checks.early_brokers`; none in a sound log) are read again. None when there are none."""
    if not suspects:
        return None
    # The first registrations are one row per broker: read into the plan as literals and looked up in place.
    known = F.create_map(*[F.lit(v) for kv in sorted(first.items()) for v in kv]) if first else None

    def not_yet_registered(broker: F.Column) -> F.Column:
        at = known[broker] if known is not None else F.lit(None).cast("long")
        return at.isNull() | (at > F.col("order"))

    named = F.array_union(F.coalesce("replicas", F.array()), F.coalesce("isr", F.array()))
    early = part_rows.where(F.arrays_overlap(named, F.array(*[F.lit(b) for b in suspects]))).select(
        "*", F.explode(F.filter(named, not_yet_registered)).alias("_broker")
    )
    return _finding(
        early,
        "brokers_registered",
        F.format_string("%s for %s names broker %d, which is not registered", "record_type", where, "_broker"),
    )


def suspects_findings(
    rows: DataFrame, as_of_offset: int | None, orphan_suspects: pa.Table, mentions: pa.Table, registrations: pa.Table
) -> DataFrame | None:
    """The findings that need the rows again, for the suspects alone (none in a sound log): partition rows outside
    their topic's lifetimes, and brokers named before they registered. The summaries (``orphan_suspects``,
    broker ``mentions`` and ``registrations``: :mod:`audit.record_checks`) are of the same cut. None without
    suspects: no Spark job."""
    r = records_as_of(rows, as_of_offset)
    part_rows = r.where(F.col("record_type").isin("PartitionRecord", "PartitionChangeRecord"))
    where = F.format_string("partition %d of topic id %s", "partition_id", "topic_id")
    early, first = early_brokers(mentions, registrations)
    found = [
        df
        for df in (
            _orphans(r, part_rows, where, orphan_suspects.column("topic_id").to_pylist()),
            _unregistered(part_rows, where, early, first),
        )
        if df is not None
    ]
    return reduce(DataFrame.unionByName, found) if found else None


PARTITION_TYPES = history.PARTITION_TYPES
TOPIC_ROWS = [
    "record_type", "topic_id", "topic_name", "resource_type", "resource_name", "config_name", "config_value",
    "order", "offset", "file", "position",
]  # fmt: skip


WALK_INPUT = list(dict.fromkeys([*history.INPUT, *reassignments.INPUT]))


def _walk_findings(rows: pa.Table) -> pa.Table:
    """The findings of both walks of each partition in log order (the partition rules, the reassignments')."""
    return pa.concat_tables([history.findings(rows), reassignments.findings(rows)])


def _topic_findings(rows: pa.Table) -> pa.Table:
    """remove_of_existing_topic and config_of_existing_topic over topic events and ConfigRecords together."""
    kind = rows.column("record_type")
    events = rows.filter(pc.is_in(kind, value_set=pa.array(history.TOPIC_EVENT_TYPES)))
    configs = rows.filter(pc.equal(kind, "ConfigRecord"))
    return pa.concat_tables([removals_of_unknown_topics(events), configs_of_removed_topics(configs, events)])


def check_all(rows: DataFrame, state: State, as_of_offset: int | None = None) -> DataFrame:
    """Every finding as a row, over any rows (the audit job computes the same on its executors: ``audit.records``)."""
    r = records_as_of(rows, as_of_offset)
    found: list[DataFrame] = []

    # -- damage: unreadable bytes and batches, bad CRCs (the job reads on past them)
    errors = rows.where(F.col("error").isNotNull())
    found.append(_finding(errors, "readable", F.col("error")))
    batches = batches_of(rows)
    bad_crc = batches.where(~F.col("crc_valid"))
    found.append(
        _finding(
            bad_crc,
            "crc_valid",
            F.format_string("batch at byte %d (offsets %d-%d) fails its CRC-32C check", "position", "offset", "last"),
        )
    )

    # -- offsets contiguous and epochs non-decreasing, batch by batch along the log
    batches = batches.where(F.col("source") == "log")
    along = Window.orderBy("offset")
    seq = batches.select(
        "*",
        F.lag("last").over(along).alias("prev_last"),
        F.lag("epoch").over(along).alias("prev_epoch"),
    )
    found.append(
        _finding(
            seq.where(F.col("prev_last").isNotNull() & (F.col("offset") != F.col("prev_last") + 1)),
            "offsets_contiguous",
            F.format_string("batch starts at offset %d, but the batch before ended at %d", "offset", "prev_last"),
        )
    )
    found.append(
        _finding(
            seq.where(F.col("epoch") < F.col("prev_epoch")),
            "epochs_non_decreasing",
            F.format_string("epoch %d follows epoch %d", "epoch", "prev_epoch"),
        )
    )

    # -- topics
    topic_records = r.where("record_type = 'TopicRecord'")
    by_id = Window.partitionBy("topic_id").orderBy("order")
    found.append(
        _finding(
            topic_records.withColumn("_n", F.row_number().over(by_id))
            .withColumn("_first", F.first("topic_name").over(by_id))
            .where("_n > 1"),
            "topic_ids_unique",
            F.format_string(
                "topic id %s is reused for topic '%s' (first used for '%s')", "topic_id", "topic_name", "_first"
            ),
        )
    )
    removed = r.where("record_type = 'RemoveTopicRecord'").select("topic_id", F.col("order").alias("removed_order"))
    by_name = Window.partitionBy("topic_name").orderBy("order")
    named = topic_records.select(
        "*", F.lag("topic_id").over(by_name).alias("prev_id"), F.lag("order").over(by_name).alias("prev_order")
    )
    live_clash = (
        named.where(F.col("prev_id").isNotNull() & (F.col("prev_id") != F.col("topic_id")))
        .join(removed.withColumnRenamed("topic_id", "prev_id"), "prev_id", "left")
        .where(F.col("removed_order").isNull() | (F.col("removed_order") > F.col("order")))
    )
    found.append(
        _finding(
            live_clash,
            "one_live_topic_id_per_name",
            F.format_string("topic '%s' gets id %s while id %s is still live", "topic_name", "topic_id", "prev_id"),
        )
    )

    # -- partitions: the per-record rules (:mod:`audit.record_checks`), over the rows in ``mapInArrow``
    part_rows = r.where(F.col("record_type").isin(*PARTITION_TYPES))
    checked = part_rows.select(*CHECK_INPUT)
    found.append(checked.mapInArrow(over_partition(findings), from_arrow_schema(FINDINGS)).select(*COLUMNS))
    spans = part_rows.groupBy("topic_id").agg(F.min("order").alias("first_order"), F.max("order").alias("last_order"))
    events = r.where(F.col("record_type").isin("TopicRecord", "RemoveTopicRecord")).select(*TOPIC_EVENTS)
    late = suspects_findings(
        rows,
        as_of_offset,
        orphan_suspects(spans.toArrow(), events.toArrow()),
        checked.mapInArrow(over_partition(mentions), from_arrow_schema(MENTIONS)).toArrow(),
        r.where("record_type = 'RegisterBrokerRecord'").select(*REGISTRATIONS.names).toArrow(),
    )
    if late is not None:
        found.append(late)
    # each partition walked in log order (audit.history, audit.reassignments): all the rows, in one task
    walked = r.where(F.col("record_type").isin(*PARTITION_TYPES, *history.TOPIC_EVENT_TYPES)).select(*WALK_INPUT)
    found.append(
        walked.coalesce(1).mapInArrow(over_partition(_walk_findings), from_arrow_schema(FINDINGS)).select(*COLUMNS)
    )
    # topic removals and topics' configs, along the topic events
    topic_rows = r.where(F.col("record_type").isin("ConfigRecord", *history.TOPIC_EVENT_TYPES)).select(*TOPIC_ROWS)
    found.append(
        topic_rows.coalesce(1).mapInArrow(over_partition(_topic_findings), from_arrow_schema(FINDINGS)).select(*COLUMNS)
    )
    # ACL removals, along the ACL records
    acl_rows = r.where(F.col("record_type").isin(*acls.TYPES)).select(*acls.INPUT)
    found.append(
        acl_rows.coalesce(1)
        .mapInArrow(over_partition(removals_of_unknown_acls), from_arrow_schema(FINDINGS))
        .select(*COLUMNS)
    )
    # The replayed state must hold the same rules after every change has been applied.
    state_rows = _nowhere(state.partitions)
    found.append(
        _finding(
            state_rows.where(F.size(F.array_except("isr", "replicas")) > 0),
            "isr_subset_of_replicas",
            F.format_string(
                "final state: partition %s-%d has ISR [%s] outside replicas [%s]",
                "topic_name",
                "partition_id",
                F.array_join("isr", ","),
                F.array_join("replicas", ","),
            ),
        )
    )
    found.append(
        _finding(
            state_rows.where((F.col("leader") != -1) & ~F.array_contains("isr", F.col("leader"))),
            "leader_in_isr",
            F.format_string(
                "final state: partition %s-%d has leader %d outside ISR [%s]",
                "topic_name",
                "partition_id",
                "leader",
                F.array_join("isr", ","),
            ),
        )
    )
    counts = state.partitions.groupBy("topic_id", "topic_name").agg(
        F.count("*").alias("n"), F.min("partition_id").alias("lo"), F.max("partition_id").alias("hi")
    )
    gaps = _nowhere(counts.where((F.col("lo") != 0) | (F.col("hi") != F.col("n") - 1)))
    found.append(
        _finding(
            gaps,
            "partition_ids_contiguous",
            F.format_string("topic '%s' has %d partitions numbered %d..%d", "topic_name", "n", "lo", "hi"),
        )
    )

    return reduce(DataFrame.unionByName, found).select(*COLUMNS)
