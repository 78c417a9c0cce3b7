"""Test doubles for the controller tests: a fake Raft log shared by several controllers (with snapshots kept in
memory), and helpers to build a small cluster of brokers through the controller's own API."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from controller.cluster_control import Endpoint, HeartbeatRequest, RegisterBrokerRequest
from controller.quorum_controller import ControllerSettings, QuorumController
from controller.records import ApiMessage, Uuid, deserialize, serialize
from controller.replication_control import NewTopic, TopicResult
from quorum.errors import NotLeaderError
from quorum.log.snapshots import SnapshotFileWriter, SnapshotId
from quorum.raft.client import CommittedBatch, LeaderAndEpoch, RaftListener

T = TypeVar("T")


class SharedLog:
    """One metadata log, as every node would see it once committed. Batches are committed (delivered to every
    registered listener, in log order) only when the test says so, or at once with ``auto_commit``."""

    def __init__(self) -> None:
        self.entries: list[bytes] = []
        self.batches: list[CommittedBatch] = []
        self.delivered = 0  # batches[:delivered] have been delivered
        self.listeners: list[RaftListener] = []
        self.leader = LeaderAndEpoch(-1, 0)
        self.auto_commit = False
        self.append_calls: list[tuple[int, list[bytes]]] = []  # (node id, values) per append(_atomic) call
        self.non_atomic_appends = 0  # of which plain appends (records that may span batches)
        self.resigned: list[tuple[int, int]] = []
        self.events: list[tuple[str, int]] = []  # ("commit", last offset) and ("snapshot_append", records), in order

    @property
    def committed_offset(self) -> int:
        return self.batches[self.delivered - 1].last_offset if self.delivered else -1

    def add(self, values: Sequence[bytes], epoch: int) -> int:
        base = len(self.entries)
        self.entries.extend(values)
        last = base + len(values) - 1
        self.batches.append(CommittedBatch.of(list(values), base_offset=base, epoch=epoch))
        if self.auto_commit:
            asyncio.get_running_loop().call_soon(self.commit_all)
        return last

    def foreign(self, records: Sequence[ApiMessage | bytes]) -> int:
        """A batch some other writer appended (not through any controller here); its last offset."""
        return self.add([r if isinstance(r, bytes) else serialize(r) for r in records], self.leader.epoch)

    def commit_through(self, offset: int) -> None:
        while self.delivered < len(self.batches) and self.batches[self.delivered].last_offset <= offset:
            batch = self.batches[self.delivered]
            self.delivered += 1
            self.events.append(("commit", batch.last_offset))
            for listener in self.listeners:
                listener.handle_commit(batch)

    def commit_all(self) -> None:
        self.commit_through(len(self.entries) - 1)

    def truncate_uncommitted(self) -> None:
        """What a new leader's log does to entries it never had: they are gone."""
        del self.batches[self.delivered :]
        del self.entries[self.committed_offset + 1 :]

    def elect(self, leader_id: int, epoch: int) -> None:
        self.leader = LeaderAndEpoch(leader_id, epoch)
        for listener in self.listeners:
            listener.handle_leader_change(self.leader)

    def records(self, first: int = 0) -> list[ApiMessage]:
        return [deserialize(v).message for v in self.entries[first:]]


@dataclass(frozen=True)
class MemorySnapshot:
    snapshot_id: SnapshotId
    last_contained_log_timestamp: int
    records: tuple[bytes, ...]


class MemorySnapshotReader:
    """A SnapshotReader over a snapshot kept in memory: its records in batches of ``batch_records``, offsets
    within the snapshot."""

    def __init__(self, snapshot: MemorySnapshot, batch_records: int = 1000) -> None:
        self.snapshot = snapshot
        self.batch_records = batch_records

    @property
    def snapshot_id(self) -> SnapshotId:
        return self.snapshot.snapshot_id

    @property
    def last_contained_log_timestamp(self) -> int:
        return self.snapshot.last_contained_log_timestamp

    def batches(self) -> Iterator[CommittedBatch]:
        records = self.snapshot.records
        epoch = self.snapshot.snapshot_id.epoch
        for base in range(0, len(records), self.batch_records):
            yield CommittedBatch.of(records[base : base + self.batch_records], base_offset=base, epoch=epoch)


class MemorySnapshotWriter:
    """A SnapshotWriter keeping the records in memory; frozen, the snapshot joins its FakeRaft's."""

    def __init__(self, raft: FakeRaft, snapshot_id: SnapshotId, timestamp: int) -> None:
        self.raft = raft
        self.snapshot_id = snapshot_id
        self.timestamp = timestamp
        self.records: list[bytes] = []
        self.appends = 0
        self.aborted = False
        self.frozen = False

    def append(self, records: Sequence[bytes]) -> None:
        assert not self.aborted and not self.frozen
        if self.raft.fail_append is not None:
            error, self.raft.fail_append = self.raft.fail_append, None
            raise error
        self.records.extend(records)
        self.appends += 1
        self.raft.log.events.append(("snapshot_append", len(records)))

    async def freeze(self) -> int:
        assert not self.aborted and not self.frozen
        await asyncio.sleep(0)  # the file writer's fsyncs run off the event loop
        if self.raft.fail_freeze is not None:
            error, self.raft.fail_freeze = self.raft.fail_freeze, None
            raise error  # as the file writer: the partial snapshot is gone
        self.frozen = True
        snapshot = MemorySnapshot(self.snapshot_id, self.timestamp, tuple(self.records))
        self.raft.snapshots[self.snapshot_id] = snapshot
        return sum(len(r) for r in self.records)

    def abort(self) -> None:
        self.aborted = True


class FileSnapshotWriter:
    """A SnapshotWriter over the real file writer (as Raft hands one out): freezing fsyncs off the event loop."""

    def __init__(self, directory: Path, snapshot_id: SnapshotId, timestamp: int) -> None:
        self.file = SnapshotFileWriter(directory, snapshot_id, timestamp)

    @property
    def snapshot_id(self) -> SnapshotId:
        return self.file.snapshot_id

    def append(self, records: Sequence[bytes]) -> None:
        self.file.append(records)

    async def freeze(self) -> int:
        return await asyncio.to_thread(self.file.freeze)

    def abort(self) -> None:
        self.file.abort()


class FakeRaft:
    """One node's RaftClient over a :class:`SharedLog`: only the node that leads the current epoch may append.
    Its snapshots are kept in memory, or written as real files when ``snapshot_dir`` is set."""

    def __init__(self, node_id: int, log: SharedLog) -> None:
        self.node_id = node_id
        self.log = log
        self.refuse: NotLeaderError | None = None  # make the next appends fail
        self.snapshots: dict[SnapshotId, MemorySnapshot] = {}
        self.writers: list[MemorySnapshotWriter] = []  # every writer handed out, in order
        self.fail_append: Exception | None = None  # make the next snapshot append fail
        self.fail_freeze: Exception | None = None  # make the next snapshot freeze fail
        self.snapshot_dir: Path | None = None

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self.log.leader

    @property
    def high_watermark(self) -> int:
        return self.log.committed_offset + 1

    @property
    def log_end_offset(self) -> int:
        return len(self.log.entries)

    def next_offset(self) -> int:
        return len(self.log.entries)

    def _check(self, epoch: int) -> None:
        if self.refuse is not None:
            raise self.refuse
        leader = self.log.leader
        if leader.leader_id != self.node_id or leader.epoch != epoch:
            raise NotLeaderError(f"node {self.node_id} does not lead epoch {epoch}", leader.leader_id, leader.epoch)

    def append(self, epoch: int, records: Sequence[bytes]) -> int:
        self._check(epoch)
        self.log.append_calls.append((self.node_id, list(records)))
        self.log.non_atomic_appends += 1
        return self.log.add(list(records), epoch)

    def append_atomic(self, epoch: int, records: Sequence[bytes]) -> int:
        self._check(epoch)
        self.log.append_calls.append((self.node_id, list(records)))
        return self.log.add(list(records), epoch)

    def register(self, listener: RaftListener) -> None:
        self.log.listeners.append(listener)

    def resign(self, epoch: int) -> None:
        self.log.resigned.append((self.node_id, epoch))

    def latest_snapshot_id(self) -> SnapshotId | None:
        if self.snapshot_dir is not None:
            ids = [i for p in self.snapshot_dir.glob("*.checkpoint") if (i := SnapshotId.parse(p)) is not None]
            return max(ids, default=None)
        return max(self.snapshots) if self.snapshots else None

    def create_snapshot(
        self, snapshot_id: SnapshotId, last_contained_log_timestamp: int
    ) -> MemorySnapshotWriter | FileSnapshotWriter | None:
        """As Raft's: the id must end a committed batch of its epoch; None if it (or a later one) exists."""
        latest = self.latest_snapshot_id()
        if latest is not None and latest.end_offset >= snapshot_id.end_offset:
            return None
        ends = {b.last_offset + 1: b.epoch for b in self.log.batches[: self.log.delivered]}
        if ends.get(snapshot_id.end_offset) != snapshot_id.epoch:
            raise ValueError(f"snapshot {snapshot_id} does not end a committed batch of its epoch")
        if self.snapshot_dir is not None:
            return FileSnapshotWriter(self.snapshot_dir, snapshot_id, last_contained_log_timestamp)
        writer = MemorySnapshotWriter(self, snapshot_id, last_contained_log_timestamp)
        self.writers.append(writer)
        return writer

    def reader(self, snapshot_id: SnapshotId | None = None, batch_records: int = 1000) -> MemorySnapshotReader:
        """A reader of a frozen snapshot (by default the latest)."""
        return MemorySnapshotReader(self.snapshots[snapshot_id or max(self.snapshots)], batch_records)


def quiet_settings(**overrides: Any) -> ControllerSettings:
    """No periodic NoOps and no automatic fence checks: the tests run them when they want."""
    values: dict[str, Any] = {"max_idle_interval_ms": 0, "fence_check_interval_ms": 10**9}
    values.update(overrides)
    return ControllerSettings(**values)


async def settle(rounds: int = 30) -> None:
    """Let the event queue and call_soon callbacks run."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def start_controller(
    log: SharedLog, node_id: int = 1, settings: ControllerSettings | None = None
) -> tuple[QuorumController, FakeRaft]:
    raft = FakeRaft(node_id, log)
    ctl = QuorumController(node_id, raft, settings or quiet_settings())
    ctl.start()
    return ctl, raft


async def with_commit(log: SharedLog, awaitable: Awaitable[T]) -> T:
    """Run a request to the point where it waits for Raft, commit everything, and return its answer."""
    task = asyncio.ensure_future(awaitable)
    await settle()
    log.commit_all()
    return await asyncio.wait_for(task, 5)


def endpoint(broker_id: int) -> tuple[Endpoint, ...]:
    return (Endpoint("PLAINTEXT", "localhost", 9000 + broker_id),)


async def register(ctl: QuorumController, broker_id: int, rack: str | None = None) -> int:
    """Register a broker (auto_commit must be on); its epoch."""
    return await ctl.register_broker(RegisterBrokerRequest(broker_id, Uuid.random(), rack, endpoint(broker_id)))


async def unfence(ctl: QuorumController, broker_id: int, epoch: int) -> None:
    reply = await ctl.broker_heartbeat(HeartbeatRequest(broker_id, epoch, ctl.committed_offset))
    assert not reply.is_fenced


async def active_cluster(
    log: SharedLog,
    brokers: Sequence[tuple[int, str | None, bool]],
    settings: ControllerSettings | None = None,
    topics: Sequence[NewTopic] = (),
) -> tuple[QuorumController, FakeRaft, dict[int, int]]:
    """An active controller (node 1, epoch 1) with ``brokers`` (id, rack, fenced) registered and the given topics
    created, everything committed. Leaves ``log.auto_commit`` on. Returns the broker epochs too."""
    log.auto_commit = True
    ctl, raft = await start_controller(log, 1, settings)
    log.elect(1, 1)
    await settle()
    epochs = {}
    for broker_id, rack, fenced in brokers:
        epochs[broker_id] = await register(ctl, broker_id, rack)
        if not fenced:
            await unfence(ctl, broker_id, epochs[broker_id])
    if topics:
        results = await ctl.create_topics(list(topics))
        assert all(not r.error.failed for r in results), results
    await settle()
    assert log.delivered == len(log.batches)
    return ctl, raft, epochs


def by_name(results: Sequence[TopicResult]) -> dict[str, TopicResult]:
    return {r.name: r for r in results}
