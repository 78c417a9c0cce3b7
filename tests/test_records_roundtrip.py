"""Property tests: every record type at every version round-trips through the codec, batches and varints round-trip,
and random bytes only ever fail with the library's own errors.

Instances are generated from each record's spec (``cls.SPEC.fields``), so a new record type or version is covered
without touching this file.
"""

from __future__ import annotations

import functools
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from controller.records import CONTROL_TYPES, DATA_RECORDS, DecodeError, decode_batch, deserialize, serialize
from quorum.log.batch import (
    CONTROL_FLAG,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TEMPLATES,
    TRANSACTIONAL_FLAG,
    CorruptBatchError,
    Record,
    build_batch,
    encode_batch,
    read_batch,
)
from quorum.log.control import decode_control
from quorum.log.message import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    Array,
    Primitive,
    Struct,
    Uuid,
)
from quorum.log.varint import read_uvarint, read_varint, uvarint, uvarint_size, varint

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

INT_RANGES = {
    INT8: (-(2**7), 2**7 - 1),
    INT16: (-(2**15), 2**15 - 1),
    INT32: (-(2**31), 2**31 - 1),
    INT64: (-(2**63), 2**63 - 1),
    UINT16: (0, 2**16 - 1),
}
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    # The extremes and the values around the defaults (-2, -1, 0) are where codecs break; weight them.
    edges = sorted({lo, hi, max(lo, -2), max(lo, -1), 0, 1})
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


def primitive_strategy(typ: Primitive) -> st.SearchStrategy:
    if typ in INT_RANGES:
        return _ints(*INT_RANGES[typ])
    if typ is BOOL:
        return st.booleans()
    if typ is FLOAT64:
        return st.floats(allow_nan=False)  # NaN != NaN: equality could not check it
    if typ is UUID:
        return st.binary(min_size=16, max_size=16).map(Uuid)
    if typ is STRING:
        return TEXT
    if typ is BYTES:
        return st.binary(max_size=40)
    raise AssertionError(f"no strategy for {typ!r}")


def unknown_tags_strategy() -> st.SearchStrategy:
    # Tags far above any known one, unique, in ascending order (the order they come back in).
    tag = st.tuples(st.integers(100, 300), st.binary(max_size=6))
    return st.one_of(st.none(), st.lists(tag, min_size=1, max_size=2, unique_by=lambda t: t[0]).map(sorted))


def value_strategy(typ, version: int, nullable: bool) -> st.SearchStrategy:
    if isinstance(typ, Primitive):
        strategy = primitive_strategy(typ)
    elif isinstance(typ, Array):
        strategy = st.lists(value_strategy(typ.element, version, False), max_size=4)
    elif isinstance(typ, Struct):
        strategy = struct_strategy(typ, version)
    else:  # pragma: no cover
        raise AssertionError(f"unknown field type {typ!r}")
    return st.one_of(st.none(), strategy) if nullable else strategy


@functools.cache
def struct_strategy(spec: Struct, version: int) -> st.SearchStrategy:
    """Random valid instances of ``spec`` at ``version``; fields absent in the version keep their defaults."""
    fields = {f.attr: value_strategy(f.type, version, f.nullable(version)) for f in spec.fields if f.present(version)}
    fields["unknown_tags"] = unknown_tags_strategy()
    return st.fixed_dictionaries(fields).map(lambda kw: spec.cls(**kw))


def _versions(cls) -> range:
    lo, hi = cls.SPEC.versions
    return range(lo, hi + 1)


DATA_CASES = [pytest.param(cls, v, id=f"{cls.__name__}-v{v}") for cls in DATA_RECORDS for v in _versions(cls)]
CONTROL_CASES = [
    pytest.param(cls, v, id=f"{cls.__name__}-v{v}") for cls in CONTROL_TYPES.values() for v in _versions(cls)
]


def test_every_record_type_and_version_is_covered() -> None:
    assert len(DATA_RECORDS) == 25
    assert {c.values[0].__name__ for c in DATA_CASES} == {cls.__name__ for cls in DATA_RECORDS}
    assert len(DATA_CASES) == sum(len(_versions(cls)) for cls in DATA_RECORDS) == 34
    assert len(CONTROL_CASES) == 6  # LeaderChangeMessage 0-1, the four others at 0


def _check_absent_fields_default(message, version: int) -> None:
    for f in message.SPEC.fields:
        if not f.present(version):
            assert getattr(message, f.attr) == f.default_value(), f.name


@pytest.mark.parametrize(("cls", "version"), DATA_CASES)
@FAST
@given(data=st.data())
def test_data_record_roundtrip(cls, version: int, data) -> None:
    message = data.draw(struct_strategy(cls.SPEC, version), label="message")
    body = message.encode(version)
    decoded = cls.decode(body, version)
    assert decoded == message
    _check_absent_fields_default(decoded, version)
    assert decoded.encode(version) == body
    value = serialize(message, version)
    assert value[:1] == b"\x01" and value.endswith(body)
    framed = deserialize(value)
    assert framed.message == message and framed.version == version
    # A JSON view exists for every record (the dump tool's output).
    assert isinstance(message.to_json(version), dict)


@pytest.mark.parametrize(("cls", "version"), CONTROL_CASES)
@FAST
@given(data=st.data())
def test_control_record_roundtrip(cls, version: int, data) -> None:
    message = data.draw(struct_strategy(cls.SPEC, version), label="message")
    message.version = version  # a control message states its own version in its first field
    body = message.encode(version)
    decoded = cls.decode(body, version)
    assert decoded == message
    _check_absent_fields_default(decoded, version)
    assert decoded.encode(version) == body
    ctype = next(t for t, c in CONTROL_TYPES.items() if c is cls)
    # Control records are read at v0 first, as Kafka reads them; a body that also parses at v0 (e.g. a v1
    # LeaderChangeMessage with no voters: the bytes are the same) is reported at v0, with the same message.
    got_type, got_message, got_version = decode_control(struct.pack(">hh", 0, ctype), body)
    assert (got_type, got_message) == (ctype, message)
    assert got_version in (0, version)


# ---------------------------------------------------------------------------------------------------------------
# Batches

INT32_MAX = 2**31 - 1
TIMESTAMPS = st.integers(-(2**62) + 1, 2**62 - 1)  # any two differ by less than 2**63: a varlong delta
BLOBS = st.one_of(
    st.none(),
    st.binary(max_size=70),  # one- and two-byte lengths
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=4), st.integers(2100, 2300)),  # > 8191 bytes
)
HEADERS = st.lists(st.tuples(TEXT, st.one_of(st.none(), st.binary(max_size=20))), max_size=3).map(tuple)


@st.composite
def batches(draw):
    base_offset = draw(st.integers(0, 2**62))
    # Offset deltas of one, two (64..8191: the parser reads those inline) and more varint bytes.
    extra = draw(st.lists(st.one_of(st.integers(1, 9000), st.integers(1, INT32_MAX)), max_size=6, unique=True))
    deltas = [0, *sorted(extra)]  # compacted logs leave gaps
    records = [Record(base_offset + d, draw(TIMESTAMPS), draw(BLOBS), draw(BLOBS), draw(HEADERS)) for d in deltas]
    options = {
        "epoch": draw(st.integers(-(2**31), INT32_MAX)),
        "attributes": draw(st.sampled_from([0, CONTROL_FLAG, TRANSACTIONAL_FLAG, CONTROL_FLAG | TRANSACTIONAL_FLAG])),
        "producer_id": draw(st.integers(-1, 2**63 - 1)),
        "producer_epoch": draw(st.integers(-1, 2**15 - 1)),
        "base_sequence": draw(st.integers(-1, INT32_MAX)),
    }
    return base_offset, records, options


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batches(), st.binary(max_size=8))
def test_batch_roundtrip(case, prefix: bytes) -> None:
    base_offset, records, options = case
    raw = encode_batch(records, base_offset=base_offset, **options)
    batch = read_batch(prefix + raw + b"\x00\x00", len(prefix))  # not at the start, not to the end of the buffer
    assert batch.size == len(raw) and batch.buffer == raw and batch.crc_valid()
    assert batch.records() == records
    assert batch.values() == [r.value or b"" for r in records]  # what a replay takes, parsed without the Records
    assert batch.base_offset == base_offset and batch.last_offset == records[-1].offset
    assert batch.record_count == len(records)
    assert batch.epoch == options["epoch"]
    assert batch.attributes == options["attributes"]
    assert batch.is_control == bool(options["attributes"] & CONTROL_FLAG)
    assert batch.is_transactional == bool(options["attributes"] & TRANSACTIONAL_FLAG)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (
        options["producer_id"],
        options["producer_epoch"],
        options["base_sequence"],
    )
    assert batch.base_timestamp == records[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in records)


KRAFT_RECORDS = st.lists(st.tuples(BLOBS, BLOBS), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(KRAFT_RECORDS, st.integers(0, 2**62), st.integers(0, INT32_MAX), TIMESTAMPS, st.booleans())
def test_build_batch_roundtrip(pairs, base_offset: int, epoch: int, timestamp: int, control: bool) -> None:
    """build_batch (KRaft's shape: one timestamp, contiguous offsets, no headers) reads back, and agrees byte for
    byte with the general encode_batch."""
    raw = build_batch(pairs, base_offset=base_offset, epoch=epoch, timestamp=timestamp, control=control)
    expected = [Record(base_offset + i, timestamp, key, value) for i, (key, value) in enumerate(pairs)]
    attributes = CONTROL_FLAG if control else 0
    assert raw == encode_batch(expected, base_offset=base_offset, epoch=epoch, attributes=attributes)
    batch = read_batch(raw)
    assert batch.records() == expected
    assert (batch.base_offset, batch.last_offset, batch.epoch, batch.is_control) == (
        base_offset,
        base_offset + len(pairs) - 1,
        epoch,
        control,
    )
    assert (batch.base_timestamp, batch.max_timestamp) == (timestamp, timestamp)


@st.composite
def runs_of_records(draw):
    """KRaft batches in runs of records framed alike (a snapshot's PartitionRecords: the same value length) or of
    a few framings mixed (a broker's image after ISR changes: two lengths interleaved; more than a run may mix, too),
    past the 64th record (offset deltas two bytes wide), with odd records between the runs."""
    pairs: list[tuple[bytes | None, bytes | None]] = []
    for _ in range(draw(st.integers(1, 4))):
        sizes = draw(st.lists(st.integers(0, 140), min_size=1, max_size=MAX_TEMPLATES + 1))
        for size in draw(st.lists(st.sampled_from(sizes), min_size=1, max_size=150)):
            pairs.append((None, draw(st.binary(min_size=size, max_size=size))))
        pairs += draw(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=6)), BLOBS), max_size=2))
    return pairs


def values_or_error(batch) -> tuple[str, object]:  # type: ignore[no-untyped-def]
    try:
        return "values", batch.values()
    except CorruptBatchError:
        return "error", None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    runs_of_records(),
    st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=3),
    st.sampled_from([0, 0, 1, 2]),
)
def test_values_read_by_runs_agree_with_the_records(pairs, changes, fewer: int) -> None:
    """Runs of records framed alike, or of a few framings mixed, are checked and sliced a run at a time; whole or
    with bytes changed (or a record count short of the records there), a batch's values are its records' values (or
    both readings fail)."""
    raw = build_batch(pairs, base_offset=5)
    batch = read_batch(raw)
    assert batch.values() == [value or b"" for _, value in pairs] == [r.value or b"" for r in batch.records()]
    out = bytearray(raw)
    for where, byte in changes:
        out[HEADER_SIZE + where % (len(out) - HEADER_SIZE)] = byte
    struct.pack_into(">i", out, HEADER_SIZE - 4, max(0, len(pairs) - fewer))  # the header's record count
    changed = read_batch(bytes(out), check_crc=False)  # the bytes past the CRC check: the parse alone
    try:
        expected: tuple[str, object] = ("values", [r.value or b"" for r in changed.records()])
    except CorruptBatchError:
        expected = ("error", None)
    assert values_or_error(changed) == expected


# ---------------------------------------------------------------------------------------------------------------
# Varints


@FAST
@given(st.integers(-(2**63), 2**63 - 1), st.binary(max_size=4), st.binary(max_size=4))
@example(-(2**63), b"", b"")
@example(2**63 - 1, b"", b"")
@example(-1, b"", b"")
@example(0, b"", b"")
def test_zigzag_varint_roundtrip(value: int, prefix: bytes, suffix: bytes) -> None:
    encoded = varint(value)
    assert 1 <= len(encoded) <= 10
    assert read_varint(prefix + encoded + suffix, len(prefix)) == (value, len(prefix) + len(encoded))
    with pytest.raises(ValueError):
        read_varint(encoded[:-1], 0)


@FAST
@given(st.integers(0, 2**64 - 1), st.binary(max_size=4), st.binary(max_size=4))
@example(2**64 - 1, b"", b"")
@example(2**63, b"", b"")
@example(0, b"", b"")
@example(127, b"", b"")
@example(128, b"", b"")
def test_unsigned_varint_roundtrip(value: int, prefix: bytes, suffix: bytes) -> None:
    encoded = uvarint(value)
    assert len(encoded) == uvarint_size(value) <= 10
    assert read_uvarint(prefix + encoded + suffix, len(prefix)) == (value, len(prefix) + len(encoded))
    with pytest.raises(ValueError):
        read_uvarint(encoded[:-1], 0)


# ---------------------------------------------------------------------------------------------------------------
# Random bytes fail only with DecodeError / CorruptBatchError (both ValueErrors)

assert issubclass(DecodeError, ValueError) and issubclass(CorruptBatchError, ValueError)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_random_record_values(value: bytes) -> None:
    try:
        deserialize(value)
    except DecodeError:
        pass


# A frame whose apiKey and version are known, then random bytes: exercises every body decoder.
KNOWN_FRAMES = sorted({bytes((1, cls.SPEC.api_key, v)) for cls in DATA_RECORDS for v in _versions(cls)})


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(KNOWN_FRAMES), st.binary(max_size=80))
def test_random_record_bodies(frame: bytes, body: bytes) -> None:
    try:
        deserialize(frame + body)
    except DecodeError:
        pass


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(CONTROL_TYPES)), st.binary(max_size=60))
def test_random_control_values(ctype: int, value: bytes) -> None:
    try:
        decode_control(struct.pack(">hh", 0, ctype), value)
    except DecodeError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_batch_bytes(buf: bytes) -> None:
    try:
        batch = read_batch(buf)
    except CorruptBatchError:
        return
    try:
        decode_batch(batch)
    except (DecodeError, CorruptBatchError):
        pass


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-5, 2**31 - 1),
    st.sampled_from([0, CONTROL_FLAG, 1, 2, 7]),
    st.one_of(
        st.binary(max_size=120), st.lists(st.sampled_from([b"\x00", b"\x01", b"\x02", b"\x7f", b"\x80"])).map(b"".join)
    ),
)
def test_random_records_in_a_valid_batch(count: int, attributes: int, body: bytes) -> None:
    """A header that passes every check (length, magic, CRC) over random record bytes: records() and
    decode_batch may only raise CorruptBatchError / DecodeError."""
    out = bytearray(HEADER_SIZE) + body
    HEADER.pack_into(
        out, 0, 0, len(out) - LOG_OVERHEAD, 0, 2, 0, attributes, max(count - 1, 0), 0, 0, -1, -1, -1, count
    )
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[CRC_START:])))
    if count < 0:
        with pytest.raises(CorruptBatchError, match="negative record count"):
            read_batch(bytes(out))
        return
    batch = read_batch(bytes(out))
    try:
        decode_batch(batch)
    except (DecodeError, CorruptBatchError):
        pass


# Mutation fuzzing: real encodings with a few bytes changed, cut or inserted reach far deeper into the decoders
# than uniformly random bytes do.

ALL_DATA_VERSIONS = [(cls, v) for cls in DATA_RECORDS for v in _versions(cls)]
RANDOM_DATA_RECORD = st.sampled_from(ALL_DATA_VERSIONS).flatmap(
    lambda cv: struct_strategy(cv[0].SPEC, cv[1]).map(lambda message: (message, cv[1]))
)


@st.composite
def mutated(draw, data: bytes, start: int = 0) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["set", "set", "cut", "insert", "delete"]))
        at = draw(st.integers(start, max(start, len(out) - 1)))
        if kind == "set" and at < len(out):
            out[at] = (
                draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
                if draw(st.booleans())
                else draw(st.integers(0, 255))
            )
        elif kind == "cut":
            del out[at:]
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete":
            del out[at : at + draw(st.integers(1, 4))]
    return bytes(out)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_record_values(data) -> None:
    message, version = data.draw(RANDOM_DATA_RECORD, label="message")
    value = data.draw(mutated(serialize(message, version), start=1), label="value")
    try:
        decoded = deserialize(value)
    except DecodeError:
        return
    # Whatever decodes re-encodes, and the re-encoding is a fixed point (canonical form).
    canonical = serialize(decoded.message, decoded.version)
    assert serialize(deserialize(canonical).message, decoded.version) == canonical


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_batches(data) -> None:
    messages = data.draw(st.lists(RANDOM_DATA_RECORD, min_size=1, max_size=3), label="messages")
    control = data.draw(st.booleans(), label="control")
    if control:
        ctype = data.draw(st.sampled_from(sorted(CONTROL_TYPES)))
        cls = CONTROL_TYPES[ctype]
        message = data.draw(struct_strategy(cls.SPEC, 0))
        message.version = 0  # as Kafka writes them
        body = message.encode(0)
        records = [Record(7, 0, struct.pack(">hh", 0, ctype), body)]
    else:
        records = [Record(7 + i, 0, None, serialize(m, v)) for i, (m, v) in enumerate(messages)]
    raw = encode_batch(records, base_offset=7, attributes=CONTROL_FLAG if control else 0)
    assert len(decode_batch(read_batch(raw))) == len(records)
    out = bytearray(data.draw(mutated(raw, start=CRC_START), label="batch"))
    if len(out) >= HEADER_SIZE:  # keep length and CRC right, so the damage reaches the record parser
        struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
        struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[CRC_START:])))
    try:
        decode_batch(read_batch(bytes(out)))
    except (DecodeError, CorruptBatchError):
        pass
    # The replay's parser (values only, deltas skipped) refuses exactly what the full one refuses, and agrees on
    # what it accepts.
    try:
        batch = read_batch(bytes(out))
    except CorruptBatchError:
        return
    try:
        parsed = [r.value or b"" for r in batch.records()]
    except CorruptBatchError:
        parsed = None
    try:
        values = batch.values()
    except CorruptBatchError:
        values = None
    assert values == parsed


@pytest.mark.parametrize("parse", ["records", "values"])
def test_a_record_that_overruns_its_batch_is_refused_by_both_parsers(parse: str) -> None:
    """A batch whose CRC is right but whose first record claims more bytes than the batch holds: records() and
    values() (the replay's parser) refuse it alike, naming the batch."""
    raw = bytearray(build_batch([(None, b"a" * 100), (None, b"b" * 100)]))
    raw[HEADER_SIZE] = 0x7E  # the first record's length: 63 (zig-zag), shorter than it is
    raw[17:21] = crc32c.crc32c(bytes(raw[CRC_START:])).to_bytes(4, "big")
    batch = read_batch(bytes(raw))
    with pytest.raises(CorruptBatchError, match=r"malformed record|bytes left"):
        getattr(batch, parse)()
