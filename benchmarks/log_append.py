"""Metadata-log benchmark: append + fsync throughput and record decode/encode rates, against raw-disk baselines
measured in the same run, in the same directory as the log.

    .venv/bin/python benchmarks/log_append.py            # full run (~1.5 minutes)
    .venv/bin/python benchmarks/log_append.py --quick    # a few seconds, for a smoke test
    .venv/bin/python benchmarks/log_append.py --json     # also print every figure as one JSON object (last line)

What is measured:

1. Raw baselines, in a temp dir under ``--dir`` (default: the current directory, i.e. the disk a data dir would
   live on): 4 KiB ``os.write`` + ``os.fsync`` appended to a new file, and 4 KiB ``pwrite`` over a pre-zeroed file
   + ``fdatasync`` (a second reference: what the log's pre-allocated segments aim for). The first is measured again
   after every log run, and each log figure's ratio is over the mean of the raw runs just before and after it, so
   a disk that drifts during the run moves both sides of the ratio.
2. ``MetadataLog.append`` + ``flush`` per batch of 1, 10, 100 and 1,000 PartitionRecords (3 replicas, default write
   version), a fresh log per size, in two variants: *log append+fsync* with batches built before the timed loop
   (the log layer alone: a Raft leader hands the log a built batch) and *encode+append+fsync* with ``serialize`` +
   ``build_batch`` inside the timed loop.
3. One core decoding a mixed metadata log read back from disk: ``iter_batches`` (framing + CRC-32C) and
   ``decode_batch`` (record parsing + every field of every record), plus the ``serialize`` rate of the same mix.

Figures are printed, never asserted: the summary's PASS/FAIL lines compare them with the targets. A write, append
or fsync that raises is not timed: it is counted by exception type beside the figures ('failed'), and any such
failure FAILS every target; rates are over the time measured from the first call to the end of the last. Next to each
figure, "others" is the mean number of cores other processes kept busy meanwhile (from /proc/stat): on a shared
2-core machine, anything well above 0 means that figure measured the neighbours as much as pykraft.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import math
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _stats import errors_text, exception_name, failures, print_failures, ratio

from controller.records import (
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    Uuid,
    decode_batch,
    serialize,
)
from pykraft.logs import configure_logging
from quorum.log.batch import build_batch, iter_batches
from quorum.log.log import PREALLOCATE_CHUNK, LogConfig, MetadataLog

PREALLOCATE = 0  # set from --preallocate

BLOCK = 4096
BATCH_SIZES = (1, 10, 100, 1000)
TARGET_RATIO = 0.8  # 100-record batches: log append+fsync batches/s over raw 4 KiB write+fsync ops/s
TARGET_DECODE = 250_000  # records/s, one core
EPOCH = 1
BROKERS = tuple(range(101, 110))  # nine brokers, one log directory each
TOPIC_CONFIG = 2  # ConfigResource.Type.TOPIC
BROKER_CONFIG = 4  # ConfigResource.Type.BROKER


# -- measuring -------------------------------------------------------------------------------------------------------


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty sequence."""
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


class OtherCpu:
    """CPU time used by everything but this process (from /proc/stat) while it measures: on a 2-core machine
    another busy process skews disk and CPU figures alike, so every figure carries this next to it."""

    def __init__(self) -> None:
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(x) for x in f.readline().split()[1:9]]
        except (OSError, ValueError):
            return None
        user, nice, system, _idle, _iowait, irq, softirq, steal = fields
        mine = os.times()
        busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
        return busy, mine.user + mine.system, time.perf_counter()

    def cores(self) -> float:
        """Mean number of cores busy with other work since this meter started (-1 if unknown)."""
        end = self._sample()
        if self.start is None or end is None:
            return -1.0
        busy, mine, wall = (b - a for a, b in zip(self.start, end, strict=True))
        return max(0.0, busy - mine) / wall


def run_timed(op: Callable[[], Any], duration: float, warmup: float) -> dict[str, Any]:
    """Call ``op`` for ``warmup`` seconds untimed, then for ``duration`` seconds timing each call. Only calls that
    return count in ``ops`` and the latencies; one that raises (an OSError from a full disk, say), in the warm-up
    too, is counted in ``failed`` and ``errors`` by type. The rate is over the time measured from the first call to
    the end of the last."""
    failed = 0
    errors: Counter[str] = Counter()

    def call() -> bool:
        nonlocal failed
        try:
            op()
        except Exception as e:
            failed += 1
            errors[exception_name(e)] += 1
            return False
        return True

    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        call()
    gc.collect()
    latencies = []
    clock = time.perf_counter
    others = OtherCpu()
    start = clock()
    while True:
        t0 = clock()
        ok = call()
        t1 = clock()
        if ok:
            latencies.append(t1 - t0)
        if t1 - start >= duration:
            break
    elapsed = t1 - start
    latencies.sort()
    nan = float("nan")
    return {
        "ops": len(latencies),
        "seconds": elapsed,
        "ops_per_s": len(latencies) / elapsed,
        "p50_ms": percentile(latencies, 0.50) * 1e3 if latencies else nan,
        "p99_ms": percentile(latencies, 0.99) * 1e3 if latencies else nan,
        "max_ms": latencies[-1] * 1e3 if latencies else nan,
        "other_cpu_cores": others.cores(),
        "failed": failed,
        "errors": dict(errors),
    }


def raw_write_fsync(directory: Path, duration: float, warmup: float) -> dict[str, float]:
    """4 KiB ``os.write`` + ``os.fsync``, appended to a new file: every sync also commits a size change."""
    path = directory / "raw-append.bin"
    block = os.urandom(BLOCK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:

        def op() -> None:
            os.write(fd, block)
            os.fsync(fd)

        return run_timed(op, duration, warmup)
    finally:
        os.close(fd)
        path.unlink()


def raw_overwrite_fdatasync(directory: Path, duration: float, warmup: float, size: int) -> dict[str, float]:
    """4 KiB ``pwrite`` over a file pre-filled with zeros (and synced) + ``fdatasync``, wrapping at its end."""
    path = directory / "raw-prezeroed.bin"
    block = os.urandom(BLOCK)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        zeros = bytes(1 << 20)
        for _ in range(size // len(zeros)):
            os.write(fd, zeros)
        os.fsync(fd)
        position = 0

        def op() -> None:
            nonlocal position
            os.pwrite(fd, block, position)
            os.fdatasync(fd)
            position = (position + BLOCK) % size

        return run_timed(op, duration, warmup)
    finally:
        os.close(fd)
        path.unlink()


# -- records ---------------------------------------------------------------------------------------------------------


class Cluster:
    """Deterministic, plausible metadata: brokers with one log directory each, topics with 3-replica partitions."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.dirs = {b: Uuid(self.rng.randbytes(16)) for b in BROKERS}
        self.partitions: list[tuple[Uuid, int, list[int]]] = []  # (topic id, partition, replicas)
        self.topics = 0

    def uuid(self) -> Uuid:
        return Uuid(self.rng.randbytes(16))

    def partition_record(self, topic_id: Uuid, partition: int) -> PartitionRecord:
        replicas = self.rng.sample(BROKERS, 3)
        isr = list(replicas) if self.rng.random() < 0.9 else replicas[:2]
        self.partitions.append((topic_id, partition, replicas))
        return PartitionRecord(
            partition_id=partition,
            topic_id=topic_id,
            replicas=replicas,
            isr=isr,
            leader=isr[0],
            leader_epoch=self.rng.randrange(0, 40),
            partition_epoch=self.rng.randrange(0, 200),
            directories=[self.dirs[b] for b in replicas],
        )

    def partition_records(self, count: int) -> list[PartitionRecord]:
        """``count`` PartitionRecords of topics of 50 partitions each (for the append benchmark)."""
        out: list[PartitionRecord] = []
        topic_id = self.uuid()
        for i in range(count):
            if i % 50 == 0:
                topic_id = self.uuid()
            out.append(self.partition_record(topic_id, i % 50))
        return out

    def create_topic(self) -> list[Any]:
        self.topics += 1
        name = f"{self.rng.choice(('orders', 'payments', 'clicks', 'audit', 'inventory'))}-{self.topics:05d}.events"
        topic_id = self.uuid()
        partitions = self.rng.choice((1, 3, 6, 12, 12, 24, 32, 50))
        configs = [
            ConfigRecord(resource_type=TOPIC_CONFIG, resource_name=name, name=key, value=value)
            for key, value in self.rng.sample(
                [
                    ("retention.ms", "604800000"),
                    ("cleanup.policy", "compact"),
                    ("min.insync.replicas", "2"),
                    ("segment.bytes", "536870912"),
                    ("max.message.bytes", "2097152"),
                ],
                self.rng.choice((1, 2, 2, 3)),
            )
        ]
        records: list[Any] = [TopicRecord(name=name, topic_id=topic_id), *configs]
        records += [self.partition_record(topic_id, p) for p in range(partitions)]
        return records

    def change_partition(self) -> PartitionChangeRecord:
        topic_id, partition, replicas = self.rng.choice(self.partitions)
        kind = self.rng.random()
        if kind < 0.45:  # ISR shrink
            return PartitionChangeRecord(partition_id=partition, topic_id=topic_id, isr=replicas[:2])
        if kind < 0.85:  # ISR expand
            return PartitionChangeRecord(partition_id=partition, topic_id=topic_id, isr=list(replicas))
        leader = self.rng.choice(replicas)  # leader election
        return PartitionChangeRecord(partition_id=partition, topic_id=topic_id, leader=leader, isr=[leader])

    def register_broker(self) -> RegisterBrokerRecord:
        broker = self.rng.choice(BROKERS)
        return RegisterBrokerRecord(
            broker_id=broker,
            incarnation_id=self.uuid(),
            broker_epoch=self.rng.randrange(1, 1 << 40),
            end_points=[
                BrokerEndpoint(name="PLAINTEXT", host=f"broker-{broker}.kafka.svc", port=9092, security_protocol=0),
                BrokerEndpoint(name="SSL", host=f"broker-{broker}.kafka.svc", port=9093, security_protocol=1),
            ],
            features=[
                BrokerFeature(name="metadata.version", min_supported_version=7, max_supported_version=22),
                BrokerFeature(name="kraft.version", min_supported_version=0, max_supported_version=1),
                BrokerFeature(name="group.version", min_supported_version=0, max_supported_version=1),
            ],
            rack=f"rack-{broker % 3}",
            fenced=True,
            log_dirs=[self.dirs[broker]],
        )

    def mixed_log(self, count: int) -> list[Any]:
        """About ``count`` records: topic creations (TopicRecord, ConfigRecords, PartitionRecords), partition
        changes, broker (un)fencing and registrations, broker configs, NoOps and feature levels."""
        out: list[Any] = [
            FeatureLevelRecord(name="metadata.version", feature_level=22),
            FeatureLevelRecord(name="kraft.version", feature_level=1),
        ]
        out += [self.register_broker() for _ in BROKERS]
        out += self.create_topic()
        events = ("topic", "change", "noop", "fence", "register", "broker_config", "feature")
        weights = (1.0, 13.0, 0.6, 0.3, 0.1, 0.1, 0.05)
        while len(out) < count:
            event = self.rng.choices(events, weights)[0]
            if event == "topic":
                out += self.create_topic()
            elif event == "change":
                out.append(self.change_partition())
            elif event == "noop":
                out.append(NoOpRecord())
            elif event == "fence":
                broker = self.rng.choice(BROKERS)
                out.append(
                    BrokerRegistrationChangeRecord(
                        broker_id=broker, broker_epoch=self.rng.randrange(1, 1 << 40), fenced=self.rng.choice((-1, 1))
                    )
                )
            elif event == "register":
                out.append(self.register_broker())
            elif event == "broker_config":
                out.append(
                    ConfigRecord(
                        resource_type=BROKER_CONFIG,
                        resource_name=str(self.rng.choice(BROKERS)),
                        name="log.cleaner.threads",
                        value=str(self.rng.randrange(1, 8)),
                    )
                )
            else:
                out.append(FeatureLevelRecord(name="group.version", feature_level=1))
        return out[:count]


# -- the log benchmarks ----------------------------------------------------------------------------------------------


def log_append(
    root: Path, cluster: Cluster, size: int, encode: bool, duration: float, warmup: float
) -> dict[str, float]:
    """Append + flush batches of ``size`` PartitionRecords to a fresh log; ``encode`` puts serialize +
    build_batch inside the timed loop."""
    pool_size = max(4, min(64, 20_000 // size))  # distinct batches, cycled
    groups = [cluster.partition_records(size) for _ in range(pool_size)]
    now = int(time.time() * 1000)
    prebuilt = [build_batch([(None, serialize(r)) for r in g], epoch=EPOCH, timestamp=now) for g in groups]
    directory = root / f"log-{'encode' if encode else 'append'}-{size}"
    log = MetadataLog.open(directory, LogConfig(preallocate_bytes=PREALLOCATE))
    try:
        if encode:
            cycle = itertools.cycle(groups)

            def op() -> None:
                batch = build_batch(
                    [(None, serialize(r)) for r in next(cycle)], epoch=EPOCH, timestamp=int(time.time() * 1000)
                )
                log.append(batch)
                log.flush()

        else:
            cycle = itertools.cycle(prebuilt)

            def op() -> None:
                batch = next(cycle)
                log.append(batch)
                log.flush()

        result = run_timed(op, duration, warmup)
    finally:
        log.close()
        shutil.rmtree(directory)
    result["batch_bytes"] = statistics.fmean(len(b) for b in prebuilt)
    result["records_per_s"] = result["ops_per_s"] * size
    result["mb_per_s"] = result["ops_per_s"] * result["batch_bytes"] / 1e6
    return result


# -- decode ----------------------------------------------------------------------------------------------------------


def measure_passes(fn: Callable[[], int], passes: int) -> dict[str, Any]:
    """Run ``fn`` (which returns how many records it handled) ``passes`` times; rates per wall-clock second (the
    figure) and per CPU-second of this thread (a diagnostic that other processes disturb less)."""
    wall, cpu, others = [], [], []
    for _ in range(passes):
        gc.collect()
        meter = OtherCpu()
        c0, t0 = time.thread_time(), time.perf_counter()
        n = fn()
        t1, c1 = time.perf_counter(), time.thread_time()
        wall.append(n / (t1 - t0))
        cpu.append(n / max(c1 - c0, 1e-9))
        others.append(meter.cores())
    return {
        "records_per_s": statistics.median(wall),
        "passes_records_per_s": wall,
        "records_per_cpu_s": statistics.median(cpu),
        "passes_other_cpu_cores": others,
    }


def decode_bench(root: Path, cluster: Cluster, count: int, batch_records: int, passes: int) -> dict[str, Any]:
    records = cluster.mixed_log(count)
    mix = Counter(type(r).__name__ for r in records)
    values = [serialize(r) for r in records]  # untimed: also the warm-up of the timed passes below
    now = int(time.time() * 1000)

    def make_batches() -> list[bytes]:
        return [
            build_batch([(None, v) for v in values[i : i + batch_records]], epoch=EPOCH, timestamp=now)
            for i in range(0, len(values), batch_records)
        ]

    batches = make_batches()
    directory = root / "log-decode"
    with MetadataLog.open(directory, LogConfig()) as log:
        for b in batches:
            log.append(b)
        log.flush()
        segments = log.segments
    data = [p.read_bytes() for p in segments]  # closed segments: exactly Kafka's bytes, zeros trimmed
    file_bytes = sum(len(d) for d in data)
    shutil.rmtree(directory)

    # Correctness, untimed (and the decode warm-up): every record comes back, the first 5,000 equal to the originals.
    decoded = [m for d in data for b in iter_batches(d) for m in decode_batch(b)]
    if len(decoded) != len(records):
        raise RuntimeError(f"decoded {len(decoded)} records, wrote {len(records)}")
    for original, got in zip(records[:5000], decoded, strict=False):
        if got.message != original:
            raise RuntimeError(f"offset {got.offset}: decoded {got.message!r}, wrote {original!r}")
    del decoded

    def decode_all() -> int:
        n = 0
        for d in data:
            for batch in iter_batches(d):
                n += len(decode_batch(batch))
        return n

    def framing_only() -> int:
        return sum(batch.record_count for d in data for batch in iter_batches(d))

    def records_only() -> int:
        return sum(len(batch.records()) for d in data for batch in iter_batches(d))

    def serialize_all() -> int:
        return len([serialize(r) for r in records])

    def build_all() -> int:
        make_batches()
        return len(values)

    return {
        "records": len(records),
        "batches": len(batches),
        "batch_records": batch_records,
        "file_bytes": file_bytes,
        "mean_record_value_bytes": statistics.fmean(len(v) for v in values),
        "mix": dict(mix.most_common()),
        "decode": measure_passes(decode_all, passes),
        "iter_batches_only": measure_passes(framing_only, 1),
        "iter_batches_and_records": measure_passes(records_only, 1),
        "serialize": measure_passes(serialize_all, passes),
        "build_batch": measure_passes(build_all, 1),
    }


# -- output ----------------------------------------------------------------------------------------------------------


def fs_type(path: Path) -> str:
    """Best effort: the filesystem type and device of the mount holding ``path``."""
    try:
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return "unknown"
    resolved = str(path.resolve())
    best = ("", "unknown", "unknown")
    for fields in mounts:
        device, mount_point, kind = fields[0], fields[1], fields[2]
        if (resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")) and len(mount_point) >= len(
            best[0]
        ):
            best = (mount_point, kind, device)
    return f"{best[1]} on {best[2]} (mounted at {best[0]})"


def load_average() -> str:
    """The 1/5/15-minute load averages: other work on the machine skews every figure here."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} CPUs"


def fmt_rate(r: dict[str, Any]) -> str:
    return (
        f"{r['ops_per_s']:>9,.0f} ops/s   p50 {r['p50_ms']:.3f} ms   p99 {r['p99_ms']:.3f} ms   "
        f"max {r['max_ms']:.2f} ms   ({r['ops']:,} ops; others {r['other_cpu_cores']:.2f} cores; {errors_text(r)})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", type=Path, default=None, help="where to make the temp dir (default: the cwd)")
    parser.add_argument("--duration", type=float, help="timed seconds per measurement (default 2.5, quick 0.5)")
    parser.add_argument("--warmup", type=float, help="untimed seconds before each (default 0.5, quick 0.1)")
    parser.add_argument("--decode-records", type=int, help="records in the decode log (default 300,000, quick 50,000)")
    parser.add_argument("--decode-batch", type=int, default=100, help="records per batch in the decode log")
    parser.add_argument("--decode-passes", type=int, help="timed decode passes, median used (default 3, quick 1)")
    parser.add_argument("--prezeroed-mib", type=int, default=64, help="size of the pre-zeroed baseline file")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--preallocate", action="store_true", help="log.preallocate=true: zero-fill segments ahead of the writer"
    )
    parser.add_argument("--quick", action="store_true", help="a short run (defaults above; explicit flags win)")
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON object")
    args = parser.parse_args(argv)
    defaults = {
        "duration": (2.5, 0.5),
        "warmup": (0.5, 0.1),
        "decode_records": (300_000, 50_000),
        "decode_passes": (3, 1),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    configure_logging(level="WARNING")  # the log's info events (opened, closed) would interleave with figures
    global PREALLOCATE
    PREALLOCATE = PREALLOCATE_CHUNK if args.preallocate else 0

    parent = (args.dir or Path.cwd()).resolve()
    root = Path(tempfile.mkdtemp(prefix=".bench-log-append-", dir=parent))
    out: dict[str, Any] = {
        "config": {
            "dir": str(root),
            "filesystem": fs_type(root),
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "quick": args.quick,
            "log.preallocate": args.preallocate,
            "load_average_start": os.getloadavg(),
        }
    }
    p = print
    try:
        p(f"pykraft metadata-log benchmark   python {platform.python_version()}, {os.cpu_count()} CPUs")
        p(f"dir {root}  [{fs_type(root)}]")
        p(f"{args.duration:g} s timed + {args.warmup:g} s warm-up per measurement; {load_average()}")
        p(f"log.preallocate={'true' if args.preallocate else 'false'} (zero-filled segments: --preallocate)\n")

        p(
            "'others': mean number of cores busy outside this process during a measurement: other processes, and"
            "\n          kernel threads (journal commits) working for our fsyncs; near 0 on a quiet machine\n"
        )
        p("1. Raw disk baselines, 4 KiB per op, same directory as the logs")
        raw_series = [raw_write_fsync(root, args.duration, args.warmup)]
        p(f"   write + fsync, appending a new file     {fmt_rate(raw_series[0])}")
        raw_over = raw_overwrite_fdatasync(root, args.duration, args.warmup, args.prezeroed_mib << 20)
        p(f"   overwrite pre-zeroed file + fdatasync   {fmt_rate(raw_over)}   (second reference)")
        p(
            "   write + fsync is measured again after every log run below: each ratio ('x raw') is over the mean of"
            "\n   the raw runs just before and just after it ('raw/s'); 'x ovw' is over overwrite + fdatasync"
        )
        sys.stdout.flush()

        cluster = Cluster(args.seed)
        results: list[dict[str, Any]] = []
        for encode in (False, True):
            label = "encode+append+fsync" if encode else "log append+fsync"
            what = (
                "serialize + build_batch + append + flush timed"
                if encode
                else "batches pre-encoded; append + flush timed"
            )
            p(f"\n2{'b' if encode else 'a'}. {label}: PartitionRecord batches ({what}), fresh log per size")
            p(
                f"   {'records/batch':>13} {'batch bytes':>11} {'batches/s':>10} {'records/s':>10} {'MB/s':>7} "
                f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'raw/s':>7} {'x raw':>6} {'x ovw':>6} {'others':>6} "
                f"{'failed':>6}"
            )
            for size in BATCH_SIZES:
                r = log_append(root, cluster, size, encode, args.duration, args.warmup)
                raw_series.append(raw_write_fsync(root, args.duration, args.warmup))
                raw_rate = (raw_series[-2]["ops_per_s"] + raw_series[-1]["ops_per_s"]) / 2
                r.update(
                    variant=label,
                    records_per_batch=size,
                    raw_fsync_ops_per_s=raw_rate,
                    ratio_to_raw_fsync=ratio(r["ops_per_s"], raw_rate),
                    ratio_to_raw_overwrite_fdatasync=ratio(r["ops_per_s"], raw_over["ops_per_s"]),
                )
                results.append(r)
                p(
                    f"   {size:>13,} {r['batch_bytes']:>11,.0f} {r['ops_per_s']:>10,.0f} {r['records_per_s']:>10,.0f} "
                    f"{r['mb_per_s']:>7.2f} {r['p50_ms']:>7.3f} {r['p99_ms']:>7.3f} {r['max_ms']:>7.2f} "
                    f"{raw_rate:>7,.0f} {r['ratio_to_raw_fsync']:>5.2f}x "
                    f"{r['ratio_to_raw_overwrite_fdatasync']:>5.2f}x "
                    f"{r['other_cpu_cores']:>6.2f} {r['failed']:>6,}" + (f" ({errors_text(r)})" if r["failed"] else "")
                )
                sys.stdout.flush()

        rates = [x["ops_per_s"] for x in raw_series]
        p(
            f"\n1'. Raw write + fsync over the whole run ({len(rates)} runs of {args.duration:g} s): "
            f"min {min(rates):,.0f}, "
            f"median {statistics.median(rates):,.0f}, max {max(rates):,.0f} ops/s; "
            f"p50 latency median {statistics.median(x['p50_ms'] for x in raw_series):.3f} ms"
        )
        sys.stdout.flush()

        p(f"\n3. Decode on one core: mixed log of {args.decode_records:,} records, {args.decode_batch} per batch")
        d = decode_bench(root, cluster, args.decode_records, args.decode_batch, args.decode_passes)
        total = d["records"]
        p(
            "   mix: "
            + ", ".join(f"{name} {n / total:.1%}" for name, n in d["mix"].items())
            + f"\n   {d['batches']:,} batches, {d['file_bytes'] / 1e6:.1f} MB on disk, "
            f"mean record value {d['mean_record_value_bytes']:.0f} bytes"
        )
        dec = d["decode"]
        passes = ", ".join(
            f"{x:,.0f} [others {o:.2f}]"
            for x, o in zip(dec["passes_records_per_s"], dec["passes_other_cpu_cores"], strict=True)
        )
        p(
            f"   decode (iter_batches + decode_batch)     {dec['records_per_s']:>10,.0f} records/s "
            f"(median of {len(dec['passes_records_per_s'])} passes: {passes})"
        )
        p(
            f"     per CPU-second of this thread          {dec['records_per_cpu_s']:>10,.0f} records/s "
            "(diagnostic, less disturbed by other processes; not what is checked)"
        )
        p("   for comparison, the layers below decode_batch alone:")
        p(f"     iter_batches only (framing + CRC)     {d['iter_batches_only']['records_per_s']:>10,.0f} records/s")
        framed = d["iter_batches_and_records"]["records_per_s"]
        p(f"     iter_batches + batch.records()        {framed:>10,.0f} records/s")
        ser = d["serialize"]
        p(
            f"   encode: serialize                       {ser['records_per_s']:>10,.0f} records/s "
            f"(median of {len(ser['passes_records_per_s'])} passes; {ser['records_per_cpu_s']:,.0f} per CPU-second)"
        )
        p(f"   encode: build_batch of serialized       {d['build_batch']['records_per_s']:>10,.0f} records/s")

        hundred = next(r for r in results if r["variant"] == "log append+fsync" and r["records_per_batch"] == 100)
        append_ratio = hundred["ratio_to_raw_fsync"]
        decode = dec["records_per_s"]
        # Any failed write, append or fsync (raw baselines included) fails every target.
        measured = {f"raw write+fsync run {i + 1}": x for i, x in enumerate(raw_series)}
        measured["raw overwrite+fdatasync"] = raw_over
        measured.update({f"{x['variant']} x{x['records_per_batch']}": x for x in results})
        failed, why = failures(measured)
        checks = [
            {
                "name": "100-record batches: log append+fsync vs raw 4 KiB write+fsync",
                "value": append_ratio,
                "target": TARGET_RATIO,
                "target_met": append_ratio >= TARGET_RATIO,
                "pass": append_ratio >= TARGET_RATIO and not failed,
            },
            {
                "name": "decode records/s, one core",
                "value": decode,
                "target": TARGET_DECODE,
                "target_met": decode >= TARGET_DECODE,
                "pass": decode >= TARGET_DECODE and not failed,
            },
        ]
        p(f"\nSummary ({load_average()})")
        p(
            f"   [{'PASS' if checks[0]['pass'] else 'FAIL'}] 100-record batches: log append+fsync = "
            f"{hundred['ops_per_s']:,.0f} batches/s = {append_ratio:.2f} x raw fsync "
            f"({hundred['raw_fsync_ops_per_s']:,.0f}/s, measured just before and after) (target >= {TARGET_RATIO})"
            + why
        )
        p(
            f"   [{'PASS' if checks[1]['pass'] else 'FAIL'}] decode = {decode:,.0f} records/s "
            f"(target >= {TARGET_DECODE:,})" + why
        )
        print_failures(measured)
        out.update(
            raw={"write_fsync_runs": raw_series, "overwrite_fdatasync": raw_over},
            log_append=results,
            decode=d,
            checks=checks,
        )
        out["config"]["load_average_end"] = os.getloadavg()
        if args.json:
            p(json.dumps(out))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
