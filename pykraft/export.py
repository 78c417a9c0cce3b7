"""``pykraft export``: copy a node's metadata log for auditing, in Kafka's layout, with a manifest.

    pykraft export --bootstrap-server HOST:PORT[,...] --out DIR    # a running node: its committed prefix
    pykraft export --data-dir NODE_DATA_DIR --out DIR               # a stopped node's directory, offline

``--out`` must be empty or absent (``--force`` clears it first): an export is exactly the files its manifest lists,
and ``pykraft audit`` / ``pykraft log dump`` refuse any other file found beside them.

Online, the node streams every batch below its high watermark at the time of the call (ExportLog): committed
batches never change, so the copy is consistent while the cluster keeps writing. Offline, every valid batch of the
log is copied (the high watermark is not stored on disk, so the manifest says so), with snapshots and the
quorum-state and leader-epoch files. ``manifest.json`` records the cluster and node ids, the high watermark, the
epoch and a SHA-256 per file.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import grpc

from pykraft.cli_common import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    SERVERS,
    add_command_config_argument,
    positive_int,
    server_list,
)
from pykraft.manifest import MANIFEST
from pykraft.security.channels import ClientTls, aio_channel
from pykraft.security.tls import TlsSettings
from quorum.log.batch import LOG_OVERHEAD
from quorum.log.epoch_cache import CHECKPOINT_NAME
from quorum.log.log import METADATA_PARTITION_DIR
from quorum.log.meta_properties import META_PROPERTIES, read_properties
from quorum.log.quorum_state import QUORUM_STATE_NAME
from quorum.log.reader import SNAPSHOT_SUFFIX, Damage, parse_snapshot_name, scan_file
from quorum.log.segment import SUFFIX, segment_name
from quorum.log.snapshots import SnapshotId
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

DEFAULT_SEGMENT_BYTES = 256 * 1024 * 1024


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--bootstrap-server",
        type=server_list,
        metavar=SERVERS,
        help="a running node to export from (the first of the list that answers)",
    )
    src.add_argument("--data-dir", help="a stopped node's data directory (offline export)")
    p.add_argument(
        "--out", required=True, help="an empty or new directory: gets __cluster_metadata-0/ and manifest.json"
    )
    p.add_argument("--force", action="store_true", help="clear a non-empty --out first")
    p.add_argument(
        "--segment-bytes", type=positive_int, default=DEFAULT_SEGMENT_BYTES, help="split the copy into segments"
    )
    p.add_argument(
        "--connect-timeout-ms",
        type=positive_int,
        default=DEFAULT_CONNECT_TIMEOUT_MS,
        metavar="MS",
        help="with --bootstrap-server: give up when none of the servers answers within this time",
    )
    add_command_config_argument(p)


class _SegmentWriter:
    """Writes batches into ``%020d.log`` files of about ``segment_bytes`` each, hashing as it goes."""

    def __init__(self, directory: Path, segment_bytes: int) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.files: dict[str, dict[str, Any]] = {}
        self._file: Any = None
        self._name = ""
        self._hash: Any = None
        self._size = 0
        self.bytes = 0

    def write(self, data: bytes, first_offset: int) -> None:
        pos = 0
        while pos < len(data):
            if self._file is None or self._size >= self.segment_bytes:
                base = int.from_bytes(data[pos : pos + 8], "big", signed=True) if pos else first_offset
                self._roll(base)
            length = int.from_bytes(data[pos + 8 : pos + 12], "big") + LOG_OVERHEAD
            chunk = data[pos : pos + length]
            self._file.write(chunk)
            self._hash.update(chunk)
            self._size += len(chunk)
            self.bytes += len(chunk)
            pos += length

    def write_snapshot(self, name: str, data: bytes) -> None:
        """The next piece of the snapshot the log starts at (it comes first, before any batch)."""
        if SnapshotId.parse(name) is None:
            raise ValueError(f"the node sent a snapshot named {name!r}, not a snapshot file name")
        key = f"{METADATA_PARTITION_DIR}/{name}"
        with (self.dir / name).open("ab") as f:
            f.write(data)
        entry = self.files.setdefault(key, {"bytes": 0, "sha256": hashlib.sha256()})
        entry["bytes"] += len(data)
        entry["sha256"].update(data)
        self.bytes += len(data)

    def _roll(self, base_offset: int) -> None:
        self.close()
        self._name = segment_name(base_offset)
        self._file = (self.dir / self._name).open("wb")
        self._hash = hashlib.sha256()
        self._size = 0

    def close(self) -> None:
        for entry in self.files.values():
            if not isinstance(entry["sha256"], str):
                entry["sha256"] = entry["sha256"].hexdigest()
        if self._file is not None:
            self._file.close()
            self.files[f"{METADATA_PARTITION_DIR}/{self._name}"] = {
                "bytes": self._size,
                "sha256": self._hash.hexdigest(),
            }
            self._file = None


def _progress(copied: int, offset: int, target: int | None, started: float, last: list[float]) -> None:
    now = time.monotonic()
    if now - last[0] >= 1.0:
        last[0] = now
        of = f" of {target:,}" if target is not None else ""
        mb = copied / 1e6
        print(f"  copied {mb:,.1f} MB, up to offset {offset:,}{of} ({mb / (now - started):,.1f} MB/s)", file=sys.stderr)


async def export_online(
    bootstrap: str, out: Path, segment_bytes: int = DEFAULT_SEGMENT_BYTES, tls: ClientTls | None = None
) -> dict[str, Any]:
    log_dir = out / METADATA_PARTITION_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    writer = _SegmentWriter(log_dir, segment_bytes)
    meta: dict[str, Any] = {}
    started = time.monotonic()
    last = [started]
    async with aio_channel(bootstrap, tls, [("grpc.max_receive_message_length", 64 << 20)]) as ch:
        async for chunk in pb_grpc.QuorumAdminStub(ch).ExportLog(pb.ExportLogRequest()):
            if not meta:
                meta = {
                    "cluster_id": chunk.cluster_id,
                    "node_id": chunk.node_id,
                    "high_watermark": chunk.high_watermark,
                    "epoch": chunk.leader_epoch,
                    "log_start_offset": chunk.log_start_offset,
                }
            if chunk.snapshot_name:
                writer.write_snapshot(chunk.snapshot_name, chunk.snapshot_data)
            if chunk.batches:
                writer.write(chunk.batches, chunk.first_offset)
            _progress(writer.bytes, chunk.next_offset, meta["high_watermark"], started, last)
    writer.close()
    return _manifest(out, {**meta, "source": f"online export from {bootstrap}"}, writer.files)


def export_offline(data_dir: Path, out: Path, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> dict[str, Any]:
    src = data_dir / METADATA_PARTITION_DIR if (data_dir / METADATA_PARTITION_DIR).is_dir() else data_dir
    if not any(src.glob("*" + SUFFIX)) and not any(src.glob("*" + SNAPSHOT_SUFFIX)):
        raise FileNotFoundError(f"{src}: no metadata log here (no *.log or *.checkpoint files)")
    log_dir = out / METADATA_PARTITION_DIR
    log_dir.mkdir(parents=True, exist_ok=True)
    writer = _SegmentWriter(log_dir, segment_bytes)
    started = time.monotonic()
    last = [started]
    end_offset = 0
    damage: list[str] = []
    epoch = 0
    for segment in sorted(src.glob("*" + SUFFIX)):
        for item in scan_file(segment):
            if isinstance(item, Damage):
                damage.append(
                    f"{item.path}: {item.bytes_left} unreadable bytes from byte {item.position} ({item.reason})"
                )
                break
            if not item.crc_valid():
                damage.append(f"{segment}: batch at byte {item.position} fails its CRC check; the copy stops before it")
                break
            writer.write(item.buffer, item.base_offset)
            end_offset = item.last_offset + 1
            epoch = item.partition_leader_epoch
            _progress(writer.bytes, end_offset, None, started, last)
        if damage:
            break
    writer.close()
    files = dict(writer.files)
    for extra in [*sorted(src.glob("*" + SNAPSHOT_SUFFIX)), src / QUORUM_STATE_NAME, src / CHECKPOINT_NAME]:
        if extra.exists() and (extra.suffix != SNAPSHOT_SUFFIX or parse_snapshot_name(extra)):
            shutil.copyfile(extra, log_dir / extra.name)
            files[f"{METADATA_PARTITION_DIR}/{extra.name}"] = {
                "bytes": extra.stat().st_size,
                "sha256": hashlib.sha256(extra.read_bytes()).hexdigest(),
            }
    props = read_properties(data_dir / META_PROPERTIES) if (data_dir / META_PROPERTIES).exists() else {}
    meta = {
        "cluster_id": props.get("cluster.id", ""),
        "node_id": int(props.get("node.id", -1)),
        "high_watermark": None,
        "log_end_offset": end_offset,
        "epoch": epoch,
        "source": f"offline export of {data_dir} (the high watermark is not stored on disk: every valid batch copied)",
    }
    if damage:
        meta["damage"] = damage
    return _manifest(out, meta, files)


def _manifest(out: Path, meta: dict[str, Any], files: dict[str, dict[str, Any]]) -> dict[str, Any]:
    manifest = {**meta, "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


class ExportError(Exception):
    """An export that cannot start or finish: one line, exit code 1."""


def prepare_out(out: Path, force: bool, source: Path | None = None) -> None:
    """``--out`` must be a new or empty directory, or (``--force``) one we may clear; never the source itself."""
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out}: exists and is not a directory")
    if source is not None:
        src, dst = source.resolve(), out.resolve()
        if dst == src or src in dst.parents or dst in src.parents:
            raise ExportError(f"--out {out}: overlaps --data-dir {source}; export somewhere else")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ExportError(
                f"--out {out}: not empty; an export must hold only its own files (give --force to clear it first)"
            )
        for entry in out.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    out.mkdir(parents=True, exist_ok=True)
    probe = out / ".pykraft-write-test"
    probe.write_bytes(b"")
    probe.unlink()


async def export_first_answering(
    servers: list[str], out: Path, segment_bytes: int, connect_timeout_s: float, tls: TlsSettings | None = None
) -> dict[str, Any]:
    """Export from the first server that answers (a dead one is skipped before anything is written)."""
    client_tls = ClientTls.of(tls)
    errors = []
    for server in servers:
        try:
            async with aio_channel(server, client_tls) as ch:
                await asyncio.wait_for(ch.channel_ready(), connect_timeout_s / len(servers))
        except (TimeoutError, grpc.aio.AioRpcError) as e:
            errors.append(f"{server}: {type(e).__name__ if isinstance(e, TimeoutError) else e.code().name}")
            continue
        return await export_online(server, out, segment_bytes, client_tls)
    raise ExportError(f"no node reachable at {','.join(servers)} ({'; '.join(errors)})")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        prepare_out(out, args.force, None if args.bootstrap_server else Path(args.data_dir))
        if args.bootstrap_server:
            manifest = asyncio.run(
                export_first_answering(
                    args.bootstrap_server, out, args.segment_bytes, args.connect_timeout_ms / 1000, args.tls
                )
            )
        else:
            manifest = export_offline(Path(args.data_dir), out, args.segment_bytes)
    except ExportError as e:
        print(f"pykraft export: {e}", file=sys.stderr)
        return 1
    except grpc.aio.AioRpcError as e:
        print(
            f"pykraft export: cannot export from {','.join(args.bootstrap_server)}: {e.code().name} ({e.details()})",
            file=sys.stderr,
        )
        return 1
    except OSError as e:
        where = f" {e.filename}:" if e.filename else ""
        print(f"pykraft export:{where} {e.strerror or e}", file=sys.stderr)
        return 1
    total = sum(f["bytes"] for f in manifest["files"].values())
    hw = manifest.get("high_watermark")
    upto = f"offsets below {hw:,}" if hw is not None else f"offsets below {manifest.get('log_end_offset', 0):,}"
    print(f"exported {upto} ({total:,} bytes in {len(manifest['files'])} files) to {out}; manifest.json written")
    for d in manifest.get("damage", []):
        print(f"pykraft export: warning: {d}", file=sys.stderr)
    return 0
