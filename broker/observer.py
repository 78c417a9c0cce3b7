"""A broker's metadata: the log replicated as a Raft observer, and the image built from it by the controllers' code.

:class:`MetadataObserver` keeps, under the broker's metadata directory (``meta.properties`` and
``__cluster_metadata-0/``: a controller's data directory layout):

- a :class:`~quorum.raft.runtime.RaftNode` whose id is not among the voters, hence an *observer*: it finds the
  leader by asking a random voter, fetches from it, never votes and never counts for the high watermark. A broker
  that needs offsets the leader no longer holds (retention deleted them below its latest snapshot) fetches that
  snapshot first (FetchSnapshot) and the log after it.
- a :class:`~controller.quorum_controller.QuorumController` as the *image*: the committed batches go through the
  same replay as on every controller. It is never active (a broker is no voter): it answers reads from its
  committed state (``serve_local_reads``) and refuses writes with NOT_CONTROLLER naming the leader. It writes its
  own snapshots under the same policy as a controller's (as Kafka's brokers do since 3.4), and one more as the last
  step of a clean shutdown (:meth:`MetadataObserver.snapshot_before_close`); registered before the observer starts,
  it loads the latest one at once: a restarted broker replays only the log after it.

With ``tls`` (the broker's own settings, certificate ``broker-<id>``) its fetches and DescribeQuorum calls to the
voters go over mutual TLS, each voter held to the name ``controller-<id>`` in its certificate.

The broker reports :attr:`MetadataObserver.current_metadata_offset` in its heartbeats; the controller unfences it
once that offset reaches its registration, as Kafka's does. The first catch-up (the image reaching what the leader
had committed when the observer found it, asked by DescribeQuorum) is logged as ``metadata_caught_up``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from pathlib import Path

import grpc
import structlog

from controller.quorum_controller import ControllerSettings, QuorumController
from pykraft.security.channels import ClientTls, aio_channel
from pykraft.security.peer_identity import controller_name
from pykraft.security.tls import TlsSettings, channel_credentials
from quorum.fault import FaultHandler, LoggingFaultHandler, fault_message, spawn
from quorum.log.log import LogConfig, MetadataLog
from quorum.log.meta_properties import DirectoryLock, ensure_meta_properties
from quorum.log.quorum_state import QuorumStateStore
from quorum.log.snapshots import SnapshotId
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.roles import Follower
from quorum.raft.runtime import RaftNode
from quorum.transport.pb import quorum_pb2, quorum_pb2_grpc

log = structlog.get_logger("broker.observer")

WATCH_INTERVAL_S = 0.02  # how often the first catch-up is looked for
DESCRIBE_TIMEOUT_S = 2.0
STATUS_INTERVAL_S = 30.0  # how often a metadata_observer_status line is logged after it
# How long a clean shutdown waits for the image to reach the leader's commits, at most (and at most half its time):
# while the image keeps moving. A broker's own controlled shutdown at 2M partitions commits ~1M changes, which every
# node replays at once; one image was still 571k records behind after 10 s, and its restart replayed them.
SHUTDOWN_CATCH_UP_S = 30.0
SHUTDOWN_STALL_S = 3.0  # an image that has not moved for this long is not catching up: snapshot it as it is
# Catching up and writing; then the broker exits without it. Its child, below the broker's priority while the peers
# digest the same controlled shutdown, took 41 s for 5 CPU s at 2M partitions: room for that after a 30 s wait.
SHUTDOWN_SNAPSHOT_TIMEOUT_S = 90.0


class MetadataObserver:
    """Open the metadata directory (lock, ``meta.properties``, the log) at construction; :meth:`start` within the
    running loop, :meth:`close` at the end. Raises :class:`ValueError` for a broker id that is a voter's,
    :class:`~quorum.log.meta_properties.StorageIdentityError` for a directory of another node or cluster (or in use),
    :class:`~quorum.log.log.LogCorruptionError` or :class:`OSError` for a log that cannot be opened."""

    def __init__(
        self,
        broker_id: int,
        voters: dict[int, VoterAddress],
        cluster_id: str,
        data_dir: Path | str,
        raft_config: RaftConfig | None = None,
        log_config: LogConfig | None = None,
        controller_settings: ControllerSettings | None = None,
        faults: FaultHandler | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        if broker_id in voters:
            raise ValueError(
                f"broker id {broker_id} is a controller's node id in the voter set "
                f"({','.join(map(str, voters.values()))}): a broker needs an id of its own"
            )
        # Read before the directory is locked: a bad file (TlsConfigError) leaves nothing to release.
        self._credentials = channel_credentials(tls) if tls is not None else None
        self.broker_id = broker_id
        self.voters = voters
        self.cluster_id = cluster_id
        self.data_dir = Path(data_dir)
        self.faults: FaultHandler = faults or LoggingFaultHandler()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = DirectoryLock(self.data_dir)
        try:
            ensure_meta_properties(self.data_dir, cluster_id, broker_id)
            self.log = MetadataLog.open(self.data_dir, log_config or LogConfig())
        except BaseException:
            self._lock.release()
            raise
        self.node = RaftNode(
            node_id=broker_id,
            voters=voters,
            cluster_id=cluster_id,
            log=self.log,
            store=QuorumStateStore(self.log.dir),
            config=raft_config or RaftConfig(),
            faults=self.faults,
        )
        if self._credentials is not None:
            # An observer only dials out: no inbound peer streams to authenticate.
            self.node.transport.secure(self._credentials, None, controller_name)
        # An observer fetches over gRPC streams, not frames: a broker's loop is the one replaying what it fetches,
        # and at 2M partitions it waits seconds for a core. Frames are read on that loop, a buffer at a time, so an
        # 8 MiB answer took many such turns and its fetch timed out over and over (benchmarks/scale.py at 2M: 16-19
        # fetch timeouts per broker, all caught up 185 s after the start; over gRPC, whose own threads take the
        # bytes off the socket whatever the loop is doing, 2-6 and 96 s).
        self.node.transport.dial_frames = False
        settings = dataclasses.replace(controller_settings or ControllerSettings(), serve_local_reads=True)
        self.image = QuorumController(broker_id, self.node, settings, self.faults)
        self.catch_up_seconds: float | None = None  # from start() to the first catch-up
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> None:
        started = time.monotonic()
        self.image.start()  # registered before Raft starts: the latest snapshot is loaded now, timers not yet running
        self.node.start()
        log.info(
            "metadata_observer_started",
            broker_id=self.broker_id,
            data_dir=str(self.data_dir),
            voters=",".join(map(str, self.voters.values())),
            log_start_offset=self.log.start_offset,
            log_end_offset=self.log.end_offset,
            loaded_offset=self.current_metadata_offset,
            load_seconds=round(time.monotonic() - started, 3),
        )
        self._watcher = spawn(
            self._watch(started),
            name=f"metadata-observer-{self.broker_id}",
            on_error=lambda e: self.faults.handle_fault(fault_message("watching the metadata observer", e), e),
        )

    async def snapshot_before_close(self, timeout_s: float = SHUTDOWN_SNAPSHOT_TIMEOUT_S) -> SnapshotId | None:
        """A clean shutdown's last step (Kafka's brokers have none): once the image holds what the leader has
        committed (its controlled shutdown's changes among them), snapshot it if at least
        ``pykraft.shutdown.snapshot.min.bytes`` were committed since the latest snapshot (1 MiB: ~35,000 partition
        changes, ~0.1 s to replay), so that a restart loads that and replays nothing.

        Returns the snapshot written; None if none was: not worth it, or it failed or ran out of time (logged; the
        log still holds everything, and :meth:`close` aborts a write still under way). An image still behind after
        :data:`SHUTDOWN_CATCH_UP_S`, or that stopped moving for :data:`SHUTDOWN_STALL_S` (a broker stopped while
        catching up, or cut off), is snapshotted as it is. Its child runs below the broker's priority, as every
        snapshot's: the peers are digesting the same controlled shutdown meanwhile (see the README)."""
        started = time.monotonic()
        deadline = started + timeout_s
        caught_up_by = started + min(timeout_s / 2, SHUTDOWN_CATCH_UP_S)
        target = await self._leader_high_watermark() or self.high_watermark
        offset, moved_at = self.current_metadata_offset, started
        while offset + 1 < target and (now := time.monotonic()) < caught_up_by and now - moved_at < SHUTDOWN_STALL_S:
            await asyncio.sleep(WATCH_INTERVAL_S)
            if self.current_metadata_offset != offset:
                offset, moved_at = self.current_metadata_offset, time.monotonic()
        since, least = self.image.snapshots.bytes_since, self.image.settings.shutdown_snapshot_min_bytes
        fields = {"broker_id": self.broker_id, "metadata_offset": self.current_metadata_offset, "bytes_since": since}
        if least < 0 or since < max(1, least):
            log.info("shutdown_snapshot_skipped", min_bytes=least, **fields)
            return None
        try:
            snapshot_id = await asyncio.wait_for(
                self.image.force_snapshot("a clean shutdown"), max(0.0, deadline - time.monotonic())
            )
        except Exception as e:  # TimeoutError included: exiting matters more
            log.warning("shutdown_snapshot_failed", error=f"{type(e).__name__}: {e}", timeout_s=timeout_s, **fields)
            return None
        log.info(
            "shutdown_snapshot", snapshot_id=str(snapshot_id), seconds=round(time.monotonic() - started, 3), **fields
        )
        return snapshot_id

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(BaseException):
                await self._watcher
        await self.image.close()
        if self.node.core is not None:
            await self.node.shutdown(graceful=False)  # an observer has no leadership to hand over
        else:
            self.log.close()
        self._lock.release()

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def current_metadata_offset(self) -> int:
        """The last offset replayed into the image (-1: none): what heartbeats report."""
        return self.image.committed_offset

    @property
    def high_watermark(self) -> int:
        """Offsets below it are committed, as far as this observer has learned from the leader."""
        return self.node.core.high_watermark if self.node.core is not None else 0

    @property
    def leader_id(self) -> int:
        return self.node.leader_and_epoch.leader_id

    @property
    def caught_up(self) -> bool:
        """The image holds everything below the high watermark this observer learned, and at least what the leader
        had committed when it first found it. (The learned one alone is not enough: a follower's high watermark is
        capped by its own log end, so mid catch-up it only says how far the fetched records go.)"""
        if self.catch_up_seconds is None or not self._following():
            return False
        return self.current_metadata_offset + 1 >= self.high_watermark

    def describe(self) -> dict[str, object]:
        latest = self.log.latest_snapshot()
        return {
            "leader_id": self.leader_id,
            "epoch": self.node.leader_and_epoch.epoch,
            "high_watermark": self.high_watermark,
            "metadata_offset": self.current_metadata_offset,
            "log_start_offset": self.log.start_offset,
            "log_end_offset": self.log.end_offset,
            "latest_snapshot": str(latest) if latest is not None else None,
            "snapshots_installed": self.node.core.metrics.snapshots_installed if self.node.core else 0,
            "snapshots_generated": self.image.metrics.snapshots_generated,
        }

    def _following(self) -> bool:
        """Fetching from a leader: not looking for one, not in the middle of fetching its snapshot."""
        core = self.node.core
        if core is None or not isinstance(core.role, Follower):
            return False
        return core.role.last_fetch_ok_ms is not None and core.role.snapshot is None

    async def _leader_high_watermark(self) -> int | None:
        """The leader's own high watermark (DescribeQuorum on its admin service); None if it cannot be asked."""
        address = self.voters.get(self.leader_id)
        if address is None:
            return None
        host = f"[{address.host}]" if ":" in address.host else address.host  # gRPC's form of an IPv6 address
        try:
            tls = ClientTls(self._credentials, controller_name(self.leader_id)) if self._credentials else None
            async with aio_channel(f"{host}:{address.port}", tls) as channel:
                stub = quorum_pb2_grpc.QuorumAdminStub(channel)
                response = await stub.DescribeQuorum(quorum_pb2.DescribeQuorumRequest(), timeout=DESCRIBE_TIMEOUT_S)
        except grpc.aio.AioRpcError:
            return None
        return response.high_watermark if response.role == "Leader" else None

    async def _watch(self, started: float) -> None:
        """The first catch-up: once following a leader, ask it for its high watermark (this observer's own is capped
        by what it has fetched so far), then wait for the image to reach it; log how long that took."""
        target: int | None = None
        while target is None:
            await asyncio.sleep(WATCH_INTERVAL_S)
            if self._following():
                target = await self._leader_high_watermark()
        while self.current_metadata_offset + 1 < target:
            await asyncio.sleep(WATCH_INTERVAL_S)
        self.catch_up_seconds = time.monotonic() - started
        log.info(
            "metadata_caught_up",
            broker_id=self.broker_id,
            seconds=round(self.catch_up_seconds, 3),
            leader_high_watermark=target,
            **self.describe(),
        )
        while True:
            await asyncio.sleep(STATUS_INTERVAL_S)
            log.info("metadata_observer_status", broker_id=self.broker_id, caught_up=self.caught_up, **self.describe())
