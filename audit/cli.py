"""``pykraft audit LOG_DIR --out OUT [--master URL] [--as-of-offset N] [--from-start] [--verbose]``.

Everything that can be wrong with the command line is found before Spark starts: the input (an export is checked
against its manifest: no file it does not list, every listed file with its SHA-256), ``--as-of-offset`` against
the log's end, and ``--out``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pykraft.manifest import ManifestError, log_end, verify_export


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log_dir", help="an exported __cluster_metadata-0 directory (or its parent)")
    p.add_argument("--out", required=True, help="where the Parquet tables and report.html go")
    p.add_argument("--master", default="local[*]", help="Spark master, e.g. spark://host:7077")
    p.add_argument("--as-of-offset", type=int, help="rebuild the state as of this offset (inclusive)")
    p.add_argument("--from-start", action="store_true", help="read every segment, not the newest snapshot + tail")
    p.add_argument("--verbose", action="store_true", help="show Spark's own start-up and log lines")


class Refused(Exception):
    """A command line the audit cannot run: one line, exit code 1, before Spark starts."""


def last_offset(files: list[Path]) -> int | None:
    """The last offset of the log the audit would read: its last batch (or the snapshot's end, without a log)."""
    from quorum.log.reader import Damage, parse_snapshot_name, scan_file

    last = None
    for path in reversed(files):
        snapshot = parse_snapshot_name(path)
        if snapshot is not None:
            return max(last if last is not None else -1, snapshot[0] - 1)
        for item in scan_file(path):
            if not isinstance(item, Damage):
                last = item.last_offset
        if last is not None:
            return last
    return last


def check_out(out: Path, log_dir: Path) -> None:
    if out.exists() and not out.is_dir():
        raise Refused(f"--out {out}: exists and is not a directory")
    from quorum.log.log import METADATA_PARTITION_DIR

    source = log_dir.resolve()
    if (source / METADATA_PARTITION_DIR).is_dir():
        source = source / METADATA_PARTITION_DIR
    elif source.is_file():
        source = source.parent
    resolved = out.resolve()
    if resolved == source or source in resolved.parents:
        raise Refused(f"--out {out}: inside the log directory {log_dir}; write the audit somewhere else")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".pykraft-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise Refused(f"--out {out}: {e.strerror or e}") from None


def check_as_of(as_of: int | None, files: list[Path], manifest: dict | None) -> None:
    if as_of is None:
        return
    if as_of < 0:
        raise Refused(f"--as-of-offset {as_of}: must be 0 or more")
    end = log_end(manifest) if manifest else None
    last = end - 1 if end is not None else last_offset(files)
    if last is None or as_of > last:
        where = "the log is empty" if last is None or last < 0 else f"its last offset is {last:,}"
        raise Refused(f"--as-of-offset {as_of:,}: beyond the end of the log ({where})")


def run(args: argparse.Namespace) -> int:
    try:
        from audit.source import AuditInputError, select_files
    except ImportError as e:  # the audit extra is not installed
        print(f"pykraft audit: needs the audit extra (pip install 'pykraft[audit]'): {e}", file=sys.stderr)
        return 1
    log_dir, out = Path(args.log_dir), Path(args.out)
    started = time.monotonic()

    def progress(line: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {line}", file=sys.stderr, flush=True)

    try:
        manifest = verify_export(log_dir)
        files = select_files(log_dir, args.from_start)  # a bad path fails here, before Spark starts
        check_as_of(args.as_of_offset, files, manifest)
        check_out(out, log_dir)
        from audit.job import run_audit
        from audit.spark import spark_session

        progress("starting Spark" + ("" if args.verbose else " (--verbose shows its log)"))
        spark = spark_session(args.master, verbose=args.verbose)
        try:
            result = run_audit(
                spark,
                args.log_dir,
                args.out,
                as_of_offset=args.as_of_offset,
                from_start=args.from_start,
                manifest=manifest,
                progress=progress,
            )
        finally:
            spark.stop()
    except (AuditInputError, ManifestError, Refused) as e:
        print(f"pykraft audit: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f" {e.filename}:" if e.filename else ""
        print(f"pykraft audit:{where} {e.strerror or e}", file=sys.stderr)
        return 1
    except Exception as e:  # Spark errors arrive wrapped in Java exceptions: one line, not the stack
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"pykraft audit: failed: {first}", file=sys.stderr)
        return 1
    print(result.text())
    return 1 if result.violations else 0
