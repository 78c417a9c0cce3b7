"""Test doubles for the controller tests: a fake Raft log shared by several controllers, and helpers to build a
small cluster of brokers through the controller's own API."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from controller.cluster_control import Endpoint, HeartbeatRequest, RegisterBrokerRequest
from controller.quorum_controller import ControllerSettings, QuorumController
from controller.records import ApiMessage, Uuid, deserialize, serialize
from controller.replication_control import NewTopic, TopicResult
from quorum.errors import NotLeaderError
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


class FakeRaft:
    """One node's RaftClient over a :class:`SharedLog`: only the node that leads the current epoch may append."""

    def __init__(self, node_id: int, log: SharedLog) -> None:
        self.node_id = node_id
        self.log = log
        self.refuse: NotLeaderError | None = None  # make the next appends fail

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
