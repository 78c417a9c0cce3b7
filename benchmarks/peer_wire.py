"""Peer wire benchmark: one PeerMessage and its answer on an open connection, grpc.aio bidi stream vs frames.

    python benchmarks/peer_wire.py [--exchanges 3000] [--rounds 2] [--json]

A server process answers each message it reads with the same message; this process sends one, waits for the
answer, and sends the next. Two wires, in alternating rounds, each with its server in a process of its own:
- ``grpc``: a grpc.aio bidi stream used as the peer transport's gRPC side uses it (a queue and a writer task on the
  dialling side; the server reads in a task and writes its answers from a queue through the handler's generator);
- ``frames``: length-prefixed frames on a TCP connection, with the transport's codec (quorum/transport/frames.py):
  written as sent, read with ``read_frames``.
The message is a FetchRequest as a follower sends one. Prints, per wire, the round trip's p50/p99 and the CPU per
exchange on each side (/proc utime+stime of the server, process time of this client), and frames / grpc ratios.
Both ends on uvloop, 2 cores shared by the two processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from quorum.transport.frames import encode, read_frames  # noqa: E402
from quorum.transport.pb import quorum_pb2 as pb  # noqa: E402
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc  # noqa: E402

WARMUP = 200
MAX_BYTES = 16 * 1024 * 1024


def message() -> pb.PeerMessage:
    m = pb.PeerMessage(source=2)
    f = m.fetch_request
    f.cluster_id, f.replica_id, f.leader_epoch, f.correlation_id = "peer-wire-bench", 2, 7, 1_000_000
    f.fetch_offset, f.last_fetched_epoch, f.max_bytes, f.max_wait_ms = 123_456, 7, 8 * 1024 * 1024, 500
    return m


class Echo(pb_grpc.QuorumPeerServicer):
    async def Exchange(self, requests: Any, context: Any) -> Any:
        queue: asyncio.Queue[pb.PeerMessage] = asyncio.Queue()

        async def read() -> None:
            async for m in requests:
                queue.put_nowait(m)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                yield await queue.get()
        finally:
            reader.cancel()


async def serve(wire: str, port: int) -> None:
    if wire == "grpc":
        import grpc

        server = grpc.aio.server()
        pb_grpc.add_QuorumPeerServicer_to_server(Echo(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
    else:

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            async for m in read_frames(reader, MAX_BYTES, []):
                writer.writelines(encode(m))

        await asyncio.start_server(answer, "127.0.0.1", port)
    await asyncio.Event().wait()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def exchanges(wire: str, port: int, server_pid: int, count: int) -> dict[str, float]:
    m = message()
    if wire == "grpc":
        import grpc

        channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        await channel.channel_ready()
        call = pb_grpc.QuorumPeerStub(channel).Exchange()
        queue: asyncio.Queue[pb.PeerMessage] = asyncio.Queue()

        async def write() -> None:
            while True:
                await call.write(await queue.get())

        writer_task = asyncio.get_running_loop().create_task(write())

        async def once() -> None:
            queue.put_nowait(m)
            await call.read()
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        answers = read_frames(reader, MAX_BYTES, [])

        async def once() -> None:
            writer.writelines(encode(m))
            await anext(answers)

    for _ in range(WARMUP):
        await once()
    times = []
    server0, client0 = cpu_seconds(server_pid), time.process_time()
    for _ in range(count):
        t = time.perf_counter()
        await once()
        times.append(time.perf_counter() - t)
    server_cpu, client_cpu = cpu_seconds(server_pid) - server0, time.process_time() - client0
    if wire == "grpc":
        writer_task.cancel()
        await channel.close()
    else:
        writer.close()
    times.sort()
    return {
        "p50_us": times[len(times) // 2] * 1e6,
        "p99_us": times[int(len(times) * 0.99)] * 1e6,
        "server_cpu_us": server_cpu / count * 1e6,
        "client_cpu_us": client_cpu / count * 1e6,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--exchanges", type=int, default=3000, help="measured exchanges per round")
    p.add_argument("--rounds", type=int, default=2, help="rounds per wire, alternating")
    p.add_argument("--json", action="store_true")
    p.add_argument("--serve", nargs=2, metavar=("WIRE", "PORT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    import uvloop

    if args.serve:
        uvloop.run(serve(args.serve[0], int(args.serve[1])))
        return 0
    results: dict[str, list[dict[str, float]]] = {"grpc": [], "frames": []}
    for r in range(args.rounds):
        for wire in ("grpc", "frames") if r % 2 == 0 else ("frames", "grpc"):
            port = free_port()
            server = subprocess.Popen([sys.executable, __file__, "--serve", wire, str(port)])
            try:
                deadline = time.monotonic() + 30
                while True:  # the server is up once it accepts a connection
                    try:
                        socket.create_connection(("127.0.0.1", port), timeout=1).close()
                        break
                    except OSError:
                        if time.monotonic() > deadline or server.poll() is not None:
                            raise SystemExit(f"the {wire} server did not start") from None
                        time.sleep(0.05)
                result = uvloop.run(exchanges(wire, port, server.pid, args.exchanges))
            finally:
                server.kill()
                server.wait()
            results[wire].append(result)
            if not args.json:
                print(
                    f"round {r + 1} {wire:>6}: p50 {result['p50_us']:.0f} us, p99 {result['p99_us']:.0f} us, CPU per "
                    f"exchange: server {result['server_cpu_us']:.0f} us, client {result['client_cpu_us']:.0f} us"
                )

    def mean(wire: str, key: str) -> float:
        return sum(r[key] for r in results[wire]) / len(results[wire])

    summary = {wire: {key: mean(wire, key) for key in results[wire][0]} for wire in results}
    ratios = {key: summary["frames"][key] / summary["grpc"][key] for key in summary["grpc"]}
    if args.json:
        print(json.dumps({"rounds": results, "mean": summary, "frames_over_grpc": ratios}))
        return 0
    print(f"\n{'':<28} {'grpc stream':>12} {'frames':>12} {'frames/grpc':>12}")
    for key, label in (
        ("p50_us", "round trip p50 (us)"),
        ("p99_us", "round trip p99 (us)"),
        ("server_cpu_us", "server CPU per exchange (us)"),
        ("client_cpu_us", "client CPU per exchange (us)"),
    ):
        print(f"{label:<28} {summary['grpc'][key]:>12.0f} {summary['frames'][key]:>12.0f} {ratios[key]:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
