"""audit.decode without Spark: file ranges become Arrow rows, one per record, with the batch's attributes, typed
columns and the record as JSON; snapshots sort before the log; ranges split only at batch boundaries; damage
becomes error rows (or crc_valid=false) and reading goes on."""

from __future__ import annotations

import gc
import itertools
import json
import random
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from audit_helpers import (
    FIRST_SEGMENT,
    TS,
    LogBuilder,
    change,
    leader_change,
    partition,
    pchange,
    register,
    snapshot_bytes,
    snapshot_name,
    uid,
)

from audit.decode import SNAPSHOT_ORDER_BASE, TYPED, FileRange, arrow_schema, decode_range, plan_ranges
from controller.records import (
    AbortTransactionRecord,
    AccessControlEntryRecord,
    ApiMessage,
    BeginTransactionRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ControllerEndpoint,
    DelegationTokenRecord,
    EndTransactionRecord,
    EntityData,
    FeatureLevelRecord,
    FenceBrokerRecord,
    LeaderChangeMessage,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RegisterControllerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    Uuid,
    ZkMigrationStateRecord,
    deserialize,
    serialize,
)
from quorum.log.batch import build_batch
from quorum.log.control import ControlType, control_key, encode_control
from quorum.log.log import METADATA_PARTITION_DIR, LogConfig, MetadataLog

TYPED_NAMES = [name for name, _ in TYPED]
ODD_ID = Uuid(b"\xfb\xff\xbf" * 5 + b"\xfe")  # its base64url form has '-' and '_'


def decode(path: Path, *, with_json: bool = False, source: str | None = None, **kwargs: Any) -> list[dict]:
    """Every row of a whole file, in replay order."""
    if source is None:
        source = "snapshot" if path.name.endswith(".checkpoint") else "log"
    r = FileRange(str(path), 0, path.stat().st_size, source)
    return rows_of(decode_range(r, with_json=with_json, **kwargs), with_json)


def rows_of(batches: Any, with_json: bool = False) -> list[dict]:
    table = pa.Table.from_batches(list(batches), schema=arrow_schema(with_json))
    return sorted(table.to_pylist(), key=lambda r: (r["order"] is None, r["order"], r["position"]))


def expected_typed(m: ApiMessage) -> dict[str, Any]:
    """The typed columns a record fills; every other typed column must be null."""
    if isinstance(m, TopicRecord):
        return {"topic_id": str(m.topic_id), "topic_name": m.name}
    if isinstance(m, PartitionRecord):
        return {
            "topic_id": str(m.topic_id),
            "partition_id": m.partition_id,
            "replicas": m.replicas,
            "isr": m.isr,
            "removing_replicas": m.removing_replicas,
            "adding_replicas": m.adding_replicas,
            "leader": m.leader,
            "leader_epoch": m.leader_epoch,
            "partition_epoch": m.partition_epoch,
            "leader_recovery_state": m.leader_recovery_state,
        }
    if isinstance(m, PartitionChangeRecord):
        return {
            "topic_id": str(m.topic_id),
            "partition_id": m.partition_id,
            "replicas": m.replicas,
            "isr": m.isr,
            "removing_replicas": m.removing_replicas,
            "adding_replicas": m.adding_replicas,
            "leader": None if m.leader == -2 else m.leader,
            "leader_recovery_state": None if m.leader_recovery_state == -1 else m.leader_recovery_state,
        }
    if isinstance(m, RemoveTopicRecord):
        return {"topic_id": str(m.topic_id)}
    if isinstance(m, RegisterBrokerRecord):
        return {
            "broker_id": m.broker_id,
            "broker_epoch": m.broker_epoch,
            "rack": m.rack,
            "fenced": 1 if m.fenced else -1,
            "in_controlled_shutdown": 1 if m.in_controlled_shutdown else 0,
        }
    if isinstance(m, BrokerRegistrationChangeRecord):
        return {
            "broker_id": m.broker_id,
            "broker_epoch": m.broker_epoch,
            "fenced": m.fenced,
            "in_controlled_shutdown": m.in_controlled_shutdown,
        }
    if isinstance(m, FenceBrokerRecord | UnfenceBrokerRecord):
        return {"broker_id": m.id, "broker_epoch": m.epoch, "fenced": 1 if isinstance(m, FenceBrokerRecord) else -1}
    if isinstance(m, UnregisterBrokerRecord):
        return {"broker_id": m.broker_id, "broker_epoch": m.broker_epoch}
    if isinstance(m, ConfigRecord):
        return {
            "resource_type": m.resource_type,
            "resource_name": m.resource_name,
            "config_name": m.name,
            "config_value": m.value,
        }
    if isinstance(m, FeatureLevelRecord):
        return {"feature_name": m.name, "feature_level": m.feature_level}
    if isinstance(m, LeaderChangeMessage):
        return {"raft_leader_id": m.leader_id}
    if isinstance(m, AccessControlEntryRecord):
        return {
            "acl_id": str(m.id),
            "resource_type": m.resource_type,
            "resource_name": m.resource_name,
            "pattern_type": m.pattern_type,
            "principal": m.principal,
            "host": m.host,
            "operation": m.operation,
            "permission_type": m.permission_type,
        }
    if isinstance(m, RemoveAccessControlEntryRecord):
        return {"acl_id": str(m.id)}
    return {}


def many_records(topic_a: Uuid, topic_b: Uuid) -> list[list[ApiMessage]]:
    """Batches of data records covering every type the audit replays and most it only counts."""
    return [
        [
            BeginTransactionRecord(name="Bootstrap records"),
            FeatureLevelRecord(name="metadata.version", feature_level=22),
            ZkMigrationStateRecord(zk_migration_state=0),
            EndTransactionRecord(),
        ],
        [register(1, 5, "rack-a"), register(2, 6, None), register(3, 7, "rack-c")],
        [change(1, 5, fenced=-1), change(2, 6, fenced=-1), change(3, 7, shutdown=1)],  # the last one is v1
        [
            UnfenceBrokerRecord(id=3, epoch=7),
            FenceBrokerRecord(id=2, epoch=6),
            UnregisterBrokerRecord(broker_id=3, broker_epoch=7),
        ],
        [
            TopicRecord(name="orders", topic_id=topic_a),
            ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="86400000"),
            ConfigRecord(resource_type=2, resource_name="orders", name="cleanup.policy", value=None),
            partition(topic_a, 0, [1, 2], leader_epoch=3, partition_epoch=4),
            PartitionRecord(
                partition_id=1, topic_id=topic_a, replicas=[2, 1, 3], isr=[2, 1], removing_replicas=[3],
                adding_replicas=[1], leader=2, leader_epoch=1, partition_epoch=2, leader_recovery_state=1,
            ),
        ],
        [
            pchange(topic_a, 0, isr=[1]),  # leader unchanged: a null leader column
            pchange(topic_a, 0, leader=2, isr=[2]),
            pchange(topic_a, 1, leader=-1),
            pchange(topic_a, 1, leader=3, isr=[3], leader_recovery_state=1),  # an unclean election
            pchange(topic_a, 1, replicas=[2, 1], removing_replicas=[], adding_replicas=[]),
        ],
        [
            TopicRecord(name="to-remove", topic_id=topic_b),
            partition(topic_b, 0, [1]),
            RemoveTopicRecord(topic_id=topic_b),
        ],
        [
            ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=5000),
            AccessControlEntryRecord(
                id=uid(77), resource_type=2, resource_name="orders", pattern_type=3, principal="User:alice",
                host="*", operation=2, permission_type=3,
            ),
            RemoveAccessControlEntryRecord(id=uid(77)),
            ClientQuotaRecord(
                entity=[EntityData(entity_type="user", entity_name="alice")], key="producer_byte_rate", value=1024.0
            ),
            UserScramCredentialRecord(
                name="alice", mechanism=1, salt=b"salt", stored_key=b"sk", server_key=b"svk", iterations=4096
            ),
            RemoveUserScramCredentialRecord(name="alice", mechanism=1),
            DelegationTokenRecord(owner="User:alice", requester="User:alice", renewers=["User:bob"], token_id="tok"),
            RemoveDelegationTokenRecord(token_id="tok"),
            RegisterControllerRecord(
                controller_id=1, incarnation_id=uid(88),
                end_points=[ControllerEndpoint(name="CONTROLLER", host="localhost", port=9093, security_protocol=0)],
            ),
            AbortTransactionRecord(reason="test"),
            NoOpRecord(),
        ],
    ]  # fmt: skip


@pytest.fixture
def written(tmp_path: Path) -> tuple[Path, list[dict]]:
    """A log written by the real writer (MetadataLog.append of build_batch), over two leader epochs; returns its
    segment and what every record must decode to."""
    expected: list[dict] = []
    with MetadataLog.open(tmp_path) as log:
        for epoch, leader in ((1, 1), (2, 3)):
            batches: list[tuple[list[ApiMessage], bool]] = [([leader_change(leader)], True)]
            batches += [
                (b, False) for b in many_records(uid(epoch * 10), uid(epoch * 10 + 1) if epoch == 1 else ODD_ID)
            ]
            for i, (records, control) in enumerate(batches):
                ts = TS + epoch * 1000 + i
                pairs = [encode_control(r) for r in records] if control else [(None, serialize(r)) for r in records]
                info = log.append(build_batch(pairs, epoch=epoch, timestamp=ts, control=control))
                for j, record in enumerate(records):
                    version = 0 if control else deserialize(serialize(record)).version
                    expected.append(
                        {
                            "message": record,
                            "offset": info.base_offset + j,
                            "batch_base_offset": info.base_offset,
                            "position": info.position,
                            "epoch": epoch,
                            "append_time": ts,
                            "is_control": control,
                            "record_type": type(record).__name__,
                            "version": version,
                        }
                    )
        log.flush()
        path = log.segments[0]
    return path, expected


# -- a log written by our writer ---------------------------------------------------------------------------------------


def test_rows_of_a_log_written_by_our_writer(written: tuple[Path, list[dict]]) -> None:
    path, expected = written
    rows = decode(path, with_json=True)
    assert len(rows) == len(expected)
    assert Counter(r["record_type"] for r in rows) == Counter(e["record_type"] for e in expected)
    assert [r["offset"] for r in rows] == list(range(len(expected)))  # contiguous, from 0
    for row, e in zip(rows, expected, strict=True):
        where = f"offset {e['offset']} ({e['record_type']})"
        assert row["error"] is None, where
        assert (row["source"], row["file"], row["crc_valid"]) == ("log", str(path), True), where
        assert row["order"] == row["offset"] == e["offset"], where
        for name in ("batch_base_offset", "position", "epoch", "is_control", "record_type", "version"):
            assert row[name] == e[name], f"{where}: {name} {row[name]!r}, expected {e[name]!r}"
        assert row["append_time"] == datetime.fromtimestamp(e["append_time"] / 1000, UTC), where
        typed = expected_typed(e["message"])
        for name in TYPED_NAMES:
            assert row[name] == typed.get(name), f"{where}: {name} {row[name]!r}, expected {typed.get(name)!r}"
        assert json.loads(row["json"]) == e["message"].to_json(e["version"]), where
    # The versions the writer picks, as Kafka 4.0 does: PartitionRecord v1, BrokerRegistrationChangeRecord v1 only
    # when it carries InControlledShutdown.
    versions = {(r["record_type"], r["broker_id"], r["in_controlled_shutdown"]): r["version"] for r in rows}
    assert versions[("BrokerRegistrationChangeRecord", 3, 1)] == 1
    assert versions[("BrokerRegistrationChangeRecord", 1, 0)] == 0
    assert {r["version"] for r in rows if r["record_type"] == "PartitionRecord"} == {1}


def test_topic_ids_are_kafka_uuid_strings(written: tuple[Path, list[dict]]) -> None:
    path, _ = written
    rows = decode(path)
    ids = {r["topic_id"] for r in rows if r["topic_id"] is not None}
    assert ids == {str(uid(10)), str(uid(11)), str(uid(20)), str(ODD_ID)}
    assert "-" in str(ODD_ID) and "_" in str(ODD_ID) and str(ODD_ID) in ids
    assert all(len(i) == 22 and Uuid(i) in (uid(10), uid(11), uid(20), ODD_ID) for i in ids)


def test_without_json_there_is_no_json_column_and_the_rest_is_the_same(written: tuple[Path, list[dict]]) -> None:
    path, _ = written
    with_json = decode(path, with_json=True)
    without = decode(path)
    assert "json" not in without[0]
    assert [{k: v for k, v in r.items() if k != "json"} for r in with_json] == without


def test_small_arrow_batches_give_the_same_rows(written: tuple[Path, list[dict]]) -> None:
    path, _ = written
    r = FileRange(str(path), 0, path.stat().st_size, "log")
    small = list(decode_range(r, rows_per_batch=2))
    assert max(b.num_rows for b in small) <= 2
    assert rows_of(small) == decode(path)


def test_the_garbage_collector_is_paused_while_decoding_and_only_then(written: tuple[Path, list[dict]]) -> None:
    path, _ = written
    r = FileRange(str(path), 0, path.stat().st_size, "log")
    assert gc.isenabled()
    batches = decode_range(r, rows_per_batch=2)
    next(batches)
    assert not gc.isenabled()
    batches.close()  # a reader that stops early (a LIMIT) gets it back too
    assert gc.isenabled()
    assert len(list(decode_range(r))) > 1 and gc.isenabled()
    gc.disable()
    try:  # and a caller that had it off keeps it off
        list(decode_range(r))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_every_arrow_batch_has_the_spark_schema(written: tuple[Path, list[dict]]) -> None:
    path, _ = written
    for with_json in (False, True):
        r = FileRange(str(path), 0, path.stat().st_size, "log")
        for batch in decode_range(r, with_json=with_json):
            assert batch.schema == arrow_schema(with_json)


def test_unknown_control_types_keep_their_own_names(tmp_path: Path) -> None:
    """ABORT/COMMIT markers and control types newer than us carry no message we decode: each is still named."""
    path = tmp_path / FIRST_SEGMENT
    path.write_bytes(
        build_batch(
            [
                (control_key(ControlType.COMMIT), b"\x00\x00\x00\x00\x00\x00"),
                (control_key(ControlType.ABORT), b"\x00\x00\x00\x00\x00\x00"),
                (control_key(42), b""),
                encode_control(leader_change(2)),
            ],
            control=True,
        )
    )
    rows = decode(path)
    assert [(r["offset"], r["record_type"], r["error"]) for r in rows] == [
        (0, "Control:COMMIT", None),
        (1, "Control:ABORT", None),
        (2, "Control:42", None),
        (3, "LeaderChangeMessage", None),
    ]


# -- snapshots ---------------------------------------------------------------------------------------------------------


def test_snapshot_rows_come_first_with_their_own_offsets(tmp_path: Path) -> None:
    directory = tmp_path / METADATA_PARTITION_DIR
    directory.mkdir()
    snap_records: list[ApiMessage] = [
        FeatureLevelRecord(name="metadata.version", feature_level=22),
        register(1, 3, "r1"),
        TopicRecord(name="snap", topic_id=uid(1)),
        ConfigRecord(resource_type=2, resource_name="snap", name="cleanup.policy", value="compact"),
        partition(uid(1), 0, [1]),
    ]
    snap = directory / snapshot_name(40, 3)
    snap.write_bytes(snapshot_bytes(snap_records, epoch=3))
    log = LogBuilder(next_offset=40, epoch=3)
    log.add(TopicRecord(name="later", topic_id=uid(2)), partition(uid(2), 0, [1]))
    log.add(NoOpRecord())
    segment = log.write(tmp_path, f"{40:020d}.log")

    ranges = plan_ranges([snap, segment])
    assert [(r.source, r.path) for r in ranges] == [("snapshot", str(snap)), ("log", str(segment))]
    rows = rows_of(b for r in ranges for b in decode_range(r))
    snapshot_rows = [r for r in rows if r["source"] == "snapshot"]
    log_rows = [r for r in rows if r["source"] == "log"]
    assert rows == snapshot_rows + log_rows  # snapshot rows order before every log row
    assert [r["record_type"] for r in snapshot_rows] == [
        "SnapshotHeaderRecord", *(type(m).__name__ for m in snap_records), "SnapshotFooterRecord",
    ]  # fmt: skip
    assert [r["offset"] for r in snapshot_rows] == list(range(len(snap_records) + 2))  # offsets restart at 0
    assert [r["order"] for r in snapshot_rows] == [SNAPSHOT_ORDER_BASE + o for o in range(len(snap_records) + 2)]
    assert [r["is_control"] for r in snapshot_rows] == [True] + [False] * len(snap_records) + [True]
    assert all(r["file"] == str(snap) and r["error"] is None and r["crc_valid"] for r in snapshot_rows)
    assert [(r["offset"], r["order"]) for r in log_rows] == [(40, 40), (41, 41), (42, 42)]
    assert snapshot_rows[3]["topic_id"] == str(uid(1)) and snapshot_rows[3]["topic_name"] == "snap"


# -- splitting files into ranges ---------------------------------------------------------------------------------------


def big_log(tmp_path: Path, batches: int = 300) -> tuple[Path, LogBuilder]:
    rng = random.Random(7)
    log = LogBuilder()
    for i in range(batches):
        topic = uid(1000 + i)
        records: list[ApiMessage] = [TopicRecord(name=f"topic-{i}-" + "x" * rng.randrange(0, 200), topic_id=topic)]
        records += [partition(topic, p, [1, 2, 3]) for p in range(rng.randrange(0, 12))]
        log.add(*records, epoch=1 + i // 100)
    return log.write(tmp_path), log


def test_plan_ranges_splits_only_at_batch_boundaries(tmp_path: Path) -> None:
    path, log = big_log(tmp_path)
    size = path.stat().st_size
    boundaries = set(log.positions())
    ranges = plan_ranges([path], split_bytes=4096)
    assert len(ranges) > 10
    assert ranges[0].start == 0 and ranges[-1].end == size
    for before, after in itertools.pairwise(ranges):
        assert before.end == after.start, "ranges must be contiguous"
        assert after.start in boundaries, f"range starts at byte {after.start}, not a batch boundary"
        assert before.end - before.start >= 4096
    assert all(r.source == "log" and r.path == str(path) for r in ranges)
    assert plan_ranges([path]) == [FileRange(str(path), 0, size, "log")]  # a small file: one range


def test_plan_ranges_splits_finer_for_min_ranges(tmp_path: Path) -> None:
    # plan_ranges reads only the 12-byte headers (base offset, length): 80 "batches" of 64 KiB, 5 MiB in all.
    path = tmp_path / "00000000000000000000.log"
    batch = (0).to_bytes(8, "big") + (65536 - 12).to_bytes(4, "big") + bytes(65536 - 12)
    path.write_bytes(batch * 80)
    assert len(plan_ranges([path])) == 1
    ranges = plan_ranges([path], min_ranges=4)
    assert len(ranges) == 4 and ranges[0].start == 0 and ranges[-1].end == 80 * 65536
    assert all(r.end - r.start == 20 * 65536 for r in ranges), ranges  # equal: no core waits on a long last range
    # Never finer than 1 MiB, however many are asked for (a range's task costs more than a few batches).
    assert len(plan_ranges([path], min_ranges=100)) == 5


def test_decoding_every_range_gives_exactly_the_rows_of_the_whole_file(tmp_path: Path) -> None:
    path, log = big_log(tmp_path)
    whole = decode(path, with_json=True)
    ranges = plan_ranges([path], split_bytes=4096)
    parts = []
    for r in ranges:
        rows = rows_of(decode_range(r, with_json=True), with_json=True)
        assert rows and all(r.start <= row["position"] < r.end for row in rows)
        parts += rows
    parts.sort(key=lambda row: row["order"])
    assert parts == whole
    assert len(whole) == len(log.records)
    assert [row["offset"] for row in whole] == list(range(len(whole)))


# -- damage ------------------------------------------------------------------------------------------------------------


def test_a_flipped_byte_gives_crc_invalid_rows_and_reading_goes_on(tmp_path: Path) -> None:
    log = LogBuilder()
    log.add(TopicRecord(name="first", topic_id=uid(1)), partition(uid(1), 0, [1]))
    flipped = log.add(TopicRecord(name="topic-flip", topic_id=uid(2)), partition(uid(2), 0, [1]))
    log.add(TopicRecord(name="last", topic_id=uid(3)), partition(uid(3), 0, [1]))
    path = log.write(tmp_path)
    clean = decode(path)
    data = bytearray(path.read_bytes())
    at = data.index(b"topic-flip") + len("topic-")
    data[at] ^= 0x01  # 'f' -> 'g': the record still parses, the CRC no longer matches
    path.write_bytes(bytes(data))
    rows = decode(path)
    assert len(rows) == len(clean) == 6
    assert all(r["error"] is None for r in rows)
    assert [r["offset"] for r in rows if not r["crc_valid"]] == [flipped, flipped + 1]
    assert [r["topic_name"] for r in rows if r["record_type"] == "TopicRecord"] == ["first", "topic-glip", "last"]
    assert [{**r, "crc_valid": True, "topic_name": None} for r in rows] == [{**r, "topic_name": None} for r in clean]


def test_garbage_after_valid_batches_is_one_error_row_naming_file_and_position(tmp_path: Path) -> None:
    log = LogBuilder()
    log.add(TopicRecord(name="a", topic_id=uid(1)), partition(uid(1), 0, [1]))
    log.add(NoOpRecord())
    path = log.write(tmp_path)
    clean = decode(path)
    valid = path.stat().st_size
    garbage = bytes(random.Random(3).randrange(1, 256) for _ in range(500))
    path.write_bytes(path.read_bytes() + garbage)
    rows = decode(path)
    errors = [r for r in rows if r["error"] is not None]
    assert len(errors) == 1
    error = errors[0]
    assert str(path) in error["error"] and f"byte {valid}" in error["error"], error["error"]
    assert error["position"] == valid and error["offset"] is None and error["file"] == str(path)
    assert error["record_type"] is None and error["crc_valid"] is False
    assert [r for r in rows if r["error"] is None] == clean


def test_a_truncated_last_batch_is_one_error_row_and_the_rest_decodes(tmp_path: Path) -> None:
    log = LogBuilder()
    log.add(TopicRecord(name="a", topic_id=uid(1)))
    log.add(TopicRecord(name="b", topic_id=uid(2)), partition(uid(2), 0, [1, 2]))
    path = log.write(tmp_path)
    clean = decode(path)
    last = log.positions()[-1]
    path.write_bytes(path.read_bytes()[:-7])
    rows = decode(path)
    assert [r for r in rows if r["error"] is None] == clean[:1]
    errors = [r for r in rows if r["error"] is not None]
    assert len(errors) == 1 and errors[0]["position"] == last
    assert f"byte {last}" in errors[0]["error"] and str(path) in errors[0]["error"]


def test_an_unknown_api_key_is_an_error_row_and_the_rest_of_its_batch_decodes(tmp_path: Path) -> None:
    log = LogBuilder()
    log.add(TopicRecord(name="before", topic_id=uid(1)))
    base = log.add_raw(
        [
            serialize(TopicRecord(name="same-batch", topic_id=uid(2))),
            bytes([1, 200, 1, 0]) + b"\x07future",  # frame version 1, apiKey 200 (a two-byte varint), version 0
            serialize(ConfigRecord(resource_type=2, resource_name="same-batch", name="retention.ms", value="1")),
            bytes([1, 2, 9]) + b"\x00",  # TopicRecord at a version we do not know
            serialize(partition(uid(2), 0, [1])),
        ]
    )
    log.add(NoOpRecord())
    path = log.write(tmp_path)
    rows = decode(path, with_json=True)
    assert [r["offset"] for r in rows] == list(range(7))
    errors = {r["offset"]: r for r in rows if r["error"] is not None}
    assert sorted(errors) == [base + 1, base + 3]
    assert "apiKey 200" in errors[base + 1]["error"] and f"offset {base + 1}" in errors[base + 1]["error"]
    assert "TopicRecord has no version 9" in errors[base + 3]["error"]
    for e in errors.values():
        assert str(path) in e["error"] and e["record_type"] is None and e["json"] is None
        assert e["batch_base_offset"] == base and e["crc_valid"] is True
    decoded = [(r["offset"], r["record_type"]) for r in rows if r["error"] is None]
    assert decoded == [
        (0, "TopicRecord"), (base, "TopicRecord"), (base + 2, "ConfigRecord"), (base + 4, "PartitionRecord"),
        (base + 5, "NoOpRecord"),
    ]  # fmt: skip


def test_preallocated_zeros_at_the_end_are_not_an_error(tmp_path: Path) -> None:
    """A log that was not closed cleanly ends in its pre-allocated zeros."""
    log = MetadataLog.open(tmp_path, LogConfig(preallocate_bytes=64 * 1024))
    try:
        for i in range(3):
            log.append(build_batch([(None, serialize(TopicRecord(name=f"t{i}", topic_id=uid(i))))], epoch=1))
        log.flush()
        path = log.segments[0]
        used = sum(len(b.buffer) for b in log.batches())
        assert path.stat().st_size > used and not any(path.read_bytes()[used:])  # zeros follow the batches
        rows = decode(path)
        assert [(r["offset"], r["topic_name"], r["error"]) for r in rows] == [(i, f"t{i}", None) for i in range(3)]
        assert plan_ranges([path], split_bytes=16)[-1].end == path.stat().st_size
        parts = rows_of(b for r in plan_ranges([path], split_bytes=16) for b in decode_range(r))
        assert parts == rows
    finally:
        log.close()


def test_a_file_that_cannot_be_read_is_one_error_row(tmp_path: Path) -> None:
    """A segment name on something unreadable (here a directory; a file without read permission is the same):
    a finding, not an exception that would fail the Spark task."""
    path = tmp_path / FIRST_SEGMENT
    path.mkdir()
    [r] = plan_ranges([path])
    rows = rows_of(decode_range(r, with_json=True), with_json=True)
    assert len(rows) == 1
    assert rows[0]["error"].startswith(f"{path}: cannot read: ") and "directory" in rows[0]["error"]
    assert (rows[0]["file"], rows[0]["position"], rows[0]["offset"], rows[0]["json"]) == (str(path), 0, None, None)


def test_an_empty_file_has_no_rows(tmp_path: Path) -> None:
    path = tmp_path / FIRST_SEGMENT
    path.write_bytes(b"")
    assert decode(path) == []
    assert plan_ranges([path]) == [FileRange(str(path), 0, 0, "log")]
