"""Peers benchmark: pykraft's quorum measured beside etcd, 3 members each on loopback, in the same run.

    python benchmarks/peers.py [--quick] [--json] [--dir DIR] [--rounds 3] [--writes 2000] [--duration 3]
                               [--failover-trials 20]

Both clusters run side by side with their defaults (etcd: heartbeat 100 ms, election 1000 ms, no pre-vote;
pykraft: Kafka's controller.quorum.* defaults, the quorum alone with AppendRecords opened), but only one is loaded
at a time: each measurement runs in rounds that alternate between them (etcd, pykraft, etcd, ...; the first of a
round alternates too). One asyncio client in this process talks gRPC to both: etcd's ``KV/Put`` with a hand-encoded
PutRequest (key + 100-byte value, sent to the leader), pykraft's ``QuorumAdmin/AppendRecords`` with one 100-byte
record (a NoOpRecord padded with an unknown tagged field: the node checks records are metadata records), sent to
the leader. A write counts only when it is answered as committed (gRPC OK for etcd, error_code 0 for pykraft);
every other answer is counted by its code and printed.

Prints, for each system and as ratios pykraft/etcd:
- sequential commit latency: one write at a time, p50/p99/mean of every write of every round;
- throughput with 64 and 256 writes in flight: committed writes over the measured time (first send to last
  answer) of all rounds; beside it a bare grpc.aio echo server (its own process, a unary method returning its
  100-byte request) at 64 in flight, and pykraft's 64-in-flight rate against it (target >= 0.8x); with each
  rate the servers' CPU per write (/proc utime+stime of all members) and this client's CPU share, since the
  2 cores are shared by the client and every server process;
- the design of a multi-process front, measured at 64 in flight beside the echo: the same writes sent to 1 or 2
  front processes that batch what their clients sent meanwhile into one AppendRecords to the leader
  (``_peers_cluster.BatchingFront``), so that the leader pays one gRPC call per batch;
- the peer transport's baseline: a second pykraft cluster whose peers talk over gRPC streams instead of frame
  connections (``pykraft.quorum.frames.port=-1``), in the same sequential rounds and beside the echo at 64 in
  flight, with the ratios frames / gRPC streams, and where each one's sequential commit time goes;
- failover after kill -9 of the leader, and after SIGSTOP of the leader (silent: no TCP reset): a client writes
  to the leader until the signal, then sends a new write every 10 ms to a survivor (the leader a survivor named,
  else each survivor in turn; each write waits up to 2 s for its answer, so a write stuck behind the dead leader
  does not hold the next ones back), until one is answered committed. The figure is from the signal to that
  answer. Median, p90, p99, max, and how many trials took over 500 ms. After each trial the node is restarted
  (or SIGCONT) and the run waits until all 3 members agree on one leader and hold its whole committed log;
- elections outside the failover trials (``election_started`` log events for pykraft, ``became candidate`` lines
  for etcd): any during the rounds is a spurious one.

If etcd is not installed (``make bench-peers`` installs the Debian package etcd-server), pykraft is measured alone.
Ports are chosen free at run time on 127.0.0.1; data directories go in a temporary directory, removed at the end
unless ``--dir`` names where to put (and keep) them (a failed run keeps them too). Only the processes started
here are ended, by PID, also on Ctrl-C or SIGTERM. The etcd side (its hand-encoded messages, its members) is in
``_peers_etcd.py``; the pykraft node and echo server processes and the client's view of a cluster in
``_peers_cluster.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import _peers_etcd as etcd  # noqa: E402
from _peers_cluster import ATTEMPT_TIMEOUT_S, WRITE_TIMEOUT_S, BatchingFront, Echo, Pykraft, System  # noqa: E402
from _stats import Tally, acceptance, errors_text, median, percentile, ratio  # noqa: E402

ATTEMPT_EVERY_S = 0.01  # during a failover, a new write this often
GIVE_UP_S = 30.0  # a failover trial with no committed write this long after the signal
SLOW_FAILOVER_MS = 500


def summarize(tallies: list[Tally]) -> dict[str, Any]:
    """Rounds pooled: every successful write's latency, the committed writes over the rounds' measured time, the
    failures by code."""
    latencies = [x for t in tallies for x in t.latencies_ms]
    elapsed = sum(t.elapsed for t in tallies)
    ok = sum(t.ok for t in tallies)
    errors: dict[str, int] = {}
    for t in tallies:
        for name, n in t.errors.items():
            errors[name] = errors.get(name, 0) + n
    return {
        "ok": ok,
        "failed": sum(t.failed for t in tallies),
        "errors": errors,
        "elapsed_s": elapsed,
        "ops_per_s": ok / elapsed if elapsed > 0 else float("nan"),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "mean_ms": sum(latencies) / len(latencies) if latencies else float("nan"),
        "rounds_ops_per_s": [t.rate() for t in tallies],
    }


def failover_summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """A trial with no committed write within GIVE_UP_S counts as infinitely long (it is not left out)."""
    times = [t["failover_ms"] if t["failover_ms"] is not None else math.inf for t in trials]
    return {
        "trials": len(trials),
        "median_ms": median(times),
        "p90_ms": percentile(times, 90),
        "p99_ms": percentile(times, 99),
        "max_ms": max(times, default=float("nan")),
        "over_500ms": sum(1 for t in times if t > SLOW_FAILOVER_MS),
        "gave_up": sum(1 for t in trials if t["failover_ms"] is None),
        "all_ms": times,
    }


# -- measurements -------------------------------------------------------------------------------------------------


async def sequential(system: System, writes: int) -> Tally:
    leader = await system.whole()
    tally = Tally()
    for _ in range(writes):
        if not await timed_write(system, leader, tally, WRITE_TIMEOUT_S):
            leader = await system.whole()
    return tally


async def timed_write(system: System, member: int, tally: Tally, timeout: float) -> bool:
    """One write to ``member``, its latency or its error counted in ``tally``; True if it committed."""
    t = tally.sent()
    w = await system.write(member, timeout)
    now = tally.answered()
    if w.ok:
        tally.success((now - t) * 1000)
    else:
        tally.failure(w.error)
    return w.ok


async def throughput(system: System, in_flight: int, duration: float) -> tuple[Tally, float, float]:
    """Committed writes with ``in_flight`` writers; this client's CPU share meanwhile (1.0 = one core busy) and the
    servers' CPU seconds (all members)."""
    leader = await system.whole()
    tally = Tally()
    stop_at = time.perf_counter() + duration

    def writer() -> Awaitable[None]:
        return keep_writing(system, leader, tally, WRITE_TIMEOUT_S, lambda: time.perf_counter() < stop_at)

    cpu, server_cpu = time.process_time(), system.cpu_seconds()
    await asyncio.gather(*(writer() for _ in range(in_flight)))
    return tally, ratio(time.process_time() - cpu, tally.elapsed), system.cpu_seconds() - server_cpu


async def keep_writing(system: System, member: int, tally: Tally, timeout: float, going: Callable[[], bool]) -> None:
    """Write to ``member`` one at a time while ``going()``; a failed write is counted, then retried a moment later."""
    while going():
        if not await timed_write(system, member, tally, timeout):
            await asyncio.sleep(ATTEMPT_EVERY_S)


async def failover_trial(system: System, sig: int) -> dict[str, Any]:
    """Signal the leader; the time until a write sent after the signal to a survivor is answered committed. Then
    restart (or continue) the node and wait until the cluster is whole and caught up again."""
    leader = await system.whole()
    elections = system.elections()
    survivors = [i for i in system.procs if i != leader]
    before, during = Tally(), Tally()
    stopped = False
    first_ok: list[float] = []
    hint: int | None = None

    def before_writer() -> Awaitable[None]:
        return keep_writing(system, leader, before, ATTEMPT_TIMEOUT_S, lambda: not stopped)

    async def attempt(member: int) -> None:
        nonlocal hint
        t = during.sent()
        w = await system.write(member, ATTEMPT_TIMEOUT_S)
        now = during.answered()
        if w.ok:
            during.success((now - t) * 1000)
            first_ok.append(now)
        else:
            during.failure(w.error)
            hint = w.leader_hint if w.leader_hint in survivors else None  # else each survivor in turn

    writing = asyncio.create_task(before_writer())
    await asyncio.sleep(0.2)
    t0 = time.perf_counter()
    system.procs[leader].signal(sig)
    stopped = True
    attempts = []
    turn = 0
    while not first_ok and time.perf_counter() - t0 < GIVE_UP_S:
        member = hint if hint is not None else survivors[turn % len(survivors)]
        turn += 1
        attempts.append(asyncio.create_task(attempt(member)))
        await asyncio.sleep(ATTEMPT_EVERY_S)
    await asyncio.gather(writing, *attempts)  # each has its deadline: every write ends with an answer or an error
    failover_ms = (min(first_ok) - t0) * 1000 if first_ok else None
    healing = time.perf_counter()
    if sig == signal.SIGKILL:
        system.procs[leader].start()
    else:
        system.procs[leader].signal(signal.SIGCONT)
    new_leader = await system.whole()
    return {
        "failover_ms": failover_ms,
        "signalled": leader,
        "leader_after": new_leader,
        "heal_s": time.perf_counter() - healing,
        "elections": system.elections() - elections,
        "before": before.summary(),
        "during": {**during.summary(), "sent": during.ok + during.failed},
    }


# -- the run --------------------------------------------------------------------------------------------------------


class Report:
    def __init__(self, json_mode: bool) -> None:
        self.out = sys.stderr if json_mode else sys.stdout

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)


def fmt_ms(v: float) -> str:
    if v is None or math.isnan(v):
        return "-"
    if math.isinf(v):
        return "gave up"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


def fmt_failover(ms: float | None) -> str:
    return f"{fmt_ms(ms)} ms" if ms is not None else f"no write committed within {GIVE_UP_S:.0f} s"


def fmt_ratio(a: float, b: float) -> str:
    r = ratio(a, b) if a is not None and b is not None else float("nan")
    return "-" if math.isnan(r) or math.isinf(r) else f"{r:.2f}x"


async def measure(args: argparse.Namespace, systems: list[System], extras: list[System], out: Report) -> dict[str, Any]:
    """``extras`` (the echo, the fronts, pykraft on gRPC streams) are measured beside the systems at 64 in flight,
    and pykraft on gRPC streams in the sequential rounds too."""
    for s in [*systems, *extras]:
        await s.open()
    try:
        return await _measure(args, systems, extras, out)
    finally:
        for s in [*systems, *extras]:
            await s.close()


async def _measure(
    args: argparse.Namespace, systems: list[System], extras: list[System], out: Report
) -> dict[str, Any]:
    for s in [*systems, *extras]:
        await s.whole()
    sequenced = [*systems, *(s for s in extras if isinstance(s, Pykraft))]
    warmup = {}
    for s in [*systems, *extras]:
        t1 = await sequential(s, 100) if s in sequenced else Tally()
        t2, _, _ = await throughput(s, 64, 0.5)
        warmup[s.name] = summarize([t1, t2])
        out.say(f"{s.name}: ready; warm-up {errors_text(warmup[s.name])}")
    elections0 = {s.name: s.elections() for s in systems}
    seq: dict[str, list[Tally]] = {s.name: [] for s in sequenced}
    # each pykraft's commit stage sums over the sequential rounds, per node
    stages: dict[str, dict[int, dict[str, float]]] = {s.name: {} for s in sequenced}
    tput: dict[tuple[str, int], list[tuple[Tally, float, float]]] = {}
    for r in range(args.rounds):
        order = systems if r % 2 == 0 else systems[::-1]
        for s in sequenced if r % 2 == 0 else sequenced[::-1]:
            before = s.commit_stages() if isinstance(s, Pykraft) else {}
            t = await sequential(s, args.writes)
            seq[s.name].append(t)
            for node, sums in (s.commit_stages() if isinstance(s, Pykraft) else {}).items():
                for key, value in sums.items():
                    stages[s.name].setdefault(node, {}).setdefault(key, 0.0)
                    stages[s.name][node][key] += value - before[node].get(key, 0.0)
            out.say(
                f"round {r + 1} {s.name:>7} sequential: p50 {t.percentile(50):.2f} ms, p99 {t.percentile(99):.2f} ms,"
                f" {errors_text(t.summary())}"
            )
        for n in (64, 256):
            for s in [*order, *extras] if n == 64 else order:
                t, share, server_cpu = await throughput(s, n, args.duration)
                tput.setdefault((s.name, n), []).append((t, share, server_cpu))
                out.say(
                    f"round {r + 1} {s.name:>7} {n} in flight: {t.rate():,.0f} writes/s (client CPU {share:.0%}, "
                    f"server CPU {server_cpu / t.elapsed:.0%}), {errors_text(t.summary())}"
                )

    def throughput_part(name: str, n: int) -> dict[str, Any]:
        rounds = tput[(name, n)]
        summary = summarize([t for t, _, _ in rounds])
        server_cpu = sum(c for _, _, c in rounds)
        return {
            **summary,
            "client_cpu": [share for _, share, _ in rounds],
            "server_cpu_us_per_write": ratio(server_cpu * 1e6, summary["ok"]),
        }

    trials: dict[tuple[str, str], list[dict[str, Any]]] = {}
    trial_elections = {s.name: 0 for s in systems}
    for kind, sig in (("kill9", signal.SIGKILL), ("sigstop", signal.SIGSTOP)):
        for i in range(args.failover_trials):
            for s in systems if i % 2 == 0 else systems[::-1]:
                result = await failover_trial(s, sig)
                trials.setdefault((s.name, kind), []).append(result)
                trial_elections[s.name] += result["elections"]
                out.say(
                    f"{kind} trial {i + 1} {s.name:>7}: {fmt_failover(result['failover_ms'])} "
                    f"(leader {result['signalled']} -> {result['leader_after']}, "
                    f"{result['during']['sent']} writes sent, {result['elections']} election(s), "
                    f"whole again in {result['heal_s']:.1f} s)"
                )
    report: dict[str, Any] = {}
    for s in systems:
        outside = s.elections() - elections0[s.name] - trial_elections[s.name]
        report[s.name] = {
            "warmup": warmup[s.name],
            "sequential": summarize(seq[s.name]),
            **{f"throughput_{n}": throughput_part(s.name, n) for n in (64, 256)},
            **{f"failover_{kind}": failover_part(trials.get((s.name, kind), [])) for kind in ("kill9", "sigstop")},
            "elections_outside_trials": outside,
        }
    for s in extras:
        report[s.name] = {"warmup": warmup[s.name], "throughput_64": throughput_part(s.name, 64)}
        if s in sequenced:
            report[s.name]["sequential"] = summarize(seq[s.name])
    for s in sequenced:
        if isinstance(s, Pykraft):
            report[s.name]["commit_hops"] = commit_hops(stages[s.name], report[s.name]["sequential"]["mean_ms"])
    return report


def failover_part(trials: list[dict[str, Any]]) -> dict[str, Any]:
    def pooled(key: str) -> dict[str, Any]:
        errors: dict[str, int] = {}
        for t in trials:
            for name, n in t[key]["errors"].items():
                errors[name] = errors.get(name, 0) + n
        return {
            "ok": sum(t[key]["ok"] for t in trials),
            "failed": sum(t[key]["failed"] for t in trials),
            "errors": errors,
        }

    return {
        **failover_summary(trials),
        "writes_before_signal": pooled("before"),
        "writes_after_signal": pooled("during"),
        "elections": [t["elections"] for t in trials],
        "heal_s": [t["heal_s"] for t in trials],
    }


def commit_hops(stages: dict[int, dict[str, float]], total_ms: float) -> dict[str, float]:
    """Mean ms of each hop of a sequential commit, from the nodes' stage sums (quorum/raft/hops.py): the leader's
    (the node that traced appends) from append to each stage, its followers' from fetched records to each stage."""
    if not stages or not any(n.get("leader/samples") for n in stages.values()):
        return {}
    leader = max(stages, key=lambda i: stages[i].get("leader/samples", 0.0))
    lead = stages[leader]
    n = lead["leader/samples"]
    at = {k: 1000 * lead[f"leader/{k}"] / n for k in ("written", "flushed", "replicated", "committed")}
    others = [v for i, v in stages.items() if i != leader]
    fn = sum(v.get("follower/samples", 0.0) for v in others)
    f_at = {
        k: 1000 * sum(v.get(f"follower/{k}", 0.0) for v in others) / fn if fn else math.nan
        for k in ("flushed", "fetch_sent")
    }
    return {
        "traced_appends": n,
        "client_call_ms": total_ms - at["committed"],
        "leader_batch_written_ms": at["written"],
        "leader_fsync_done_ms": at["flushed"],
        "follower_acknowledged_ms": at["replicated"],
        "follower_write_fsync_ms": f_at["flushed"],
        "follower_fetch_sent_ms": f_at["fetch_sent"] - f_at["flushed"],
        "transport_both_ways_ms": at["replicated"] - at["written"] - f_at["fetch_sent"],
        "commit_after_ack_ms": at["committed"] - max(at["replicated"], at["flushed"]),
    }


HOP_LINES = (
    ("client_call_ms", "client -> leader -> client: gRPC call, handler, answer (mean total - leader's part)"),
    ("leader_batch_written_ms", "leader: append -> its batch in the log"),
    ("leader_fsync_done_ms", "leader: append -> its own fsync done (beside the follower's round)"),
    ("follower_acknowledged_ms", "leader: append -> a follower's fetch says it holds it durably"),
    ("follower_write_fsync_ms", "   follower: fetched records -> written and fsync'd"),
    ("follower_fetch_sent_ms", "   follower: fsync done -> next fetch sent"),
    ("transport_both_ways_ms", "   the rest: the fetch answer out and the fetch back (transport, both loops)"),
    ("commit_after_ack_ms", "leader: acknowledged -> committed (high watermark, waiter settled)"),
)


def print_hops(hops: dict[str, float], total_ms: float, out: Report, name: str = "pykraft") -> None:
    if not hops:
        return
    out.say(
        f"\n{name} sequential commit, where the mean {total_ms:.2f} ms goes ({hops['traced_appends']:,.0f} appends "
        "traced on the leader; stages from quorum/raft/hops.py via /metrics):"
    )
    for key, text in HOP_LINES:
        out.say(f"  {text:<86} {hops[key]:6.2f} ms")


def print_table(report: dict[str, Any], has_etcd: bool, etcd_name: str, out: Report) -> None:
    e = report.get("etcd", {}) if has_etcd else {}
    p = report["pykraft"]

    def get(r: dict[str, Any], *path: str) -> Any:
        for key in path:
            if not isinstance(r, dict) or key not in r:
                return None
            r = r[key]
        return r

    rows: list[tuple[str, tuple[str, ...], str]] = [
        ("sequential commit p50 (ms)", ("sequential", "p50_ms"), "ms"),
        ("sequential commit p99 (ms)", ("sequential", "p99_ms"), "ms"),
        ("sequential commit mean (ms)", ("sequential", "mean_ms"), "ms"),
        ("throughput, 64 in flight (writes/s)", ("throughput_64", "ops_per_s"), "rate"),
        ("throughput, 256 in flight (writes/s)", ("throughput_256", "ops_per_s"), "rate"),
        ("server CPU per write, 64 in flight (us)", ("throughput_64", "server_cpu_us_per_write"), "rate"),
        ("server CPU per write, 256 in flight (us)", ("throughput_256", "server_cpu_us_per_write"), "rate"),
    ]
    for kind, label in (("kill9", "kill -9"), ("sigstop", "SIGSTOP")):
        rows += [
            (f"{label} failover median (ms)", (f"failover_{kind}", "median_ms"), "ms"),
            (f"{label} failover p90 (ms)", (f"failover_{kind}", "p90_ms"), "ms"),
            (f"{label} failover p99 (ms)", (f"failover_{kind}", "p99_ms"), "ms"),
            (f"{label} failover max (ms)", (f"failover_{kind}", "max_ms"), "ms"),
            (f"{label} trials over 500 ms", (f"failover_{kind}", "over_500ms"), "count"),
            (f"{label} trials with no write in 30 s", (f"failover_{kind}", "gave_up"), "count"),
        ]
    rows.append(("elections outside failover trials", ("elections_outside_trials",), "count"))
    width = 40
    out.say(f"\n{'':<{width}} {etcd_name:>14} {'pykraft':>14} {'pykraft/etcd':>13}")
    for label, path, kind in rows:
        a, b = get(e, *path), get(p, *path)
        if kind == "ms":
            cells = (fmt_ms(a) if a is not None else "-", fmt_ms(b))
        elif kind == "rate":
            cells = (f"{a:,.0f}" if a is not None else "-", f"{b:,.0f}")
        else:
            cells = (str(a) if a is not None else "-", str(b))
        r = fmt_ratio(b, a) if kind != "count" and a is not None else ""
        out.say(f"{label:<{width}} {cells[0]:>14} {cells[1]:>14} {r:>13}")
    echo = report["grpc.aio echo"]["throughput_64"]
    by_round = ", ".join(f"{r:.2f}x" for r in by_round_ratios(p["throughput_64"], echo))
    out.say(
        f"\nbare grpc.aio echo server (own process), 64 in flight: {echo['ops_per_s']:,.0f} calls/s "
        f"(server CPU {echo['server_cpu_us_per_write']:,.0f} us/call); pykraft at 64 in flight / echo = "
        f"{fmt_ratio(p['throughput_64']['ops_per_s'], echo['ops_per_s'])} (target >= 0.8x; round by round, each "
        f"echo round run right after pykraft's: {by_round})"
    )
    for name, r in report.items():
        if name.startswith("pykraft + "):  # the design of a multi-process front (see _peers_cluster.BatchingFront)
            t = r["throughput_64"]
            out.say(
                f"{name} (batching the clients' writes into one AppendRecords to the leader), 64 in flight: "
                f"{t['ops_per_s']:,.0f} writes/s (servers' CPU {t['server_cpu_us_per_write']:,.0f} us/write) = "
                f"{fmt_ratio(t['ops_per_s'], echo['ops_per_s'])} the echo"
            )
    for name, r in report.items():
        if name.endswith("on gRPC streams"):  # the peer transport's baseline, in the same rounds
            seq, t = r["sequential"], r["throughput_64"]
            out.say(
                f"{name} (pykraft.quorum.frames.port=-1), in the same rounds: sequential p50 {seq['p50_ms']:.2f} ms, "
                f"mean {seq['mean_ms']:.2f} ms; 64 in flight {t['ops_per_s']:,.0f} writes/s (servers' CPU "
                f"{t['server_cpu_us_per_write']:,.0f} us/write). pykraft on frames / on gRPC streams: p50 "
                f"{fmt_ratio(p['sequential']['p50_ms'], seq['p50_ms'])}, mean "
                f"{fmt_ratio(p['sequential']['mean_ms'], seq['mean_ms'])}, 64 in flight "
                f"{fmt_ratio(p['throughput_64']['ops_per_s'], t['ops_per_s'])}"
            )
    shares = {
        name: max(
            share for key in ("throughput_64", "throughput_256") for share in r.get(key, {}).get("client_cpu", [])
        )
        for name, r in report.items()
    }
    out.say(
        "the client's busiest CPU share in a throughput round (1 = one core; 2 cores shared by everything): "
        + ", ".join(f"{name} {share:.0%}" for name, share in shares.items())
    )


def print_failures(report: dict[str, Any], systems: list[str], out: Report) -> None:
    out.say("\nfailed writes (all counted; in the rounds each is a failure, during a failover an expected refusal):")
    for name in systems:
        r = report[name]
        parts = [f"warm-up {errors_text(r['warmup'])}"]
        for key in ("sequential", "throughput_64", "throughput_256"):
            if key in r:
                parts.append(f"{key} {errors_text(r[key])} of {r[key]['ok'] + r[key]['failed']:,}")
        out.say(f"  {name}: " + "; ".join(parts))
        for kind in ("kill9", "sigstop"):
            f = r.get(f"failover_{kind}")
            if f:
                for when in ("before", "after"):
                    w = f[f"writes_{when}_signal"]
                    out.say(
                        f"    {kind} writes {when} the signal: {w['ok']:,} committed, {errors_text(w)}"
                        f" over {f['trials']} trials"
                    )


def by_round_ratios(a: dict[str, Any], b: dict[str, Any]) -> list[float]:
    """Round i's rate of ``a`` over round i's of ``b`` (the rounds of one round ran minutes apart at most)."""
    return [ratio(x, y) for x, y in zip(a["rounds_ops_per_s"], b["rounds_ops_per_s"], strict=True)]


def json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_parent(args: argparse.Namespace) -> int:
    from pykraft.node import run_loop
    from pykraft.testing import free_ports

    if args.quick:
        args.rounds, args.writes, args.duration = 1, 500, 2.0
        args.failover_trials = min(args.failover_trials, 5)
    out = Report(args.json)
    if args.dir:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        root = Path(tempfile.mkdtemp(prefix="peers-bench-", dir=args.dir))
    else:
        root = Path(tempfile.mkdtemp(prefix="peers-bench-"))
    binary = etcd.etcd_binary()
    if binary is None:
        out.say(etcd.NOT_INSTALLED)
        out.say("measuring pykraft alone (no ratios)")
    ports = free_ports(22)
    systems: list[System] = []
    if binary is not None:
        systems.append(etcd.Etcd(binary, root, ports[0:3], ports[3:6]))
    pykraft = Pykraft(root, ports[6:9], ports[10:13])
    systems.append(pykraft)
    echo = Echo(root, ports[9])
    fronts = [BatchingFront(root, pykraft, ports[13:14]), BatchingFront(root, pykraft, ports[14:16])]
    on_grpc = Pykraft(root, ports[16:19], ports[19:22], grpc_streams=True)
    extras: list[System] = [echo, *fronts, on_grpc]
    etcd_name = f"etcd {systems[0].version}" if binary is not None else "etcd"  # type: ignore[attr-defined]
    out.say(
        f"peers benchmark: {' and '.join(s.name for s in systems)}, 3 members each on 127.0.0.1; {os.cpu_count()} "
        f"cores; data in {root}; {args.rounds} round(s) of {args.writes} sequential writes and {args.duration} s at "
        f"64 and 256 in flight; {args.failover_trials} failover trials each"
    )
    report: dict[str, Any] = {
        "etcd_version": systems[0].version if binary is not None else None,  # type: ignore[attr-defined]
        "cores": os.cpu_count(),
        "settings": {k: getattr(args, k) for k in ("rounds", "writes", "duration", "failover_trials", "quick")},
    }
    signal.signal(signal.SIGTERM, _interrupted)  # like Ctrl-C: the processes started here are ended below
    keep = bool(args.dir)
    try:
        for s in [*systems, *extras]:
            s.start()
        report["systems"] = run_loop(measure(args, systems, extras, out))
    except Exception:
        keep = True
        out.say(f"the run failed: its data directories and logs are kept in {root}")
        raise
    finally:
        for s in [*systems, *extras]:
            s.end()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    figures = report["systems"]
    print_table(figures, binary is not None, etcd_name, out)
    for name in ("pykraft", on_grpc.name):
        print_hops(figures[name].get("commit_hops", {}), figures[name]["sequential"]["mean_ms"], out, name)
    print_failures(figures, [*(s.name for s in systems), *(s.name for s in extras)], out)
    p, echo_rate = figures["pykraft"], figures[echo.name]["throughput_64"]["ops_per_s"]
    g = figures[on_grpc.name]
    report["ratios"] = {
        "echo_64": ratio(p["throughput_64"]["ops_per_s"], echo_rate),
        "frames_vs_grpc_streams": {
            "sequential_p50": ratio(p["sequential"]["p50_ms"], g["sequential"]["p50_ms"]),
            "sequential_mean": ratio(p["sequential"]["mean_ms"], g["sequential"]["mean_ms"]),
            "throughput_64": ratio(p["throughput_64"]["ops_per_s"], g["throughput_64"]["ops_per_s"]),
        },
        "echo_64_by_round": by_round_ratios(p["throughput_64"], figures[echo.name]["throughput_64"]),
        **(
            {
                key: ratio(p[part][field], figures["etcd"][part][field])
                for key, part, field in (
                    ("sequential_p50", "sequential", "p50_ms"),
                    ("sequential_p99", "sequential", "p99_ms"),
                    ("sequential_mean", "sequential", "mean_ms"),
                    ("throughput_64", "throughput_64", "ops_per_s"),
                    ("throughput_256", "throughput_256", "ops_per_s"),
                    ("kill9_median", "failover_kill9", "median_ms"),
                    ("kill9_p90", "failover_kill9", "p90_ms"),
                    ("sigstop_median", "failover_sigstop", "median_ms"),
                    ("sigstop_p99", "failover_sigstop", "p99_ms"),
                )
            }
            | {
                f"throughput_{n}_by_round": by_round_ratios(p[f"throughput_{n}"], figures["etcd"][f"throughput_{n}"])
                for n in (64, 256)
            }
            if binary is not None
            else {}
        ),
    }
    out.say("\nacceptance (issue targets):")
    kill9, sigstop = p["failover_kill9"], p["failover_sigstop"]
    checks = [
        ("pykraft 64 in flight >= 0.8x bare grpc.aio echo", report["ratios"]["echo_64"] >= 0.8),
        ("no pykraft election outside the failover trials", p["elections_outside_trials"] == 0),
        (
            f"pykraft kill -9 failover: no trial above 500 ms in >= 50 trials ({kill9['trials']} run)",
            kill9["trials"] >= 50 and kill9["over_500ms"] == 0 and not kill9["gave_up"],
        ),
        ("pykraft SIGSTOP failover p99 <= 2 s", sigstop["p99_ms"] <= 2000 and not sigstop["gave_up"]),
    ]
    if binary is not None:
        checks += [
            ("pykraft SIGSTOP failover median <= etcd's", report["ratios"]["sigstop_median"] <= 1.0),
            ("pykraft sequential commit p50 <= 1.5x etcd's", report["ratios"]["sequential_p50"] <= 1.5),
        ]
    measured = {
        f"{name} {key}": figures[name][key]
        for name in figures
        for key in ("sequential", "throughput_64", "throughput_256")
        if key in figures[name]
    }
    old, sys.stdout = sys.stdout, out.out  # acceptance() prints; under --json stdout holds the JSON only
    try:
        report["checks"] = acceptance(checks, measured, "write")
    finally:
        sys.stdout = old
    if args.json:
        print(json.dumps(json_safe(report)))
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3, help="rounds of each latency/throughput measurement per system")
    p.add_argument("--writes", type=int, default=2000, help="sequential writes per round")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per throughput round")
    p.add_argument("--failover-trials", type=int, default=20, help="kill -9 and SIGSTOP trials each, per system")
    p.add_argument("--quick", action="store_true", help="1 round, 500 writes, 2 s, 5 failover trials (~1 min)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout (the text goes to stderr)")
    p.add_argument("--dir", help="put the data directories and logs here, and keep them")
    args = p.parse_args()
    if args.rounds < 1 or args.writes < 1 or args.duration <= 0 or args.failover_trials < 0:
        p.error("--rounds, --writes and --duration must be positive, --failover-trials not negative")
    try:
        return run_parent(args)
    except KeyboardInterrupt:
        print("\ninterrupted: the processes started here were ended", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
