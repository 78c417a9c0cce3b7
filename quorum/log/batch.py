"""Kafka's RecordBatch v2 (magic 2), the unit of every append to the metadata log.

Layout (big-endian; Kafka's DefaultRecordBatch, described in docs/log-format.md)::

    0 baseOffset int64 | 8 batchLength int32 (bytes after this field) | 12 partitionLeaderEpoch int32 (Raft epoch)
    16 magic int8 = 2 | 17 crc uint32 = CRC-32C of bytes [21, end) | 21 attributes int16 | 23 lastOffsetDelta int32
    27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16
    53 baseSequence int32 | 57 recordsCount int32 | 61 records...

A record: ``length varint`` (bytes after itself), ``attributes int8``, ``timestampDelta varlong``, ``offsetDelta
varint``, ``key`` and ``value`` (varint length, -1 = null), ``headers`` (varint count, then key/value pairs).

Base offset and leader epoch sit outside the CRC, so the log can stamp them on a batch built elsewhere.
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import crc32c

from quorum.log.varint import read_varint, varint

MAGIC = 2
HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61: Kafka's RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12  # baseOffset + batchLength
CRC_START = 21
MAX_BATCH_SIZE = 8 * 1024 * 1024  # Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES

CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10
COMPRESSION_MASK = 0x07
COMPRESSION_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

_OFFSET_AND_LENGTH = struct.Struct(">qi")
_ZIGZAG = [varint(i) for i in range(1 << 14)]  # zig-zag varints of 0..16383, for building records fast
_EPOCH = struct.Struct(">i")
_BASE_OFFSET = struct.Struct(">q")


class CorruptBatchError(ValueError):
    """A batch that fails validation. Says which file, which byte and what is wrong."""

    def __init__(self, path: str | None, position: int, reason: str) -> None:
        self.path = path
        self.position = position
        self.reason = reason
        super().__init__(f"{path or '<buffer>'}: corrupt batch at byte {position}: {reason}")


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class RecordBatch:
    """A validated batch header over the batch's bytes; records are parsed on demand."""

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "buffer",
        "crc",
        "last_offset_delta",
        "max_timestamp",
        "partition_leader_epoch",
        "position",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    def __init__(self, buffer: bytes, position: int = 0) -> None:
        (
            self.base_offset,
            _length,
            self.partition_leader_epoch,
            _magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = HEADER.unpack_from(buffer)
        self.buffer = buffer
        self.position = position

    @property
    def epoch(self) -> int:
        return self.partition_leader_epoch

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        return len(self.buffer)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def compression(self) -> str:
        return COMPRESSION_NAMES.get(self.attributes & COMPRESSION_MASK, "unknown")

    def crc_valid(self) -> bool:
        return crc32c.crc32c(memoryview(self.buffer)[CRC_START:]) == self.crc

    def records(self, path: str | None = None) -> list[Record]:
        """Parse the records; raises :class:`CorruptBatchError` if they do not fill the batch exactly."""
        return self._parse(path, values_only=False)

    def values(self, path: str | None = None) -> list[bytes]:
        """The records' values only (null as b""), checked as :meth:`records` checks them: a snapshot load's and a
        standby's replay take nothing else, and a Record tuple per record cost them ~10% of a load."""
        return self._parse(path, values_only=True)

    def _parse(self, path: str | None, values_only: bool) -> list[Any]:
        data, pos = self._record_bytes(path)
        try:
            if values_only:
                records, pos = _parse_values(data, pos, self.record_count)
            else:
                records, pos = _parse_records(data, pos, self.record_count, self.base_offset, self.base_timestamp)
        except (IndexError, ValueError, UnicodeDecodeError) as e:
            raise CorruptBatchError(path, self.position, f"malformed record: {e}") from None
        if pos != len(data):
            raise CorruptBatchError(
                path, self.position, f"{len(data) - pos} bytes left after {self.record_count} records"
            )
        return records

    def _record_bytes(self, path: str | None) -> tuple[bytes, int]:
        codec = self.attributes & COMPRESSION_MASK
        if codec == 0:
            return self.buffer, HEADER_SIZE
        if codec == 1:  # gzip; Kafka's KRaft never compresses, but a hand-made log might
            try:
                return zlib.decompress(self.buffer[HEADER_SIZE:], 16 + zlib.MAX_WBITS), 0
            except zlib.error as e:
                raise CorruptBatchError(path, self.position, f"gzip data does not decompress: {e}") from None
        name = COMPRESSION_NAMES.get(codec, f"codec {codec}")
        raise CorruptBatchError(path, self.position, f"{name}-compressed batches are not supported")

    def with_offset(self, base_offset: int, epoch: int | None = None) -> bytes:
        """These bytes with a new base offset (and epoch); the CRC does not cover either."""
        out = bytearray(self.buffer)
        _BASE_OFFSET.pack_into(out, 0, base_offset)
        if epoch is not None:
            _EPOCH.pack_into(out, 12, epoch)
        return bytes(out)

    def __repr__(self) -> str:
        kind = "control" if self.is_control else "data"
        return (
            f"RecordBatch({kind}, offsets {self.base_offset}-{self.last_offset}, epoch {self.partition_leader_epoch}, "
            f"{self.record_count} records, {self.size} bytes)"
        )


def _parse_records(data: bytes, pos: int, count: int, base_offset: int, base_ts: int) -> tuple[list[Record], int]:
    """The records, checked to fill their lengths exactly."""
    # Hot loop: zig-zag varints are read inline when they fit one byte (KRaft's attributes, timestamp deltas, null
    # key and empty headers always do) or, for lengths and offset deltas, two; read_varint otherwise.
    rv = read_varint
    new = tuple.__new__
    out = []
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:  # 64..8191 bytes: most metadata records
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            length = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            length, pos = rv(data, pos)
        end = pos + length
        if length < 0 or end > len(data):
            raise ValueError(f"record length {length} runs past the batch")
        b = data[pos + 1]  # skip attributes (unused, always 0)
        if b < 0x80:
            ts_delta = (b >> 1) ^ -(b & 1)
            pos += 2
        else:
            ts_delta, pos = rv(data, pos + 1)
        b = data[pos]
        if b < 0x80:
            offset_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:  # the 65th to the 4096th record of a batch (a snapshot's hold thousands)
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            offset_delta = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            offset_delta, pos = rv(data, pos)
        if data[pos] == 1:  # null key
            key = None
            pos += 1
        else:
            klen, pos = rv(data, pos)
            if klen < 0:
                raise ValueError(f"negative key length {klen}")
            key = data[pos : pos + klen]
            pos += klen
        b = data[pos]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            pos += 1
        elif data[pos + 1] < 0x80:  # values of 64..8191 bytes: most metadata records
            raw = (b & 0x7F) | (data[pos + 1] << 7)
            vlen = (raw >> 1) ^ -(raw & 1)
            pos += 2
        else:
            vlen, pos = rv(data, pos)
        if vlen < 0:
            value = None
        else:
            value = data[pos : pos + vlen]
            pos += vlen
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if data[pos] == 0:
            pos += 1
        else:
            headers, pos = _parse_headers(data, pos)
        if pos != end:
            raise ValueError(
                f"record at offset delta {offset_delta} has length {length} but holds {length + pos - end}"
            )
        out.append(new(Record, (base_offset + offset_delta, base_ts + ts_delta, key, value, headers)))
    return out, pos


def _parse_values(data: bytes, pos: int, count: int) -> tuple[list[bytes], int]:
    """The records' values (b"" for null), checked as :func:`_parse_records` checks them: what a metadata listener
    replays. The timestamp and offset deltas are skipped, not decoded (-20% of the parse of a 2M-partition
    snapshot, measured here). Its varint reads are inlined as :func:`_parse_records`' are, on purpose: a helper
    call per field would cost what the inlining saves.

    Records framed exactly as the one before them (the same length, timestamp delta, key and value length, an
    offset delta as wide, no headers: a snapshot's PartitionRecords, a CreateTopics' in a batch) are checked a run
    at a time by a regular expression built from that record (:func:`_run_of`), and their values sliced at once.
    Records framed as any of the last few such records, mixed (a broker's image after ISR changes: ISRs of two and
    three interleaved), are checked by one pattern with an alternative per framing, their values its groups."""
    rv = read_varint
    out: list[bytes] = []
    append = out.append
    size = len(data)
    following = look_at = misses = 0  # the record after the last run; the next to look for one after; misses since
    templates: dict[_Template, None] = {}  # the framings of the records a run was last looked for after, oldest first
    while following < count:  # a record at a time (a for loop: cheaper per record than this while) to a run
        for i in range(following, count):
            first = pos
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = rv(data, pos)
            end = pos + length
            if length < 0 or end > size:
                raise ValueError(f"record length {length} runs past the batch")
            # The attributes byte (unused), then the timestamp delta (one byte in KRaft's batches) and the offset
            # delta.
            pos = pos + 2 if data[pos + 1] < 0x80 else rv(data, pos + 1)[1]
            b = data[pos]
            if b < 0x80:
                pos += 1
            elif data[pos + 1] < 0x80:
                pos += 2
            else:
                pos = rv(data, pos)[1]
            if data[pos] == 1:  # null key
                pos += 1
            else:
                klen, pos = rv(data, pos)
                if klen < 0:
                    raise ValueError(f"negative key length {klen}")
                pos += klen
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                vlen = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                vlen, pos = rv(data, pos)
            if vlen < 0:
                value = b""
            else:
                value = data[pos : pos + vlen]
                pos += vlen
            if data[pos] == 0:  # no headers
                pos += 1
            else:
                pos = _parse_headers(data, pos)[1]
            if pos != end:
                raise ValueError(f"record {i} of the batch has length {length} but holds {length + pos - end}")
            append(value)
            # The records after this one framed as it is, or as the last few records a run was looked for after
            # (a broker's image after ISR changes interleaves two sizes): take the run. Looking costs ~0.2 us and
            # a short run more than it saves: after misses, ever more records go the per-record way unlooked at.
            if i < look_at:
                continue
            if i + 1 == count or vlen <= 0 or data[end - 1] != 0:
                misses += 1
                look_at = i + 1 + (AFTER_MISS << min(misses, MISSES_COUNTED))
                continue
            delta, after_delta = _delta_at(data, first)
            template = (data[first:delta], after_delta - delta, data[after_delta : end - 1 - vlen], vlen)
            if template not in templates:
                templates[template] = None
                if len(templates) > MAX_TEMPLATES:
                    del templates[next(iter(templates))]
            n = 0
            # The framing of the next record, if it is one of these: its run, its values a stride apart.
            framing = next((t for t in templates if data.startswith(t[0], end)), None)
            single = None if framing is None else _run_of((framing,))
            if single is not None and (matched := single.pattern.match(data, end)) is not None:
                stride, width = single.strides[0], framing[3]
                n = min((matched.end() - end) // stride, count - i - 1)  # the records after the count are not ours
                if n >= SHORT_RUN or len(templates) == 1:
                    value_at = end + stride - 1 - width
                    out += [data[v : v + width] for v in range(value_at, value_at + n * stride, stride)]
                    pos = end + n * stride
                else:
                    n = 0
            if (
                not n
                and len(templates) > 1
                and (matched := (run := _run_of(tuple(sorted(templates)))).pattern.match(data, end))
            ):
                # Records of these framings mixed: each value is the group of its framing's alternative.
                found = run.values.findall(data, end, matched.end())
                n = count - i - 1
                if len(found) > n:
                    del found[n:]
                    pos = end + sum(run.strides[list(map(bool, groups)).index(True)] for groups in found)
                else:
                    n, pos = len(found), matched.end()
                out += _VALUES_OF_GROUPS[len(templates)](found)
            if n < SHORT_RUN:
                misses += 1
                look_at = i + 1 + n + (AFTER_MISS << min(misses, MISSES_COUNTED))
            else:
                misses = 0
            if n:
                following = i + 1 + n
                break
        else:
            break  # every record read
    return out, pos


# A run shorter than SHORT_RUN records is a miss, as a record whose next one is framed otherwise; after the k-th miss
# in a row, the next AFTER_MISS * 2**k records (k at most MISSES_COUNTED) go the per-record way unlooked at.
SHORT_RUN = 8
AFTER_MISS = 2
MISSES_COUNTED = 7
MAX_TEMPLATES = 4  # framings one run may mix
# A record's framing: its length, attributes and timestamp delta (bytes); its offset delta's width; its key and value
# length (bytes); its value's length.
_Template = tuple[bytes, int, bytes, int]
_DELTA_SHAPES = {1: rb"[\x00-\x7f]", 2: rb"[\x80-\xff][\x00-\x7f]", 3: rb"[\x80-\xff]{2}[\x00-\x7f]"}


class _Run(NamedTuple):
    pattern: re.Pattern[bytes]  # one or more records, each framed as one of the templates
    values: re.Pattern[bytes] | None  # one record, a group per template around its value; None for one template
    strides: tuple[int, ...]  # each template's record size, length included


_RUNS: dict[tuple[_Template, ...], _Run] = {}
# The value in each match's groups, of which one is the value and the others b"" (a comprehension: ~20 ns a record,
# where map(b"".join, ...) took ~130).
_VALUES_OF_GROUPS: dict[int, Callable[[list[tuple[bytes, ...]]], list[bytes]]] = {
    2: lambda found: [a or b for a, b in found],
    3: lambda found: [a or b or c for a, b, c in found],
    4: lambda found: [a or b or c or d for a, b, c, d in found],
}


def _delta_at(data: bytes, record: int) -> tuple[int, int]:
    """Where the offset delta of the (well-formed) record at ``record`` starts and ends."""
    pos = read_varint(data, record)[1]  # the length
    pos = read_varint(data, pos + 1)[1]  # the attributes, the timestamp delta
    return pos, read_varint(data, pos)[1]


def _run_of(templates: tuple[_Template, ...]) -> _Run:
    """Patterns matching records framed as given ones: each ``(head, delta_width, key_and_length, vlen)`` is a
    record's length, attributes and timestamp delta, any offset delta of ``delta_width`` bytes, its key and value
    length, ``vlen`` bytes of value, no headers. A record they match is one :func:`_parse_values` would read to the
    same end, its value where the pattern puts it. A record's head holds its length, so the framings that match at a
    place all end where it ends: the records are cut as the per-record reading cuts them."""
    run = _RUNS.get(templates)
    if run is None:

        def one(head: bytes, width: int, key_and_length: bytes, vlen: int, value: bytes) -> bytes:
            shape = _DELTA_SHAPES.get(width, rb"(?!)")  # wider deltas (never in a batch): no run
            return re.escape(head) + shape + re.escape(key_and_length) + value % vlen + rb"\x00"

        plain = b"|".join(one(*t, rb".{%d}") for t in templates)
        grouped = b"|".join(one(*t, rb"(.{%d})") for t in templates)
        run = _Run(
            re.compile(rb"(?:" + plain + rb")+", re.DOTALL),
            re.compile(grouped, re.DOTALL) if len(templates) > 1 else None,
            tuple(
                len(head) + width + len(key_and_length) + vlen + 1 for head, width, key_and_length, vlen in templates
            ),
        )
        if len(_RUNS) >= 1024:
            _RUNS.clear()
        _RUNS[templates] = run
    return run


def _parse_headers(data: bytes, pos: int) -> tuple[tuple[tuple[str, bytes | None], ...], int]:
    count, pos = read_varint(data, pos)
    if count < 0:
        raise ValueError(f"negative header count {count}")
    headers = []
    for _ in range(count):
        klen, pos = read_varint(data, pos)
        if klen < 0:
            raise ValueError("a header key is null")
        key = str(data[pos : pos + klen], "utf-8")
        pos += klen
        vlen, pos = read_varint(data, pos)
        if vlen < 0:
            headers.append((key, None))
        else:
            headers.append((key, data[pos : pos + vlen]))
            pos += vlen
    return tuple(headers), pos


def read_batch(
    buf: bytes, pos: int = 0, *, path: str | None = None, file_position: int | None = None, check_crc: bool = True
) -> RecordBatch:
    """Validate and return the batch starting at ``buf[pos]``.

    ``file_position`` is where ``buf[pos]`` lies in the file, for error messages (default ``pos``).
    Raises :class:`CorruptBatchError` on a short buffer, a bad length, a wrong magic or (unless ``check_crc`` is
    off, for tools that report bad CRCs and go on) a CRC mismatch.
    """
    where = pos if file_position is None else file_position
    available = len(buf) - pos
    if available < HEADER_SIZE:
        raise CorruptBatchError(path, where, f"only {available} bytes left, a batch header needs {HEADER_SIZE}")
    _, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    size = length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise CorruptBatchError(path, where, f"batch length {length} is smaller than a batch header")
    if size > available:
        raise CorruptBatchError(path, where, f"batch length {length} runs past the end ({available} bytes left)")
    magic = buf[pos + 16]
    if magic != MAGIC:
        raise CorruptBatchError(path, where, f"magic byte is {magic}, expected {MAGIC}")
    data = buf[pos : pos + size] if pos or size != len(buf) else buf
    batch = RecordBatch(bytes(data), where)
    if check_crc:
        actual = crc32c.crc32c(memoryview(batch.buffer)[CRC_START:])
        if actual != batch.crc:
            raise CorruptBatchError(path, where, f"CRC-32C mismatch: stored {batch.crc:#010x}, computed {actual:#010x}")
    if batch.last_offset_delta < 0 or batch.record_count < 0:
        raise CorruptBatchError(path, where, f"negative record count {batch.record_count}")
    return batch


def iter_batches(buf: bytes, *, path: str | None = None, base_position: int = 0) -> Iterator[RecordBatch]:
    """Every batch in ``buf``, in order; raises :class:`CorruptBatchError` at the first bad one."""
    pos = 0
    while pos < len(buf):
        batch = read_batch(buf, pos, path=path, file_position=base_position + pos)
        yield batch
        pos += batch.size


def build_batch(
    records: Sequence[tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    epoch: int = 0,
    timestamp: int = 0,
    control: bool = False,
) -> bytes:
    """A batch as KRaft writes it: CreateTime, one timestamp, no producer, no compression, no headers.

    ``records`` are ``(key, value)`` pairs; data records have key None, control records a 4-byte key.
    """
    if not records:
        raise ValueError("a batch holds at least one record")
    body = bytearray()
    zz = _ZIGZAG
    small = len(zz)
    for delta, (key, value) in enumerate(records):
        # attributes 0, timestampDelta 0, offsetDelta, key, value, no headers. Lengths come from a table of
        # ready-made zig-zag varints: most are small, and this loop is the leader's per-record cost.
        head = zz[delta] if delta < small else varint(delta)
        if key is None:
            key_part = b"\x01"
        else:
            key_part = (zz[len(key)] if len(key) < small else varint(len(key))) + key
        if value is None:
            value_len = b"\x01"
            value = b""
        else:
            value_len = zz[len(value)] if len(value) < small else varint(len(value))
        size = 3 + len(head) + len(key_part) + len(value_len) + len(value)
        body += zz[size] if size < small else varint(size)
        body += b"\x00\x00"
        body += head
        body += key_part
        body += value_len
        body += value
        body += b"\x00"
    return _finish(body, len(records), base_offset, epoch, timestamp, CONTROL_FLAG if control else 0)


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int,
    epoch: int = 0,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A general (uncompressed) batch, for tests and tools: any keys, values, headers and timestamps.

    Records' offsets must start at ``base_offset``; their deltas may have gaps (compacted logs do).
    """
    if not records:
        raise ValueError("a batch holds at least one record")
    if attributes & COMPRESSION_MASK:
        raise ValueError("encode_batch writes uncompressed batches only")
    base_ts = records[0].timestamp
    body = bytearray()
    for r in records:
        rec = bytearray(b"\x00")
        rec += varint(r.timestamp - base_ts)
        rec += varint(r.offset - base_offset)
        for part in (r.key, r.value):
            if part is None:
                rec += b"\x01"
            else:
                rec += varint(len(part))
                rec += part
        rec += varint(len(r.headers))
        for hkey, hval in r.headers:
            kb = hkey.encode()
            rec += varint(len(kb))
            rec += kb
            if hval is None:
                rec += b"\x01"
            else:
                rec += varint(len(hval))
                rec += hval
        body += varint(len(rec))
        body += rec
    max_ts = max(r.timestamp for r in records)
    last_delta = records[-1].offset - base_offset
    return _finish(
        body,
        len(records),
        base_offset,
        epoch,
        base_ts,
        attributes,
        last_delta,
        max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
    )


def _finish(
    body: bytes | bytearray,
    count: int,
    base_offset: int,
    epoch: int,
    timestamp: int,
    attributes: int,
    last_delta: int | None = None,
    max_ts: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    out = bytearray(HEADER_SIZE)
    out += body
    HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        epoch,
        MAGIC,
        0,
        attributes,
        count - 1 if last_delta is None else last_delta,
        timestamp,
        timestamp if max_ts is None else max_ts,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    )
    struct.pack_into(">I", out, 17, crc32c.crc32c(memoryview(out)[CRC_START:]))
    return bytes(out)
