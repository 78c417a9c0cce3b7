"""Kafka's request and response framing: a 4-byte size, then a header, then the body.

Request header v1 is ``api_key`` int16, ``api_version`` int16, ``correlation_id`` int32 and ``client_id`` (a nullable
string with an int16 length in every header version, flexible or not); v2, used by flexible API versions, adds a
tagged-field section. Response header v0 is the correlation id alone; v1 (flexible API versions) adds tagged fields —
except ApiVersions, whose responses always use v0 so that a client that does not know our versions yet can read the
error code (KIP-511). Header v0 (no client id) is only ControlledShutdown v0's, which nothing here serves.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from quorum.log.message import DecodeError
from quorum.log.varint import read_uvarint

# Kafka's socket.request.max.bytes default: a size above it closes the connection before anything is read.
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024
API_VERSIONS_KEY = 18

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """``(api_key, api_version, correlation_id)``: the fixed part every request header version shares."""
    if len(frame) < 8:
        raise DecodeError(f"a request header needs 8 bytes, the frame has {len(frame)}")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
    return api_key, api_version, correlation_id


def decode_request_header(frame: bytes, flexible: bool) -> tuple[RequestHeader, int]:
    """The header (v2 when the API version is flexible, else v1) and where the body starts."""
    if len(frame) < _HEADER.size:
        raise DecodeError(f"a request header needs {_HEADER.size} bytes, the frame has {len(frame)}")
    api_key, api_version, correlation_id, n = _HEADER.unpack_from(frame)
    pos = _HEADER.size
    client_id: str | None = None
    if n >= 0:
        if pos + n > len(frame):
            raise DecodeError("the request header's client id runs past the end of the frame")
        try:
            client_id = frame[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError("the request header's client id is not UTF-8") from None
        pos += n
    elif n != -1:
        raise DecodeError(f"the request header's client id has length {n}")
    if flexible:  # header v2: tagged fields, none of which we know; skip them
        try:
            count, pos = read_uvarint(frame, pos)
            for _ in range(count):
                _tag, pos = read_uvarint(frame, pos)
                size, pos = read_uvarint(frame, pos)
                pos += size
        except (IndexError, ValueError):
            raise DecodeError("the request header's tagged fields are malformed") from None
        if pos > len(frame):
            raise DecodeError("the request header's tagged fields run past the end of the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id, 2 if flexible else 1), pos


def encode_request(header: RequestHeader, body: bytes) -> bytes:
    """A whole request frame (for tests and tools that speak to a listener)."""
    cid = None if header.client_id is None else header.client_id.encode()
    out = bytearray(
        _HEADER.pack(header.api_key, header.api_version, header.correlation_id, -1 if cid is None else len(cid))
    )
    if cid:
        out += cid
    if header.header_version >= 2:
        out.append(0)
    out += body
    return _SIZE.pack(len(out)) + bytes(out)


def response_frame(correlation_id: int, body: bytes, header_version: int) -> bytes:
    """Size, response header (v0, or v1 with an empty tagged-field section), body."""
    header = _CORRELATION.pack(correlation_id) + (b"\x00" if header_version >= 1 else b"")
    return _SIZE.pack(len(header) + len(body)) + header + body


def response_header_version(api_key: int, flexible: bool) -> int:
    return 1 if flexible and api_key != API_VERSIONS_KEY else 0
