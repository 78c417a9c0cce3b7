"""Raft append benchmark: 3 `pykraft` node processes on loopback, fsync on, appenders inside the leader process.

    python benchmarks/raft_append.py [--duration 5] [--trials 20] [--quick] [--json] [--dir DIR]

Prints, measured in one run:
- raw baselines: 4 KiB write+fsync rate in the data directory, and the grpc.aio unary round-trip rate (1 in flight,
  echo server in its own process);
- committed records/s and batches/s with 1, 16 and 256 concurrent appenders (100-byte records, each appender
  waits for its record to commit before appending the next), and append-to-commit p50/p99;
- p50/p99 append-to-commit latency at a fixed offered load of 1,000 appends/s (open loop, latency measured from
  the scheduled time, so a stall is not hidden);
- leader failover (kill -9 -> the new leader's LeaderChangeMessage committed) and graceful handoff (SIGTERM ->
  successor committed), median and max of N trials, from the nodes' `leader_epoch_committed` log events (the
  monotonic clock is shared by processes on one host);
- ratios against the baselines.

Only committed appends count in a latency or a rate; the others (an error code such as NOT_LEADER_OR_FOLLOWER, an
exception, a commit not seen within 10 s of the loop's end) are counted by code beside the figures, and any of them
FAILS every acceptance target. Rates are over the time measured from the first append (or write, or call) to the
last answer, never over --duration.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _stats import Tally, acceptance, errors_text, ratio  # noqa: E402

RECORD = b"r" * 100


# -- node side: a real node with a control channel on stdin -----------------------------------------------------


def node_main(args: argparse.Namespace) -> int:
    from pykraft.logs import configure_logging
    from pykraft.node import NodeSettings, run_loop, serve
    from quorum.raft.config import parse_voters

    configure_logging(json=True)
    voters = parse_voters(args.voters)
    settings = NodeSettings(node_id=args.node_id, voters=voters, data_dir=Path(args.data_dir), cluster_id="bench")
    return run_loop(serve(settings, companion=_control, with_controller=False))


async def _control(node: object) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        cmd, *rest = line.decode().split()
        if cmd == "status":
            result = {
                "leader": node.core.is_leader,
                "epoch": node.core.epoch,
                "hw": node.core.high_watermark,
                "leo": node.log.end_offset,
                "leader_id": node.core.leader_id,
            }
        elif cmd == "load":
            result = await _closed_loop(node, int(rest[0]), float(rest[1]))
        elif cmd == "open":
            result = await _open_loop(node, int(rest[0]), float(rest[1]))
        else:
            result = {"error": f"unknown command {cmd}"}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


GRACE_S = 10.0  # an append not committed this long after its loop's end is counted as timed out


async def _finish(tally: Tally, tasks: list[asyncio.Task], timeout: float) -> None:
    """Wait for ``tasks``, each with at most one append in flight, for ``timeout`` seconds at most; those still
    waiting are cancelled and their appends counted as timed out (a stall is an error, not a hang)."""
    if not tasks:
        return
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
        tally.failure("TimeoutError")
    await asyncio.gather(*pending, return_exceptions=True)
    for task in done:
        task.result()  # the appenders catch every error of an append: anything else is the benchmark's bug


async def _append_one(node, tally: Tally, since: float) -> bool:
    """Append one record and wait for its commit; its latency from ``since``, or its error by code or type."""
    core = node.core
    try:
        epoch = core.epoch
        offset = node.append(epoch, [RECORD])
        await node.wait_committed(offset, epoch)
    except Exception as e:  # a KafkaError by its code (NOT_LEADER_OR_FOLLOWER, ...), anything else by its type
        tally.answered()
        tally.exception(e)
        return False
    tally.success((tally.answered() - since) * 1000)
    return True


async def _closed_loop(node, appenders: int, duration: float) -> dict:
    core = node.core
    if not core.is_leader:
        return {"error": "not leader"}
    tally = Tally()
    stop_at = time.perf_counter() + duration

    async def appender() -> None:
        while time.perf_counter() < stop_at:
            if not await _append_one(node, tally, tally.sent()):
                await asyncio.sleep(0.01)

    batches0 = core.metrics.appended_batches
    await _finish(tally, [asyncio.create_task(appender()) for _ in range(appenders)], duration + GRACE_S)
    batches = core.metrics.appended_batches - batches0
    return {
        "appenders": appenders,
        "seconds": tally.elapsed,
        "records": tally.ok,
        "records_per_s": tally.rate(),
        "batches_per_s": tally.rate(batches),
        "records_per_batch": tally.ok / max(batches, 1),
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        **tally.summary(),
    }


async def _open_loop(node, rate: int, duration: float) -> dict:
    core = node.core
    if not core.is_leader:
        return {"error": "not leader"}
    tally = Tally()

    async def one(scheduled: float) -> None:
        tally.sent()
        await _append_one(node, tally, scheduled)  # latency from the scheduled time: a stall is not hidden

    tasks = []
    start = time.perf_counter()
    n = int(rate * duration)
    for i in range(n):
        scheduled = start + i / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await _finish(tally, tasks, GRACE_S)
    return {
        "offered_per_s": rate,
        "achieved_per_s": tally.rate(),
        "records": tally.ok,
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        "max_ms": max(tally.latencies_ms, default=float("nan")),
        **tally.summary(),
    }


# -- echo server for the raw gRPC baseline -----------------------------------------------------------------------


def echo_main(port: int) -> int:
    import grpc

    from pykraft.node import run_loop
    from quorum.transport.pb import quorum_pb2 as pb
    from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

    class Echo(pb_grpc.QuorumAdminServicer):
        async def DescribeQuorum(self, request, context):
            return pb.DescribeQuorumResponse()

    async def main() -> int:
        server = grpc.aio.server()
        pb_grpc.add_QuorumAdminServicer_to_server(Echo(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()
        return 0

    return run_loop(main())


def grpc_unary_rate(seconds: float) -> dict:
    import grpc

    from pykraft.node import run_loop
    from pykraft.testing import free_ports
    from quorum.transport.pb import quorum_pb2 as pb
    from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

    port = free_ports(1)[0]
    proc = subprocess.Popen([sys.executable, __file__, "--echo-server", str(port)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"

        async def measure() -> dict:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
                stub = pb_grpc.QuorumAdminStub(ch)
                warmup, tally = Tally(), Tally()
                for _ in range(200):
                    try:
                        await stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=5)
                    except grpc.aio.AioRpcError as e:
                        warmup.exception(e)
                end = time.perf_counter() + seconds
                while time.perf_counter() < end:
                    t = tally.sent()
                    try:
                        await stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=5)
                    except grpc.aio.AioRpcError as e:
                        tally.answered()
                        tally.exception(e)
                        continue
                    tally.success((tally.answered() - t) * 1000)
                return {
                    "rtt_per_s": tally.rate(),
                    "p50_ms": tally.percentile(50),
                    **tally.summary(),
                    "warmup": warmup.summary(),
                }

        return run_loop(measure())
    finally:
        proc.kill()
        proc.wait()


def fsync_rate(directory: Path, seconds: float) -> dict:
    path = directory / "fsync-baseline.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    block = b"\0" * 4096
    tally = Tally()
    end = time.perf_counter() + seconds
    try:
        while time.perf_counter() < end:
            t = tally.sent()
            try:
                os.write(fd, block)
                os.fsync(fd)
            except OSError as e:
                tally.answered()
                tally.exception(e)
                continue
            tally.success((tally.answered() - t) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return {"fsync_per_s": tally.rate(), "p50_ms": tally.percentile(50), **tally.summary()}


# -- parent: the cluster and the measurements -------------------------------------------------------------------


class BenchNode:
    def __init__(self, node_id: int, voters: str, data_dir: Path, log_path: Path) -> None:
        self.node_id = node_id
        self.args = [
            sys.executable,
            __file__,
            "--node",
            "--node-id",
            str(node_id),
            "--voters",
            voters,
            "--data-dir",
            str(data_dir),
        ]
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        err = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        err.close()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ask(self, command: str) -> dict:
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        self.proc.stdin.write((command + "\n").encode())
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"node {self.node_id} exited; see {self.log_path}")
        return json.loads(line)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(timeout=30)

    def epoch_committed_events(self) -> list[dict]:
        out = []
        for line in self.log_path.read_text().splitlines():
            if '"leader_epoch_committed"' in line:
                out.append(json.loads(line))
        return out


class Bench:
    def __init__(self, root: Path) -> None:
        from pykraft.testing import free_ports

        ports = free_ports(3)
        voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
        self.nodes = {i + 1: BenchNode(i + 1, voters, root / f"n{i + 1}", root / f"n{i + 1}.log") for i in range(3)}

    def start(self) -> None:
        for n in self.nodes.values():
            n.start()

    def stop(self) -> None:
        for n in self.nodes.values():
            if n.running:
                n.proc.kill()
                n.proc.wait()

    def statuses(self) -> dict[int, dict]:
        return {i: n.ask("status") for i, n in self.nodes.items() if n.running}

    def wait_stable(self, timeout: float = 60) -> int:
        """Leader id once every running node follows it and is caught up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.statuses()
            leaders = [i for i, s in st.items() if s["leader"]]
            if len(leaders) == 1:
                lead = st[leaders[0]]
                if (
                    all(
                        s["epoch"] == lead["epoch"] and s["leo"] == lead["leo"] and s["hw"] == lead["hw"]
                        for s in st.values()
                    )
                    and lead["hw"] > 0
                ):
                    return leaders[0]
            time.sleep(0.05)
        raise TimeoutError("the cluster did not settle")

    def failover_trial(self, sig: int) -> float:
        leader = self.wait_stable()
        epoch = self.statuses()[leader]["epoch"]
        t0 = time.monotonic() * 1000
        self.nodes[leader].signal(sig)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for i, n in self.nodes.items():
                if i == leader:
                    continue
                for ev in n.epoch_committed_events():
                    if ev["epoch"] > epoch:
                        self.nodes[leader].start()
                        return ev["monotonic_ms"] - t0
            time.sleep(0.01)
        raise TimeoutError("no new leader committed within 30 s")


def run_parent(args: argparse.Namespace) -> int:
    duration = 1.5 if args.quick else args.duration
    trials = 3 if args.quick else args.trials
    base = Path(args.dir) if args.dir else ROOT
    root = Path(tempfile.mkdtemp(prefix="raft-bench-", dir=base))
    report: dict = {}
    try:
        print(f"pykraft raft_append benchmark; data in {root}; {os.cpu_count()} cores")
        report["raw_fsync"] = fsync_rate(root, 2.0)
        report["raw_grpc_unary"] = grpc_unary_rate(2.0)
        fsync, rtt = report["raw_fsync"], report["raw_grpc_unary"]
        print(
            f"raw 4 KiB write+fsync: {fsync['fsync_per_s']:,.0f}/s (p50 {fsync['p50_ms']:.2f} ms, {errors_text(fsync)})"
        )
        print(
            f"raw grpc.aio unary round trip, 1 in flight: {rtt['rtt_per_s']:,.0f}/s "
            f"(p50 {rtt['p50_ms']:.2f} ms, {errors_text(rtt)})"
        )
        if rtt["warmup"]["failed"]:
            print(f"  its warm-up: {errors_text(rtt['warmup'])}")
        bench = Bench(root)
        bench.start()
        try:
            leader = bench.wait_stable()
            node = bench.nodes[leader]
            report["warmup"] = node.ask(f"load 16 {min(duration, 1.0)}")
            if report["warmup"].get("failed"):
                print(f"warm-up: {errors_text(report['warmup'])}")
            report["closed_loop"] = []
            for appenders in (1, 16, 256):
                r = node.ask(f"load {appenders} {duration}")
                report["closed_loop"].append(r)
                print(
                    f"{appenders:>4} appenders: {r['records_per_s']:>9,.0f} committed records/s, "
                    f"{r['batches_per_s']:>7,.0f} batches/s ({r['records_per_batch']:.0f} records/batch), "
                    f"append->commit p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms, {errors_text(r)}"
                )
            r = node.ask(f"open 1000 {duration}")
            report["open_loop_1000"] = r
            print(
                f"offered 1,000 appends/s: achieved {r['achieved_per_s']:,.0f}/s, p50 {r['p50_ms']:.2f} ms, "
                f"p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.1f} ms, {errors_text(r)}"
            )
            for name, sig in (("failover_kill9", signal.SIGKILL), ("handoff_sigterm", signal.SIGTERM)):
                times = [bench.failover_trial(sig) for _ in range(trials)]
                report[name] = {
                    "trials": trials,
                    "median_ms": statistics.median(times),
                    "max_ms": max(times),
                    "all_ms": times,
                }
                print(f"{name}: median {statistics.median(times):.0f} ms, max {max(times):.0f} ms over {trials} trials")
        finally:
            bench.stop()
        fs = report["raw_fsync"]["fsync_per_s"]
        rtt = report["raw_grpc_unary"]["rtt_per_s"]
        top = report["closed_loop"][-1]
        single = report["closed_loop"][0]
        print("\nratios (same run):")
        print(f"  256 appenders committed records/s / raw fsync/s      = {ratio(top['records_per_s'], fs):.1f}x")
        print(f"  1 appender commits/s / raw gRPC round trips/s       = {ratio(single['records_per_s'], rtt):.2f}x")
        print(f"  256 appenders batches/s / raw fsync/s                = {ratio(top['batches_per_s'], fs):.2f}x")
        print("\nacceptance (issue targets):")
        checks = [
            ("committed records/s at 256 appenders >= 50,000", top["records_per_s"] >= 50_000),
            ("single-appender append->commit p50 <= 2 ms", single["p50_ms"] <= 2.0),
            ("p99 <= 20 ms at 1,000 appends/s offered", report["open_loop_1000"]["p99_ms"] <= 20.0),
            ("kill -9 failover median <= 1.5 s", report["failover_kill9"]["median_ms"] <= 1500),
            ("graceful handoff median <= 200 ms", report["handoff_sigterm"]["median_ms"] <= 200),
        ]
        measured = {
            "raw fsync": report["raw_fsync"],
            "raw gRPC warm-up": report["raw_grpc_unary"]["warmup"],
            "raw gRPC": report["raw_grpc_unary"],
            "warm-up": report["warmup"],
            **{f"{r['appenders']} appenders": r for r in report["closed_loop"]},
            "open loop": report["open_loop_1000"],
        }
        report["checks"] = acceptance(checks, measured)
        if args.json:
            print(json.dumps(report))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=5.0, help="seconds per throughput/latency run")
    p.add_argument("--trials", type=int, default=20, help="failover and handoff trials each")
    p.add_argument("--quick", action="store_true", help="short runs, 3 trials")
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    p.add_argument("--dir", help="where the data directories go (default: the repository, i.e. its disk)")
    p.add_argument("--node", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--node-id", type=int, help=argparse.SUPPRESS)
    p.add_argument("--voters", help=argparse.SUPPRESS)
    p.add_argument("--data-dir", help=argparse.SUPPRESS)
    p.add_argument("--echo-server", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.node:
        return node_main(args)
    if args.echo_server:
        return echo_main(args.echo_server)
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
