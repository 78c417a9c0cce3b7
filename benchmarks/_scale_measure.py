"""The scale benchmark's measures beside every phase (``scale.py``): CPU seconds per process over a phase, where a
commit's time goes (a controller's commit-stage and queue histograms), the machine's available memory and load
average, and what the nodes' logs say happened meanwhile (elections, fencings, snapshots, GC pauses, ISR changes).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _scale_cluster import wall_time  # noqa: E402
from _stats import (  # noqa: E402
    log_events,
    metrics_text,
    parse_stage_metrics,
    proc_kib_field,
    prometheus_samples,
)
from create_topics import cpu_seconds  # noqa: E402

if TYPE_CHECKING:
    from _scale_cluster import Bench

MEMORY_FLOOR = 3 * 2**30  # stop the run when the machine has less available than this (it is shared)


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
    return proc_kib_field("/proc/meminfo", "MemAvailable")
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


STALL_FIELDS = ("late_ms", "cpu_ms", "wait_ms", "gc_ms")  # of a loop_stalled line, as the benchmark reports them


def loop_stalls(bench: Bench, since: dict[int, int], start_wall: float, end_wall: float) -> list[dict[str, Any]]:
    """The controllers' ``loop_stalled`` lines (a loop 50 ms or more late) from byte ``since`` of their logs whose
    stall overlapped ``[start_wall, end_wall]`` (``time.time()``), longest first: where the loop's time went."""
    out = []
    for i, nd in bench.cluster.nodes.items():
        for e in log_events(nd.log_path, "loop_stalled", since.get(i, 0)):
            ended = wall_time(e)
            began = ended - e.get("late_ms", 0) / 1000
            if began <= end_wall and ended >= start_wall:
                out.append({"node": f"c{i}", "at_s": began - start_wall, **{k: e.get(k) for k in STALL_FIELDS}})
    return sorted(out, key=lambda s: -(s["late_ms"] or 0))


def loop_stalls_text(stalls: list[dict[str, Any]], most: int = 6) -> str:
    """``c2 94 ms at 4.04 s (CPU 1, waiting for a core 9, neither 84)``: a stall with little CPU and little wait
    for a core was a thread asleep (a blocking call, the disk, a page fault, or the machine's CPU taken away)."""
    if not stalls:
        return "none"
    parts = []
    for s in stalls[:most]:
        late, cpu, wait, gc = s["late_ms"] or 0, s["cpu_ms"] or 0, s["wait_ms"], s["gc_ms"]
        split = f"CPU {cpu:.0f}"
        if wait is not None:
            split += f", waiting for a core {wait:.0f}, neither {max(0.0, late - cpu - wait):.0f}"
        if gc:
            split += f", GC {gc:.0f}"
        parts.append(f"{s['node']} {late:.0f} at {s['at_s']:.2f} s ({split})")
    more = f"; {len(stalls) - most} more" if len(stalls) > most else ""
    return "; ".join(parts) + more
