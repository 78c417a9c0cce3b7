"""Snapshots, retention and FetchSnapshot on real processes: three voters with tiny thresholds (a snapshot every
~32 KB of records, retention 0, 16 KB segments), so every step — writing a snapshot, renaming it, deleting segments
and snapshots, installing one fetched from the leader — happens many times a second, and kill -9 lands inside them.

Acceptance: no acknowledged topic is lost; a node whose data directory was deleted rejoins through FetchSnapshot;
a restarted node loads its snapshot; ``pykraft snapshot create`` and ``quorum describe`` show the snapshots."""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from e2e_helpers import run_pykraft

from pykraft.client import AdminClient, AdminError, NewTopic
from pykraft.testing import Cluster
from quorum.log.log import METADATA_PARTITION_DIR
from quorum.log.message import Uuid
from quorum.log.snapshots import SnapshotFile, list_snapshots

pytestmark = pytest.mark.asyncio(loop_scope="module")

BROKERS = (11, 12, 13)
SMALL = [
    "--override=metadata.log.segment.bytes=16384",
    "--override=metadata.log.max.record.bytes.between.snapshots=32768",
    "--override=metadata.max.retention.bytes=0",
    "--override=broker.session.timeout.ms=30000",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(root=tmp_path_factory.mktemp("snapshots"), size=3, extra_args=SMALL)
    c.start()
    try:
        yield c
    finally:
        c.stop()
        for node in c.nodes.values():
            node.kill()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def admin(cluster: Cluster) -> AsyncIterator[AdminClient]:
    """A client with three registered brokers kept unfenced by a heartbeat task (no broker processes needed)."""
    await cluster.wait_for_leader(timeout=60)
    async with AdminClient(cluster_bootstrap(cluster), request_timeout_ms=5000) as client:
        epochs = {
            b: await client.register_broker(b, str(Uuid.random()), None, [("PLAINTEXT", "127.0.0.1", 1)])
            for b in BROKERS
        }

        async def heartbeats() -> None:
            while True:
                for b, e in epochs.items():
                    try:
                        await client.heartbeat(b, e, 1 << 40)
                    except AdminError:
                        pass  # mid-failover: the next round goes to the new leader
                await asyncio.sleep(0.5)

        task = asyncio.create_task(heartbeats())
        try:
            yield client
        finally:
            task.cancel()


def cluster_bootstrap(cluster: Cluster) -> str:
    return ",".join(n.address for n in cluster.nodes.values())


def log_of(cluster: Cluster, node_id: int) -> list[dict[str, object]]:
    out = []
    for line in cluster.nodes[node_id].log_path.read_text().splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def events(cluster: Cluster, node_id: int, name: str) -> list[dict[str, object]]:
    return [e for e in log_of(cluster, node_id) if e.get("event") == name]


async def create_until(admin: AdminClient, prefix: str, stop: asyncio.Event, acked: list[str]) -> None:
    """One request at a time, 5 topics x 3 partitions; a topic counts once its request was answered without error."""
    n = 0
    while not stop.is_set():
        names = [f"{prefix}-{n}-{i}" for i in range(5)]
        n += 1
        try:
            results = await admin.create_topics([NewTopic(name, 3, 3) for name in names], timeout_ms=5000)
        except (AdminError, TimeoutError):
            await asyncio.sleep(0.05)
            continue
        acked += [r.name for r in results.values() if r.error_code == 0]


async def all_topics(admin: AdminClient) -> set[str]:
    deadline = time.monotonic() + 30
    while True:
        try:
            return set(await admin.list_topics(timeout_ms=5000))
        except AdminError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def wait_caught_up(cluster: Cluster, timeout: float = 30.0) -> int:
    """Every voter's log end reaches the leader's high watermark; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        leader, _ = await cluster.wait_for_leader(timeout)
        view = await cluster.describe(leader)
        views = await asyncio.gather(*(cluster.describe(n) for n in cluster.nodes))
        if view and all(v is not None and v.log_end_offset >= view.high_watermark for v in views):
            return view.high_watermark
        await asyncio.sleep(0.1)
    raise TimeoutError(f"voters not caught up within {timeout} s\n{cluster.logs()}")


async def test_kill_9_during_snapshots_and_retention_loses_no_acknowledged_topic(
    cluster: Cluster, admin: AdminClient
) -> None:
    rng = random.Random(14)
    stop = asyncio.Event()
    acked: list[str] = []
    writer = asyncio.create_task(create_until(admin, "chaos", stop, acked))
    kills = 0
    try:
        ends = time.monotonic() + 20
        while time.monotonic() < ends:
            await asyncio.sleep(rng.uniform(0.4, 1.2))
            victim = cluster.nodes[rng.choice(sorted(cluster.nodes))]
            victim.kill()
            kills += 1
            await asyncio.sleep(rng.uniform(0.05, 0.6))
            victim.start()
    finally:
        stop.set()
        await writer
    await wait_caught_up(cluster, timeout=60)
    assert len(acked) > 50, f"too few topics created to mean anything: {len(acked)}\n{cluster.logs()}"
    missing = set(acked) - await all_topics(admin)
    assert not missing, f"{len(missing)} acknowledged topics lost after {kills} kills: {sorted(missing)[:10]}"
    for node_id, node in cluster.nodes.items():
        assert events(cluster, node_id, "snapshot_frozen"), f"node {node_id} never froze a snapshot"
        # What is on disk is valid: every snapshot whole, the log reaching back to the newest one.
        directory = node.data_dir / METADATA_PARTITION_DIR
        ids = list_snapshots(directory)
        assert ids, f"node {node_id} has no snapshot"
        with SnapshotFile.open(directory / ids[-1].file_name) as f:
            f.validate()
        assert not list(directory.glob("*.part")) or node.alive
    deleted = sum(len(events(cluster, n, "segment_deleted")) for n in cluster.nodes)
    loaded = sum(len(events(cluster, n, "snapshot_delivered")) for n in cluster.nodes)
    assert deleted > 0, "retention never deleted a segment"
    assert loaded > 0, "no restarted node loaded a snapshot"


async def test_a_wiped_node_rejoins_through_fetch_snapshot(cluster: Cluster, admin: AdminClient) -> None:
    stop = asyncio.Event()
    acked: list[str] = []
    writer = asyncio.create_task(create_until(admin, "before-wipe", stop, acked))
    await asyncio.sleep(2)
    stop.set()
    await writer
    leader, _ = await cluster.wait_for_leader()
    follower = next(n for n in sorted(cluster.nodes) if n != leader)
    node = cluster.nodes[follower]
    node.kill()
    shutil.rmtree(node.data_dir)
    # More records while it is gone, so the leader snapshots and deletes what the wiped node would need.
    stop = asyncio.Event()
    writer = asyncio.create_task(create_until(admin, "during-wipe", stop, acked))
    await asyncio.sleep(2)
    view = await cluster.describe(leader)
    assert view is not None and view.log_start_offset > 0, "the leader's log still starts at 0: nothing to test"
    node.start()
    await asyncio.sleep(1)
    stop.set()
    await writer
    await wait_caught_up(cluster, timeout=60)
    installed = events(cluster, follower, "snapshot_installed")
    assert installed, f"node {follower} did not install a snapshot\n{cluster.logs()}"
    assert events(cluster, follower, "snapshot_delivered")
    assert set(acked) <= await all_topics(admin)


async def test_snapshot_create_and_quorum_describe(cluster: Cluster, admin: AdminClient) -> None:
    bootstrap = cluster_bootstrap(cluster)
    await admin.create_topics([NewTopic("after-all", 1, 3)])
    out = run_pykraft("snapshot", "create", "--bootstrap-server", bootstrap)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 3 and all(" snapshot " in line and ".checkpoint" in line for line in lines), out.stdout
    one = cluster.nodes[1].address  # quorum describe takes one server (and asks the leader it names)
    # Retention runs after each snapshot, and deletes segments off the loop: the log start moves soon after.
    deadline = time.monotonic() + 15
    while True:
        described = run_pykraft("quorum", "describe", "--bootstrap-server", one, "--output", "json")
        d = json.loads(described.stdout)
        if d["logStartOffset"] > 0 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert d["logStartOffset"] > 0, d
    snapshot = d["latestSnapshot"]
    assert snapshot is not None and snapshot["endOffset"] >= d["logStartOffset"] and snapshot["bytes"] > 0
    text = run_pykraft("quorum", "describe", "--bootstrap-server", one).stdout
    assert "LogStartOffset:" in text and "LatestSnapshot: " in text
    # A node that is not reachable is reported, and the exit code says so.
    dead = run_pykraft("snapshot", "create", "--bootstrap-server", "127.0.0.1:1", "--timeout-ms", "1000")
    assert dead.returncode == 1 and "cannot reach" in dead.stderr
