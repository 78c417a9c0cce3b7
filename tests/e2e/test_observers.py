"""Brokers as Raft observers, end to end: three ``pykraft node`` voters and ``pykraft broker`` agents with
``--controller-quorum-voters`` and ``--metadata-dir``, all real processes on loopback (one cluster for the module).

The controllers keep no history (``metadata.max.retention.bytes=0``, 64 KiB segments, a snapshot every 256 KiB of
records): a broker that joins late finds the leader's log starting after offset 0 and must fetch its snapshot. The
brokers snapshot their own image under the same policy.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_helpers import BrokerProcess, run_pykraft

from controller.records import PartitionRecord, RegisterBrokerRecord, deserialize
from pykraft.client import AdminClient, NewTopic
from pykraft.replica.data_plane import describe_replicas
from pykraft.testing import Cluster, free_ports
from quorum.log.snapshots import SnapshotFile, SnapshotId

SNAPSHOT_BYTES = 256 * 1024
LOG_SETTINGS = [
    "metadata.max.retention.bytes=0",
    "metadata.log.segment.bytes=65536",
    f"metadata.log.max.record.bytes.between.snapshots={SNAPSHOT_BYTES}",
    "pykraft.snapshot.growth.ratio=0",  # Kafka's byte trigger alone: a broker snapshots after its install
    "pykraft.shutdown.snapshot.min.bytes=1",  # a clean shutdown always snapshots what was committed since
]
# DEBUG: the tests count the DescribeTopics each process answered (request lines, INFO only when they change state).
DEBUG = ["--log-level", "DEBUG"]
NODE_ARGS = [*(a for s in [*LOG_SETTINGS, "broker.session.timeout.ms=6000"] for a in ("--override", s)), *DEBUG]
LATE_TOPICS, LATE_PARTITIONS = 4, 5000  # 20,000 partitions before the late broker starts


@dataclass
class Env:
    root: Path
    cluster: Cluster
    brokers: dict[int, BrokerProcess]

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.cluster.nodes.values())

    def broker(self, broker_id: int, rack: str, port: int) -> BrokerProcess:
        b = BrokerProcess(
            broker_id,
            rack,
            self.bootstrap,
            self.root / f"broker-{broker_id}.log",
            port,
            voters=self.cluster.voters,
            metadata_dir=self.root / f"broker-{broker_id}" / "metadata",
            extra_args=[*(a for s in LOG_SETTINGS for a in ("--override", s)), *DEBUG],
        )
        self.brokers[broker_id] = b
        return b

    def logs(self) -> str:
        brokers = "\n".join(f"--- broker {b.broker_id}\n{b.log()}" for b in self.brokers.values())
        return f"{self.cluster.logs()}\n{brokers}"


def events(path: Path, name: str) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        if f'"{name}"' in line:
            event = json.loads(line)
            if event.get("event") == name:
                out.append(event)
    return out


def wait_event(path: Path, name: str, match: Callable[[dict], bool], timeout: float = 10) -> list[dict]:
    """The matching events once there is one (a process logs what it learned a moment after others see it)."""
    deadline = time.monotonic() + timeout
    while not (found := [e for e in events(path, name) if match(e)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


def end_offset(snapshot: str) -> int:
    """Of a snapshot id as logged: ``<end offset>-<epoch>``."""
    return int(snapshot.split("-")[0])


async def wait_unfenced(admin: AdminClient, broker_ids: set[int], env: Env, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    state: dict[int, bool] = {}
    while time.monotonic() < deadline:
        state = {b.broker_id: b.fenced for b in (await admin.describe_cluster(timeout_ms=5000)).brokers}
        if all(state.get(b) is False for b in broker_ids):
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"brokers {sorted(broker_ids)} not unfenced within {timeout} s: {state}\n{env.logs()}")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("observers")
    cluster = Cluster(root=root, size=3, extra_args=NODE_ARGS)
    e = Env(root, cluster, {})
    ports = free_ports(3)
    try:
        cluster.start()
        for broker_id, rack, port in ((101, "rack-1", ports[0]), (102, "rack-2", ports[1])):
            e.broker(broker_id, rack, port).start()
        asyncio.run(cluster.wait_for_leader(timeout=30))

        async def ready() -> None:
            async with AdminClient(e.bootstrap) as admin:
                await wait_unfenced(admin, {101, 102}, e)

        asyncio.run(ready())
        e.spare_port = ports[2]  # type: ignore[attr-defined]
        yield e
    finally:
        for b in e.brokers.values():
            b.kill()  # no controlled shutdown: moving 45,000 leaderships away takes a while and tests nothing here
        cluster.stop()
        for b in e.brokers.values():
            b.kill()
        for node in cluster.nodes.values():
            node.kill()


def quorum(env: Env) -> dict:
    leader, _ = asyncio.run(env.cluster.wait_for_leader(timeout=30))
    r = run_pykraft("quorum", "describe", "--bootstrap-server", env.cluster.nodes[leader].address, "--output", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_brokers_are_listed_as_observers_never_as_voters(env: Env) -> None:
    described = quorum(env)
    by_id = {v["id"]: v for v in described["voters"]}
    assert {i for i, v in by_id.items() if v["status"] != "Observer"} == {1, 2, 3}
    for broker_id in (101, 102):
        o = by_id[broker_id]
        assert o["status"] == "Observer" and o["lag"] >= 0 and o["logEndOffset"] > 0, described
        assert 0 <= o["lastFetchAgeMs"] < 5000, described


def describe_text(server: str, *extra: str) -> str:
    r = run_pykraft("topics", "--bootstrap-server", server, "--describe", *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_topics_describe_through_a_broker_reads_its_image(env: Env) -> None:
    broker = env.brokers[101].address
    # A write sent to a broker is refused there (NOT_CONTROLLER naming the leader); the client follows to it.
    r = run_pykraft(
        "topics", "--bootstrap-server", broker, "--create", "--topic", "orders", "--partitions", "6",
        "--replication-factor", "2", "--config", "retention.ms=86400000",
    )  # fmt: skip
    assert r.returncode == 0 and "Created topic orders." in r.stdout, r.stdout + r.stderr

    async def create() -> None:
        async with AdminClient(env.bootstrap) as admin:
            results = await admin.create_topics([NewTopic("payments", num_partitions=3, replication_factor=1)])
            results["payments"].raise_for_error()

    asyncio.run(create())
    via_controller = describe_text(env.bootstrap)
    assert "Topic: orders" in via_controller and "Topic: payments" in via_controller
    deadline = time.monotonic() + 10
    while (via_broker := describe_text(broker)) != via_controller and time.monotonic() < deadline:
        time.sleep(0.2)  # the image follows the log: a moment behind the controller
    assert via_broker == via_controller
    assert describe_text(broker, "--output", "json") == describe_text(env.bootstrap, "--output", "json")
    # The broker answered from its image; the active controller answered only this test's two DescribeTopics (the
    # others refuse: NOT_CONTROLLER). A broker polling it (as without an observer) would have asked every
    # heartbeat interval since the cluster started.
    served = [e for e in events(env.brokers[101].log_path, "request") if e["api"] == "DescribeTopics"]
    assert len(served) >= 2 and all(e["error_code"] == 0 for e in served)
    answered = [
        e
        for n in env.cluster.nodes.values()
        for e in events(n.log_path, "request")
        if e["api"] == "DescribeTopics" and e["error_code"] == 0
    ]
    assert len(answered) == 2, answered


def test_the_data_plane_reads_partitions_and_throttles_from_the_image(env: Env) -> None:
    """Broker 101 holds replicas of the topics its image shows, and a throttle set on broker 102 (the write sent
    through a broker, hence redirected) reaches 102's data plane through its image alone."""

    async def held() -> set[tuple[str, int]]:
        port = env.brokers[101].listener_port
        return {(r.topic, r.partition) for r in await describe_replicas(("127.0.0.1", port))}

    r = run_pykraft(
        "topics", "--bootstrap-server", env.bootstrap, "--create", "--topic", "replicated", "--partitions", "4",
        "--replication-factor", "2",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 10
    while {("replicated", i) for i in range(4)} - asyncio.run(held()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert {("replicated", i) for i in range(4)} <= asyncio.run(held())  # RF 2 over two brokers: all of them

    r = run_pykraft(
        "configs", "--bootstrap-server", env.brokers[101].address, "--entity-type", "brokers", "--entity-name", "102",
        "--alter", "--add-config", "follower.replication.throttled.rate=1048576",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    changed = wait_event(
        env.brokers[102].log_path, "replication_throttle_rate_changed", lambda e: e["config"].startswith("follower")
    )
    assert changed and changed[-1]["new"] != "unlimited", changed
    assert not events(env.brokers[101].log_path, "replication_throttle_rate_changed")  # another broker's config


@dataclass
class Late:
    broker: BrokerProcess
    created_s: float
    unfenced_after_s: float
    seen_fenced: bool  # the controllers showed it registered and fenced before they unfenced it
    names: list[str]


@pytest.fixture(scope="module")
def late(env: Env) -> Late:
    """20,000 partitions in four CreateTopics; then broker 103 starts on an empty metadata dir."""
    names = [f"bulk-{i}" for i in range(LATE_TOPICS)]

    async def run() -> Late:
        async with AdminClient(env.bootstrap, default_api_timeout_ms=120_000) as admin:
            t0 = time.monotonic()
            for name in names:
                results = await admin.create_topics(
                    [NewTopic(name, num_partitions=LATE_PARTITIONS, replication_factor=2)], timeout_ms=120_000
                )
                results[name].raise_for_error()
            created = time.monotonic() - t0
            b = env.broker(103, "rack-3", env.spare_port)  # type: ignore[attr-defined]
            started = time.monotonic()
            b.start()
            seen_fenced = False
            while time.monotonic() < started + 60:
                brokers = {x.broker_id: x for x in (await admin.describe_cluster(timeout_ms=5000)).brokers}
                if 103 in brokers and not brokers[103].fenced:
                    return Late(b, created, time.monotonic() - started, seen_fenced, names)
                seen_fenced = seen_fenced or 103 in brokers
                await asyncio.sleep(0.02)
            raise TimeoutError(f"broker 103 was not unfenced within 60 s\n{env.logs()}")

    return asyncio.run(run())


def test_a_late_broker_starts_from_the_leaders_snapshot(env: Env, late: Late) -> None:
    log_path = late.broker.log_path
    installs = events(log_path, "snapshot_installed")
    (opened,) = events(log_path, "metadata_observer_started")
    assert opened["log_end_offset"] == 0  # an empty metadata dir: all it has came through the leader
    assert installs, late.broker.log()
    # Usually one install. The leader may finish a newer snapshot (and clean its log below it) while the broker
    # fetches the older one: the broker's next fetch is then below the log start, and it installs the newer one
    # on top (seen once in CI: 15033-1, then 20035-1 a tenth of a second later). Each goes past what it had.
    previous_end = 0
    for installed in installs:
        end = end_offset(installed["snapshot"])
        assert previous_end <= installed["old_end"] < end == installed["new_end"], installs
        previous_end = end
    (caught_up,) = wait_event(log_path, "metadata_caught_up", lambda e: True)
    start = caught_up["log_start_offset"]
    if caught_up["snapshots_generated"]:
        # It may have written a snapshot of its own by then (this module's policy: 256 KiB of records after the
        # install) and, keeping no history, deleted its log below it. Seen once in CI: it installed 15032-1 (the
        # leader had no newer one yet), replayed the last 5,000 partitions, and its log started at 20033.
        assert previous_end <= start <= end_offset(caught_up["latest_snapshot"]), caught_up
    else:
        assert start == previous_end, caught_up
    assert caught_up["snapshots_installed"] == len(installs), caught_up


def test_a_late_broker_is_unfenced_only_once_caught_up(env: Env, late: Late) -> None:
    log_path = late.broker.log_path
    (registered,) = events(log_path, "broker_registered")
    (unfenced,) = wait_event(log_path, "broker_fencing_changed", lambda e: e["fenced"] is False)
    epoch = registered["broker_epoch"]  # the offset of its registration, after every partition record
    assert unfenced["broker_epoch"] == epoch and unfenced["metadata_offset"] >= epoch, (registered, unfenced)
    if registered["metadata_offset"] < epoch:  # it registered before catching up (a snapshot takes a while)...
        assert late.seen_fenced  # ...and the controllers kept it fenced meanwhile
    caught_up = wait_event(log_path, "metadata_caught_up", lambda e: True)
    assert caught_up, late.broker.log()

    async def image() -> dict[str, int]:
        async with AdminClient(late.broker.address) as admin:  # the broker's own image answers
            return {t.name: len(t.partitions) for t in await admin.describe_topics(late.names)}

    assert asyncio.run(image()) == dict.fromkeys(late.names, LATE_PARTITIONS)
    print(
        f"\n{LATE_TOPICS * LATE_PARTITIONS} partitions created in {late.created_s:.1f} s; the new broker caught up "
        f"in {caught_up[0]['seconds']:.2f} s (from {caught_up[0]['latest_snapshot']}) and was unfenced "
        f"{late.unfenced_after_s:.2f} s after its process started"
    )


def test_a_restarted_broker_loads_its_own_snapshot(env: Env, late: Late) -> None:
    """More records after the install make broker 103 write a snapshot of its own. Stopped cleanly, it snapshots
    again once its image holds its controlled shutdown; restarted, it loads that one and replays only what
    follows."""
    log_path = late.broker.log_path

    async def more() -> None:
        async with AdminClient(env.bootstrap, default_api_timeout_ms=60_000) as admin:
            results = await admin.create_topics([NewTopic("more", num_partitions=5000, replication_factor=2)])
            results["more"].raise_for_error()

    asyncio.run(more())
    deadline = time.monotonic() + 30
    while not (frozen := events(log_path, "snapshot_frozen")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert frozen, f"broker 103 wrote no snapshot\n{late.broker.log()}"
    own = frozen[-1]["snapshot"]
    stop_at = len(log_path.read_text().splitlines())
    assert late.broker.terminate(timeout=30) == 0
    lines = log_path.read_text().splitlines()
    restart_at = len(lines)
    stopping = [json.loads(line) for line in lines[stop_at:] if line.startswith("{")]
    (last,) = [e for e in stopping if e.get("event") == "shutdown_snapshot"]
    # It holds the end of the broker's own controlled shutdown: fenced, shutting down, in no ISR.
    assert late.broker.metadata_dir is not None
    end, epoch = map(int, last["snapshot_id"].split("-"))
    path = late.broker.metadata_dir / "__cluster_metadata-0" / SnapshotId(end, epoch).file_name
    with SnapshotFile.open(path) as snapshot:
        records = [deserialize(v).message for batch in snapshot.data_batches() for v in batch.values()]
    (me,) = [r for r in records if isinstance(r, RegisterBrokerRecord) and r.broker_id == 103]
    assert me.fenced and me.in_controlled_shutdown, me
    partitions = [r for r in records if isinstance(r, PartitionRecord)]
    assert len(partitions) >= LATE_TOPICS * LATE_PARTITIONS + 5000
    assert not [r for r in partitions if 103 in r.isr or r.leader == 103]
    late.broker.start()

    async def wait() -> None:
        async with AdminClient(env.bootstrap) as admin:
            await wait_unfenced(admin, {103}, env, timeout=60)

    asyncio.run(wait())
    lines = log_path.read_text().splitlines()[restart_at:]
    after = [json.loads(line) for line in lines if line.startswith("{")]
    delivered = [e for e in after if e.get("event") == "snapshot_delivered"]
    assert delivered and end_offset(delivered[0]["snapshot"]) >= end_offset(own), (own, delivered)
    assert not [e for e in after if e.get("event") == "snapshot_installed"]  # nothing fetched from the leader
    (started,) = [e for e in after if e.get("event") == "metadata_observer_started"]
    assert started["loaded_offset"] == end_offset(last["snapshot_id"]) - 1  # the shutdown's snapshot


def test_a_broker_id_that_is_a_voter_id_is_refused(tmp_path: Path) -> None:
    voters = "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"
    base = ["broker", "--bootstrap-server", "127.0.0.1:1", "--controller-quorum-voters", voters]
    r = run_pykraft(*base, "--broker-id", "2", "--metadata-dir", str(tmp_path / "m"))
    assert r.returncode == 2 and "--broker-id 2 is a controller's node id" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "m").exists()
    r = run_pykraft(*base, "--broker-id", "101")
    assert r.returncode == 2 and "needs --metadata-dir" in r.stderr, r.stderr
