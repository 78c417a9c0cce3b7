"""Golden bytes: every expected byte string below is written out by hand from Kafka's format rules (RecordBatch v2,
``ApiMessageAndVersion`` framing, the flexible-version message encoding) and commented field by field. The two
batches are the test vectors of docs/log-format.md, built independently and checked with kafka-python. None of these
bytes came from running our encoder.

Conventions in the comments: ``cs(n)`` compact string/array length = uvarint(n + 1); ``tags`` the tagged-field
section (uvarint count, then per field ``tag, size, value``); ``zz(n)`` a zig-zag varint.
"""

from __future__ import annotations

import struct

import pytest

from controller.records import (
    BrokerEndpoint,
    BrokerFeature,
    ConfigRecord,
    DecodeError,
    EncodeError,
    LeaderChangeMessage,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnknownRecordError,
    Uuid,
    Voter,
    decode_batch,
    deserialize,
    serialize,
)
from quorum.log.batch import (
    CONTROL_FLAG,
    HEADER_SIZE,
    CorruptBatchError,
    Record,
    build_batch,
    encode_batch,
    read_batch,
)
from quorum.log.control import ControlType, control_key, decode_control, encode_control
from quorum.log.message import METADATA_TOPIC_ID, ZERO_UUID
from quorum.log.varint import read_uvarint, read_varint, uvarint, varint

TS = 1_700_000_000_000  # 0x0000018bcfe56800
TOPIC_ID = Uuid.from_int(0xAB)  # "AAAAAAAAAAAAAAAAAAAAqw"
DIR_A = METADATA_TOPIC_ID  # Uuid(0, 1): Kafka's DirectoryId.UNASSIGNED, "AAAAAAAAAAAAAAAAAAAAAQ"
DIR_B = Uuid(bytes.fromhex("0123456789abcdef0123456789abcdef"))
INCARNATION = Uuid(bytes.fromhex("00112233445566778899aabbccddeeff"))

TOPIC_ID_HEX = "000000000000000000000000000000ab"
DIR_A_HEX = "00000000000000000000000000000001"
DIR_B_HEX = "0123456789abcdef0123456789abcdef"
INCARNATION_HEX = "00112233445566778899aabbccddeeff"


# ---------------------------------------------------------------------------------------------------------------
# Test vector 1: a data batch (docs/log-format.md)

VECTOR_1 = bytes.fromhex(
    "0000000000000005"  # baseOffset int64 = 5
    "00000099"  # batchLength int32 = 153 (165 - 12)
    "00000007"  # partitionLeaderEpoch int32 = 7
    "02"  # magic = 2
    "eb6d0889"  # crc uint32: CRC-32C of bytes [21, 165)
    "0000"  # attributes: no compression, CreateTime, not transactional, not control
    "00000001"  # lastOffsetDelta = 1 (two records)
    "0000018bcfe56800"  # baseTimestamp = 1700000000000
    "0000018bcfe56800"  # maxTimestamp = 1700000000000
    "ffffffffffffffff"  # producerId = -1
    "ffff"  # producerEpoch = -1
    "ffffffff"  # baseSequence = -1
    "00000002"  # recordsCount = 2
    # record 0: TopicRecord
    "3c"  # length zz(30)
    "00"  # attributes
    "00"  # timestampDelta zz(0)
    "00"  # offsetDelta zz(0)
    "01"  # keyLength zz(-1): null key
    "30"  # valueLength zz(24)
    "01"  # | frame version 1
    "02"  # | apiKey 2 (TopicRecord)
    "00"  # | version 0
    "04666f6f"  # | Name cs(3) "foo"
    "000000000000000000000000000000ab"  # | TopicId
    "00"  # | tags: none
    "00"  # headers count zz(0)
    # record 1: PartitionRecord v0
    "8e01"  # length zz(71)
    "00"  # attributes
    "00"  # timestampDelta zz(0)
    "02"  # offsetDelta zz(1)
    "01"  # null key
    "8001"  # valueLength zz(64)
    "01"  # | frame version 1
    "03"  # | apiKey 3 (PartitionRecord)
    "00"  # | version 0
    "00000000"  # | PartitionId = 0
    "000000000000000000000000000000ab"  # | TopicId
    "04000000010000000200000003"  # | Replicas cs(3) [1, 2, 3]
    "04000000010000000200000003"  # | Isr cs(3) [1, 2, 3]
    "01"  # | RemovingReplicas cs(0)
    "01"  # | AddingReplicas cs(0)
    "00000001"  # | Leader = 1
    "00000000"  # | LeaderEpoch = 0
    "00000000"  # | PartitionEpoch = 0
    "00"  # | tags: none (LeaderRecoveryState at its default 0)
    "00"  # headers count zz(0)
)

VECTOR_1_TOPIC = TopicRecord(name="foo", topic_id=TOPIC_ID)
VECTOR_1_PARTITION = PartitionRecord(
    partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0, partition_epoch=0
)


def test_vector_1_layout() -> None:
    assert len(VECTOR_1) == 165
    assert struct.unpack_from(">q", VECTOR_1, 27)[0] == TS


def test_vector_1_build_batch() -> None:
    records = [(None, serialize(VECTOR_1_TOPIC, 0)), (None, serialize(VECTOR_1_PARTITION, 0))]
    assert build_batch(records, base_offset=5, epoch=7, timestamp=TS) == VECTOR_1


def test_vector_1_encode_batch() -> None:
    records = [
        Record(5, TS, None, serialize(VECTOR_1_TOPIC, 0)),
        Record(6, TS, None, serialize(VECTOR_1_PARTITION, 0)),
    ]
    assert encode_batch(records, base_offset=5, epoch=7) == VECTOR_1


def test_vector_1_read() -> None:
    batch = read_batch(VECTOR_1)
    assert batch.crc == 0xEB6D0889
    assert batch.crc_valid()
    assert (batch.base_offset, batch.last_offset, batch.next_offset, batch.epoch) == (5, 6, 7, 7)
    assert (batch.record_count, batch.size, batch.base_timestamp, batch.max_timestamp) == (2, 165, TS, TS)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_control and not batch.is_transactional and batch.compression == "none"
    records = batch.records()
    assert [(r.offset, r.timestamp, r.key, r.headers) for r in records] == [(5, TS, None, ()), (6, TS, None, ())]
    assert records[0].value == VECTOR_1[67:91]
    assert decode_batch(batch) == [
        MetadataRecord(5, VECTOR_1_TOPIC, 0, None),
        MetadataRecord(6, VECTOR_1_PARTITION, 0, None),
    ]


def test_vector_1_bad_crc() -> None:
    damaged = bytearray(VECTOR_1)
    damaged[100] ^= 0x01  # inside the PartitionRecord value
    with pytest.raises(CorruptBatchError, match="CRC-32C mismatch"):
        read_batch(bytes(damaged))
    assert not read_batch(bytes(damaged), check_crc=False).crc_valid()


def test_vector_1_epoch_and_offset_outside_crc() -> None:
    restamped = bytearray(VECTOR_1)
    restamped[0:8] = (1000).to_bytes(8, "big")
    restamped[12:16] = (9).to_bytes(4, "big")
    batch = read_batch(bytes(restamped))  # the CRC still holds
    assert (batch.base_offset, batch.epoch) == (1000, 9)
    assert read_batch(VECTOR_1).with_offset(1000, 9) == bytes(restamped)


def test_vector_1_truncated() -> None:
    for cut in (0, 12, 60, 61, 164):
        with pytest.raises(CorruptBatchError):
            read_batch(VECTOR_1[:cut])


# ---------------------------------------------------------------------------------------------------------------
# Test vector 2: a control batch holding a LeaderChangeMessage (docs/log-format.md)

LEADER_CHANGE_VALUE = bytes.fromhex(
    "0000"  # Version int16 = 0
    "00000001"  # LeaderId = 1
    "04"  # Voters cs(3)
    "00000001" "00"  # VoterId 1, tags: none
    "00000002" "00"  # VoterId 2, tags: none
    "00000003" "00"  # VoterId 3, tags: none
    "03"  # GrantingVoters cs(2)
    "00000001" "00"  # VoterId 1, tags: none
    "00000002" "00"  # VoterId 2, tags: none
    "00"  # tags: none
)  # fmt: skip

VECTOR_2 = bytes.fromhex(
    "0000000000000000"  # baseOffset = 0
    "0000005e"  # batchLength = 94 (106 - 12)
    "00000007"  # partitionLeaderEpoch = 7
    "02"  # magic = 2
    "1735ab2b"  # crc
    "0020"  # attributes: control
    "00000000"  # lastOffsetDelta = 0
    "0000018bcfe56800"  # baseTimestamp = 1700000000000
    "0000018bcfe56800"  # maxTimestamp
    "ffffffffffffffff"  # producerId = -1
    "ffff"  # producerEpoch = -1
    "ffffffff"  # baseSequence = -1
    "00000001"  # recordsCount = 1
    "58"  # length zz(44)
    "00"  # attributes
    "00"  # timestampDelta zz(0)
    "00"  # offsetDelta zz(0)
    "08"  # keyLength zz(4)
    "0000" "0002"  # key: version 0, type 2 (LEADER_CHANGE)
    "44"  # valueLength zz(34)
    "0000" "00000001" "04" "0000000100" "0000000200" "0000000300" "03" "0000000100" "0000000200" "00"  # value
    "00"  # headers count zz(0)
)  # fmt: skip

LEADER_CHANGE = LeaderChangeMessage(
    version=0,
    leader_id=1,
    voters=[Voter(voter_id=1), Voter(voter_id=2), Voter(voter_id=3)],
    granting_voters=[Voter(voter_id=1), Voter(voter_id=2)],
)


def test_vector_2_layout() -> None:
    assert len(VECTOR_2) == 106
    assert len(LEADER_CHANGE_VALUE) == 34
    assert VECTOR_2[71:105] == LEADER_CHANGE_VALUE


def test_vector_2_build_batch() -> None:
    assert encode_control(LEADER_CHANGE) == (bytes.fromhex("00000002"), LEADER_CHANGE_VALUE)
    assert build_batch([encode_control(LEADER_CHANGE)], base_offset=0, epoch=7, timestamp=TS, control=True) == VECTOR_2


def test_vector_2_encode_batch() -> None:
    record = Record(0, TS, control_key(ControlType.LEADER_CHANGE), LEADER_CHANGE_VALUE)
    assert encode_batch([record], base_offset=0, epoch=7, attributes=CONTROL_FLAG) == VECTOR_2


def test_vector_2_read() -> None:
    batch = read_batch(VECTOR_2)
    assert batch.crc == 0x1735AB2B and batch.crc_valid()
    assert batch.is_control and (batch.base_offset, batch.last_offset, batch.epoch) == (0, 0, 7)
    assert batch.records() == [Record(0, TS, b"\x00\x00\x00\x02", LEADER_CHANGE_VALUE, ())]
    assert decode_batch(batch) == [MetadataRecord(0, LEADER_CHANGE, 0, ControlType.LEADER_CHANGE)]
    assert decode_batch(batch)[0].type == "LeaderChangeMessage"


def test_leader_change_v0() -> None:
    assert LEADER_CHANGE.encode() == LEADER_CHANGE_VALUE  # Kafka writes version 0
    assert LEADER_CHANGE.encode(0) == LEADER_CHANGE_VALUE
    assert LeaderChangeMessage.decode(LEADER_CHANGE_VALUE, 0) == LEADER_CHANGE
    assert decode_control(b"\x00\x00\x00\x02", LEADER_CHANGE_VALUE) == (2, LEADER_CHANGE, 0)


def test_leader_change_one_voter_is_19_bytes() -> None:
    value = bytes.fromhex(
        "0000"  # Version = 0
        "00000001"  # LeaderId = 1
        "02" "00000001" "00"  # Voters cs(1): [1]
        "02" "00000001" "00"  # GrantingVoters cs(1): [1]
        "00"  # tags: none
    )  # fmt: skip
    assert len(value) == 19
    message = LeaderChangeMessage(leader_id=1, voters=[Voter(voter_id=1)], granting_voters=[Voter(voter_id=1)])
    assert message.encode(0) == value
    assert LeaderChangeMessage.decode(value, 0) == message


def test_leader_change_v1_decoded_at_its_stated_version() -> None:
    value = bytes.fromhex(
        "0001"  # Version = 1
        "00000002"  # LeaderId = 2
        "02"  # Voters cs(1)
        "00000002" + DIR_A_HEX + "00"  # VoterId 2, VoterDirectoryId (v1+), tags: none
        "01"  # GrantingVoters cs(0)
        "00"  # tags: none
    )  # fmt: skip
    message = LeaderChangeMessage(version=1, leader_id=2, voters=[Voter(voter_id=2, voter_directory_id=DIR_A)])
    assert message.encode(1) == value
    assert LeaderChangeMessage.decode(value, 1) == message
    assert decode_control(control_key(ControlType.LEADER_CHANGE), value) == (2, message, 1)
    with pytest.raises(EncodeError, match="VoterDirectoryId"):
        message.encode(0)


# ---------------------------------------------------------------------------------------------------------------
# Framed record values (ApiMessageAndVersion: uvarint frameVersion, uvarint apiKey, uvarint version, body)


TOPIC_VALUE = bytes.fromhex(
    "01"  # frame version 1
    "02"  # apiKey 2
    "00"  # version 0
    "04" "666f6f"  # Name cs(3) "foo"
    + TOPIC_ID_HEX  # TopicId
    + "00"  # tags: none
)  # fmt: skip

PARTITION_V1 = PartitionRecord(
    partition_id=1,
    topic_id=TOPIC_ID,
    replicas=[1, 2],
    isr=[1],
    leader=1,
    leader_recovery_state=1,
    leader_epoch=3,
    partition_epoch=5,
    directories=[DIR_A, DIR_B],
)
PARTITION_V1_VALUE = bytes.fromhex(
    "01" "03" "01"  # frame 1, apiKey 3, version 1
    "00000001"  # PartitionId = 1
    + TOPIC_ID_HEX  # TopicId
    + "03" "00000001" "00000002"  # Replicas cs(2) [1, 2]
    "02" "00000001"  # Isr cs(1) [1]
    "01"  # RemovingReplicas cs(0)
    "01"  # AddingReplicas cs(0)
    "00000001"  # Leader = 1
    "00000003"  # LeaderEpoch = 3 (LeaderRecoveryState, listed before it, is tagged: it goes to the end)
    "00000005"  # PartitionEpoch = 5
    "03" + DIR_A_HEX + DIR_B_HEX  # Directories cs(2) (v1+)
    + "01"  # tags: 1 field
    "00" "01" "01"  # tag 0 (LeaderRecoveryState), size 1, int8 1
)  # fmt: skip

PARTITION_V2 = PartitionRecord(
    partition_id=2,
    topic_id=TOPIC_ID,
    replicas=[1, 2, 3],
    isr=[1],
    leader=1,
    leader_epoch=0,
    partition_epoch=0,
    directories=[DIR_A, DIR_A, DIR_A],
    eligible_leader_replicas=[2],
    last_known_elr=[],
)
PARTITION_V2_VALUE = bytes.fromhex(
    "01" "03" "02"  # frame 1, apiKey 3, version 2
    "00000002"  # PartitionId = 2
    + TOPIC_ID_HEX  # TopicId
    + "04" "00000001" "00000002" "00000003"  # Replicas cs(3)
    "02" "00000001"  # Isr cs(1)
    "01"  # RemovingReplicas cs(0)
    "01"  # AddingReplicas cs(0)
    "00000001"  # Leader = 1
    "00000000"  # LeaderEpoch = 0
    "00000000"  # PartitionEpoch = 0
    "04" + DIR_A_HEX * 3  # Directories cs(3)
    + "02"  # tags: 2 fields (LeaderRecoveryState = default 0 is left out)
    "01" "05" "02" "00000002"  # tag 1 (EligibleLeaderReplicas), size 5, cs(1) [2]
    "02" "01" "01"  # tag 2 (LastKnownElr), size 1, cs(0): empty, not null
)  # fmt: skip

PARTITION_V2_NULL_ELR_VALUE = bytes.fromhex(
    "01" "03" "02"  # frame 1, apiKey 3, version 2
    "ffffffff"  # PartitionId = -1 (default)
    + "00" * 16  # TopicId = zero UUID
    + "01" "01" "01" "01"  # Replicas, Isr, RemovingReplicas, AddingReplicas: cs(0)
    "ffffffff"  # Leader = -1
    "ffffffff"  # LeaderEpoch = -1
    "ffffffff"  # PartitionEpoch = -1
    "01"  # Directories cs(0)
    "00"  # tags: none (both ELR fields null, their default)
)  # fmt: skip

PARTITION_CHANGE_V0 = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1, 2], leader=2)
PARTITION_CHANGE_V0_VALUE = bytes.fromhex(
    "01" "05" "00"  # frame 1, apiKey 5, version 0
    "00000000"  # PartitionId = 0
    + TOPIC_ID_HEX  # TopicId
    + "02"  # tags: 2 fields
    "00" "09" "03" "00000001" "00000002"  # tag 0 (Isr), size 9, cs(2) [1, 2]
    "01" "04" "00000002"  # tag 1 (Leader), size 4, int32 2
)  # fmt: skip

PARTITION_CHANGE_V1 = PartitionChangeRecord(
    partition_id=3, topic_id=TOPIC_ID, isr=[1], leader=-1, leader_recovery_state=0, directories=[DIR_B]
)
PARTITION_CHANGE_V1_VALUE = bytes.fromhex(
    "01" "05" "01"  # frame 1, apiKey 5, version 1
    "00000003"  # PartitionId = 3
    + TOPIC_ID_HEX  # TopicId
    + "04"  # tags: 4 fields, ascending tag order
    "00" "05" "02" "00000001"  # tag 0 (Isr), size 5, cs(1) [1]
    "01" "04" "ffffffff"  # tag 1 (Leader), size 4, int32 -1 (no leader; -2, the default, = unchanged)
    "05" "01" "00"  # tag 5 (LeaderRecoveryState), size 1, int8 0 (default is -1)
    "08" "11" "02" + DIR_B_HEX  # tag 8 (Directories, v1+), size 17, cs(1) [DIR_B]
)  # fmt: skip

REGISTER_BROKER_A = RegisterBrokerRecord(
    broker_id=1,
    incarnation_id=INCARNATION,
    broker_epoch=10,
    end_points=[BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9092, security_protocol=0)],
    features=[BrokerFeature(name="metadata.version", min_supported_version=1, max_supported_version=21)],
    rack=None,
    fenced=True,
    in_controlled_shutdown=False,
    log_dirs=[DIR_B],
)
REGISTER_BROKER_A_VALUE = bytes.fromhex(
    "01" "00" "03"  # frame 1, apiKey 0, version 3
    "00000001"  # BrokerId = 1
    "00"  # IsMigratingZkBroker = false (v2+)
    + INCARNATION_HEX  # IncarnationId
    + "000000000000000a"  # BrokerEpoch = 10
    "02"  # EndPoints cs(1)
    "0a" "504c41494e54455854"  # | Name cs(9) "PLAINTEXT"
    "0a" "6c6f63616c686f7374"  # | Host cs(9) "localhost"
    "2384"  # | Port uint16 9092
    "0000"  # | SecurityProtocol int16 0
    "00"  # | tags: none
    "02"  # Features cs(1)
    "11" "6d657461646174612e76657273696f6e"  # | Name cs(16) "metadata.version"
    "0001"  # | MinSupportedVersion = 1
    "0015"  # | MaxSupportedVersion = 21
    "00"  # | tags: none
    "00"  # Rack: null
    "01"  # Fenced = true
    "00"  # InControlledShutdown = false (v1+)
    "01"  # tags: 1 field
    "00" "11" "02" + DIR_B_HEX  # tag 0 (LogDirs, v3+), size 17, cs(1) [DIR_B]
)  # fmt: skip

REGISTER_BROKER_B = RegisterBrokerRecord(
    broker_id=2,
    is_migrating_zk_broker=True,
    incarnation_id=INCARNATION,
    broker_epoch=100,
    end_points=[
        BrokerEndpoint(name="PLAINTEXT", host="b2", port=9092, security_protocol=0),
        BrokerEndpoint(name="SSL", host="b2", port=9093, security_protocol=1),
    ],
    features=[],
    rack="rack-1",
    fenced=False,
    in_controlled_shutdown=True,
)
REGISTER_BROKER_B_VALUE = bytes.fromhex(
    "01" "00" "03"  # frame 1, apiKey 0, version 3
    "00000002"  # BrokerId = 2
    "01"  # IsMigratingZkBroker = true
    + INCARNATION_HEX  # IncarnationId
    + "0000000000000064"  # BrokerEpoch = 100
    "03"  # EndPoints cs(2)
    "0a" "504c41494e54455854" "03" "6232" "2384" "0000" "00"  # "PLAINTEXT", "b2", 9092, 0, no tags
    "04" "53534c" "03" "6232" "2385" "0001" "00"  # "SSL", "b2", 9093, 1, no tags
    "01"  # Features cs(0)
    "07" "7261636b2d31"  # Rack cs(6) "rack-1"
    "00"  # Fenced = false
    "01"  # InControlledShutdown = true
    "00"  # tags: none (LogDirs empty, its default)
)  # fmt: skip

CONFIG = ConfigRecord(resource_type=2, resource_name="foo", name="cleanup.policy", value="compact")
CONFIG_VALUE = bytes.fromhex(
    "01" "04" "00"  # frame 1, apiKey 4, version 0
    "02"  # ResourceType int8 = 2 (TOPIC)
    "04" "666f6f"  # ResourceName cs(3) "foo"
    "0f" "636c65616e75702e706f6c696379"  # Name cs(14) "cleanup.policy"
    "08" "636f6d70616374"  # Value cs(7) "compact"
    "00"  # tags: none
)  # fmt: skip

CONFIG_DELETE = ConfigRecord(resource_type=4, resource_name="", name="log.retention.ms", value=None)
CONFIG_DELETE_VALUE = bytes.fromhex(
    "01" "04" "00"  # frame 1, apiKey 4, version 0
    "04"  # ResourceType = 4 (BROKER)
    "01"  # ResourceName cs(0) "" (the cluster default)
    "11" "6c6f672e726574656e74696f6e2e6d73"  # Name cs(16) "log.retention.ms"
    "00"  # Value: null (delete)
    "00"  # tags: none
)  # fmt: skip

FRAMED = [
    pytest.param(VECTOR_1_TOPIC, 0, TOPIC_VALUE, id="TopicRecord-v0"),
    pytest.param(VECTOR_1_PARTITION, 0, VECTOR_1[100:164], id="PartitionRecord-v0"),
    pytest.param(PARTITION_V1, 1, PARTITION_V1_VALUE, id="PartitionRecord-v1"),
    pytest.param(PARTITION_V2, 2, PARTITION_V2_VALUE, id="PartitionRecord-v2"),
    pytest.param(PartitionRecord(), 2, PARTITION_V2_NULL_ELR_VALUE, id="PartitionRecord-v2-defaults"),
    pytest.param(PARTITION_CHANGE_V0, 0, PARTITION_CHANGE_V0_VALUE, id="PartitionChangeRecord-v0"),
    pytest.param(PARTITION_CHANGE_V1, 1, PARTITION_CHANGE_V1_VALUE, id="PartitionChangeRecord-v1"),
    pytest.param(REGISTER_BROKER_A, 3, REGISTER_BROKER_A_VALUE, id="RegisterBrokerRecord-v3-null-rack"),
    pytest.param(REGISTER_BROKER_B, 3, REGISTER_BROKER_B_VALUE, id="RegisterBrokerRecord-v3-rack"),
    pytest.param(CONFIG, 0, CONFIG_VALUE, id="ConfigRecord-v0"),
    pytest.param(CONFIG_DELETE, 0, CONFIG_DELETE_VALUE, id="ConfigRecord-v0-null-value"),
]


@pytest.mark.parametrize(("message", "version", "golden"), FRAMED)
def test_framed_golden(message, version: int, golden: bytes) -> None:
    assert serialize(message, version) == golden
    assert message.encode(version) == golden[3:]
    assert type(message).decode(golden[3:], version) == message
    decoded = deserialize(golden)
    assert decoded.message == message and decoded.version == version
    assert decoded.type == type(message).__name__


def test_vector_1_partition_value_slice() -> None:
    # The FRAMED entry for PartitionRecord v0 reuses the value inside test vector 1: check the slice is that value.
    assert VECTOR_1[97:100] == bytes.fromhex("018001") and VECTOR_1[164:] == b"\x00"  # key null, zz(64); headers


def test_default_write_versions() -> None:
    # Kafka 4.0 (MV 4.0-IV0) writes TopicRecord v0, PartitionRecord v1, PartitionChangeRecord v1,
    # RegisterBrokerRecord v3, ConfigRecord v0.
    assert serialize(VECTOR_1_TOPIC) == TOPIC_VALUE
    assert serialize(PARTITION_V1) == PARTITION_V1_VALUE
    assert serialize(PARTITION_CHANGE_V1) == PARTITION_CHANGE_V1_VALUE
    assert serialize(REGISTER_BROKER_A) == REGISTER_BROKER_A_VALUE
    assert serialize(CONFIG) == CONFIG_VALUE


def test_partition_change_all_defaults() -> None:
    value = bytes.fromhex("010501ffffffff" + "00" * 16 + "00")  # PartitionId -1, zero TopicId, no tags
    assert serialize(PartitionChangeRecord(), 1) == value
    assert deserialize(value).message == PartitionChangeRecord()


def test_register_broker_v0_omits_later_fields() -> None:
    record = RegisterBrokerRecord(broker_id=1, incarnation_id=INCARNATION, broker_epoch=10, rack="r")
    value = bytes.fromhex(
        "01" "00" "00"  # frame 1, apiKey 0, version 0
        "00000001"  # BrokerId (no IsMigratingZkBroker before v2)
        + INCARNATION_HEX  # IncarnationId
        + "000000000000000a"  # BrokerEpoch = 10
        "01" "01"  # EndPoints cs(0), Features cs(0)
        "02" "72"  # Rack cs(1) "r"
        "01"  # Fenced = true (the default; no InControlledShutdown before v1)
        "00"  # tags: none
    )  # fmt: skip
    assert serialize(record, 0) == value
    assert deserialize(value).message == record


# ---------------------------------------------------------------------------------------------------------------
# Unknown tagged fields, fields a version lacks


def test_unknown_tag_survives_decode_encode() -> None:
    body = bytes.fromhex(
        "04" "666f6f"  # Name "foo"
        + TOPIC_ID_HEX  # TopicId
        + "01"  # tags: 1 field
        "07" "03" "aabbcc"  # tag 7 (unknown to TopicRecord v0), size 3, 3 opaque bytes
    )  # fmt: skip
    record = TopicRecord.decode(body, 0)
    assert record.name == "foo" and record.topic_id == TOPIC_ID
    assert record.unknown_tags == [(7, b"\xaa\xbb\xcc")]
    assert record.encode(0) == body
    assert serialize(record, 0) == b"\x01\x02\x00" + body
    assert record.to_json(0)["unknownTaggedFields"] == [{"tag": 7, "data": "aabbcc"}]


def test_unknown_tags_interleave_with_known_tags_in_order() -> None:
    body = bytes.fromhex(
        "00000001" + TOPIC_ID_HEX  # PartitionId 1, TopicId
        + "01" "01" "01" "01"  # Replicas, Isr, RemovingReplicas, AddingReplicas: empty
        "00000001" "00000000" "00000000"  # Leader 1, LeaderEpoch 0, PartitionEpoch 0
        "01"  # Directories: empty (v1)
        "03"  # tags: 3 fields
        "00" "01" "01"  # tag 0 (LeaderRecoveryState) = 1
        "01" "02" "ffff"  # tag 1: unknown at v1 (EligibleLeaderReplicas starts at v2)
        "09" "00"  # tag 9: unknown, empty
    )  # fmt: skip
    record = PartitionRecord.decode(body, 1)
    assert record.leader_recovery_state == 1
    assert record.eligible_leader_replicas is None
    assert record.unknown_tags == [(1, b"\xff\xff"), (9, b"")]
    assert record.encode(1) == body


def test_field_absent_from_version_raises_when_set() -> None:
    with pytest.raises(EncodeError, match="Directories cannot be written at version 0"):
        PartitionRecord(directories=[DIR_A]).encode(0)
    with pytest.raises(EncodeError, match="EligibleLeaderReplicas cannot be written at version 1"):
        PartitionRecord(eligible_leader_replicas=[1]).encode(1)
    with pytest.raises(EncodeError, match="LastKnownElr"):
        PartitionChangeRecord(last_known_elr=[]).encode(1)
    with pytest.raises(EncodeError, match="Directories"):
        PartitionChangeRecord(directories=[DIR_A]).encode(0)
    with pytest.raises(EncodeError, match="InControlledShutdown"):
        RegisterBrokerRecord(in_controlled_shutdown=True).encode(0)
    with pytest.raises(EncodeError, match="LogDirs"):
        RegisterBrokerRecord(log_dirs=[DIR_A]).encode(2)
    with pytest.raises(EncodeError, match="IsMigratingZkBroker"):
        serialize(RegisterBrokerRecord(is_migrating_zk_broker=True), 1)
    # At their defaults, absent fields are simply not written.
    assert PartitionRecord().encode(0) == bytes.fromhex("ffffffff" + "00" * 16 + "01010101" + "ffffffff" * 3 + "00")


def test_encode_rejects_bad_values() -> None:
    with pytest.raises(EncodeError, match="no version 3"):
        PartitionRecord().encode(3)
    with pytest.raises(EncodeError, match="Name"):
        TopicRecord(name=None).encode(0)  # not nullable
    with pytest.raises(EncodeError, match="PartitionId"):
        PartitionRecord(partition_id=2**31).encode(1)
    with pytest.raises(EncodeError, match="Port"):
        RegisterBrokerRecord(end_points=[BrokerEndpoint(port=70000)]).encode(3)
    with pytest.raises(EncodeError, match="32767"):
        TopicRecord(name="x" * 0x8000).encode(0)


# ---------------------------------------------------------------------------------------------------------------
# UUIDs


def test_uuid_prints_like_kafka() -> None:
    assert str(ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert str(Uuid()) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert str(METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid(0, 1)
    assert str(TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAqw"
    assert str(Uuid(b"\xff" * 16)) == "_____________________w"  # url-safe alphabet, no "=" padding
    assert str(Uuid(b"\xf8" + bytes(15))) == "-AAAAAAAAAAAAAAAAAAAAA"
    assert Uuid("AAAAAAAAAAAAAAAAAAAAqw") == TOPIC_ID
    assert Uuid(str(DIR_B)) == DIR_B
    assert repr(TOPIC_ID) == "Uuid('AAAAAAAAAAAAAAAAAAAAqw')"
    assert VECTOR_1_TOPIC.to_json(0) == {"name": "foo", "topicId": "AAAAAAAAAAAAAAAAAAAAqw"}
    with pytest.raises(ValueError):
        Uuid(b"\x00" * 15)


def test_uuid_random_avoids_reserved_ids() -> None:
    for _ in range(50):
        u = Uuid.random()
        assert len(u) == 16 and u not in (ZERO_UUID, METADATA_TOPIC_ID) and not str(u).startswith("-")
        assert len(str(u)) == 22


def test_to_json_leaves_out_default_tags_and_absent_fields() -> None:
    assert PARTITION_CHANGE_V0.to_json(0) == {
        "partitionId": 0,
        "topicId": "AAAAAAAAAAAAAAAAAAAAqw",
        "isr": [1, 2],
        "leader": 2,
    }
    assert "directories" not in VECTOR_1_PARTITION.to_json(0)
    assert PARTITION_V1.to_json(1)["directories"] == ["AAAAAAAAAAAAAAAAAAAAAQ", "ASNFZ4mrze8BI0VniavN7w"]


# ---------------------------------------------------------------------------------------------------------------
# Varints (zig-zag and unsigned), hand-checked against Protobuf's encoding


VARINTS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-64, "7f"),
    (63, "7e"),
    (64, "8001"),
    (-65, "8101"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]
UVARINTS = [(0, "00"), (127, "7f"), (128, "8001"), (300, "ac02"), (2**64 - 1, "ffffffffffffffffff01")]


@pytest.mark.parametrize(("value", "golden"), VARINTS)
def test_varint_golden(value: int, golden: str) -> None:
    assert varint(value) == bytes.fromhex(golden)
    assert read_varint(bytes.fromhex(golden) + b"\xff", 0) == (value, len(golden) // 2)


@pytest.mark.parametrize(("value", "golden"), UVARINTS)
def test_uvarint_golden(value: int, golden: str) -> None:
    assert uvarint(value) == bytes.fromhex(golden)
    assert read_uvarint(b"\x00" + bytes.fromhex(golden), 1) == (value, 1 + len(golden) // 2)


def test_varint_errors() -> None:
    with pytest.raises(ValueError):
        uvarint(-1)
    with pytest.raises(ValueError, match="longer than 10 bytes"):
        read_uvarint(b"\x80" * 11 + b"\x00", 0)
    for truncated in (b"", b"\x80", b"\xff\xff"):  # the docstring promises ValueError, not IndexError
        with pytest.raises(ValueError):
            read_uvarint(truncated, 0)
        with pytest.raises(ValueError):
            read_varint(truncated, 0)


# ---------------------------------------------------------------------------------------------------------------
# Framing errors: each names the problem and is a DecodeError (never IndexError / struct.error)


def test_frame_version_0_rejected() -> None:
    with pytest.raises(DecodeError, match="frame version 0"):
        deserialize(b"\x00" + TOPIC_VALUE[1:])
    with pytest.raises(DecodeError, match="frame version 2"):
        deserialize(b"\x02" + TOPIC_VALUE[1:])


def test_unknown_api_key() -> None:
    with pytest.raises(UnknownRecordError, match="apiKey 99"):
        deserialize(bytes.fromhex("01" "63" "00") + TOPIC_VALUE[3:])  # fmt: skip
    with pytest.raises(UnknownRecordError, match="apiKey 6"):  # 6 was never assigned
        deserialize(bytes.fromhex("01" "06" "00" "00"))  # fmt: skip
    with pytest.raises(UnknownRecordError, match="apiKey 200"):  # a two-byte uvarint apiKey
        deserialize(bytes.fromhex("01" "c801" "00" "00"))  # fmt: skip


def test_unknown_version() -> None:
    with pytest.raises(UnknownRecordError, match="TopicRecord has no version 1"):
        deserialize(bytes.fromhex("01" "02" "01") + TOPIC_VALUE[3:])  # fmt: skip
    with pytest.raises(UnknownRecordError, match="PartitionRecord has no version 3"):
        deserialize(bytes.fromhex("01" "03" "03") + PARTITION_V2_VALUE[3:])  # fmt: skip
    with pytest.raises(DecodeError, match="out of range"):
        deserialize(bytes.fromhex("01" "02" "808002") + TOPIC_VALUE[3:])  # fmt: skip  # version 32768
    with pytest.raises(DecodeError, match="no version 2"):
        TopicRecord.decode(TOPIC_VALUE[3:], 2)


def test_trailing_garbage() -> None:
    with pytest.raises(DecodeError, match="1 bytes of garbage"):
        deserialize(TOPIC_VALUE + b"\x00")
    with pytest.raises(DecodeError, match="garbage"):
        TopicRecord.decode(TOPIC_VALUE[3:] + b"\x01\x02", 0)
    with pytest.raises(DecodeError, match="garbage"):
        decode_control(control_key(ControlType.LEADER_CHANGE), LEADER_CHANGE_VALUE + b"\x00")


@pytest.mark.parametrize(("message", "version", "golden"), FRAMED)
def test_truncated_body(message, version: int, golden: bytes) -> None:
    for cut in range(len(golden)):
        with pytest.raises(DecodeError) as info:
            deserialize(golden[:cut])
        text = str(info.value)
        assert "too short" in text or "malformed" in text or "runs past" in text or "null" in text, text


def test_truncated_control_value() -> None:
    for cut in range(len(LEADER_CHANGE_VALUE)):
        with pytest.raises(DecodeError, match="LeaderChangeMessage v0"):
            decode_control(b"\x00\x00\x00\x02", LEADER_CHANGE_VALUE[:cut])


def test_truncated_tagged_field() -> None:
    body = bytearray(PARTITION_CHANGE_V0_VALUE[3:])
    body[20 + 1 + 1] = 0x7F  # Isr's tag size: 127 bytes, past the end of the body
    with pytest.raises(DecodeError, match="tagged field 0 runs past the end"):
        PartitionChangeRecord.decode(bytes(body), 0)


def test_tagged_field_with_wrong_size() -> None:
    body = bytes.fromhex("00000000" + TOPIC_ID_HEX + "0101050000000200")  # Leader, size 5 for an int32
    with pytest.raises(DecodeError, match="tagged field 1 has a bad size"):
        PartitionChangeRecord.decode(body, 0)


def test_null_in_non_nullable_field() -> None:
    with pytest.raises(DecodeError, match=r"non-nullable field TopicRecord\.Name was null"):
        TopicRecord.decode(b"\x00" + bytes(16) + b"\x00", 0)
    with pytest.raises(DecodeError, match=r"non-nullable field PartitionRecord\.Replicas was null"):
        PartitionRecord.decode(bytes(20) + b"\x00" + b"\x01" * 3 + bytes(12) + b"\x00", 0)


def test_bad_utf8() -> None:
    with pytest.raises(DecodeError, match="malformed"):
        TopicRecord.decode(b"\x02\xff" + bytes(16) + b"\x00", 0)


def test_data_record_with_null_value() -> None:
    batch = read_batch(build_batch([(None, None)], base_offset=3))
    with pytest.raises(DecodeError, match="offset 3: data record has a null value"):
        decode_batch(batch)


def test_decode_batch_names_the_offset() -> None:
    batch = read_batch(build_batch([(None, TOPIC_VALUE), (None, b"\x01\x63\x00\x00")], base_offset=40))
    with pytest.raises(UnknownRecordError, match="offset 41: unknown metadata record apiKey 99"):
        decode_batch(batch)


def test_batch_header_errors() -> None:
    with pytest.raises(CorruptBatchError, match="only 60 bytes left"):
        read_batch(VECTOR_1[:60])
    with pytest.raises(CorruptBatchError, match="runs past the end"):
        read_batch(VECTOR_1[:100])
    bad_magic = bytearray(VECTOR_2)
    bad_magic[16] = 1
    with pytest.raises(CorruptBatchError, match="magic byte is 1"):
        read_batch(bytes(bad_magic))
    short = bytearray(VECTOR_2)
    short[8:12] = (HEADER_SIZE - 13).to_bytes(4, "big")
    with pytest.raises(CorruptBatchError, match="smaller than a batch header"):
        read_batch(bytes(short))
    with pytest.raises(CorruptBatchError) as error:
        read_batch(VECTOR_1[:100], path="x.log", file_position=4096)
    assert error.value.path == "x.log" and error.value.position == 4096 and "x.log" in str(error.value)


def test_control_record_stating_v1_decodes_at_v1_when_v0_cannot_parse_it() -> None:
    """A LeaderChangeMessage body written at v1 (voters carry a 16-byte directory id) does not parse at v0, the
    version Kafka reads control records at; its Version field (1) names the version that does."""
    directory = Uuid.from_int(0xAB)
    body = bytes.fromhex(
        "0001"  # Version = 1
        "00000001"  # LeaderId = 1
        "02"  # Voters: compact array of 1
        "00000001" + directory.hex() + "00"  # VoterId 1, VoterDirectoryId, no tags
        "01"  # GrantingVoters: empty
        "00"  # no tagged fields
    )
    ctype, message, version = decode_control(bytes.fromhex("00000002"), body)
    assert (ctype, version) == (2, 1)
    assert message.voters[0].voter_directory_id == directory
