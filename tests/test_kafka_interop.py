"""Our bytes against an independent implementation of Kafka's RecordBatch v2: kafka-python (a dev dependency; a
missing kafka-python fails this module, it never skips).

Both directions: kafka-python reads what pykraft writes (the demo log, rolled segments, a snapshot, the golden
test vectors) and agrees with our reader field by field; our reader reads what kafka-python writes (keys, headers,
timestamp deltas, offset gaps, gzip), and our encoders write kafka-python's bytes exactly.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import structlog

from controller.records import (
    LeaderChangeMessage,
    PartitionRecord,
    SnapshotFooterRecord,
    SnapshotHeaderRecord,
    TopicRecord,
    Uuid,
    Voter,
    decode_record,
    deserialize,
    serialize,
)
from quorum.log.batch import Record, RecordBatch, build_batch, encode_batch, iter_batches, read_batch
from quorum.log.control import ControlType, encode_control
from quorum.log.log import METADATA_PARTITION_DIR, LogConfig, MetadataLog
from quorum.log.reader import Damage, scan_file

with warnings.catch_warnings():  # kafka-python's own import uses a deprecated importlib.resources call
    warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
    import kafka
    from kafka.record import MemoryRecords
    from kafka.record.default_records import ControlRecord, DefaultRecordBatch, DefaultRecordBatchBuilder

REPO = Path(__file__).resolve().parent.parent
TS = 1_700_000_000_000

# docs/log-format.md, test vector 1: data batch, baseOffset 5, epoch 7, TopicRecord "foo" (id 0…00ab) and
# PartitionRecord v0 p0 replicas=isr=[1,2,3] leader 1. 165 bytes.
VECTOR_1 = bytes.fromhex(
    """
    0000000000000005 00000099 00000007 02 eb6d0889 0000 00000001 0000018bcfe56800 0000018bcfe56800
    ffffffffffffffff ffff ffffffff 00000002
    3c 00 00 00 01 30 01020004666f6f000000000000000000000000000000ab00 00
    8e01 00 00 02 01 8001 010300 00000000 000000000000000000000000000000ab
      04000000010000000200000003 04000000010000000200000003 01 01 00000001 00000000 00000000 00 00
    """
)
# Test vector 2: control batch at offset 0, epoch 7: LeaderChangeMessage leader 1, voters [1,2,3], granting [1,2].
VECTOR_2 = bytes.fromhex(
    "00000000000000000000005e00000007021735ab2b0020000000000000018bcfe568000000018bcfe56800ffffffffffffffffffff"
    "ffffffff00000001580000000800000002440000000000010400000001000000000200000000030003000000010000000002000000"
)
TOPIC_ID = Uuid.from_int(0xAB)


# -- the part of kafka-python's API we rely on -------------------------------------------------------------------


def test_kafka_python_api_is_what_we_rely_on() -> None:
    major = int(kafka.__version__.split(".")[0])
    assert major in (2, 3), f"kafka-python {kafka.__version__}: re-check the API this module relies on"
    for name in (
        "base_offset", "last_offset_delta", "leader_epoch", "magic", "crc", "attributes", "is_control_batch",
        "is_transactional", "compression_type", "first_timestamp", "max_timestamp", "producer_id", "producer_epoch",
        "base_sequence", "records_count", "size_in_bytes", "validate_crc",
    ):  # fmt: skip
        assert hasattr(DefaultRecordBatch, name), f"kafka-python's DefaultRecordBatch has no {name}"
    batch = DefaultRecordBatch(VECTOR_2)
    assert batch.leader_epoch == 7  # partitionLeaderEpoch, not some other epoch
    (record,) = list(batch)
    assert isinstance(record, ControlRecord)
    assert (record.version, record.type) == (0, 2)
    assert [type(b) for b in MemoryRecords(VECTOR_1 + VECTOR_2)] == [DefaultRecordBatch, DefaultRecordBatch]


# -- helpers -----------------------------------------------------------------------------------------------------


def kafka_read(data: bytes) -> list[tuple[DefaultRecordBatch, bool, list]]:
    """Every batch of ``data`` as kafka-python sees it: (batch, its CRC verdict, its records). kafka-python must
    consume every byte."""
    records = MemoryRecords(data)
    assert records.valid_bytes() == len(data), "kafka-python did not read the whole file as batches"
    out = []
    for batch in records:
        assert isinstance(batch, DefaultRecordBatch), type(batch)
        crc_ok = batch.validate_crc()  # before iterating, as kafka-python requires
        out.append((batch, crc_ok, list(batch)))
    return out


def assert_same(ours: list[RecordBatch], theirs: list[tuple[DefaultRecordBatch, bool, list]]) -> None:
    """Our reader and kafka-python agree on every header field and every record."""
    assert len(ours) == len(theirs)
    for mine, (batch, crc_ok, records) in zip(ours, theirs, strict=True):
        assert batch.magic == 2
        assert crc_ok is True
        assert mine.crc_valid() is True
        assert batch.crc == mine.crc
        assert batch.base_offset == mine.base_offset
        assert batch.last_offset_delta == mine.last_offset_delta
        assert batch.leader_epoch == mine.partition_leader_epoch
        assert batch.is_control_batch == mine.is_control
        assert batch.is_transactional == mine.is_transactional
        assert batch.records_count == mine.record_count == len(records)
        assert batch.size_in_bytes == mine.size
        assert batch.first_timestamp == mine.base_timestamp
        assert batch.max_timestamp == mine.max_timestamp
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
            mine.producer_id,
            mine.producer_epoch,
            mine.base_sequence,
        )
        assert batch.compression_type == mine.attributes & 0x07
        for theirs_rec, my_rec in zip(records, mine.records(), strict=True):
            assert theirs_rec.offset == my_rec.offset
            assert theirs_rec.timestamp == my_rec.timestamp
            assert theirs_rec.key == my_rec.key
            assert theirs_rec.value == my_rec.value
            assert tuple(theirs_rec.headers) == my_rec.headers


def assert_kraft_shaped(theirs: list[tuple[DefaultRecordBatch, bool, list]]) -> None:
    """What KRaft writes (docs/log-format.md): no compression, no producer, one timestamp, no headers; data records
    with a null key and a framed value, control records with a 4-byte key (version 0, a known type)."""
    for batch, _, records in theirs:
        assert batch.compression_type == 0
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
        assert batch.first_timestamp == batch.max_timestamp
        for rec in records:
            assert rec.headers == []
            assert rec.timestamp == batch.first_timestamp
            if batch.is_control_batch:
                assert isinstance(rec, ControlRecord)
                assert len(rec.key) == 4 and rec.version == 0
                assert rec.type in {t.value for t in ControlType}
            else:
                assert rec.key is None
                assert rec.value[0] == 1  # frame version


# -- kafka-python reads what we write ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_segment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("demo")
    for _ in range(2):
        result = subprocess.run(
            [sys.executable, "-m", "pykraft", "demo", "--data-dir", str(data)],
            capture_output=True, text=True, cwd=REPO, timeout=60,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
    return data / METADATA_PARTITION_DIR / "00000000000000000000.log"


def test_demo_log_read_by_kafka_python(demo_segment: Path) -> None:
    data = demo_segment.read_bytes()
    theirs = kafka_read(data)  # also: a closed segment holds batches only, its pre-allocated zeros trimmed
    ours = list(scan_file(demo_segment))
    assert not any(isinstance(b, Damage) for b in ours)
    assert_same(ours, theirs)
    assert_kraft_shaped(theirs)
    # Offsets contiguous from 0; epochs 1 then 2; each epoch starts with a LeaderChange control batch.
    offsets = [rec.offset for _, _, records in theirs for rec in records]
    assert offsets == list(range(len(offsets)))
    assert len(offsets) == 26
    epochs = [batch.leader_epoch for batch, _, _ in theirs]
    assert epochs == sorted(epochs) and set(epochs) == {1, 2}
    control = [(batch.base_offset, batch.leader_epoch) for batch, _, _ in theirs if batch.is_control_batch]
    assert control == [(0, 1), (18, 2)]
    for batch, _, records in theirs:
        for rec in records:
            if batch.is_control_batch:
                assert rec.type == ControlType.LEADER_CHANGE
                message = decode_record(Record(rec.offset, rec.timestamp, rec.key, rec.value), True).message
                assert isinstance(message, LeaderChangeMessage)
            else:  # kafka-python's value bytes are a record we decode, with the apiKey its frame names
                message, _ = deserialize(rec.value)
                assert message.SPEC.api_key == rec.value[1]


def test_rolled_segments_read_by_kafka_python(tmp_path: Path) -> None:
    """Segments closed by a roll and by close() are each exactly a sequence of batches, named by base offset."""
    with structlog.testing.capture_logs(), MetadataLog.open(tmp_path, LogConfig(segment_bytes=1024)) as log:
        for i in range(60):
            value = serialize(TopicRecord(name=f"topic-{i}", topic_id=Uuid.from_int(i + 1)))
            log.append(build_batch([(None, value)] * (1 + i % 3), epoch=1 + i // 20, timestamp=TS + i))
        end = log.end_offset
    segments = sorted((tmp_path / METADATA_PARTITION_DIR).glob("*.log"))
    assert len(segments) > 3
    expected = 0
    for path in segments:
        data = path.read_bytes()
        theirs = kafka_read(data)
        assert_same(list(iter_batches(data, path=str(path))), theirs)
        assert_kraft_shaped(theirs)
        assert int(path.stem) == theirs[0][0].base_offset == expected
        for batch, _, records in theirs:
            assert [r.offset for r in records] == list(range(expected, expected + batch.records_count))
            expected += batch.records_count
    assert expected == end


def test_snapshot_read_by_kafka_python() -> None:
    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=TS - 1)
    data = b"".join(
        [
            build_batch([encode_control(header)], base_offset=0, epoch=3, timestamp=TS, control=True),
            build_batch([(None, serialize(TopicRecord(name="s", topic_id=TOPIC_ID)))], base_offset=1, epoch=3,
                        timestamp=TS),
            build_batch([encode_control(SnapshotFooterRecord(version=0))], base_offset=2, epoch=3, timestamp=TS,
                        control=True),
        ]
    )  # fmt: skip
    theirs = kafka_read(data)
    assert_same(list(iter_batches(data)), theirs)
    assert_kraft_shaped(theirs)
    types = [rec.type for batch, _, recs in theirs if batch.is_control_batch for rec in recs]
    assert types == [ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER]
    assert theirs[0][2][0].value == header.encode()


# -- the golden test vectors (docs/log-format.md) --------------------------------------------------------------------


def test_vector_1_data_batch() -> None:
    assert len(VECTOR_1) == 165
    ((batch, crc_ok, records),) = kafka_read(VECTOR_1)
    assert crc_ok
    assert (batch.base_offset, batch.magic, batch.leader_epoch) == (5, 2, 7)
    assert batch.is_control_batch is False
    assert batch.records_count == 2
    assert [r.offset for r in records] == [5, 6]
    assert [r.key for r in records] == [None, None]
    assert [r.timestamp for r in records] == [TS, TS]
    assert_same([read_batch(VECTOR_1)], [(batch, crc_ok, records)])
    topic, partition = (deserialize(r.value) for r in records)
    assert topic == (TopicRecord(name="foo", topic_id=TOPIC_ID), 0)
    assert partition.version == 0
    assert partition.message == PartitionRecord(
        partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0,
        partition_epoch=0,
    )  # fmt: skip
    # Our writer produces the vector byte for byte.
    ours = build_batch(
        [(None, serialize(topic.message)), (None, serialize(partition.message, 0))],
        base_offset=5,
        epoch=7,
        timestamp=TS,
    )
    assert ours == VECTOR_1


def test_vector_2_control_batch() -> None:
    assert len(VECTOR_2) == 106
    ((batch, crc_ok, records),) = kafka_read(VECTOR_2)
    assert crc_ok
    assert (batch.base_offset, batch.magic, batch.leader_epoch) == (0, 2, 7)
    assert batch.is_control_batch is True
    assert batch.records_count == 1
    (rec,) = records
    assert rec.offset == 0
    assert rec.key == bytes.fromhex("00000002")
    assert (rec.version, rec.type) == (0, ControlType.LEADER_CHANGE)
    assert len(rec.value) == 34
    assert_same([read_batch(VECTOR_2)], [(batch, crc_ok, records)])
    message = LeaderChangeMessage(
        leader_id=1, voters=[Voter(voter_id=v) for v in (1, 2, 3)], granting_voters=[Voter(voter_id=v) for v in (1, 2)]
    )
    decoded = decode_record(read_batch(VECTOR_2).records()[0], True)
    assert decoded.message == message
    assert build_batch([encode_control(message)], epoch=7, timestamp=TS, control=True) == VECTOR_2


@pytest.mark.parametrize("vector", [VECTOR_1, VECTOR_2], ids=["vector 1", "vector 2"])
def test_crc_verdicts_agree(vector: bytes) -> None:
    """A flipped bit the CRC covers is caught by both; the base offset and leader epoch lie outside it."""
    for position, covered in ((7, False), (15, False), (22, True), (40, True), (len(vector) - 1, True)):
        damaged = bytearray(vector)
        damaged[position] ^= 0x04
        theirs = DefaultRecordBatch(bytes(damaged)).validate_crc()
        ours = read_batch(bytes(damaged), check_crc=False).crc_valid()
        assert theirs is ours is (not covered), position


# -- we read what kafka-python writes, and write what it writes ----------------------------------------------------


def kafka_build(records: list[Record], compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for r in records:
        assert builder.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(builder.build())


GENERAL = [
    Record(0, TS, None, serialize(TopicRecord(name="a", topic_id=TOPIC_ID))),
    Record(1, TS + 5, b"key", b"value", (("h1", b"x"), ("h2", None))),
    Record(4, TS - 3, b"", None),  # an offset gap (compaction), a negative timestamp delta, an empty key
    Record(5, TS + 200_000, b"k" * 300, b"v" * 70_000, (("big", b"y" * 1000),)),  # multi-byte varints
]


def test_kraft_batch_is_byte_identical_to_kafka_pythons() -> None:
    values = [serialize(TopicRecord(name=f"t{i}", topic_id=Uuid.from_int(i))) for i in range(5)]
    expected = kafka_build([Record(i, TS, None, v) for i, v in enumerate(values)])
    assert build_batch([(None, v) for v in values], timestamp=TS) == expected


def test_general_batch_is_byte_identical_to_kafka_pythons() -> None:
    assert encode_batch(GENERAL, base_offset=0) == kafka_build(GENERAL)


@pytest.mark.parametrize("compression", [0, 1], ids=["none", "gzip"])
def test_we_read_kafka_python_batches(compression: int) -> None:
    records = GENERAL * 3
    records = [r._replace(offset=i) for i, r in enumerate(records)]
    data = kafka_build(records, compression)
    batch = read_batch(data)  # CRC checked
    assert batch.compression == ("gzip" if compression else "none")
    assert batch.record_count == len(records)
    assert batch.records() == records
    assert_same([batch], kafka_read(data))
