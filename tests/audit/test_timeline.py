"""The audit's timeline without Spark: the job's tasks run in this process (audit.records.build_tables) over a
hand-built log, and every change must be in the ``timeline`` table once, with its offset, batch time, kind, subject
and readable detail; a record that changes nothing is not a row."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.dataset as pads
from audit_helpers import TS, LogBuilder, change, partition, pchange, register, topic_config, uid

from audit.records import build_tables, in_process
from audit.timeline import TIMELINE, newest, resource_type_name
from controller.records import (
    ConfigRecord,
    FenceBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)


def timeline_log(root: Path) -> dict[str, int]:
    """A log whose changes the test names by offset."""
    log = LogBuilder()
    o: dict[str, int] = {}
    o["registered"] = log.add(*(register(b, 1, rack=f"r{b % 2}") for b in (101, 102, 103)), timestamp=TS)
    o["unfenced"] = log.add(*(UnfenceBrokerRecord(id=b, epoch=1) for b in (101, 102, 103)), timestamp=TS + 1000)
    o["created"] = log.add(
        TopicRecord(name="orders", topic_id=uid(1)),
        partition(uid(1), 0, [101, 102, 103]),
        partition(uid(1), 1, [102, 103, 101]),
        timestamp=TS + 2000,
    )
    o["leader"] = log.add(pchange(uid(1), 0, leader=102, isr=[102, 103]), timestamp=TS + 3000)
    o["same_isr"] = log.add(pchange(uid(1), 1, isr=[102, 103, 101]), timestamp=TS + 4000)  # no change
    o["config"] = log.add(topic_config("orders", "retention.ms", "1000"), timestamp=TS + 5000)
    o["config_again"] = log.add(topic_config("orders", "retention.ms", "2000"), timestamp=TS + 6000)
    o["broker_config"] = log.add(
        ConfigRecord(resource_type=4, resource_name="101", name="log.cleaner.threads", value="2"), timestamp=TS + 7000
    )
    o["shutdown"] = log.add(change(101, 1, shutdown=1), timestamp=TS + 8000)
    o["fenced"] = log.add(FenceBrokerRecord(id=103, epoch=1), timestamp=TS + 9000)
    o["stale"] = log.add(FenceBrokerRecord(id=102, epoch=0), timestamp=TS + 9500)  # another registration's
    o["offline"] = log.add(pchange(uid(1), 1, leader=-1, isr=[102]), timestamp=TS + 10_000)
    o["temp"] = log.add(TopicRecord(name="temp", topic_id=uid(2)), partition(uid(2), 0, [101]), timestamp=TS + 11_000)
    o["deleted"] = log.add(RemoveTopicRecord(topic_id=uid(2)), timestamp=TS + 12_000)
    log.write(root)
    return o


def test_timeline_has_every_change_once(tmp_path: Path) -> None:
    o = timeline_log(tmp_path / "log")
    build_tables(in_process, 2, tmp_path / "log", tmp_path / "out")
    table = pads.dataset(tmp_path / "out" / "timeline", format="parquet").to_table()
    assert table.schema.equals(TIMELINE)
    rows = {(r["offset"], r["kind"], r["subject"]): r for r in table.to_pylist()}
    expected = {
        (o["registered"], "broker_registered", "broker 101"): "broker epoch 1, rack r1, fenced",
        (o["unfenced"] + 2, "broker_unfenced", "broker 103"): "broker epoch 1 (UnfenceBrokerRecord)",
        (o["created"], "topic_created", "orders"): f"topic id {uid(1)}",
        (o["leader"], "leader", "orders-0"): "leader 101 -> 102",
        (o["leader"], "isr", "orders-0"): "isr 101,102,103 -> 102,103",
        (o["config"], "config", "TOPIC orders"): "retention.ms = 1000",
        (o["config_again"], "config", "TOPIC orders"): "retention.ms = 2000 (was 1000)",
        (o["broker_config"], "config", "BROKER 101"): "log.cleaner.threads = 2",
        (o["shutdown"], "controlled_shutdown", "broker 101"): "broker epoch 1: in controlled shutdown",
        (o["fenced"], "broker_fenced", "broker 103"): "broker epoch 1 (FenceBrokerRecord)",
        (o["offline"], "leader", "orders-1"): "leader 102 -> -1 (no leader)",
        (o["offline"], "isr", "orders-1"): "isr 102,103,101 -> 102",
        (o["deleted"], "topic_deleted", "temp"): f"topic id {uid(2)}",
    }
    for key, detail in expected.items():
        assert key in rows, f"no timeline row {key}; rows: {sorted(rows)}"
        assert rows[key]["detail"] == detail, (key, rows[key]["detail"])
    assert rows[(o["leader"], "leader", "orders-0")]["time"] == dt.datetime.fromtimestamp((TS + 3000) / 1000)
    # no row for what changed nothing: the ISR set to its value, a change of another registration, a partition's
    # creation (its topic's creation says it)
    assert not [k for k in rows if k[0] in (o["same_isr"], o["stale"])]
    assert not [k for k in rows if k[0] in (o["created"] + 1, o["created"] + 2)]
    assert sum(1 for k in rows if k[1] == "broker_registered") == 3
    assert table.num_rows == len(rows)  # each once


def test_newest_rows_and_count(tmp_path: Path) -> None:
    timeline_log(tmp_path / "log")
    build_tables(in_process, 2, tmp_path / "log", tmp_path / "out")
    everything, total = newest(tmp_path / "out" / "timeline", 10_000)
    last, same_total = newest(tmp_path / "out" / "timeline", 3)
    assert total == same_total == len(everything) > 3
    assert last == everything[-3:]
    orders = [r["order"] for r in everything]
    assert orders == sorted(orders)


def test_as_of_offset_cuts_the_timeline(tmp_path: Path) -> None:
    o = timeline_log(tmp_path / "log")
    build_tables(in_process, 2, tmp_path / "log", tmp_path / "out", as_of_offset=o["config"])
    offsets = pads.dataset(tmp_path / "out" / "timeline", format="parquet").to_table().column("offset").to_pylist()
    assert max(offsets) == o["config"]


def test_resource_type_names() -> None:
    assert [resource_type_name(t) for t in (2, 4, 8, 16, None, 99)] == [
        "TOPIC",
        "BROKER",
        "BROKER_LOGGER",
        "CLIENT_METRICS",
        "",
        "99",
    ]


def test_topics_overview_has_the_deleted_topics_too(tmp_path: Path) -> None:
    from audit import history, tables
    from audit.records import records_of

    o = timeline_log(tmp_path / "log")
    build_tables(in_process, 2, tmp_path / "log", tmp_path / "out")
    out = tmp_path / "out"
    overview = tables.topics_overview(
        records_of(out, history.TOPIC_EVENT_TYPES, tables.TOPIC_INPUT),
        tables.read_table(out / "partitions", tables.PARTITIONS),
        tables.read_table(out / "configs", tables.CONFIGS),
    ).to_pylist()
    by_name = {t["topic_name"]: t for t in overview}
    assert set(by_name) == {"orders", "temp"}
    orders, temp = by_name["orders"], by_name["temp"]
    assert (orders["partitions"], orders["replication_factor"], orders["configs_overridden"]) == (2, 3, 1)
    assert (orders["created_offset"], orders["deleted"], orders["deleted_offset"]) == (o["created"], False, None)
    assert (temp["deleted"], temp["deleted_offset"], temp["partitions"]) == (True, o["deleted"], None)
