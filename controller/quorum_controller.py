"""The QuorumController: turns requests into metadata records, through Raft, into memory, back into responses.

Write path (Kafka's ControllerWriteEvent): on the event queue, a manager generates records and a response without
changing anything; the records go to Raft as one atomic batch; they are replayed into memory at once, stamped
with their offsets (so the next request sees them); the response waits in the purgatory until the high watermark
passes the batch. Leadership lost: every waiting response fails with NOT_CONTROLLER and the in-memory state drops
all uncommitted changes. Reads wait for the highest pending offset, then read committed state only — a client
reads its own writes and never a write that may still be undone.

A standby replays committed records through the same ``replay``, so a newly elected controller already holds the
state; Raft announces its leadership only after every earlier batch has been delivered. Every controller, active or
not, snapshots its committed state and loads snapshots back (``controller/snapshot.py``).

A record that cannot be applied is fatal, as in Kafka: on the active controller it is replayed *before* it is
appended (nothing of the batch reaches the log) and the fault handler stops the process; on a standby,
``handle_commit`` raises :class:`ReplayError` and Raft's delivery stops the process. Skipping the record instead
would leave this node's state silently different from every other node's.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from controller.acl_control import AclControl, AclCreateResult, AclDeleteResult, DescribeAclsResult
from controller.authorizer import AclBindingFilter, StandardAcl, StandardAuthorizer
from controller.cluster_control import (
    DEFAULT_SESSION_TIMEOUT_MS,
    BrokerRegistration,
    ClusterControl,
    HeartbeatReply,
    HeartbeatRequest,
    RegisterBrokerRequest,
)
from controller.config_control import ConfigControl
from controller.configs import TOPIC_RESOURCE
from controller.departures import DEPARTURE_CHUNK_PARTITIONS, BrokerDepartures
from controller.event_queue import MAX_QUEUED_EVENTS, Event, EventQueue, relay
from controller.mutation_quota import WINDOW_NUM, WINDOW_SECONDS, ControllerMutationQuotas
from controller.placement import PLACERS
from controller.purgatory import Purgatory
from controller.quota_control import (
    AlterQuotaResult,
    DescribeQuotasResult,
    FilterComponent,
    QuotaAlteration,
    QuotaControl,
)
from controller.records import (
    BeginTransactionRecord,
    DecodeError,
    EndTransactionRecord,
    FeatureLevelRecord,
    NoOpRecord,
    ZkMigrationStateRecord,
    deserialize,
    serialize,
)
from controller.replication_control import (
    METADATA_TOPIC,
    NewTopic,
    PartitionRegistration,
    ReplicationControl,
    ReplicationSettings,
    TopicInfo,
    TopicResult,
)
from controller.requests import (
    AlterConfigsResource,
    AlterPartitionResponse,
    AlterPartitionTopic,
    ConfigResource,
    ConfigResourceResult,
    CreatePartitionsResult,
    DeleteTopicResult,
    DeleteTopicState,
    DescribeConfigsResult,
    ElectionResult,
    NewPartitions,
    OngoingTopicReassignment,
    ReassignableTopic,
    ReassignableTopicResult,
)
from controller.results import NO_ERROR, ApiError, ControllerResult
from controller.snapshot import Snapshotter, load_records
from controller.timeline import Timeline, TimelineDict
from controller.topic_names import shown
from quorum.errors import Errors, KafkaError, NotLeaderError
from quorum.fault import FaultHandler, LoggingFaultHandler, fault_message
from quorum.histogram import Histogram
from quorum.log.message import ApiMessage, Uuid
from quorum.log.snapshots import SnapshotId
from quorum.memory import release_freed_memory
from quorum.raft.client import CommittedBatch, LeaderAndEpoch, RaftClient, SnapshotReader

log = structlog.get_logger("controller")
# Partitions of one AlterPartition applied per event (QuorumController.alter_partition): ~10-20 ms at 2M partitions.
ALTER_PARTITION_TURN = 500
SLOW_REQUEST_S = 0.1  # a request answered this late is logged with where its time went (slow_request)
LARGE_WRITE_RECORDS = 10_000  # one event writing this many records is logged (which event, how many)
NO_FULL_COLLECTION = 1 << 30  # generation-2 threshold while a request's records are made (see _write)
T = TypeVar("T")

METADATA_VERSION = 22  # 4.0-IV0


class ReplayError(RuntimeError):
    """A committed record this controller cannot decode or apply: its state no longer follows the log."""


class NotControllerError(KafkaError):
    code = Errors.NOT_CONTROLLER

    def __init__(self, message: str, leader_id: int = -1) -> None:
        super().__init__(message)
        self.leader_id = leader_id


@dataclass
class ControllerSettings:
    num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS  # broker.session.timeout.ms
    replica_placer: str = "striped"  # striped | rack-unaware
    max_idle_interval_ms: int = 500  # metadata.max.idle.interval.ms: a NoOpRecord when nothing else was written
    fence_check_interval_ms: int = 1000
    departure_chunk_partitions: int = DEPARTURE_CHUNK_PARTITIONS  # a leaving broker's partitions per event (ours)
    delete_topic_enable: bool = True  # delete.topic.enable
    auto_leader_rebalance_enable: bool = True  # auto.leader.rebalance.enable
    leader_imbalance_check_interval_s: float = 300  # leader.imbalance.check.interval.seconds
    unclean_election_interval_ms: int = 300_000  # Kafka's internal unclean.leader.election.interval.ms
    static_broker_configs: dict[str, str] = field(default_factory=dict)  # this node's broker configs (properties)
    snapshot_max_new_record_bytes: int = 20 * 1024 * 1024  # metadata.log.max.record.bytes.between.snapshots
    snapshot_max_interval_ms: int = 3_600_000  # metadata.log.max.snapshot.interval.ms; 0: no time trigger
    # pykraft.snapshot.growth.ratio (ours): a size-triggered snapshot also waits for this share of the latest
    # snapshot's size to be committed since. Each snapshot costs the whole image, so with Kafka's fixed 20 MiB a
    # growing image costs quadratic work (measured: 12 snapshots, 12M records written by each of 9 processes while
    # 2M partitions were created); in proportion to the image it is linear. 0: Kafka's rule exactly.
    snapshot_growth_ratio: float = 1.0
    # pykraft.shutdown.snapshot.min.bytes (ours): a broker's image is snapshotted as the last step of a clean
    # shutdown when at least this many bytes were committed since its latest snapshot (broker/observer.py); -1:
    # never. Its controlled shutdown alone commits ~20 MiB at 2M partitions, all replayed again at a restart.
    shutdown_snapshot_min_bytes: int = 1 << 20
    super_users: str = ""  # super.users: principals allowed everything, semicolon-separated
    allow_everyone_if_no_acl_found: bool = False  # allow.everyone.if.no.acl.found
    # authorizer.class.name: empty = requests are not authorized; Kafka's StandardAuthorizer (pykraft/authorization.py)
    authorizer_class_name: str = ""
    # A broker's image: never a voter, so never active; it answers reads from its committed state (as a Kafka
    # broker answers Metadata from its MetadataImage) instead of refusing them with NOT_CONTROLLER.
    serve_local_reads: bool = False
    # controller.event.queue.max.size (ours; Kafka's queue is unbounded): requests waiting for the controller before
    # more are refused with REQUEST_TIMED_OUT (controller/event_queue.py says why 10,000).
    event_queue_max_size: int = MAX_QUEUED_EVENTS
    # KIP-599's token buckets hold rate x window.num x window.size.seconds of partitions (controller/mutation_quota.py)
    quota_window_num: int = WINDOW_NUM  # controller.quota.window.num
    quota_window_size_s: int = WINDOW_SECONDS  # controller.quota.window.size.seconds


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: Any
    partitions: tuple[tuple[int, PartitionRegistration], ...]
    configs: tuple[tuple[str, str], ...]
    error: ApiError = NO_ERROR


@dataclass
class ControllerMetrics:
    requests: dict[str, int]
    request_seconds: dict[str, float]
    records_appended: int = 0
    commit_seconds_total: float = 0.0
    commit_time: Histogram = field(default_factory=Histogram)  # append to commit, of this controller's batches
    # Per (api, Kafka error name of the request's outcome: NONE when it succeeded), submit to answer.
    request_time: dict[tuple[str, str], Histogram] = field(default_factory=dict)
    commits: int = 0
    snapshots_generated: int = 0
    snapshot_failures: int = 0
    last_snapshot_id: SnapshotId | None = None
    last_snapshot_time: float | None = None  # time.monotonic() when its image was taken
    last_snapshot_seconds: float = 0.0  # image taken to file frozen
    last_snapshot_bytes: int = 0
    bytes_since_snapshot: int = 0  # committed batches' bytes not in a snapshot yet
    snapshot_load_seconds: float = 0.0  # the last snapshot loaded


class QuorumController:
    def __init__(
        self,
        node_id: int,
        raft: RaftClient,
        settings: ControllerSettings | None = None,
        faults: FaultHandler | None = None,
    ) -> None:
        self.node_id = node_id
        self.raft = raft
        self.settings = settings or ControllerSettings()
        self.faults: FaultHandler = faults or LoggingFaultHandler()
        self.failed = False  # a record failed to apply: this controller's memory cannot be trusted any more
        # Kafka's StandardAuthorizer over the committed ACLs (AclControl.publish keeps it so), for the service layer.
        self.authorizer = StandardAuthorizer(self.settings.super_users, self.settings.allow_everyone_if_no_acl_found)
        self._fresh_state()
        # KIP-599's buckets: this node's memory, over the committed quotas (controller/mutation_quota.py).
        self.mutation_quotas = ControllerMutationQuotas(
            lambda entity, key: self.quotas.lookup(entity, key),
            window_num=self.settings.quota_window_num,
            window_s=self.settings.quota_window_size_s,
        )
        queue_failed = fault_message("running the controller's event queue", None)
        self.queue = EventQueue(
            f"controller-{node_id}",
            lambda e: self.faults.handle_fault(queue_failed, e),
            max_size=self.settings.event_queue_max_size,
        )
        self.purgatory = Purgatory()
        self.metrics = ControllerMetrics({}, {})
        self.active_epoch: int | None = None  # the Raft epoch in which this controller is active
        self.leader = LeaderAndEpoch(-1, 0)
        self.committed_offset = -1  # last committed offset replayed or confirmed
        self._written: deque[tuple[int, int]] = deque()  # (first, last) offsets this controller appended
        self._wrote_since_noop = False
        self._append_times: dict[int, float] = {}
        self.snapshots = Snapshotter(self)

    def _fresh_state(self) -> None:
        """Empty replicated state and the managers over it: at start, and before loading a snapshot."""
        if hasattr(self, "replication"):
            self._release_state()
        self.timeline = Timeline()
        self.cluster = ClusterControl(self.timeline, self.settings.session_timeout_ms)
        placer = PLACERS[self.settings.replica_placer](random.Random())
        replication = ReplicationSettings(
            self.settings.num_partitions, self.settings.default_replication_factor, self.settings.delete_topic_enable
        )
        self.configs = ConfigControl(
            self.timeline,
            self.settings.static_broker_configs,
            topic_exists=lambda name: name in self.replication.topics_by_name,
            broker_registered=lambda broker_id: broker_id in self.cluster.brokers,
            node_id=self.node_id,
        )
        self.replication = ReplicationControl(self.timeline, self.cluster, placer, replication, self.configs)
        chunk = self.settings.departure_chunk_partitions
        self.departures = BrokerDepartures(self.cluster, self.replication.elections, chunk)
        self.acls = AclControl(self.timeline)
        self.quotas = QuotaControl(self.timeline)
        # Timeline state like the rest: a renounce must forget an uncommitted activation, or it is never rewritten.
        self._features: TimelineDict[str, int] = TimelineDict(self.timeline)

    # -- lifecycle -------------------------------------------------------------------------------------------

    def _release_state(self) -> None:
        """Empty every map of the state about to be replaced. Its managers refer to one another (cycles that only
        the collector can free) and a node freezes what survives its full collections (pykraft/gc_pauses.py): a
        replaced image of millions of partitions stayed in memory for good, one more at each snapshot loaded
        (a follower reloading during a run of elections grew past 4 GB)."""
        self.timeline.forget()  # its pending changes name the old maps
        r = self.replication
        owners = (
            self,
            self.cluster,
            self.configs,
            r,
            r.reassignments,
            r.elections,
            self.acls,
            self.quotas,
        )  # of state maps
        for owner in owners:
            for value in vars(owner).values():
                if isinstance(value, TimelineDict):
                    value.release()
        # Caches beside the maps, up to tens of thousands of entries each: freed with the cycle, i.e. never.
        r.shared.clear()
        r.partition_records.release()
        self.configs.release()

    def start(self) -> None:
        self.queue.start()
        self.raft.register(self)

    async def close(self) -> None:
        await self.snapshots.close()
        await self.queue.close(NotControllerError("the controller is shutting down", self.leader.leader_id))
        self.purgatory.fail_all(NotControllerError("the controller is shutting down", self.leader.leader_id))

    @property
    def active(self) -> bool:
        return self.active_epoch is not None

    @property
    def bootstrapped(self) -> bool:
        """The bootstrap records (metadata.version) are committed: an active controller writes them after it
        activates on an empty log, so a caller that must see a quiet log waits for this too."""
        return "metadata.version" in self._features.committed()

    # -- RaftListener ----------------------------------------------------------------------------------------

    def _replay_value(self, value: bytes, batch: CommittedBatch, i: int) -> None:
        """Decode and replay the ``i``-th record of a committed batch: the generic path."""
        offset = batch.base_offset + i
        try:
            message, _ = deserialize(value)
        except DecodeError as e:
            raise ReplayError(f"cannot decode the record at offset {offset}: {e}") from e
        try:
            self._replay(message, offset)
        except Exception as e:
            role = "active" if self.active else "standby"
            raise ReplayError(
                f"cannot apply the {type(message).__name__} at offset {offset} on the {role} controller "
                f"(batch {batch.base_offset}-{batch.last_offset}): {type(e).__name__}: {e}"
            ) from e

    def handle_commit(self, batch: CommittedBatch) -> None:
        """Apply a committed batch (the records this controller wrote itself were applied when written).
        Raises :class:`ReplayError` for a record it cannot decode or apply: Raft's delivery treats it as fatal."""
        if self.failed:
            return
        if not batch.is_control and not self._wrote(batch.base_offset, batch.last_offset):
            written = self._written
            # PartitionRecords from their bytes (most of what a standby replays), while nothing is pending: the
            # fast path writes committed state, as the generic replay does then. Anything else: the generic path.
            timeline = self.timeline
            pending = timeline.pending or timeline.offset is not None
            values = batch.records
            if not written and not pending:  # a standby's batch: runs of fast-path records, one call per run
                run = self.replication.partition_records.apply_run
                i = run(values)
                while i < len(values):
                    self._replay_value(values[i], batch, i)
                    i = run(values, i + 1)
            else:
                fast = None if pending else self.replication.partition_records.apply
                for i, value in enumerate(values):
                    offset = batch.base_offset + i
                    if written:
                        while written and written[0][1] < offset:
                            written.popleft()
                        if written and written[0][0] <= offset:
                            continue  # this controller replayed it when it appended it
                    if fast is None or not fast(value):
                        self._replay_value(value, batch, i)
        self.committed_offset = batch.last_offset
        self.timeline.commit_through(batch.last_offset)
        self.acls.publish(self.authorizer)
        self.purgatory.complete_up_to(batch.last_offset)
        started = self._append_times.pop(batch.last_offset, None)
        if started is not None:
            took = time.monotonic() - started
            self.metrics.commits += 1
            self.metrics.commit_seconds_total += took
            self.metrics.commit_time.observe(took)
        self.snapshots.committed(batch)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace all state with the snapshot's (Raft calls this at start, or on a standby that fell behind the
        leader's log start). Raises :class:`ReplayError` for a record that cannot be applied, as handle_commit."""
        snapshot_id = reader.snapshot_id
        if self.active:
            # Raft never does this: the active controller's uncommitted records would be lost under it.
            raise RuntimeError(f"node {self.node_id} is the active controller: it cannot load snapshot {snapshot_id}")
        if self.failed:
            return
        started = time.monotonic()
        self._fresh_state()
        self._written.clear()
        self._append_times.clear()
        try:
            records = load_records(self, reader.batches())
        except Exception as e:
            self.failed = True  # half loaded: nothing this controller holds can be trusted
            raise ReplayError(f"cannot load snapshot {snapshot_id}: {e}") from e
        self.committed_offset = snapshot_id.end_offset - 1
        self.acls.publish(self.authorizer)
        self.snapshots.loaded(snapshot_id, reader.last_contained_log_timestamp, getattr(reader, "size_bytes", 0))
        release_freed_memory()  # the replaced state's pages: else the RSS stays at both images' peak
        seconds = time.monotonic() - started
        self.metrics.snapshot_load_seconds = seconds
        log.info(
            "snapshot_loaded",
            node_id=self.node_id,
            snapshot_id=str(snapshot_id),
            records=records,
            seconds=round(seconds, 3),
            records_per_s=round(records / seconds) if seconds > 0 else None,
        )

    async def force_snapshot(self, reason: str = "an operator asked for one") -> SnapshotId | None:
        """A snapshot of the committed state now, returned once frozen (``pykraft snapshot create``); the latest
        snapshot's id if nothing was committed since it, None if nothing ever was. Raises what made it fail."""
        return await self.snapshots.force(reason)

    def _wrote(self, first: int, last: int) -> bool:
        """Did this controller append every offset in [first, last]? (Then it has replayed them all already.)"""
        written = self._written
        while written and written[0][1] < first:
            written.popleft()
        expected = first
        for lo, hi in written:
            if lo > expected:
                return False
            expected = hi + 1
            if expected > last:
                return True
        return False

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        was_active = self.active
        self.leader = leader
        if leader.leader_id == self.node_id:
            if self.active_epoch != leader.epoch:
                self._claim(leader.epoch)
        elif was_active:
            self._renounce(f"node {leader.leader_id} leads epoch {leader.epoch}")

    def _claim(self, epoch: int) -> None:
        if self.failed:
            return
        self.active_epoch = epoch
        self._written.clear()
        self.cluster.start_sessions(_now_ms())
        self.departures.reset()
        log.info("controller_activated", node_id=self.node_id, epoch=epoch, committed_offset=self.committed_offset)
        if "metadata.version" not in self._features:
            future = self.queue.prepend(Event("activation", lambda: self._write(self._activation_records)))
            future.add_done_callback(_log_failure("activation"))
        self._schedule_periodic()

    def _renounce(self, why: str) -> None:
        log.warning("controller_renounced", node_id=self.node_id, epoch=self.active_epoch, reason=why)
        self.active_epoch = None
        self.departures.reset()
        error = NotControllerError(f"this node is no longer the controller: {why}", self.leader.leader_id)
        self.purgatory.fail_all(error)
        self.timeline.revert()
        self._written.clear()  # whatever of ours still commits is replayed like anyone else's records
        self._append_times.clear()
        for tag in _PERIODIC:
            self.queue.cancel(tag)

    def _activation_records(self) -> ControllerResult[None]:
        # Kafka's ActivationRecordsGenerator on an empty log: the bootstrap records in one transaction.
        return ControllerResult(
            [
                BeginTransactionRecord(name="Bootstrap records"),
                FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION),
                ZkMigrationStateRecord(zk_migration_state=0),
                EndTransactionRecord(),
            ],
            None,
        )

    # -- periodic work ---------------------------------------------------------------------------------------

    def _schedule_periodic(self) -> None:
        if not self.active:
            return
        now = time.monotonic()
        self._schedule_departures(self.settings.fence_check_interval_ms / 1000)
        if self.settings.max_idle_interval_ms > 0:
            self.queue.schedule(
                "noop", now + self.settings.max_idle_interval_ms / 1000, Event("maybeWriteNoOp", self._maybe_noop)
            )
        if self.settings.auto_leader_rebalance_enable:
            self._schedule_balance(self.settings.leader_imbalance_check_interval_s)
        self._schedule_unclean(self.settings.unclean_election_interval_ms / 1000)

    def _schedule_balance(self, delay_s: float) -> None:
        self.queue.schedule(
            "balance-leaders", time.monotonic() + delay_s, Event("maybeBalancePartitionLeaders", self._balance)
        )

    def _schedule_unclean(self, delay_s: float) -> None:
        self.queue.schedule(
            "elect-unclean-leaders", time.monotonic() + delay_s, Event("maybeElectUncleanLeaders", self._unclean)
        )

    def _balance(self) -> Any:
        """Kafka's auto leader balancing: preferred elections for imbalanced partitions, at most 1000 per run;
        when a run hits the cap, the next one follows at once (10 ms), else after the check interval."""
        if not self.active:
            return None
        result = self.replication.elections.balance_leaders()
        self._schedule_balance(0.01 if result.response else self.settings.leader_imbalance_check_interval_s)
        if result.records:
            log.info("leaders_balanced", node_id=self.node_id, partitions=len(result.records))
        return self._write(lambda: result)

    def _unclean(self) -> Any:
        """Unclean elections for leaderless partitions whose topic allows them (the config may have changed since
        they lost their leader)."""
        if not self.active:
            return None
        result = self.replication.elections.elect_unclean_leaders()
        self._schedule_unclean(0.01 if result.response else self.settings.unclean_election_interval_ms / 1000)
        if result.records:
            log.warning("unclean_leaders_elected", node_id=self.node_id, partitions=len(result.records))
        return self._write(lambda: result)

    def _step_departures(self) -> Any:
        """Kafka's periodic stale-broker check, and the moves of a leaving broker (fenced for a lapsed session, or
        shutting down) one step at a time (controller/departures.py); the next step follows at once, after
        whatever is queued meanwhile."""
        if not self.active:
            return None
        departures = self.departures
        result = departures.step(_now_ms())
        if departures.abandoned is not None:
            # It heartbeated, or was fenced, shut down or unregistered by another request meanwhile.
            log.info("broker_fencing_abandoned", node_id=self.node_id, broker=departures.abandoned, reason="not stale")
        if result is None:
            self._schedule_departures(self.settings.fence_check_interval_ms / 1000)
            return None
        if result.response:
            log.info("brokers_fenced", node_id=self.node_id, brokers=result.response, reason="session timed out")
        elif (progress := departures.progress)[0] <= departures.chunk and progress[1] > departures.chunk:
            log.info("broker_leaving", node_id=self.node_id, broker=departures.broker_id, partitions=progress[1])
        self._schedule_departures(0)
        return self._write(lambda: result)

    def _schedule_departures(self, delay_s: float) -> None:
        self.queue.schedule(
            "broker-departures", time.monotonic() + delay_s, Event("brokerDepartures", self._step_departures)
        )

    def _maybe_noop(self) -> Any:
        if not self.active:
            return None
        self.queue.schedule(
            "noop",
            time.monotonic() + self.settings.max_idle_interval_ms / 1000,
            Event("maybeWriteNoOp", self._maybe_noop),
        )
        if self._wrote_since_noop or self.purgatory:
            self._wrote_since_noop = False
            return None  # something was written recently enough
        return self._write(lambda: ControllerResult([NoOpRecord()], None))

    # -- the write and read paths ----------------------------------------------------------------------------

    def _check_active(self) -> int:
        if self.active_epoch is None:
            raise NotControllerError(
                f"node {self.node_id} is not the controller; the leader is node {self.leader.leader_id}",
                self.leader.leader_id,
            )
        return self.active_epoch

    def _write(self, generate: Callable[[], ControllerResult[T]]) -> Any:
        """Generate, apply and append a request's records; the purgatory's future for its response.

        No full collection runs meanwhile; the one that came due runs at the end. A large request's records (a
        CreateTopics of 99 topics: ~10,000 PartitionRecords, ~90,000 tracked objects with their lists) live until
        this returns, so the young collections during it promote them, and a full one then scanned them all, about
        once per such request, to free nothing: reference counting frees them at the return. Measured in process
        at 500,000 partitions (benchmarks/controller_memory.py's active phase): full collections 1.4-1.5 -> 0.5 s
        of CPU, the longest 75 -> ~21 ms. Without the collection at the end they ran seldom and long (~300 ms):
        CPython looks for a due full collection only at a young one, and those run mostly during writes."""
        young, middle, full = gc.get_threshold()
        gc.set_threshold(young, middle, NO_FULL_COLLECTION)
        try:
            return self._write_now(generate)
        finally:
            gc.set_threshold(young, middle, full)
            if gc.get_count()[2] > full and gc.isenabled():
                gc.collect()  # the one put off: what the request left (its records are freed by now)

    def _write_now(self, generate: Callable[[], ControllerResult[T]]) -> Any:
        epoch = self._check_active()
        result = generate()
        if not result.records:
            return self._read(lambda: result.response)
        values = [serialize(r) for r in result.records]
        if len(values) >= LARGE_WRITE_RECORDS:
            log.info(
                "large_write",
                node_id=self.node_id,
                epoch=epoch,
                during=self.queue.running,
                records=len(values),
                first_offset=self.raft.next_offset(),
            )
        # Kafka's order: apply the records at the offsets they will get, then append. A record that cannot be
        # applied is then fatal before any of its batch reaches the log, where it would stop every standby too.
        first = self.raft.next_offset()
        try:
            for offset, record in enumerate(result.records, first):
                self.timeline.offset = offset
                self._replay(record, offset)
        except Exception as e:
            self._fatal(
                f"applying the {type(record).__name__} at offset {offset} on the active controller, from the "
                f"batch at offset {first}",
                e,
                epoch,
            )
        finally:
            self.timeline.offset = None
        try:
            last = (self.raft.append_atomic if result.atomic else self.raft.append)(epoch, values)
        except NotLeaderError as e:
            self._renounce(f"Raft refused the append: {e}")  # drops the records just applied, with all uncommitted
            raise NotControllerError(str(e), e.leader_id) from None
        except KafkaError:
            self.timeline.revert(first)  # refused as a whole (too large, buffer full): as if never applied
            raise
        if last != first + len(values) - 1:
            self._fatal(f"the batch applied at offsets {first}.. was appended ending at {last}", None, epoch)
        self._written.append((first, last))
        self._wrote_since_noop = True
        self.metrics.records_appended += len(values)
        self._append_times[last] = time.monotonic()
        response = result.response
        return self.purgatory.add(last, lambda: response)

    def _fatal(self, message: str, error: BaseException | None, epoch: int) -> Any:
        """Report a fault after which this controller's memory cannot be trusted. A process handler exits; an
        in-process one returns, and then this controller stops serving for good."""
        self.failed = True
        message = fault_message(message, error)
        self.faults.handle_fault(
            message, error, node_id=self.node_id, epoch=epoch, committed_offset=self.committed_offset
        )
        self.raft.resign(epoch)
        self._renounce(f"fatal fault: {message}")
        raise KafkaError(f"the controller stopped after a fatal fault: {message}", Errors.UNKNOWN_SERVER_ERROR)

    def _read(self, respond: Callable[[], T], local: bool = False) -> Any:
        if (local or self.settings.serve_local_reads) and not self.active:
            return respond()  # committed state only: a broker's image or a standby has nothing uncommitted
        self._check_active()
        pending = self.purgatory.highest_pending_offset
        if pending is None:
            return respond()
        return self.purgatory.add(pending, respond)

    def _replay(self, record: ApiMessage, offset: int) -> None:
        if isinstance(record, FeatureLevelRecord):
            self._features[record.name] = record.feature_level
        self.cluster.replay(record)
        self.replication.replay(record, offset)
        self.acls.replay(record)
        self.quotas.replay(record)

    async def _submit(self, name: str, run: Callable[[], Any], timeout_ms: int | None, bulk: bool = False) -> Any:
        started = time.monotonic()
        deadline = _deadline(started, timeout_ms)
        event = Event(name, run, deadline)
        future = self.queue.append(event, bulk)
        error = "NONE"
        try:
            if deadline is None:
                return await future
            # A timer on the caller's own future rather than wait_for(shield(...)): the event goes on (it may
            # still commit) while the caller hears REQUEST_TIMED_OUT — at a fraction of wait_for's cost per request.
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()
            future.add_done_callback(lambda f: relay(f, waiter))

            def expire() -> None:
                if not waiter.done():
                    message = f"{name} timed out after {timeout_ms} ms (it may still complete)"
                    waiter.set_exception(KafkaError(message, Errors.REQUEST_TIMED_OUT))

            timer = loop.call_at(loop.time() + max(0.0, deadline - time.monotonic()), expire)
            try:
                return await waiter
            finally:
                timer.cancel()
        except KafkaError as e:
            error = e.code.name if isinstance(e.code, Errors) else "UNKNOWN_SERVER_ERROR"
            raise
        except BaseException:
            error = "UNKNOWN_SERVER_ERROR"  # a bug, or a caller gone (cancelled)
            raise
        finally:
            took = time.monotonic() - started
            if took >= SLOW_REQUEST_S:
                self._log_slow(name, error, event, started, took)
            m = self.metrics
            m.requests[name] = m.requests.get(name, 0) + 1
            m.request_seconds[name] = m.request_seconds.get(name, 0.0) + took
            histogram = m.request_time.get((name, error))
            if histogram is None:
                histogram = m.request_time[name, error] = Histogram()
            histogram.observe(took)

    def _log_slow(self, name: str, error: str, event: Event, started: float, took: float) -> None:
        """Where a slow request's time went (Kafka's request log splits it the same way: queue, local, remote):
        waiting in the event queue, running its event, then waiting for its records' commit (and, bulk requests,
        for their later turns)."""
        ran, done = event.started, event.finished
        log.warning(
            "slow_request",
            node_id=self.node_id,
            api=name,
            error=error,
            ms=round(took * 1000, 1),
            queue_ms=round(((ran if ran is not None else started + took) - started) * 1000, 1),
            run_ms=round((done - ran) * 1000, 1) if ran is not None and done is not None else None,
            commit_ms=round((started + took - done) * 1000, 1) if done is not None else None,
        )

    # -- the API ---------------------------------------------------------------------------------------------

    async def create_topics(
        self, topics: list[NewTopic], *, validate_only: bool = False, timeout_ms: int | None = 30_000
    ) -> list[TopicResult]:
        """Kafka's ControllerApis + ReplicationControlManager.createTopics: per-topic results in request order."""
        if not topics:
            return []
        counts: dict[str, int] = {}
        for t in topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        early: dict[str, ApiError] = {}
        for name, n in counts.items():
            if n > 1:
                early[name] = ApiError(Errors.INVALID_REQUEST, "Duplicate topic name.")
            elif name == METADATA_TOPIC:
                early[name] = ApiError(Errors.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
        todo = [t for t in topics if t.name not in early]
        results: dict[str, TopicResult] = {}
        if todo:

            def run() -> Any:
                return self._write(lambda: self.replication.create_topics(todo, validate_only))

            for r in await self._submit("createTopics", run, timeout_ms):
                results[r.name] = r
        # As Kafka's ControllerApis: the controller's results in request order, then the names refused before
        # reaching it (a duplicated name answered once).
        out = [results[t.name] for t in topics if t.name not in early]
        out += [TopicResult(name, error) for name, error in early.items()]
        return out

    async def describe_topics(
        self, names: list[str] | None, timeout_ms: int | None = 30_000, *, local: bool = False
    ) -> list[TopicDescription]:
        """Committed topics (all, or the ones named), with their partitions and configs. ``local``: a standby
        answers from its own committed state too (Kafka's Metadata, which any controller answers from its image)."""

        def describe() -> list[TopicDescription]:
            topics = self.replication.topics.committed()
            by_name = {t.name: t for t in topics.values()}
            wanted = sorted(by_name) if names is None else names
            return [self._describe_topic(name, by_name.get(name)) for name in wanted]

        return await self._submit("describeTopics", lambda: self._read(describe, local), timeout_ms)

    def _describe_topic(self, name: str, topic: TopicInfo | None) -> TopicDescription:
        if topic is None:
            unknown = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{shown(name)}' does not exist.")
            return TopicDescription(name, None, (), (), unknown)
        parts = self.replication.partitions.committed()
        count = self.replication.partition_count(topic.id, committed=True)
        partitions = tuple((i, parts[(topic.id, i)]) for i in range(count))
        configs = self.configs.configs.committed().get((TOPIC_RESOURCE, name), ())
        return TopicDescription(name, topic.id, partitions, configs)

    async def describe_cluster(self, timeout_ms: int | None = 30_000) -> list[BrokerRegistration]:
        def describe() -> list[BrokerRegistration]:
            return sorted(self.cluster.brokers.committed().values(), key=lambda b: b.id)

        return await self._submit("describeCluster", lambda: self._read(describe), timeout_ms)

    async def register_broker(self, request: RegisterBrokerRequest, timeout_ms: int | None = 30_000) -> int:
        def run() -> Any:
            self._check_active()
            write_offset = self.raft.next_offset()
            return self._write(lambda: self.cluster.register_broker(request, write_offset, _now_ms()))

        return await self._submit("registerBroker", run, timeout_ms)

    async def broker_heartbeat(self, request: HeartbeatRequest, timeout_ms: int | None = 30_000) -> HeartbeatReply:
        def run() -> Any:
            self._check_active()
            answer = self._write(
                lambda: self.cluster.heartbeat(
                    request,
                    self.committed_offset,
                    _now_ms(),
                    self.replication.elections.broker_moves,
                    self.replication.elections.has_leaderships,
                    self.departures,
                )
            )
            if request.want_shutdown and self.departures.leaving(request.broker_id):
                self._schedule_departures(0)  # its places move in steps from now on
            return answer

        return await self._submit("brokerHeartbeat", run, timeout_ms)

    # -- after creation: elections, ISR changes, deletion, more partitions -------------------------------------

    async def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None, *, timeout_ms: int | None = 60_000
    ) -> list[ElectionResult]:
        """Kafka's ElectLeaders: ``partitions`` None = every partition (the answer then leaves out those whose
        leader is already the one asked for); an empty list is answered at once."""
        if partitions is not None and not partitions:
            return []

        def run() -> Any:
            return self._write(lambda: self.replication.elections.elect_leaders(election_type, partitions))

        return await self._submit("electLeaders", run, timeout_ms)

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: list[AlterPartitionTopic], *, timeout_ms: int | None = 30_000
    ) -> AlterPartitionResponse:
        """A partition leader's ISR change; each partition's answer carries its state after the change.

        Applied :data:`ALTER_PARTITION_TURN` partitions per event, in the queue's bulk lane: each turn queues the
        next when it runs, and other requests take turns with them, so that brokers' requests of thousands of
        changes never hold every other request (a 5,000-partition request took 100-200 ms of the loop at 2M
        partitions). Kafka applies a request in one event; its changes are independent of one another
        (non-atomic per partition) either way. A turn refused as a whole (the broker's epoch went stale in
        between) answers the request with that refusal; the broker then sends its changes again, and those
        already applied are answered by their new partition epoch."""
        turns = split_turns(topics, ALTER_PARTITION_TURN)
        elections, seen = self.replication.elections, set[tuple[Uuid, int]]()
        deadline = _deadline(time.monotonic(), timeout_ms)  # the later turns' (the first one's is _submit's)

        def write(i: int) -> Any:
            made: list[ControllerResult[AlterPartitionResponse]] = []

            def generate() -> ControllerResult[AlterPartitionResponse]:
                made.append(elections.alter_partition(broker_id, broker_epoch, turns[i], seen))
                return made[0]

            answer = self._write(generate)
            if i + 1 < len(turns) and made[0].response.error.code is Errors.NONE:
                nxt = self.queue.append(Event("alterPartition", lambda: write(i + 1), deadline), bulk=True)
                nxt.add_done_callback(lambda f: settle(i + 1, f))
            return answer

        whole: asyncio.Future[AlterPartitionResponse] | None = None
        answers: list[AlterPartitionResponse] = []

        def settle(i: int, turn: asyncio.Future[AlterPartitionResponse]) -> None:
            assert whole is not None
            if whole.done() or turn.cancelled() or turn.exception() is not None:
                relay(turn, whole)  # a failed turn fails the request (or, once it is answered, is only observed)
                return
            answers.append(answer := turn.result())
            if answer.error.code is not Errors.NONE:
                whole.set_result(answer)
            elif i == len(turns) - 1:
                whole.set_result(AlterPartitionResponse(NO_ERROR, tuple(r for a in answers for r in a.partitions)))

        def run() -> Any:
            nonlocal whole
            if len(turns) == 1:
                return write(0)
            whole = asyncio.get_running_loop().create_future()
            first = write(0)
            if not isinstance(first, asyncio.Future):
                first, value = asyncio.get_running_loop().create_future(), first
                first.set_result(value)
            first.add_done_callback(lambda f: settle(0, f))
            return whole

        return await self._submit("alterPartition", run, timeout_ms, bulk=True)

    async def delete_topics(
        self, topics: list[DeleteTopicState], *, timeout_ms: int | None = 30_000
    ) -> list[DeleteTopicResult]:
        """Kafka's DeleteTopics v6 (by name or by id). Raises TOPIC_DELETION_DISABLED for the whole request when
        delete.topic.enable is false. Results in request order."""
        if not topics:
            return []

        def run() -> Any:
            return self._write(lambda: self.replication.delete_topics(topics))

        return await self._submit("deleteTopics", run, timeout_ms)

    async def create_partitions(
        self, topics: list[NewPartitions], *, validate_only: bool = False, timeout_ms: int | None = 30_000
    ) -> list[CreatePartitionsResult]:
        if not topics:
            return []

        def run() -> Any:
            return self._write(lambda: self.replication.create_partitions(topics, validate_only))

        return await self._submit("createPartitions", run, timeout_ms)

    async def alter_partition_reassignments(
        self, topics: list[ReassignableTopic], *, timeout_ms: int | None = 60_000
    ) -> list[ReassignableTopicResult]:
        """Kafka's AlterPartitionReassignments: per partition a target (or None: cancel) and an error each."""

        def run() -> Any:
            return self._write(lambda: self.replication.reassignments.alter(topics))

        return await self._submit("alterPartitionReassignments", run, timeout_ms)

    async def list_partition_reassignments(
        self, topics: list[tuple[str, tuple[int, ...]]] | None, *, timeout_ms: int | None = 60_000
    ) -> list[OngoingTopicReassignment]:
        """Committed moves: all (None), or those of the named partitions that are moving."""
        listed = self.replication.reassignments.list
        return await self._submit("listPartitionReassignments", lambda: self._read(lambda: listed(topics)), timeout_ms)

    async def incremental_alter_configs(
        self, resources: list[AlterConfigsResource], *, validate_only: bool = False, timeout_ms: int | None = 30_000
    ) -> list[ConfigResourceResult]:
        """Kafka's IncrementalAlterConfigs for TOPIC and BROKER resources: one result per resource; the records of
        every resource that passed form one atomic batch."""
        if not resources:
            return []

        def run() -> Any:
            return self._write(lambda: self.configs.incremental_alter_configs(resources, validate_only))

        return await self._submit("incrementalAlterConfigs", run, timeout_ms)

    async def legacy_alter_configs(
        self, resources: list[AlterConfigsResource], *, validate_only: bool = False, timeout_ms: int | None = 30_000
    ) -> list[ConfigResourceResult]:
        """Kafka's legacy AlterConfigs: each resource's dynamic configs replaced by the request's (a key not named is
        removed), checked as incremental SETs are; one result per resource, the successes one atomic batch."""
        if not resources:
            return []

        def run() -> Any:
            return self._write(lambda: self.configs.legacy_alter_configs(resources, validate_only))

        return await self._submit("legacyAlterConfigs", run, timeout_ms)

    async def describe_configs(
        self,
        resources: list[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = 30_000,
    ) -> list[DescribeConfigsResult]:
        """Every config of each resource (or the keys asked for) with its value and source, from committed state."""

        def describe() -> list[DescribeConfigsResult]:
            return self.configs.describe_configs(resources, include_synonyms, include_documentation, committed=True)

        return await self._submit("describeConfigs", lambda: self._read(describe), timeout_ms)

    # -- ACLs (controller/acl_control.py) ----------------------------------------------------------------------

    async def create_acls(
        self, creations: list[StandardAcl], *, timeout_ms: int | None = 30_000
    ) -> list[AclCreateResult]:
        if not creations:
            return []
        return await self._submit(
            "createAcls", lambda: self._write(lambda: self.acls.create_acls(creations)), timeout_ms
        )

    async def delete_acls(
        self, filters: list[AclBindingFilter], *, timeout_ms: int | None = 30_000
    ) -> list[AclDeleteResult]:
        if not filters:
            return []
        return await self._submit("deleteAcls", lambda: self._write(lambda: self.acls.delete_acls(filters)), timeout_ms)

    async def describe_acls(
        self, acl_filter: AclBindingFilter, *, timeout_ms: int | None = 30_000
    ) -> DescribeAclsResult:
        describe = self.acls.describe_acls
        return await self._submit("describeAcls", lambda: self._read(lambda: describe(acl_filter)), timeout_ms)

    # -- client quotas (controller/quota_control.py) ---------------------------------------------------------

    async def alter_client_quotas(
        self, alterations: list[QuotaAlteration], validate_only: bool = False, *, timeout_ms: int | None = 30_000
    ) -> list[AlterQuotaResult]:
        def generate() -> ControllerResult[list[AlterQuotaResult]]:
            result = self.quotas.alter_client_quotas(alterations)
            return ControllerResult([], result.response) if validate_only else result

        def run() -> Any:
            return self._write(generate)

        return await self._submit("alterClientQuotas", run, timeout_ms)

    async def describe_client_quotas(
        self, components: list[FilterComponent], strict: bool, *, timeout_ms: int | None = 30_000
    ) -> DescribeQuotasResult:
        describe = self.quotas.describe_client_quotas
        return await self._submit(
            "describeClientQuotas", lambda: self._read(lambda: describe(components, strict)), timeout_ms
        )


def _deadline(now: float, timeout_ms: int | None) -> float | None:
    """When a request given ``timeout_ms`` (none if 0 or less) times out, in time.monotonic()."""
    return now + timeout_ms / 1000 if timeout_ms and timeout_ms > 0 else None


def split_turns(topics: list[AlterPartitionTopic], size: int) -> list[list[AlterPartitionTopic]]:
    """``topics`` in request order, cut every ``size`` partitions (a topic may be cut in two); one turn at least."""
    turns: list[list[AlterPartitionTopic]] = [[]]
    room = size
    for t in topics:
        parts = t.partitions
        while parts:
            if room == 0:
                turns.append([])
                room = size
            turns[-1].append(AlterPartitionTopic(t.topic_id, parts[:room]))
            parts, room = parts[room:], room - min(room, len(parts))
        if not t.partitions:
            turns[-1].append(t)
    return turns


_PERIODIC = ("broker-departures", "noop", "balance-leaders", "elect-unclean-leaders")


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _log_failure(what: str) -> Callable[[asyncio.Future[Any]], None]:
    """A callback for a future nobody awaits: log its failure (instead of 'exception was never retrieved')."""

    def done(f: asyncio.Future[Any]) -> None:
        if not f.cancelled() and f.exception() is not None:
            log.warning("controller_event_failed", event=what, error=str(f.exception()))

    return done
