"""The processes of ``peers.py`` and the client's view of them: a pykraft quorum node, the bare grpc.aio echo
server, and what every system offers the measurements (a write to a member; the leader once the cluster is whole).

Run as a script, this module is those child processes (``--pykraft-node ID``, ``--echo-server PORT``, ``--front
PORT``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _stats import error_name, exception_name, metrics_text, parse_stage_metrics  # noqa: E402

VALUE = b"v" * 100
APPEND = "/pykraft.quorum.v1.QuorumAdmin/AppendRecords"
DESCRIBE = "/pykraft.quorum.v1.QuorumAdmin/DescribeQuorum"
ECHO = "/peers.bench.Echo/Echo"
CLIENT_OPTIONS = [  # a restarted member is reconnected to soon (gRPC's default backoff starts at 1 s)
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
WRITE_TIMEOUT_S = 10.0  # a write in a latency or throughput round
ATTEMPT_TIMEOUT_S = 2.0  # a write during a failover
WHOLE_TIMEOUT_S = 90.0
# One batch on its way to the leader at a time, the next gathering meanwhile (measured: 2 or 4 at once made smaller
# batches and ~0.4x the echo, against ~0.7x).
FRONT_SENDERS = 1
FRONT_BATCH = 256  # requests in one batch, at most


def pykraft_record(size: int = 100) -> bytes:
    """A metadata record of exactly ``size`` bytes: a NoOpRecord carrying padding in an unknown tagged field."""
    from controller.records.metadata import NoOpRecord
    from controller.records.serde import serialize

    for n in range(size + 1):
        record = serialize(NoOpRecord(unknown_tags=[(1000, b"p" * n)]))
        if len(record) == size:
            return record
    raise ValueError(f"no NoOpRecord of {size} bytes")


# -- processes and systems ----------------------------------------------------------------------------------------


class Proc:
    """One process this benchmark started; ended by its PID only."""

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.args, self.log_path, self.env = args, log_path, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )
        self.paused = False

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def running(self) -> bool:
        return self.alive and not self.paused

    def signal(self, sig: int) -> None:
        assert self.proc is not None and self.alive, f"{self.args[0]} is not running; see {self.log_path}"
        self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.wait()
        self.paused = sig == signal.SIGSTOP

    def end(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.kill()  # SIGKILL ends a stopped process too
            self.proc.wait()
        self.paused = False

    def cpu_seconds(self) -> float:
        """User + system CPU time so far (/proc/PID/stat), 0 if the process is gone."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()  # type: ignore[union-attr]
        except (OSError, AttributeError, IndexError):
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def count_lines(self, marker: bytes) -> int:
        try:
            return self.log_path.read_bytes().count(marker)
        except OSError:
            return 0


@dataclass
class Write:
    ok: bool
    error: str = ""
    leader_hint: int | None = None  # pykraft: the leader a refusal named


class System:
    """A 3-member cluster (or the echo server) as the client sees it."""

    name = ""
    election_marker = b""

    def __init__(self, addresses: dict[int, str], procs: dict[int, Proc]) -> None:
        self.addresses, self.procs = addresses, procs
        self.channels: dict[int, Any] = {}

    def start(self) -> None:
        for p in self.procs.values():
            p.start()

    def end(self) -> None:
        for p in self.procs.values():
            p.end()

    async def open(self) -> None:
        import grpc

        self.channels = {i: grpc.aio.insecure_channel(a, options=CLIENT_OPTIONS) for i, a in self.addresses.items()}

    async def close(self) -> None:
        for ch in self.channels.values():
            await ch.close()

    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds() for p in self.procs.values())

    def elections(self) -> int:
        return sum(p.count_lines(self.election_marker) for p in self.procs.values())

    async def write(self, member: int, timeout: float) -> Write:
        raise NotImplementedError

    async def leader_if_whole(self) -> int | None:
        """The leader, if all 3 members run, agree on it, and hold its whole committed log; else None."""
        raise NotImplementedError

    async def whole(self, timeout: float = WHOLE_TIMEOUT_S) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = await self.leader_if_whole()
            if leader is not None:
                return leader
            await asyncio.sleep(0.05)
        logs = ", ".join(str(p.log_path) for p in self.procs.values())
        raise TimeoutError(f"{self.name}: the 3 members were not whole and caught up within {timeout:.0f} s ({logs})")


def grpc_error(e: BaseException) -> str:
    """``grpc UNAVAILABLE``, with etcd's reason when it gives one (``etcdserver: leader changed``)."""
    name = exception_name(e)
    details = getattr(e, "details", None)
    text = details() if callable(details) else None
    if text and text.startswith("etcdserver:"):
        return f"{name} ({text})"
    return name


class Pykraft(System):
    """pykraft's quorum with its defaults; with ``grpc_streams`` its peers talk over gRPC streams instead of frame
    connections (``pykraft.quorum.frames.port=-1``): the baseline the frames are measured against."""

    name = "pykraft"
    election_marker = b'"election_started"'

    def __init__(self, root: Path, ports: list[int], metrics_ports: list[int], grpc_streams: bool = False) -> None:
        voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
        procs = {}
        self.metrics_ports = dict(zip((1, 2, 3), metrics_ports, strict=True))
        prefix = "pykraft-grpc" if grpc_streams else "pykraft"
        if grpc_streams:
            self.name = "pykraft on gRPC streams"
        for i in (1, 2, 3):
            args = [sys.executable, __file__, "--pykraft-node", str(i), "--voters", voters]
            args += ["--metrics-port", str(self.metrics_ports[i])] + (["--grpc-streams"] if grpc_streams else [])
            procs[i] = Proc([*args, "--data-dir", str(root / f"{prefix}{i}")], root / f"{prefix}{i}.log")
        super().__init__({i: f"127.0.0.1:{ports[i - 1]}" for i in (1, 2, 3)}, procs)
        self.requests: dict[float, bytes] = {}

    def commit_stages(self) -> dict[int, dict[str, float]]:
        """Each node's summed commit stage times and sample counts (quorum/raft/hops.py), from its /metrics:
        ``{node: {"leader/written": seconds, ..., "leader/samples": n, "follower/flushed": ..., ...}}``."""
        out: dict[int, dict[str, float]] = {}
        for i, port in self.metrics_ports.items():
            text = metrics_text(port, timeout=5)
            if text is None:
                raise OSError(f"node {i}'s metrics on port {port} did not answer")
            out[i] = parse_stage_metrics(text)
        return out

    async def open(self) -> None:
        from quorum.transport.pb import quorum_pb2 as pb

        await super().open()
        record = pykraft_record()
        self.requests = {  # serialized once, as etcd's are built by hand: the client does the same work for both
            t: pb.AppendRecordsRequest(records=[record], timeout_ms=int(t * 1000)).SerializeToString()
            for t in (WRITE_TIMEOUT_S, ATTEMPT_TIMEOUT_S)
        }
        self.appends = {
            i: ch.unary_unary(
                APPEND, request_serializer=None, response_deserializer=pb.AppendRecordsResponse.FromString
            )
            for i, ch in self.channels.items()
        }
        self.describes = {
            i: ch.unary_unary(
                DESCRIBE,
                request_serializer=pb.DescribeQuorumRequest.SerializeToString,
                response_deserializer=pb.DescribeQuorumResponse.FromString,
            )
            for i, ch in self.channels.items()
        }

    async def write(self, member: int, timeout: float) -> Write:
        import grpc

        try:  # the node answers by timeout_ms; the gRPC deadline is only a backstop
            r = await self.appends[member](self.requests[timeout], timeout=timeout + 1)
        except grpc.aio.AioRpcError as e:
            return Write(False, grpc_error(e))
        if r.error_code:
            return Write(False, error_name(r.error_code), r.leader_id if r.leader_id > 0 else None)
        return Write(True)

    async def leader_if_whole(self) -> int | None:
        import grpc

        from quorum.transport.pb import quorum_pb2 as pb

        if not all(p.running for p in self.procs.values()):
            return None

        async def describe(i: int) -> Any:
            try:  # a node answers DescribeQuorum from its own state: a short deadline is enough
                return await self.describes[i](pb.DescribeQuorumRequest(), timeout=1.0)
            except grpc.aio.AioRpcError:
                return None

        views = await asyncio.gather(*(describe(i) for i in self.channels))
        if any(v is None for v in views):
            return None
        lead = [v for v in views if v.role == "Leader"]
        if len(lead) != 1 or len({(v.leader_id, v.leader_epoch) for v in views}) != 1:
            return None
        end = lead[0].log_end_offset
        if end > 0 and all(v.log_end_offset == end and v.high_watermark == end for v in views):
            return lead[0].node_id
        return None


class Echo(System):
    name = "grpc.aio echo"

    def __init__(self, root: Path, port: int) -> None:
        proc = Proc([sys.executable, __file__, "--echo-server", str(port)], root / "echo.log")
        super().__init__({1: f"127.0.0.1:{port}"}, {1: proc})

    async def open(self) -> None:
        await super().open()
        self.echo = self.channels[1].unary_unary(ECHO, request_serializer=None, response_deserializer=None)

    async def write(self, member: int, timeout: float) -> Write:
        import grpc

        try:
            answer = await self.echo(VALUE, timeout=timeout)
        except grpc.aio.AioRpcError as e:
            return Write(False, grpc_error(e))
        return Write(True) if answer == VALUE else Write(False, "wrong echo")

    async def leader_if_whole(self) -> int | None:
        return 1 if self.procs[1].running and (await self.write(1, 1.0)).ok else None


class BatchingFront(System):
    """The design of a multi-process front, measured: ``count`` front processes, each a grpc.aio server of the same
    AppendRecords the clients send to a node, that forwards what its clients sent meanwhile to the leader as one
    AppendRecords (a protobuf message's repeated field concatenates: the requests' bytes joined are one request
    holding all their records) and answers each client with the leader's answer once committed. The leader then
    pays one gRPC call per batch, not per write; the fronts pay the per-write gRPC cost, on other cores."""

    def __init__(self, root: Path, cluster: Pykraft, ports: list[int]) -> None:
        self.cluster = cluster
        self.name = f"pykraft + {len(ports)} front(s)"
        upstreams = ",".join(cluster.addresses[i] for i in sorted(cluster.addresses))
        procs = {
            k + 1: Proc(
                [sys.executable, __file__, "--front", str(port), "--upstreams", upstreams], root / f"front{k + 1}.log"
            )
            for k, port in enumerate(ports)
        }
        super().__init__({k: f"127.0.0.1:{port}" for k, port in zip(procs, ports, strict=True)}, procs)
        self._next = 0

    async def open(self) -> None:
        from quorum.transport.pb import quorum_pb2 as pb

        await super().open()
        self.appends = {
            i: ch.unary_unary(
                APPEND, request_serializer=None, response_deserializer=pb.AppendRecordsResponse.FromString
            )
            for i, ch in self.channels.items()
        }

    def cpu_seconds(self) -> float:
        return super().cpu_seconds() + self.cluster.cpu_seconds()  # the servers: the fronts and the nodes

    def elections(self) -> int:
        return self.cluster.elections()

    async def write(self, member: int, timeout: float) -> Write:
        import grpc

        self._next = front = self._next % len(self.appends) + 1  # the clients spread over the fronts
        try:
            r = await self.appends[front](self.cluster.requests[timeout], timeout=timeout + 1)
        except grpc.aio.AioRpcError as e:
            return Write(False, grpc_error(e))
        return Write(True) if not r.error_code else Write(False, error_name(r.error_code))

    async def leader_if_whole(self) -> int | None:
        if not all(p.running for p in self.procs.values()):
            return None
        return await self.cluster.leader_if_whole()


# -- the child processes --------------------------------------------------------------------------------------------


def pykraft_node_main(args: argparse.Namespace) -> int:
    """A quorum node (no controller) with AppendRecords opened; every other setting is the default (but the frame
    listener, with --grpc-streams)."""
    import faulthandler

    from pykraft.logs import configure_logging
    from pykraft.node import NodeSettings, run_loop, serve
    from quorum.raft.config import parse_voters

    faulthandler.enable()
    configure_logging(json=True)
    settings = NodeSettings(
        node_id=args.pykraft_node,
        voters=parse_voters(args.voters),
        data_dir=Path(args.data_dir),
        cluster_id="peers-bench",
        raw_appends=True,
        metrics_port=args.metrics_port,
        frames_port=-1 if args.grpc_streams else 0,
    )
    return run_loop(serve(settings, with_controller=False))


def echo_main(port: int) -> int:
    import grpc

    from pykraft.node import run_loop

    async def echo(request: bytes, context: object) -> bytes:
        return request

    async def main() -> int:
        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(echo)  # no (de)serializers: the bytes themselves
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("peers.bench.Echo", {"Echo": handler}),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        await server.wait_for_termination()
        return 0

    return run_loop(main())


def front_main(port: int, upstreams: list[str]) -> int:
    """A batching front (see :class:`BatchingFront`): ``FRONT_SENDERS`` batch(es) on their way to the leader at once,
    each holding every request that arrived meanwhile (at most ``FRONT_BATCH``). A refusal naming another leader
    sends the batch there; an unreachable one, to the next member."""
    import grpc

    from pykraft.node import run_loop
    from quorum.errors import Errors
    from quorum.transport.pb import quorum_pb2 as pb

    async def main() -> int:
        loop = asyncio.get_running_loop()
        waiting: list[tuple[bytes, asyncio.Future[bytes]]] = []
        arrived = asyncio.Event()
        channels = [grpc.aio.insecure_channel(a, options=CLIENT_OPTIONS) for a in upstreams]
        appends = [ch.unary_unary(APPEND, request_serializer=None, response_deserializer=None) for ch in channels]
        leader = [0]  # index into upstreams

        async def append(request: bytes, context: object) -> bytes:
            answer: asyncio.Future[bytes] = loop.create_future()
            waiting.append((request, answer))
            arrived.set()
            return await answer

        async def send(batch: list[tuple[bytes, asyncio.Future[bytes]]]) -> None:
            payload = b"".join(request for request, _ in batch)
            redirects = (Errors.NOT_LEADER_OR_FOLLOWER, Errors.NOT_CONTROLLER)
            answer = pb.AppendRecordsResponse(error_code=int(redirects[0])).SerializeToString()
            for _ in range(len(upstreams) + 1):
                target = leader[0]
                try:
                    answer = await appends[target](payload, timeout=WRITE_TIMEOUT_S + 1)
                except grpc.aio.AioRpcError:
                    leader[0] = (target + 1) % len(upstreams)
                    continue
                r = pb.AppendRecordsResponse.FromString(answer)
                if r.error_code not in redirects:
                    break
                leader[0] = r.leader_id - 1 if 0 < r.leader_id <= len(upstreams) else (target + 1) % len(upstreams)
            for _, f in batch:
                if not f.done():
                    f.set_result(answer)

        async def sender() -> None:
            while True:
                while not waiting:
                    arrived.clear()
                    await arrived.wait()
                batch = waiting[:FRONT_BATCH]
                del waiting[:FRONT_BATCH]
                await send(batch)

        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(append)  # no (de)serializers: the bytes themselves
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("pykraft.quorum.v1.QuorumAdmin", {"AppendRecords": handler}),)
        )
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        senders = [asyncio.create_task(sender()) for _ in range(FRONT_SENDERS)]
        try:
            await server.wait_for_termination()
        finally:
            for t in senders:
                t.cancel()
        return 0

    return run_loop(main())


def main() -> int:
    p = argparse.ArgumentParser(description="a child process of benchmarks/peers.py")
    p.add_argument("--pykraft-node", type=int)
    p.add_argument("--voters")
    p.add_argument("--data-dir")
    p.add_argument("--metrics-port", type=int)
    p.add_argument("--grpc-streams", action="store_true")
    p.add_argument("--echo-server", type=int)
    p.add_argument("--front", type=int)
    p.add_argument("--upstreams")
    args = p.parse_args()
    if args.front:
        return front_main(args.front, args.upstreams.split(","))
    if args.pykraft_node:
        return pykraft_node_main(args)
    if args.echo_server:
        return echo_main(args.echo_server)
    p.error("--pykraft-node or --echo-server")
    return 2


if __name__ == "__main__":
    sys.exit(main())
