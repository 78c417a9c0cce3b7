"""``pykraft leader-election``: preferred or unclean leader elections, like ``kafka-leader-election.sh``.

One of ``--all-topic-partitions``, ``--topic T --partition P`` or ``--path-to-json-file F`` (Kafka's format:
``{"partitions": [{"topic": "foo", "partition": 1}]}``). The output is Kafka's: the partitions elected, the ones
whose valid leader was already in place, then one line per failure. Exit codes: 0 when no partition failed, 1 when
one did (or the cluster could not be reached), 2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from controller.requests import ElectionResult, ElectionType
from pykraft.cli_common import (
    UsageError,
    add_bootstrap_arguments,
    describe_error,
    exception_name,
    positive_int,
    usage_failed,
)
from pykraft.client import AdminClient, AdminError
from quorum.errors import Errors


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap_arguments(p, required=False, help="controller nodes. REQUIRED.")
    p.add_argument(
        "--election-type",
        type=str.lower,
        choices=("preferred", "unclean"),
        help="preferred: elect the first replica where it is not the leader; unclean: elect any live replica "
        "where no in-sync replica can lead (data may be lost). REQUIRED.",
    )
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition the election type applies to")
    p.add_argument("--topic", help="the topic of --partition")
    p.add_argument("--partition", type=int, help="the partition to elect for; needs --topic")
    p.add_argument(
        "--path-to-json-file",
        metavar="FILE",
        help='partitions as JSON: {"partitions": [{"topic": "foo", "partition": 1}, ...]}',
    )
    p.add_argument("--output", choices=("text", "json"), default="text", help="how to print the results")
    p.add_argument(
        "--timeout-ms", type=positive_int, default=60_000, metavar="MS", help="how long the elections may take"
    )


def check_args(args: argparse.Namespace) -> None:
    """LeaderElectionCommand's validate()."""
    missing = [name for name in ("bootstrap-server", "election-type") if getattr(args, name.replace("-", "_")) is None]
    if missing:
        raise UsageError(f"Missing required option(s): {', '.join(missing)}")
    chosen = [args.topic is not None, args.all_topic_partitions, args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise UsageError(
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"
        )
    if args.topic is not None and args.partition is None:
        raise UsageError("Missing required option(s): partition")
    if args.topic is None and args.partition is not None:
        raise UsageError("Option partition is only allowed if topic is used")


def parse_election_file(path: str) -> list[tuple[str, int]]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UsageError(f"--path-to-json-file: cannot read {path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise UsageError("Replica election data is empty") from None  # Kafka's words for JSON it cannot parse
    if not isinstance(data, dict) or "partitions" not in data:
        raise UsageError('Replica election data is missing "partitions" field')
    partitions: list[tuple[str, int]] = []
    for item in data["partitions"] if isinstance(data["partitions"], list) else [None]:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("topic"), str)
            or not isinstance(item.get("partition"), int)
            or isinstance(item.get("partition"), bool)
        ):
            raise UsageError(f'Replica election data: {json.dumps(item)} is not {{"topic": str, "partition": int}}')
        partitions.append((item["topic"], item["partition"]))
    duplicates = sorted({tp for tp in partitions if partitions.count(tp) > 1})
    if duplicates:
        listed = ", ".join(f"{t}-{p}" for t, p in duplicates)
        raise UsageError(f"Replica election data contains duplicate partitions: {listed}")
    return partitions


def render(election: ElectionType, results: list[ElectionResult], output: str) -> tuple[str, int]:
    """(stdout text, exit code)."""
    ordered = sorted(results, key=lambda r: (r.topic, r.partition))
    succeeded = [f"{r.topic}-{r.partition}" for r in ordered if not r.error.failed]
    noop = [f"{r.topic}-{r.partition}" for r in ordered if r.error.code == Errors.ELECTION_NOT_NEEDED]
    failed = [r for r in ordered if r.error.failed and r.error.code != Errors.ELECTION_NOT_NEEDED]
    if output == "json":
        out: dict[str, Any] = {
            "electionType": election.name,
            "succeeded": succeeded,
            "noop": noop,
            "failed": [
                {
                    "topic": r.topic,
                    "partition": r.partition,
                    "error": r.error.code.name,
                    "exception": exception_name(r.error.code),
                    "message": r.error.message,
                }
                for r in failed
            ],
        }
        return json.dumps(out), 1 if failed else 0
    lines = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({election.name}) for partitions {', '.join(succeeded)}")
    if noop:
        lines.append(f"Valid replica already elected for partitions {', '.join(noop)}")
    for r in failed:
        lines.append(
            f"Error completing leader election ({election.name}) for partition: {r.topic}-{r.partition}: "
            f"{describe_error(r.error)}"
        )
    return "\n".join(lines), 1 if failed else 0


async def _run(args: argparse.Namespace) -> int:
    check_args(args)
    election = ElectionType[args.election_type.upper()]
    partitions: list[tuple[str, int]] | None = None
    if args.path_to_json_file is not None:
        partitions = parse_election_file(args.path_to_json_file)
    elif args.topic is not None:
        partitions = [(args.topic, args.partition)]
    admin = AdminClient(
        args.bootstrap_server,
        default_api_timeout_ms=args.timeout_ms,
        connect_timeout_ms=args.connect_timeout_ms,
        tls=args.tls,
    )
    async with admin:
        try:
            results = await admin.elect_leaders(election, partitions, timeout_ms=args.timeout_ms)
        except AdminError as e:
            if e.code == Errors.REQUEST_TIMED_OUT:
                print("Timeout waiting for election results")
            raise
    text, code = render(election, results, args.output)
    if text:
        print(text)
    if code and args.output == "text":
        failures = sum(1 for r in results if r.error.failed and r.error.code != Errors.ELECTION_NOT_NEEDED)
        print(f"{failures} replica(s) could not be elected", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except UsageError as e:
        return usage_failed("pykraft leader-election", e)
    except AdminError as e:
        print(f"pykraft leader-election: {e}", file=sys.stderr)
        return 1
