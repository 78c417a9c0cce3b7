"""The scale benchmark's phases that load the cluster (``scale.py``): creating N partitions (with a progress line
every 15 s and the memory floor's watch), the appender (1 topic per request on a fixed schedule) and its windows'
figures, a snapshot forced under the appender's load, and the small idle cluster's retention.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from _scale_cluster import BIG_MESSAGES, NOT_CONTROLLER, Bench, Settings, log_size, metadata_files  # noqa: E402
from _scale_measure import (  # noqa: E402
    MEMORY_FLOOR,
    OutOfMemory,
    PhaseCpu,
    commit_path,
    commit_path_text,
    loadavg,
    loop_stalls,
    mem_available,
)
from _stats import Tally, error_name, log_events, rss_bytes  # noqa: E402
from create_topics import failed_codes, topic_request  # noqa: E402

from pykraft.api import controller_pb2 as pb  # noqa: E402
from pykraft.api import controller_pb2_grpc as pb_grpc  # noqa: E402
from quorum.errors import Errors  # noqa: E402
from quorum.log.log import MAX_RETAINED_SNAPSHOTS, METADATA_PARTITION_DIR  # noqa: E402
from quorum.raft.runtime import CLEAN_INTERVAL_S  # noqa: E402

PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 99  # 99 x (1 TopicRecord + 100 PartitionRecords) = 9,999 records: under Kafka's 10,000 per op
IN_FLIGHT = 4
APPENDER_RATE = 200  # requests/s, 1 topic (3 partitions, RF 3) each
IDLE_OVERRIDES = {
    "metadata.max.retention.ms": 30_000,
    "metadata.log.max.snapshot.interval.ms": 20_000,
    "metadata.log.segment.bytes": 16 * 1024,
}
IDLE_PARTITIONS = 10_000
TOPIC_ALREADY_EXISTS = int(Errors.TOPIC_ALREADY_EXISTS)


# -- phases ------------------------------------------------------------------------------------------------------


async def create_partitions(bench: Bench, partitions: int, deadline_s: float = 3600) -> dict[str, Any]:
    """Topics of 100 partitions, 99 a request, IN_FLIGHT requests at a time, to the leader; then wait for every
    controller and observer to hold and apply it all.

    As a client does, a request answered NOT_CONTROLLER or failing in transport (a leader change) is sent again
    to the new leader; each failed attempt is counted (by its code) and fails every target. A topic answered
    TOPIC_ALREADY_EXISTS on such a retry was created by the attempt whose fate was unknown: it counts as created,
    and the partition count the leader holds at the end is checked against the total asked for."""
    leader = await bench.leader_id()
    assert leader is not None
    current = {"target": bench.cluster.nodes[leader].address}
    sizes = [PARTITIONS_PER_TOPIC] * (partitions // PARTITIONS_PER_TOPIC)
    if partitions % PARTITIONS_PER_TOPIC:
        sizes.append(partitions % PARTITIONS_PER_TOPIC)
    names = [f"scale-{i:06d}" for i in range(len(sizes))]
    bench.topic_names += names
    requests = [
        list(zip(names[i : i + TOPICS_PER_REQUEST], sizes[i : i + TOPICS_PER_REQUEST], strict=True))
        for i in range(0, len(names), TOPICS_PER_REQUEST)
    ]
    pending = iter(requests)
    tally = Tally()
    created = {"topics": 0, "partitions": 0, "retries": 0}
    stopped = {"at_deadline": False}
    created_topics: list[tuple[str, int]] = []  # in the order answered
    channels: dict[str, grpc.aio.Channel] = {}

    def stub_for(target: str) -> pb_grpc.ControllerStub:
        if target not in channels:
            channels[target] = grpc.aio.insecure_channel(target, options=BIG_MESSAGES)
        return pb_grpc.ControllerStub(channels[target])

    async def follow_leader(hint: str) -> None:
        if hint and hint != current["target"]:
            current["target"] = hint
            return
        await asyncio.sleep(0.1)
        leader = await bench.leader_id()
        if leader is not None:
            current["target"] = bench.cluster.nodes[leader].address

    async def worker() -> None:
        for chunk in pending:
            if time.perf_counter() - started > deadline_s:
                stopped["at_deadline"] = True
                return  # the rest is not sent: the phase reports how far it got
            retry = False
            while True:
                req = pb.CreateTopicsRequest(timeout_ms=60_000)
                for name, n in chunk:
                    req.topics.add(name=name, num_partitions=n, replication_factor=3)
                sent = tally.sent()
                try:
                    resp = await stub_for(current["target"]).CreateTopics(req, timeout=65)
                except grpc.aio.AioRpcError as e:
                    tally.answered()
                    tally.exception(e)
                    created["retries"] += 1
                    retry = True
                    await follow_leader("")
                    continue
                done = tally.answered()
                if resp.error_code == NOT_CONTROLLER:
                    tally.failure(error_name(resp.error_code))
                    created["retries"] += 1
                    retry = True
                    await follow_leader(resp.controller.controller_endpoint)
                    continue
                break
            exists = TOPIC_ALREADY_EXISTS if retry else None
            ok = {t.name for t in resp.topics if t.error_code in (0, exists)} if not resp.error_code else set()
            created["topics"] += len(ok)
            created["partitions"] += sum(n for name, n in chunk if name in ok)
            codes = [c for c in failed_codes(resp, len(chunk)) if not (retry and c == "TOPIC_ALREADY_EXISTS")]
            created_topics.extend((name, n) for name, n in chunk if name in ok)
            if codes:
                tally.failure(*codes)
            else:
                tally.success((done - sent) * 1000)

    existing = await bench.partition_count() or 0
    meter = PhaseCpu(bench)
    started = time.perf_counter()
    watch = asyncio.create_task(progress_lines(bench, started, created))
    caught_up: float | None = None
    behind: dict[str, str] = {}
    try:
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        answered = time.perf_counter() - started
        try:
            caught_up = await bench.wait_caught_up(timeout=max(300.0, min(900.0, deadline_s / 2)))
        except TimeoutError as e:
            behind = {"why": str(e)}
    finally:
        watch.cancel()
        for ch in channels.values():
            await ch.close()
    if bench.abort:
        raise OutOfMemory(bench.abort)
    total = time.perf_counter() - started
    cpu = meter.used()
    last = created_topics[-TOPICS_PER_REQUEST:]
    images = await bench.images_hold([name for name, _ in last], sum(n for _, n in last)) if bench.observers else {}
    return {
        "partitions": partitions,
        "topics": len(names),
        "requests": len(requests),
        "created_topics": created["topics"],
        "created_partitions": created["partitions"],
        "retried_attempts": created["retries"],
        "leader_partition_count": await bench.partition_count(),
        "partitions_before": existing,
        "answered_s": answered,
        "caught_up_after_s": caught_up,
        "not_caught_up": behind,
        "stopped_at_deadline": stopped["at_deadline"],
        "deadline_s": deadline_s,
        "total_s": total,
        "partitions_per_s": created["partitions"] / total if total else 0.0,
        "request_p50_ms": tally.percentile(50),
        "request_p99_ms": tally.percentile(99),
        "broker_images_hold_the_last_request": images,
        **tally.summary(),
        **cpu,
    }


async def progress_lines(bench: Bench, started: float, created: dict[str, int], every_s: float = 15.0) -> None:
    """Every ``every_s`` a line: partitions created so far, the leader's high watermark, how far the slowest node
    is, memory; and the run stopped (OutOfMemory in the creating task) when the machine runs short of memory."""
    last = time.perf_counter()
    while True:
        await asyncio.sleep(0.5)
        available = mem_available()
        rss = {name: rss_bytes(pid) or 0 for name, pid in bench.pids().items()}
        if available is not None and available < MEMORY_FLOOR:
            bench.abort = (
                f"the machine had {available / 2**30:.1f} GiB available (floor {MEMORY_FLOOR / 2**30:.0f} GiB) after "
                f"{created['partitions']:,} partitions were created, {time.perf_counter() - started:.0f} s in; "
                "RSS: " + ", ".join(f"{k} {v / 2**20:,.0f} MiB" for k, v in rss.items())
            )
            bench.kill_all()
            return
        if time.perf_counter() - last >= every_s:
            last = time.perf_counter()
            hw, behind = await bench.lagging()
            print(
                f"    ... {time.perf_counter() - started:5.0f} s: {created['partitions']:>9,} partitions answered, "
                f"leader HW {hw:,}, behind: {len(behind)} node(s), RSS total {sum(rss.values()) / 2**30:.1f} GiB "
                f"(largest {max(rss.values(), default=0) / 2**30:.2f}), available {(available or 0) / 2**30:.1f} GiB, "
                f"load {loadavg()}",
                flush=True,
            )


async def appender(
    targets: list[str], rate: int, stop: asyncio.Event, prefix: str, names: list[str]
) -> list[tuple[float, float | None, str | None]]:
    """One client creating 1 topic (3 partitions, RF 3) per request on a fixed schedule of ``rate``/s until
    ``stop``: ``(scheduled time, latency ms from it or None, error)`` per attempt. It starts with ``targets[0]``
    and, as a client does, follows a NOT_CONTROLLER answer's hint (or tries the next controller after a transport
    error) and sends the request again: each failed attempt is a sample of its own, and the request's latency runs
    from its scheduled time to the answer that created the topic (TOPIC_ALREADY_EXISTS on a retry counts: the
    attempt before it may have created it)."""
    samples: list[tuple[float, float | None, str | None]] = []
    current = {"target": targets[0]}
    channels: dict[str, grpc.aio.Channel] = {}

    def stub_for(target: str) -> pb_grpc.ControllerStub:
        if target not in channels:
            channels[target] = grpc.aio.insecure_channel(target)
        return pb_grpc.ControllerStub(channels[target])

    def next_target(failed: str) -> None:
        if current["target"] == failed:
            current["target"] = targets[(targets.index(failed) + 1) % len(targets)] if failed in targets else targets[0]

    async def one(i: int, scheduled: float) -> None:
        name = f"{prefix}-{i}"
        names.append(name)
        for attempt in range(20):
            target = current["target"]
            try:
                resp = await stub_for(target).CreateTopics(topic_request([name]), timeout=35)
            except grpc.aio.AioRpcError as e:
                samples.append((scheduled, None, f"grpc {e.code().name}"))
                next_target(target)
                await asyncio.sleep(0.05)
                continue
            if resp.error_code == NOT_CONTROLLER:
                samples.append((scheduled, None, "NOT_CONTROLLER"))
                hint = resp.controller.controller_endpoint
                if hint and hint != target:
                    current["target"] = hint
                else:
                    next_target(target)
                    await asyncio.sleep(0.05)
                continue
            latency = (time.perf_counter() - scheduled) * 1000
            codes = [c for c in failed_codes(resp, 1) if not (attempt and c == "TOPIC_ALREADY_EXISTS")]
            samples.append((scheduled, None if codes else latency, codes[0] if codes else None))
            return

    tasks = []
    start = time.perf_counter()
    try:
        i = 0
        while not stop.is_set():
            scheduled = start + i / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, scheduled)))
            i += 1
        await asyncio.gather(*tasks)
    finally:
        for ch in channels.values():
            await ch.close()
    return samples


def window_tally(samples: list[tuple[float, float | None, str | None]], start: float, end: float) -> dict[str, Any]:
    tally = Tally()
    for scheduled, latency, error in samples:
        if start <= scheduled <= end:
            if latency is None:
                tally.failure(error or "unknown")
            else:
                tally.success(latency)
    # When the slowest 1 % were scheduled, from the window's start: one stall or a spread over the window.
    timed = sorted(
        (latency, scheduled - start)
        for scheduled, latency, _ in samples
        if latency is not None and start <= scheduled <= end
    )
    slowest = [at for _, at in timed[-max(1, len(timed) // 100) :]]
    return {
        "requests": len({scheduled for scheduled, _, _ in samples if start <= scheduled <= end}),
        "slowest_at_s": (min(slowest), max(slowest)) if slowest else None,
        "p50_ms": tally.percentile(50),
        "p99_ms": tally.percentile(99),
        "max_ms": max(tally.latencies_ms) if tally.latencies_ms else float("nan"),
        "ok": tally.ok,
        "failed": tally.failed,
        "errors": dict(tally.errors),
        "elapsed_s": end - start,
    }


async def snapshot_under_load(bench: Bench, window_s: float) -> dict[str, Any]:
    """The appender's baseline for ``window_s``, then the same appender while the leader writes a forced snapshot."""
    leader = await bench.leader_id()
    assert leader is not None
    node = bench.cluster.nodes[leader]
    # Every node snapshots first, so no policy-triggered snapshot (20 MiB since the last) lands in the baseline.
    for n in bench.cluster.nodes.values():
        try:
            await bench.create_snapshot(n.address)
        except grpc.aio.AioRpcError as e:  # best effort: it only keeps the policy's snapshots out of the baseline
            print(f"    (the snapshot first taken on c{n.node_id} failed: {e.code().name})", flush=True)
    await asyncio.sleep(1.0)
    stop = asyncio.Event()
    meter = PhaseCpu(bench)
    targets = [node.address] + [n.address for n in bench.cluster.nodes.values() if n is not node]
    task = asyncio.create_task(appender(targets, APPENDER_RATE, stop, "base", bench.topic_names))
    await asyncio.sleep(0.5)  # connected
    ports = {i: bench.metrics_ports[i] for i in bench.cluster.nodes}

    async def paths() -> dict[int, dict[str, float] | None]:
        got = await asyncio.gather(*(asyncio.to_thread(commit_path, p) for p in ports.values()))
        return dict(zip(ports, got, strict=True))

    base_paths = await paths()
    logs_at = {i: log_size(n.log_path) for i, n in bench.cluster.nodes.items()}
    base_start, base_start_wall = time.perf_counter(), time.time()
    await asyncio.sleep(window_s)
    base_end, base_end_wall = time.perf_counter(), time.time()
    base_cpu = meter.used()
    snap_paths = await paths()
    meter = PhaseCpu(bench)
    since = log_size(node.log_path)
    snap_start, snap_start_wall = time.perf_counter(), time.time()
    resp, seconds = await bench.create_snapshot(node.address)
    snap_end, snap_end_wall = time.perf_counter(), time.time()
    snap_cpu = meter.used()
    end_paths = await paths()

    def path_texts(before: dict[int, Any], after: dict[int, Any]) -> dict[str, str]:
        return {f"c{i}": commit_path_text(before[i], after[i], "leader" if i == leader else "follower") for i in ports}

    await asyncio.sleep(0.5)
    stop.set()
    samples = await task
    generated = log_events(node.log_path, "snapshot_generated", since)
    frozen = log_events(node.log_path, "snapshot_frozen", since)
    return {
        "leader": leader,
        "rate": APPENDER_RATE,
        "baseline": {
            **window_tally(samples, base_start, base_end),
            **base_cpu,
            "commit_path": path_texts(base_paths, snap_paths),
            "loop_stalls": loop_stalls(bench, logs_at, base_start_wall, base_end_wall),
        },
        "during": {
            **window_tally(samples, snap_start, snap_end),
            **snap_cpu,
            "commit_path": path_texts(snap_paths, end_paths),
            "loop_stalls": loop_stalls(bench, logs_at, snap_start_wall, snap_end_wall),
        },
        "snapshot": {
            "error": error_name(resp.error_code) if resp.error_code else None,
            "created": resp.created,
            "id": f"{resp.end_offset}-{resp.epoch}",
            "bytes": resp.size_bytes,
            "request_to_frozen_s": seconds,
            "generated_s": generated[-1]["seconds"] if generated else None,
            "records": generated[-1]["records"] if generated else None,
            "records_per_s": generated[-1].get("records_per_s") if generated else None,
            "frozen_logged": bool(frozen),
            # The forked child's own CPU seconds: the rest of its wall time it waited for a core.
            "child_cpu_s": frozen[-1].get("child_cpu_s") if frozen else None,
        },
    }


async def idle_cluster(root: Path, minutes: float, brokers: int, observers: bool) -> dict[str, Any]:
    """A small cluster with short retention and snapshot interval and small segments, left idle: what each node
    keeps on disk, every minute."""
    bench = Bench(
        root,
        Settings(IDLE_PARTITIONS, brokers, 0, minutes, 0, IDLE_OVERRIDES["metadata.log.segment.bytes"], 0),
        dict(IDLE_OVERRIDES),
        observers,
    )
    samples: list[dict[str, Any]] = []
    try:
        await bench.start()
        created = await create_partitions(bench, IDLE_PARTITIONS)
        dirs = {f"c{i}": n.data_dir for i, n in bench.cluster.nodes.items()}
        dirs.update({f"b{i}": b.data_dir for i, b in bench.brokers.items()})
        started = time.perf_counter()
        meter = PhaseCpu(bench)
        end_offsets = []
        for minute in range(math.ceil(minutes) + 1):
            wait = started + minute * 60 - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            view = await bench.leader_view()
            end_offsets.append((time.perf_counter(), view.high_watermark if view else None))
            sample = {"minute": minute, "nodes": {name: metadata_files(d) for name, d in dirs.items()}}
            samples.append(sample)
            print(
                f"    minute {minute:>2}: "
                + "; ".join(
                    f"{n} {f['bytes'] / 1024:,.0f} KiB ({f['segments']} seg, {f['snapshots']} snap)"
                    for n, f in sample["nodes"].items()
                ),
                flush=True,
            )
        cpu = meter.used()
    finally:
        bench.stop()
    # The bound: the newest snapshots retention keeps (at most MAX_RETAINED_SNAPSHOTS), and the segments written
    # while a snapshot can still be young enough to keep them: retention + one snapshot interval + one cleaning
    # interval of log, at the rate this idle log grew, plus the active segment and one partly covered.
    (t0, hw0), (t1, hw1) = end_offsets[1 if len(end_offsets) > 2 else 0], end_offsets[-1]
    segment_bytes = IDLE_OVERRIDES["metadata.log.segment.bytes"]
    leader_dir = dirs["c1"] / METADATA_PARTITION_DIR
    per_offset = _bytes_per_offset(leader_dir)
    rate = (hw1 - hw0) * per_offset / (t1 - t0) if hw0 is not None and hw1 is not None and t1 > t0 else 0.0
    window_s = (
        IDLE_OVERRIDES["metadata.max.retention.ms"] + IDLE_OVERRIDES["metadata.log.max.snapshot.interval.ms"]
    ) / 1000 + CLEAN_INTERVAL_S
    segment_bound = 2 + math.ceil(rate * window_s / segment_bytes)
    checked = [s for s in samples if s["minute"] >= 1]
    worst = {
        "segments": max((f["segments"] for s in checked for f in s["nodes"].values()), default=0),
        "snapshots": max((f["snapshots"] for s in checked for f in s["nodes"].values()), default=0),
    }
    return {
        "minutes": minutes,
        "partitions": created["created_partitions"],
        "overrides": IDLE_OVERRIDES,
        "samples": samples,
        "log_growth_bytes_per_s": rate,
        "segment_bound": segment_bound,
        "snapshot_bound": MAX_RETAINED_SNAPSHOTS,
        "worst_after_first_minute": worst,
        "bounded": bool(checked)
        and worst["segments"] <= segment_bound
        and worst["snapshots"] <= MAX_RETAINED_SNAPSHOTS,
        **cpu,
    }


def _bytes_per_offset(d: Path) -> float:
    """The newest segment's bytes per offset (its name is its base offset; its batches end at the log end)."""
    from quorum.log.reader import scan_file

    segments = sorted(d.glob("*.log"))
    if not segments:
        return 0.0
    path = segments[-1]
    first = last = None
    for item in scan_file(path):
        if hasattr(item, "base_offset"):
            first = item.base_offset if first is None else first
            last = item.next_offset
    if first is None or last is None or last <= first:
        return 0.0
    return path.stat().st_size / (last - first)
