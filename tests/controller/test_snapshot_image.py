"""Snapshots of the controller's committed image: written in Kafka's order, loaded back into exactly the state the
log gave (derived indexes, epochs, configs, features included), taken by the byte and time triggers without holding
up commits, failures retried, forced by an operator, refused on the active controller."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import gc
import random
import sys
import time
import tracemalloc
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ctl_helpers import (
    FakeRaft,
    FileSnapshotWriter,
    MemorySnapshot,
    MemorySnapshotReader,
    SharedLog,
    active_cluster,
    quiet_settings,
    register,
    settle,
    start_controller,
)
from structlog.testing import capture_logs

from controller import snapshot as snapshot_module
from controller.authorizer import AclBindingFilter, PatternType, ResourceType, StandardAcl
from controller.cluster_control import HeartbeatRequest
from controller.configs import BROKER_RESOURCE, TOPIC_RESOURCE
from controller.quorum_controller import ControllerSettings, QuorumController, ReplayError
from controller.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    TopicRecord,
    ZkMigrationStateRecord,
    deserialize,
    serialize,
)
from controller.replication_control import NewTopic
from controller.requests import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterPartitionData,
    AlterPartitionTopic,
    DeleteTopicState,
    ElectionType,
    NewPartitions,
    ReassignablePartition,
    ReassignableTopic,
)
from controller.snapshot import _partition_record, capture
from controller.timeline import TimelineDict
from quorum import memory
from quorum.errors import KafkaError
from quorum.log import snapshot_fork
from quorum.log.message import ApiMessage, Uuid
from quorum.log.snapshots import SnapshotFile, SnapshotId
from quorum.raft.client import CommittedBatch
from quorum.raft.runtime import FileSnapshotReader

# -- helpers ----------------------------------------------------------------------------------------------------

# Every TimelineDict of the controller, by where it lives: image_state() must compare each one (a guard test below
# fails when a new piece of state appears that this list, and so the snapshot, does not know about).
STATE_MAPS = {
    "controller._features",
    "cluster.brokers",
    "replication.topics",
    "replication.topics_by_name",
    "replication.partitions",
    "replication._colliding",
    "replication.configs",
    "configs.configs",
    "reassignments.moving",
    "acls.acls",
    "acls.ids_by_acl",
    "quotas.quotas",
}


def image_state(ctl: QuorumController) -> dict[str, Any]:
    """Every committed map's contents. A topic's created_offset is left out: it is the offset of its TopicRecord,
    which a snapshot cannot carry (loaded topics say -1)."""
    r = ctl.replication
    return {
        "committed_offset": ctl.committed_offset,
        "features": dict(ctl._features.committed()),
        "brokers": dict(ctl.cluster.brokers.committed()),
        "topics": {tid: t._replace(created_offset=-1) for tid, t in r.topics.committed().items()},
        "topics_by_name": dict(r.topics_by_name.committed()),
        "partitions": dict(r.partitions.committed()),
        "colliding": dict(r._colliding.committed()),
        "moving": dict(r.reassignments.moving.committed()),
        "configs": dict(ctl.configs.configs.committed()),
        "acls": dict(ctl.acls.acls.committed()),
        "ids_by_acl": dict(ctl.acls.ids_by_acl.committed()),
        "quotas": dict(ctl.quotas.quotas.committed()),
        "authorizer": sorted(ctl.authorizer),  # fed from the committed ACLs: the same wherever they came from
    }


def snapshot_of(ctl: QuorumController, epoch: int = 1) -> MemorySnapshot:
    """The controller's committed image, serialized as a snapshot would hold it."""
    image = capture(ctl)
    records = tuple(serialize(r) for r in image.records())
    return MemorySnapshot(SnapshotId(image.committed_offset + 1, epoch), 0, records)


def loaded(snapshot: MemorySnapshot, node_id: int = 9, batch_records: int = 1000) -> QuorumController:
    """A fresh controller (not on any log) that loaded ``snapshot``."""
    ctl = QuorumController(node_id, FakeRaft(node_id, SharedLog()), quiet_settings())
    ctl.handle_load_snapshot(MemorySnapshotReader(snapshot, batch_records))
    return ctl


def replayed(log: SharedLog, end_offset: int) -> QuorumController:
    """A fresh standby that replayed the log's committed batches below ``end_offset``."""
    ctl = QuorumController(8, FakeRaft(8, SharedLog()), quiet_settings())
    for batch in log.batches[: log.delivered]:
        if batch.last_offset < end_offset:
            ctl.handle_commit(batch)
    return ctl


def catch_up(ctl: QuorumController, log: SharedLog) -> None:
    """Deliver the committed batches after the controller's state."""
    for batch in log.batches[: log.delivered]:
        if batch.base_offset > ctl.committed_offset:
            ctl.handle_commit(batch)


def check_order(records: list[ApiMessage]) -> None:
    """Kafka's MetadataImage.write order: metadata.version first, features, brokers, each topic before its
    partitions (contiguous), configs, client quotas, then ACLs last."""
    sections = {
        FeatureLevelRecord: 0,
        ZkMigrationStateRecord: 1,
        RegisterBrokerRecord: 2,
        TopicRecord: 3,
        PartitionRecord: 3,
        ConfigRecord: 4,
        ClientQuotaRecord: 5,
        AccessControlEntryRecord: 6,
    }
    assert isinstance(records[0], FeatureLevelRecord) and records[0].name == "metadata.version"
    order = [sections[type(r)] for r in records]
    assert order == sorted(order), order
    topic = None
    seen: set[Uuid] = set()
    for r in records:
        if isinstance(r, TopicRecord):
            assert r.topic_id not in seen
            seen.add(r.topic_id)
            topic = r.topic_id
        elif isinstance(r, PartitionRecord):
            assert r.topic_id == topic, "a partition away from its topic"


def make_batches(records: list[ApiMessage], size: int) -> list[CommittedBatch]:
    values = [serialize(r) for r in records]
    return [CommittedBatch.of(values[i : i + size], base_offset=i) for i in range(0, len(values), size)]


# -- a random walk through the controller's API ---------------------------------------------------------------------

NAMES = ["orders", "pay.in", "pay_in", "a.b", "logs", "x_y", "x.y", "metrics"]
TOPIC_CONFIGS = [("retention.ms", "3600000"), ("cleanup.policy", "compact"), ("unclean.leader.election.enable", "true")]
BROKER_CONFIGS = [("log.retention.ms", "7200000"), ("follower.replication.throttled.rate", "1000")]


class Walk:
    """Seeded random requests to an active controller (node 1) whose answers arrive once committed."""

    def __init__(self, ctl: QuorumController, rng: random.Random) -> None:
        self.ctl = ctl
        self.rng = rng
        self.epochs: dict[int, int] = {}

    async def start(self, brokers: int) -> None:
        for broker in range(brokers):
            self.epochs[broker] = await register(self.ctl, broker, f"rack-{broker % 3}")
            await self.ctl.broker_heartbeat(HeartbeatRequest(broker, self.epochs[broker], self.ctl.committed_offset))

    async def step(self) -> None:
        ops = [
            (self.register, 1),
            (self.heartbeat, 3),
            (self.create, 4),
            (self.create_partitions, 1),
            (self.delete, 1),
            (self.configs, 2),
            (self.elect, 1),
            (self.reassign, 3),
            (self.complete, 3),
            (self.acls, 2),
        ]
        [op] = self.rng.choices([op for op, _ in ops], [weight for _, weight in ops])
        try:
            await op()
        except KafkaError:
            pass  # refused requests are part of the walk

    async def register(self) -> None:
        broker = self.rng.randrange(6)
        self.epochs[broker] = await register(self.ctl, broker, f"rack-{broker % 3}")

    async def heartbeat(self) -> None:
        if not self.epochs:
            return await self.register()
        broker = self.rng.choice(sorted(self.epochs))
        kind = self.rng.choices(["unfence", "fence", "shutdown"], [8, 1, 1])[0]
        await self.ctl.broker_heartbeat(
            HeartbeatRequest(
                broker,
                self.epochs[broker],
                self.ctl.committed_offset,
                want_fence=kind == "fence",
                want_shutdown=kind == "shutdown",
            )
        )

    def _topics(self) -> list[str]:
        return sorted(self.ctl.replication.topics_by_name.committed())

    async def create(self) -> None:
        configs = tuple(c for c in TOPIC_CONFIGS if self.rng.random() < 0.3)
        topic = NewTopic(self.rng.choice(NAMES), self.rng.randint(1, 4), self.rng.randint(1, 3), configs=configs)
        await self.ctl.create_topics([topic])

    async def create_partitions(self) -> None:
        if names := self._topics():
            name = self.rng.choice(names)
            count = self.ctl.replication.partition_count(self.ctl.replication.topics_by_name[name])
            await self.ctl.create_partitions([NewPartitions(name, count + self.rng.randint(1, 2))])

    async def delete(self) -> None:
        if names := self._topics():
            await self.ctl.delete_topics([DeleteTopicState(name=self.rng.choice(names))])

    async def configs(self) -> None:
        names = self._topics()
        if names and self.rng.random() < 0.6:
            resource, options = (TOPIC_RESOURCE, self.rng.choice(names)), TOPIC_CONFIGS
        else:
            resource, options = (BROKER_RESOURCE, self.rng.choice(["", *map(str, self.epochs)])), BROKER_CONFIGS
        name, value = self.rng.choice(options)
        op = self.rng.choice([AlterConfigOp.SET, AlterConfigOp.SET, AlterConfigOp.DELETE])
        config = AlterableConfig(name, op, value if op == AlterConfigOp.SET else None)
        await self.ctl.incremental_alter_configs([AlterConfigsResource(*resource, (config,))])

    async def elect(self) -> None:
        await self.ctl.elect_leaders(self.rng.choice([ElectionType.PREFERRED, ElectionType.UNCLEAN]), None)

    async def reassign(self) -> None:
        parts = self.ctl.replication.partitions.committed()
        if not parts or not self.epochs:
            return
        topic_id, index = self.rng.choice(sorted(parts, key=lambda k: (bytes(k[0]), k[1])))
        name = self.ctl.replication.topics.committed()[topic_id].name
        target = None
        if self.rng.random() < 0.8:
            target = tuple(self.rng.sample(sorted(self.epochs), self.rng.randint(1, min(3, len(self.epochs)))))
        await self.ctl.alter_partition_reassignments([ReassignableTopic(name, (ReassignablePartition(index, target),))])

    async def acls(self) -> None:
        """Create a few ACLs (some already there), or delete by a filter."""
        rng = self.rng
        if rng.random() < 0.6:
            acls = [
                StandardAcl(
                    rng.choice([ResourceType.TOPIC, ResourceType.GROUP]),
                    rng.choice(["orders", "pay", "*"]),
                    rng.choice([PatternType.LITERAL, PatternType.PREFIXED]),
                    rng.choice(["User:alice", "User:bob", "User:*"]),
                    "*",
                    rng.choice([2, 3, 4, 8]),  # ALL, READ, WRITE, DESCRIBE
                    rng.choice([2, 3]),  # DENY, ALLOW
                )
                for _ in range(rng.randint(1, 3))
            ]
            await self.ctl.create_acls(acls)
        else:
            name = rng.choice(["orders", "payments", "pay"])
            await self.ctl.delete_acls([AclBindingFilter(ResourceType.ANY, name, PatternType.MATCH)])

    async def complete(self) -> None:
        """The leader of a moving partition reports its adding replicas in sync (those that may join)."""
        r = self.ctl.replication
        moving = [(tid, i) for tid, indexes in sorted(r.reassignments.moving.committed().items()) for i in indexes]
        if not moving:
            return
        topic_id, index = self.rng.choice(moving)
        p = r.partitions.committed()[(topic_id, index)]
        brokers = self.ctl.cluster.brokers.committed()
        if p.leader < 0:
            return
        isr = [*p.isr, *(b for b in p.adding if brokers[b].active and b not in p.isr)]
        data = AlterPartitionData(index, p.leader_epoch, tuple((b, brokers[b].epoch) for b in isr), p.partition_epoch)
        await self.ctl.alter_partition(p.leader, brokers[p.leader].epoch, [AlterPartitionTopic(topic_id, (data,))])


# -- what a snapshot holds and gives back -------------------------------------------------------------------------


async def test_image_state_covers_every_map(log: SharedLog) -> None:
    """A guard: the controller holds no TimelineDict that image_state (and so this module's checks) ignores."""
    ctl, _, _ = await active_cluster(log, [(0, None, False)])
    owners = {
        "controller": ctl,
        "cluster": ctl.cluster,
        "replication": ctl.replication,
        "configs": ctl.configs,
        "reassignments": ctl.replication.reassignments,
        "elections": ctl.replication.elections,
        "acls": ctl.acls,
        "quotas": ctl.quotas,
    }
    found = {
        f"{owner}.{name}"
        for owner, obj in owners.items()
        for name, value in vars(obj).items()
        if isinstance(value, TimelineDict)
    }
    assert found == STATE_MAPS


async def test_random_walk_snapshots_load_into_the_state_the_log_gave(log: SharedLog) -> None:
    """Snapshots taken at many committed offsets — captured directly, and by the byte trigger on the active
    controller and on a standby while the walk goes on — each load into a fresh controller holding exactly what
    a standby that replayed the log to that offset holds; then both replay the rest of the log and stay equal."""
    ctl, raft, _ = await active_cluster(log, [], settings=quiet_settings(snapshot_max_new_record_bytes=3000))
    ctl.snapshots.chunk_records = 7  # many chunks: commits interleave with the writing
    standby, standby_raft = await start_controller(log, 2, quiet_settings(snapshot_max_new_record_bytes=2000))
    standby.snapshots.chunk_records = 5
    catch_up(standby, log)
    walk = Walk(ctl, random.Random(20240611))
    await walk.start(5)
    captured: list[MemorySnapshot] = []
    for step in range(400):
        await walk.step()
        if step % 40 == 39:
            captured.append(snapshot_of(ctl))
            assert image_state(ctl) == image_state(standby)  # the standby keeps up with the committed state
    # Topic ids and placement are not seeded: the walk can end with no move under way. Start one then, so that the
    # last snapshots hold one (asserted below).
    for _ in range(100):
        if any(ctl.replication.reassignments.moving.committed().values()):
            break
        with contextlib.suppress(KafkaError):
            await walk.reassign()
    await settle()
    await ctl.force_snapshot()
    await standby.force_snapshot()
    # The walk covered what it should: moves in progress and completed, a name recreated, several topics.
    records = log.records()
    names = [r.name for r in records if isinstance(r, TopicRecord)]
    assert len(names) > len(set(names)) and len(ctl.replication.topics) >= 3  # names deleted and created again
    assert any(isinstance(r, PartitionChangeRecord) and r.adding_replicas for r in records)
    assert any(isinstance(r, PartitionChangeRecord) and r.removing_replicas == [] for r in records)  # moves ended
    assert any(ctl.replication.reassignments.moving.committed().values())  # and some are still under way
    assert any(isinstance(r, BrokerRegistrationChangeRecord) and r.in_controlled_shutdown == 1 for r in records)
    assert any(isinstance(r, RemoveAccessControlEntryRecord) for r in records) and len(ctl.acls.acls) > 0
    generated = [*raft.snapshots.values(), *standby_raft.snapshots.values()]
    assert len(raft.snapshots) >= 3 and len(standby_raft.snapshots) >= 3, (
        len(raft.snapshots),
        len(standby_raft.snapshots),
    )
    final = image_state(standby)
    assert final == image_state(ctl)
    for snapshot in [*captured, *generated]:
        check_order([deserialize(v).message for v in snapshot.records])
        end = snapshot.snapshot_id.end_offset
        fresh, reference = loaded(snapshot, batch_records=37), replayed(log, end)
        assert reference.committed_offset == end - 1
        assert image_state(fresh) == image_state(reference), snapshot.snapshot_id
        assert all(t.created_offset == -1 for t in fresh.replication.topics.values())
        catch_up(fresh, log)
        catch_up(reference, log)
        assert image_state(fresh) == image_state(reference) == final


async def test_fast_load_equals_generic_replay(log: SharedLog) -> None:
    """The loader's PartitionRecord fast path gives what the generic decode and replay give, for records it takes
    (recovering leaders, moves) and records it leaves to the generic path (real directory ids, v0, a gap)."""
    ctl, _, _ = await active_cluster(log, [(b, None, False) for b in range(4)])
    topic = Uuid.random()
    dirs = [Uuid.random(), Uuid.random()]
    common = {"topic_id": topic, "leader_epoch": 3, "partition_epoch": 7}
    log.foreign(
        [
            TopicRecord(name="odd.one", topic_id=topic),
            PartitionRecord(partition_id=0, replicas=[0, 1], isr=[0], leader=0, leader_recovery_state=1, **common),
            PartitionRecord(partition_id=1, replicas=[0, 1], isr=[1], leader=1, directories=dirs, **common),
            PartitionRecord(
                partition_id=2,
                replicas=[2, 3, 0],
                isr=[0],
                leader=0,
                adding_replicas=[2, 3],
                removing_replicas=[0],
                **common,
            ),
            PartitionRecord(partition_id=4, replicas=[1], isr=[1], leader=1, **common),  # after a gap
            ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name="odd.one", name="retention.ms", value="1"),
            FeatureLevelRecord(name="kraft.version", feature_level=1),
            TopicRecord(name="old", topic_id=(old := Uuid.random())),
        ]
    )
    v0 = PartitionRecord(partition_id=0, topic_id=old, replicas=[3], isr=[3], leader=3, leader_epoch=1)
    log.foreign([serialize(v0, version=0)])
    log.commit_all()
    snapshot = snapshot_of(ctl)
    fresh = loaded(snapshot)
    generic = QuorumController(7, FakeRaft(7, SharedLog()), quiet_settings())
    for batch in make_batches([deserialize(v).message for v in snapshot.records], 3):
        generic.handle_commit(batch)
    expected = image_state(ctl) | {"committed_offset": snapshot.snapshot_id.end_offset - 1}
    assert image_state(fresh) == expected
    assert image_state(generic) | {"committed_offset": expected["committed_offset"]} == expected
    assert fresh.replication.reassignments.moving.committed() == {topic: frozenset({2})}
    assert fresh.replication.partitions[(topic, 1)].directories == tuple(dirs)
    assert fresh.replication.partition_count(topic) == 3 and (topic, 4) in fresh.replication.partitions
    # The snapshot's bytes (PartitionRecords from bytes cached per registration) are each record serialized.
    await ctl.create_topics([NewTopic(f"many-{i}", 40, 1) for i in range(3)])
    image = capture(ctl)
    assert len({id(p) for p in image.partitions.values()}) < len(image.partitions) / 4  # the cache is used
    assert list(image.encoded()) == [serialize(r) for r in image.records()]
    assert fresh.replication.partitions[(old, 0)].leader_epoch == 1


async def test_a_partition_twice_in_a_snapshot_is_replayed_as_the_log_would() -> None:
    """Kafka never writes one, but a snapshot is replayed whatever it holds: the second record wins, as in a log."""
    topic = Uuid.random()
    moving = PartitionRecord(partition_id=0, topic_id=topic, replicas=[1, 2], isr=[1], leader=1, adding_replicas=[2])
    settled = PartitionRecord(partition_id=0, topic_id=topic, replicas=[2], isr=[2], leader=2, leader_epoch=4)
    records = [FeatureLevelRecord(name="metadata.version", feature_level=22), TopicRecord(name="t", topic_id=topic)]
    records += [moving, settled]
    fresh = loaded(MemorySnapshot(SnapshotId(4, 1), 0, tuple(serialize(r) for r in records)))
    generic = QuorumController(7, FakeRaft(7, SharedLog()), quiet_settings())
    for batch in make_batches(records, 10):
        generic.handle_commit(batch)
    assert image_state(fresh) == image_state(generic)
    assert fresh.replication.partitions[(topic, 0)].leader_epoch == 4
    assert not fresh.replication.reassignments.moving.committed()


async def test_a_snapshot_file_round_trip(log: SharedLog, tmp_path: Path) -> None:
    """Through the real file writer and reader: Kafka's batches, header and footer, loaded back."""
    topics = [NewTopic("a", 3, 2, configs=(("retention.ms", "1000"),)), NewTopic("b.c", 2, 1)]
    ctl, raft, _ = await active_cluster(log, [(0, "r0", False), (1, "r1", False)], topics=topics)
    raft.snapshot_dir = tmp_path
    snapshot_id = await ctl.force_snapshot()
    assert snapshot_id is not None and raft.latest_snapshot_id() == snapshot_id
    assert [p.name for p in tmp_path.iterdir()] == [snapshot_id.file_name]
    assert ctl.metrics.last_snapshot_bytes == (tmp_path / snapshot_id.file_name).stat().st_size
    fresh = QuorumController(9, FakeRaft(9, SharedLog()), quiet_settings())
    fresh.handle_load_snapshot(FileSnapshotReader(SnapshotFile.open(tmp_path / snapshot_id.file_name)))
    assert image_state(fresh) == image_state(ctl)


class ForkingSnapshotWriter(FileSnapshotWriter):
    """As the runtime's writer: ``fork`` starts a child writing the records at once, ``write_all`` waits for it."""

    def __init__(self, directory: Path, snapshot_id: SnapshotId, timestamp: int) -> None:
        super().__init__(directory, snapshot_id, timestamp)
        self.child: snapshot_fork.ChildWriter | None = None

    def fork(self, records: Iterable[bytes]) -> None:
        self.child = snapshot_fork.start_child(self.file, records)

    async def write_all(self) -> tuple[int, int]:
        assert self.child is not None
        with ThreadPoolExecutor(max_workers=1) as executor:
            size, count = await self.child.wait(executor)
        self.file.publish(size)
        return size, count


async def test_a_forked_snapshot_holds_the_state_at_the_fork_and_copies_no_map(log: SharedLog, tmp_path: Path):
    """The child is forked as the snapshot begins, at the committed batch boundary: what the parent commits next is
    not in it, though the image it encodes is the live maps, not copies of them."""
    assert snapshot_fork.supported()
    ctl, raft, _ = await active_cluster(log, [(0, None, False)], topics=[NewTopic(f"t{i}", 100, 1) for i in range(40)])
    expected = image_state(ctl)
    raft.create_snapshot = lambda snapshot_id, ts: ForkingSnapshotWriter(tmp_path, snapshot_id, ts)  # type: ignore
    partitions_map = sys.getsizeof(ctl.replication.partitions.committed())
    tracemalloc.start()
    try:
        task = ctl.snapshots._begin("a test")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert task is not None
    assert peak < partitions_map / 2, f"{peak} bytes allocated beginning the snapshot: a copy of the maps?"
    await ctl.create_topics([NewTopic("later", 3, 1)])  # committed while the child writes: changes the live maps
    await ctl.delete_topics([DeleteTopicState(name="t0")])
    snapshot_id = await task
    fresh = QuorumController(9, FakeRaft(9, SharedLog()), quiet_settings())
    fresh.handle_load_snapshot(FileSnapshotReader(SnapshotFile.open(tmp_path / snapshot_id.file_name)))
    assert image_state(fresh) == expected != image_state(ctl)


async def test_record_order_follows_kafkas_image(log: SharedLog) -> None:
    topics = [NewTopic("a", 3, 2, configs=(("retention.ms", "1000"),)), NewTopic("b", 2, 1)]
    ctl, _, epochs = await active_cluster(log, [(1, "r1", False), (0, "r0", True)], topics=topics)
    await ctl.incremental_alter_configs(
        [AlterConfigsResource(BROKER_RESOURCE, "", (AlterableConfig("log.retention.ms", AlterConfigOp.SET, "5"),))]
    )
    await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], ctl.committed_offset, want_shutdown=True))
    records = list(capture(ctl).records())
    check_order(records)
    assert [type(r).__name__ for r in records[:4]] == [
        "FeatureLevelRecord",
        "ZkMigrationStateRecord",
        "RegisterBrokerRecord",
        "RegisterBrokerRecord",
    ]
    assert records[0].feature_level == 22 and records[1].zk_migration_state == 0
    b0, b1 = records[2:4]
    assert (b0.broker_id, b0.fenced, b0.in_controlled_shutdown, b0.rack) == (0, True, False, "r0")
    assert (b1.broker_id, b1.fenced, b1.in_controlled_shutdown, b1.broker_epoch) == (1, False, True, epochs[1])
    assert serialize(b1)[2] == 3  # RegisterBrokerRecord v3, as Kafka writes at 4.0-IV0
    assert [type(r).__name__ for r in records[4:]] == ["TopicRecord"] + ["PartitionRecord"] * 3 + ["TopicRecord"] + [
        "PartitionRecord"
    ] * 2 + ["ConfigRecord"] * 2
    assert [(r.resource_name, r.name) for r in records[-2:]] == [("a", "retention.ms"), ("", "log.retention.ms")]


async def test_partitions_are_encoded_a_run_at_a_time_in_order_across_run_boundaries(log: SharedLog) -> None:
    """The encoder makes a topic's partitions in runs of PARTITION_RUN: topics that end on, just after and well
    past a run's end, and partitions after a gap, come out as each record serialized, in the records' order."""
    run = snapshot_module.PARTITION_RUN
    topics = [NewTopic("on", run, 1), NewTopic("after", run + 1, 1), NewTopic("past", 2 * run + 3, 1)]
    ctl, _, _ = await active_cluster(log, [(0, None, False), (1, None, False)], topics=topics)
    past = ctl.replication.topics_by_name["past"]
    log.foreign([PartitionRecord(partition_id=2 * run + 9, topic_id=past, replicas=[1], isr=[1], leader=1)])
    log.commit_all()
    catch_up(ctl, log)
    image = capture(ctl)
    records = list(image.records())
    assert list(image.encoded()) == [serialize(r) for r in records]
    partitions = [(r.topic_id, r.partition_id) for r in records if isinstance(r, PartitionRecord)]
    assert len(partitions) == 4 * run + 5
    assert partitions[-1] == (past, 2 * run + 9)  # after its topic's run, as before


async def test_the_encoded_runs_are_the_encoded_records_cut_between_topics(log: SharedLog) -> None:
    """encoded_runs(n), joined, is encoded(), for any n; the runs hold about as many partitions each, and a topic's
    partitions follow it in its run. Partitions of no topic are left out and counted, as encoded() does; a
    partition after a gap in its topic's numbering comes after its run's topics (encoded(): after all topics)."""
    topics = [NewTopic(f"t{i}", count, 1) for i, count in enumerate((5, 40, 3, 30, 1, 20, 2, 12))]
    topics.append(NewTopic("configured", 2, 1, configs=(("retention.ms", "1000"),)))
    ctl, _, _ = await active_cluster(log, [(0, None, False), (1, None, False)], topics=topics)
    t3 = ctl.replication.topics_by_name["t3"]
    log.foreign([PartitionRecord(partition_id=31, topic_id=t3, replicas=[1], isr=[1], leader=1)])  # after a gap
    log.commit_all()
    catch_up(ctl, log)
    gapped = capture(ctl)
    gap = serialize(_partition_record(t3, 31, gapped.partitions[(t3, 31)]))
    stray = next(iter(gapped.partitions.values()))
    gapped = dataclasses.replace(gapped, partitions={**gapped.partitions, (Uuid.random(), 0): stray})  # no topic
    image = dataclasses.replace(gapped, partitions={k: v for k, v in gapped.partitions.items() if k != (t3, 31)})
    whole = list(image.encoded())
    assert isinstance(deserialize(whole[-1]).message, ConfigRecord)
    for n in (1, 2, 3, 4, 50):
        with capture_logs() as logs:
            runs = [list(run) for run in image.encoded_runs(n)]
        assert [r for run in runs for r in run] == whole, n
        assert len(runs) == min(n, len(topics)), n
        assert all(isinstance(deserialize(run[0]).message, TopicRecord) for run in runs[1:]), n  # cut before a topic
        assert [e["partitions"] for e in logs if e["event"] == "snapshot_orphan_partitions"] == [1], n
    sizes = [sum(1 for r in run if r[1] == 3) for run in image.encoded_runs(2)]  # api key 3: PartitionRecord
    assert sizes == [78, 37]  # cut after the topic that takes the first run past half of the 116 partitions

    gapped_whole = list(gapped.encoded())
    assert gapped_whole[-2] == gap  # after all topics, before the topic's ConfigRecord
    first, second = (list(run) for run in gapped.encoded_runs(2))
    assert gap in first and first.index(gap) == len(first) - 1  # t3 is in the first run: after its topics
    assert sorted(first + second) == sorted(gapped_whole)


async def test_capture_is_a_point_in_time_image(log: SharedLog) -> None:
    """Changes committed after the capture do not leak into its records; uncommitted ones never appear."""
    ctl, _, _ = await active_cluster(log, [(0, None, False)], topics=[NewTopic("a", 2, 1)])
    image = capture(ctl)
    before = [serialize(r) for r in image.records()]
    await ctl.create_topics([NewTopic("b", 1, 1)])
    await ctl.delete_topics([DeleteTopicState(name="a")])
    assert [serialize(r) for r in image.records()] == before
    log.auto_commit = False
    pending = asyncio.ensure_future(ctl.create_topics([NewTopic("c", 1, 1)]))
    await settle()
    names = {r.name for r in capture(ctl).records() if isinstance(r, TopicRecord)}
    assert names == {"b"}
    log.commit_all()
    await pending


# -- loading ------------------------------------------------------------------------------------------------------


async def test_load_replaces_state_and_sets_the_committed_offset(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [(0, None, False)], topics=[NewTopic("a", 2, 1)])
    snapshot = snapshot_of(ctl, epoch=1)
    other, _ = await start_controller(SharedLog(), 5)
    other.handle_commit(CommittedBatch.of([serialize(TopicRecord(name="stale", topic_id=Uuid.random()))]))
    assert other.snapshots.bytes_since > 0
    other.snapshots.last_snapshot_at -= 100
    with capture_logs() as logs:
        other.handle_load_snapshot(MemorySnapshotReader(snapshot))
    assert image_state(other) == image_state(ctl)
    assert other.committed_offset == snapshot.snapshot_id.end_offset - 1
    assert other.metrics.snapshot_load_seconds > 0
    # The policy counts from the snapshot, as Kafka's generator does after loading one.
    assert other.snapshots.bytes_since == other.metrics.bytes_since_snapshot == 0
    assert other.snapshots.last_snapshot_at > time.monotonic() - 10
    [line] = [e for e in logs if e["event"] == "snapshot_loaded"]
    assert line["snapshot_id"] == str(snapshot.snapshot_id) and line["records"] == len(snapshot.records)
    assert line["node_id"] == 5 and line["records_per_s"] > 0


async def test_load_is_refused_on_the_active_controller(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [(0, None, False)], topics=[NewTopic("a", 1, 1)])
    before = image_state(ctl)
    snapshot = MemorySnapshot(
        SnapshotId(1, 1), 0, (serialize(FeatureLevelRecord(name="metadata.version", feature_level=22)),)
    )
    try:
        ctl.handle_load_snapshot(MemorySnapshotReader(snapshot))
        raise AssertionError("loaded on the active controller")
    except RuntimeError as e:
        assert "active controller" in str(e)
    assert image_state(ctl) == before


async def test_a_record_that_cannot_be_applied_fails_the_load(log: SharedLog) -> None:
    bad = PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=[1], isr=[1], leader=1)
    snapshot = MemorySnapshot(SnapshotId(5, 1), 0, (serialize(NoOpRecord()), serialize(bad)))
    ctl = QuorumController(3, FakeRaft(3, SharedLog()), quiet_settings())
    try:
        ctl.handle_load_snapshot(MemorySnapshotReader(snapshot))
        raise AssertionError("loaded a partition of an unknown topic")
    except ReplayError as e:
        assert "snapshot 5-1" in str(e) and "record 1 of the snapshot" in str(e) and "unknown topic" in str(e)
    assert ctl.failed


# -- the policy -----------------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def standby_with(log: SharedLog, **settings: Any) -> tuple[QuorumController, FakeRaft, Clock]:
    ctl, raft = await start_controller(log, 2, quiet_settings(**settings))
    clock = Clock()
    ctl.snapshots.clock = clock
    ctl.snapshots.last_snapshot_at = clock.now
    return ctl, raft, clock


def noop_batch(log: SharedLog) -> CommittedBatch:
    log.foreign([NoOpRecord()])
    log.commit_all()
    return log.batches[-1]


async def test_byte_trigger(log: SharedLog) -> None:
    size = CommittedBatch.of([serialize(NoOpRecord())]).size_bytes
    ctl, raft, _ = await standby_with(log, snapshot_max_new_record_bytes=3 * size)
    log.foreign([FeatureLevelRecord(name="metadata.version", feature_level=22)])
    log.commit_all()
    noop_batch(log)
    assert not raft.writers and ctl.metrics.bytes_since_snapshot == size + log.batches[0].size_bytes
    last = noop_batch(log)
    [writer] = raft.writers
    assert writer.snapshot_id == SnapshotId(last.last_offset + 1, last.epoch)
    assert ctl.snapshots.bytes_since == 0
    await settle()
    assert writer.frozen and raft.latest_snapshot_id() == writer.snapshot_id
    assert ctl.metrics.snapshots_generated == 1 and ctl.metrics.last_snapshot_id == writer.snapshot_id
    assert ctl.metrics.last_snapshot_bytes == sum(map(len, writer.records)) > 0
    noop_batch(log)
    noop_batch(log)
    assert len(raft.writers) == 1  # counting again from the snapshot
    noop_batch(log)
    assert len(raft.writers) == 2


async def test_the_byte_trigger_grows_with_the_latest_snapshot(log: SharedLog) -> None:
    """pykraft.snapshot.growth.ratio: after a snapshot of S bytes the next waits for ratio x S committed bytes
    (the cost of a snapshot is the whole image); 0 is Kafka's fixed threshold."""
    noop = CommittedBatch.of([serialize(NoOpRecord())]).size_bytes
    for ratio, expected in ((1.0, 1), (0.0, 11)):
        shared = SharedLog()
        ctl, raft, _ = await standby_with(shared, snapshot_max_new_record_bytes=1, snapshot_growth_ratio=ratio)
        topic = Uuid.random()
        partitions = [
            PartitionRecord(partition_id=i, topic_id=topic, replicas=[1], isr=[1], leader=1) for i in range(50)
        ]
        shared.foreign([TopicRecord(name="t", topic_id=topic), *partitions])  # one batch: the first snapshot holds it
        shared.commit_all()
        [first] = raft.writers
        await settle()
        assert first.frozen and ctl.snapshots.last_snapshot_bytes > 10 * noop
        for _ in range(10):
            noop_batch(shared)
            await settle()
        assert len(raft.writers) == expected, ratio
        if ratio:
            while len(raft.writers) == 1:  # the next comes once as many bytes as the snapshot held are committed
                noop_batch(shared)
            assert ctl.snapshots.last_snapshot_bytes <= sum(b.size_bytes for b in shared.batches[1:])


async def test_time_trigger_and_zero_disables_it(log: SharedLog) -> None:
    _, raft, clock = await standby_with(log, snapshot_max_interval_ms=60_000)
    noop_batch(log)
    clock.now += 59
    noop_batch(log)
    assert not raft.writers
    clock.now += 1
    last = noop_batch(log)
    [writer] = raft.writers
    assert writer.snapshot_id.end_offset == last.last_offset + 1
    await settle()
    clock.now += 30
    noop_batch(log)
    assert len(raft.writers) == 1  # the interval runs from the last snapshot
    _, off_raft, off_clock = await standby_with(log, snapshot_max_interval_ms=0)
    off_clock.now += 10**9
    noop_batch(log)
    assert not off_raft.writers


async def test_time_trigger_fires_on_an_idle_cluster(log: SharedLog) -> None:
    """Nothing but the active controller's NoOps (every max_idle_interval_ms) commits; the snapshot still comes."""
    settings = quiet_settings(max_idle_interval_ms=20, snapshot_max_interval_ms=150)
    _, raft, _ = await active_cluster(log, [], settings=settings)
    for _ in range(100):
        await asyncio.sleep(0.02)
        if raft.snapshots:
            break
    assert raft.snapshots, "no snapshot on an idle cluster"
    assert isinstance(log.records()[-1], NoOpRecord)


async def test_commits_keep_flowing_while_a_snapshot_is_written(log: SharedLog) -> None:
    ctl, raft = await start_controller(log, 2, quiet_settings(snapshot_max_new_record_bytes=10**9))
    ctl.snapshots.chunk_records = 50
    topic = Uuid.random()
    log.foreign([FeatureLevelRecord(name="metadata.version", feature_level=22), TopicRecord(name="t", topic_id=topic)])
    log.foreign([PartitionRecord(partition_id=i, topic_id=topic, replicas=[1], isr=[1], leader=1) for i in range(1000)])
    log.commit_all()
    ctl.settings.snapshot_max_new_record_bytes = 1
    noop_batch(log)
    [writer] = raft.writers
    ctl.settings.snapshot_max_new_record_bytes = 10**9
    log.events.clear()
    while not writer.frozen:
        noop_batch(log)
        await asyncio.sleep(0)
    kinds = [kind for kind, _ in log.events]
    first, last = kinds.index("snapshot_append"), len(kinds) - 1 - kinds[::-1].index("snapshot_append")
    assert kinds[first:last].count("snapshot_append") >= 10  # 1003 records in chunks of 50
    assert kinds[first:last].count("commit") >= 10  # a commit between (nearly) every two chunks
    assert len(writer.records) == 1003  # metadata.version, the ZK migration state, the topic, its partitions
    assert ctl.committed_offset == log.committed_offset


async def test_a_failed_snapshot_is_logged_and_retried_after_a_backoff(log: SharedLog) -> None:
    ctl, raft, clock = await standby_with(log, snapshot_max_new_record_bytes=1)
    raft.fail_freeze = OSError(errno.ENOSPC, "No space left on device")
    with capture_logs() as logs:
        log.foreign([FeatureLevelRecord(name="metadata.version", feature_level=22)])
        log.commit_all()
        await settle()
    [failed] = raft.writers
    assert not failed.frozen and raft.latest_snapshot_id() is None
    [line] = [e for e in logs if e["event"] == "snapshot_failed"]
    assert "No space left on device" in line["error"] and line["retry_in_s"] == 1.0
    assert ctl.metrics.snapshot_failures == 1 and ctl.metrics.snapshots_generated == 0
    noop_batch(log)
    noop_batch(log)
    assert len(raft.writers) == 1  # no retry within the backoff, and commits go on
    assert ctl.committed_offset == log.committed_offset
    assert ctl.snapshots.bytes_since > sum(b.size_bytes for b in log.batches[-2:])  # the failed one's bytes kept
    raft.fail_append = OSError(errno.EIO, "Input/output error")  # fails before freezing: the writer is aborted
    clock.now += 1.0
    noop_batch(log)
    await settle()
    assert len(raft.writers) == 2 and raft.writers[1].aborted
    assert ctl.metrics.snapshot_failures == 2
    clock.now += 1.5  # the backoff doubled
    noop_batch(log)
    assert len(raft.writers) == 2
    clock.now += 0.5
    last = noop_batch(log)
    await settle()
    assert raft.writers[2].frozen and raft.latest_snapshot_id() == SnapshotId(last.last_offset + 1, last.epoch)
    assert ctl.snapshots._backoff == 0.0


async def test_a_failure_before_writing_starts_is_not_fatal(log: SharedLog) -> None:
    ctl, raft, _ = await standby_with(log, snapshot_max_new_record_bytes=1)

    def refuse(snapshot_id: SnapshotId, timestamp: int) -> None:
        raise ValueError("not a committed batch end")

    raft.create_snapshot = refuse  # type: ignore[method-assign]
    with capture_logs() as logs:
        noop_batch(log)
    assert ctl.committed_offset == log.committed_offset and not ctl.failed
    assert [e["error"] for e in logs if e["event"] == "snapshot_failed"] == ["ValueError: not a committed batch end"]


async def test_force_snapshot(log: SharedLog) -> None:
    ctl, raft, _ = await active_cluster(log, [(0, None, False)], topics=[NewTopic("a", 2, 1)])
    first = await ctl.force_snapshot()
    assert first == SnapshotId(log.committed_offset + 1, 1) == raft.latest_snapshot_id()
    assert await ctl.force_snapshot() == first and len(raft.writers) == 1  # nothing new: the latest
    await ctl.create_topics([NewTopic("b", 1, 1)])
    second = await ctl.force_snapshot()
    assert second is not None and second.end_offset == log.committed_offset + 1 and second > first
    assert image_state(loaded(raft.snapshots[second])) == image_state(ctl)
    await ctl.create_topics([NewTopic("c", 1, 1)])
    raft.fail_freeze = OSError(errno.ENOSPC, "No space left on device")
    try:
        await ctl.force_snapshot()
        raise AssertionError("a failed forced snapshot returned")
    except OSError as e:
        assert e.errno == errno.ENOSPC
    assert raft.latest_snapshot_id() == second


async def test_force_waits_for_the_snapshot_being_written(log: SharedLog) -> None:
    ctl, raft, _ = await standby_with(log, snapshot_max_new_record_bytes=1)
    noop_batch(log)
    [writer] = raft.writers
    assert ctl.snapshots.writing and not writer.frozen
    assert await ctl.force_snapshot() == writer.snapshot_id and len(raft.writers) == 1


async def test_force_after_load_returns_the_loaded_snapshot(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [(0, None, False)], topics=[NewTopic("a", 1, 1)])
    snapshot = snapshot_of(ctl)
    standby, raft = await start_controller(SharedLog(), 4)
    raft.snapshots[snapshot.snapshot_id] = snapshot
    standby.handle_load_snapshot(raft.reader())
    assert await standby.force_snapshot() == snapshot.snapshot_id and not raft.writers
    assert standby.snapshots.bytes_since == 0


async def test_a_standby_snapshots_its_own_committed_state(log: SharedLog) -> None:
    """Standbys take snapshots too, of what they replayed; the active controller's and theirs hold the same state."""
    ctl, raft, _ = await active_cluster(log, [(0, None, False), (1, None, False)])
    standby, standby_raft = await start_controller(log, 2, quiet_settings())
    catch_up(standby, log)
    await ctl.create_topics([NewTopic("a", 3, 2), NewTopic("b.c", 1, 1)])
    ours, theirs = await ctl.force_snapshot(), await standby.force_snapshot()
    assert ours == theirs is not None
    assert image_state(loaded(raft.snapshots[ours])) == image_state(loaded(standby_raft.snapshots[theirs]))


async def test_close_aborts_a_snapshot_being_written(log: SharedLog) -> None:
    ctl, raft, _ = await standby_with(log, snapshot_max_new_record_bytes=1)
    ctl.snapshots.chunk_records = 1
    log.foreign([FeatureLevelRecord(name="metadata.version", feature_level=22)])
    log.commit_all()
    [writer] = raft.writers
    await ctl.close()
    assert writer.aborted and not writer.frozen and not ctl.snapshots.writing


def test_settings_defaults_are_kafkas() -> None:
    s = ControllerSettings()
    assert s.snapshot_max_new_record_bytes == 20 * 1024 * 1024
    assert s.snapshot_max_interval_ms == 3_600_000


async def test_snapshot_metrics_are_exported(log: SharedLog) -> None:
    from pykraft.metrics import ControllerCollector

    ctl, _, _ = await active_cluster(log, [(0, None, False)], topics=[NewTopic("a", 2, 1)])

    def samples() -> dict[str, float]:
        return {s.name: s.value for family in ControllerCollector(ctl).collect() for s in family.samples}

    before = samples()
    assert before["kafka_controller_latest_snapshot_end_offset"] == -1
    assert before["kafka_controller_snapshots_generated_total"] == 0
    assert before["kafka_controller_bytes_since_last_snapshot"] == sum(b.size_bytes for b in log.batches)
    snapshot_id = await ctl.force_snapshot()
    assert snapshot_id is not None
    after = samples()
    assert after["kafka_controller_snapshots_generated_total"] == 1
    assert after["kafka_controller_latest_snapshot_end_offset"] == snapshot_id.end_offset
    assert after["kafka_server_snapshotemitter_latest_snapshot_generated_bytes"] == ctl.metrics.last_snapshot_bytes > 0
    assert 0 <= after["kafka_server_snapshotemitter_latest_snapshot_generated_age_ms"] < 5000
    assert after["kafka_controller_bytes_since_last_snapshot"] == 0
    assert after["kafka_controller_snapshot_generation_seconds"] > 0
    assert after["kafka_controller_snapshot_failures_total"] == 0
    assert after["kafka_controller_snapshot_load_seconds"] == 0


async def test_a_replaced_state_is_emptied_not_left_to_the_collector(log: SharedLog) -> None:
    """The managers refer to one another: the state a snapshot load replaces is cyclic garbage, and a node freezes
    what survives its full collections. Its maps are emptied first, in place (the PartitionRecord fast path holds the
    committed dicts themselves), so the bulk goes by reference counting: what is left for the collector is the few
    manager objects, not an object per partition."""
    partitions = 3_000
    ctl, _, _ = await active_cluster(log, [(b, None, False) for b in range(3)], topics=[NewTopic("t", partitions, 2)])
    snapshot = snapshot_of(ctl)
    standby = loaded(snapshot)
    standby.handle_load_snapshot(MemorySnapshotReader(snapshot))  # the fast path's caches filled, as on a node
    gc.collect()
    gc.disable()  # what the load leaves to the collector is counted below, not collected on the way
    try:
        standby.handle_load_snapshot(MemorySnapshotReader(snapshot))
        left_to_the_collector = gc.collect()
    finally:
        gc.enable()
    assert left_to_the_collector < partitions / 10, left_to_the_collector
    old = [standby.replication.partitions, standby.replication.topics, standby.cluster.brokers, standby._features]
    old_dicts = [m.committed() for m in old]
    assert all(old_dicts)
    standby.handle_load_snapshot(MemorySnapshotReader(snapshot))
    assert [len(d) for d in old_dicts] == [0, 0, 0, 0]
    assert image_state(standby) == image_state(loaded(snapshot))


async def test_a_node_freezes_what_a_load_made_without_scanning_it(log: SharedLog, monkeypatch) -> None:
    """Where the process freezes long-lived objects (a node: pykraft/gc_pauses.py), a load freezes the objects it
    made (no full collection walks the new image); elsewhere one full collection ages them at once."""
    ctl, _, _ = await active_cluster(log, [(b, None, False) for b in range(3)], topics=[NewTopic("t", 2_000, 2)])
    snapshot = snapshot_of(ctl)
    standby = loaded(snapshot)
    full_collections = []

    def counted(phase: str, info: dict[str, Any]) -> None:
        if phase == "stop" and info["generation"] == 2:
            full_collections.append(info)

    others = list(gc.callbacks)  # a node's hook (pykraft/gc_pauses.py), installed by an earlier test, freezes too
    gc.callbacks[:] = [counted]
    try:
        for freezes in (True, False):
            monkeypatch.setattr(memory, "freezes_long_lived", freezes)
            gc.unfreeze()
            full_collections.clear()
            standby.handle_load_snapshot(MemorySnapshotReader(snapshot))
            frozen = gc.get_freeze_count()
            if freezes:  # the collection before the load, none after: the image is frozen instead
                assert len(full_collections) == 1 and frozen > 2_000, (full_collections, frozen)
            else:
                assert len(full_collections) == 2 and frozen == 0, (full_collections, frozen)
    finally:
        gc.callbacks[:] = others
        gc.unfreeze()
