"""Kafka's variable-length integers.

Two flavours appear in the metadata log:
- *unsigned varints* (LEB128): the ApiMessageAndVersion frame, compact lengths and tagged fields;
- *zig-zag varints* (Protobuf's signed encoding): the fields of a RecordBatch v2 record.

Decoders take ``(buf, pos)`` and return ``(value, new_pos)``; they raise ``ValueError`` on a truncated or
over-long varint so callers can turn it into an error that names the file and position.
"""

from __future__ import annotations


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    try:  # free when nothing is raised (3.11+); turns a truncated varint into the documented ValueError
        b = buf[pos]
        if b < 0x80:  # the common one-byte case, kept branch-free of the loop
            return b, pos + 1
        value = b & 0x7F
        shift = 7
        pos += 1
        while True:
            if shift > 63:
                raise ValueError("varint is longer than 10 bytes")
            b = buf[pos]
            value |= (b & 0x7F) << shift
            pos += 1
            if b < 0x80:
                return value, pos
            shift += 7
    except IndexError:
        raise ValueError(f"varint truncated at byte {pos} (buffer of {len(buf)} bytes)") from None


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag encoded signed varint (or varlong)."""
    try:
        b = buf[pos]
    except IndexError:
        raise ValueError(f"varint truncated at byte {pos} (buffer of {len(buf)} bytes)") from None
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    raw, pos = read_uvarint(buf, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    if value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit value."""
    return uvarint((value << 1) ^ (value >> 63))


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


_ONE_BYTE = [bytes([i]) for i in range(0x80)]
