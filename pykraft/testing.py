"""Running real ``pykraft node`` processes on loopback, for tests and benchmarks.

Ports are chosen free at run time; processes are ended by PID, only the ones started here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from quorum.transport.admin import RAW_APPEND_SETTING
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports that were free a moment ago (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class NodeProcess:
    node_id: int
    port: int
    data_dir: Path
    args: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    paused: bool = False

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        out = self.log_path.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT, env=env)
        out.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def running(self) -> bool:
        """Alive and not paused: a node that can answer."""
        return self.alive and not self.paused

    def pause(self) -> None:
        """SIGSTOP: the process stands still (a long GC pause, a frozen VM), its sockets stay open."""
        assert self.proc is not None and self.alive
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused and self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """kill -9: no resignation, no flush."""
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.paused = False

    def terminate(self, timeout: float = 15) -> int:
        """SIGTERM: a graceful stop (a leader resigns first)."""
        assert self.proc is not None
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            self.resume()  # a stopped process handles SIGTERM once continued
        return self.proc.wait(timeout)


@dataclass
class Cluster:
    """N voters on loopback, each a separate ``pykraft node`` process. ``raw_appends`` opens the quorum admin's
    AppendRecords (``unsafe.raw.append.enable``), which a node refuses by default: tests and benchmarks that write
    raw records turn it on for themselves."""

    root: Path
    size: int = 3
    extra_args: list[str] = field(default_factory=list)
    raw_appends: bool = False
    nodes: dict[int, NodeProcess] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ports = free_ports(self.size)
        voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
        self.voters = voters
        for i, port in enumerate(ports):
            node_id = i + 1
            data_dir = self.root / f"node{node_id}"
            args = [
                sys.executable,
                "-m",
                "pykraft",
                "node",
                "--node-id",
                str(node_id),
                "--controller-quorum-voters",
                voters,
                "--data-dir",
                str(data_dir),
                *(["--override", f"{RAW_APPEND_SETTING}=true"] if self.raw_appends else []),
                *self.extra_args,
            ]
            self.nodes[node_id] = NodeProcess(node_id, port, data_dir, args, self.root / f"node{node_id}.log")

    def start(self) -> None:
        for node in self.nodes.values():
            node.start()

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.alive:
                try:
                    node.terminate(timeout=10)
                except subprocess.TimeoutExpired:
                    node.kill()

    def stop_followers_first(self, leader_id: int) -> None:
        """SIGTERM the followers, then the leader: no election runs during the shutdown, so no node gains a
        LeaderChange batch the others lack. (The leader may append a few records no follower received before it
        stops: the logs agree up to their minimum common end.) Every node must exit 0."""
        for node_id in [n for n in self.nodes if n != leader_id] + [leader_id]:
            node = self.nodes[node_id]
            if node.running:
                code = node.terminate(timeout=15)
                assert code == 0, f"node {node_id} exited with {code}\n{self.logs()}"

    def __enter__(self) -> Cluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        for node in self.nodes.values():
            node.kill()

    def logs(self) -> str:
        return "\n".join(f"--- node {n.node_id}\n{n.log_path.read_text()[-4000:]}" for n in self.nodes.values())

    # -- talking to it ---------------------------------------------------------------------------------------

    async def describe(self, node_id: int, timeout: float = 2.0) -> pb.DescribeQuorumResponse | None:
        node = self.nodes[node_id]
        if not node.running:
            return None
        try:
            async with grpc.aio.insecure_channel(node.address) as ch:
                return await pb_grpc.QuorumAdminStub(ch).DescribeQuorum(pb.DescribeQuorumRequest(), timeout=timeout)
        except grpc.aio.AioRpcError:
            return None

    async def wait_for_leader(self, timeout: float = 30.0, *, newer_than: int = 0) -> tuple[int, int]:
        """``(leader id, epoch)`` once a leader with epoch > ``newer_than`` has committed in its epoch and every
        running node agrees."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            views = [await self.describe(n) for n in self.nodes if self.nodes[n].running]
            leaders = {(v.leader_id, v.leader_epoch) for v in views if v is not None}
            if len(leaders) == 1 and None not in views:
                leader_id, epoch = next(iter(leaders))
                # None while the agreed leader is not a running node (just killed, say): keep waiting.
                lead_view = next((v for v in views if v is not None and v.node_id == leader_id), None)
                if leader_id > 0 and epoch > newer_than and lead_view is not None and lead_view.role == "Leader":
                    if lead_view.high_watermark > 0:
                        return leader_id, epoch
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no agreed leader within {timeout} s\n{self.logs()}")

    async def append(self, node_id: int, records: list[bytes], timeout_ms: int = 5000) -> pb.AppendRecordsResponse:
        async with grpc.aio.insecure_channel(self.nodes[node_id].address) as ch:
            request = pb.AppendRecordsRequest(records=records, timeout_ms=timeout_ms)
            return await pb_grpc.QuorumAdminStub(ch).AppendRecords(request, timeout=timeout_ms / 1000 + 5)


@contextlib.contextmanager
def default_ports_held() -> Iterator[None]:
    """Listen on whichever of ``pykraft cluster``'s default ports are free, so that it chooses others (a test's
    cluster never takes the fixed ports an operator's may be using)."""
    from pykraft.cluster import DEFAULT_PORTS  # here: the cluster module is not needed by the other helpers

    held = []
    try:
        for port in DEFAULT_PORTS:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                s.listen()
            except OSError:
                s.close()  # in use by someone else: the CLI will not take it either
                continue
            held.append(s)
        yield
    finally:
        for s in held:
            s.close()
