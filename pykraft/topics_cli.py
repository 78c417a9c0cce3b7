"""``pykraft topics``: create, describe and list topics, like ``kafka-topics.sh``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from pykraft.client import AdminClient, AdminError, NewTopic
from quorum.errors import Errors


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]", help="controller nodes")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--describe", action="store_true", help="describe one topic (--topic) or all")
    action.add_argument("--list", action="store_true", help="list topic names")
    p.add_argument("--topic", help="the topic to create or describe")
    p.add_argument("--partitions", type=int, help="number of partitions (default: the cluster's num.partitions)")
    p.add_argument("--replication-factor", type=int, help="replicas per partition (default.replication.factor)")
    p.add_argument("--replica-assignment", metavar="B1:B2,B3:B4", help="manual assignment: partitions by comma")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE", help="a topic config (repeatable)")
    p.add_argument("--if-not-exists", action="store_true", help="succeed quietly if the topic exists")
    p.add_argument("--validate-only", action="store_true", help="check the request; create nothing")
    p.add_argument("--output", choices=("text", "json"), default="text", help="for --describe and --list")
    p.add_argument("--timeout-ms", type=int, default=30_000)


class UsageError(Exception):
    pass


def parse_assignment(text: str) -> dict[int, list[int]]:
    assignment: dict[int, list[int]] = {}
    for index, part in enumerate(text.split(",")):
        brokers = part.split(":")
        try:
            assignment[index] = [int(b) for b in brokers]
        except ValueError:
            raise UsageError(f"--replica-assignment: {part!r} is not a colon-separated list of broker ids") from None
    return assignment


def build_new_topic(args: argparse.Namespace) -> NewTopic:
    if not args.topic:
        raise UsageError('Missing required argument "[topic]"')
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


async def _run(args: argparse.Namespace) -> int:
    async with AdminClient(args.bootstrap_server, default_api_timeout_ms=args.timeout_ms) as admin:
        if args.create:
            topic = build_new_topic(args)
            results = await admin.create_topics([topic], validate_only=args.validate_only, timeout_ms=args.timeout_ms)
            r = results[topic.name]
            if r.error_code == Errors.TOPIC_ALREADY_EXISTS and args.if_not_exists:
                return 0
            if r.error_code:
                print(f"Error while executing topic command : {r.error_message}", file=sys.stderr)
                return 1
            if args.validate_only:
                print(
                    f"Topic {topic.name} is valid ({r.num_partitions} partitions, replication factor "
                    f"{r.replication_factor}); nothing was created."
                )
            else:
                print(f"Created topic {topic.name}.")
            return 0
        if args.list:
            names = await admin.list_topics(args.timeout_ms)
            print(json.dumps(names) if args.output == "json" else "\n".join(names))
            return 0
        described = await admin.describe_topics([args.topic] if args.topic else None, args.timeout_ms)
        missing = [d for d in described if d.error_code]
        if missing:
            print(
                f"Error while executing topic command : Topic '{missing[0].name}' does not exist as expected",
                file=sys.stderr,
            )
            return 1
        if args.output == "json":
            print(json.dumps([_topic_json(d) for d in described]))
        else:
            for d in described:
                print(_topic_text(d))
        return 0


def _topic_json(d) -> dict:
    return {
        "name": d.name,
        "topicId": d.topic_id,
        "partitionCount": len(d.partitions),
        "replicationFactor": len(d.partitions[0].replicas) if d.partitions else 0,
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
            }
            for p in d.partitions
        ],
    }


def _topic_text(d) -> str:
    rf = len(d.partitions[0].replicas) if d.partitions else 0
    configs = ",".join(f"{k}={v}" for k, v in sorted(d.configs.items()))
    lines = [
        f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}\t"
        f"ReplicationFactor: {rf}\tConfigs: {configs}"
    ]
    for p in d.partitions:
        line = (
            f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: {p.leader if p.leader >= 0 else 'none'}\t"
            f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\tElr: \tLastKnownElr: "
        )
        if p.offline_replicas:
            line += f"\tOffline: {','.join(map(str, p.offline_replicas))}"
        lines.append(line)
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except UsageError as e:
        print(f"pykraft topics: {e}", file=sys.stderr)
        return 1
    except (AdminError, ValueError) as e:
        print(f"Error while executing topic command : {e}", file=sys.stderr)
        return 1
