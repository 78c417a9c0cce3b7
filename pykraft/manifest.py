"""An export's ``manifest.json``: what ``pykraft export`` wrote, checked before anything reads the export.

An export directory holds exactly the files its manifest lists, each with its size and SHA-256. ``pykraft audit``
and ``pykraft log dump`` call :func:`verify_export` first: a file the manifest does not list (a stale segment from
an earlier export, say) or one whose bytes changed would turn into false findings, so either is an error naming
the file. A directory without a manifest is not an export (a node's data directory, a Kafka log directory) and is
read as it is.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from quorum.log.log import METADATA_PARTITION_DIR

MANIFEST = "manifest.json"
_HASH_CHUNK = 1 << 20


class ManifestError(Exception):
    """An export that does not match its manifest: one line naming the file."""


def export_root(path: Path) -> Path | None:
    """The export directory ``path`` belongs to (the directory itself, its ``__cluster_metadata-0`` or a file
    in it), or None when no manifest is there."""
    path = path.resolve()
    candidates = [path] if path.is_dir() else []
    candidates += [path.parent, path.parent.parent] if path.is_file() else [path.parent]
    for candidate in candidates:
        if (candidate / MANIFEST).is_file():
            return candidate
    return None


def read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ManifestError(f"{path}: not a readable manifest ({e})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise ManifestError(f'{path}: not a pykraft export manifest (no "files" object)')
    return manifest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_export(path: Path, only: list[Path] | None = None) -> dict[str, Any] | None:
    """The manifest of the export ``path`` is in, after checking the files: every file under the export is
    listed, every listed file is there with its size and SHA-256 (``only``: check just these files, e.g. the one
    segment a dump was asked for). None when ``path`` is not in an export."""
    root = export_root(path)
    if root is None:
        return None
    manifest = read_manifest(root)
    listed: dict[str, dict[str, Any]] = manifest["files"]
    present = {
        p.relative_to(root).as_posix(): p
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != MANIFEST and p.relative_to(root).parts[0] == METADATA_PARTITION_DIR
    }
    check = present if only is None else {p.resolve().relative_to(root).as_posix(): p.resolve() for p in only}
    for name, file in check.items():
        if name not in listed:
            raise ManifestError(f"{file}: file not in manifest {root / MANIFEST} (not part of this export)")
    names = listed if only is None else {n: listed[n] for n in check}
    for name, entry in names.items():
        file = root / name
        if not file.is_file():
            raise ManifestError(f"{file}: listed in {root / MANIFEST} but missing")
        size = file.stat().st_size
        if "bytes" in entry and size != entry["bytes"]:
            raise ManifestError(
                f"{file}: checksum mismatch (the manifest says {entry['bytes']:,} bytes, found {size:,})"
            )
        if entry.get("sha256") != _sha256(file):
            raise ManifestError(f"{file}: checksum mismatch (its SHA-256 is not the manifest's)")
    return manifest


def log_end(manifest: dict[str, Any]) -> int | None:
    """The offset the export ends at: its high watermark (online) or log end offset (offline)."""
    for key in ("high_watermark", "log_end_offset"):
        value = manifest.get(key)
        if isinstance(value, int):
            return value
    return None
