"""CreateTopics benchmark: a 3-node controller cluster (processes) with 6 broker agents, fsync on.

    python benchmarks/create_topics.py [--duration 5] [--quick] [--json] [--dir DIR]

Prints, measured in one run:
- topics/s and p50/p99 latency with 1, 16 and 128 concurrent clients, one topic (3 partitions x RF 3) per
  CreateTopics request, each client waiting for its answer before sending the next (closed loop);
- topics/s with 100 topics per request;
- p50/p99 at a fixed offered load of 500 topics/s (open loop; latency from the scheduled time);
- the time to create one topic of 1,000 partitions (p50, p99 of N trials);
- the elections (and pre-votes) the controllers started during those phases, each with the reason its node gave:
  a healthy leader under this load should never be deposed (target 0);
- beside them, measured in the same run: a raw grpc.aio echo server's rate at the same concurrency (same
  request shape, in its own process) and the raw Raft append rate (AppendRecords of the same 4 records a topic
  costs, through the same leader), with the ratios;
- the cost of TLS: topics/s (and p50/p99) with TLS off and on, each on a fresh cluster of the same shape (3
  controllers, 3 brokers) started for it — on, every process on mutual TLS with its own certificate from a private CA
  (``pykraft.security.ca``) in a temporary directory, and the client ``AdminClient(tls=...)`` — the same clients
  through ``AdminClient`` in both, and the ratio (``--tls-clients``, default 16).

Clients run in their own process (the benchmark's), as a user's would. Beside each closed-loop figure, the CPU
time each process spent per topic (from /proc, Linux only): the leader, the two followers, the clients, and for the
echo server the same — what the 2-core budget allows, measured rather than guessed.

Only successful requests count in a latency or a rate (a CreateTopics request only if every topic in it was
created); failures (error codes, per-topic ones included, gRPC errors, timeouts) are counted by code beside the
figures (a request counts once among the failed, each of its failing topics once under its code), and any
failure FAILS every acceptance target. Rates are over the time measured from the first request sent to the last
answer received.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from _stats import Tally, acceptance, error_name, errors_text, log_events, ratio  # noqa: E402

from controller.records import PartitionRecord, TopicRecord, Uuid, serialize  # noqa: E402
from pykraft.api import controller_pb2 as pb  # noqa: E402
from pykraft.api import controller_pb2_grpc as pb_grpc  # noqa: E402
from pykraft.client import AdminClient, AdminError, NewTopic  # noqa: E402
from pykraft.security.ca import ensure_cluster_certificates  # noqa: E402
from pykraft.security.tls import TlsSettings  # noqa: E402
from pykraft.testing import Cluster, free_ports  # noqa: E402
from quorum.transport.pb import quorum_pb2 as qpb  # noqa: E402
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc  # noqa: E402

RPC_TIMEOUT_S = 35  # a gRPC deadline beyond the requests' own 30 s: a request that hangs is counted, as an error


def failed_codes(resp: pb.CreateTopicsResponse, topics: int) -> list[str]:
    """The codes a CreateTopics answer for ``topics`` topics failed with: its own, else each topic's that is not
    NONE (a topic answered TOPIC_ALREADY_EXISTS was not created), and one per topic left unanswered. Empty if every
    topic was created."""
    if resp.error_code:
        return [error_name(resp.error_code)]
    codes = [error_name(t.error_code) for t in resp.topics if t.error_code]
    return codes + ["no result for the topic"] * max(0, topics - len(resp.topics))


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far, its children's that ended included (a node's snapshots are
    written by forked children) (Linux /proc), or None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU time per process over a phase: ``{name: seconds}`` (this process counted as "clients")."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        self.clients = time.process_time()

    def used(self) -> dict[str, float]:
        out = {"clients": time.process_time() - self.clients}
        for name, pid in self.pids.items():
            now, then = cpu_seconds(pid), self.before[name]
            if now is not None and then is not None:
                out[name] = now - then
        return out


def per_topic_us(used: dict[str, float], done: float) -> str:
    return ", ".join(f"{name} {seconds / done * 1e6:,.0f}" for name, seconds in used.items()) if done else "-"


def topic_request(names: list[str], partitions: int = 3, rf: int = 3) -> pb.CreateTopicsRequest:
    req = pb.CreateTopicsRequest(timeout_ms=30_000)
    for name in names:
        req.topics.add(name=name, num_partitions=partitions, replication_factor=rf)
    return req


# -- the raw gRPC baseline: an echo server answering CreateTopics with a canned response ------------------------


def echo_main(port: int) -> int:
    from pykraft.node import run_loop

    class Echo(pb_grpc.ControllerServicer):
        async def CreateTopics(self, request, context):
            out = pb.CreateTopicsResponse()
            for t in request.topics:
                out.topics.add(name=t.name, topic_id="AAAAAAAAAAAAAAAAAAAAqw", num_partitions=3, replication_factor=3)
            return out

    async def main() -> int:
        server = grpc.aio.server()
        pb_grpc.add_ControllerServicer_to_server(Echo(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()
        return 0

    return run_loop(main())


async def create_counted(
    stub: pb_grpc.ControllerStub, tally: Tally, request: pb.CreateTopicsRequest, since: float
) -> None:
    """One CreateTopics into ``tally``: a success (every topic created) with its latency from ``since``, or a
    failure counted by its gRPC status or by each failing topic's code."""
    try:
        resp = await stub.CreateTopics(request, timeout=RPC_TIMEOUT_S)
    except grpc.aio.AioRpcError as e:
        tally.answered()
        tally.exception(e)
        return
    done = tally.answered()
    codes = failed_codes(resp, len(request.topics))
    if codes:
        tally.failure(*codes)
    else:
        tally.success((done - since) * 1000)


async def closed_loop(target: str, clients: int, duration: float, per_request: int, prefix: str) -> dict:
    """Each client sends CreateTopics for ``per_request`` new topics, waits, repeats, until ``duration``. A request
    counts (its latency, its topics) only if every topic in it was created; the others are counted by code."""
    tally = Tally()
    stop = time.perf_counter() + duration
    channels = [grpc.aio.insecure_channel(target) for _ in range(min(clients, 8))]
    stubs = [pb_grpc.ControllerStub(ch) for ch in channels]

    async def client(i: int) -> None:
        n = 0
        stub = stubs[i % len(stubs)]
        while time.perf_counter() < stop:
            names = [f"{prefix}-{i}-{n}-{k}" for k in range(per_request)]
            n += 1
            await create_counted(stub, tally, topic_request(names), tally.sent())

    await asyncio.gather(*(client(i) for i in range(clients)))
    for ch in channels:
        await ch.close()
    return {
        "clients": clients,
        "topics_per_request": per_request,
        "created": tally.ok * per_request,
        "topics_per_s": tally.rate(tally.ok * per_request),
        "requests_per_s": tally.rate(),
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        **tally.summary(),
    }


async def open_loop(target: str, rate: int, duration: float, prefix: str) -> dict:
    """``rate`` requests/s on a fixed schedule, whatever the answers; latency from the scheduled time."""
    tally = Tally()
    async with grpc.aio.insecure_channel(target) as ch:
        stub = pb_grpc.ControllerStub(ch)
        tasks = []
        start = time.perf_counter()

        async def one(i: int, scheduled: float) -> None:
            tally.sent()
            await create_counted(stub, tally, topic_request([f"{prefix}-{i}"]), scheduled)

        for i in range(int(rate * duration)):
            scheduled = start + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, scheduled)))
        await asyncio.gather(*tasks)
    return {
        "offered_per_s": rate,
        "achieved_per_s": tally.rate(),
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        **tally.summary(),
    }


async def big_topic(target: str, trials: int) -> dict:
    tally = Tally()
    async with grpc.aio.insecure_channel(target) as ch:
        stub = pb_grpc.ControllerStub(ch)
        for i in range(trials):
            await create_counted(stub, tally, topic_request([f"big-{i}"], partitions=1000), tally.sent())
    return {
        "partitions": 1000,
        "trials": trials,
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        **tally.summary(),
    }


async def raw_raft(target: str, clients: int, duration: float) -> dict:
    """AppendRecords of the 4 records one topic costs, through the same leader: Raft without the controller."""
    tid = Uuid.random()
    records = [serialize(TopicRecord(name="raw", topic_id=tid))] + [
        serialize(
            PartitionRecord(
                partition_id=p,
                topic_id=tid,
                replicas=[1, 2, 3],
                isr=[1, 2, 3],
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            )
        )
        for p in range(3)
    ]
    tally = Tally()
    stop = time.perf_counter() + duration
    async with grpc.aio.insecure_channel(target) as ch:
        stub = qpb_grpc.QuorumAdminStub(ch)

        async def client() -> None:
            while time.perf_counter() < stop:
                t = tally.sent()
                try:
                    r = await stub.AppendRecords(
                        qpb.AppendRecordsRequest(records=records, atomic=True), timeout=RPC_TIMEOUT_S
                    )
                except grpc.aio.AioRpcError as e:
                    tally.answered()
                    tally.exception(e)
                    continue
                done = tally.answered()
                if r.error_code:
                    tally.failure(error_name(r.error_code))
                else:
                    tally.success((done - t) * 1000)

        await asyncio.gather(*(client() for _ in range(clients)))
    return {"clients": clients, "appends_per_s": tally.rate(), **tally.summary()}


async def echo_rate(port: int, clients: int, duration: float, per_request: int) -> dict:
    return await closed_loop(f"127.0.0.1:{port}", clients, duration, per_request, "echo")


async def wait_brokers(target: str, n: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with grpc.aio.insecure_channel(target) as ch:
        stub = pb_grpc.ControllerStub(ch)
        while time.monotonic() < deadline:
            try:
                r = await stub.DescribeCluster(pb.DescribeClusterRequest(), timeout=2)
                if r.error_code == 0 and sum(1 for b in r.brokers if not b.fenced) >= n:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.2)
    raise TimeoutError("brokers did not all register and unfence")


async def leader_target(cluster: Cluster) -> str:
    leader, _ = await cluster.wait_for_leader(timeout=60)
    return cluster.nodes[leader].address


# -- TLS off and on: the same load through AdminClient on two fresh clusters of the same shape ------------------

TLS_BROKERS = (101, 102, 103)


async def admin_closed_loop(admin: AdminClient, clients: int, duration: float, prefix: str) -> dict:
    """:func:`closed_loop` through ``AdminClient.create_topics``: one topic (3 partitions x RF 3) per request."""
    tally = Tally()
    stop = time.perf_counter() + duration

    async def client(i: int) -> None:
        n = 0
        while time.perf_counter() < stop:
            name = f"{prefix}-{i}-{n}"
            n += 1
            since = tally.sent()
            try:
                result = (await admin.create_topics([NewTopic(name, 3, 3)]))[name]
            except AdminError as e:
                tally.answered()
                tally.exception(e)
                continue
            done = tally.answered()
            if result.error_code:
                tally.failure(error_name(result.error_code))
            else:
                tally.success((done - since) * 1000)

    await asyncio.gather(*(client(i) for i in range(clients)))
    return {
        "clients": clients,
        "created": tally.ok,
        "topics_per_s": tally.rate(tally.ok),
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        **tally.summary(),
    }


async def admin_ready(admin: AdminClient, brokers: int, timeout: float = 60) -> None:
    """A controller answers and ``brokers`` brokers are unfenced."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            cluster = await admin.describe_cluster()
            if sum(1 for b in cluster.brokers if not b.fenced) >= brokers:
                return
        except AdminError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError("brokers did not all register and unfence")


def tls_phase(base: Path, tls: bool, clients: int, duration: float) -> dict:
    """A fresh cluster (3 controllers, 3 brokers), on mutual TLS or not, measured with ``clients`` AdminClient
    callers for ``duration`` (after a short warm-up), then stopped and removed."""
    root = Path(tempfile.mkdtemp(prefix="tls-on-" if tls else "tls-off-", dir=base))
    names = [f"controller-{i}" for i in (1, 2, 3)] + [f"broker-{b}" for b in TLS_BROKERS] + ["admin"]
    certs = ensure_cluster_certificates(root / "tls", names) if tls else {}

    def settings(name: str) -> list[str]:
        return [a for k, v in certs[name].properties().items() for a in ("--override", f"{k}={v}")] if tls else []

    cluster = Cluster(root, 3, extra_args=["--override", "metadata.max.idle.interval.ms=0"])
    for node_id, node in cluster.nodes.items():
        node.args += settings(f"controller-{node_id}")
    bootstrap = ",".join(n.address for n in cluster.nodes.values())
    client_tls = None
    if tls:
        files = certs["admin"]
        client_tls = TlsSettings(certificate=files.certificate, key=files.key, ca=files.ca)
    brokers: list[subprocess.Popen] = []
    try:
        cluster.start()
        for broker_id, port in zip(TLS_BROKERS, free_ports(len(TLS_BROKERS)), strict=True):
            log = (root / f"broker-{broker_id}.log").open("ab")
            command = [sys.executable, "-m", "pykraft", "broker", "--broker-id", str(broker_id), "--bootstrap-server",
                       bootstrap, "--listener", f"127.0.0.1:{port}", "--controller-quorum-voters", cluster.voters,
                       "--metadata-dir", str(root / f"broker-{broker_id}" / "metadata"),
                       *settings(f"broker-{broker_id}")]  # fmt: skip
            brokers.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))

        async def measure() -> dict:
            async with AdminClient(bootstrap, tls=client_tls, request_timeout_ms=30_000) as admin:
                await admin_ready(admin, len(TLS_BROKERS))
                await admin_closed_loop(admin, clients, min(duration, 1.0), "warmup")
                return await admin_closed_loop(admin, clients, duration, "t")

        return {"tls": tls, **asyncio.run(measure())}
    finally:
        for b in brokers:
            b.kill()
            b.wait()
        cluster.stop()
        for n in cluster.nodes.values():
            n.kill()
        shutil.rmtree(root, ignore_errors=True)


def tls_cost(base: Path, clients: int, duration: float) -> dict:
    """TLS off, then on, each on its own fresh cluster; printed beside each other with the ratio."""
    off = tls_phase(base, False, clients, duration)
    on = tls_phase(base, True, clients, duration)
    cost = {"off": off, "on": on, "ratio": ratio(on["topics_per_s"], off["topics_per_s"])}
    print(
        f"TLS, {clients} clients through AdminClient, 1 topic/request (fresh 3-controller, 3-broker clusters): "
        f"off {off['topics_per_s']:,.0f} topics/s (p50 {off['p50_ms']:.1f} ms, p99 {off['p99_ms']:.1f} ms) | "
        f"on {on['topics_per_s']:,.0f} topics/s (p50 {on['p50_ms']:.1f} ms, p99 {on['p99_ms']:.1f} ms) | "
        f"on/off {cost['ratio']:.2f}"
    )
    print(f"       off: {errors_text(off)} | on: {errors_text(on)}")
    return cost


def candidacies_since(cluster: Cluster, marks: dict[int, int]) -> list[tuple[str, str]]:
    """The pre-votes (role Prospective) and elections (Candidate) the nodes started after ``marks`` (each log's
    size then): the role, and a line with the node, the epoch and the reason the node gave."""
    out = []
    for node_id, node in cluster.nodes.items():
        for e in log_events(node.log_path, "role_changed", marks[node_id]):
            if e.get("role") in ("Prospective", "Candidate"):
                out.append((e["role"], f"node {node_id} {e['role']} in epoch {e.get('epoch')}: {e.get('reason')}"))
    return out


def run(args: argparse.Namespace) -> int:
    duration = 1.5 if args.quick else args.duration
    trials = 5 if args.quick else 20
    base = Path(args.dir) if args.dir else ROOT
    root = Path(tempfile.mkdtemp(prefix="topics-bench-", dir=base))
    report: dict = {"closed_loop": [], "echo": [], "raw_raft": []}
    echo_port = free_ports(1)[0]
    echo = subprocess.Popen([sys.executable, __file__, "--echo-server", str(echo_port)], stdout=subprocess.PIPE)
    # unsafe.raw.append.enable=true: the raw Raft baseline writes its records with the admin AppendRecords RPC,
    # which a node refuses unless started with it (raw records skip the controller's checks: not for production).
    overrides = ["metadata.max.idle.interval.ms=0", "unsafe.raw.append.enable=true"]
    cluster = Cluster(root, 3, extra_args=[arg for o in overrides for arg in ("--override", o)])
    brokers: list[subprocess.Popen] = []

    def stop_all() -> None:
        for b in brokers:
            b.kill()
            b.wait()
        cluster.stop()
        for n in cluster.nodes.values():
            n.kill()
        echo.kill()
        echo.wait()

    try:
        assert echo.stdout is not None and echo.stdout.readline().strip() == b"ready"
        cluster.start()
        target = asyncio.run(leader_target(cluster))
        bootstrap = ",".join(n.address for n in cluster.nodes.values())
        for j in range(6):
            log = (root / f"broker-{101 + j}.log").open("ab")
            brokers.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "pykraft",
                        "broker",
                        "--broker-id",
                        str(101 + j),
                        "--rack",
                        f"rack-{j % 3 + 1}",
                        "--bootstrap-server",
                        bootstrap,
                        # Raft observers with their own image, as `cluster up` starts them: a broker without one
                        # polls every topic's description each heartbeat, seconds of the leader's time per poll at
                        # tens of thousands of topics (a hidden load that slowed later phases and cost elections).
                        "--controller-quorum-voters",
                        cluster.voters,
                        "--metadata-dir",
                        str(root / f"broker-{101 + j}" / "metadata"),
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
        asyncio.run(wait_brokers(target, 6))
        target = asyncio.run(leader_target(cluster))
        print(f"pykraft create_topics benchmark: 3 controllers, 6 brokers, leader at {target}; data in {root}")
        report["warmup"] = asyncio.run(closed_loop(target, 16, min(duration, 1.0), 1, "warmup"))
        if report["warmup"]["failed"]:
            print(f"warm-up: {errors_text(report['warmup'])}")
        leader_id = next(i for i, n in cluster.nodes.items() if n.address == target)
        log_marks = {i: n.log_path.stat().st_size for i, n in cluster.nodes.items()}
        nodes = {"leader": leader_id, **{f"follower {i}": i for i in cluster.nodes if i != leader_id}}
        node_pids = {name: cluster.nodes[i].proc.pid for name, i in nodes.items()}  # type: ignore[union-attr]

        def closed_loop_measured(clients: int, per_request: int, prefix: str) -> dict:
            meter = CpuMeter(node_pids)
            r = asyncio.run(closed_loop(target, clients, duration, per_request, prefix))
            r["cpu_s"] = meter.used()
            return r

        for clients in (1, 16, 128):
            meter = CpuMeter({"echo server": echo.pid})
            e = asyncio.run(echo_rate(echo_port, clients, duration, 1))
            e["cpu_s"] = meter.used()
            r = closed_loop_measured(clients, 1, f"c{clients}")
            raw = asyncio.run(raw_raft(target, clients, duration))
            report["echo"].append(e)
            report["closed_loop"].append(r)
            report["raw_raft"].append(raw)
            print(
                f"{clients:>4} clients, 1 topic/request: {r['topics_per_s']:>7,.0f} topics/s, "
                f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms | "
                f"raw grpc.aio echo {e['requests_per_s']:>7,.0f}/s "
                f"(ratio {ratio(r['topics_per_s'], e['requests_per_s']):.2f}) | raw Raft append "
                f"{raw['appends_per_s']:>7,.0f}/s (ratio {ratio(r['topics_per_s'], raw['appends_per_s']):.2f})"
            )
            print(f"       {errors_text(r)} | echo {errors_text(e)} | raw Raft {errors_text(raw)}")
            print(
                f"       CPU us per topic: {per_topic_us(r['cpu_s'], r['created'])} | "
                f"per echo: {per_topic_us(e['cpu_s'], e['created'])}"
            )
        r = closed_loop_measured(16, 100, "batch")
        report["batch_100"] = r
        print(
            f"  16 clients, 100 topics/request: {r['topics_per_s']:>7,.0f} topics/s, p50 {r['p50_ms']:.1f} ms, "
            f"p99 {r['p99_ms']:.1f} ms, {errors_text(r)}"
        )
        print(f"       CPU us per topic: {per_topic_us(r['cpu_s'], r['created'])}")
        r = asyncio.run(open_loop(target, 500, duration, "open"))
        report["open_500"] = r
        print(
            f"offered 500 topics/s: achieved {r['achieved_per_s']:,.0f}/s, p50 {r['p50_ms']:.1f} ms, "
            f"p99 {r['p99_ms']:.1f} ms, {errors_text(r)}"
        )
        r = asyncio.run(big_topic(target, trials))
        report["big_topic"] = r
        print(
            f"one topic of 1,000 partitions: p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms "
            f"({r['ok']} of {trials} trials created it; {errors_text(r)})"
        )
        top = report["closed_loop"][-1]
        echo128 = report["echo"][-1]
        cores = os.cpu_count() or 1
        stood = candidacies_since(cluster, log_marks)
        report["elections"] = sum(role == "Candidate" for role, _ in stood)
        report["pre_votes"] = sum(role == "Prospective" for role, _ in stood)
        print(
            f"elections during the measured phases: {report['elections']} (target 0); pre-votes started: "
            f"{report['pre_votes']} (a pre-vote the other voters refuse disturbs nothing)"
        )
        for _, line in stood:
            print(f"  {line}")
        print()
        stop_all()  # the TLS comparison gets the machine to itself: two fresh clusters, one after the other
        report["tls"] = tls_cost(base, args.tls_clients, duration)
        print(f"\nCPU budget (this machine: {cores} cores):")
        for label, r, target_rate in (
            ("128 clients x 1 topic", top, 0.5 * echo128["requests_per_s"]),
            ("16 clients x 100 topics", report["batch_100"], 20_000),
        ):
            topics = r["created"]
            if not topics or "leader" not in r["cpu_s"]:
                continue
            total = sum(r["cpu_s"].values()) / topics
            leader = r["cpu_s"]["leader"] / topics
            print(
                f"  {label}: {total * 1e6:,.0f} us of CPU per topic in all processes -> at most "
                f"{cores / total:,.0f} topics/s with all {cores} cores busy; the leader ({leader * 1e6:,.0f} us, "
                f"one core at most) -> {1 / leader:,.0f}/s; the target {target_rate:,.0f}/s needs "
                f"{target_rate * total:.1f} cores at this cost"
            )
        print("\nacceptance (issue targets):")
        checks = [
            ("128 clients, 1 topic/request >= 1,500 topics/s", top["topics_per_s"] >= 1500),
            ("... and >= 0.5x the raw grpc.aio echo rate", top["topics_per_s"] >= 0.5 * echo128["requests_per_s"]),
            ("100 topics/request >= 20,000 topics/s", report["batch_100"]["topics_per_s"] >= 20_000),
            ("p99 <= 30 ms at 500 topics/s offered", report["open_500"]["p99_ms"] <= 30),
            ("1,000-partition topic p50 <= 100 ms", report["big_topic"]["p50_ms"] <= 100),
            ("no election during the measured phases", report["elections"] == 0),
        ]
        measured = {"warm-up": report["warmup"]}
        for kind in ("closed_loop", "echo", "raw_raft"):
            measured.update({f"{kind} {x['clients']} clients": x for x in report[kind]})
        measured.update({k: report[k] for k in ("batch_100", "open_500", "big_topic")})
        measured.update({f"TLS {k}": report["tls"][k] for k in ("off", "on")})
        report["checks"] = acceptance(checks, measured)
        if args.json:
            print(json.dumps(report))
    finally:
        stop_all()
        shutil.rmtree(root, ignore_errors=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--tls-clients", type=int, default=16, help="concurrent clients of the TLS off/on comparison")
    p.add_argument("--dir", help="where the data directories go (default: the repository's disk)")
    p.add_argument("--echo-server", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.echo_server:
        return echo_main(args.echo_server)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
