"""The ``pykraft`` command."""

from __future__ import annotations

import argparse
import os
import sys

from pykraft.cli_common import OneLineErrorParser


def build_parser() -> argparse.ArgumentParser:
    """The ``pykraft`` argument parser, every subcommand included (tests parse command lines with it)."""
    parser = argparse.ArgumentParser(prog="pykraft", description="A KRaft-style metadata quorum in Python.")
    # Every command's usage errors are one line and exit code 2 (no usage dump, never a traceback).
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=OneLineErrorParser)

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

    node = commands.add_parser("node", help="run one controller node (Raft voter)")
    from pykraft.node import add_node_arguments

    add_node_arguments(node)

    quorum_cmd = commands.add_parser("quorum", help="inspect a running quorum")
    quorum_sub = quorum_cmd.add_subparsers(dest="quorum_command", required=True, metavar="SUBCOMMAND")
    qdesc = quorum_sub.add_parser("describe", help="leader, epoch, high watermark and each voter's lag")
    qdesc.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="any node of the quorum")
    qdesc.add_argument("--output", choices=("text", "json"), default="text")

    snapshot = commands.add_parser("snapshot", help="take metadata snapshots (before maintenance, say)")
    snapshot_sub = snapshot.add_subparsers(dest="snapshot_command", required=True, metavar="SUBCOMMAND")
    screate = snapshot_sub.add_parser(
        "create", help="each listed node snapshots its own committed state now; prints the snapshot ids"
    )
    screate.add_argument(
        "--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]", help="the nodes (controllers or brokers)"
    )
    screate.add_argument("--timeout-ms", type=int, default=120_000, help="how long each node may take")

    topics = commands.add_parser(
        "topics", help="create, alter, delete, describe and list topics (like kafka-topics.sh)"
    )
    from pykraft import topics_cli

    topics_cli.add_arguments(topics)

    election = commands.add_parser(
        "leader-election", help="preferred or unclean leader elections (like kafka-leader-election.sh)"
    )
    from pykraft import election_cli

    election_cli.add_arguments(election)

    configs = commands.add_parser("configs", help="describe and alter topic and broker configs (like kafka-configs.sh)")
    from pykraft import configs_cli

    configs_cli.add_arguments(configs)

    reassign = commands.add_parser(
        "reassign-partitions", help="move partitions between brokers (like kafka-reassign-partitions.sh)"
    )
    from pykraft import reassign_cli

    reassign_cli.add_arguments(reassign)

    broker = commands.add_parser("broker", help="run a broker agent: registers, heartbeats, controlled shutdown")
    from pykraft import broker as broker_mod

    broker_mod.add_arguments(broker)

    cluster = commands.add_parser("cluster", help="a local cluster: up, down, describe, bootstrap")
    from pykraft import cluster as cluster_mod

    cluster_mod.add_arguments(cluster)

    export = commands.add_parser("export", help="copy a node's committed metadata log (with a manifest) for auditing")
    from pykraft import export as export_mod

    export_mod.add_arguments(export)

    audit = commands.add_parser("audit", help="audit an exported metadata log with Spark (Parquet + report.html)")
    from audit import cli as audit_cli

    audit_cli.add_arguments(audit)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    from audit import cli as audit_cli
    from pykraft import broker as broker_mod
    from pykraft import cluster as cluster_mod
    from pykraft import export as export_mod
    from pykraft import topics_cli

    try:
        if args.command == "log":
            from pykraft.dump import run_dump

            code = run_dump(args.path, snapshots=args.snapshots, records=not args.batches_only)
            # Flush here, not at exit: a reader that left early (`| head`) shows up as a BrokenPipeError
            # we handle below rather than as an "Exception ignored" at shutdown with exit code 120.
            sys.stdout.flush()
            return code
        if args.command == "node":
            from pykraft.logs import configure_logging
            from pykraft.node import run as run_node

            configure_logging()
            return run_node(args)
        if args.command == "quorum":
            from pykraft.quorum_cli import run as run_describe

            return run_describe(args.bootstrap_server, args.output)
        if args.command == "snapshot":
            from pykraft.snapshot_cli import run as run_snapshot

            return run_snapshot(args.bootstrap_server, args.timeout_ms)
        if args.command == "topics":
            return topics_cli.run(args)
        if args.command == "leader-election":
            from pykraft import election_cli

            return election_cli.run(args)
        if args.command == "configs":
            from pykraft import configs_cli

            return configs_cli.run(args, argv[argv.index("configs") + 1 :])
        if args.command == "reassign-partitions":
            from pykraft import reassign_cli

            return reassign_cli.run(args)
        if args.command == "broker":
            from pykraft.logs import configure_logging

            configure_logging()
            return broker_mod.run(args)
        if args.command == "cluster":
            return cluster_mod.run(args)
        if args.command == "export":
            return export_mod.run(args)
        if args.command == "audit":
            return audit_cli.run(args)
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
