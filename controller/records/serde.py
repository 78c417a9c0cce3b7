"""Kafka's ``ApiMessageAndVersion`` framing of metadata records, and decoding of whole batches.

The value of every data record in the metadata log is ``uvarint frameVersion (1) · uvarint apiKey · uvarint
version · body`` (Kafka's AbstractApiMessageSerde). Control records carry no frame: see ``quorum.log.control``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from controller.records.metadata import DATA_RECORDS
from quorum.log.batch import Record, RecordBatch
from quorum.log.control import CONTROL_TYPES, ControlType, decode_control
from quorum.log.message import MAX_VERSION, ApiMessage, DecodeError, EncodeError
from quorum.log.varint import read_uvarint, uvarint

FRAME_VERSION = 1
_new = tuple.__new__  # NamedTuple construction without the keyword-parsing __new__, for the hot loop
BY_API_KEY: dict[int, type[ApiMessage]] = {cls.SPEC.api_key: cls for cls in DATA_RECORDS}  # type: ignore[attr-defined]
BY_NAME: dict[str, type[ApiMessage]] = {cls.__name__: cls for cls in (*DATA_RECORDS, *CONTROL_TYPES.values())}
_BODY_DECODERS = {
    (cls.SPEC.api_key, v): cls.SPEC.body_decoder(v)  # type: ignore[attr-defined]
    for cls in DATA_RECORDS
    for v in range(cls.SPEC.versions[0], cls.SPEC.versions[1] + 1)
}
# A record's first three bytes (frame version, apiKey, version: each a one-byte varint for every known record) ->
# its body decoder and version: one dict lookup finds how to decode it, for the hot loops that decode millions.
BY_FRAME_HEADER: dict[bytes, tuple[Callable[[bytes, int], ApiMessage], int]] = {
    bytes((FRAME_VERSION, api_key, version)): (decode, version)
    for (api_key, version), decode in _BODY_DECODERS.items()
    if api_key < 0x80 and version < 0x80
}


class UnknownRecordError(DecodeError):
    """An apiKey or version this build does not know: reported, never a crash."""


class ApiMessageAndVersion(NamedTuple):
    message: ApiMessage
    version: int

    @property
    def type(self) -> str:
        return type(self.message).__name__


def _framer(cls: type[ApiMessage]) -> tuple[bytes, Callable[[ApiMessage, bytearray], None]]:
    spec = cls.SPEC
    version = spec.write_version  # type: ignore[attr-defined]
    prefix = bytes((FRAME_VERSION,)) + uvarint(spec.api_key) + uvarint(version)  # type: ignore[attr-defined]
    return prefix, spec.encoder(version)  # type: ignore[attr-defined]


_FRAMERS = {cls: _framer(cls) for cls in DATA_RECORDS}


def serialize(message: ApiMessage, version: int | None = None) -> bytes:
    """Frame a data record as the value of a log record.

    Without a version: the version Kafka 4.0 writes, or the lowest later one that can hold the message (as Kafka
    picks BrokerRegistrationChangeRecord v1 only when it carries InControlledShutdown).
    """
    if version is None and (framer := _FRAMERS.get(type(message))) is not None:
        # The hot path: frame header and body straight into one buffer. Any failure takes the general path
        # below, which tries later versions and explains errors.
        out = bytearray(framer[0])
        try:
            framer[1](message, out)
            return bytes(out)
        except Exception:
            pass
    spec = message.SPEC
    api_key = getattr(spec, "api_key", None)
    if api_key is None:
        raise TypeError(f"{type(message).__name__} is not a metadata data record")
    if version is None:
        first, last = spec.write_version, spec.versions[1]  # type: ignore[attr-defined]
        for candidate in range(first, last + 1):
            try:
                body = message.encode(candidate)
            except EncodeError:
                if candidate == last:
                    raise
                continue
            version = candidate
            break
    else:
        body = message.encode(version)
    return bytes((FRAME_VERSION,)) + uvarint(api_key) + uvarint(version) + body


def deserialize(value: bytes) -> ApiMessageAndVersion:
    """Decode a framed data record; :class:`DecodeError` (or :class:`UnknownRecordError`) if it is not one."""
    known = BY_FRAME_HEADER.get(value[:3])
    if known is not None:
        decode, version = known
        return _new(ApiMessageAndVersion, (decode(value, 3), version))
    if len(value) >= 3 and value[0] == FRAME_VERSION and value[1] < 0x80 and value[2] < 0x80:
        api_key, version, pos = value[1], value[2], 3
    else:
        try:
            frame, pos = read_uvarint(value, 0)
            api_key, pos = read_uvarint(value, pos)
            version, pos = read_uvarint(value, pos)
        except (IndexError, ValueError):
            raise DecodeError(f"record value of {len(value)} bytes is too short for a frame header") from None
        if frame != FRAME_VERSION:
            raise DecodeError(f"frame version {frame} is not supported (expected {FRAME_VERSION})")
        if api_key > MAX_VERSION or version > MAX_VERSION:
            raise DecodeError(f"apiKey {api_key} or version {version} is out of range")
    decode = _BODY_DECODERS.get((api_key, version))
    if decode is None:
        cls = BY_API_KEY.get(api_key)
        if cls is None:
            raise UnknownRecordError(f"unknown metadata record apiKey {api_key} (version {version})")
        lo, hi = cls.SPEC.versions
        raise UnknownRecordError(f"{cls.__name__} has no version {version} (known {lo}-{hi})")
    return _new(ApiMessageAndVersion, (decode(value, pos), version))


class MetadataRecord(NamedTuple):
    """One decoded record of a batch: its offset, and the message (None for an unknown control type)."""

    offset: int
    message: ApiMessage | None
    version: int
    control_type: int | None = None  # set for control records

    @property
    def type(self) -> str:
        if self.message is not None:
            return type(self.message).__name__
        try:
            return f"Control:{ControlType(self.control_type).name}"
        except ValueError:
            return f"Control:{self.control_type}"


def decode_record(record: Record, control: bool) -> MetadataRecord:
    """Decode one record of a batch (``control``: the batch's control flag)."""
    if control:
        ctype, msg, version = decode_control(record.key, record.value)
        return MetadataRecord(record.offset, msg, version, ctype)
    if record.value is None:
        raise DecodeError("data record has a null value")
    message, version = deserialize(record.value)
    return MetadataRecord(record.offset, message, version)


def decode_batch(batch: RecordBatch, path: str | None = None) -> list[MetadataRecord]:
    """Decode every record of a batch. Raises :class:`DecodeError` naming the offset of a bad record."""
    out = []
    control = batch.is_control
    for rec in batch.records(path):
        try:
            if control:
                ctype, msg, version = decode_control(rec.key, rec.value)
                out.append(MetadataRecord(rec.offset, msg, version, ctype))
            else:
                if rec.value is None:
                    raise DecodeError("data record has a null value")
                message, version = deserialize(rec.value)
                out.append(_new(MetadataRecord, (rec.offset, message, version, None)))
        except DecodeError as e:
            raise type(e)(f"offset {rec.offset}: {e}") from None
    return out
