"""``pykraft log dump``: every batch and record of a metadata log segment, snapshot or log directory as JSON
lines — pykraft's ``kafka-dump-log --cluster-metadata-decoder``.

Lines come in file order: one ``{"file": …}`` line per file, one line per batch (``baseOffset``, ``lastOffset``,
``epoch``, ``count``, ``crcValid``, ``isControl``, …) and, after it, one line per record with ``offset``, ``type``
(the schema name, e.g. ``"TopicRecord"``), ``version`` and ``data`` (the fields, named as Kafka's JSON does).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from controller.records import DecodeError, decode_record
from pykraft.manifest import ManifestError, verify_export
from quorum.log.batch import CorruptBatchError, RecordBatch
from quorum.log.log import METADATA_PARTITION_DIR
from quorum.log.reader import Damage, is_snapshot, parse_snapshot_name, scan_file
from quorum.log.segment import SUFFIX


class DumpError(Exception):
    """A path that cannot be dumped at all: reported as one line, exit code 1."""


@dataclass
class DumpSummary:
    files: int = 0
    batches: int = 0
    records: int = 0
    bad_crc: int = 0
    undecodable: int = 0
    damage: list[Damage] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.bad_crc or self.undecodable or self.damage)


def files_to_dump(path: Path, *, snapshots: bool = False) -> list[Path]:
    if not path.exists():
        raise DumpError(f"{path}: no such file or directory")
    if path.is_file():
        return [path]
    if (path / METADATA_PARTITION_DIR).is_dir():
        path = path / METADATA_PARTITION_DIR
    segments = sorted(path.glob("*" + SUFFIX))
    checkpoints = sorted(p for p in path.glob("*.checkpoint") if parse_snapshot_name(p) is not None)
    chosen = segments + checkpoints if snapshots or not segments else segments
    if not chosen:
        raise DumpError(f"{path}: no log segments (*.log) or snapshots (*.checkpoint) here")
    return chosen


def dump_lines(files: list[Path], summary: DumpSummary, *, records: bool = True) -> Iterator[dict[str, Any]]:
    for path in files:
        summary.files += 1
        head: dict[str, Any] = {"file": str(path)}
        snap = parse_snapshot_name(path) if is_snapshot(path) else None
        if snap:
            head.update(kind="snapshot", endOffset=snap[0], epoch=snap[1])
        else:
            head["kind"] = "snapshot" if is_snapshot(path) else "segment"
        first = True
        try:
            for item in scan_file(path):
                if isinstance(item, Damage):
                    if first:
                        raise DumpError(
                            f"{path} is not a metadata log: corrupt batch at byte {item.position}: {item.reason}"
                        )
                    summary.damage.append(item)
                    yield {
                        "error": item.reason,
                        "file": item.path,
                        "position": item.position,
                        "invalidBytes": item.bytes_left,
                    }
                    break
                if first:
                    yield head
                    first = False
                yield from _batch_lines(item, str(path), summary, records)
            if first:
                yield head  # an empty (or never written) file still gets its line
        except OSError as e:
            raise DumpError(f"{path}: {e.strerror or e}") from None


def _batch_lines(batch: RecordBatch, path: str, summary: DumpSummary, records: bool) -> Iterator[dict[str, Any]]:
    summary.batches += 1
    crc_ok = batch.crc_valid()
    summary.bad_crc += not crc_ok
    yield {
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "count": batch.record_count,
        "epoch": batch.partition_leader_epoch,
        "isControl": batch.is_control,
        "isTransactional": batch.is_transactional,
        "crcValid": crc_ok,
        "crc": batch.crc,
        "position": batch.position,
        "size": batch.size,
        "createTime": batch.base_timestamp,
        "maxTimestamp": batch.max_timestamp,
        "magic": 2,
        "compression": batch.compression,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "baseSequence": batch.base_sequence,
    }
    if not records:
        return
    try:
        raw = batch.records(path)
    except CorruptBatchError as e:
        summary.undecodable += 1
        yield {"error": e.reason, "file": path, "position": batch.position, "baseOffset": batch.base_offset}
        return
    for rec in raw:
        try:
            decoded = decode_record(rec, batch.is_control)
        except DecodeError as e:
            # An unknown or malformed record spoils only its own line: say which, show its bytes, go on.
            summary.undecodable += 1
            value = None if rec.value is None else rec.value.hex()
            yield {"offset": rec.offset, "type": None, "error": str(e), "value": value}
            continue
        summary.records += 1
        line: dict[str, Any] = {"offset": rec.offset, "type": decoded.type, "version": decoded.version}
        if decoded.control_type is not None:
            line["controlType"] = decoded.control_type
        message = decoded.message
        line["data"] = message.to_json(decoded.version) if message is not None else None
        yield line


def run_dump(path: str, *, snapshots: bool = False, records: bool = True, out: TextIO | None = None) -> int:
    """The command: print the lines (to ``out``, default the current ``sys.stdout``), then a summary on stderr if
    anything was wrong. Returns the exit code."""
    if out is None:
        out = sys.stdout  # looked up per call: a default bound at import would outlive a redirected stdout
    summary = DumpSummary()
    try:
        # An export is read only as its manifest lists it: a stale, altered or missing file is an error, not output.
        verify_export(Path(path), only=[Path(path)] if Path(path).is_file() else None)
        files = files_to_dump(Path(path), snapshots=snapshots)
        for line in dump_lines(files, summary, records=records):
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
    except (DumpError, ManifestError) as e:
        print(f"pykraft: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # the reader left (`| head`): the command handles that, it is not an error
    except OSError as e:
        where = f" {e.filename}:" if e.filename else ""
        print(f"pykraft:{where} {e.strerror or e}", file=sys.stderr)
        return 1
    if summary.clean:
        return 0
    problems = []
    if summary.bad_crc:
        problems.append(f"{summary.bad_crc} batches with a bad CRC")
    if summary.undecodable:
        problems.append(f"{summary.undecodable} undecodable records")
    for d in summary.damage:
        problems.append(f"{d.bytes_left} unreadable bytes at the end of {d.path} (from byte {d.position}: {d.reason})")
    print("pykraft: " + "; ".join(problems), file=sys.stderr)
    return 1
