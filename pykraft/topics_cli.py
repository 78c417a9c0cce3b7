"""``pykraft topics``: create, alter, delete, describe and list topics, like ``kafka-topics.sh``.

As in Kafka's TopicCommand, ``--topic`` is a regular expression for ``--alter``, ``--delete`` and ``--describe``
(the whole name must match; ``,`` separates alternatives), and ``--if-exists`` makes a topic that matches nothing
a quiet success. Exit codes: 0 success, 1 the cluster refused or could not be reached, 2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from controller.requests import ConfigResource, ConfigResourceType
from pykraft.cli_common import (
    UsageError,
    add_bootstrap_arguments,
    is_literal_topic,
    matching_topics,
    positive_int,
    usage_failed,
)
from pykraft.client import AdminClient, AdminError, NewPartitions, NewTopic, PartitionInfo, TopicDescription
from quorum.errors import Errors

ERROR = "Error while executing topic command : "
ACTIONS = ("create", "alter", "delete", "describe", "list")
REPORTS = ("under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions", "at_min_isr_partitions")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--alter", action="store_true", help="raise the partition count (and assign new partitions)")
    action.add_argument("--delete", action="store_true", help="delete the topics --topic matches")
    action.add_argument("--describe", action="store_true", help="describe the topics --topic matches, or all")
    action.add_argument("--list", action="store_true", help="list topic names")
    p.add_argument("--topic", help="the topic; a regular expression for --alter, --delete, --describe and --list")
    p.add_argument("--partitions", type=int, help="partition count to create with, or to raise to with --alter")
    p.add_argument("--replication-factor", type=int, help="replicas per partition (default.replication.factor)")
    p.add_argument(
        "--replica-assignment",
        metavar="B1:B2,B3:B4",
        help="manual assignment, partitions by comma (with --alter: every partition's, the new ones are used)",
    )
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE", help="a topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="--create: succeed quietly if the topic exists")
    p.add_argument("--if-exists", action="store_true", help="--alter/--delete/--describe: no topic is no error")
    p.add_argument("--validate-only", action="store_true", help="--create/--alter: check the request, change nothing")
    p.add_argument("--under-replicated-partitions", action="store_true", help="--describe: ISR smaller than replicas")
    p.add_argument("--unavailable-partitions", action="store_true", help="--describe: no leader, or a fenced one")
    p.add_argument("--under-min-isr-partitions", action="store_true", help="--describe: ISR below min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true", help="--describe: ISR at min.insync.replicas")
    p.add_argument("--output", choices=("text", "json"), default="text", help="for --describe and --list")
    p.add_argument(
        "--timeout-ms", type=positive_int, default=30_000, metavar="MS", help="how long each request may take"
    )


def _action(args: argparse.Namespace) -> str:
    return next(a for a in ACTIONS if getattr(args, a))


def check_args(args: argparse.Namespace) -> None:
    """TopicCommand's checks: which options go with which action."""
    action = _action(args)
    if action in ("create", "alter", "delete") and not args.topic:
        raise UsageError('Missing required argument "[topic]"')
    if action == "alter" and args.partitions is None:
        raise UsageError('Missing required argument "[partitions]"')
    if action == "alter" and args.config:
        raise UsageError(
            'Option "[config]" can\'t be used with option "[alter]". To alter topic configs, use pykraft configs.'
        )
    allowed = {
        "partitions": ("create", "alter"),
        "replication_factor": ("create",),
        "replica_assignment": ("create", "alter"),
        "config": ("create",),
        "if_not_exists": ("create",),
        "if_exists": ("alter", "delete", "describe"),
        "validate_only": ("create", "alter"),
        **{report: ("describe",) for report in REPORTS},
    }
    for option, actions in allowed.items():
        value = getattr(args, option)
        if value is not None and value is not False and value != [] and action not in actions:
            raise UsageError(f'Option "[{option.replace("_", "-")}]" can\'t be used with option "[{action}]"')


def parse_assignment(text: str) -> dict[int, list[int]]:
    assignment: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        try:
            brokers = [int(b.strip()) for b in part.split(":")]
        except ValueError:
            raise UsageError(f"--replica-assignment: {part!r} is not a colon-separated list of broker ids") from None
        duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
        if duplicates:
            raise UsageError(
                f"Partition replica lists may not contain duplicate entries: {','.join(map(str, duplicates))}"
            )
        assignment[index] = brokers
    return assignment


def build_new_topic(args: argparse.Namespace) -> NewTopic:
    if args.replica_assignment and (args.partitions is not None or args.replication_factor is not None):
        raise UsageError("Option [replica-assignment] can't be used with options [partitions] or [replication-factor]")
    configs: dict[str, str | None] = {}
    for item in args.config:
        name, eq, value = item.partition("=")
        if not eq or not name:
            raise UsageError(f"--config {item!r}: expected NAME=VALUE")
        configs[name.strip()] = value.strip()
    return NewTopic(
        args.topic,
        num_partitions=-1 if args.partitions is None else args.partitions,
        replication_factor=-1 if args.replication_factor is None else args.replication_factor,
        replica_assignment=parse_assignment(args.replica_assignment) if args.replica_assignment else None,
        topic_configs=configs,
    )


class CommandFailed(Exception):
    """The cluster refused: printed after ERROR, exit code 1."""


async def _select(admin: AdminClient, args: argparse.Namespace) -> list[TopicDescription]:
    """The described topics --topic matches (every topic without it); a topic that must exist and does not is
    an error unless --if-exists."""
    if args.topic and is_literal_topic(args.topic):
        described = await admin.describe_topics([args.topic], args.timeout_ms)
        for d in described:
            if d.error_code and d.error_code != Errors.UNKNOWN_TOPIC_OR_PARTITION:
                raise CommandFailed(d.error_message)
        found = [d for d in described if not d.error_code]
    else:
        described = await admin.describe_topics(None, args.timeout_ms)
        if args.topic:
            wanted = set(matching_topics([d.name for d in described], args.topic))
            described = [d for d in described if d.name in wanted]
        found = sorted(described, key=lambda d: d.name)
    if args.topic and not found and not args.if_exists:
        raise CommandFailed(f"Topic '{args.topic}' does not exist as expected")
    return found


async def _create(admin: AdminClient, args: argparse.Namespace) -> int:
    topic = build_new_topic(args)
    results = await admin.create_topics([topic], validate_only=args.validate_only, timeout_ms=args.timeout_ms)
    r = results[topic.name]
    if r.error_code == Errors.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return 0
    if r.error_code:
        raise CommandFailed(r.error_message)
    if args.validate_only:
        print(
            f"Topic {topic.name} is valid ({r.num_partitions} partitions, replication factor "
            f"{r.replication_factor}); nothing was created."
        )
    else:
        print(f"Created topic {topic.name}.")
    return 0


async def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    assignment = parse_assignment(args.replica_assignment) if args.replica_assignment else None
    topics = await _select(admin, args)
    if not topics:
        return 0
    new = {
        d.name: NewPartitions(
            args.partitions,
            None if assignment is None else [brokers for i, brokers in assignment.items() if i >= len(d.partitions)],
        )
        for d in topics
    }
    results = await admin.create_partitions(new, validate_only=args.validate_only, timeout_ms=args.timeout_ms)
    failed = [r for r in results.values() if r.error.failed]
    if failed:
        raise CommandFailed(failed[0].error.message or failed[0].error.code.name)
    if args.validate_only:
        for name in results:
            print(f"Topic {name} can have {args.partitions} partitions; nothing was changed.")
    return 0


async def _delete(admin: AdminClient, args: argparse.Namespace) -> int:
    if is_literal_topic(args.topic):
        names = [args.topic]
    else:
        names = matching_topics(await admin.list_topics(args.timeout_ms), args.topic)
        if not names and not args.if_exists:
            raise CommandFailed(f"Topic '{args.topic}' does not exist as expected")
    if not names:
        return 0
    results = await admin.delete_topics(names, timeout_ms=args.timeout_ms)
    for r in results:
        if r.error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION and is_literal_topic(args.topic):
            if args.if_exists:
                continue
            raise CommandFailed(f"Topic '{args.topic}' does not exist as expected")
        if r.error.failed:
            raise CommandFailed(r.error.message or r.error.code.name)
    return 0


# -- describe ----------------------------------------------------------------------------------------------------


def replication_factor(p: PartitionInfo) -> int:
    """TopicCommand's: during a reassignment, the replicas being added do not count."""
    return len(p.replicas) - len(p.adding_replicas)


def partition_filter(args: argparse.Namespace, live: set[int], min_isr: dict[str, int]) -> Any:
    """TopicCommand's report options, OR-ed; None when no report option is given (every partition is shown)."""
    if not any(getattr(args, r) for r in REPORTS):
        return None

    def keep(topic: str, p: PartitionInfo) -> bool:
        has_leader = p.leader >= 0
        return (
            (args.under_replicated_partitions and replication_factor(p) - len(p.isr) > 0)
            or (args.unavailable_partitions and (not has_leader or p.leader not in live))
            or (args.under_min_isr_partitions and (not has_leader or len(p.isr) < min_isr[topic]))
            or (args.at_min_isr_partitions and len(p.isr) == min_isr[topic])
        )

    return keep


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    topics = await _select(admin, args)
    live: set[int] = set()
    min_isr: dict[str, int] = {}
    if args.unavailable_partitions:
        cluster = await admin.describe_cluster(args.timeout_ms)
        live = {b.broker_id for b in cluster.brokers if not b.fenced}
    if (args.under_min_isr_partitions or args.at_min_isr_partitions) and topics:
        key = "min.insync.replicas"
        resources = [ConfigResource(ConfigResourceType.TOPIC, d.name, (key,)) for d in topics]
        for r in await admin.describe_configs(resources, timeout_ms=args.timeout_ms):
            if r.error.failed:
                raise CommandFailed(r.error.message or r.error.code.name)
            min_isr[r.resource_name] = int(next(c.value for c in r.configs if c.name == key) or 1)
    keep = partition_filter(args, live, min_isr)
    shown = [(d, [p for p in d.partitions if keep is None or keep(d.name, p)]) for d in topics]
    if keep is not None:
        shown = [(d, parts) for d, parts in shown if parts]
    if args.output == "json":
        print(json.dumps([_topic_json(d, parts) for d, parts in shown]))
        return 0
    for d, parts in shown:
        if keep is None:  # a report option shows partition lines only, as kafka-topics.sh does
            print(_topic_line(d))
        for p in parts:
            print(_partition_line(d.name, p))
    return 0


def _topic_json(d: TopicDescription, partitions: list[PartitionInfo]) -> dict[str, Any]:
    return {
        "name": d.name,
        "topicId": d.topic_id,
        "partitionCount": len(d.partitions),
        "replicationFactor": replication_factor(d.partitions[0]) if d.partitions else 0,
        "configs": d.configs,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leaderEpoch": p.leader_epoch,
                "partitionEpoch": p.partition_epoch,
                "replicas": p.replicas,
                "isr": p.isr,
                "offlineReplicas": p.offline_replicas,
                "leaderRecoveryState": "RECOVERING" if p.leader_recovery_state else "RECOVERED",
                "addingReplicas": p.adding_replicas,
                "removingReplicas": p.removing_replicas,
            }
            for p in partitions
        ],
    }


def _topic_line(d: TopicDescription) -> str:
    rf = replication_factor(d.partitions[0]) if d.partitions else 0
    configs = ",".join(f"{k}={v}" for k, v in sorted(d.configs.items()))
    return (
        f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}\t"
        f"ReplicationFactor: {rf}\tConfigs: {configs}"
    )


def _partition_line(topic: str, p: PartitionInfo) -> str:
    line = (
        f"\tTopic: {topic}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
        f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
    )
    if p.adding_replicas or p.removing_replicas:
        line += (
            f"\tAdding Replicas: {','.join(map(str, p.adding_replicas))}"
            f"\tRemoving Replicas: {','.join(map(str, p.removing_replicas))}"
        )
    line += "\tElr: \tLastKnownElr: "
    if p.offline_replicas:
        line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
    return line


# -- running -----------------------------------------------------------------------------------------------------


async def _run(args: argparse.Namespace) -> int:
    check_args(args)
    admin = AdminClient(
        args.bootstrap_server,
        default_api_timeout_ms=args.timeout_ms,
        connect_timeout_ms=args.connect_timeout_ms,
        tls=args.tls,
    )
    async with admin:
        action = _action(args)
        if action == "list":
            names = await admin.list_topics(args.timeout_ms)
            if args.topic:
                names = matching_topics(names, args.topic)
            print(json.dumps(names) if args.output == "json" else "\n".join(names))
            return 0
        handler = {"create": _create, "alter": _alter, "delete": _delete, "describe": _describe}[action]
        return await handler(admin, args)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except UsageError as e:
        return usage_failed("pykraft topics", e)
    except (CommandFailed, AdminError) as e:
        print(f"{ERROR}{e}", file=sys.stderr)
        return 1
