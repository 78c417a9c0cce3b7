"""CreateTopics through the Kafka listener beside gRPC, on one cluster in one run: a fresh 3-controller cluster
(processes, fsync on) with 3 broker agents (Raft observers), each controller with its Kafka listener.

    python benchmarks/kafka_listener.py [--duration 3] [--rounds 3] [--clients 1,16] [--quick] [--json] [--dir DIR]
        [--keep] [--override NAME=VALUE ...]

Closed loop (each caller waits for its answer before sending the next), one topic (3 partitions x RF 3) or 100 per
request, 1 and 16 concurrent callers, through:
- gRPC: pykraft's ``AdminClient`` (pykraft/client.py), one shared by the callers (HTTP/2 multiplexes them);
- Kafka: confluent-kafka's ``AdminClient`` (librdkafka, what users take), one per caller — the listener answers
  one request at a time per connection, as Kafka's brokers do, so callers sharing one client queue behind each
  other; that case is measured too (``confluent, 1 shared``) where there is more than one caller;
- raw frames: CreateTopics v4 (librdkafka's version) encoded with pykraft's own codec over asyncio streams, one
  connection per caller (the server's cost without a client library's).

The fronts take turns within each round (their order reversed every other round), so drift (the growing metadata
image, the other users of the machine) hits them alike. Printed per shape: topics/s for each front over all rounds
(created topics / measured seconds) with the ratio to gRPC, each round's figure and the median of the rounds'
ratios, and the CPU seconds of the active controller (asked before and after each phase; a change is printed, and
the Kafka clients are reopened on the new one) and of the clients (this process). At low rates the leader's CPU
per topic is mostly its standing cost (followers' and observers' fetches, heartbeats), not the requests'. Only
requests whose every topic was created count; failures are counted by code. Afterwards every topic counted as
created is looked up through gRPC (DescribeTopics); any failure or missing topic exits 1. ``--quick``: one round
of 1 s phases (~35 s); the default ~3 min.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # when imported by a test: the benchmarks' modules by name

from _stats import Tally, error_name, errors_text, median, ratio  # noqa: E402
from create_topics import CpuMeter, admin_ready, leader_target  # noqa: E402

from pykraft.client import AdminClient, AdminError, NewTopic  # noqa: E402
from pykraft.kafka.apis.create_topics import CreateTopicsRequest, CreateTopicsResponse  # noqa: E402
from pykraft.kafka.protocol import RequestHeader, encode_request, response_header_version  # noqa: E402
from pykraft.testing import Cluster, free_ports  # noqa: E402

PARTITIONS, RF = 3, 3
TIMEOUT_MS = 30_000
RAW_VERSION = 4  # CreateTopics v4: the version librdkafka 2.x (confluent-kafka) sends, for a like-for-like cost
CREATE_TOPICS_KEY = 19
BROKERS = (101, 102, 103)


class GrpcFront:
    key, label = "grpc", "gRPC"

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin: AdminClient | None = None

    async def open(self, clients: int) -> None:
        self.admin = AdminClient(self.bootstrap, request_timeout_ms=TIMEOUT_MS + 5000)
        await self.admin.__aenter__()
        await admin_ready(self.admin, len(BROKERS))

    async def create(self, i: int, names: list[str]) -> list[str]:
        assert self.admin is not None
        results = await self.admin.create_topics([NewTopic(n, PARTITIONS, RF) for n in names], timeout_ms=TIMEOUT_MS)
        codes = [error_name(r.error_code) for r in results.values() if r.error_code]
        return codes + ["no result for the topic"] * (len(names) - len(results))

    async def close(self) -> None:
        if self.admin is not None:
            await self.admin.__aexit__(None, None, None)


class ConfluentFront:
    """confluent-kafka's AdminClient: ``shared`` one for every caller, else one (one connection) per caller."""

    def __init__(self, bootstrap: str, shared: bool = False) -> None:
        self.bootstrap = bootstrap
        self.shared = shared
        self.key = "confluent_shared" if shared else "confluent"
        self.label = "confluent, 1 shared" if shared else "confluent"
        self.admins: list[Any] = []

    async def open(self, clients: int) -> None:
        from confluent_kafka.admin import AdminClient as KafkaAdmin

        config = {"bootstrap.servers": self.bootstrap, "client.id": "pykraft-bench", "log_level": 3}
        self.admins = [KafkaAdmin(config) for _ in range(1 if self.shared else clients)]
        # Each client learns the active controller (Metadata) before the clock starts. One topic's metadata, not all:
        # after a failover the cluster holds tens of thousands of topics, and 17 clients asking for all of them at
        # once kept the new controller busy past 30 s.
        probe = "pykraft-bench-no-such-topic"
        await asyncio.gather(*(asyncio.to_thread(a.list_topics, topic=probe, timeout=30) for a in self.admins))

    async def create(self, i: int, names: list[str]) -> list[str]:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import NewTopic as KafkaTopic

        admin = self.admins[i % len(self.admins)]
        futures = admin.create_topics(
            [KafkaTopic(n, num_partitions=PARTITIONS, replication_factor=RF) for n in names],
            operation_timeout=TIMEOUT_MS / 1000,  # 0 (the default) would send timeout_ms 0: Kafka's "do not wait"
            request_timeout=TIMEOUT_MS / 1000 + 5,
        )
        codes = []
        outcomes = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures.values()), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, KafkaException):
                err = outcome.args[0]
                codes.append(error_name(err.code()) if err.code() > 0 else err.name())  # < 0: librdkafka's own
            elif isinstance(outcome, BaseException):
                codes.append(type(outcome).__name__)
        return codes + ["no result for the topic"] * (len(names) - len(futures))

    async def close(self) -> None:
        self.admins = []  # librdkafka's handles are destroyed with their Python objects


_Topic = CreateTopicsRequest.fields[0].type.element


class RawFront:
    """CreateTopics v4 frames from pykraft's own codec, one asyncio connection per caller."""

    key, label = "raw", "raw frames"

    def __init__(self, listeners: dict[int, tuple[str, int]], leader_of: Callable[[], Awaitable[int]]) -> None:
        self.listeners = listeners  # node id -> its Kafka listener
        self.leader_of = leader_of
        self.conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        self.correlation = 0
        # the response header: the correlation id, then (v1, flexible versions) an empty tag section
        self.skip = 4 + response_header_version(CREATE_TOPICS_KEY, CreateTopicsResponse.is_flexible(RAW_VERSION))

    async def open(self, clients: int) -> None:
        host, port = self.listeners[await self.leader_of()]  # no client library here to find the controller
        self.conns = [await asyncio.open_connection(host, port) for _ in range(clients)]

    async def create(self, i: int, names: list[str]) -> list[str]:
        reader, writer = self.conns[i]
        request = CreateTopicsRequest.cls(
            topics=[_Topic.cls(name=n, num_partitions=PARTITIONS, replication_factor=RF) for n in names],
            timeout_ms=TIMEOUT_MS,
        )
        self.correlation += 1
        flexible = CreateTopicsRequest.is_flexible(RAW_VERSION)
        header = RequestHeader(CREATE_TOPICS_KEY, RAW_VERSION, self.correlation, "pykraft-bench", 2 if flexible else 1)
        writer.write(encode_request(header, CreateTopicsRequest.encode(request, RAW_VERSION)))
        size = int.from_bytes(await reader.readexactly(4), "big")
        frame = await reader.readexactly(size)
        response = CreateTopicsResponse.decode(frame[self.skip :], RAW_VERSION)
        codes = [error_name(t.error_code) for t in response.topics if t.error_code]
        return codes + ["no result for the topic"] * (len(names) - len(response.topics))

    async def close(self) -> None:
        for _reader, writer in self.conns:
            writer.close()
        self.conns = []


async def phase(
    front: Any,
    clients: int,
    per_request: int,
    duration: float,
    prefix: str,
    controllers: dict[int, int],
    leader: int,
    leader_of: Callable[[], Awaitable[int]],
) -> dict:
    """``clients`` callers through ``front`` for ``duration`` seconds: the names of the topics created, the tally,
    and the CPU seconds spent by the active controller (``leader``), the others (``controllers``: node id -> pid)
    and the clients (this process). ``leader_of`` names the active controller afterwards (``failover`` if it is
    not ``leader``: the phase's CPU was charged to the one active at the start)."""
    tally = Tally()
    created: list[str] = []
    meter = CpuMeter({str(i): pid for i, pid in controllers.items()})
    stop = time.perf_counter() + duration

    async def caller(i: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            names = [f"{prefix}-{i}-{n}-{k}" for k in range(per_request)]
            n += 1
            since = tally.sent()
            try:
                codes = await front.create(i, names)
            except (AdminError, OSError, asyncio.IncompleteReadError) as e:
                tally.answered()
                tally.exception(e)
                continue
            done = tally.answered()
            if codes:
                tally.failure(*codes)
            else:
                tally.success((done - since) * 1000)
                created.extend(names)

    await asyncio.gather(*(caller(i) for i in range(clients)))
    used = meter.used()
    cpu = {"clients": used.pop("clients")}
    if str(leader) in used:
        cpu["leader"] = used.pop(str(leader))
        if used:
            cpu["followers"] = sum(used.values())
    after = await leader_of()
    return {"created": len(created), "names": created, "cpu_s": cpu, "failover": after != leader, **tally.summary()}


def pooled(runs: list[dict]) -> dict:
    """The rounds of one (front, shape) together: topics over measured seconds, and each round's figure."""
    created = sum(r["created"] for r in runs)
    elapsed = sum(r["elapsed_s"] for r in runs)
    cpu: dict[str, float] = {}
    errors: dict[str, int] = {}
    for r in runs:
        for k, v in r["cpu_s"].items():
            cpu[k] = cpu.get(k, 0.0) + v
        for k, v in r["errors"].items():
            errors[k] = errors.get(k, 0) + v
    return {
        "created": created,
        "elapsed_s": elapsed,
        "topics_per_s": created / elapsed if elapsed > 0 else 0.0,
        "rounds_topics_per_s": [r["created"] / r["elapsed_s"] if r["elapsed_s"] > 0 else 0.0 for r in runs],
        "cpu_s": cpu,
        "failed": sum(r["failed"] for r in runs),
        "failovers": [i for i, r in enumerate(runs) if r["failover"]],  # the rounds whose phase saw one
        "errors": errors,
    }


async def count_existing(grpc_bootstrap: str, names: list[str]) -> int:
    """How many of ``names`` DescribeTopics (gRPC) finds, asked in chunks to keep each answer small."""
    found = 0
    async with AdminClient(grpc_bootstrap, request_timeout_ms=TIMEOUT_MS) as admin:
        for start in range(0, len(names), 1000):
            found += sum(1 for t in await admin.describe_topics(names[start : start + 1000]) if not t.error_code)
    return found


async def measure(
    grpc_bootstrap: str,
    kafka_listeners: dict[int, tuple[str, int]],
    leader_of: Callable[[], Awaitable[int]],
    *,
    clients: Sequence[int] = (1, 16),
    per_request: Sequence[int] = (1, 100),
    duration: float = 3.0,
    rounds: int = 3,
    controllers: dict[int, int] | None = None,
    out: Any = print,
) -> dict:
    """Every (callers, topics per request) shape through every front, ``rounds`` times with the fronts taking
    turns; printed through ``out`` as it goes and returned (JSON-able, without the topic names). ``kafka_listeners``:
    each controller's Kafka listener by node id; ``leader_of`` names the active controller."""
    controllers = controllers or {}
    most = max(clients)
    kafka_bootstrap = ",".join(f"{h}:{p}" for h, p in kafka_listeners.values())
    fronts: list[Any] = [
        GrpcFront(grpc_bootstrap),
        ConfluentFront(kafka_bootstrap),
        RawFront(kafka_listeners, leader_of),
    ]
    if most > 1:
        fronts.append(ConfluentFront(kafka_bootstrap, shared=True))
    reopened: list[str] = []
    shapes = [(c, p) for p in per_request for c in clients]
    runs: dict[tuple[str, int, int], list[dict]] = {}
    names: dict[tuple[str, int, int], list[str]] = {}
    try:
        for front in fronts:
            await front.open(most)
            # every caller's connection made and the active controller known before any clock starts
            await phase(front, most, 1, min(duration, 0.3), f"warm-{front.key}", {}, 0, leader_of)
        opened_on = await leader_of()
        for r in range(rounds):
            order = fronts if r % 2 == 0 else fronts[::-1]
            for c, p in shapes:
                for front in order:
                    if front.key == "confluent_shared" and c == 1:
                        continue  # one caller: the same as "confluent"
                    leader = await leader_of()
                    if leader != opened_on:
                        # librdkafka keeps sending to the controller it knew (NOT_CONTROLLER) until its metadata
                        # refresh, minutes later: new clients, so the rounds after a failover measure throughput
                        reopened.append(f"round {r}, before {front.label} {c}x{p}: {opened_on} -> {leader}")
                        out(f"  the active controller moved ({reopened[-1]}); the Kafka clients are reopened")
                        for f in fronts[1:]:
                            await f.close()
                            await f.open(most)
                        opened_on = leader
                    result = await phase(
                        front, c, p, duration, f"kl{r}-{front.key}-{c}x{p}", controllers, leader, leader_of
                    )
                    key = (front.key, c, p)
                    names.setdefault(key, []).extend(result.pop("names"))
                    runs.setdefault(key, []).append(result)
    finally:
        for front in fronts:
            await front.close()
    report: dict = {"duration_s": duration, "rounds": rounds, "shapes": [], "kafka_clients_reopened": reopened}
    failed = 0
    labels = {f.key: f.label for f in fronts}
    for c, p in shapes:
        row: dict = {"clients": c, "topics_per_request": p, "fronts": {}}
        for key in labels:
            if (key, c, p) not in runs:
                continue
            res = pooled(runs[(key, c, p)])
            res["counted_through_grpc"] = await count_existing(grpc_bootstrap, names[(key, c, p)])
            failed += res["failed"] + (res["created"] - res["counted_through_grpc"])
            row["fronts"][key] = res
        report["shapes"].append(row)
        print_shape(row, labels, out)
    report["failed"] = failed
    return report


def print_shape(row: dict, labels: dict[str, str], out: Any = print) -> None:
    c, p, fronts = row["clients"], row["topics_per_request"], row["fronts"]
    base = fronts["grpc"]["topics_per_s"]
    figures = []
    for key, res in fronts.items():
        text = f"{labels[key]} {res['topics_per_s']:,.0f} topics/s"
        figures.append(text if key == "grpc" else f"{text} ({ratio(res['topics_per_s'], base):.2f}x gRPC)")
    out(f"{c:>3} caller(s) x {p:>3} topic(s)/request: " + " | ".join(figures))
    rounds = " | ".join(
        f"{labels[k]} " + ", ".join(f"{x:,.0f}" for x in res["rounds_topics_per_s"]) for k, res in fronts.items()
    )
    out(f"      by round, topics/s: {rounds}")
    # Each round's fronts ran back to back, so a round's ratio cancels the drift between rounds (a busy machine's
    # load, the growing image); their median is the steadier comparison when the rounds' rates differ a lot.
    grpc_rounds = fronts["grpc"]["rounds_topics_per_s"]
    medians = []
    for key, res in fronts.items():
        if key != "grpc":
            pairs = zip(res["rounds_topics_per_s"], grpc_rounds, strict=True)
            res["median_round_ratio"] = median([k / g for k, g in pairs if g > 0])
            medians.append(f"{labels[key]} {res['median_round_ratio']:.2f}x")
    out(f"      median of the rounds' ratios to gRPC: {' | '.join(medians)}")
    cpu = []
    for key, res in fronts.items():
        used, n = res["cpu_s"], res["created"]
        leader = f"leader {used['leader']:.2f} s" if "leader" in used else "leader -"
        per = f" = {used['leader'] / n * 1e6:,.0f} us/topic" if "leader" in used and n else ""
        cpu.append(f"{labels[key]}: {leader}{per}, clients {used['clients']:.2f} s")
    out("      CPU seconds (all rounds): " + " | ".join(cpu))
    checks = " | ".join(
        f"{labels[k]} {errors_text(res)}, {res['counted_through_grpc']:,} of {res['created']:,} found through gRPC"
        for k, res in fronts.items()
    )
    out(f"      checks: {checks}")
    moved = [f"{labels[k]} round(s) {res['failovers']}" for k, res in fronts.items() if res["failovers"]]
    if moved:  # that phase's CPU went partly to a controller that was not the one charged
        out("      the active controller changed during: " + ", ".join(moved))


def run(args: argparse.Namespace) -> int:
    duration = 1.0 if args.quick else args.duration
    rounds = 1 if args.quick else args.rounds
    clients = [int(c) for c in args.clients.split(",")]
    base = Path(args.dir) if args.dir else ROOT
    root = Path(tempfile.mkdtemp(prefix="kafka-listener-bench-", dir=base))
    kafka_ports = free_ports(3)
    listeners = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(kafka_ports))
    overrides = ["metadata.max.idle.interval.ms=0", *args.override]
    cluster = Cluster(root, 3, extra_args=[a for o in overrides for a in ("--override", o)])
    for i, node in cluster.nodes.items():
        node.args += ["--kafka-listener", f"127.0.0.1:{kafka_ports[i - 1]}", "--kafka-controller-listeners", listeners]
    grpc_bootstrap = ",".join(n.address for n in cluster.nodes.values())
    brokers: list[subprocess.Popen] = []
    try:
        cluster.start()
        for broker_id, port in zip(BROKERS, free_ports(len(BROKERS)), strict=True):
            log = (root / f"broker-{broker_id}.log").open("ab")
            # Raft observers, as `pykraft cluster up` starts them: a broker without the voters polls DescribeTopics
            # for every topic each heartbeat, which at tens of thousands of topics held the leader's loop for a
            # second or more per poll (slowing later rounds tenfold and, under load, costing it the leadership).
            command = [sys.executable, "-m", "pykraft", "broker", "--broker-id", str(broker_id), "--rack",
                       f"rack-{broker_id - 100}", "--bootstrap-server", grpc_bootstrap, "--listener",
                       f"127.0.0.1:{port}", "--controller-quorum-voters", cluster.voters, "--metadata-dir",
                       str(root / f"broker-{broker_id}" / "metadata")]  # fmt: skip
            brokers.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
        target = asyncio.run(leader_target(cluster))
        leader = next(i for i, n in cluster.nodes.items() if n.address == target)
        controllers = {i: n.proc.pid for i, n in cluster.nodes.items() if n.proc is not None}

        async def leader_of() -> int:
            return (await cluster.wait_for_leader(timeout=60))[0]

        print(
            f"kafka_listener benchmark: 3 controllers, {len(BROKERS)} brokers, {rounds} round(s) of {duration:g} s "
            f"per phase; active controller {leader} (gRPC {target}, Kafka 127.0.0.1:{kafka_ports[leader - 1]})"
        )
        report = asyncio.run(
            measure(
                grpc_bootstrap,
                {i: ("127.0.0.1", port) for i, port in zip(cluster.nodes, kafka_ports, strict=True)},
                leader_of,
                clients=clients,
                duration=duration,
                rounds=rounds,
                controllers=controllers,
            )
        )
        if report["failed"]:
            print(f"FAILED: {report['failed']:,} failed requests and missing topics (see the checks lines)")
        else:
            print("all requests answered without error; every topic created was found through gRPC")
        if report["kafka_clients_reopened"]:
            print("the active controller moved during the run: " + "; ".join(report["kafka_clients_reopened"]))
        if args.json:
            print(json.dumps(report, indent=2))
        return 1 if report["failed"] else 0
    finally:
        for b in brokers:
            b.kill()
            b.wait()
        cluster.stop()
        for n in cluster.nodes.values():
            n.kill()
        if args.keep:
            print(f"data directories and logs kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=3.0, help="seconds per phase (one front, one shape, one round)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--clients", default="1,16", help="concurrent callers, comma-separated")
    p.add_argument("--quick", action="store_true", help="1 round of 1 s per phase (about 35 s in all)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dir", help="where the data directories go (default: the repository's disk)")
    p.add_argument("--keep", action="store_true", help="keep the data directories and logs")
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a controller setting (repeatable), e.g. controller.quorum.fetch.timeout.ms=10000 on a busy machine",
    )
    return run(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
