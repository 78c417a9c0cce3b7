"""The message codec's non-flexible versions (Kafka's API messages before their flexibleVersions) and the request and
response headers, byte for byte."""

from __future__ import annotations

import struct

import pytest

from pykraft.kafka.apis.api_versions import ApiVersionsRequest, ApiVersionsResponse
from pykraft.kafka.apis.metadata import MetadataRequest, MetadataResponse
from pykraft.kafka.protocol import (
    RequestHeader,
    decode_request_header,
    encode_request,
    response_frame,
    response_header_version,
)
from quorum.log.message import INT32, STRING, DecodeError, Field, Message, Struct, Uuid, array

_Item = Struct("Item", [Field("Name", STRING, nullable="0+"), Field("Ids", array(INT32), nullable="0+")])
Probe = Message(
    "Probe",
    [
        Field("Items", array(_Item), nullable="1+"),
        Field("Note", STRING, "1+", tag=0, default=""),  # tagged: only in flexible versions
    ],
    versions="0-2",
    flexible="2+",
)


def test_non_flexible_lengths_are_int16_and_int32_with_minus_one_for_null() -> None:
    msg = Probe.cls(items=[_Item.cls(name="ab", ids=[7]), _Item.cls(name=None, ids=None)])
    classic = Probe.encode(msg, 1)
    assert classic == (
        struct.pack(">i", 2)
        + struct.pack(">h", 2)
        + b"ab"
        + struct.pack(">ii", 1, 7)
        + struct.pack(">h", -1)
        + struct.pack(">i", -1)
    )
    assert Probe.decode(classic, 1) == msg
    assert Probe.decode(struct.pack(">i", -1), 1).items is None
    flexible = Probe.encode(msg, 2)
    assert flexible == bytes([3, 3]) + b"ab" + bytes([2]) + struct.pack(">i", 7) + bytes([0, 0, 0, 0, 0])
    assert Probe.decode(flexible, 2) == msg


def test_tagged_fields_exist_only_in_flexible_versions() -> None:
    msg = Probe.cls(items=[], note="hi")
    assert Probe.decode(Probe.encode(msg, 2), 2).note == "hi"
    # Non-flexible v1 has no tagged section: the value is dropped (Kafka: ignorable) or refused (not ignorable).
    with pytest.raises(ValueError, match="Note cannot be written at version 1"):
        Probe.encode(msg, 1)


def test_a_struct_serves_one_messages_flexible_versions() -> None:
    """A struct's codecs are compiled for its message's flexible versions: a second message with other ones cannot
    take it (it would re-encode the first's versions silently); one with the same ones may."""
    with pytest.raises(ValueError, match="Item is already in a message with other flexible versions"):
        Message("Other", [Field("Items", array(_Item))], versions="0-2", flexible="1+")
    Message("Same", [Field("Items", array(_Item))], versions="0-2", flexible="2+")
    assert Probe.decode(Probe.encode(Probe.cls(items=[_Item.cls(name="x", ids=[])]), 1), 1).items[0].name == "x"


def test_hostile_array_count_fails_before_allocating() -> None:
    for version in (0, 1):
        with pytest.raises(DecodeError, match="claims 2147483647 elements"):
            Probe.decode(struct.pack(">i", 2**31 - 1), version)
    with pytest.raises(DecodeError):
        Probe.decode(struct.pack(">ih", 1, 500) + b"x", 1)  # a string past the end
    with pytest.raises(DecodeError, match="non-nullable"):
        Probe.decode(struct.pack(">i", -1), 0)


def test_api_versions_v0_and_v3_bytes() -> None:
    response = ApiVersionsResponse.cls(error_code=35, api_keys=[])
    response.api_keys.append(ApiVersionsResponse.fields[1].type.element.cls(api_key=18, min_version=0, max_version=3))
    assert ApiVersionsResponse.encode(response, 0) == struct.pack(">hihhh", 35, 1, 18, 0, 3)
    # v3: compact array (count + 1), each element's tagged fields, throttle time, the body's tagged fields
    assert ApiVersionsResponse.encode(response, 3) == struct.pack(">hbhhhbib", 35, 2, 18, 0, 3, 0, 0, 0)
    request = ApiVersionsRequest.cls(client_software_name="x", client_software_version="1")
    assert ApiVersionsRequest.encode(request, 3) == bytes([2]) + b"x" + bytes([2]) + b"1" + bytes([0])
    assert ApiVersionsRequest.encode(ApiVersionsRequest.cls(), 0) == b""


def test_metadata_every_version_round_trips() -> None:
    topic_id = Uuid.random()
    for version in range(13):
        response = MetadataResponse.decode(
            MetadataResponse.encode(
                MetadataResponse.cls(
                    brokers=[MetadataResponse.fields[1].type.element.cls(node_id=1, host="h", port=9)],
                    cluster_id="c",
                    controller_id=1,
                    topics=[MetadataResponse.fields[4].type.element.cls(name="t", topic_id=topic_id)],
                ),
                version,
            ),
            version,
        )
        assert response.brokers[0].host == "h" and response.topics[0].name == "t"
        assert response.controller_id == (1 if version >= 1 else -1)  # absent before v1: the default
        assert response.topics[0].topic_id == (topic_id if version >= 10 else Uuid())
        if version >= 1:  # null topics (every topic) from v1
            request = MetadataRequest.cls(topics=None)
            assert MetadataRequest.decode(MetadataRequest.encode(request, version), version).topics is None


def test_request_header_v1_v2_and_response_headers() -> None:
    frame = encode_request(RequestHeader(3, 12, 77, "client", 2), b"BODY")
    assert frame[:4] == struct.pack(">i", len(frame) - 4)
    header, pos = decode_request_header(frame[4:], flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 12, 77, "client")
    assert frame[4:][pos:] == b"BODY"
    # the client id keeps its int16 length in header v2; null is -1
    null_id = encode_request(RequestHeader(3, 1, 5, None, 1), b"")[4:]
    assert null_id == struct.pack(">hhih", 3, 1, 5, -1)
    assert decode_request_header(null_id, flexible=False)[0].client_id is None
    with pytest.raises(DecodeError):
        decode_request_header(struct.pack(">hhih", 3, 1, 5, 40) + b"short", flexible=False)
    assert response_frame(77, b"B", 1) == struct.pack(">iib", 6, 77, 0) + b"B"
    assert response_frame(77, b"B", 0) == struct.pack(">ii", 5, 77) + b"B"
    assert response_header_version(18, True) == 0  # ApiVersions: always v0
    assert response_header_version(3, True) == 1 and response_header_version(3, False) == 0


def test_every_registered_api_round_trips_at_every_version() -> None:
    from pykraft.kafka.listener import APIS  # importing the listener registers every API

    assert {18, 3, 19, 20, 60, 29, 37, 32, 44} <= set(APIS)
    for api in APIS.values():
        assert api.request.api_key == api.response.api_key == api.key
        for version in range(api.min_version, api.max_version + 1):
            for spec in (api.request, api.response):
                message = spec.cls()
                assert spec.decode(spec.encode(message, version), version) == message, (spec.name, version)
