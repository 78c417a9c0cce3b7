"""The scale benchmark's processes (``scale.py``): the cluster of 3 controllers and its observer brokers (the
``Bench`` class: starting and stopping them, who leads, how far each node is, DescribeTopics digests), the stub
brokers that stand in when brokers are not observers, and the node metrics and log files read along the way.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from _stats import error_name, metrics_text, prometheus_samples  # noqa: E402

from pykraft.api import controller_pb2 as pb  # noqa: E402
from pykraft.api import controller_pb2_grpc as pb_grpc  # noqa: E402
from pykraft.testing import Cluster, free_ports  # noqa: E402
from quorum.errors import Errors  # noqa: E402
from quorum.log.log import METADATA_PARTITION_DIR  # noqa: E402

SCALE_SCRIPT = str(Path(__file__).with_name("scale.py"))  # the entry point, which runs the stub brokers
RACKS = ("rack-1", "rack-2", "rack-3")
BIG_MESSAGES = [("grpc.max_receive_message_length", 64 * 1024 * 1024), ("grpc.max_send_message_length", 64 << 20)]
# The quorum runs at normal priority, the six brokers sharing its two cores at nice 10: as etcd's tuning guide
# advises for etcd, the consensus processes must not be starved by their neighbours (in production the controllers
# would have machines of their own). Without it, at ~800k partitions a starved leader missed its followers' fetch
# timeout, elections followed, brokers' heartbeats timed out and fencing them added records faster than they
# were committed. At nice 10 the brokers' heartbeats used to miss broker.session.timeout.ms, their loops starved;
# heartbeats now have a thread of their own (pykraft/loop_thread.py), so the brokers take the lower priority.
BROKER_NICE = 10
NOT_CONTROLLER = int(Errors.NOT_CONTROLLER)
STARTED: list[Bench] = []  # every cluster started, so an interrupted run still ends its processes


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
                [sys.executable, SCALE_SCRIPT, "--stub-brokers", self.bootstrap, "--count", str(self.settings.brokers)],
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

    async def wait_isr_whole(self, timeout: float, poll: float = 1.0) -> tuple[float | None, dict[str, float]]:
        """Seconds until no broker leads a partition with fewer in-sync replicas than its replicas
        (``kafka_server_replicamanager_under_replicated_partitions`` 0 on every broker, asked one at a time every
        ``poll`` s); None after ``timeout``. With the last count per broker still under-replicated."""
        started = time.perf_counter()
        deadline = time.monotonic() + timeout
        under: dict[str, float] = {}
        while True:
            for broker_id in sorted(self.brokers):
                _, n = await self.broker_gauge(broker_id, "kafka_server_replicamanager_under_replicated_partitions")
                if n is None or n > 0:
                    under[f"b{broker_id}"] = -1 if n is None else n
                else:
                    under.pop(f"b{broker_id}", None)
            if not under:
                return time.perf_counter() - started, under
            if time.monotonic() > deadline:
                return None, under
            await asyncio.sleep(poll)

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
