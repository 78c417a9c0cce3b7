"""The audit job's pyarrow tables and whole-table checks (audit.tables, the last part of audit.record_checks), on
small inputs whose answers are known. (The Spark tests hold them to the Spark queries on whole logs.)"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import tables
from audit.record_checks import batch_findings, live_name_clashes, state_findings
from audit.records import BATCHES, RECORD_FIELDS


def rows_of(columns: list[str], rows: list[dict]) -> pa.Table:
    schema = pa.schema([f for f in RECORD_FIELDS if f.name in columns])
    return pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)


partition_row = st.fixed_dictionaries(
    {
        "topic_name": st.sampled_from(["a", "b"]),
        "partition_id": st.integers(-1, 3),  # (a negative id: a corrupt log)
        "replicas": st.none() | st.lists(st.integers(1, 4), max_size=3),
        "isr": st.none() | st.lists(st.integers(1, 4), max_size=3),
        "leader": st.none() | st.integers(-1, 4),
    }
)


@settings(max_examples=200, deadline=None)
@given(st.lists(partition_row, max_size=8))
def test_state_findings_are_the_rules_applied_to_each_partition(drawn: list[dict]) -> None:
    rows = [d | {"topic_id": d["topic_name"].upper() * 4} for d in drawn]
    table = pa.Table.from_pylist(rows, schema=tables.PARTITIONS)
    want = []
    for r in rows:
        if r["replicas"] is not None and r["isr"] is not None and set(r["isr"]) - set(r["replicas"]):
            want.append(("isr_subset_of_replicas", f"{r['topic_name']}-{r['partition_id']} has ISR"))
        if r["leader"] not in (None, -1) and r["isr"] is not None and r["leader"] not in r["isr"]:
            want.append(("leader_in_isr", f"{r['topic_name']}-{r['partition_id']} has leader {r['leader']} "))
    for name in sorted({r["topic_name"] for r in rows}):
        ids = [r["partition_id"] for r in rows if r["topic_name"] == name]
        if min(ids) != 0 or max(ids) != len(ids) - 1:
            want.append(("partition_ids_contiguous", f"'{name}' has {len(ids)} partitions numbered {min(ids)}.."))
    got = state_findings(table).to_pylist()
    assert sorted(g["check"] for g in got) == sorted(w[0] for w in want)
    for check, fragment in want:
        assert any(g["check"] == check and fragment in g["explanation"] for g in got), (check, fragment, got)
    assert all(g["offset"] is None and g["file"] is None for g in got)  # about the final state, not a record


def test_batch_findings_follow_the_log_in_offset_order() -> None:
    batches = pa.Table.from_pylist(
        [
            {"file": "b.log", "position": 0, "source": "log", "offset": 20, "last": 24, "epoch": 2, "crc_valid": True},
            {"file": "a.log", "position": 0, "source": "log", "offset": 0, "last": 9, "epoch": 1, "crc_valid": True},
            {
                "file": "a.log",
                "position": 90,
                "source": "log",
                "offset": 10,
                "last": 14,
                "epoch": 2,
                "crc_valid": False,
            },
            {"file": "b.log", "position": 50, "source": "log", "offset": 25, "last": 25, "epoch": 1, "crc_valid": True},
            {
                "file": "b.log",
                "position": 80,
                "source": "log",
                "offset": 26,
                "last": 26,
                "epoch": None,
                "crc_valid": True,
            },
            {"file": "b.log", "position": 99, "source": "log", "offset": 27, "last": 27, "epoch": 0, "crc_valid": True},
            {
                "file": "s.checkpoint",
                "position": 0,
                "source": "snapshot",
                "offset": 0,
                "last": 3,
                "epoch": 5,
                "crc_valid": False,
            },
        ],
        schema=BATCHES,
    )
    got = sorted((f["check"], f["file"], f["offset"], f["explanation"]) for f in batch_findings(batches).to_pylist())
    assert got == [
        ("crc_valid", "a.log", 10, "batch at byte 90 (offsets 10-14) fails its CRC-32C check"),
        ("crc_valid", "s.checkpoint", 0, "batch at byte 0 (offsets 0-3) fails its CRC-32C check"),
        ("epochs_non_decreasing", "b.log", 25, "epoch 1 follows epoch 2"),  # (a null epoch compares with nothing)
        ("offsets_contiguous", "b.log", 20, "batch starts at offset 20, but the batch before ended at 14"),
    ]


def topic_event(kind: str, topic_id: str, order: int, name: str | None = None) -> dict:
    return {"record_type": kind, "topic_id": topic_id, "topic_name": name, "order": order, "offset": order}


def test_a_name_clashes_with_its_previous_id_until_that_id_is_removed() -> None:
    events = rows_of(
        tables.TOPIC_INPUT,
        [
            topic_event("TopicRecord", "A", 1, "t"),
            topic_event("TopicRecord", "B", 2, "t"),  # A still lives: a clash
            topic_event("RemoveTopicRecord", "B", 3),
            topic_event("TopicRecord", "C", 4, "t"),  # B was removed: fine
            topic_event("TopicRecord", "D", 6, "t"),  # C still lives
        ],
    )
    got = [(f["check"], f["offset"], f["explanation"]) for f in live_name_clashes(events).to_pylist()]
    assert got == [
        ("one_live_topic_id_per_name", 2, "topic 't' gets id B while id A is still live"),
        ("one_live_topic_id_per_name", 6, "topic 't' gets id D while id C is still live"),
    ]


def broker(kind: str, broker_id: int, epoch: int | None, order: int, **fields: object) -> dict:
    return {"record_type": kind, "broker_id": broker_id, "broker_epoch": epoch, "order": order, **fields}


def test_brokers_follow_changes_to_their_last_registration_only() -> None:
    rows = rows_of(
        tables.BROKER_INPUT,
        [
            broker("RegisterBrokerRecord", 1, 10, 10, rack="r1", fenced=1, in_controlled_shutdown=0),
            broker("BrokerRegistrationChangeRecord", 1, 10, 11, fenced=-1),
            broker("RegisterBrokerRecord", 1, 20, 20, rack="r2", fenced=1, in_controlled_shutdown=0),
            broker("UnfenceBrokerRecord", 1, 10, 21, fenced=-1),  # the old registration's: ignored
            broker("RegisterBrokerRecord", 2, 12, 12, rack=None, fenced=1, in_controlled_shutdown=0),
            broker("BrokerRegistrationChangeRecord", 2, 12, 14, fenced=0, in_controlled_shutdown=1),  # no fence news
            broker("RegisterBrokerRecord", 3, 15, 15, fenced=0, in_controlled_shutdown=0),
            broker("UnregisterBrokerRecord", 3, 15, 16),
            broker("RegisterBrokerRecord", 4, 17, 17, fenced=0, in_controlled_shutdown=None),
        ],
    )
    assert tables.brokers(rows).to_pylist() == [
        {"broker_id": 1, "broker_epoch": 20, "rack": "r2", "fenced": True, "in_controlled_shutdown": False},
        {"broker_id": 2, "broker_epoch": 12, "rack": None, "fenced": True, "in_controlled_shutdown": True},
        {"broker_id": 4, "broker_epoch": 17, "rack": None, "fenced": False, "in_controlled_shutdown": None},
    ]


def test_topics_and_configs_end_with_the_topic_and_come_back_with_it() -> None:
    events = rows_of(
        tables.TOPIC_INPUT,
        [
            topic_event("TopicRecord", "A", 1, "t"),
            topic_event("TopicRecord", "B", 2, "u"),
            topic_event("RemoveTopicRecord", "A", 5),
            topic_event("TopicRecord", "C", 6, "t"),
        ],
    )
    assert [(t["topic_id"], t["topic_name"]) for t in tables.topics(events).to_pylist()] == [("B", "u"), ("C", "t")]

    def config(name: str, key: str, value: str | None, order: int, kind: int = 2) -> dict:
        return {"resource_type": kind, "resource_name": name, "config_name": key, "config_value": value, "order": order}

    configs = rows_of(
        tables.CONFIG_INPUT,
        [
            config("t", "retention.ms", "1", 3),  # removed with A at 5
            config("t", "cleanup.policy", "compact", 4),
            config("t", "cleanup.policy", "delete", 7),  # set again for C
            config("u", "segment.bytes", "9", 3),
            config("u", "segment.bytes", None, 8),  # deleted
            config("t", "log.retention.ms", "5", 4, kind=4),  # a broker named "t": not a topic
        ],
    )
    got = sorted(
        (c["resource_type"], c["resource_name"], c["config_name"]) for c in tables.configs(configs, events).to_pylist()
    )
    assert got == [(2, "t", "cleanup.policy"), (4, "t", "log.retention.ms")]


def test_broker_load_counts_every_broker_named_or_registered() -> None:
    partitions = pa.Table.from_pylist(
        [
            {"topic_id": "A", "topic_name": "a", "partition_id": 0, "replicas": [1, 9], "isr": [1], "leader": 1},
            {"topic_id": "A", "topic_name": "a", "partition_id": 1, "replicas": [9, 1], "isr": [9], "leader": 9},
            {"topic_id": "B", "topic_name": "b", "partition_id": 0, "replicas": [1], "isr": [1], "leader": -1},
        ],
        schema=tables.PARTITIONS,
    )
    brokers = pa.Table.from_pylist(
        [
            {"broker_id": 1, "broker_epoch": 1, "rack": "r1", "fenced": False},
            {"broker_id": 2, "broker_epoch": 2, "rack": None, "fenced": True},
        ],
        schema=tables.BROKERS,
    )
    configs = pa.Table.from_pylist([], schema=tables.CONFIGS)
    out = tables.analytics(partitions, brokers, configs)
    assert out["brokers_load"].to_pylist() == [
        {"broker_id": 1, "replicas": 3, "leaders": 1, "rack": "r1", "fenced": False},
        {"broker_id": 2, "replicas": 0, "leaders": 0, "rack": None, "fenced": True},
        {"broker_id": 9, "replicas": 2, "leaders": 1, "rack": None, "fenced": None},  # named, never registered
    ]
    assert out["racks_load"].to_pylist() == [
        {"rack": "(none)", "replicas": 2, "leaders": 1, "brokers": 2},
        {"rack": "r1", "replicas": 3, "leaders": 1, "brokers": 1},
    ]
    assert out["replication_factors"].to_pylist() == [
        {"replication_factor": 1, "topics": 1, "partitions": 1},
        {"replication_factor": 2, "topics": 1, "partitions": 2},
    ]
    assert out["configs_in_use"].num_rows == 0
