"""``pykraft reassign-partitions``: move partitions between brokers, like ``kafka-reassign-partitions.sh``.

    pykraft reassign-partitions --bootstrap-server B --generate --topics-to-move-json-file topics.json --broker-list 1,2
    pykraft reassign-partitions --bootstrap-server B --execute --reassignment-json-file plan.json [--throttle 1048576]
    pykraft reassign-partitions --bootstrap-server B --verify --reassignment-json-file plan.json [--wait]
    pykraft reassign-partitions --bootstrap-server B --cancel --reassignment-json-file plan.json
    pykraft reassign-partitions --bootstrap-server B --list

Kafka's options, file formats and messages (its ReassignPartitionsCommand). Ours besides: ``--verify`` shows how far
each replica being added has got (its size beside the leader's, from the brokers' DescribeReplicas), and ``--wait``
follows the move to its end. pykraft brokers have no log directories: ``log_dirs`` may only say ``"any"``. Exit
codes: 0 success, 1 the cluster refused or could not be reached, 2 a usage error or bad input (nothing changed).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

import grpc

from controller.placement import PlacementError, StripedReplicaPlacer, UsableBroker
from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource, ConfigResourceType
from pykraft.cli_common import (
    SERVERS,
    UsageError,
    add_bootstrap_arguments,
    describe_error,
    positive_int,
    read_text_file,
    server_list,
    usage_failed,
)
from pykraft.client import AdminClient, AdminError, PartitionReassignment, TopicDescription
from pykraft.reassign_files import (
    Move,
    PartitionState,
    Progress,
    TopicPartition,
    check_for_execute,
    check_no_duplicate_partitions,
    ids_text,
    list_text,
    parse_broker_list,
    parse_reassignment,
    parse_topics_to_move,
    plural,
    reassignment_json,
    status_text,
    tp_name,
    wait_text,
)
from pykraft.replica.data_plane import describe_replicas
from pykraft.security.channels import ClientTls
from quorum.log.message import Uuid

PROG = "pykraft reassign-partitions"
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
REQUIRED = {
    "generate": ("topics_to_move_json_file", "broker_list"),
    "execute": ("reassignment_json_file",),
    "verify": ("reassignment_json_file",),
    "cancel": ("reassignment_json_file",),
    "list": (),
}
PERMITTED = {
    "generate": {"bootstrap_server", "disable_rack_aware"},
    "execute": {"bootstrap_server", "additional", "throttle", "replica_alter_log_dirs_throttle", "timeout"},
    "verify": {"bootstrap_server", "preserve_throttles", "wait"},
    "cancel": {"bootstrap_server", "bootstrap_controller", "preserve_throttles", "timeout"},
    "list": {"bootstrap_server", "bootstrap_controller"},
}
OPTIONS = sorted({o for group in (*REQUIRED.values(), *PERMITTED.values()) for o in group})
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
BROKER_THROTTLES = (*RATES, "replica.alter.log.dirs.io.max.bytes.per.second")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
CANNOT_EXECUTE = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used to "
    "change the throttle by resubmitting the current reassignment."
)
VERIFY_WARNING = (
    "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is removed."
)
DEFAULT_TIMEOUT_MS = 10_000  # Kafka's --timeout default
REPLICAS_TIMEOUT_S = 3.0  # a broker's DescribeReplicas answer, for --verify's progress
WAIT_POLL_S = 1.0  # --wait: how often the state is read
WAIT_LINE_S = 10.0  # --wait without a terminal: a line this often (and when a partition finishes)

Endpoint = tuple[str, int]  # a broker's PLAINTEXT listener


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap_arguments(p, required=False, help="controller nodes")
    p.add_argument(
        "--bootstrap-controller", type=server_list, metavar=SERVERS, help="the same (Kafka's name); --cancel, --list"
    )
    p.add_argument("--generate", action="store_true", help="propose an assignment (it is not executed)")
    p.add_argument("--execute", action="store_true", help="start the reassignment of --reassignment-json-file")
    p.add_argument("--verify", action="store_true", help="status of a reassignment; once done, remove the throttles")
    p.add_argument("--cancel", action="store_true", help="cancel the active reassignments of the file's partitions")
    p.add_argument("--list", action="store_true", help="list every active partition reassignment")
    p.add_argument(
        "--reassignment-json-file",
        metavar="FILE",
        help='{"version":1,"partitions":[{"topic":"foo","partition":1,"replicas":[1,2,3],"log_dirs":["any",...]}]}'
        ' (log_dirs optional; "any" only)',
    )
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"version":1,"topics":[{"topic":"foo"}]}')
    p.add_argument("--broker-list", metavar="1,2,3", help="--generate: the brokers to place the topics on")
    p.add_argument("--disable-rack-aware", action="store_true", help="--generate: ignore the brokers' racks")
    p.add_argument("--throttle", type=int, metavar="BYTES/S", help="--execute: throttle the moves between brokers")
    p.add_argument(
        "--replica-alter-log-dirs-throttle", type=int, metavar="BYTES/S", help="--execute: no effect (no log dirs)"
    )
    p.add_argument(
        "--timeout", type=positive_int, metavar="MS", help="--execute/--cancel: request timeout (default 10000)"
    )
    p.add_argument("--additional", action="store_true", help="--execute while other reassignments are in progress")
    p.add_argument("--preserve-throttles", action="store_true", help="--verify/--cancel: leave the throttles alone")
    p.add_argument("--wait", action="store_true", help="--verify: follow the reassignment until it is done")


def check_args(args: argparse.Namespace) -> str:
    """Kafka's validateAndParseArgs (its messages); returns the action."""
    actions = [a for a in ACTIONS if getattr(args, a)]
    if len(actions) != 1:
        raise UsageError(f"Command must include exactly one action: {', '.join('--' + a for a in ACTIONS)}")
    action = actions[0]
    if args.bootstrap_server is not None and args.bootstrap_controller is not None:
        raise UsageError("Please don't specify both --bootstrap-server and --bootstrap-controller")
    if args.bootstrap_server is None and args.bootstrap_controller is None:
        raise UsageError("Please specify either --bootstrap-server or --bootstrap-controller")
    used = {o for o in OPTIONS if getattr(args, o) not in (None, False)}
    for option in REQUIRED[action]:
        if option not in used:
            raise UsageError(f'Missing required argument "[{option.replace("_", "-")}]"')
    for option in sorted(used - set(REQUIRED[action]) - PERMITTED[action]):
        raise UsageError(f'Option "[{option.replace("_", "-")}]" can\'t be used with action "[{action}]"')
    return action


# -- the cluster's state -----------------------------------------------------------------------------------------


class CommandFailed(Exception):
    """The cluster refused: printed as it is, exit code 1."""


async def _describe(admin: AdminClient, topics: set[str]) -> dict[str, TopicDescription]:
    """The topics of these that exist, by name."""
    return {d.name: d for d in await admin.describe_topics(sorted(topics)) if not d.error_code} if topics else {}


def _replicas(d: TopicDescription | None, partition: int) -> list[int] | None:
    return next((p.replicas for p in d.partitions if p.partition == partition), None) if d else None


async def _live_brokers(admin: AdminClient) -> dict[int, tuple[str | None, Endpoint | None]]:
    """The unfenced brokers (what Kafka's describeCluster lists): their racks and PLAINTEXT endpoints."""
    live = {}
    for b in (await admin.describe_cluster()).brokers:
        if not b.fenced:
            live[b.broker_id] = (b.rack, b.endpoint())
    return live


def _check_brokers(brokers: set[int], live: dict[int, Any]) -> None:
    unknown = sorted(brokers - set(live))
    if unknown:
        raise UsageError(f"Unknown broker {plural(len(unknown), 'id')} {ids_text(unknown)}")


async def _replica_sizes(
    endpoint: Endpoint | None, wanted: list[tuple[bytes, int]], tls: ClientTls | None = None
) -> dict[Any, int] | str:
    """A broker's replica sizes by (topic id, partition), from its DescribeReplicas; or why it did not answer."""
    if endpoint is None:
        return "no PLAINTEXT listener"
    try:
        partitions = [(Uuid(t), p) for t, p in wanted]
        replicas = await describe_replicas(endpoint, REPLICAS_TIMEOUT_S, partitions=partitions, tls=tls)
    except AdminError as e:
        cause = e.__cause__
        status = cause.code().name if isinstance(cause, grpc.aio.AioRpcError) else e.code.name
        return f"{endpoint[0]}:{endpoint[1]}: {status}"
    return {(bytes(r.topic_id), r.partition): r.size_bytes for r in replicas}


async def replica_progress(
    moving: dict[TopicPartition, tuple[bytes, int, list[int]]],
    endpoints: dict[int, Endpoint | None],
    tls: ClientTls | None = None,
) -> dict[TopicPartition, tuple[Progress, ...]]:
    """For moving partitions (their topic id, leader and replicas being added), how far each added replica has
    got: one DescribeReplicas per broker involved, all at once."""
    wanted: dict[int, list[tuple[bytes, int]]] = {}
    for (_, index), (topic_id, leader, adding) in moving.items():
        for b in {leader, *adding} - {-1}:
            wanted.setdefault(b, []).append((topic_id, index))
    answers = await asyncio.gather(*(_replica_sizes(endpoints.get(b), keys, tls) for b, keys in wanted.items()))
    sizes = dict(zip(wanted, answers, strict=True))
    out = {}
    for tp, (topic_id, leader, adding) in moving.items():
        key, items = (topic_id, tp[1]), []
        for b in adding:
            at_leader, here = sizes.get(leader, "the partition has no leader"), sizes[b]
            if isinstance(at_leader, str):
                items.append(Progress(b, why=at_leader if leader < 0 else f"leader {leader}: {at_leader}"))
            elif isinstance(here, str):
                items.append(Progress(b, why=f"broker {b}: {here}"))
            elif key not in at_leader:
                items.append(Progress(b, why=f"leader {leader} does not report the partition"))
            else:
                items.append(Progress(b, here.get(key, 0), at_leader[key]))
        out[tp] = tuple(items)
    return out


async def find_states(
    admin: AdminClient, moves: list[Move], endpoints: dict[int, Endpoint | None]
) -> tuple[list[PartitionState], bool]:
    """Kafka's findPartitionReassignmentStates, with progress: each partition's state, and whether any
    reassignment at all (in the file or not) is in progress."""
    ongoing = await admin.list_partition_reassignments(None)
    described = await _describe(admin, {m.topic for m in moves})
    moving = {
        m.tp: (
            bytes(Uuid(d.topic_id)),
            next((p.leader for p in d.partitions if p.partition == m.partition), -1),
            ongoing[m.tp].adding_replicas,
        )
        for m in moves
        if m.tp in ongoing and (d := described.get(m.topic)) is not None
    }
    progress = await replica_progress(moving, endpoints, admin.tls) if moving else {}
    return [
        PartitionState(m.tp, tuple(ongoing[m.tp].replicas), m.replicas, False, progress.get(m.tp, ()))
        if m.tp in ongoing
        else PartitionState(m.tp, tuple(_replicas(described.get(m.topic), m.partition) or ()), m.replicas, True)
        for m in moves
    ], bool(ongoing)


# -- throttles ---------------------------------------------------------------------------------------------------


def throttles(
    ongoing: dict[TopicPartition, PartitionReassignment],
    proposed: dict[TopicPartition, tuple[int, ...]],
    current: dict[TopicPartition, list[int]],
) -> tuple[dict[str, tuple[str, str]], list[int]]:
    """Kafka's proposed move map, as throttles: per topic the leader throttles (partition:source) and follower
    throttles (partition:destination, not a source) of every move in progress and proposed, and the brokers
    involved. A partition already moving keeps its sources."""
    moves = {tp: (set(r.replicas) - set(r.adding_replicas), set(r.adding_replicas)) for tp, r in ongoing.items()}
    for tp, replicas in proposed.items():
        sources = moves[tp][0] if tp in moves else set(current[tp])
        moves[tp] = (sources, set(replicas) - sources)
    leader: dict[str, set[str]] = {}
    follower: dict[str, set[str]] = {}
    for (topic, p), (sources, destinations) in moves.items():
        leader.setdefault(topic, set()).update(f"{p}:{b}" for b in sources)
        follower.setdefault(topic, set()).update(f"{p}:{b}" for b in destinations - sources)
    per_topic = {t: (",".join(sorted(leader[t])), ",".join(sorted(follower[t]))) for t in leader}
    return per_topic, sorted({b for sources, destinations in moves.values() for b in sources | destinations})


async def _alter_configs(admin: AdminClient, resources: list[AlterConfigsResource], what: str) -> None:
    results = await admin.incremental_alter_configs(resources) if resources else []
    failed = [f"{r.resource_name}: {describe_error(r.error)}" for r in results if r.error.failed]
    if failed:
        raise CommandFailed(f"Error {what}: {'; '.join(failed)}")


async def set_throttles(
    admin: AdminClient, per_topic: dict[str, tuple[str, str]], brokers: list[int], rate: int, configs: dict[str, Any]
) -> None:
    """APPEND the moving replicas to each topic's throttled replicas (where the topic does not throttle "*"
    already), then SET both rates on every broker involved."""
    resources = []
    for topic, values in sorted(per_topic.items()):
        own = configs.get(topic, {})
        ops = tuple(
            AlterableConfig(name, AlterConfigOp.APPEND, value)
            for name, value in zip(TOPIC_THROTTLES, values, strict=True)
            if value and own.get(name, "").strip() != "*"
        )
        if ops:
            resources.append(AlterConfigsResource(ConfigResourceType.TOPIC, topic, ops))
    await _alter_configs(admin, resources, "setting topic-level throttles")
    ops = tuple(AlterableConfig(n, AlterConfigOp.SET, str(rate)) for n in RATES)
    resources = [AlterConfigsResource(ConfigResourceType.BROKER, str(b), ops) for b in brokers]
    await _alter_configs(admin, resources, "setting broker-level throttles")
    print(f"The inter-broker throttle limit was set to {rate} B/s")


async def clear_throttles(admin: AdminClient, moves: list[Move], live: set[int]) -> None:
    """Kafka's clearAllThrottles: DELETE the rates on every live broker and every broker of the file, and the
    throttled replicas of the file's topics (those that exist)."""
    brokers = sorted(live | {b for m in moves for b in m.replicas})
    print(f"Clearing broker-level throttles on {plural(len(brokers), 'broker')} {ids_text(brokers)}")
    ops = tuple(AlterableConfig(n, AlterConfigOp.DELETE) for n in BROKER_THROTTLES)
    resources = [AlterConfigsResource(ConfigResourceType.BROKER, str(b), ops) for b in brokers]
    await _alter_configs(admin, resources, "clearing broker-level throttles")
    topics = sorted({m.topic for m in moves})
    print(f"Clearing topic-level throttles on {plural(len(topics), 'topic')} {','.join(topics)}")
    existing = await _describe(admin, set(topics))
    ops = tuple(AlterableConfig(n, AlterConfigOp.DELETE) for n in TOPIC_THROTTLES)
    resources = [AlterConfigsResource(ConfigResourceType.TOPIC, t, ops) for t in topics if t in existing]
    await _alter_configs(admin, resources, "clearing topic-level throttles")


# -- the actions -------------------------------------------------------------------------------------------------


async def generate(admin: AdminClient, args: argparse.Namespace) -> int:
    """Kafka's generateAssignment, placed by our placer over the listed brokers (each topic keeps its replication
    factor, its partition 0's)."""
    topics = parse_topics_to_move(read_text_file(args.topics_to_move_json_file, "topics-to-move-json-file"))
    brokers = parse_broker_list(args.broker_list)
    described = await _describe(admin, set(topics))
    missing = [t for t in topics if t not in described]
    if missing:
        raise UsageError(f"Topic {missing[0]} not found.")
    live = await _live_brokers(admin)
    _check_brokers(set(brokers), live)
    usable = [UsableBroker(b, None if args.disable_rack_aware else live[b][0], False) for b in brokers]
    if 0 < sum(1 for u in usable if u.rack is None) < len(usable):
        raise UsageError(
            "Not all brokers have rack information. Add --disable-rack-aware in command line to make replica "
            "assignment without rack information."
        )
    current: dict[TopicPartition, list[int]] = {}
    proposed: dict[TopicPartition, list[int]] = {}
    placer = StripedReplicaPlacer()
    for topic in topics:
        parts = sorted(described[topic].partitions, key=lambda p: p.partition)
        current.update({(topic, p.partition): p.replicas for p in parts})
        factor = len(parts[0].replicas) if parts else 0
        try:
            placed = placer.place(len(parts), factor, usable)
        except PlacementError as e:
            raise UsageError(f"--broker-list: topic {topic} (replication factor {factor}): {e}") from None
        proposed.update({(topic, p.partition): r for p, r in zip(parts, placed, strict=True)})
    print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")
    return 0


async def execute(admin: AdminClient, args: argparse.Namespace) -> int:
    """Kafka's executeAssignment. Every check comes before the first change."""
    moves = parse_reassignment(read_text_file(args.reassignment_json_file, "reassignment-json-file"))
    check_for_execute(moves)
    proposed = {m.tp: m.replicas for m in moves}
    ongoing = await admin.list_partition_reassignments(None)
    if ongoing and not args.additional:
        raise CommandFailed(CANNOT_EXECUTE)
    _check_brokers({b for m in moves for b in m.replicas}, await _live_brokers(admin))
    described = await _describe(admin, {m.topic for m in moves} | {t for t, _ in ongoing})
    missing_topics = sorted({m.topic for m in moves} - set(described))
    if missing_topics:
        raise UsageError(f"Topic {missing_topics[0]} not found.")
    current = {tp: r for tp in proposed if (r := _replicas(described.get(tp[0]), tp[1])) is not None}
    missing = [tp_name(tp) for tp in sorted(proposed) if tp not in current]
    if missing:
        raise UsageError(f"Unable to find partition: {', '.join(missing)}")
    print(f"Current partition replica assignment\n\n{reassignment_json(current)}\n")
    print("Save this to use as the --reassignment-json-file option during rollback")
    throttle = -1 if args.throttle is None else args.throttle
    log_dir_throttle = -1 if args.replica_alter_log_dirs_throttle is None else args.replica_alter_log_dirs_throttle
    if throttle >= 0 or log_dir_throttle >= 0:
        print(VERIFY_WARNING)
        if throttle >= 0:
            configs = {t: d.configs for t, d in described.items()}
            await set_throttles(admin, *throttles(ongoing, proposed, current), throttle, configs)
        if log_dir_throttle >= 0:
            print("The replica-alter-dir throttle limit was not set: pykraft brokers have no log directories to move")
    timeout = DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout
    results = await admin.alter_partition_reassignments({tp: list(r) for tp, r in proposed.items()}, timeout_ms=timeout)
    errors = [f"{tp_name(tp)}: {e.message or e.code.name}" for tp, e in sorted(results.items()) if e.failed]
    if errors:
        raise CommandFailed("Error reassigning partition(s):\n" + "\n".join(errors))
    names = ",".join(tp_name(tp) for tp in sorted(proposed))
    print(f"Successfully started partition {plural(len(proposed), 'reassignment')} for {names}")
    return 0


async def verify(admin: AdminClient, args: argparse.Namespace) -> int:
    """Kafka's verifyAssignment; --wait first follows the file's partitions until none is moving."""
    moves = parse_reassignment(read_text_file(args.reassignment_json_file, "reassignment-json-file"))
    check_no_duplicate_partitions(moves)
    live = await _live_brokers(admin)
    endpoints = {b: endpoint for b, (_, endpoint) in live.items()}
    if args.wait:
        await follow(admin, moves, endpoints)
    states, ongoing = await find_states(admin, moves, endpoints)
    print(status_text(states))
    print()  # where Kafka prints its log directory moves: none here
    if not ongoing and not args.preserve_throttles:
        await clear_throttles(admin, moves, set(live))
    return 0


async def follow(admin: AdminClient, moves: list[Move], endpoints: dict[int, Endpoint | None]) -> None:
    """--wait: a progress bar on a terminal; else a line at first, whenever a partition finishes, and every
    WAIT_LINE_S. Until no partition of the file is moving."""
    tty = sys.stdout.isatty()
    last_done, last_at = -1, 0.0
    while True:
        states, _ = await find_states(admin, moves, endpoints)
        done = sum(1 for s in states if s.done)
        if tty:
            print(f"\r{wait_text(states)}", end="\n" if done == len(states) else "", flush=True)
        elif done != last_done or time.monotonic() - last_at >= WAIT_LINE_S:
            print(wait_text(states), flush=True)
            last_done, last_at = done, time.monotonic()
        if done == len(states):
            return
        await asyncio.sleep(WAIT_POLL_S)


async def cancel(admin: AdminClient, args: argparse.Namespace) -> int:
    """Kafka's cancelAssignment: cancel those of the file's partitions that are moving."""
    moves = parse_reassignment(read_text_file(args.reassignment_json_file, "reassignment-json-file"))
    check_no_duplicate_partitions(moves)
    listed = await admin.list_partition_reassignments([m.tp for m in moves])
    moving = sorted(tp for tp, r in listed.items() if r.adding_replicas or r.removing_replicas)
    if moving:
        timeout = DEFAULT_TIMEOUT_MS if args.timeout is None else args.timeout
        results = await admin.alter_partition_reassignments(dict.fromkeys(moving), timeout_ms=timeout)
        errors = [f"{tp_name(tp)}: {e.message or e.code.name}" for tp, e in sorted(results.items()) if e.failed]
        if errors:
            raise CommandFailed(
                f"Error cancelling partition {plural(len(errors), 'reassignment')} for:\n" + "\n".join(errors)
            )
        names = ",".join(tp_name(tp) for tp in moving)
        print(f"Successfully cancelled partition {plural(len(moving), 'reassignment')} for: {names}")
    else:
        print("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        await clear_throttles(admin, moves, set(await _live_brokers(admin)))
    return 0


async def list_reassignments(admin: AdminClient, args: argparse.Namespace) -> int:
    print(list_text(await admin.list_partition_reassignments(None)))
    return 0


async def _run(args: argparse.Namespace) -> int:
    action = check_args(args)
    admin = AdminClient(
        args.bootstrap_server or args.bootstrap_controller, connect_timeout_ms=args.connect_timeout_ms, tls=args.tls
    )
    handlers = {"generate": generate, "execute": execute, "verify": verify, "cancel": cancel}
    async with admin:
        return await handlers.get(action, list_reassignments)(admin, args)


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except UsageError as e:
        return usage_failed(PROG, e)
    except CommandFailed as e:
        print(e, file=sys.stderr)
        return 1
    except AdminError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
