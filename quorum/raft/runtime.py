"""The asyncio driver of the consensus core: real time, the real log, gRPC peers. Implements RaftClient.

Everything runs on one event loop except ``fdatasync``, which runs on a dedicated thread so the loop keeps
appending and answering fetches while the disk works (measured: that overlap is what makes group commit pay).
After every input the driver carries out the core's outputs (:meth:`RaftNode._after`): send messages, start a
flush, settle append waiters, wake commit delivery, re-arm the timer for the core's next deadline.

Snapshots: a listener (the controller) asks :meth:`RaftNode.create_snapshot` for a writer of its committed state;
the file is frozen off the loop, then retention (:meth:`MetadataLog.clean`) runs on the loop, and again every
minute. A listener behind the latest snapshot — at start, or after this node installed one from the leader — is
handed that snapshot to load before any later batch.

Fail-stop: an exception out of the core (a storage error in an append, a truncation or the quorum-state file; a
safety check; a bug), a failed flush, a listener that cannot apply a committed batch, or a transport task that
dies is a fatal fault (:mod:`quorum.fault`). The node stops acting at once and reports it to its fault handler,
which in a node process logs one line and exits; it never goes on with a half-done step.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from quorum.errors import KafkaError, NotLeaderError
from quorum.fault import FaultHandler, LoggingFaultHandler, fault_message, spawn
from quorum.log import snapshot_fork
from quorum.log.batch import iter_batches
from quorum.log.log import MetadataLog
from quorum.log.quorum_state import QuorumStateStore
from quorum.log.snapshots import SnapshotFile, SnapshotFileWriter, SnapshotId
from quorum.progress import ReplayProgress
from quorum.raft.client import CommittedBatch, LeaderAndEpoch, RaftListener
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.core import RaftCore
from quorum.raft.hops import FOLLOWER_STAGES, LEADER_STAGES, StageTrace
from quorum.raft.messages import Envelope, FetchRequest, FetchResponse
from quorum.raft.roles import Leader
from quorum.transport.peer import PeerTransport

log = structlog.get_logger("quorum.raft.runtime")

DELIVERY_CHUNK_BYTES = 1024 * 1024
# A voter following the leader fsyncs what it fetched on the loop when it is at most this much: a thread's round
# trip (submit, wake, call back into the loop) costs ~0.2 ms here, more than the fsync of a small write, and it sits
# on every commit's path (measured, sequential writes, 3 voters on loopback: commit p50 -0.12 to -0.32 ms). More
# than this goes to the thread, so that a standby catching up applies committed batches while its disk writes.
INLINE_FLUSH_MAX_BYTES = 64 * 1024
CLEAN_INTERVAL_S = 60.0  # how often retention runs besides after each snapshot


class FileSnapshotReader:
    """A frozen snapshot handed to a listener to load (implements ``SnapshotReader``)."""

    def __init__(self, file: SnapshotFile, progress: ReplayProgress | None = None) -> None:
        self._file = file
        self.progress = progress

    @property
    def snapshot_id(self) -> SnapshotId:
        return self._file.id

    @property
    def last_contained_log_timestamp(self) -> int:
        return self._file.last_contained_log_timestamp

    @property
    def size_bytes(self) -> int:
        return self._file.size

    def batches(self) -> Iterator[CommittedBatch]:
        progress, done = self.progress, 0
        for batch in self._file.data_batches():
            yield CommittedBatch(batch)
            if progress is not None:
                done += batch.size
                progress.advance(batch.record_count, done)


class RaftSnapshotWriter:
    """A listener's snapshot (implements ``SnapshotWriter``): records go to the ``.part`` file as they come; the
    fsync and rename run off the loop; once frozen the log knows the snapshot and retention runs."""

    def __init__(self, node: RaftNode, file: SnapshotFileWriter) -> None:
        self._node = node
        self._file = file
        self._child: snapshot_fork.ChildWriter | None = None
        self._forked_at = 0.0

    @property
    def snapshot_id(self) -> SnapshotId:
        return self._file.snapshot_id

    def append(self, records: Sequence[bytes]) -> None:
        self._file.append(records)

    async def freeze(self) -> int:
        started = time.monotonic()
        size = await asyncio.get_running_loop().run_in_executor(self._node._snapshotter, self._file.freeze)
        self._frozen(size, started)
        return size

    def fork(self, records: Iterable[bytes]) -> None:
        """Start writing ``records`` in a forked child process now (:mod:`quorum.log.snapshot_fork`): the encoding
        and the writes take nothing from this process's event loop, and ``records`` may read live state (the child
        sees it as it is at this instant). :meth:`write_all` then waits for it."""
        self._child = snapshot_fork.start_child(self._file, records)
        self._forked_at = time.monotonic()

    async def write_all(self) -> tuple[int, int]:
        """Wait for the child :meth:`fork` started, then publish its file. Returns the snapshot's size and records.
        Raises as :meth:`freeze` (the ``.part`` removed), or :class:`~quorum.log.snapshot_fork.SnapshotChildError`."""
        node, file, child, started = self._node, self._file, self._child, self._forked_at
        assert child is not None, "write_all needs fork() first"
        self._child = None
        try:
            size, count = await child.wait(node._snapshotter)
            await asyncio.get_running_loop().run_in_executor(node._snapshotter, file.publish, size)
        except BaseException:
            file.abort()
            raise
        self._frozen(size, started, child.cpu_seconds)
        return size, count

    def _frozen(self, size: int, started: float, child_cpu_s: float | None = None) -> None:
        node = self._node
        node.log.snapshot_frozen(self.snapshot_id)
        node.snapshot_stats.note_frozen(self.snapshot_id, size, time.monotonic() - started)
        # A child's CPU seconds beside its wall time: a snapshot that took long for want of a core shows as such.
        cpu = {} if child_cpu_s is None else {"child_cpu_s": round(child_cpu_s, 3)}
        log.info("snapshot_frozen", node_id=node.node_id, snapshot=str(self.snapshot_id), bytes=size, **cpu)
        node.clean_log()

    def abort(self) -> None:
        if self._child is not None:  # forked, and nobody waited for it
            self._child.kill()
            self._child = None
        self._file.abort()


@dataclass
class SnapshotStats:
    latest: SnapshotId | None = None
    latest_bytes: int = 0
    latest_at: float | None = None  # time.time() when it was frozen (or, at start, the file's mtime)
    freeze_seconds: float = 0.0
    load_seconds: float = 0.0
    loads: int = 0
    bytes_deleted: int = 0

    def note_frozen(self, snapshot_id: SnapshotId, size: int, seconds: float) -> None:
        self.latest, self.latest_bytes, self.latest_at, self.freeze_seconds = snapshot_id, size, time.time(), seconds


@dataclass
class _ListenerState:
    listener: RaftListener
    next_offset: int = 0
    told: LeaderAndEpoch | None = None
    replay: ReplayProgress | None = None  # replaying the log found at start (see RaftNode._startup_replay)
    replayed: bool = False


class RaftNode:
    """A voter: the core, its log and quorum-state file, and its gRPC peers."""

    def __init__(
        self,
        *,
        node_id: int,
        voters: dict[int, VoterAddress],
        cluster_id: str,
        log: MetadataLog,
        store: QuorumStateStore,
        config: RaftConfig | None = None,
        faults: FaultHandler | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.cluster_id = cluster_id
        self.log = log
        self.store = store
        self.config = config or RaftConfig()
        self.faults: FaultHandler = faults or LoggingFaultHandler()
        self.transport = PeerTransport(
            node_id, voters, self._on_message, self._on_unreachable, self.config.request_timeout_ms, self._fatal
        )
        self.core: RaftCore | None = None
        self._listeners: list[_ListenerState] = []
        self._replay_end = log.end_offset  # what a listener replays at start: the log found on disk
        self._waiters: deque[tuple[int, int, asyncio.Future[int]]] = deque()  # (offset, epoch, future)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: int | None = None
        self._flusher = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"fsync-{node_id}")
        # Where a commit's time goes (quorum/raft/hops.py): read by /metrics and the peers benchmark.
        self.leader_trace = StageTrace(LEADER_STAGES, time.monotonic_ns)
        self.follower_trace = StageTrace(FOLLOWER_STAGES, time.monotonic_ns)
        self._snapshotter = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"snapshot-{node_id}")
        log.deleter.start_background(f"delete-{node_id}")  # retention's unlinks and fsyncs: off the event loop
        self._cleaner: asyncio.TimerHandle | None = None
        self.snapshot_stats = SnapshotStats()
        latest = log.latest_snapshot()
        if latest is not None:
            path = log.snapshots.path(latest)
            self.snapshot_stats = SnapshotStats(latest, path.stat().st_size, path.stat().st_mtime)
        self._flush: asyncio.Future[int] | None = None
        self._delivery = asyncio.Event()
        self._delivery_task: asyncio.Task[None] | None = None
        self._leader = LeaderAndEpoch(-1, 0)
        self._settled_hw = -1
        self._epoch_announced = False
        self._stopped = False
        self.failed = False  # a fatal fault stopped this node

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start within the running loop (the gRPC server carrying the transport is the caller's)."""
        now = self._now()
        self.core = RaftCore(
            node_id=self.node_id,
            voters=list(self.voters),
            cluster_id=self.cluster_id,
            log=self.log,
            store=self.store,
            config=self.config,
            rng=random.Random(),
            now_ms=now,
            wall_offset_ms=int(time.time() * 1000) - now,
            # An empty data directory (a new node, or a wiped one): ask the voters who leads rather than wait.
            ask_for_leader=self.log.end_offset == 0 and self.store.read() is None,
        )
        self._leader = LeaderAndEpoch(self.core.leader_id, self.core.epoch)
        self.transport.start()
        self._cleaner = asyncio.get_running_loop().call_later(CLEAN_INTERVAL_S, self._clean_periodically)
        self._delivery_task = spawn(
            self._deliver_commits(),
            name=f"raft-delivery-{self.node_id}",
            on_error=lambda e: self._fatal("delivering committed batches", e),
        )
        with self._fail_stop("starting"):
            self._after()

    async def shutdown(self, *, graceful: bool = True, timeout_s: float | None = None) -> None:
        """Stop. A leader first resigns and waits (up to ``timeout_s``) for a successor, so the cluster never
        waits out an election timeout on our account."""
        core = self._core
        if graceful and core.is_leader and not self._stopped:
            epoch = core.epoch
            with self._fail_stop("resigning for shutdown"):
                core.resign(self._now())
                self._after()
            limit = timeout_s if timeout_s is not None else self.config.election_timeout_ms * 2 / 1000
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(limit):
                    while not (self._core.epoch > epoch and self._core.leader_id >= 0):
                        await asyncio.sleep(0.005)
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        if self._cleaner is not None:
            self._cleaner.cancel()
        await self.transport.close()
        if self._delivery_task is not None:
            self._delivery_task.cancel()
            with contextlib.suppress(BaseException):
                await self._delivery_task
        if self._flush is not None:
            with contextlib.suppress(Exception):
                await self._flush
        self._fail_waiters("node is shutting down")
        self._flusher.shutdown(wait=True)
        self._snapshotter.shutdown(wait=True)
        try:
            self.log.close()  # flushes: what was appended must still become durable, or we must say it did not
        except Exception as e:
            self._fatal("closing the metadata log", e)

    # -- RaftClient ------------------------------------------------------------------------------------------

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        return self._leader

    @property
    def high_watermark(self) -> int:
        return self._core.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.end_offset

    def next_offset(self) -> int:
        """On the leader: the offset the next appended record will get."""
        role = self._core.role
        return role.accumulator.next_offset if isinstance(role, Leader) else self.log.end_offset

    def append(self, epoch: int, records: Sequence[bytes]) -> int:
        return self._append(epoch, records, atomic=False)

    def append_atomic(self, epoch: int, records: Sequence[bytes]) -> int:
        return self._append(epoch, records, atomic=True)

    def _append(self, epoch: int, records: Sequence[bytes], atomic: bool) -> int:
        core = self._core
        if self._stopped:
            raise NotLeaderError(f"node {self.node_id} has stopped", leader_id=-1, epoch=core.epoch)
        try:
            offset = core.append(epoch, records, self._now(), atomic=atomic)
            self.leader_trace.start(offset)
            # The hot path: most appends only join the open batch while a write is in flight, and the flush's
            # completion drains them. Run the full driver step only when the core has something to do now, or
            # when the batch's linger deadline must arm the timer.
            linger = core.append_deadline()
            if core.has_output() or (linger is not None and (self._timer_at is None or linger < self._timer_at)):
                self._after()
        except KafkaError:
            raise  # the caller's mistake (not the leader, too large, ...): refused before anything was written
        except Exception as e:
            self._fatal("appending", e)
            raise NotLeaderError(f"node {self.node_id} stopped after a fatal fault", epoch=core.epoch) from None
        return offset

    def register(self, listener: RaftListener) -> None:
        """Add a listener. Registered before :meth:`start`, it loads the latest snapshot at once, before the core
        runs: a load of millions of records must not stall a running node's timers."""
        state = _ListenerState(listener, 0)  # it holds nothing yet: the latest snapshot (if any) comes first
        self._listeners.append(state)
        if self.core is None:
            self._load_snapshot_if_behind(state)
        self._delivery.set()

    def latest_snapshot_id(self) -> SnapshotId | None:
        return self.log.latest_snapshot()

    def create_snapshot(self, snapshot_id: SnapshotId, last_contained_log_timestamp: int) -> RaftSnapshotWriter | None:
        latest = self.log.latest_snapshot()
        if latest is not None and snapshot_id.end_offset <= latest.end_offset:
            return None
        hw = self._core.high_watermark
        if not self.log.start_offset < snapshot_id.end_offset <= hw:
            raise ValueError(
                f"snapshot {snapshot_id}: its end offset must be committed and within the log "
                f"[{self.log.start_offset + 1}, high watermark {hw}]"
            )
        epoch, _ = self.log.end_offset_for_epoch(snapshot_id.epoch)
        if epoch != snapshot_id.epoch:
            raise ValueError(f"snapshot {snapshot_id}: the log has no epoch {snapshot_id.epoch}")
        return RaftSnapshotWriter(self, self.log.snapshot_writer(snapshot_id, last_contained_log_timestamp))

    def clean_log(self) -> None:
        """Retention: a failure to delete is fatal, as any storage error of the log."""
        if self._stopped:
            return
        with self._fail_stop("deleting old snapshots and segments"):
            keep = self._core.catch_up_offset(self._now())
            self.snapshot_stats.bytes_deleted += self.log.clean(catch_up_from=keep)

    def _clean_periodically(self) -> None:
        self.clean_log()
        if not self._stopped:
            self._cleaner = asyncio.get_running_loop().call_later(CLEAN_INTERVAL_S, self._clean_periodically)

    def resign(self, epoch: int) -> None:
        if self._core.epoch == epoch and not self._stopped:
            with self._fail_stop("resigning"):
                self._core.resign(self._now())
                self._after()

    def wait_committed(self, offset: int, epoch: int) -> asyncio.Future[int]:
        """A future resolved with ``offset`` once it is committed by this leader in ``epoch``, or failed with
        NotLeaderError if leadership changes first (the append's fate is then unknown, as in Kafka)."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        core = self._core
        if core.epoch != epoch or not core.is_leader:
            fut.set_exception(NotLeaderError("leadership changed", leader_id=core.leader_id, epoch=core.epoch))
        elif core.high_watermark > offset:
            fut.set_result(offset)
        else:
            self._waiters.append((offset, epoch, fut))
        return fut

    # -- driving the core ------------------------------------------------------------------------------------

    @property
    def _core(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError("RaftNode.start() has not run")
        return self.core

    @staticmethod
    def _now() -> int:
        return int(asyncio.get_running_loop().time() * 1000)

    def _on_message(self, env: Envelope) -> None:
        if self._stopped or self.core is None:
            return
        m = env.message
        if isinstance(m, FetchRequest) and env.source in self.voters:
            self.leader_trace.passed("replicated", m.fetch_offset)
        elif isinstance(m, FetchResponse) and m.records:
            self.follower_trace.start(self.log.end_offset)
        with self._fail_stop(f"handling {type(env.message).__name__} from node {env.source}"):
            self.core.handle(env, self._now())
            self._after()

    def _on_unreachable(self, peer: int) -> None:
        if self._stopped or self.core is None:
            return
        with self._fail_stop(f"noting node {peer} unreachable"):
            self.core.peer_unreachable(peer, self._now())
            self._after()

    def _tick(self) -> None:
        self._timer = self._timer_at = None
        if self._stopped:
            return
        with self._fail_stop("a timer tick"):
            self._core.tick(self._now())
            self._after()

    def _send_messages(self, core: RaftCore) -> None:
        for env in core.take_messages():
            if isinstance(env.message, FetchRequest):
                self.follower_trace.passed("fetch_sent", env.message.fetch_offset)
            self.transport.send(env)

    def _flush_inline(self, core: RaftCore) -> bool:
        """A voter following the leader, with little to flush, fsyncs on the loop (as Kafka's raft thread does)
        and sends its next fetch, which acknowledges the records, in the same turn. False after a fatal fault."""
        try:
            offset = self.log.flush()
        except OSError as e:
            self._fatal("flushing the metadata log", e)
            return False
        self._flush_done(core, offset)
        self._send_messages(core)
        return True

    def _flush_done(self, core: RaftCore, offset: int) -> None:
        core.flushed(offset, self._now())
        self.leader_trace.passed("flushed", self.log.flushed_offset)
        self.follower_trace.passed("flushed", self.log.flushed_offset)

    def _flushed(self, flush: asyncio.Future[int]) -> None:
        if flush.cancelled():
            return
        if (error := flush.exception()) is not None:
            self._fatal("flushing the metadata log", error)
        elif not self._stopped:
            with self._fail_stop("completing a flush"):
                self._flush_done(self._core, flush.result())
                self._after()

    @contextlib.contextmanager
    def _fail_stop(self, doing: str) -> Iterator[None]:
        """Run a step of the core: an exception out of it leaves the node's state unknown, which is fatal."""
        try:
            yield
        except Exception as e:
            self._fatal(doing, e)

    def _fatal(self, doing: str, error: BaseException | None, **context: object) -> None:
        """Stop acting at once (no timer, no input, no delivery; waiting appends fail), then report the fault."""
        if self.failed:
            return
        self.failed = self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        core = self.core
        where: dict[str, object] = {"node_id": self.node_id}
        if core is not None:
            where |= {"epoch": core.epoch, "role": core.role.name, "high_watermark": core.high_watermark}
        where |= {"log_end_offset": self.log.end_offset, "flushed_offset": self.log.flushed_offset, **context}
        self._fail_waiters(f"node {self.node_id} stopped after a fatal fault")
        self._delivery.set()  # the delivery loop sees the stop and ends
        self.faults.handle_fault(fault_message(doing, error), error, **where)

    def _after(self) -> None:
        core = self._core
        self._send_messages(core)
        self.leader_trace.passed("written", self.log.end_offset)
        if core.is_leader:
            self.leader_trace.passed("committed", core.high_watermark)
        if core.poll_flush():
            if core.is_leader or core.observer or self.log.unflushed_bytes > INLINE_FLUSH_MAX_BYTES:
                # fdatasync on its own thread: the loop keeps appending, answering and applying meanwhile.
                self._flush = asyncio.get_running_loop().run_in_executor(self._flusher, self.log.flush)
                self._flush.add_done_callback(self._flushed)
            elif not self._flush_inline(core):
                return
        if core.leader_id != self._leader.leader_id or core.epoch != self._leader.epoch:
            self._leader = LeaderAndEpoch(core.leader_id, core.epoch)
            self.leader_trace.abandon()
            self.follower_trace.abandon()
            self._settled_hw = -1
            self._delivery.set()
            self._epoch_announced = False
        if not self._epoch_announced and core.is_leader and core.role.high_watermark is not None:  # type: ignore[union-attr]
            self._epoch_announced = True
            log.info(
                "leader_epoch_committed",
                node_id=self.node_id,
                epoch=core.epoch,
                epoch_start_offset=core.role.epoch_start_offset,
                high_watermark=core.high_watermark,  # type: ignore[union-attr]
                monotonic_ms=int(time.monotonic() * 1000),  # comparable across processes on one host
            )
        if self._waiters and (core.high_watermark != self._settled_hw or not core.is_leader):
            self._settled_hw = core.high_watermark
            self._settle_waiters(core)
        if core.high_watermark > min((s.next_offset for s in self._listeners), default=core.high_watermark):
            self._delivery.set()
        deadline = core.next_deadline()
        if self._timer_at is None or deadline != self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            loop = asyncio.get_running_loop()
            self._timer_at = deadline
            self._timer = loop.call_at(max(deadline, self._now()) / 1000, self._tick)

    def _settle_waiters(self, core: RaftCore) -> None:
        hw = core.high_watermark
        leading = core.is_leader
        while self._waiters:
            offset, epoch, fut = self._waiters[0]
            if leading and epoch == core.epoch:
                if hw <= offset:
                    break
                if not fut.done():
                    fut.set_result(offset)
            elif not fut.done():
                fut.set_exception(NotLeaderError("leadership changed before commit", core.leader_id, core.epoch))
            self._waiters.popleft()

    def _fail_waiters(self, why: str) -> None:
        while self._waiters:
            _, _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(NotLeaderError(why))

    # -- commit delivery -------------------------------------------------------------------------------------

    async def _deliver_commits(self) -> None:
        """Hand committed batches to each listener in order, once; then tell it about leader changes. The local
        node's own leadership is announced only once the listener has every batch before the epoch started, so
        an activated controller holds all committed state (Kafka's maybeFireLeaderChange)."""
        while not self.failed:
            await self._delivery.wait()
            self._delivery.clear()
            for state in self._listeners:
                await self._catch_up(state)
                if self.failed:
                    return
                self._maybe_tell_leader(state)

    def _load_snapshot_if_behind(self, state: _ListenerState) -> None:
        latest = self.log.latest_snapshot()
        if latest is None or state.next_offset >= latest.end_offset:
            return
        file = self.log.snapshots.file(latest)
        assert file is not None
        started = time.monotonic()
        progress = ReplayProgress("snapshot", file.size, node_id=self.node_id, snapshot=str(latest))
        try:
            state.listener.handle_load_snapshot(FileSnapshotReader(file, progress))
        except Exception as e:
            self._fatal(f"loading snapshot {latest}", e, snapshot=str(latest))
            return
        state.next_offset = latest.end_offset
        stats = self.snapshot_stats
        stats.load_seconds = time.monotonic() - started
        stats.loads += 1
        log.info(
            "snapshot_delivered",
            node_id=self.node_id,
            snapshot=str(latest),
            bytes=file.size,
            seconds=round(stats.load_seconds, 3),
            records=progress.records,
        )

    def _startup_replay(self, state: _ListenerState) -> ReplayProgress | None:
        """The progress of a listener's replay of the log found at start, its clock started with the first chunk
        (not while the node waits for a leader and a high watermark); None once done or if nothing to do."""
        if state.replay is None and not state.replayed:
            if state.next_offset < min(self._replay_end, self.log.end_offset):
                total = self._replay_end - state.next_offset
                state.replay = ReplayProgress("log", total, node_id=self.node_id, to_offset=self._replay_end)
            else:
                state.replayed = True
        return state.replay

    def _replay_step(self, state: _ListenerState, replay: ReplayProgress, records: int) -> None:
        first = self._replay_end - replay.total
        replay.advance(records, state.next_offset - first)
        if state.next_offset >= min(self._replay_end, self.log.end_offset):  # the log's tail may be truncated
            state.replay, state.replayed = None, True
            log.info(
                "log_replayed", node_id=self.node_id, from_offset=first, to_offset=state.next_offset, **replay.summary()
            )

    async def _catch_up(self, state: _ListenerState) -> None:
        self._load_snapshot_if_behind(state)  # this node installed a snapshot from the leader
        while state.next_offset < self._core.high_watermark and not self.failed:
            hw = self._core.high_watermark
            data, _ = self.log.read(state.next_offset, DELIVERY_CHUNK_BYTES)
            if not data:
                return
            replay = self._startup_replay(state)
            for batch in iter_batches(data, path=str(self.log.dir)):
                if batch.last_offset >= hw:
                    return  # not committed yet
                try:
                    state.listener.handle_commit(CommittedBatch(batch))
                except Exception as e:
                    # Kafka: a committed batch a controller cannot apply is fatal. Skipping it would leave this
                    # node's state behind every other node's, serving and voting as if nothing happened.
                    what = f"applying the committed batch at offsets {batch.base_offset}-{batch.last_offset}"
                    self._fatal(what, e, batch_base_offset=batch.base_offset, batch_last_offset=batch.last_offset)
                    return
                state.next_offset = batch.last_offset + 1
                if replay is not None:
                    self._replay_step(state, replay, batch.record_count)
                    replay = state.replay
            await asyncio.sleep(0)  # let the loop breathe between chunks of a long catch-up

    def _maybe_tell_leader(self, state: _ListenerState) -> None:
        leader = self._leader
        if leader == state.told:
            return
        core = self._core
        if leader.leader_id == self.node_id:
            role = core.role
            if not isinstance(role, Leader) or state.next_offset <= role.epoch_start_offset:
                return  # not caught up with the previous epochs yet
        state.told = leader
        state.listener.handle_leader_change(leader)

    # -- introspection ---------------------------------------------------------------------------------------

    def describe(self) -> dict[str, object]:
        core = self._core
        now = self._now()
        voters = []
        role = core.role
        for v in sorted(self.voters):
            if v == self.node_id:
                voters.append({"id": v, "log_end_offset": self.log.end_offset, "last_fetch_age_ms": 0})
            elif isinstance(role, Leader):
                s = role.replicas[v]
                age = -1 if s.last_fetch_ms is None else now - s.last_fetch_ms
                voters.append({"id": v, "log_end_offset": s.end_offset, "last_fetch_age_ms": age})
            else:
                voters.append({"id": v, "log_end_offset": -1, "last_fetch_age_ms": -1})
        observers = []
        if isinstance(role, Leader):
            for o, s in sorted(role.observers.items()):
                age = -1 if s.last_fetch_ms is None else now - s.last_fetch_ms
                observers.append({"id": o, "log_end_offset": s.end_offset, "last_fetch_age_ms": age})
        return {
            "cluster_id": self.cluster_id,
            "node_id": self.node_id,
            "role": role.name,
            "leader_id": core.leader_id,
            "leader_epoch": core.epoch,
            "high_watermark": core.high_watermark,
            "epoch_start_offset": role.epoch_start_offset if isinstance(role, Leader) else -1,
            "log_end_offset": self.log.end_offset,
            "log_start_offset": self.log.start_offset,
            "latest_snapshot": self.log.latest_snapshot(),
            "latest_snapshot_bytes": self.snapshot_stats.latest_bytes,
            "voters": voters,
            "observers": observers,
        }
