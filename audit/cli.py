"""``pykraft audit LOG_DIR --out OUT [--master URL] [--as-of-offset N] [--from-start]``."""

from __future__ import annotations

import argparse
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log_dir", help="an exported __cluster_metadata-0 directory (or its parent)")
    p.add_argument("--out", required=True, help="where the Parquet tables and report.html go")
    p.add_argument("--master", default="local[*]", help="Spark master (default local[*]; e.g. spark://host:7077)")
    p.add_argument("--as-of-offset", type=int, help="rebuild the state as of this offset (inclusive)")
    p.add_argument("--from-start", action="store_true", help="read every segment, not the newest snapshot + tail")


def run(args: argparse.Namespace) -> int:
    try:
        from audit.source import AuditInputError, select_files
    except ImportError as e:  # the audit extra is not installed
        print(f"pykraft audit: needs the audit extra (pip install 'pykraft[audit]'): {e}", file=sys.stderr)
        return 1
    try:
        select_files(args.log_dir, args.from_start)  # a bad path fails here, before Spark starts
        from audit.job import run_audit
        from audit.spark import spark_session

        spark = spark_session(args.master)
        try:
            result = run_audit(
                spark, args.log_dir, args.out, as_of_offset=args.as_of_offset, from_start=args.from_start
            )
        finally:
            spark.stop()
    except AuditInputError as e:
        print(f"pykraft audit: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # Spark errors arrive wrapped in Java exceptions: one line, not the stack
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"pykraft audit: failed: {first}", file=sys.stderr)
        return 1
    print(result.text())
    return 1 if result.violations else 0
