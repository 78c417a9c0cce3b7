"""KRaft control records: the records Raft itself writes (leader changes, snapshot bounds, voter sets).

A control record lives in a batch with the control attribute bit set. Its key is 4 bytes, ``int16 version (0),
int16 type``; its value is the message body with **no** ApiMessageAndVersion frame, written at version 0 as Kafka's
``ControlRecordUtils`` does, and read at version 0 as Kafka reads them. Should a body not parse at v0, the
message's own first field (``Version``) names the version to try, so a newer writer's body still decodes.

These specs live in ``quorum`` (not ``controller.records``) because Raft writes them and must not depend on the
controller; ``controller.records`` re-exports them so every record type is found in one place.
"""

from __future__ import annotations

import enum
import struct

from quorum.log.message import (
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    ApiMessage,
    DecodeError,
    Field,
    Message,
    Struct,
)
from quorum.log.message import array as A


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


_Voter = Struct(
    "Voter",
    [
        Field("VoterId", INT32),
        Field("VoterDirectoryId", UUID, "1+"),
    ],
)

LeaderChangeMessage = Message(
    "LeaderChangeMessage",
    [
        Field("Version", INT16),
        Field("LeaderId", INT32),
        Field("Voters", A(_Voter)),
        Field("GrantingVoters", A(_Voter)),
    ],
    versions="0-1",
    write_version=0,
).cls

SnapshotHeaderRecord = Message(
    "SnapshotHeaderRecord",
    [
        Field("Version", INT16),
        Field("LastContainedLogTimestamp", INT64),
    ],
).cls

SnapshotFooterRecord = Message("SnapshotFooterRecord", [Field("Version", INT16)]).cls

KRaftVersionRecord = Message(
    "KRaftVersionRecord",
    [
        Field("Version", INT16),
        Field("KRaftVersion", INT16, attr="kraft_version"),
    ],
).cls

_Endpoint = Struct("Endpoint", [Field("Name", STRING), Field("Host", STRING), Field("Port", UINT16)])
_KRaftVersionFeature = Struct(
    "KRaftVersionFeature", [Field("MinSupportedVersion", INT16), Field("MaxSupportedVersion", INT16)]
)
_VoterWithEndpoints = Struct(
    "Voter",
    [
        Field("VoterId", INT32),
        Field("VoterDirectoryId", UUID),
        Field("Endpoints", A(_Endpoint)),
        Field("KRaftVersionFeature", _KRaftVersionFeature, attr="kraft_version_feature"),
    ],
)

VotersRecord = Message("VotersRecord", [Field("Version", INT16), Field("Voters", A(_VoterWithEndpoints))]).cls

# Public handles on the nested struct classes, for building records.
Voter = _Voter.cls
VoterEndpoint = _Endpoint.cls
KRaftVersionFeature = _KRaftVersionFeature.cls
VotersRecordVoter = _VoterWithEndpoints.cls

CONTROL_TYPES: dict[int, type[ApiMessage]] = {
    ControlType.LEADER_CHANGE: LeaderChangeMessage,
    ControlType.SNAPSHOT_HEADER: SnapshotHeaderRecord,
    ControlType.SNAPSHOT_FOOTER: SnapshotFooterRecord,
    ControlType.KRAFT_VERSION: KRaftVersionRecord,
    ControlType.KRAFT_VOTERS: VotersRecord,
}
_TYPE_OF = {cls: t for t, cls in CONTROL_TYPES.items()}

_KEY = struct.Struct(">hh")


def control_key(control_type: int) -> bytes:
    return _KEY.pack(0, control_type)


def control_type_of(key: bytes | None) -> int:
    if key is None or len(key) < 4:
        raise DecodeError(f"a control record key is 4 bytes, got {None if key is None else len(key)}")
    version, ctype = _KEY.unpack_from(key)
    if version < 0:  # a newer key version is read as best we can, as Kafka's ControlRecordType.parse does
        raise DecodeError(f"invalid control record key version {version}")
    return ctype


def encode_control(message: ApiMessage) -> tuple[bytes, bytes]:
    """``(key, value)`` of a control record."""
    ctype = _TYPE_OF.get(type(message))
    if ctype is None:
        raise TypeError(f"{type(message).__name__} is not a control record")
    return control_key(ctype), message.encode()


def decode_control(key: bytes | None, value: bytes | None) -> tuple[int, ApiMessage | None, int]:
    """``(control type, message, version)``; the message is None for types that carry none we know (ABORT,
    COMMIT, or a type newer than us: readers skip those, as Kafka's do)."""
    ctype = control_type_of(key)
    cls = CONTROL_TYPES.get(ctype)
    if cls is None or value is None:
        return ctype, None, 0
    try:
        return ctype, cls.decode(value, 0), 0  # Kafka writes and reads control records at version 0
    except DecodeError:
        # A body that does not parse at v0 may be a newer writer's, at the version its Version field states.
        lo, hi = cls.SPEC.versions
        stated = struct.unpack_from(">h", value)[0] if len(value) >= 2 else 0
        if stated == 0 or not lo <= stated <= hi:
            raise
        return ctype, cls.decode(value, stated), stated
