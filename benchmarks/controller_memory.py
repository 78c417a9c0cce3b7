"""Controller memory per partition, in process: what a controller's state costs, without Raft, gRPC or a log cache.

    python benchmarks/controller_memory.py [--partitions 200000] [--topics-per-request 10] [--fence 0]
                                           [--json] [--trace]

Three phases, each in a fresh process so one's heap does not flatter another's:

- active: a QuorumController leading a fake Raft creates the topics (100 partitions each, RF 3, 6 unfenced brokers),
  ``--topics-per-request`` topics per CreateTopics, each batch committed on the next turn of the loop (the records
  are replayed when written, then committed). ``--fence N`` then fences and unfences N brokers in turn (a
  PartitionChangeRecord for each partition they were in). The batches go to a file, not to memory; at the end the
  committed state is written as a snapshot file, as a controller's Snapshotter writes it.
- standby: a fresh controller replays that log through ``handle_commit``, as a standby (or a broker's image) does.
- snapshot: a fresh controller loads the snapshot (``handle_load_snapshot``).
- broker: a broker's image loads the snapshot, then its data plane's replicas of broker 0 are built from the image
  (the RSS growth of that alone, per partition of the cluster), then the snapshot is installed again and the
  replicas read again, as a broker behind the leader's log start does (the RSS it leaves afterwards).

Each prints its resident memory growth (RSS after a full collection, minus RSS before the first topic) per
partition; the objects the garbage collector tracks per partition (frozen ones included); with ``--trace``,
tracemalloc's count of the bytes Python allocated and the top allocation sites (slow, and it inflates RSS). Rates
are per second of wall time. The collector runs as in a node (pykraft.gc_pauses installed: survivors of full
collections frozen); the full collections and the longest pause are printed (for the snapshot, the pauses after
the load, and the longest within it apart).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controller.cluster_control import Endpoint, HeartbeatRequest, RegisterBrokerRequest  # noqa: E402
from controller.quorum_controller import ControllerSettings, QuorumController  # noqa: E402
from controller.records import Uuid  # noqa: E402
from controller.replication_control import NewTopic  # noqa: E402
from controller.snapshot import capture  # noqa: E402
from pykraft import gc_pauses  # noqa: E402
from quorum.log.batch import RecordBatch, build_batch  # noqa: E402
from quorum.log.snapshots import SnapshotFile, SnapshotFileWriter, SnapshotId  # noqa: E402
from quorum.raft.client import CommittedBatch, LeaderAndEpoch, RaftListener  # noqa: E402
from quorum.raft.runtime import FileSnapshotReader  # noqa: E402

BROKERS = 6
PARTITIONS_PER_TOPIC = 100
REPLICATION_FACTOR = 3
EPOCH = 1
_LEN = struct.Struct(">I")


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def tracked() -> int:
    """Objects the collector tracks, frozen ones included (what a collection without the freezing would walk)."""
    return len(gc.get_objects()) + gc.get_freeze_count()


class Heap:
    """RSS (and, traced, Python's allocated bytes) before and after, each after a full collection."""

    def __init__(self, trace: bool) -> None:
        self.trace = trace
        if trace:
            import tracemalloc

            tracemalloc.start(1)
        self.rss0, self.traced0 = self._sample()
        self.tracked0 = tracked()

    def _sample(self) -> tuple[int, int]:
        gc.collect()
        if self.trace:
            import tracemalloc

            return rss(), tracemalloc.get_traced_memory()[0]
        return rss(), 0

    def growth(self, partitions: int, result: dict[str, Any]) -> None:
        result["gc_tracked_per_partition"] = (tracked() - self.tracked0) / partitions  # before the collection
        rss1, traced1 = self._sample()
        result["rss_bytes_per_partition"] = (rss1 - self.rss0) / partitions
        if self.trace:
            import tracemalloc

            result["traced_bytes_per_partition"] = (traced1 - self.traced0) / partitions
            snapshot = tracemalloc.take_snapshot()
            result["top_sites"] = [
                f"{s.size / partitions:8.1f} B/partition  {s.count:>9,} blocks  {s.traceback[0]}"
                for s in snapshot.statistics("lineno")[:12]
            ]


class BenchRaft:
    """A RaftClient for one node: appended batches are written to a file and committed on the next loop turn."""

    def __init__(self, node_id: int, log_file: Any = None) -> None:
        self.node_id = node_id
        self.log_file = log_file
        self.leader = LeaderAndEpoch(-1, 0)
        self.listeners: list[RaftListener] = []
        self.end = 0
        self.committed = -1
        self.last_batch: tuple[int, int] | None = None  # (end offset, epoch) of the last committed batch

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self.leader

    @property
    def high_watermark(self) -> int:
        return self.committed + 1

    @property
    def log_end_offset(self) -> int:
        return self.end

    def next_offset(self) -> int:
        return self.end

    def append(self, epoch: int, records: Sequence[bytes]) -> int:
        return self.append_atomic(epoch, records)

    def append_atomic(self, epoch: int, records: Sequence[bytes]) -> int:
        raw = build_batch([(None, r) for r in records], base_offset=self.end, epoch=epoch)
        self.end += len(records)
        if self.log_file is not None:
            self.log_file.write(_LEN.pack(len(raw)) + raw)
        asyncio.get_running_loop().call_soon(self._commit, raw)
        return self.end - 1

    def _commit(self, raw: bytes) -> None:
        batch = CommittedBatch(RecordBatch(raw))
        self.committed = batch.last_offset
        self.last_batch = (batch.last_offset + 1, batch.epoch)
        for listener in self.listeners:
            listener.handle_commit(batch)

    def register(self, listener: RaftListener) -> None:
        self.listeners.append(listener)

    def resign(self, epoch: int) -> None:
        pass

    def latest_snapshot_id(self) -> SnapshotId | None:
        return None

    def create_snapshot(self, snapshot_id: SnapshotId, last_contained_log_timestamp: int) -> None:
        return None  # the benchmark writes its snapshot itself, once, at the end


def settings() -> ControllerSettings:
    # No periodic NoOps, fence checks or snapshots: only the topics' records.
    return ControllerSettings(
        max_idle_interval_ms=0,
        fence_check_interval_ms=10**9,
        auto_leader_rebalance_enable=False,
        snapshot_max_new_record_bytes=1 << 62,
        snapshot_max_interval_ms=0,
    )


def read_log(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    pos = 0
    while pos < len(data):
        (n,) = _LEN.unpack_from(data, pos)
        yield data[pos + 4 : pos + 4 + n]
        pos += 4 + n


def gc_figures(pauses: gc_pauses.GcPauses, result: dict[str, Any]) -> None:
    # Taken before the measurement's own full collection: the pauses the work caused.
    result["full_collections"] = pauses.pauses[2]
    result["longest_gc_pause_ms"] = round(pauses.longest * 1000, 1)


async def run_active(work: Path, partitions: int, per_request: int, fence: int, trace: bool) -> dict[str, Any]:
    pauses = gc_pauses.install()
    with open(work / "log.bin", "wb") as log_file:
        raft = BenchRaft(1, log_file)
        ctl = QuorumController(1, raft, settings())
        ctl.start()
        raft.leader = LeaderAndEpoch(1, EPOCH)
        ctl.handle_leader_change(raft.leader)
        for b in range(BROKERS):
            endpoints = (Endpoint("PLAINTEXT", "localhost", 9000 + b),)
            epoch = await ctl.register_broker(RegisterBrokerRequest(b, Uuid.random(), None, endpoints))
            await ctl.broker_heartbeat(HeartbeatRequest(b, epoch, ctl.committed_offset))
        await asyncio.sleep(0)
        heap = Heap(trace)
        topics = partitions // PARTITIONS_PER_TOPIC
        started = time.perf_counter()
        for first in range(0, topics, per_request):
            request = [
                NewTopic(f"topic-{i}", PARTITIONS_PER_TOPIC, REPLICATION_FACTOR)
                for i in range(first, min(first + per_request, topics))
            ]
            results = await ctl.create_topics(request)
            assert not any(r.error.failed for r in results), results[0]
        seconds = time.perf_counter() - started
        created = topics * PARTITIONS_PER_TOPIC
        result: dict[str, Any] = {"partitions": created, "partitions_per_s": created / seconds}
        for b in range(fence):
            # Fenced (off every ISR, leaderships moved: a PartitionChangeRecord each, in one request), then back.
            epoch = ctl.cluster.brokers[b].epoch
            await ctl.broker_heartbeat(HeartbeatRequest(b, epoch, ctl.committed_offset, want_fence=True))
            await ctl.broker_heartbeat(HeartbeatRequest(b, epoch, ctl.committed_offset))
        await asyncio.sleep(0)
        gc_figures(pauses, result)
        heap.growth(created, result)
    # The snapshot the third phase loads, written as a controller's Snapshotter writes one.
    assert raft.last_batch is not None
    snapshot_id = SnapshotId(*raft.last_batch)
    writer = SnapshotFileWriter(work, snapshot_id, 0)
    records = capture(ctl).records()
    from controller.records import serialize

    while chunk := [serialize(r) for _, r in zip(range(5000), records, strict=False)]:
        writer.append(chunk)
    writer.freeze()
    result["records_in_log"] = raft.end
    await ctl.close()
    return result


def run_standby(work: Path, trace: bool) -> dict[str, Any]:
    pauses = gc_pauses.install()
    batches = list(read_log(work / "log.bin"))  # in memory before the baseline: only replay is measured
    raft = BenchRaft(2)
    ctl = QuorumController(2, raft, settings())
    ctl.handle_leader_change(LeaderAndEpoch(1, EPOCH))
    heap = Heap(trace)
    started = time.perf_counter()
    records = 0
    for raw in batches:
        batch = CommittedBatch(RecordBatch(raw))
        ctl.handle_commit(batch)
        records += batch.last_offset - batch.base_offset + 1
    seconds = time.perf_counter() - started
    del batch  # its parsed records: not state
    created = len(ctl.replication.partitions.committed())
    result: dict[str, Any] = {"partitions": created, "records": records, "records_per_s": records / seconds}
    gc_figures(pauses, result)
    heap.growth(created, result)
    return result


def run_snapshot(work: Path, trace: bool) -> dict[str, Any]:
    pauses = gc_pauses.install()
    path = next(work.glob("*.checkpoint"))
    ctl = QuorumController(3, BenchRaft(3), settings())
    heap = Heap(trace)
    file = SnapshotFile.open(path)
    records = file.validate().data_records  # before the clock: what is timed is the load
    started = time.perf_counter()
    ctl.handle_load_snapshot(FileSnapshotReader(file))
    seconds = time.perf_counter() - started
    file.close()
    load_pause_ms = round(pauses.longest * 1000, 1)
    pauses.longest = 0.0
    scratch = [[i] for i in range(10_000)]  # a node's next work: its allocations start the next collections
    del scratch
    created = len(ctl.replication.partitions.committed())
    result: dict[str, Any] = {"partitions": created, "records": records, "records_per_s": records / seconds}
    result["longest_gc_pause_in_load_ms"] = load_pause_ms
    gc_figures(pauses, result)  # after the load
    heap.growth(created, result)
    return result


async def run_broker(work: Path, trace: bool) -> dict[str, Any]:
    """A broker's data plane beside its image: the image loads the snapshot (as a new broker's does), then the
    replicas of broker 0 are built from it (pykraft.replica.image_metadata.apply_image); then the snapshot is loaded
    again, as a broker that fell behind the leader's log start installs one, and the replicas are read again."""
    from pykraft.replica.image_metadata import ImageMetadata, apply_image
    from pykraft.replica.manager import ReplicaManager
    from pykraft.replica.partition import ReplicaConfig

    gc_pauses.install()
    path = next(work.glob("*.checkpoint"))
    image = QuorumController(4, BenchRaft(4), settings())
    with SnapshotFile.open(path) as file:
        image.handle_load_snapshot(FileSnapshotReader(file))
    created = len(image.replication.partitions.committed())
    epoch = image.cluster.brokers.committed()[0].epoch
    heap = Heap(trace)
    manager = ReplicaManager(0, ReplicaConfig(), clock=lambda: 0, broker_epoch=lambda: epoch)
    metadata = ImageMetadata(image, 0)
    started = time.perf_counter()
    await apply_image(metadata, manager)
    result: dict[str, Any] = {"partitions": created, "replicas": len(manager.partitions)}
    result["replicas_per_s"] = len(manager.partitions) / (time.perf_counter() - started)
    heap.growth(created, result)
    before = rss()
    started = time.perf_counter()
    with SnapshotFile.open(path) as file:
        image.handle_load_snapshot(FileSnapshotReader(file))
    await apply_image(metadata, manager)
    result["install_seconds"] = time.perf_counter() - started
    gc.collect()
    result["install_rss_bytes_per_partition"] = (rss() - before) / created
    return result


def phase(args: argparse.Namespace) -> None:
    work = Path(args.dir)
    if args.phase == "active":
        result = asyncio.run(run_active(work, args.partitions, args.topics_per_request, args.fence, args.trace))
    elif args.phase == "standby":
        result = run_standby(work, args.trace)
    elif args.phase == "broker":
        result = asyncio.run(run_broker(work, args.trace))
    else:
        result = run_snapshot(work, args.trace)
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--topics-per-request", type=int, default=10)
    parser.add_argument(
        "--fence", type=int, default=0, help="after creation, fence and unfence this many brokers in turn (churn)"
    )
    parser.add_argument("--trace", action="store_true", help="tracemalloc: Python's bytes and the top sites (slow)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--phase", choices=("active", "standby", "snapshot", "broker"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        phase(args)
        return
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="controller-memory-") as work:
        for name in ("active", "standby", "snapshot", "broker"):
            command = [sys.executable, __file__, "--phase", name, "--dir", work, "--partitions", str(args.partitions)]
            command += ["--topics-per-request", str(args.topics_per_request), "--fence", str(args.fence)]
            command += ["--trace"] if args.trace else []
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            results[name] = json.loads(out.strip().splitlines()[-1])
    if args.json:
        print(json.dumps(results, indent=2))
        return
    broker = results.pop("broker")
    for name, r in results.items():
        rate = (
            f"{r['partitions_per_s']:,.0f} partitions/s created"
            if name == "active"
            else f"{r['records_per_s']:,.0f} records/s replayed"
        )
        traced = f", {r['traced_bytes_per_partition']:.0f} B traced" if "traced_bytes_per_partition" in r else ""
        print(
            f"{name:8} {r['partitions']:>9,} partitions: {r['rss_bytes_per_partition']:6.0f} B/partition RSS{traced}; "
            f"{rate}; {r['gc_tracked_per_partition']:.1f} GC-tracked objects/partition, {r['full_collections']} full "
            f"GCs, longest pause {r['longest_gc_pause_ms']} ms"
            + (f" (in the load: {r['longest_gc_pause_in_load_ms']} ms)" if name == "snapshot" else "")
        )
        for line in r.get("top_sites", ()):
            print("    " + line)
    print(
        f"broker   {broker['replicas']:>9,} replicas of {broker['partitions']:,} partitions beside its image: "
        f"{broker['rss_bytes_per_partition']:6.0f} B/partition RSS; {broker['replicas_per_s']:,.0f} replicas/s built; "
        f"a snapshot installed and read again: {broker['install_seconds']:.2f} s, RSS "
        f"{broker['install_rss_bytes_per_partition']:+.0f} B/partition afterwards"
    )
    for line in broker.get("top_sites", ()):
        print("    " + line)


if __name__ == "__main__":
    main()
