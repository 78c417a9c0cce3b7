"""What the leader's answers to observers cost: CPU per process at fixed request rates, observer linger 0 vs on.

    python benchmarks/observer_linger.py [--rates 100 200] [--lingers 0 25] [--rounds 2] [--seconds 5] [--brokers 6]
                                         [--quick] [--json]

For each round and each ``pykraft.quorum.observer.linger.ms`` in turn (alternated, so that the machine's drift
falls on both), a fresh cluster of 3 controllers and ``--brokers`` brokers (Raft observers, at scale.py's nice 10)
is started, left idle ``--seconds`` (its CPU per second is printed as the floor), then one client creates 1 topic
(3 partitions, RF 3) per request on a fixed schedule at each rate for ``--seconds`` (scale.py's appender). Printed
per rate: the CPU seconds all processes used (utime+stime, the client's own too) and their share of the cores, then
milliseconds of CPU per request for each process, and the client's p50/p99 latency. ``--quick``: one round of 3 s
at 200/s; ``--json``: the figures as one JSON document instead. The group commit writes a batch
per request at these rates, and every batch was an answer and a fetch back for each broker: the linger spaces those
out (see the README's *Raft* section)."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scale_cluster import Bench, Settings
from _scale_measure import PhaseCpu
from _scale_phases import appender, window_tally

LINGER = "pykraft.quorum.observer.linger.ms"


def settings(brokers: int) -> Settings:
    return Settings(
        partitions=0,
        brokers=brokers,
        trials=0,
        idle_minutes=0,
        appender_window_s=0,
        segment_bytes=8 * 2**20,
        retention_bytes=100 * 2**20,
        create_deadline_s=0,
    )


async def one_cluster(root: Path, linger: int, args: argparse.Namespace, figures: list[dict]) -> list[str]:
    bench = Bench(root, settings(args.brokers), {LINGER: linger}, observers=True)
    lines = []
    try:
        await bench.start()
        leader = await bench.leader_id()
        await asyncio.sleep(2.0)  # the brokers' registrations and first catch-up
        idle = PhaseCpu(bench)
        await asyncio.sleep(args.seconds)
        used = idle.used()
        per_s = sum(used["cpu_s"].values()) / used["wall_s"]
        figures.append({"linger_ms": linger, "rate": 0, "cpu_s": used["cpu_s"], "wall_s": used["wall_s"]})
        lines.append(f"  linger {linger:>3} ms, idle: {per_s * 1000:.0f} ms of CPU per second, all processes")
        for rate in args.rates:
            cpu = PhaseCpu(bench)
            stop = asyncio.Event()
            task = asyncio.create_task(
                appender([bench.cluster.nodes[leader].address], rate, stop, f"r{rate}-{linger}", bench.topic_names)
            )
            await asyncio.sleep(args.seconds)
            stop.set()
            samples = await task
            used = cpu.used()
            tally = window_tally(samples, -math.inf, math.inf)  # scale.py's: its percentiles, failures by code
            total = sum(used["cpu_s"].values())
            per_request = ", ".join(f"{name} {s / tally['requests'] * 1000:.2f}" for name, s in used["cpu_s"].items())
            p50, p99, failed = tally["p50_ms"], tally["p99_ms"], tally["failed"]
            figures.append(
                {
                    "linger_ms": linger,
                    "rate": rate,
                    "requests": tally["requests"],
                    "failed": failed,
                    "cpu_s": used["cpu_s"],
                    "wall_s": used["wall_s"],
                    "p50_ms": p50,
                    "p99_ms": p99,
                }
            )
            lines.append(
                f"  linger {linger:>3} ms, {rate}/s: {total:.2f} CPU s over {used['wall_s']:.1f} s "
                f"({total / used['wall_s'] / (os.cpu_count() or 1):.0%} of the cores); ms per request: {per_request}; "
                f"latency p50 {p50:.1f} ms, p99 {p99:.1f} ms" + (f"; {failed} failed" if failed else "")
            )
    finally:
        bench.stop()
    return lines


async def main_async(args: argparse.Namespace) -> None:
    say = (lambda *_, **__: None) if args.json else print
    say(f"observer linger: 3 controllers, {args.brokers} brokers; rates {args.rates}/s, {args.seconds:.0f} s each")
    figures: list[dict] = []
    for round_ in range(args.rounds):
        for linger in args.lingers:
            root = Path(tempfile.mkdtemp(prefix="observer-linger-", dir=args.dir))
            try:
                lines = await one_cluster(root, linger, args, figures)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            say(f"round {round_ + 1}:")
            say("\n".join(lines), flush=True)
    if args.json:
        print(json.dumps({"brokers": args.brokers, "seconds": args.seconds, "figures": figures}, indent=1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rates", type=int, nargs="+", default=[100, 200])
    p.add_argument("--lingers", type=int, nargs="+", default=[0, 25])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--brokers", type=int, default=6)
    p.add_argument("--dir", help="where the data directories go (default: the system's temporary directory)")
    p.add_argument("--quick", action="store_true", help="one round of 3 s at 200/s")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.seconds, args.rates = 1, 3.0, [200]
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
