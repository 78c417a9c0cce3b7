"""Scale benchmark: 3 controllers and 6 brokers (Raft observers) holding millions of partitions, fsync on.

    python benchmarks/scale.py [--partitions 2000000] [--quick] [--json] [--dir DIR] [--brokers 6]
                               [--trials N] [--idle-minutes M] [--appender-seconds S] [--keep]

Prints, measured in one run, each figure beside its target (PASS/FAIL):
- creating N partitions (topics of 100 partitions, RF 3, 99 topics per CreateTopics request, 4 requests in
  flight): the time from the first request until every controller and observer holds and has applied what the
  leader had committed by the last answer (target <= 90 s at 2M), with a progress line every 15 s, and the ISR
  shrinks and expansions the brokers' leaders made meanwhile (and again at the end, from the creation on): churn
  after the creation loads every node through the phases that follow;
- memory: each controller's and broker's RSS (/proc VmRSS) minus the same process's RSS with the cluster empty,
  per partition the leader holds (target <= 400 B), once every broker's replica manager holds the partitions its
  image holds (``pykraft_broker_replicas_applied_offset``; it applies them after the image, and how long after
  the catch-up is printed);
- a controller restarted at N partitions (after ``pykraft snapshot create`` on it, as an operator does before
  maintenance, then SIGTERM): exec to ready — its log end and applied offset (its metrics) at the leader's high
  watermark — with ``snapshot_loaded``'s records/s; then it is made the active controller (the leader stopped
  gracefully and restarted until it is) and its DescribeTopics of every topic compared with the leader's before
  the restart. The same restart for a broker: exec to its ``metadata_caught_up`` line (its image holds the high
  watermark it last heard of) (target <= 5 s each); its clean stop ends with a snapshot of its image
  (``shutdown_snapshot``), printed beside the stop's duration. The product's modules are byte-compiled first, as pip
  compiles an installed package (``make bytecode``): an editable install's sources would otherwise be compiled
  again at each start wherever PYTHONDONTWRITEBYTECODE is set, as on this machine;
- a snapshot of N partitions forced on the leader (the CreateSnapshot request until frozen, and
  ``snapshot_generated``'s own seconds; target <= 10 s) while one client creates 1 topic/request at 200
  requests/s on a fixed schedule: its p50/p99 from the scheduled times during the snapshot (target p99 <= 50 ms)
  and just before without one (the baseline; every node snapshots first, so no policy snapshot lands in it);
- kill -9 of the active controller: the time until a CreateTopics is accepted again (a new one to each surviving
  controller every 10 ms, each given 1 s), median of trials, vs the same on the empty cluster first (<= 1.5x);
- a follower stopped, its data directory deleted, started: snapshot bytes / time from exec to
  ``snapshot_installed`` (target >= 100 MiB/s), beside the fetch itself (``snapshot_fetch_started`` to installed),
  a file copy + fsync of the same snapshot and a raw loopback gRPC transfer of it in the same 8 MiB requests;
- a second, small cluster (10,000 partitions) with metadata.max.retention.ms=30000,
  metadata.log.max.snapshot.interval.ms=20000 and 16 KiB segments, left idle M minutes (10; 1 with --quick):
  segments, snapshots and bytes per node each minute, and a bound asserted after the first minute;
- CPU seconds per process beside every phase (/proc utime+stime, and its ended children's: a node's snapshots are
  written by forked children), their share of the machine's cores and the machine's load average (it is shared:
  other work shows there), so a CPU wall shows as one.

The brokers run at nice 10 (see ``BROKER_NICE``). Only successful requests count in a latency or a rate; failures
are counted by code beside the figures and fail the target measured over them (see ``_stats.py``). A client's retry
after NOT_CONTROLLER (a leader change) is counted as a failed attempt. The main cluster uses Kafka's defaults except
segments of 8 MiB and metadata.max.retention.bytes of 100 MiB at 2M partitions, both scaled with the partition count
so that a small run also rolls segments, deletes them and sends snapshots. The run stops (saying where and why, with
what it measured) if the machine's available memory falls under 3 GiB. Without a ``pykraft broker`` that is a Raft
observer (``--metadata-dir``), stub brokers (registration and heartbeats, one process) stand in and the broker
figures are reported as not measured. Brokers are killed (-9) at the end: a controlled shutdown of millions of
leaderships measures nothing here and takes minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from _stats import (  # noqa: E402
    Tally,
    acceptance,
    compile_product,
    error_name,
    errors_text,
    log_events,
    median,
    metrics_text,
    parse_stage_metrics,
    prometheus_samples,
    ratio,
    rss_bytes,
)
from create_topics import cpu_seconds, failed_codes, topic_request  # noqa: E402

from pykraft.api import controller_pb2 as pb  # noqa: E402
from pykraft.api import controller_pb2_grpc as pb_grpc  # noqa: E402
from pykraft.testing import Cluster, free_ports  # noqa: E402
from quorum.errors import Errors  # noqa: E402
from quorum.log.log import MAX_RETAINED_SNAPSHOTS, METADATA_PARTITION_DIR  # noqa: E402
from quorum.raft.runtime import CLEAN_INTERVAL_S  # noqa: E402

FULL_PARTITIONS = 2_000_000
QUICK_PARTITIONS = 50_000
PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 99  # 99 x (1 TopicRecord + 100 PartitionRecords) = 9,999 records: under Kafka's 10,000 per op
IN_FLIGHT = 4
RACKS = ("rack-1", "rack-2", "rack-3")
APPENDER_RATE = 200  # requests/s, 1 topic (3 partitions, RF 3) each
CHUNK_BYTES = 8 * 1024 * 1024  # Raft's fetch_max_bytes: a FetchSnapshot answer's size
BIG_MESSAGES = [("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.max_send_message_length", 64 << 20)]
IDLE_OVERRIDES = {
    "metadata.max.retention.ms": 30_000,
    "metadata.log.max.snapshot.interval.ms": 20_000,
    "metadata.log.segment.bytes": 16 * 1024,
}
IDLE_PARTITIONS = 10_000
# The quorum runs at normal priority, the six brokers sharing its two cores at nice 10: as etcd's tuning guide
# advises for etcd, the consensus processes must not be starved by their neighbours (in production the controllers
# would have machines of their own). Without it, at ~800k partitions a starved leader missed its followers' fetch
# timeout, elections followed, brokers' heartbeats timed out and fencing them added records faster than they
# were committed. At nice 10 the brokers' heartbeats used to miss broker.session.timeout.ms, their loops starved;
# heartbeats now have a thread of their own (pykraft/loop_thread.py), so the brokers take the lower priority.
BROKER_NICE = 10
REPLICAS_APPLIED_TIMEOUT_S = 600  # the wait for the brokers' replica managers before memory is measured
MEMORY_FLOOR = 3 * 2**30  # stop the run when the machine has less available than this (it is shared)
NOT_CONTROLLER = int(Errors.NOT_CONTROLLER)
TOPIC_ALREADY_EXISTS = int(Errors.TOPIC_ALREADY_EXISTS)
STARTED: list[Bench] = []  # every cluster started, so an interrupted run still ends its processes

# The targets (at 2,000,000 partitions).
CREATE_TARGET_S = 90.0
BYTES_PER_PARTITION_TARGET = 400
RESTART_TARGET_S = 5.0
SNAPSHOT_TARGET_S = 10.0
APPENDER_P99_TARGET_MS = 50.0
FAILOVER_RATIO_TARGET = 1.5
INSTALL_TARGET_MIB_S = 100.0
END_CATCH_UP_S = 15.0  # how long every node may take, at the end, to hold and apply what was committed by then
# A broker's scrape at the end may take this long (Prometheus's default scrape_timeout) before it counts as not
# answering: at 2M partitions, brokers busy with a restarted peer's ISR expansions answered in more than 2 s, and
# "did not answer" then hid whether their images were caught up.
END_SCRAPE_TIMEOUT_S = 10.0


# -- processes, their metrics and their logs ------------------------------------------------------------------


def scrape(port: int, timeout: float = 2.0) -> dict[str, float] | None:
    """A node's Prometheus metrics as ``{name: value}`` (the first sample of each; ``role`` from the state gauge),
    or None while it does not answer."""
    text = metrics_text(port, timeout)
    if text is None:
        return None
    out: dict[str, Any] = {}
    for name, labels, value in prometheus_samples(text):
        if name == "kafka_raft_current_state":
            if value == 1.0:
                out["role"] = labels["state"]
            continue
        out.setdefault(name, value)
    return out


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def wall_time(item: dict[str, Any]) -> float:
    """A log line's ISO timestamp as seconds since the epoch (``time.time()``'s clock)."""
    return datetime.fromisoformat(item["timestamp"]).timestamp()


def metadata_files(data_dir: Path) -> dict[str, int]:
    """What a node keeps on disk: segments, snapshots, snapshots being written, and all their bytes."""
    d = data_dir / METADATA_PARTITION_DIR
    segments = snapshots = parts = size = 0
    try:
        entries = list(d.iterdir())
    except OSError:
        entries = []
    for p in entries:
        try:
            size += p.stat().st_size
        except OSError:
            continue  # deleted meanwhile
        if p.name.endswith(".log"):
            segments += 1
        elif p.name.endswith(".checkpoint"):
            snapshots += 1
        elif p.name.endswith(".checkpoint.part"):
            parts += 1
    return {"segments": segments, "snapshots": snapshots, "partial_snapshots": parts, "bytes": size}


class NotLeader(Exception):
    """The node asked is not (or no longer) the active controller."""


@dataclass
class BrokerProcess:
    """One ``pykraft broker``: a Raft observer with its own metadata directory, ended by its own PID only."""

    broker_id: int
    rack: str
    args: list[str]
    data_dir: Path
    log_path: Path
    listener_port: int
    metrics_port: int
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(
                self.args,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=lambda: os.nice(BROKER_NICE),
            )

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def terminate(self, timeout: float = 60) -> int:
        assert self.proc is not None
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)


def observer_brokers_available() -> bool:
    """Is ``pykraft broker`` a Raft observer in this tree (``--metadata-dir``)?"""
    out = subprocess.run(
        [sys.executable, "-m", "pykraft", "broker", "--help"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    return "--metadata-dir" in out.stdout


# -- the stub brokers (when brokers are not observers yet): registration and heartbeats, nothing else ------------


def stub_brokers_main(bootstrap: str, count: int) -> int:
    from pykraft.client import AdminClient, AdminError
    from pykraft.node import run_loop
    from quorum.errors import Errors
    from quorum.log.message import Uuid

    async def broker(admin: AdminClient, broker_id: int, rack: str, port: int, registered: asyncio.Event) -> None:
        async def register() -> int:
            while True:
                try:
                    return await admin.register_broker(
                        broker_id, str(Uuid.random()), rack, [("PLAINTEXT", "127.0.0.1", port)]
                    )
                except AdminError:
                    await asyncio.sleep(0.5)

        epoch = await register()
        registered.set()
        offset = -1
        fenced = True
        while True:
            try:
                r = await admin.heartbeat(broker_id, epoch, offset)
                offset = max(offset, r.metadata_offset)
                fenced = r.is_fenced
            except AdminError as e:
                if e.code in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                    epoch = await register()
            await asyncio.sleep(0.1 if fenced else 1.0)

    async def main() -> int:
        admin = AdminClient(bootstrap, request_timeout_ms=5000, default_api_timeout_ms=15_000)
        ports = free_ports(count)
        events = [asyncio.Event() for _ in range(count)]
        tasks = [asyncio.create_task(broker(admin, 101 + j, RACKS[j % 3], ports[j], events[j])) for j in range(count)]
        await asyncio.gather(*(e.wait() for e in events))
        print("ready", flush=True)
        await asyncio.gather(*tasks)
        return 0

    return run_loop(main())


# -- the raw gRPC baseline for snapshot transfer: a server answering byte ranges of a file ------------------------


def chunk_server_main(port: int, path: str) -> int:
    from pykraft.node import run_loop

    async def read(request: bytes, context: Any) -> bytes:
        position = int.from_bytes(request, "big")
        with open(path, "rb") as f:  # as the leader does: a read of the snapshot file per request
            f.seek(position)
            return f.read(CHUNK_BYTES)

    async def main() -> int:
        server = grpc.aio.server(options=BIG_MESSAGES)
        handler = grpc.unary_unary_rpc_method_handler(read)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Chunks", {"Read": handler}),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()
        return 0

    return run_loop(main())


async def raw_grpc_rate(port: int, size: int) -> float:
    """Bytes/s fetching ``size`` bytes from the chunk server, one 8 MiB request after another."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=BIG_MESSAGES) as ch:
        read = ch.unary_unary("/bench.Chunks/Read")
        await read((0).to_bytes(8, "big"), timeout=30)  # connected and warm
        started = time.perf_counter()
        position = 0
        while position < size:
            data = await read(position.to_bytes(8, "big"), timeout=30)
            if not data:
                break
            position += len(data)
        return position / (time.perf_counter() - started)


def file_copy_rate(source: Path, dest: Path) -> float:
    """Bytes/s copying ``source`` in 8 MiB chunks and fsyncing the copy (what installing a fetched snapshot writes)."""
    started = time.perf_counter()
    copied = 0
    with source.open("rb") as src, dest.open("wb") as out:
        while chunk := src.read(CHUNK_BYTES):
            out.write(chunk)
            copied += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    rate = copied / (time.perf_counter() - started)
    dest.unlink()
    return rate


# -- CPU per phase ---------------------------------------------------------------------------------------------


def commit_path(port: int) -> dict[str, float] | None:
    """A controller's counters of where a commit's time goes, as ``{key: value}``: ``leader/<stage>`` and
    ``follower/<stage>`` summed seconds with their ``.../samples`` (quorum/raft/hops.py) and their histograms
    as ``<side>/<stage><=<le>``, the event queue's wait as ``queue_wait<=<le>`` and CreateTopics' time in the
    controller (queued to answered) as ``create<=<le>``: cumulative counts. None while it does not answer."""
    text = metrics_text(port)
    if text is None:
        return None
    out = parse_stage_metrics(text)
    for name, labels, value in prometheus_samples(text):
        if name == "pykraft_raft_commit_stage_duration_seconds_bucket":
            out[f"{labels['side']}/{labels['stage']}<={labels['le']}"] = value
        elif name == "kafka_controller_event_queue_wait_seconds_bucket":
            out[f"queue_wait<={labels['le']}"] = value
        elif name == "kafka_controller_request_time_seconds_bucket" and labels.get("api") == "createTopics":
            key = f"create<={labels['le']}"
            out[key] = out.get(key, 0.0) + value  # every outcome
    return out


def p99_bucket(delta: dict[str, float], prefix: str) -> tuple[float, int] | None:
    """The smallest bucket bound holding 99 % of a histogram's observations in a window, and their count."""
    buckets = sorted(
        ((float(k.split("<=")[1]), v) for k, v in delta.items() if k.startswith(prefix + "<=")), key=lambda b: b[0]
    )
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    return next(le for le, count in buckets if count >= 0.99 * total), int(total)


def commit_path_text(before: dict[str, float] | None, after: dict[str, float] | None, side: str) -> str:
    """Mean ms per stage over a window (``side``: leader or follower), and the queue wait's p99 bucket."""
    if not before or not after:
        return "not measured"
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    n = delta.get(f"{side}/samples", 0.0)
    stages = [k.split("/")[1] for k in delta if k.startswith(f"{side}/") and "<=" not in k and "samples" not in k]
    parts = []
    for stage in stages if n else []:
        p99 = p99_bucket(delta, f"{side}/{stage}")
        parts.append(
            f"{stage} {delta[f'{side}/{stage}'] / n * 1000:.1f}" + (f" (p99 <= {p99[0] * 1000:g})" if p99 else "")
        )
    text = f"{int(n)} traced, mean ms from the append: " + (", ".join(parts) or "none")
    for prefix, what in (("queue_wait", "event queue wait"), ("create", "CreateTopics queued to answered")):
        p99 = p99_bucket(delta, prefix) if side == "leader" else None
        if p99:
            text += f"; {what} p99 <= {p99[0] * 1000:g} ms over {p99[1]}"
    return text


class PhaseCpu:
    """CPU seconds per process over a phase, by name; a process started during the phase counts from its exec."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.before = {name: (pid, cpu_seconds(pid)) for name, pid in bench.pids().items()}
        self.clients = time.process_time()
        self.started = time.perf_counter()

    def used(self) -> dict[str, Any]:
        out: dict[str, float] = {}
        for name, pid in self.bench.pids().items():
            now = cpu_seconds(pid)
            if now is None:
                continue
            then = self.before.get(name)
            if then is not None and then[0] == pid and then[1] is not None:
                out[name] = now - then[1]
            else:
                out[f"{name} (since exec)"] = now
        out["client"] = time.process_time() - self.clients
        return {"wall_s": time.perf_counter() - self.started, "cpu_s": out, "loadavg_1m": loadavg()}


def mem_available() -> int | None:
    """MemAvailable of /proc/meminfo, in bytes."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class OutOfMemory(Exception):
    """The machine's available memory fell below MEMORY_FLOOR: the run stopped before anything was killed by the
    kernel (the machine is shared)."""


def loadavg() -> float | None:
    """The machine's 1-minute load average: other work on the same cores shows here (this machine is shared)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpu_text(used: dict[str, Any]) -> str:
    cpu = used["cpu_s"]
    total = sum(cpu.values())
    wall = used["wall_s"]
    cores = os.cpu_count() or 1
    share = total / (wall * cores) if wall > 0 else float("nan")
    items = ", ".join(f"{name} {s:.1f}" for name, s in cpu.items())
    load = used.get("loadavg_1m")
    return (
        f"CPU s: {items} | total {total:.1f} over {wall:.1f} s wall = {share:.0%} of {cores} cores; "
        f"machine load average {load if load is not None else '?'}"
    )


# -- the benchmark ---------------------------------------------------------------------------------------------


@dataclass
class Settings:
    partitions: int
    brokers: int
    trials: int
    idle_minutes: float
    appender_window_s: float
    segment_bytes: int
    retention_bytes: int
    create_deadline_s: float = 3600.0


@dataclass
class Bench:
    root: Path
    settings: Settings
    overrides: dict[str, Any]
    observers: bool
    cluster: Cluster = field(init=False)
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)
    stub: subprocess.Popen[bytes] | None = None
    metrics_ports: dict[int, int] = field(default_factory=dict)
    topic_names: list[str] = field(default_factory=list)  # every topic this benchmark asked to create
    abort: str | None = None  # why the run was stopped early (memory), if it was
    # Brokers' progress comes from DescribeQuorum's observers and their metadata_caught_up line, not their metrics:
    # observers now export a log end and an applied offset, but a broker's exposition also lists every replica (a
    # million lines at 2M partitions) and scraping it often took a quarter of a broker's CPU. None: ask the metrics.
    broker_metrics_progress: bool | None = False
    slowest_scrape_s: dict[int, float] = field(default_factory=dict)  # per broker, in the last wait_caught_up

    def __post_init__(self) -> None:
        STARTED.append(self)
        args = [a for name, value in self.overrides.items() for a in ("--override", f"{name}={value}")]
        self.cluster = Cluster(self.root, 3, extra_args=args)
        ports = free_ports(3)
        for (node_id, node), port in zip(self.cluster.nodes.items(), ports, strict=True):
            node.args += ["--metrics-port", str(port)]
            self.metrics_ports[node_id] = port
        if self.observers:
            n = self.settings.brokers
            ports = free_ports(2 * n)
            for j in range(n):
                broker_id = 101 + j
                data_dir = self.root / f"broker{broker_id}"
                broker_args = [
                    sys.executable,
                    "-m",
                    "pykraft",
                    "broker",
                    "--broker-id",
                    str(broker_id),
                    "--rack",
                    RACKS[j % 3],
                    "--bootstrap-server",
                    self.bootstrap,
                    "--listener",
                    f"127.0.0.1:{ports[j]}",
                    "--metrics-port",
                    str(ports[n + j]),
                    "--metadata-dir",
                    str(data_dir),
                    "--controller-quorum-voters",
                    self.cluster.voters,
                    *args,
                ]
                log_path = self.root / f"broker{broker_id}.log"
                self.brokers[broker_id] = BrokerProcess(
                    broker_id, RACKS[j % 3], broker_args, data_dir, log_path, ports[j], ports[n + j]
                )

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.cluster.nodes.values())

    def pids(self) -> dict[str, int]:
        out = {f"c{i}": n.proc.pid for i, n in self.cluster.nodes.items() if n.proc is not None and n.alive}
        out.update({f"b{i}": b.proc.pid for i, b in self.brokers.items() if b.proc is not None and b.alive})
        if self.stub is not None and self.stub.poll() is None:
            out["stub brokers"] = self.stub.pid
        return out

    # -- starting and stopping

    async def start(self) -> None:
        self.cluster.start()
        await self.cluster.wait_for_leader(timeout=60)
        if self.observers:
            for b in self.brokers.values():
                b.start()
        else:
            self.stub = subprocess.Popen(
                [sys.executable, __file__, "--stub-brokers", self.bootstrap, "--count", str(self.settings.brokers)],
                stdout=subprocess.PIPE,
                stderr=(self.root / "stub-brokers.log").open("ab"),
            )
            assert self.stub.stdout is not None
            line = await asyncio.to_thread(self.stub.stdout.readline)
            assert line.strip() == b"ready", f"stub brokers did not start: {line!r}"
        await self.wait_brokers_unfenced()
        while self.brokers and self.broker_metrics_progress is None:  # asked once, while the cluster is empty
            await self.broker_progress(min(self.brokers))
            await asyncio.sleep(0.1)

    def kill_all(self) -> None:
        """kill -9 of every process started here that still runs (after an interruption)."""
        for b in self.brokers.values():
            b.kill()
        for n in self.cluster.nodes.values():
            n.kill()
        if self.stub is not None and self.stub.poll() is None:
            self.stub.kill()
            self.stub.wait()

    def stop(self) -> None:
        """kill -9 of the brokers (a controlled shutdown moves every leadership they hold: minutes at millions of
        partitions, and nothing measured here), then SIGTERM to the controllers."""
        for b in self.brokers.values():
            b.kill()
        if self.stub is not None:
            self.stub.kill()
            self.stub.wait()
        self.cluster.stop()
        for b in self.brokers.values():
            b.kill()
        for n in self.cluster.nodes.values():
            n.kill()

    async def wait_brokers_unfenced(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            leader = await self.leader_id()
            if leader is not None:
                try:
                    async with grpc.aio.insecure_channel(self.cluster.nodes[leader].address) as ch:
                        r = await pb_grpc.ControllerStub(ch).DescribeCluster(pb.DescribeClusterRequest(), timeout=5)
                    last = {b.broker_id: b.fenced for b in r.brokers}
                    if r.error_code == 0 and sum(1 for b in r.brokers if not b.fenced) >= self.settings.brokers:
                        return
                except grpc.aio.AioRpcError as e:
                    last = e.code().name
            await asyncio.sleep(0.2)
        raise TimeoutError(f"the brokers did not all register and unfence within {timeout} s (last: {last})")

    # -- who leads, how far each node is

    async def leader_id(self) -> int | None:
        for node_id, node in self.cluster.nodes.items():
            if not node.running:
                continue
            d = await self.cluster.describe(node_id)
            if d is not None and d.leader_id > 0 and self.cluster.nodes[d.leader_id].running:
                return d.leader_id
        return None

    async def leader_view(self) -> Any:
        """The leader's DescribeQuorum (high watermark, observers), or None."""
        leader = await self.leader_id()
        if leader is None:
            return None
        d = await self.cluster.describe(leader)
        return d if d is not None and d.role == "Leader" else None

    async def controller_progress(self, node_id: int) -> tuple[int, int] | None:
        """(log end offset, applied offset) of a controller, from its metrics."""
        m = await asyncio.to_thread(scrape, self.metrics_ports[node_id])
        if m is None or "kafka_controller_last_committed_offset" not in m:
            return None
        return int(m["kafka_raft_log_end_offset"]), int(m["kafka_controller_last_committed_offset"])

    async def broker_progress(self, broker_id: int) -> tuple[int, int] | None:
        """(log end offset, applied offset) of an observer broker from its metrics, or None if they have neither.
        Brokers whose metrics have no log end offset are not scraped again: their exposition lists every replica
        (a million lines at 2M partitions), and scraping it often took a quarter of a broker's CPU."""
        if self.broker_metrics_progress is False:
            return None
        m = await asyncio.to_thread(scrape, self.brokers[broker_id].metrics_port)
        if m is not None and self.broker_metrics_progress is None:
            self.broker_metrics_progress = "kafka_raft_log_end_offset" in m
        if m is None or "kafka_raft_log_end_offset" not in m:
            return None
        applied = m.get("kafka_controller_last_committed_offset", m.get("kafka_server_metadata_last_applied_offset"))
        if applied is None:
            return None
        return int(m["kafka_raft_log_end_offset"]), int(applied)

    async def lagging(self, hw: int | None = None) -> tuple[int, dict[str, str]]:
        """Every node that does not yet hold offsets below ``hw`` (default: the leader's high watermark now) or has
        not applied them: ``(hw, {name: why})``, empty once all have. A controller: its log end and applied offset
        (metrics). A broker: the same from its metrics if it exports them, else its log end as the leader last saw
        it (DescribeQuorum's observers: the offset of its latest fetch)."""
        view = await self.leader_view()
        if view is None:
            return -1, {"leader": "none"}
        if hw is None:
            hw = view.high_watermark
        behind: dict[str, str] = {}
        for node_id in self.cluster.nodes:
            p = await self.controller_progress(node_id)
            if p is None or p[0] < hw or p[1] < hw - 1:
                behind[f"c{node_id}"] = f"at {p}" if p else "no metrics"
        seen = {o.replica_id: o.log_end_offset for o in view.observers}
        for broker_id in self.brokers:
            p = await self.broker_progress(broker_id)
            if p is not None:
                if p[0] < hw or p[1] < hw - 1:
                    behind[f"b{broker_id}"] = f"at {p}"
            elif seen.get(broker_id, -1) < hw:
                behind[f"b{broker_id}"] = f"leader sees it at {seen.get(broker_id)}"
        return hw, behind

    async def wait_caught_up(self, timeout: float, poll: float = 0.1, scrape_timeout: float = 2.0) -> float:
        """Seconds until every controller and observer holds and applied what was committed when this was called
        (the leader's high watermark then: new records keep coming, NoOps and heartbeats among them). A broker's
        scrape may take ``scrape_timeout``; the slowest of each is left in :attr:`slowest_scrape_s`."""
        started = time.perf_counter()
        deadline = time.monotonic() + timeout
        view = await self.leader_view()
        while view is None and time.monotonic() < deadline:
            await asyncio.sleep(poll)
            view = await self.leader_view()
        hw = view.high_watermark if view is not None else None
        behind: dict[str, str] = {}
        while time.monotonic() < deadline:
            _, behind = await self.lagging(hw)
            if not behind:
                break
            await asyncio.sleep(poll)
        else:
            raise TimeoutError(f"not caught up with offset {hw} within {timeout} s: {behind}")
        # The leader's view of an observer is the offset it fetched; its image may apply it much later (a broker at
        # 2M was once 270,000 records behind its own log). Its metrics say what it applied: asked only now, every
        # half second, as each scrape walks the broker's replicas once.
        self.slowest_scrape_s = {}
        while hw is not None and time.monotonic() < deadline:
            behind = {}
            for broker_id in self.brokers:
                asked = time.perf_counter()
                m, applied = await self.broker_gauge(
                    broker_id, "kafka_server_metadata_last_applied_offset", scrape_timeout
                )
                took = time.perf_counter() - asked
                self.slowest_scrape_s[broker_id] = max(took, self.slowest_scrape_s.get(broker_id, 0.0))
                if applied is None or applied < hw - 1:
                    no_answer = f"its metrics did not answer within {scrape_timeout:.0f} s"
                    behind[f"b{broker_id}"] = f"applied {applied} (scrape {took:.1f} s)" if m else no_answer
            if not behind:
                return time.perf_counter() - started
            await asyncio.sleep(0.5)
        raise TimeoutError(f"brokers' images not caught up with offset {hw} within {timeout} s: {behind}")

    async def broker_gauge(
        self, broker_id: int, name: str, timeout: float = 2.0
    ) -> tuple[dict[str, float] | None, float | None]:
        """One scrape of a broker's metrics (None while it does not answer) and the value of ``name`` in it."""
        m = await asyncio.to_thread(scrape, self.brokers[broker_id].metrics_port, timeout)
        return m, (m or {}).get(name)

    async def wait_replicas_applied(self, timeout: float, poll: float = 1.0) -> tuple[float | None, dict[str, str]]:
        """Seconds until every broker's replica manager holds what its image held at the leader's high watermark
        now (``pykraft_broker_replicas_applied_offset``: the image is replayed first, its partitions applied to
        the replica manager after it, a slice at a time); None with who is behind after ``timeout``, or when a
        broker does not export it. Each scrape walks the broker's replicas once: asked every ``poll`` s."""
        started = time.perf_counter()
        view = await self.leader_view()
        if view is None or not self.brokers:
            return None, {"leader": "none"} if view is None else {}
        offset = view.high_watermark - 1
        deadline = time.monotonic() + timeout
        waiting = set(self.brokers)
        behind: dict[str, str] = {}
        while waiting and time.monotonic() < deadline:
            for broker_id in sorted(waiting):
                m, applied = await self.broker_gauge(broker_id, "pykraft_broker_replicas_applied_offset")
                if m is not None and applied is None:
                    return None, {f"b{broker_id}": "exports no pykraft_broker_replicas_applied_offset"}
                if applied is not None and applied >= offset:
                    waiting.discard(broker_id)
                    behind.pop(f"b{broker_id}", None)
                else:
                    behind[f"b{broker_id}"] = f"applied {applied} of {offset}" if m else "its metrics did not answer"
                    break  # the next broker is asked once this one is done: one scrape at a time
            if waiting:
                await asyncio.sleep(poll)
        return (None, behind) if waiting else (time.perf_counter() - started, {})

    async def wait_node_ready(self, name: str, progress: Any, started: float, timeout: float) -> float:
        """Seconds from ``started`` (perf_counter at exec) until ``progress()`` (log end, applied offset) reaches
        the leader's high watermark as it was at the previous look (20 ms earlier: the leader keeps appending)."""
        deadline = time.monotonic() + timeout
        previous: int | None = None
        while time.monotonic() < deadline:
            p = await progress()
            if p is not None and previous is not None and p[0] >= previous and p[1] >= previous - 1:
                return time.perf_counter() - started
            view = await self.leader_view()
            previous = view.high_watermark if view is not None else None
            await asyncio.sleep(0.02)
        raise TimeoutError(f"{name} not ready within {timeout} s")

    async def partition_count(self) -> int | None:
        """The partitions the leader's committed state holds (its metrics)."""
        leader = await self.leader_id()
        m = await asyncio.to_thread(scrape, self.metrics_ports[leader]) if leader is not None else None
        return int(m["kafka_controller_global_partition_count"]) if m else None

    async def images_hold(self, names: list[str], partitions: int) -> dict[str, bool]:
        """Does each broker's image (DescribeTopics on its listener, answered locally) hold ``names`` with
        ``partitions`` partitions in all?"""
        out = {}
        for broker_id, b in self.brokers.items():
            try:
                async with grpc.aio.insecure_channel(f"127.0.0.1:{b.listener_port}", options=BIG_MESSAGES) as ch:
                    r = await pb_grpc.ControllerStub(ch).DescribeTopics(
                        pb.DescribeTopicsRequest(names=names), timeout=60
                    )
                ok = r.error_code == 0 and all(t.error_code == 0 for t in r.topics)
                out[f"b{broker_id}"] = ok and sum(len(t.partitions) for t in r.topics) == partitions
            except grpc.aio.AioRpcError:
                out[f"b{broker_id}"] = False
        return out

    # -- requests

    async def create_snapshot(self, target: str, timeout_ms: int = 300_000) -> tuple[pb.CreateSnapshotResponse, float]:
        """``pykraft snapshot create`` against one node: the answer and the seconds from request to frozen."""
        async with grpc.aio.insecure_channel(target) as ch:
            started = time.perf_counter()
            r = await pb_grpc.ControllerStub(ch).CreateSnapshot(
                pb.CreateSnapshotRequest(timeout_ms=timeout_ms), timeout=timeout_ms / 1000 + 5
            )
            return r, time.perf_counter() - started

    async def topics_digest(self, target: str) -> dict[str, Any]:
        """Every topic this benchmark asked for, described by ``target`` (500 a request): counts and a digest."""
        h = hashlib.sha256()
        topics = partitions = 0
        async with grpc.aio.insecure_channel(target, options=BIG_MESSAGES) as ch:
            stub = pb_grpc.ControllerStub(ch)
            names = sorted(self.topic_names)
            for i in range(0, len(names), 500):
                r = await stub.DescribeTopics(pb.DescribeTopicsRequest(names=names[i : i + 500]), timeout=60)
                if r.error_code:
                    error = NotLeader if r.error_code == NOT_CONTROLLER else RuntimeError
                    raise error(f"DescribeTopics on {target}: {error_name(r.error_code)} {r.error_message}")
                for t in r.topics:
                    h.update(f"{t.name}/{t.topic_id}/{t.error_code}|".encode())
                    if t.error_code == 0:
                        topics += 1
                    for p in t.partitions:
                        partitions += 1
                        h.update(
                            f"{p.partition_index}:{p.leader_id}:{p.leader_epoch}:{p.partition_epoch}:"
                            f"{list(p.replicas)}:{list(p.isr)};".encode()
                        )
        return {"topics": topics, "partitions": partitions, "sha256": h.hexdigest()}


# -- phases ------------------------------------------------------------------------------------------------------


async def create_partitions(bench: Bench, partitions: int, deadline_s: float = 3600) -> dict[str, Any]:
    """Topics of 100 partitions, 99 a request, IN_FLIGHT requests at a time, to the leader; then wait for every
    controller and observer to hold and apply it all.

    As a client does, a request answered NOT_CONTROLLER or failing in transport (a leader change) is sent again
    to the new leader; each failed attempt is counted (by its code) and fails every target. A topic answered
    TOPIC_ALREADY_EXISTS on such a retry was created by the attempt whose fate was unknown: it counts as created,
    and the partition count the leader holds at the end is checked against the total asked for."""
    leader = await bench.leader_id()
    assert leader is not None
    current = {"target": bench.cluster.nodes[leader].address}
    sizes = [PARTITIONS_PER_TOPIC] * (partitions // PARTITIONS_PER_TOPIC)
    if partitions % PARTITIONS_PER_TOPIC:
        sizes.append(partitions % PARTITIONS_PER_TOPIC)
    names = [f"scale-{i:06d}" for i in range(len(sizes))]
    bench.topic_names += names
    requests = [
        list(zip(names[i : i + TOPICS_PER_REQUEST], sizes[i : i + TOPICS_PER_REQUEST], strict=True))
        for i in range(0, len(names), TOPICS_PER_REQUEST)
    ]
    pending = iter(requests)
    tally = Tally()
    created = {"topics": 0, "partitions": 0, "retries": 0}
    stopped = {"at_deadline": False}
    created_topics: list[tuple[str, int]] = []  # in the order answered
    channels: dict[str, grpc.aio.Channel] = {}

    def stub_for(target: str) -> pb_grpc.ControllerStub:
        if target not in channels:
            channels[target] = grpc.aio.insecure_channel(target, options=BIG_MESSAGES)
        return pb_grpc.ControllerStub(channels[target])

    async def follow_leader(hint: str) -> None:
        if hint and hint != current["target"]:
            current["target"] = hint
            return
        await asyncio.sleep(0.1)
        leader = await bench.leader_id()
        if leader is not None:
            current["target"] = bench.cluster.nodes[leader].address

    async def worker() -> None:
        for chunk in pending:
            if time.perf_counter() - started > deadline_s:
                stopped["at_deadline"] = True
                return  # the rest is not sent: the phase reports how far it got
            retry = False
            while True:
                req = pb.CreateTopicsRequest(timeout_ms=60_000)
                for name, n in chunk:
                    req.topics.add(name=name, num_partitions=n, replication_factor=3)
                sent = tally.sent()
                try:
                    resp = await stub_for(current["target"]).CreateTopics(req, timeout=65)
                except grpc.aio.AioRpcError as e:
                    tally.answered()
                    tally.exception(e)
                    created["retries"] += 1
                    retry = True
                    await follow_leader("")
                    continue
                done = tally.answered()
                if resp.error_code == NOT_CONTROLLER:
                    tally.failure(error_name(resp.error_code))
                    created["retries"] += 1
                    retry = True
                    await follow_leader(resp.controller.controller_endpoint)
                    continue
                break
            exists = TOPIC_ALREADY_EXISTS if retry else None
            ok = {t.name for t in resp.topics if t.error_code in (0, exists)} if not resp.error_code else set()
            created["topics"] += len(ok)
            created["partitions"] += sum(n for name, n in chunk if name in ok)
            codes = [c for c in failed_codes(resp, len(chunk)) if not (retry and c == "TOPIC_ALREADY_EXISTS")]
            created_topics.extend((name, n) for name, n in chunk if name in ok)
            if codes:
                tally.failure(*codes)
            else:
                tally.success((done - sent) * 1000)

    existing = await bench.partition_count() or 0
    meter = PhaseCpu(bench)
    started = time.perf_counter()
    watch = asyncio.create_task(progress_lines(bench, started, created))
    caught_up: float | None = None
    behind: dict[str, str] = {}
    try:
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        answered = time.perf_counter() - started
        try:
            caught_up = await bench.wait_caught_up(timeout=max(300.0, min(900.0, deadline_s / 2)))
        except TimeoutError as e:
            behind = {"why": str(e)}
    finally:
        watch.cancel()
        for ch in channels.values():
            await ch.close()
    if bench.abort:
        raise OutOfMemory(bench.abort)
    total = time.perf_counter() - started
    cpu = meter.used()
    last = created_topics[-TOPICS_PER_REQUEST:]
    images = await bench.images_hold([name for name, _ in last], sum(n for _, n in last)) if bench.observers else {}
    return {
        "partitions": partitions,
        "topics": len(names),
        "requests": len(requests),
        "created_topics": created["topics"],
        "created_partitions": created["partitions"],
        "retried_attempts": created["retries"],
        "leader_partition_count": await bench.partition_count(),
        "partitions_before": existing,
        "answered_s": answered,
        "caught_up_after_s": caught_up,
        "not_caught_up": behind,
        "stopped_at_deadline": stopped["at_deadline"],
        "deadline_s": deadline_s,
        "total_s": total,
        "partitions_per_s": created["partitions"] / total if total else 0.0,
        "request_p50_ms": tally.percentile(50),
        "request_p99_ms": tally.percentile(99),
        "broker_images_hold_the_last_request": images,
        **tally.summary(),
        **cpu,
    }


async def progress_lines(bench: Bench, started: float, created: dict[str, int], every_s: float = 15.0) -> None:
    """Every ``every_s`` a line: partitions created so far, the leader's high watermark, how far the slowest node
    is, memory; and the run stopped (OutOfMemory in the creating task) when the machine runs short of memory."""
    last = time.perf_counter()
    while True:
        await asyncio.sleep(0.5)
        available = mem_available()
        rss = {name: rss_bytes(pid) or 0 for name, pid in bench.pids().items()}
        if available is not None and available < MEMORY_FLOOR:
            bench.abort = (
                f"the machine had {available / 2**30:.1f} GiB available (floor {MEMORY_FLOOR / 2**30:.0f} GiB) after "
                f"{created['partitions']:,} partitions were created, {time.perf_counter() - started:.0f} s in; "
                "RSS: " + ", ".join(f"{k} {v / 2**20:,.0f} MiB" for k, v in rss.items())
            )
            bench.kill_all()
            return
        if time.perf_counter() - last >= every_s:
            last = time.perf_counter()
            hw, behind = await bench.lagging()
            print(
                f"    ... {time.perf_counter() - started:5.0f} s: {created['partitions']:>9,} partitions answered, "
                f"leader HW {hw:,}, behind: {len(behind)} node(s), RSS total {sum(rss.values()) / 2**30:.1f} GiB "
                f"(largest {max(rss.values(), default=0) / 2**30:.2f}), available {(available or 0) / 2**30:.1f} GiB, "
                f"load {loadavg()}",
                flush=True,
            )


async def appender(
    targets: list[str], rate: int, stop: asyncio.Event, prefix: str, names: list[str]
) -> list[tuple[float, float | None, str | None]]:
    """One client creating 1 topic (3 partitions, RF 3) per request on a fixed schedule of ``rate``/s until
    ``stop``: ``(scheduled time, latency ms from it or None, error)`` per attempt. It starts with ``targets[0]``
    and, as a client does, follows a NOT_CONTROLLER answer's hint (or tries the next controller after a transport
    error) and sends the request again: each failed attempt is a sample of its own, and the request's latency runs
    from its scheduled time to the answer that created the topic (TOPIC_ALREADY_EXISTS on a retry counts: the
    attempt before it may have created it)."""
    samples: list[tuple[float, float | None, str | None]] = []
    current = {"target": targets[0]}
    channels: dict[str, grpc.aio.Channel] = {}

    def stub_for(target: str) -> pb_grpc.ControllerStub:
        if target not in channels:
            channels[target] = grpc.aio.insecure_channel(target)
        return pb_grpc.ControllerStub(channels[target])

    def next_target(failed: str) -> None:
        if current["target"] == failed:
            current["target"] = targets[(targets.index(failed) + 1) % len(targets)] if failed in targets else targets[0]

    async def one(i: int, scheduled: float) -> None:
        name = f"{prefix}-{i}"
        names.append(name)
        for attempt in range(20):
            target = current["target"]
            try:
                resp = await stub_for(target).CreateTopics(topic_request([name]), timeout=35)
            except grpc.aio.AioRpcError as e:
                samples.append((scheduled, None, f"grpc {e.code().name}"))
                next_target(target)
                await asyncio.sleep(0.05)
                continue
            if resp.error_code == NOT_CONTROLLER:
                samples.append((scheduled, None, "NOT_CONTROLLER"))
                hint = resp.controller.controller_endpoint
                if hint and hint != target:
                    current["target"] = hint
                else:
                    next_target(target)
                    await asyncio.sleep(0.05)
                continue
            latency = (time.perf_counter() - scheduled) * 1000
            codes = [c for c in failed_codes(resp, 1) if not (attempt and c == "TOPIC_ALREADY_EXISTS")]
            samples.append((scheduled, None if codes else latency, codes[0] if codes else None))
            return

    tasks = []
    start = time.perf_counter()
    try:
        i = 0
        while not stop.is_set():
            scheduled = start + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, scheduled)))
            i += 1
        await asyncio.gather(*tasks)
    finally:
        for ch in channels.values():
            await ch.close()
    return samples


def window_tally(samples: list[tuple[float, float | None, str | None]], start: float, end: float) -> dict[str, Any]:
    tally = Tally()
    for scheduled, latency, error in samples:
        if start <= scheduled <= end:
            if latency is None:
                tally.failure(error or "unknown")
            else:
                tally.success(latency)
    # When the slowest 1 % were scheduled, from the window's start: one stall or a spread over the window.
    timed = sorted(
        (latency, scheduled - start)
        for scheduled, latency, _ in samples
        if latency is not None and start <= scheduled <= end
    )
    slowest = [at for _, at in timed[-max(1, len(timed) // 100) :]]
    return {
        "requests": len({scheduled for scheduled, _, _ in samples if start <= scheduled <= end}),
        "slowest_at_s": (min(slowest), max(slowest)) if slowest else None,
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        "max_ms": max(tally.latencies_ms) if tally.latencies_ms else float("nan"),
        "ok": tally.ok,
        "failed": tally.failed,
        "errors": dict(tally.errors),
        "elapsed_s": end - start,
    }


async def snapshot_under_load(bench: Bench, window_s: float) -> dict[str, Any]:
    """The appender's baseline for ``window_s``, then the same appender while the leader writes a forced snapshot."""
    leader = await bench.leader_id()
    assert leader is not None
    node = bench.cluster.nodes[leader]
    # Every node snapshots first, so no policy-triggered snapshot (20 MiB since the last) lands in the baseline.
    for n in bench.cluster.nodes.values():
        try:
            await bench.create_snapshot(n.address)
        except grpc.aio.AioRpcError as e:  # best effort: it only keeps the policy's snapshots out of the baseline
            print(f"    (the snapshot first taken on c{n.node_id} failed: {e.code().name})", flush=True)
    await asyncio.sleep(1.0)
    stop = asyncio.Event()
    meter = PhaseCpu(bench)
    targets = [node.address] + [n.address for n in bench.cluster.nodes.values() if n is not node]
    task = asyncio.create_task(appender(targets, APPENDER_RATE, stop, "base", bench.topic_names))
    await asyncio.sleep(0.5)  # connected
    ports = {i: bench.metrics_ports[i] for i in bench.cluster.nodes}

    async def paths() -> dict[int, dict[str, float] | None]:
        got = await asyncio.gather(*(asyncio.to_thread(commit_path, p) for p in ports.values()))
        return dict(zip(ports, got, strict=True))

    base_paths = await paths()
    base_start = time.perf_counter()
    await asyncio.sleep(window_s)
    base_end = time.perf_counter()
    base_cpu = meter.used()
    snap_paths = await paths()
    meter = PhaseCpu(bench)
    since = log_size(node.log_path)
    snap_start = time.perf_counter()
    resp, seconds = await bench.create_snapshot(node.address)
    snap_end = time.perf_counter()
    snap_cpu = meter.used()
    end_paths = await paths()

    def path_texts(before: dict[int, Any], after: dict[int, Any]) -> dict[str, str]:
        return {f"c{i}": commit_path_text(before[i], after[i], "leader" if i == leader else "follower") for i in ports}

    await asyncio.sleep(0.5)
    stop.set()
    samples = await task
    generated = log_events(node.log_path, "snapshot_generated", since)
    frozen = log_events(node.log_path, "snapshot_frozen", since)
    return {
        "leader": leader,
        "rate": APPENDER_RATE,
        "baseline": {
            **window_tally(samples, base_start, base_end),
            **base_cpu,
            "commit_path": path_texts(base_paths, snap_paths),
        },
        "during": {
            **window_tally(samples, snap_start, snap_end),
            **snap_cpu,
            "commit_path": path_texts(snap_paths, end_paths),
        },
        "snapshot": {
            "error": error_name(resp.error_code) if resp.error_code else None,
            "created": resp.created,
            "id": f"{resp.end_offset}-{resp.epoch}",
            "bytes": resp.size_bytes,
            "request_to_frozen_s": seconds,
            "generated_s": generated[-1]["seconds"] if generated else None,
            "records": generated[-1]["records"] if generated else None,
            "records_per_s": generated[-1].get("records_per_s") if generated else None,
            "frozen_logged": bool(frozen),
            # The forked child's own CPU seconds: the rest of its wall time it waited for a core.
            "child_cpu_s": frozen[-1].get("child_cpu_s") if frozen else None,
        },
    }


async def restart_controller(bench: Bench) -> dict[str, Any]:
    """A follower, snapshotted first (as before maintenance), stopped gracefully and started: exec to ready."""
    leader = await bench.leader_id()
    node_id = next(i for i in bench.cluster.nodes if i != leader)
    node = bench.cluster.nodes[node_id]
    snap, _ = await bench.create_snapshot(node.address)
    code = await asyncio.to_thread(node.terminate, 60)
    since = log_size(node.log_path)
    meter = PhaseCpu(bench)
    started = time.perf_counter()
    node.start()
    ready = await bench.wait_node_ready(
        f"controller {node_id}", lambda: bench.controller_progress(node_id), started, timeout=600
    )
    assert node.proc is not None
    cpu = cpu_seconds(node.proc.pid)
    progress = await bench.controller_progress(node_id)
    loaded = log_events(node.log_path, "snapshot_loaded", since)
    delivered = log_events(node.log_path, "snapshot_delivered", since)
    return {
        "node": node_id,
        "exit_code": code,
        "snapshot": f"{snap.end_offset}-{snap.epoch}",
        "snapshot_bytes": snap.size_bytes,
        "ready_s": ready,
        "process_cpu_s": cpu,
        "snapshot_loaded": loaded[-1] if loaded else None,
        "snapshot_delivered_s": delivered[-1]["seconds"] if delivered else None,
        "tail_records": (progress[1] + 1 - snap.end_offset) if progress else None,
        **meter.used(),
    }


async def restart_broker(bench: Bench) -> dict[str, Any]:
    """A broker, snapshotted first, stopped gracefully (controlled shutdown) and started: exec to ready — its
    ``metadata_caught_up`` line (the image holds the high watermark it last heard of), or its metrics when it
    exports a log end and an applied offset."""
    broker_id = min(bench.brokers)
    b = bench.brokers[broker_id]
    uses_metrics = await bench.broker_progress(broker_id) is not None
    snap, _ = await bench.create_snapshot(f"127.0.0.1:{b.listener_port}")
    stopping = time.perf_counter()
    stop_since = log_size(b.log_path)
    code = await asyncio.to_thread(b.terminate, 120)
    stop_s = time.perf_counter() - stopping  # SIGTERM to exit: the controlled shutdown, then a snapshot
    since = log_size(b.log_path)
    shutdown_snapshot = log_events(b.log_path, "shutdown_snapshot", stop_since)
    no_snapshot = [
        e
        for name in ("shutdown_snapshot_skipped", "shutdown_snapshot_failed")
        for e in log_events(b.log_path, name, stop_since)
    ]
    meter = PhaseCpu(bench)
    started_wall = time.time()
    started = time.perf_counter()
    b.start()
    assert b.proc is not None
    if uses_metrics:
        ready = await bench.wait_node_ready(
            f"broker {broker_id}", partial(bench.broker_progress, broker_id), started, timeout=600
        )
        how = "metrics"
    else:
        deadline = time.monotonic() + 600
        while not (caught := log_events(b.log_path, "metadata_caught_up", since)):
            if time.monotonic() > deadline or not b.alive:
                raise TimeoutError(f"broker {broker_id} logged no metadata_caught_up")
            await asyncio.sleep(0.02)
        ready = wall_time(caught[-1]) - started_wall
        how = "metadata_caught_up"
    cpu = cpu_seconds(b.proc.pid)
    loaded = log_events(b.log_path, "snapshot_loaded", since)
    observer = log_events(b.log_path, "metadata_observer_started", since)
    caught_up = log_events(b.log_path, "metadata_caught_up", since)
    # The records its image replayed after the snapshot: the controlled shutdown's changes among them.
    tail = caught_up[-1]["metadata_offset"] - observer[-1]["loaded_offset"] if caught_up and observer else None
    return {
        "broker": broker_id,
        "exit_code": code,
        "stop_s": stop_s,
        "tail_records": tail,
        "snapshot": f"{snap.end_offset}-{snap.epoch}" if not snap.error_code else error_name(snap.error_code),
        "snapshot_bytes": snap.size_bytes,
        "shutdown_snapshot": shutdown_snapshot[-1] if shutdown_snapshot else None,
        "no_shutdown_snapshot": no_snapshot[-1] if no_snapshot else None,  # why not: skipped, or failed
        "ready_s": ready,
        "ready_from": how,
        "exec_wall_time": started_wall,
        "log_since": since,
        "process_cpu_s": cpu,
        "snapshot_loaded": loaded[-1] if loaded else None,
        "observer_load_s": observer[-1].get("load_seconds") if observer else None,
        **meter.used(),
    }


async def make_active(bench: Bench, node_id: int, max_moves: int = 8) -> int:
    """Stop the leader gracefully (it resigns), start it again and wait until it is ready, until ``node_id``
    leads; the number of moves it took."""
    for moves in range(max_moves + 1):
        leader = await bench.leader_id()
        while leader is None:
            await asyncio.sleep(0.05)
            leader = await bench.leader_id()
        if leader == node_id:
            await bench.cluster.wait_for_leader(timeout=60)
            return moves
        if moves == max_moves:
            break
        node = bench.cluster.nodes[leader]
        await asyncio.to_thread(node.terminate, 60)
        await bench.cluster.wait_for_leader(timeout=60)
        started = time.perf_counter()
        node.start()
        await bench.wait_node_ready(f"controller {leader}", partial(bench.controller_progress, leader), started, 600)
    raise RuntimeError(f"controller {node_id} did not become the leader in {max_moves} moves")


async def leader_digest(bench: Bench, attempts: int = 10) -> dict[str, Any]:
    """The leader's description of every topic asked for (again from the next leader if it changes meanwhile)."""
    for _ in range(attempts):
        leader, _ = await bench.cluster.wait_for_leader(timeout=60)
        try:
            return await bench.topics_digest(bench.cluster.nodes[leader].address)
        except NotLeader:
            continue
    raise RuntimeError(f"no leader stayed one through a DescribeTopics of every topic in {attempts} attempts")


async def digest_when_active(bench: Bench, node_id: int, attempts: int = 5) -> tuple[int, dict[str, Any]]:
    """Make ``node_id`` the active controller and describe every topic there: (leader moves it took, digest)."""
    moves = 0
    for _ in range(attempts):
        moves += await make_active(bench, node_id)
        try:
            return moves, await bench.topics_digest(bench.cluster.nodes[node_id].address)
        except NotLeader:
            continue
    raise RuntimeError(f"controller {node_id} did not stay active through a DescribeTopics in {attempts} attempts")


async def same_as_a_broker(bench: Bench, node_id: int, first: dict[str, Any], attempts: int = 10) -> bool:
    """Does controller ``node_id`` describe every topic as a broker's image does, at some instant? (Both follow
    the same log; asked one after the other they may be an ISR change apart, so a few rounds.)"""
    broker = next(iter(bench.brokers.values()))
    mine = first
    for _ in range(attempts):
        theirs = await bench.topics_digest(f"127.0.0.1:{broker.listener_port}")
        if theirs == mine:
            return True
        await asyncio.sleep(1.0)
        mine = await bench.topics_digest(bench.cluster.nodes[node_id].address)
    return False


async def failover_trial(bench: Bench, prefix: str) -> dict[str, Any]:
    """kill -9 of the active controller; the seconds until a CreateTopics is accepted again (every surviving
    controller asked every 10 ms, each ask answered or timed out within 1 s); then the node is restarted and
    caught up again."""
    leader, epoch = await bench.cluster.wait_for_leader(timeout=60)
    survivors = [bench.cluster.nodes[i] for i in bench.cluster.nodes if i != leader]
    node = bench.cluster.nodes[leader]
    channels = [grpc.aio.insecure_channel(n.address) for n in survivors]
    stubs = [pb_grpc.ControllerStub(ch) for ch in channels]
    errors: dict[str, int] = {}
    attempt = 0

    accepted: list[float] = []

    async def ask(stub: pb_grpc.ControllerStub, name: str) -> bool:
        bench.topic_names.append(name)
        try:
            r = await stub.CreateTopics(topic_request([name]), timeout=1.0)
        except grpc.aio.AioRpcError as e:
            key = f"grpc {e.code().name}"
            errors[key] = errors.get(key, 0) + 1
            return False
        codes = failed_codes(r, 1)
        for c in codes:
            errors[c] = errors.get(c, 0) + 1
        if not codes:
            accepted.append(time.perf_counter())
        return not codes

    try:
        for s in stubs:  # connected before the kill: the client exists already
            await ask(s, f"{prefix}-warm-{id(s)}")
        errors.clear()
        accepted.clear()
        asks: list[asyncio.Task[bool]] = []
        started = time.perf_counter()
        node.kill()
        # Every 10 ms a new CreateTopics to each survivor, not waiting for the earlier ones (each gives up after
        # 1 s): the first one accepted ends the outage, whichever it was.
        while not accepted:
            attempt += 1
            asks += [asyncio.create_task(ask(s, f"{prefix}-{attempt}-{k}")) for k, s in enumerate(stubs)]
            if time.perf_counter() - started > 120:
                raise TimeoutError(f"no CreateTopics accepted within 120 s of the kill ({errors})")
            await asyncio.sleep(0.01)
        unavailable = min(accepted) - started
        await asyncio.gather(*asks)
    finally:
        for ch in channels:
            await ch.close()
    new_leader, new_epoch = await bench.cluster.wait_for_leader(timeout=60)
    restarted = time.perf_counter()
    node.start()
    ready = await bench.wait_node_ready(
        f"controller {leader}", lambda: bench.controller_progress(leader), restarted, 600
    )
    return {
        "killed": leader,
        "epoch": epoch,
        "new_leader": new_leader,
        "new_epoch": new_epoch,
        "unavailable_s": unavailable,
        "attempts": attempt,
        "errors_while_unavailable": errors,
        "killed_node_ready_after_restart_s": ready,
    }


async def failover(bench: Bench, trials: int, prefix: str) -> dict[str, Any]:
    meter = PhaseCpu(bench)
    results = [await failover_trial(bench, f"{prefix}-{t}") for t in range(trials)]
    times = [r["unavailable_s"] for r in results]
    return {"trials": results, "median_s": median(times), "min_s": min(times), "max_s": max(times), **meter.used()}


async def wiped_follower(bench: Bench, chunk_port: int | None) -> dict[str, Any]:
    """A follower stopped, its data directory deleted, started: the snapshot it fetches, per second."""
    view = await bench.leader_view()
    assert view is not None
    leader = view.leader_id
    leader_node = bench.cluster.nodes[leader]
    node_id = next(i for i in bench.cluster.nodes if i != leader)
    node = bench.cluster.nodes[node_id]
    out: dict[str, Any] = {
        "node": node_id,
        "leader_log_start": view.log_start_offset,
        "leader_snapshot": f"{view.latest_snapshot_end_offset}-{view.latest_snapshot_epoch}",
        "leader_snapshot_bytes": view.latest_snapshot_bytes,
    }
    await asyncio.to_thread(node.terminate, 60)
    shutil.rmtree(node.data_dir)
    since = log_size(node.log_path)
    meter = PhaseCpu(bench)
    started_wall = time.time()
    started = time.perf_counter()
    node.start()
    ready = await bench.wait_node_ready(
        f"controller {node_id}", lambda: bench.controller_progress(node_id), started, 600
    )
    out.update(meter.used())
    fetch_started = log_events(node.log_path, "snapshot_fetch_started", since)
    installed = log_events(node.log_path, "snapshot_installed", since)
    out["ready_s"] = ready
    out["installed"] = bool(installed)
    if installed:
        sid = installed[-1]["snapshot"]
        offset, _, epoch = sid.partition("-")
        name = f"{int(offset):020d}-{int(epoch):010d}.checkpoint"
        path = node.data_dir / METADATA_PARTITION_DIR / name
        size = path.stat().st_size if path.exists() else None
        t_installed = wall_time(installed[-1]) - started_wall
        out.update(
            {
                "snapshot": sid,
                "snapshot_bytes": size,
                "exec_to_installed_s": t_installed,
                "mib_per_s": size / t_installed / 2**20 if size and t_installed > 0 else None,
            }
        )
        if fetch_started:
            transfer = wall_time(installed[-1]) - wall_time(fetch_started[-1])
            out["fetch_started_to_installed_s"] = transfer
            out["transfer_mib_per_s"] = size / transfer / 2**20 if size and transfer > 0 else None
        source = leader_node.data_dir / METADATA_PARTITION_DIR / name
        if source.exists():
            out["file_copy_mib_per_s"] = file_copy_rate(source, bench.root / "copy.tmp") / 2**20
            if chunk_port is not None:
                out["raw_grpc_mib_per_s"] = await raw_grpc_rate(chunk_port, source.stat().st_size) / 2**20
    out["files"] = metadata_files(node.data_dir)
    return out


async def idle_cluster(root: Path, minutes: float, brokers: int, observers: bool) -> dict[str, Any]:
    """A small cluster with short retention and snapshot interval and small segments, left idle: what each node
    keeps on disk, every minute."""
    bench = Bench(
        root,
        Settings(IDLE_PARTITIONS, brokers, 0, minutes, 0, IDLE_OVERRIDES["metadata.log.segment.bytes"], 0),
        dict(IDLE_OVERRIDES),
        observers,
    )
    samples: list[dict[str, Any]] = []
    try:
        await bench.start()
        created = await create_partitions(bench, IDLE_PARTITIONS)
        dirs = {f"c{i}": n.data_dir for i, n in bench.cluster.nodes.items()}
        dirs.update({f"b{i}": b.data_dir for i, b in bench.brokers.items()})
        started = time.perf_counter()
        meter = PhaseCpu(bench)
        end_offsets = []
        for minute in range(math.ceil(minutes) + 1):
            wait = started + minute * 60 - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            view = await bench.leader_view()
            end_offsets.append((time.perf_counter(), view.high_watermark if view else None))
            sample = {"minute": minute, "nodes": {name: metadata_files(d) for name, d in dirs.items()}}
            samples.append(sample)
            print(
                f"    minute {minute:>2}: "
                + "; ".join(
                    f"{n} {f['bytes'] / 1024:,.0f} KiB ({f['segments']} seg, {f['snapshots']} snap)"
                    for n, f in sample["nodes"].items()
                ),
                flush=True,
            )
        cpu = meter.used()
    finally:
        bench.stop()
    # The bound: the newest snapshots retention keeps (at most MAX_RETAINED_SNAPSHOTS), and the segments written
    # while a snapshot can still be young enough to keep them: retention + one snapshot interval + one cleaning
    # interval of log, at the rate this idle log grew, plus the active segment and one partly covered.
    (t0, hw0), (t1, hw1) = end_offsets[1 if len(end_offsets) > 2 else 0], end_offsets[-1]
    segment_bytes = IDLE_OVERRIDES["metadata.log.segment.bytes"]
    leader_dir = dirs["c1"] / METADATA_PARTITION_DIR
    per_offset = _bytes_per_offset(leader_dir)
    rate = (hw1 - hw0) * per_offset / (t1 - t0) if hw0 is not None and hw1 is not None and t1 > t0 else 0.0
    window_s = (
        IDLE_OVERRIDES["metadata.max.retention.ms"] + IDLE_OVERRIDES["metadata.log.max.snapshot.interval.ms"]
    ) / 1000 + CLEAN_INTERVAL_S
    segment_bound = 2 + math.ceil(rate * window_s / segment_bytes)
    checked = [s for s in samples if s["minute"] >= 1]
    worst = {
        "segments": max((f["segments"] for s in checked for f in s["nodes"].values()), default=0),
        "snapshots": max((f["snapshots"] for s in checked for f in s["nodes"].values()), default=0),
    }
    return {
        "minutes": minutes,
        "partitions": created["created_partitions"],
        "overrides": IDLE_OVERRIDES,
        "samples": samples,
        "log_growth_bytes_per_s": rate,
        "segment_bound": segment_bound,
        "snapshot_bound": MAX_RETAINED_SNAPSHOTS,
        "worst_after_first_minute": worst,
        "bounded": bool(checked)
        and worst["segments"] <= segment_bound
        and worst["snapshots"] <= MAX_RETAINED_SNAPSHOTS,
        **cpu,
    }


def _bytes_per_offset(d: Path) -> float:
    """The newest segment's bytes per offset (its name is its base offset; its batches end at the log end)."""
    from quorum.log.reader import scan_file

    segments = sorted(d.glob("*.log"))
    if not segments:
        return 0.0
    path = segments[-1]
    first = last = None
    for item in scan_file(path):
        if hasattr(item, "base_offset"):
            first = item.base_offset if first is None else first
            last = item.next_offset
    if first is None or last is None or last <= first:
        return 0.0
    return path.stat().st_size / (last - first)


# -- the run -------------------------------------------------------------------------------------------------------


def settings_for(args: argparse.Namespace) -> Settings:
    partitions = args.partitions or (QUICK_PARTITIONS if args.quick else FULL_PARTITIONS)
    scale = partitions / FULL_PARTITIONS
    return Settings(
        partitions=partitions,
        brokers=args.brokers,
        trials=args.trials or (2 if args.quick else 5),
        idle_minutes=args.idle_minutes if args.idle_minutes is not None else (1 if args.quick else 10),
        appender_window_s=args.appender_seconds or (3.0 if args.quick else 5.0),
        segment_bytes=max(64 * 1024, int(8 * 2**20 * scale)),
        retention_bytes=max(2**20, int(100 * 2**20 * scale)),
        create_deadline_s=args.create_deadline or (600.0 if args.quick else 900.0),
    )


@contextlib.contextmanager
def phase(report: dict[str, Any], name: str, bench: Bench) -> Iterator[None]:
    """A phase that fails (an RPC refused or cut off, a node that never got ready: the quorum under load) is
    reported as failed, with why, and the next phase runs; only running short of memory stops the run."""
    try:
        yield
    except Exception as e:
        if bench.abort:
            raise
        report.setdefault("phase_errors", {})[name] = f"{type(e).__name__}: {e}"
        print(f"    PHASE FAILED ({name}): {type(e).__name__}: {str(e)[:600]}", flush=True)


def quorum_churn(bench: Bench, since: dict[int, int]) -> dict[str, Any]:
    """From the controllers' logs after ``since`` (byte offsets): leaders elected, fencings, snapshots, GC pauses."""
    out: dict[str, Any] = {"leaders_elected": 0, "brokers_fenced": 0, "snapshots": {}, "gc": {}}
    for i, nd in bench.cluster.nodes.items():
        roles = log_events(nd.log_path, "role_changed", since.get(i, 0))
        out["leaders_elected"] += sum(1 for e in roles if e.get("role") == "Leader")
        out["brokers_fenced"] += len(log_events(nd.log_path, "brokers_fenced", since.get(i, 0)))
        out["snapshots"][f"c{i}"] = len(log_events(nd.log_path, "snapshot_generated", since.get(i, 0)))
        pauses = [e.get("pause_ms", 0) for e in log_events(nd.log_path, "gc_pause", since.get(i, 0))]
        out["gc"][f"c{i}"] = {"count": len(pauses), "seconds": sum(pauses) / 1000, "longest_ms": max(pauses, default=0)}
    return out


def isr_changes(bench: Bench, since: dict[int, int]) -> dict[str, int]:
    """ISR shrinks and expansions the brokers' leaders made after ``since`` (byte offsets of their logs): one log
    line each (the lines are counted, not parsed: a churn can write a million of them)."""
    out = {"shrinks": 0, "expands": 0}
    events = {b'"event": "isr_shrink"': "shrinks", b'"event": "isr_expand"': "expands"}
    for i, b in bench.brokers.items():
        try:
            with b.log_path.open("rb") as f:
                f.seek(since.get(i, 0))
                for line in f:
                    for marker, key in events.items():
                        if marker in line:
                            out[key] += 1
        except OSError:
            pass
    return out


def print_memory(memory: dict[str, Any]) -> None:
    for name, m in memory["processes"].items():
        per = m["bytes_per_partition"]
        verdict = "PASS" if per <= BYTES_PER_PARTITION_TARGET else "FAIL"
        print(
            f"    {name:>4}: RSS empty {m['rss_empty'] / 2**20:,.0f} MiB -> {m['rss_full'] / 2**20:,.0f} MiB: "
            f"{per:,.0f} B/partition  {verdict} (<= {BYTES_PER_PARTITION_TARGET})"
        )


async def run_async(args: argparse.Namespace, settings: Settings, root: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"settings": settings.__dict__}
    observers = observer_brokers_available()
    report["observers"] = observers
    overrides = {
        "metadata.log.segment.bytes": settings.segment_bytes,
        "metadata.max.retention.bytes": settings.retention_bytes,
    }
    report["overrides"] = overrides
    bench = Bench(root / "main", settings, overrides, observers)
    chunk_port = free_ports(1)[0]
    chunk_server: subprocess.Popen[bytes] | None = None
    n = settings.partitions
    try:
        await bench.start()
        leader = await bench.leader_id()
        brokers = f"{settings.brokers} observer brokers" if observers else f"{settings.brokers} STUB brokers"
        print(
            f"pykraft scale benchmark: {n:,} partitions, 3 controllers, {brokers}; leader c{leader}; "
            f"overrides {overrides}; data in {root}",
            flush=True,
        )
        if not observers:
            print(
                "  NOTE: `pykraft broker` has no --metadata-dir here: brokers are not Raft observers yet. Stub brokers "
                "(registration and heartbeats) stand in; every broker figure is NOT MEASURED (FAIL)."
            )

        print(f"\n[1] kill -9 of the active controller, empty cluster ({settings.trials} trials)", flush=True)
        r = await failover(bench, settings.trials, "empty-probe")
        report["failover_empty"] = r
        print(f"    unavailable: median {r['median_s']:.2f} s (min {r['min_s']:.2f}, max {r['max_s']:.2f})")
        print(f"    {cpu_text(r)}")

        await asyncio.sleep(2.0)
        rss_empty = {name: rss_bytes(pid) for name, pid in bench.pids().items() if name != "stub brokers"}
        pids_empty = bench.pids()

        print(
            f"\n[2] creating {n:,} partitions ({n // PARTITIONS_PER_TOPIC:,} topics x 100, RF 3, "
            f"{TOPICS_PER_REQUEST} topics/request, {IN_FLIGHT} in flight)",
            flush=True,
        )
        log_marks = {i: log_size(nd.log_path) for i, nd in bench.cluster.nodes.items()}
        broker_marks = {i: log_size(b.log_path) for i, b in bench.brokers.items()}
        r = await create_partitions(bench, n, settings.create_deadline_s)
        r["quorum"] = quorum_churn(bench, log_marks)
        r["isr_changes"] = isr_changes(bench, broker_marks)
        report["create"] = r
        complete = r["created_partitions"] == n and r["caught_up_after_s"] is not None
        verdict = "PASS" if complete and r["total_s"] <= CREATE_TARGET_S and observers and not r["failed"] else "FAIL"
        if complete:
            print(
                f"    {r['created_partitions']:,} partitions in {r['total_s']:.1f} s ({r['partitions_per_s']:,.0f}/s) "
                f"to every controller and observer caught up  {verdict} (<= {CREATE_TARGET_S:.0f} s"
                f"{'' if observers else ', with observers: not measured'})"
            )
        else:
            print(
                f"    NOT COMPLETE  {verdict}: {r['created_partitions']:,} of {n:,} partitions created in "
                f"{r['answered_s']:.0f} s"
                + (f" (stopped sending at the {r['deadline_s']:.0f} s deadline)" if r["stopped_at_deadline"] else "")
                + (
                    f"; all caught up {r['caught_up_after_s']:.1f} s later"
                    if r["caught_up_after_s"] is not None
                    else f"; NOT all caught up: {r['not_caught_up'].get('why', '')[:300]}"
                )
            )
        print(
            f"    requests: p50 {r['request_p50_ms']:,.0f} ms, p99 {r['request_p99_ms']:,.0f} ms; "
            f"{r['retried_attempts']} attempt(s) retried on a new leader; {errors_text(r)}"
        )
        q = r["quorum"]
        print(
            f"    the quorum meanwhile: {q['leaders_elected']} leader(s) elected, brokers fenced {q['brokers_fenced']} "
            f"time(s), snapshots taken {q['snapshots']}, GC pauses >= 50 ms per controller: "
            + ", ".join(
                f"{k} {v['count']} ({v['seconds']:.1f} s, longest {v['longest_ms']:.0f} ms)" for k, v in q["gc"].items()
            )
            + f"; ISR shrinks {r['isr_changes']['shrinks']:,}, expansions {r['isr_changes']['expands']:,}"
        )
        print(f"    {cpu_text(r)}")

        held = r["leader_partition_count"] or 0
        print(f"    the leader holds {held:,} partitions; broker images hold the last request's topics: "
              f"{r['broker_images_hold_the_last_request']}")  # fmt: skip
        print("\n[3] memory: RSS minus the same process's RSS with the cluster empty", flush=True)
        # The brokers' images caught up; their replica managers apply those partitions after them (29-44 s later
        # at 2M). Measured before they hold every replica, a broker's figure would leave some out.
        applied_s, not_applied = await bench.wait_replicas_applied(REPLICAS_APPLIED_TIMEOUT_S)
        report["replicas_applied_after_s"] = applied_s
        if applied_s is not None:
            print(f"    every broker's replica manager held its partitions {applied_s:.1f} s after the images did")
        elif bench.brokers:
            print(f"    NOT every broker's replica manager holds its partitions (measured anyway): {not_applied}")
        await asyncio.sleep(1.0)
        processes = {}
        for name, pid in bench.pids().items():
            if name == "stub brokers" or pids_empty.get(name) != pid or rss_empty.get(name) is None:
                continue
            full = rss_bytes(pid) or 0
            processes[name] = {
                "rss_empty": rss_empty[name],
                "rss_full": full,
                "bytes_per_partition": (full - rss_empty[name]) / held if held else float("nan"),
            }
        report["memory"] = {"partitions": held, "processes": processes}
        print_memory(report["memory"])

        with phase(report, "snapshot", bench):
            print(
                f"\n[4] a forced snapshot on the leader, {APPENDER_RATE} CreateTopics/s (1 topic each) meanwhile",
                flush=True,
            )
            r = await snapshot_under_load(bench, settings.appender_window_s)
            report["snapshot"] = r
            s, b, d = r["snapshot"], r["baseline"], r["during"]
            verdict = "PASS" if s["request_to_frozen_s"] <= SNAPSHOT_TARGET_S and not s["error"] else "FAIL"
            print(
                f"    snapshot {s['id']} of c{r['leader']}: {s['bytes'] or 0:,} bytes, {s['records'] or 0:,} records, "
                f"request to frozen {s['request_to_frozen_s']:.2f} s  {verdict} (<= {SNAPSHOT_TARGET_S:.0f} s); "
                f"snapshot_generated {s['generated_s']} s ({s['records_per_s'] or 0:,} records/s); the child "
                f"writing it used {s['child_cpu_s']} CPU s"
            )
            verdict = "PASS" if d["p99_ms"] <= APPENDER_P99_TARGET_MS and not d["failed"] else "FAIL"
            print(
                f"    appender during the snapshot: p50 {d['p50_ms']:.1f} ms, p99 {d['p99_ms']:.1f} ms, max "
                f"{d['max_ms']:.1f} ms over {d['requests']} requests  {verdict} "
                f"(p99 <= {APPENDER_P99_TARGET_MS:.0f} ms); {errors_text(d)}"
            )
            if d["slowest_at_s"] is not None:
                first, last = d["slowest_at_s"]
                print(
                    f"      its slowest 1 % were sent {first:.2f}-{last:.2f} s after the snapshot request "
                    f"(of {d['elapsed_s']:.2f} s)"
                )
            print(
                f"    appender baseline (no snapshot): p50 {b['p50_ms']:.1f} ms, p99 {b['p99_ms']:.1f} ms, max "
                f"{b['max_ms']:.1f} ms over {b['requests']} requests; {errors_text(b)}"
            )
            print(f"    during: {cpu_text(d)}")
            print(f"    baseline: {cpu_text(b)}")
            for window, w in (("baseline", b), ("during", d)):
                for name, text in w["commit_path"].items():
                    print(f"    {window} commit path, {name}: {text}")

        with phase(report, "restart_controller", bench):
            print("\n[5] a controller restarted (snapshot created on it first, then SIGTERM)", flush=True)
            before = await leader_digest(bench)
            r = await restart_controller(bench)
            report["restart_controller"] = r
            loaded = r["snapshot_loaded"] or {}
            verdict = "PASS" if r["ready_s"] <= RESTART_TARGET_S else "FAIL"
            print(
                f"    c{r['node']}: exec to ready {r['ready_s']:.2f} s  {verdict} (<= {RESTART_TARGET_S:.0f} s); "
                f"snapshot_loaded {loaded.get('records', 0):,} records in {loaded.get('seconds')} s "
                f"({loaded.get('records_per_s') or 0:,} records/s), delivered in {r['snapshot_delivered_s']} s; "
                f"{r['tail_records']} records replayed after it; the process used {r['process_cpu_s']:.1f} CPU s"
            )
            moves, after = await digest_when_active(bench, r["node"])
            r["leadership_moves"] = moves
            r["describe_equal"] = before == after
            r["described"] = after
            against = "the leader's before the restart"
            if not r["describe_equal"] and bench.brokers:
                # Leaders and ISRs may have moved meanwhile (the brokers' data planes shrink and expand ISRs): then
                # compare with what a broker's image, replayed from the log on its own, says now.
                r["describe_equal"], against = await same_as_a_broker(bench, r["node"], after), "a broker's image"
            print(
                f"    made active in {moves} graceful leader stop(s): its DescribeTopics "
                f"({after['topics']:,} topics, {after['partitions']:,} partitions) "
                f"{'EQUAL to' if r['describe_equal'] else 'DIFFERENT from'} {against}"
            )
        with phase(report, "restart_broker", bench):
            if observers:
                r = await restart_broker(bench)
                report["restart_broker"] = r
                loaded = r["snapshot_loaded"] or {}
                verdict = "PASS" if r["ready_s"] <= RESTART_TARGET_S else "FAIL"
                print(
                    f"    b{r['broker']}: exec to ready {r['ready_s']:.2f} s  {verdict} (<= {RESTART_TARGET_S:.0f} s); "
                    f"snapshot_loaded {loaded.get('records', 0):,} records ({loaded.get('records_per_s') or 0:,} "
                    f"records/s); {r['tail_records']} records replayed after it; the process used "
                    f"{r['process_cpu_s']:.1f} CPU s; its controlled shutdown (SIGTERM to exit) took "
                    f"{r['stop_s']:.1f} s"
                )
                if (last := r["shutdown_snapshot"]) is not None:
                    print(
                        f"    it stopped with snapshot {last['snapshot_id']} of its image "
                        f"({last['bytes_since']:,} bytes committed since its previous one), taken "
                        f"{last['seconds']:.1f} s after the controlled shutdown"
                    )
                elif (why := r["no_shutdown_snapshot"]) is not None:
                    print(f"    it stopped without a snapshot of its image: {why['event']} {why.get('error', '')}")
                print(f"    exec to ready: {cpu_text(r)}")
            else:
                print(f"    broker: NOT MEASURED  FAIL (<= {RESTART_TARGET_S:.0f} s): brokers are not observers here")

        with phase(report, "failover_full", bench):
            print(
                f"\n[6] kill -9 of the active controller at {held:,} partitions ({settings.trials} trials)", flush=True
            )
            r = await failover(bench, settings.trials, "full-probe")
            report["failover_full"] = r
            base = report["failover_empty"]["median_s"]
            factor = ratio(r["median_s"], base)
            verdict = "PASS" if factor <= FAILOVER_RATIO_TARGET else "FAIL"
            print(
                f"    unavailable: median {r['median_s']:.2f} s (min {r['min_s']:.2f}, max {r['max_s']:.2f}) vs "
                f"{base:.2f} s empty: {factor:.2f}x  {verdict} (<= {FAILOVER_RATIO_TARGET}x)"
            )
            print(
                "    killed node back and caught up after: "
                + ", ".join(f"{t['killed_node_ready_after_restart_s']:.1f} s" for t in r["trials"])
            )
            print(f"    {cpu_text(r)}")

        with phase(report, "wiped_follower", bench):
            print("\n[7] a follower wiped and restarted: FetchSnapshot from the leader", flush=True)
            view = await bench.leader_view()
            if view is not None and view.latest_snapshot_end_offset >= 0:
                leader_dir = bench.cluster.nodes[view.leader_id].data_dir / METADATA_PARTITION_DIR
                snapshot_path = sorted(leader_dir.glob("*.checkpoint"))[-1]
                chunk_server = subprocess.Popen(
                    [sys.executable, __file__, "--chunk-server", str(chunk_port), "--file", str(snapshot_path)],
                    stdout=subprocess.PIPE,
                )
                assert chunk_server.stdout is not None
                await asyncio.to_thread(chunk_server.stdout.readline)
            r = await wiped_follower(bench, chunk_port if chunk_server is not None else None)
            report["wiped_follower"] = r
            rate = r.get("mib_per_s")
            verdict = "PASS" if r["installed"] and rate is not None and rate >= INSTALL_TARGET_MIB_S else "FAIL"
            if r["installed"]:
                print(
                    f"    c{r['node']}: snapshot {r['snapshot']} ({(r['snapshot_bytes'] or 0) / 2**20:,.1f} MiB) "
                    f"installed {r['exec_to_installed_s']:.2f} s after exec: {rate or 0:,.1f} MiB/s  {verdict} "
                    f"(>= {INSTALL_TARGET_MIB_S:.0f} MiB/s); fetch_started to installed "
                    f"{r.get('fetch_started_to_installed_s', float('nan')):.2f} s "
                    f"({r.get('transfer_mib_per_s') or 0:,.1f} MiB/s); ready (caught up) {r['ready_s']:.2f} s "
                    "after exec"
                )
                print(
                    f"    baselines: file copy + fsync {r.get('file_copy_mib_per_s', float('nan')):,.0f} MiB/s, raw "
                    f"loopback gRPC in {CHUNK_BYTES >> 20} MiB requests "
                    f"{r.get('raw_grpc_mib_per_s', float('nan')):,.0f} MiB/s"
                )
            else:
                print(
                    f"    c{r['node']}: NO snapshot installed  FAIL (the leader's log starts at "
                    f"{r['leader_log_start']}: it sent the log instead); ready {r['ready_s']:.2f} s after exec"
                )
            print(f"    {cpu_text(r)}")

        with phase(report, "files_at_end", bench):
            files = {f"c{i}": metadata_files(nd.data_dir) for i, nd in bench.cluster.nodes.items()}
            files.update({f"b{i}": metadata_files(b.data_dir) for i, b in bench.brokers.items()})
            report["files_at_end"] = files
            report["files_bounded"] = all(
                f["snapshots"] <= MAX_RETAINED_SNAPSHOTS and f["partial_snapshots"] == 0 for f in files.values()
            )
            # Converged: every node holds and applied what was committed when the run ended, within a few seconds
            # (an instant's comparison would count the NoOp committed while an observer's fetch is on its way).
            hw, behind = await bench.lagging()
            try:
                await bench.wait_caught_up(END_CATCH_UP_S, scrape_timeout=END_SCRAPE_TIMEOUT_S)
                behind = {}
            except TimeoutError as e:
                behind = {"why": str(e)}
            report["all_caught_up_at_end"] = not behind
            report["behind_at_end"] = behind
            report["slowest_scrape_at_end_s"] = {f"b{b}": round(t, 2) for b, t in bench.slowest_scrape_s.items()}
            if behind:
                print(f"    NOT all caught up with offset {hw} within {END_CATCH_UP_S:.0f} s of the end: {behind}")
            if bench.slowest_scrape_s:
                scrapes = ", ".join(f"b{b} {t:.1f}" for b, t in sorted(bench.slowest_scrape_s.items()))
                print(f"    brokers' slowest /metrics answer, s (at most {END_SCRAPE_TIMEOUT_S:.0f}): {scrapes}")
            rb = report.get("restart_broker")
            if rb:
                b = bench.brokers[rb["broker"]]
                unfenced = [
                    e for e in log_events(b.log_path, "broker_fencing_changed", rb["log_since"]) if not e["fenced"]
                ]
                rb["unfenced_after_s"] = wall_time(unfenced[0]) - rb["exec_wall_time"] if unfenced else None
                print(
                    f"    the restarted broker b{rb['broker']} was unfenced "
                    + (f"{rb['unfenced_after_s']:.1f} s after its exec" if unfenced else "NOT YET (fenced to the end)")
                )
            churn = isr_changes(bench, broker_marks)
            report["isr_changes_from_creation_on"] = churn
            print(
                f"    ISR changes from the start of the creation to the end: {churn['shrinks']:,} shrinks, "
                f"{churn['expands']:,} expansions (the broker restart's controlled shutdown takes it out of every ISR)"
            )
            print(
                "\n    on disk at the end: "
                + "; ".join(
                    f"{k} {f['bytes'] / 2**20:,.1f} MiB ({f['segments']} seg, {f['snapshots']} snap)"
                    for k, f in files.items()
                )
            )
    except Exception as e:  # a phase that could not finish: say where and why, keep what was measured
        why = bench.abort or f"{type(e).__name__}: {e}"
        done = [k for k in report if k not in ("settings", "observers", "overrides")]
        report["aborted"] = {"after": done, "why": why}
        print(f"\n    STOPPED after {done or 'the start'}: {why}", flush=True)
    finally:
        bench.stop()
        if chunk_server is not None:
            chunk_server.kill()
            chunk_server.wait()

    if settings.idle_minutes > 0:
        print(
            f"\n[8] idle cluster for {settings.idle_minutes:g} min ({IDLE_PARTITIONS:,} partitions, {IDLE_OVERRIDES})",
            flush=True,
        )
        r = await idle_cluster(root / "idle", settings.idle_minutes, settings.brokers, observers)
        report["idle"] = r
        verdict = "PASS" if r["bounded"] else "FAIL"
        print(
            f"    after the first minute: at most {r['worst_after_first_minute']['segments']} segments and "
            f"{r['worst_after_first_minute']['snapshots']} snapshots on a node  {verdict} (bound: "
            f"{r['segment_bound']} segments for a log growing {r['log_growth_bytes_per_s']:,.0f} B/s, "
            f"{r['snapshot_bound']} snapshots)"
        )
        print(f"    {cpu_text(r)}")
    return report


def checks(report: dict[str, Any]) -> list[tuple[str, bool, dict[str, Any]]]:
    """Each target: its text, whether the figure meets it, and the requests it was measured over (a failed one
    fails it: a create attempt answered NOT_CONTROLLER, say, fails the creation target, not the others). A target
    whose phase did not run is listed as not measured, and fails."""
    observers = report["observers"]
    out: list[tuple[str, bool, dict[str, Any]]] = []

    def target(text: str, ok: bool, measured: dict[str, Any] | None = None) -> None:
        out.append((text, bool(ok), measured or {}))

    def missing(text: str) -> None:
        target(f"{text} (NOT MEASURED)", False)

    c = report.get("create")
    text = f"partitions created and every observer caught up in <= {CREATE_TARGET_S:.0f} s"
    if c:
        complete = c["created_partitions"] == c["partitions"] == c["leader_partition_count"] - c["partitions_before"]
        target(
            f"{c['partitions']:,} {text} (took {c['total_s']:.1f} s{'' if observers else ', no observers'}"
            f"{'' if complete else ', NOT ALL CREATED'})",
            observers and complete and c["total_s"] <= CREATE_TARGET_S,
            {"create": c},
        )
    else:
        missing(text)
    m = report.get("memory")
    text = f"memory <= {BYTES_PER_PARTITION_TARGET} B/partition on every controller and broker"
    if m:
        worst = max((p["bytes_per_partition"] for p in m["processes"].values()), default=float("nan"))
        brokers = observers and any(k.startswith("b") for k in m["processes"])
        target(
            f"{text} (worst {worst:,.0f}{'' if brokers else ', brokers not measured'})",
            brokers and worst <= BYTES_PER_PARTITION_TARGET,
        )
    else:
        missing(text)
    for key, what in (("restart_controller", "controller"), ("restart_broker", "broker")):
        r = report.get(key)
        text = f"{what} restarted at scale ready in <= {RESTART_TARGET_S:.0f} s"
        if r:
            target(f"{text} (took {r['ready_s']:.2f} s)", r["ready_s"] <= RESTART_TARGET_S)
        else:
            missing(text)
    rc = report.get("restart_controller")
    if rc and "describe_equal" in rc:
        target("restarted controller's DescribeTopics equal the leader's (or a broker image's)", rc["describe_equal"])
    s = report.get("snapshot")
    text = f"snapshot written in <= {SNAPSHOT_TARGET_S:.0f} s"
    text_p99 = f"appender p99 <= {APPENDER_P99_TARGET_MS:.0f} ms during the snapshot"
    if s:
        target(
            f"{text} (took {s['snapshot']['request_to_frozen_s']:.2f} s)",
            s["snapshot"]["request_to_frozen_s"] <= SNAPSHOT_TARGET_S and not s["snapshot"]["error"],
        )
        target(
            f"{text_p99} (was {s['during']['p99_ms']:.1f} ms; baseline {s['baseline']['p99_ms']:.1f} ms)",
            s["during"]["p99_ms"] <= APPENDER_P99_TARGET_MS,
            {"appender baseline": s["baseline"], "appender during the snapshot": s["during"]},
        )
    else:
        missing(text)
        missing(text_p99)
    f, e = report.get("failover_full"), report.get("failover_empty")
    text = f"kill -9 failover at scale <= {FAILOVER_RATIO_TARGET}x the empty cluster's"
    if f and e:
        factor = ratio(f["median_s"], e["median_s"])
        target(
            f"{text} ({f['median_s']:.2f} s vs {e['median_s']:.2f} s = {factor:.2f}x)", factor <= FAILOVER_RATIO_TARGET
        )
    else:
        missing(text)
    w = report.get("wiped_follower")
    text = f"wiped follower installs a snapshot at >= {INSTALL_TARGET_MIB_S:.0f} MiB/s"
    if w:
        rate = w.get("mib_per_s")
        target(
            f"{text} ({f'{rate:,.1f} MiB/s' if rate else 'no snapshot installed'})",
            bool(w["installed"]) and rate is not None and rate >= INSTALL_TARGET_MIB_S,
        )
    else:
        missing(text)
    i = report.get("idle")
    if i:
        target(f"idle cluster's segments and snapshots bounded over {i['minutes']:g} min", i["bounded"])
    elif report["settings"]["idle_minutes"] > 0:
        missing("idle cluster's segments and snapshots bounded")
    return out


def run(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    base = Path(args.dir) if args.dir else ROOT
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="scale-bench-", dir=base))
    started = time.perf_counter()
    compile_product()

    def interrupted(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, interrupted)
    try:
        report = asyncio.run(run_async(args, settings, root))
        report["wall_s"] = time.perf_counter() - started
        print(f"\nacceptance (issue targets; this run took {report['wall_s']:.0f} s):")
        if "aborted" in report:
            print(f"  the run STOPPED early: {report['aborted']['why']}")
        report["checks"] = [
            result for text, ok, measured in checks(report) for result in acceptance([(text, ok)], measured)
        ]
        if args.json:
            print(json.dumps(report, default=str))
    finally:
        for bench in STARTED:
            bench.kill_all()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--partitions", type=int, default=None, help=f"default {FULL_PARTITIONS:,} ({QUICK_PARTITIONS:,} with --quick)"
    )
    p.add_argument("--quick", action="store_true", help="50,000 partitions, 1 idle minute, 2 trials")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dir", help="where the data directories go (default: the repository's disk)")
    p.add_argument("--brokers", type=int, default=6)
    p.add_argument("--trials", type=int, default=None, help="kill -9 trials (default 5; 2 with --quick)")
    p.add_argument(
        "--idle-minutes", type=float, default=None, help="the idle phase (default 10; 1 with --quick; 0: skip)"
    )
    p.add_argument(
        "--appender-seconds",
        type=float,
        default=None,
        help="the appender's baseline window (default 5; 3 with --quick)",
    )
    p.add_argument(
        "--create-deadline",
        type=float,
        default=None,
        help="stop sending CreateTopics after this many seconds and go on at the size reached (default 900)",
    )
    p.add_argument("--keep", action="store_true", help="keep the data directories and logs")
    p.add_argument("--stub-brokers", help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, default=6, help=argparse.SUPPRESS)
    p.add_argument("--chunk-server", type=int, help=argparse.SUPPRESS)
    p.add_argument("--file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.stub_brokers:
        return stub_brokers_main(args.stub_brokers, args.count)
    if args.chunk_server:
        return chunk_server_main(args.chunk_server, args.file)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
