"""The ``pykraft`` command."""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pykraft", description="A KRaft-style metadata quorum in Python.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    log_cmd = commands.add_parser("log", help="inspect metadata log files")
    log_sub = log_cmd.add_subparsers(dest="log_command", required=True, metavar="SUBCOMMAND")
    dump = log_sub.add_parser(
        "dump",
        help="print every batch and record as JSON lines",
        description="Decode a log segment (.log), a snapshot (.checkpoint) or a log directory: one JSON object per "
        "line for each batch and each record (offset, type, version, data).",
    )
    dump.add_argument("path", help="a .log segment, a .checkpoint snapshot, or a (__cluster_metadata-0) directory")
    dump.add_argument("--snapshots", action="store_true", help="with a directory: dump its snapshots too")
    dump.add_argument("--batches-only", action="store_true", help="print batch lines only, no records")

    demo = commands.add_parser("demo", help="append a small demo epoch to a metadata log, written by the real writer")
    demo.add_argument("--data-dir", default="./data", help="directory holding __cluster_metadata-0 (default ./data)")

    args = parser.parse_args(argv)
    try:
        if args.command == "log":
            from pykraft.dump import run_dump

            return run_dump(args.path, snapshots=args.snapshots, records=not args.batches_only)
        if args.command == "demo":
            from pykraft.demo import write_demo_log
            from pykraft.logs import configure_logging

            configure_logging()
            directory, first, end = write_demo_log(args.data_dir)
            print(f"wrote offsets {first}..{end - 1} to {directory}", file=sys.stderr)
            return 0
    except BrokenPipeError:
        # `pykraft log dump … | head`: the reader left; that is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
