"""CreateTopics through the Kafka listener beside gRPC, in the same run: a 3-node controller cluster (processes,
fsync on) with 3 broker agents, each controller with its Kafka listener.

    python benchmarks/kafka_create_topics.py [--duration 3] [--quick] [--json] [--dir DIR]

Prints topics/s and p50/p99 latency, closed loop (each client waits for its answer before sending the next), with
1 and 16 concurrent clients at one topic (3 partitions x RF 3) per request, and 1 client at 100 topics per request
— through gRPC (the ControllerStub, as benchmarks/create_topics.py drives it) and through Kafka's protocol (a plain
asyncio client speaking CreateTopics v7 with pykraft's own codec, one connection per client, so both sides are
Python clients of similar weight), and the ratio Kafka/gRPC. Only requests whose every topic was created count;
failures are counted by code beside the figures.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _stats import Tally, error_name, errors_text, ratio  # noqa: E402
from create_topics import closed_loop, leader_target, wait_brokers  # noqa: E402

from pykraft.kafka.apis.create_topics import CreateTopicsRequest, CreateTopicsResponse  # noqa: E402
from pykraft.kafka.protocol import RequestHeader, encode_request  # noqa: E402
from pykraft.testing import Cluster, free_ports  # noqa: E402

_Topic = CreateTopicsRequest.fields[0].type.element
VERSION = 7


async def kafka_closed_loop(host: str, port: int, clients: int, duration: float, per_request: int, prefix: str) -> dict:
    tally = Tally()
    stop = time.perf_counter() + duration

    async def client(i: int) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        n = 0
        try:
            while time.perf_counter() < stop:
                names = [f"{prefix}-{i}-{n}-{k}" for k in range(per_request)]
                n += 1
                request = CreateTopicsRequest.cls(
                    topics=[_Topic.cls(name=t, num_partitions=3, replication_factor=3) for t in names],
                    timeout_ms=30_000,
                )
                body = CreateTopicsRequest.encode(request, VERSION)
                since = tally.sent()
                writer.write(encode_request(RequestHeader(19, VERSION, n, "bench", 2), body))
                size = int.from_bytes(await reader.readexactly(4), "big")
                frame = await reader.readexactly(size)
                done = tally.answered()
                response = CreateTopicsResponse.decode(frame[5:], VERSION)  # correlation id, header tags
                codes = [error_name(t.error_code) for t in response.topics if t.error_code]
                if codes:
                    tally.failure(*codes)
                else:
                    tally.success((done - since) * 1000)
        finally:
            writer.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return {
        "clients": clients,
        "topics_per_request": per_request,
        "topics_per_s": tally.rate(tally.ok * per_request),
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        **tally.summary(),
    }


def run(args: argparse.Namespace) -> int:
    duration = 1.0 if args.quick else args.duration
    base = Path(args.dir) if args.dir else ROOT
    root = Path(tempfile.mkdtemp(prefix="kafka-topics-bench-", dir=base))
    kafka_ports = free_ports(3)
    listeners = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(kafka_ports))
    cluster = Cluster(root, 3, extra_args=["--override", "metadata.max.idle.interval.ms=0"])
    for i, node in cluster.nodes.items():
        node.args += ["--kafka-listener", f"127.0.0.1:{kafka_ports[i - 1]}", "--kafka-controller-listeners", listeners]
    brokers: list[subprocess.Popen] = []
    report: dict = {"grpc": [], "kafka": []}
    try:
        cluster.start()
        target = asyncio.run(leader_target(cluster))
        bootstrap = ",".join(n.address for n in cluster.nodes.values())
        for j in range(3):
            log = (root / f"broker-{101 + j}.log").open("ab")
            command = [sys.executable, "-m", "pykraft", "broker", "--broker-id", str(101 + j)]
            command += ["--rack", f"rack-{j + 1}", "--bootstrap-server", bootstrap]
            brokers.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT))
        asyncio.run(wait_brokers(target, 3))
        target = asyncio.run(leader_target(cluster))
        leader = next(i for i, n in cluster.nodes.items() if n.address == target)
        kafka_port = kafka_ports[leader - 1]
        print(f"kafka_create_topics: 3 controllers, 3 brokers; leader {target}, its Kafka listener :{kafka_port}")
        asyncio.run(closed_loop(target, 4, min(duration, 1.0), 1, "warm-grpc"))
        asyncio.run(kafka_closed_loop("127.0.0.1", kafka_port, 4, min(duration, 1.0), 1, "warm-kafka"))
        for clients, per_request in ((1, 1), (16, 1), (1, 100)):
            g = asyncio.run(closed_loop(target, clients, duration, per_request, f"g{clients}x{per_request}"))
            k = asyncio.run(
                kafka_closed_loop("127.0.0.1", kafka_port, clients, duration, per_request, f"k{clients}x{per_request}")
            )
            report["grpc"].append(g)
            report["kafka"].append(k)
            print(
                f"{clients:>2} client(s) x {per_request:>3} topic(s)/request: "
                f"gRPC {g['topics_per_s']:8.0f} topics/s (p50 {g['p50_ms']:.1f} ms, p99 {g['p99_ms']:.1f} ms) | "
                f"Kafka {k['topics_per_s']:8.0f} topics/s (p50 {k['p50_ms']:.1f} ms, p99 {k['p99_ms']:.1f} ms) | "
                f"Kafka/gRPC {ratio(k['topics_per_s'], g['topics_per_s']):.2f}"
            )
            for name, r in (("gRPC", g), ("Kafka", k)):
                if r["failed"]:
                    print(f"    {name}: {errors_text(r)}")
        if args.json:
            print(json.dumps(report, indent=2))
        failed = sum(r["failed"] for side in report.values() for r in side)
        return 1 if failed else 0
    finally:
        for b in brokers:
            b.kill()
            b.wait()
        cluster.stop()
        for n in cluster.nodes.values():
            n.kill()
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=3.0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dir", help="where the data directories go (default: the repository's disk)")
    return run(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
