"""Helpers for the end-to-end tests: a process cluster (``pykraft node`` voters, see pykraft.testing.Cluster) plus
``pykraft broker`` agents, waiting for brokers to be unfenced, and reading TopicRecords from every node's log.

Kafka's default timeouts throughout (election 1000 ms, fetch 2000 ms, broker heartbeat 2000 ms): the machine is
small and busy, and shorter timeouts cause spurious elections. Ports are always chosen free at run time."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from controller.records import TopicRecord, decode_batch
from pykraft.client import AdminClient, AdminError, ClusterDescription
from pykraft.testing import Cluster, free_ports
from quorum.log.log import METADATA_PARTITION_DIR
from quorum.log.reader import Damage, scan_file

REPO = Path(__file__).resolve().parents[2]
SESSION_TIMEOUT_MS = 3000  # broker.session.timeout.ms for the clusters of these tests (Kafka's default is 9000)
HEARTBEAT_INTERVAL_MS = 2000  # broker.heartbeat.interval.ms, the broker agent's default (Kafka's too)
FENCE_CHECK_INTERVAL_MS = 1000  # how often the active controller looks for expired sessions
RACKS = ("rack-1", "rack-2", "rack-3")


def pykraft_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pykraft", *args]


def run_pykraft(*args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ``pykraft`` CLI to completion (``python -m pykraft``, the installed entry point's code)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        pykraft_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd or REPO, env=env, check=False
    )


# -- broker agents -------------------------------------------------------------------------------------------------


@dataclass
class BrokerProcess:
    """One ``pykraft broker`` agent process; ended by its own PID only. With ``voters`` and ``metadata_dir`` it
    replicates the metadata log as a Raft observer (else it polls the controller)."""

    broker_id: int
    rack: str
    bootstrap: str
    log_path: Path
    listener_port: int
    proc: subprocess.Popen[bytes] | None = None
    voters: str | None = None
    metadata_dir: Path | None = None
    extra_args: list[str] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.listener_port}"

    def start(self) -> None:
        args = pykraft_cmd(
            "broker", "--broker-id", str(self.broker_id), "--rack", self.rack, "--bootstrap-server", self.bootstrap,
            "--listener", f"127.0.0.1:{self.listener_port}",
        )  # fmt: skip
        if self.voters is not None and self.metadata_dir is not None:
            args += ["--controller-quorum-voters", self.voters, "--metadata-dir", str(self.metadata_dir)]
        args += self.extra_args
        with self.log_path.open("ab") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        if self.running:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM: the agent goes through controlled shutdown, then exits."""
        assert self.proc is not None
        if self.running:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-3000:]
        except OSError:
            return ""


@dataclass
class ProcessCluster:
    """Three ``pykraft node`` voters and broker agents over three racks, all real processes on loopback."""

    root: Path
    brokers_per_rack: int = 2
    node_args: list[str] = field(default_factory=list)
    cluster: Cluster = field(init=False)
    brokers: dict[int, BrokerProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cluster = Cluster(root=self.root, size=3, extra_args=self.node_args)
        n = self.brokers_per_rack * len(RACKS)
        ports = free_ports(n)
        for j in range(n):
            broker_id = 101 + j
            self.brokers[broker_id] = BrokerProcess(
                broker_id, RACKS[j % len(RACKS)], self.bootstrap, self.root / f"broker-{broker_id}.log", ports[j]
            )

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.cluster.nodes.values())

    @property
    def racks(self) -> dict[int, str]:
        return {b.broker_id: b.rack for b in self.brokers.values()}

    def start(self) -> None:
        self.cluster.start()
        for b in self.brokers.values():
            b.start()

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.running:
                try:
                    b.terminate(timeout=15)
                except subprocess.TimeoutExpired:
                    b.kill()
        self.cluster.stop()

    def close(self) -> None:
        """Stop everything started here, whatever state it is in."""
        try:
            self.stop()
        finally:
            for b in self.brokers.values():
                b.kill()
            for node in self.cluster.nodes.values():
                node.kill()

    async def wait_ready(self) -> None:
        """A leader elected and every broker registered and unfenced."""
        await self.cluster.wait_for_leader(timeout=60)
        async with AdminClient(self.bootstrap) as admin:
            await wait_brokers(admin, self, unfenced=set(self.brokers))

    def logs(self) -> str:
        brokers = "\n".join(f"--- broker {b.broker_id}\n{b.log()}" for b in self.brokers.values())
        return f"{self.cluster.logs()}\n{brokers}"


async def wait_brokers(
    admin: AdminClient,
    pc: ProcessCluster,
    unfenced: set[int],
    fenced: set[int] = frozenset(),  # type: ignore[assignment]
    timeout: float = 60.0,
) -> ClusterDescription:
    """Wait until describe_cluster shows every broker of ``unfenced`` unfenced and every one of ``fenced`` fenced."""
    deadline = time.monotonic() + timeout
    last: object = "no answer"
    while time.monotonic() < deadline:
        try:
            desc = await admin.describe_cluster(timeout_ms=5000)
        except AdminError as e:
            last = e
        else:
            state = {b.broker_id: b.fenced for b in desc.brokers}
            if all(state.get(b) is False for b in unfenced) and all(state.get(b) is True for b in fenced):
                return desc
            last = state
        await asyncio.sleep(0.1)
    raise TimeoutError(f"brokers not as expected within {timeout} s (last: {last})\n{pc.logs()}")


# -- the logs on disk ----------------------------------------------------------------------------------------------


def topic_records(data_dir: Path) -> list[tuple[int, str, str]]:
    """``(offset, name, topic id)`` of every TopicRecord in a node's ``__cluster_metadata-0`` segments, checking
    that the segments hold only CRC-valid batches with contiguous offsets."""
    out: list[tuple[int, str, str]] = []
    segments = sorted((data_dir / METADATA_PARTITION_DIR).glob("*.log"))
    assert segments, f"no log segments in {data_dir}"
    expected = 0
    for path in segments:
        for item in scan_file(path):
            assert not isinstance(item, Damage), f"damaged log: {item}"
            assert item.crc_valid(), f"{path}: bad CRC in {item!r}"
            assert item.base_offset == expected, f"{path}: batch at {item.base_offset}, expected {expected}"
            expected = item.next_offset
            if item.is_control:
                continue
            for rec in decode_batch(item, str(path)):
                if isinstance(rec.message, TopicRecord):
                    out.append((rec.offset, rec.message.name, str(rec.message.topic_id)))
    return out


def ids_by_name(records: list[tuple[int, str, str]]) -> dict[str, set[str]]:
    ids: dict[str, set[str]] = defaultdict(set)
    for _, name, topic_id in records:
        ids[name].add(topic_id)
    return ids


async def wait_logs_reach(cluster: Cluster, offset: int, timeout: float = 30.0) -> None:
    """Wait until every running voter's log ends at or beyond ``offset`` (a committed offset of the leader's)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        views = await asyncio.gather(*(cluster.describe(n) for n in cluster.nodes if cluster.nodes[n].running))
        if views and all(v is not None and v.log_end_offset >= offset for v in views):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the running voters did not reach offset {offset} within {timeout} s\n{cluster.logs()}")


async def leader_high_watermark(cluster: Cluster, timeout: float = 30.0) -> tuple[int, int]:
    """``(leader id, high watermark)`` of the current leader, as it reports them."""
    leader, _ = await cluster.wait_for_leader(timeout)
    view = await cluster.describe(leader)
    assert view is not None
    return leader, view.high_watermark
