"""Invariant checks over the log's rows and the replayed state. Each violation is a row: which check, the offset
(and file and batch position) where it shows, and an explanation that names the values involved."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from audit.replay import State, records_as_of

COLUMNS = ["check", "offset", "file", "position", "explanation"]


def _finding(df: DataFrame, check: str, explanation: F.Column) -> DataFrame:
    return df.select(
        F.lit(check).alias("check"),
        F.col("offset").cast("long").alias("offset"),
        F.col("file"),
        F.col("position").cast("long").alias("position"),
        explanation.alias("explanation"),
    )


def check_all(rows: DataFrame, state: State, as_of_offset: int | None = None) -> DataFrame:
    r = records_as_of(rows, as_of_offset)
    found: list[DataFrame] = []

    # -- damage: unreadable bytes and batches, bad CRCs (the job reads on past them)
    errors = rows.where(F.col("error").isNotNull())
    found.append(_finding(errors, "readable", F.col("error")))
    bad_crc = (
        rows.where(~F.col("crc_valid") & F.col("error").isNull())
        .groupBy("file", "position")
        .agg(F.min("offset").alias("offset"), F.max("offset").alias("last"))
    )
    found.append(
        _finding(
            bad_crc,
            "crc_valid",
            F.format_string("batch at byte %d (offsets %d-%d) fails its CRC-32C check", "position", "offset", "last"),
        )
    )

    # -- offsets contiguous and epochs non-decreasing, batch by batch along the log
    # A record that did not decode (an unknown apiKey, say) still holds its offset: its row counts here, or the
    # batch would seem to end early and the next one to leave a gap.
    batches = (
        rows.where((F.col("source") == "log") & F.col("offset").isNotNull())
        .groupBy("file", "position")
        .agg(F.min("offset").alias("offset"), F.max("offset").alias("last"), F.first("epoch").alias("epoch"))
    )
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

    # -- partitions
    part_rows = r.where(F.col("record_type").isin("PartitionRecord", "PartitionChangeRecord"))
    # The topic must exist at the record: some TopicRecord of its id before it, with no RemoveTopicRecord between.
    # Topic lifetimes are few (one per creation), so they are broadcast and the partition rows never shuffle.
    created = r.where("record_type = 'TopicRecord'").select("topic_id", F.col("order").alias("born"))
    removals = r.where("record_type = 'RemoveTopicRecord'").select("topic_id", F.col("order").alias("died"))
    lifetimes = (
        created.join(removals, "topic_id", "left")
        .groupBy("topic_id", "born")
        .agg(F.min(F.when(F.col("died") > F.col("born"), F.col("died"))).alias("died"))
    )
    lives = F.broadcast(lifetimes.withColumnRenamed("topic_id", "_tid"))
    alive = (
        (F.col("_tid") == F.col("topic_id"))
        & (F.col("born") < F.col("order"))
        & (F.col("died").isNull() | (F.col("died") > F.col("order")))
    )
    first_born = F.broadcast(created.groupBy("topic_id").agg(F.min("born").alias("_first_born")))
    orphans = part_rows.join(lives, alive, "left_anti").join(first_born, "topic_id", "left")
    found.append(
        _finding(
            orphans,
            "partition_of_existing_topic",
            F.format_string(
                "%s for partition %d of topic id %s, which %s",
                "record_type",
                "partition_id",
                "topic_id",
                F.when(F.col("_first_born") < F.col("order"), "was removed before it").otherwise("does not exist yet"),
            ),
        )
    )
    with_replicas = part_rows.where(F.col("replicas").isNotNull())
    found.append(
        _finding(
            with_replicas.where(F.size(F.array_distinct("replicas")) != F.size("replicas")),
            "replicas_distinct",
            F.format_string(
                "partition %d of topic id %s lists replicas %s with a repeat",
                "partition_id",
                "topic_id",
                F.array_join("replicas", ","),
            ),
        )
    )
    records_full = r.where("record_type = 'PartitionRecord'")
    found.append(
        _finding(
            records_full.where(F.size(F.array_except("isr", "replicas")) > 0),
            "isr_subset_of_replicas",
            F.format_string(
                "partition %d of topic id %s: ISR [%s] is not within replicas [%s]",
                "partition_id",
                "topic_id",
                F.array_join("isr", ","),
                F.array_join("replicas", ","),
            ),
        )
    )
    found.append(
        _finding(
            records_full.where((F.col("leader") != -1) & ~F.array_contains("isr", F.col("leader"))),
            "leader_in_isr",
            F.format_string(
                "partition %d of topic id %s: leader %d is not in ISR [%s]",
                "partition_id",
                "topic_id",
                "leader",
                F.array_join("isr", ","),
            ),
        )
    )
    by_partition = Window.partitionBy("topic_id", "partition_id").orderBy("order")
    epochs = records_full.select(
        "*",
        F.lag("leader_epoch").over(by_partition).alias("prev_leader_epoch"),
        F.lag("partition_epoch").over(by_partition).alias("prev_partition_epoch"),
    ).where(
        F.col("prev_leader_epoch").isNotNull()
        & (
            (F.col("leader_epoch") < F.col("prev_leader_epoch"))
            | (F.col("partition_epoch") <= F.col("prev_partition_epoch"))
        )
    )
    found.append(
        _finding(
            epochs,
            "partition_epochs_increase",
            F.format_string(
                "partition %d of topic id %s goes back to leader epoch %d / partition epoch %d (was %d / %d)",
                "partition_id",
                "topic_id",
                "leader_epoch",
                "partition_epoch",
                "prev_leader_epoch",
                "prev_partition_epoch",
            ),
        )
    )
    # The replayed state must hold the same rules after every change has been applied.
    state_rows = state.partitions.select(
        "*",
        F.lit(None).cast("long").alias("offset"),
        F.lit(None).cast("string").alias("file"),
        F.lit(None).cast("long").alias("position"),
    )
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
    gaps = counts.where((F.col("lo") != 0) | (F.col("hi") != F.col("n") - 1)).select(
        "*",
        F.lit(None).cast("long").alias("offset"),
        F.lit(None).cast("string").alias("file"),
        F.lit(None).cast("long").alias("position"),
    )
    found.append(
        _finding(
            gaps,
            "partition_ids_contiguous",
            F.format_string("topic '%s' has %d partitions numbered %d..%d", "topic_name", "n", "lo", "hi"),
        )
    )

    # -- brokers referenced by partitions must be registered before
    registered = (
        r.where("record_type = 'RegisterBrokerRecord'")
        .groupBy("broker_id")
        .agg(F.min("order").alias("registered_order"))
    )
    # One row per broker, so it is read once into a map literal: each partition row is then checked where it
    # lies, with no explode-and-join of every replica of every record (3x the rows, shuffled).
    first = {row["broker_id"]: row["registered_order"] for row in registered.collect()}
    known = F.create_map(*[F.lit(v) for kv in sorted(first.items()) for v in kv]) if first else None

    def registered_after(broker: F.Column) -> F.Column:
        at = known[broker] if known is not None else F.lit(None).cast("long")
        return at.isNull() | (at > F.col("order"))

    named = F.array_union(F.coalesce("replicas", F.array()), F.coalesce("isr", F.array()))
    refs = (
        part_rows.select("*", F.filter(named, registered_after).alias("_unregistered"))
        .where(F.size("_unregistered") > 0)
        .select("*", F.explode("_unregistered").alias("ref"))
    )
    found.append(
        _finding(
            refs,
            "brokers_registered",
            F.format_string(
                "%s for partition %d of topic id %s names broker %d, which is not registered",
                "record_type",
                "partition_id",
                "topic_id",
                "ref",
            ),
        )
    )
    return reduce(DataFrame.unionByName, found).select(*COLUMNS)
