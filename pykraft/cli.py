"""The ``pykraft`` command."""

from __future__ import annotations

import argparse
import os
import sys

from pykraft.cli_common import (
    SERVERS,
    OneLineErrorParser,
    add_bootstrap_arguments,
    add_command_config_argument,
    positive_int,
    server_list,
)
from pykraft.logs import add_logging_arguments


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
    add_logging_arguments(node)

    quorum_cmd = commands.add_parser("quorum", help="inspect a running quorum")
    quorum_sub = quorum_cmd.add_subparsers(dest="quorum_command", required=True, metavar="SUBCOMMAND")
    qdesc = quorum_sub.add_parser(
        "describe",
        help="leader, epoch, high watermark and each voter's lag",
        description="As kafka-metadata-quorum.sh describe: --status (the quorum), --replication (a row per voter "
        "and observer); without either, both in one table.",
    )
    add_bootstrap_arguments(qdesc, help="nodes of the quorum (any one that answers; the leader is then asked)")
    qdesc.add_argument("--status", action="store_true", help="ClusterId, LeaderId, ... CurrentObservers")
    qdesc.add_argument("--replication", action="store_true", help="LogEndOffset, Lag, ... per voter and observer")
    qdesc.add_argument("--output", choices=("text", "json"), default="text", help="text or one JSON object")

    snapshot = commands.add_parser("snapshot", help="take metadata snapshots (before maintenance, say)")
    snapshot_sub = snapshot.add_subparsers(dest="snapshot_command", required=True, metavar="SUBCOMMAND")
    screate = snapshot_sub.add_parser(
        "create", help="each listed node snapshots its own committed state now; prints the snapshot ids"
    )
    screate.add_argument(
        "--bootstrap-server", type=server_list, required=True, metavar=SERVERS, help="controllers or brokers"
    )
    screate.add_argument("--timeout-ms", type=positive_int, default=120_000, help="how long each node may take")
    add_command_config_argument(screate)

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

    acls = commands.add_parser("acls", help="add, remove and list ACLs (like kafka-acls.sh)")
    from pykraft import acls_cli

    acls_cli.add_arguments(acls)

    reassign = commands.add_parser(
        "reassign-partitions", help="move partitions between brokers (like kafka-reassign-partitions.sh)"
    )
    from pykraft import reassign_cli

    reassign_cli.add_arguments(reassign)

    broker = commands.add_parser("broker", help="run a broker agent: registers, heartbeats, controlled shutdown")
    from pykraft import broker as broker_mod

    broker_mod.add_arguments(broker)
    add_logging_arguments(broker)

    cluster = commands.add_parser("cluster", help="a local cluster: up, down, describe, bootstrap")
    from pykraft import cluster as cluster_mod

    cluster_mod.add_arguments(cluster)

    tls = commands.add_parser("tls", help="a cluster CA and certificates with properties files (docker compose)")
    from pykraft import tls_cli

    tls_cli.add_arguments(tls)

    export = commands.add_parser("export", help="copy a node's committed metadata log (with a manifest) for auditing")
    from pykraft import export as export_mod

    export_mod.add_arguments(export)

    audit = commands.add_parser("audit", help="audit an exported metadata log with Spark (Parquet + report.html)")
    from audit import cli as audit_cli

    audit_cli.add_arguments(audit)
    return parser


def _configure_logging(args: argparse.Namespace) -> None:
    """Logging as ``--log-level``/``--log-file`` (or ``PYKRAFT_LOG_LEVEL``) say; a bad variable is a usage error."""
    from pykraft.logs import configure_from, settings_from

    try:
        settings = settings_from(args)
    except ValueError as e:
        prog = f"pykraft {args.command}"
        print(f"{prog}: error: {e} (see {prog} --help)", file=sys.stderr)
        raise SystemExit(2) from None
    configure_from(settings)


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
            from pykraft.node import run as run_node

            _configure_logging(args)
            return run_node(args)
        if args.command == "quorum":
            from pykraft.quorum_cli import run as run_describe

            return run_describe(args)
        if args.command == "snapshot":
            from pykraft.snapshot_cli import run as run_snapshot

            return run_snapshot(args.bootstrap_server, args.timeout_ms, args.tls)
        if args.command == "topics":
            return topics_cli.run(args)
        if args.command == "leader-election":
            from pykraft import election_cli

            return election_cli.run(args)
        if args.command == "configs":
            from pykraft import configs_cli

            return configs_cli.run(args, argv[argv.index("configs") + 1 :])
        if args.command == "acls":
            from pykraft import acls_cli

            return acls_cli.run(args)
        if args.command == "reassign-partitions":
            from pykraft import reassign_cli

            return reassign_cli.run(args)
        if args.command == "broker":
            _configure_logging(args)
            return broker_mod.run(args)
        if args.command == "cluster":
            return cluster_mod.run(args)
        if args.command == "export":
            return export_mod.run(args)
        if args.command == "tls":
            from pykraft import tls_cli

            return tls_cli.run(args)
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
    except OSError as e:  # a path or a resource the command could not use: one line, never a traceback
        where = f" {e.filename}:" if e.filename else ""
        print(f"pykraft {args.command}:{where} {e.strerror or e}", file=sys.stderr)
        return 1
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
