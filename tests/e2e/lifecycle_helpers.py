"""Helpers for the lifecycle tests (elections, AlterPartition, deletion, CreatePartitions, configs): one
``pykraft node`` voter (a real process: the gRPC service and controller as shipped) and broker control planes run
by the test itself, so that the test decides exactly when a broker shuts down, comes back or changes an ISR.

A broker here is what ``pykraft broker`` is to the controller — register, heartbeat, controlled shutdown — driven
with gRPC's blocking API from a thread. gRPC's asyncio support wants one event loop at a time in a process, so
the asyncio code under test (the AdminClient, the CLI run in-process) gets the only loop, one call at a time."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from controller.requests import AlterPartitionData, AlterPartitionResponse, AlterPartitionTopic
from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.client import AdminClient
from pykraft.testing import Cluster
from quorum.errors import Errors
from quorum.log.message import Uuid

SESSION_TIMEOUT_MS = 4000
HEARTBEAT_INTERVAL_S = 0.2


@dataclass
class BrokerState:
    broker_id: int
    rack: str
    epoch: int = -1
    metadata_offset: int = -1
    fenced: bool = True
    beating: bool = False  # the background thread heartbeats for it
    lock: threading.Lock = field(default_factory=threading.Lock)


class Brokers:
    """Broker control planes: the test registers and shuts them down; a thread keeps their sessions alive."""

    def __init__(self, bootstrap: str, racks: dict[int, str]) -> None:
        self.channel = grpc.insecure_channel(bootstrap)  # one voter: it is always the controller
        self.stub = pb_grpc.ControllerStub(self.channel)
        self.brokers = {b: BrokerState(b, rack) for b, rack in racks.items()}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat_forever, name="test-brokers", daemon=True)
        self._thread.start()

    def _heartbeat(self, b: BrokerState, want_shutdown: bool = False) -> pb.BrokerHeartbeatResponse:
        request = pb.BrokerHeartbeatRequest(
            broker_id=b.broker_id,
            broker_epoch=b.epoch,
            current_metadata_offset=b.metadata_offset,
            want_shutdown=want_shutdown,
            timeout_ms=5000,
        )
        r = self.stub.BrokerHeartbeat(request, timeout=10)
        if r.error_code:
            raise RuntimeError(f"broker {b.broker_id} heartbeat: {Errors(r.error_code).name} {r.error_message}")
        b.metadata_offset = max(b.metadata_offset, r.metadata_offset)
        b.fenced = r.is_fenced
        return r

    def _beat_forever(self) -> None:
        while not self._stop.wait(HEARTBEAT_INTERVAL_S):
            for b in list(self.brokers.values()):
                with b.lock:
                    if not b.beating:
                        continue
                    try:
                        self._heartbeat(b)
                    except (grpc.RpcError, RuntimeError) as e:
                        self.errors.append(str(e))

    def start(self, *broker_ids: int) -> None:
        """Register (a new incarnation) and heartbeat until unfenced; every broker when none is named."""
        for broker_id in broker_ids or tuple(self.brokers):
            b = self.brokers[broker_id]
            with b.lock:
                request = pb.RegisterBrokerRequest(
                    broker_id=broker_id, incarnation_id=str(Uuid.random()), rack=b.rack, timeout_ms=5000
                )
                request.listeners.add(name="PLAINTEXT", host="127.0.0.1", port=19000 + broker_id)  # advertised only
                r = self.stub.RegisterBroker(request, timeout=10)
                assert r.error_code == 0, r
                b.epoch, b.metadata_offset, b.fenced, b.beating = r.broker_epoch, -1, True, True
        for broker_id in broker_ids or tuple(self.brokers):
            b = self.brokers[broker_id]
            deadline = time.monotonic() + 30
            while b.fenced:
                with b.lock:
                    self._heartbeat(b)
                assert time.monotonic() < deadline, f"broker {broker_id} still fenced after 30 s"
                time.sleep(0.02)

    def controlled_shutdown(self, broker_id: int) -> None:
        """Heartbeat with want_shutdown until the controller says to shut down (leaderships moved, out of every
        ISR it can leave), then stop heartbeating."""
        b = self.brokers[broker_id]
        deadline = time.monotonic() + 30
        with b.lock:
            while not self._heartbeat(b, want_shutdown=True).should_shut_down:
                assert time.monotonic() < deadline, f"broker {broker_id} not told to shut down within 30 s"
                time.sleep(0.05)
            b.beating = False

    def epoch(self, broker_id: int) -> int:
        return self.brokers[broker_id].epoch

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.channel.close()


class Admin:
    """The AdminClient's methods, called synchronously: each call runs on a fresh event loop of its own."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            async with AdminClient(self.bootstrap) as admin:
                return await getattr(admin, name)(*args, **kwargs)

        return lambda *args, **kwargs: asyncio.run(call(*args, **kwargs))


@dataclass
class LifecycleCluster:
    """One voter and the test's brokers, with a synchronous admin client for the test."""

    cluster: Cluster
    brokers: Brokers
    admin: Admin

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.cluster.nodes.values())


def start_cluster(root: Path, racks: dict[int, str], node_args: list[str] | None = None) -> LifecycleCluster:
    args = ["--override", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}", *(node_args or [])]
    cluster = Cluster(root=root, size=1, extra_args=args)
    cluster.start()
    brokers = None
    try:
        asyncio.run(cluster.wait_for_leader(timeout=60))
        bootstrap = ",".join(n.address for n in cluster.nodes.values())
        brokers = Brokers(bootstrap, racks)
        brokers.start()
        return LifecycleCluster(cluster, brokers, Admin(bootstrap))
    except BaseException:
        if brokers is not None:
            brokers.close()
        cluster.stop()
        for node in cluster.nodes.values():
            node.kill()
        raise


def stop_cluster(lc: LifecycleCluster) -> None:
    try:
        lc.brokers.close()
    finally:
        lc.cluster.stop()
        for node in lc.cluster.nodes.values():
            node.kill()


def change_isr(lc: LifecycleCluster, topic: str, index: int, isr: list[int]) -> AlterPartitionResponse:
    """The partition's leader asks for a new ISR (an AlterPartition from its current state), as a broker whose
    followers caught up (or fell behind) would; a reassignment whose target replicas are all in it completes."""
    [d] = lc.admin.describe_topics([topic])
    p = next(p for p in d.partitions if p.partition == index)
    data = AlterPartitionData(index, p.leader_epoch, tuple((b, lc.brokers.epoch(b)) for b in isr), p.partition_epoch)
    return lc.admin.alter_partition(
        p.leader, lc.brokers.epoch(p.leader), [AlterPartitionTopic(Uuid(d.topic_id), (data,))]
    )
