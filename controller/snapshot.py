"""Snapshots of the controller's committed state: writing them (Kafka's MetadataImage.write, driven by its
SnapshotGenerator's policy) and loading them back.

- :func:`capture` takes the committed maps at a committed batch boundary. Written by a child forked right then,
  they need no copy: the child holds them as they were at the fork. Written in process, they are copied: the
  values are immutable (NamedTuples, tuples, ints), so shallow copies are a consistent image however the live maps
  change afterwards (dict.copy: ~28 ms per million partitions, measured here, holding up the loop).
- :meth:`ImageCapture.records` writes the image as records in Kafka's order: features (metadata.version first),
  brokers, each topic followed by its partitions, configs, client quotas, ACLs (Kafka's AclsImage comes after the
  images of quotas and of producer ids, which this controller does not keep). Derived indexes (names, collisions,
  moving partitions) are not written: replay rebuilds them.
- :class:`Snapshotter` is the policy (Kafka's SnapshotGenerator), on the active controller and on standbys alike:
  after ``metadata.log.max.record.bytes.between.snapshots`` of committed batches, or
  ``metadata.log.max.snapshot.interval.ms`` after the last snapshot, it captures the image and writes it in
  a forked child process when the writer can (the runtime's: ``quorum/log/snapshot_fork.py``), else in chunks
  from a task, so commits keep flowing. One at a time; a failure is logged and retried after a backoff.
- :func:`load_records` replays a snapshot into fresh state, PartitionRecords (nearly all of a large snapshot)
  through the fast path a standby's commits take too (``controller/partition_replay.py``).

Replaying the records gives exactly the committed state the log gave, except one thing a snapshot cannot carry:
``TopicInfo.created_offset`` (the offset of the topic's TopicRecord) is -1, unknown, for topics loaded from one.
Kafka's TopicImage keeps no such offset either.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, islice
from operator import itemgetter
from typing import TYPE_CHECKING, Protocol, TypeVar

import structlog

from controller.acl_control import acl_record
from controller.authorizer import StandardAcl
from controller.cluster_control import BrokerRegistration, supported_features
from controller.partition_change import PartitionRegistration
from controller.quota_control import Entity, quota_records
from controller.records import (
    BrokerEndpoint,
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    ZkMigrationStateRecord,
    deserialize,
    serialize,
)
from quorum.fault import spawn
from quorum.log import snapshot_fork
from quorum.log.message import ApiMessage, Uuid
from quorum.log.snapshots import SnapshotId
from quorum.memory import settle_bulk_load
from quorum.raft.client import CommittedBatch, SnapshotWriter

if TYPE_CHECKING:
    from controller.quorum_controller import QuorumController
    from controller.replication_control import TopicInfo

log = structlog.get_logger("controller")

METADATA_VERSION_FEATURE = "metadata.version"
MIGRATION_SUPPORTED_LEVEL = 8  # 3.4-IV0: from here Kafka's FeaturesImage writes a ZkMigrationStateRecord
CHUNK_RECORDS = 5_000  # records serialized and appended per turn of the event loop (~10 ms)
RETRY_MIN_S = 1.0  # after a failed snapshot, the first retry waits this long; each next failure doubles it
RETRY_MAX_S = 60.0
_R = TypeVar("_R")


# -- the image --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImageCapture:
    """The committed state through ``committed_offset``, as shallow copies of the committed maps."""

    committed_offset: int
    features: dict[str, int]
    brokers: dict[int, BrokerRegistration]
    topics: dict[Uuid, TopicInfo]
    partitions: dict[tuple[Uuid, int], PartitionRegistration]
    configs: dict[tuple[int, str], tuple[tuple[str, str], ...]]
    acls: dict[Uuid, StandardAcl] = field(default_factory=dict)
    quotas: dict[Entity, tuple[tuple[str, float], ...]] = field(default_factory=dict)

    def records(self) -> Iterator[ApiMessage]:
        """The whole image as metadata records, in Kafka's MetadataImage.write order."""
        return chain.from_iterable(self._walk(_PartitionRecords(), _same))

    def encoded(self) -> Iterator[bytes]:
        """:meth:`records`, serialized. A PartitionRecord's bytes after its partition index and topic id depend on
        its registration alone, and registrations are shared (one object for each distinct state, see
        ``controller/partition_replay.py``): those bytes are encoded once per registration object (measured: 4x
        the records/s of serializing each record, at 200k partitions). The records come in lists, a topic's
        partitions a slice at a time, flattened by ``chain``: a reader's ``islice`` then runs in C, with no
        generator resumed per record (measured: 40% less time producing a 2M-partition snapshot's records)."""
        return chain.from_iterable(self._walk(_PartitionEncoder(), serialize))

    def encoded_runs(self, n: int) -> list[Iterator[bytes]]:
        """:meth:`encoded` cut into at most ``n`` consecutive runs of about as many partitions each, for as many
        processes to encode at the same time (``quorum/log/snapshot_fork.py``): the first run starts with the
        features and brokers, the last ends with the configs, quotas and ACLs, and a topic's partitions follow it
        in its run. Counting each topic's partitions first takes one pass over their keys (~70 ms at 2M)."""
        totals = Counter(map(itemgetter(0), self.partitions))
        topics = list(self.topics.values())
        share = len(self.partitions) / max(n, 1)
        cuts, done = [0], 0
        for i, topic in enumerate(topics):
            if i and done >= share * len(cuts) and len(cuts) < n:
                cuts.append(i)
            done += totals.get(topic.id, 0)
        bounds = list(zip(cuts, [*cuts[1:], len(topics)], strict=True))
        return [
            chain.from_iterable(
                self._walk(
                    _PartitionEncoder(), serialize, (topics[a:b], totals), first=j == 0, last=j == len(bounds) - 1
                )
            )
            for j, (a, b) in enumerate(bounds)
        ]

    def _walk(
        self,
        partitions: _Partitions[_R],
        out: Callable[[ApiMessage], _R],
        run: tuple[list[TopicInfo], Counter[Uuid]] | None = None,
        *,
        first: bool = True,
        last: bool = True,
    ) -> Iterator[list[_R]]:
        """The records in order, as lists: each ``out(record)``, and the partitions as ``partitions`` makes them.
        ``run``: only these topics (a run of :meth:`encoded_runs`, with every topic's count of partitions), and the
        records before them only if ``first``, after them only if ``last``."""
        if first:
            yield [out(r) for r in self._features()]
            yield [out(_broker_record(b)) for b in sorted(self.brokers.values(), key=lambda b: b.id)]
        yield from self._topics(partitions, out, run)
        if not last:
            return
        if run is not None:
            self._warn_orphans(len(self.partitions) - sum(run[1].get(t.id, 0) for t in self.topics.values()))
        yield [
            out(ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name, value=value))
            for (resource_type, resource_name), items in self.configs.items()
            for name, value in items
        ]
        # Kafka's ClientQuotasImage: after the configs, before ACLs.
        yield [out(r) for entity, values in self.quotas.items() for r in quota_records(entity, values)]
        # ACLs in the order they were created (dict order), ids kept.
        yield [out(acl_record(acl_id, acl)) for acl_id, acl in self.acls.items()]

    def _features(self) -> Iterator[ApiMessage]:
        # metadata.version first: a reader may need it to decode what follows (Kafka's FeaturesImage).
        level = self.features.get(METADATA_VERSION_FEATURE)
        if level is not None:
            yield FeatureLevelRecord(name=METADATA_VERSION_FEATURE, feature_level=level)
        for name, other in self.features.items():
            if name != METADATA_VERSION_FEATURE:
                yield FeatureLevelRecord(name=name, feature_level=other)
        if level is not None and level >= MIGRATION_SUPPORTED_LEVEL:
            # This controller never migrates from ZooKeeper: the state is NONE, as its activation wrote it.
            yield ZkMigrationStateRecord(zk_migration_state=0)

    def _topics(
        self,
        partitions: _Partitions[_R],
        out: Callable[[ApiMessage], _R],
        run: tuple[list[TopicInfo], Counter[Uuid]] | None,
    ) -> Iterator[list[_R]]:
        parts = self.partitions
        counts: dict[Uuid, int] = {}
        # Dict order is creation order (topic ids are never reused), so replay rebuilds the name-collision index
        # with its names in the same order.
        for topic in self.topics.values() if run is None else run[0]:
            yield [out(TopicRecord(name=topic.name, topic_id=topic.id))]
            count = 0
            for piece in partitions.run(topic.id, parts):
                count += len(piece)
                yield piece
            counts[topic.id] = count
        if run is None:
            gaps = sum(counts.values()) != len(parts)
        else:
            gaps = any(count < run[1][topic_id] for topic_id, count in counts.items())
        if not gaps:
            return
        # Partitions after a gap in the numbering (only a hand-made log makes them): after their topic all the same.
        unknown = 0
        for (topic_id, i), p in parts.items():
            count = counts.get(topic_id)
            if count is None:
                unknown += 1  # its topic was removed around the gap (or is another run's)
            elif i > count:
                yield [partitions.one(topic_id, i, p)]
        if run is None:
            self._warn_orphans(unknown)

    def _warn_orphans(self, count: int) -> None:
        if count:  # partitions of a topic removed around a gap in their numbering: replay could not apply them
            log.warning("snapshot_orphan_partitions", partitions=count, offset=self.committed_offset)


def capture(controller: QuorumController, copy: bool = True) -> ImageCapture:
    """The controller's committed state, at a committed batch boundary (between two ``handle_commit`` calls).
    ``copy=False`` for a reader that sees the maps as they are at this instant whatever happens to them later (a
    child forked right away): the live committed maps themselves, no copy."""
    replication = controller.replication
    maps = (
        controller._features.committed(),
        controller.cluster.brokers.committed(),
        replication.topics.committed(),
        replication.partitions.committed(),
        replication.configs.committed(),
        controller.acls.acls.committed(),
        controller.quotas.quotas.committed(),
    )
    return ImageCapture(controller.committed_offset, *(m.copy() if copy else m for m in maps))  # type: ignore[arg-type]


def _broker_record(b: BrokerRegistration) -> RegisterBrokerRecord:
    # Fenced and controlled-shutdown state ride on the registration itself, as in Kafka's BrokerRegistration.
    return RegisterBrokerRecord(
        broker_id=b.id,
        incarnation_id=b.incarnation_id,
        broker_epoch=b.epoch,
        end_points=[
            BrokerEndpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
            for e in b.endpoints
        ],
        features=supported_features(),
        rack=b.rack,
        fenced=b.fenced,
        in_controlled_shutdown=b.in_controlled_shutdown,
    )


def _partition_record(topic_id: Uuid, index: int, p: PartitionRegistration) -> PartitionRecord:
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=list(p.replicas),
        isr=list(p.isr),
        removing_replicas=list(p.removing),
        adding_replicas=list(p.adding),
        leader=p.leader,
        leader_recovery_state=p.leader_recovery_state,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        directories=list(p.directories),
    )


def _same(record: ApiMessage) -> ApiMessage:
    return record


PARTITION_RUN = 1024  # partitions made per list: a reader taking a few records never waits for a whole topic


class _Partitions(Protocol[_R]):
    """Makes the records of partitions: a topic's, numbered from 0 without a gap, a run at a time; or one."""

    def run(self, topic_id: Uuid, parts: dict[tuple[Uuid, int], PartitionRegistration]) -> Iterator[list[_R]]: ...

    def one(self, topic_id: Uuid, index: int, p: PartitionRegistration) -> _R: ...


class _PartitionRecords:
    def run(self, topic_id: Uuid, parts: dict[tuple[Uuid, int], PartitionRegistration]) -> Iterator[list[ApiMessage]]:
        i = 0
        while (p := parts.get((topic_id, i))) is not None:
            yield [_partition_record(topic_id, i, p)]
            i += 1

    def one(self, topic_id: Uuid, index: int, p: PartitionRegistration) -> ApiMessage:
        return _partition_record(topic_id, index, p)


class _PartitionEncoder:
    """serialize(_partition_record(...)) from the bytes cached for each registration object: a record is its 3
    header bytes (frame version, api key, version), the partition index (int32), the topic id (16 bytes), then
    what the registration alone decides."""

    _HEAD = struct.Struct(">3si16s")  # the frame, the partition index, the topic id

    def __init__(self) -> None:
        self._cache: dict[int, tuple[PartitionRegistration, bytes, bytes]] = {}  # id -> (it, header, rest)

    def run(self, topic_id: Uuid, parts: dict[tuple[Uuid, int], PartitionRegistration]) -> Iterator[list[bytes]]:
        # The per-partition cost of writing a snapshot, hence the locals and one loop over the topic's partitions.
        get, cache, head = parts.get, self._cache, self._HEAD.pack
        start = 0
        while True:
            out = []
            for i in range(start, start + PARTITION_RUN):
                p = get((topic_id, i))
                if p is None:
                    if out:
                        yield out
                    return
                entry = cache.get(id(p))
                if entry is None or entry[0] is not p:  # the object is held in the entry: its id is not reused
                    out.append(self.one(topic_id, i, p))
                else:
                    out.append(head(entry[1], i, topic_id) + entry[2])
            yield out
            start += PARTITION_RUN

    def one(self, topic_id: Uuid, index: int, p: PartitionRegistration) -> bytes:
        entry = self._cache.get(id(p))
        if entry is None or entry[0] is not p:
            raw = serialize(_partition_record(topic_id, index, p))
            if raw[3:23] != self._HEAD.pack(raw[:3], index, topic_id)[3:]:
                raise AssertionError(f"PartitionRecord layout changed: {raw[:23].hex()}")
            self._cache[id(p)] = (p, raw[:3], raw[23:])
            return raw
        return self._HEAD.pack(entry[1], index, topic_id) + entry[2]


# -- loading ------------------------------------------------------------------------------------------------------


def load_records(controller: QuorumController, batches: Iterable[CommittedBatch]) -> int:
    """Replay a snapshot's records into the controller's fresh, empty state (standby-style: nothing pending);
    the number of records. Raises ValueError naming the record that cannot be applied."""
    replication = controller.replication
    replication.partitions.bulk_load()  # checks that nothing is pending: the fast path writes committed state
    replication.partition_records.bulk(True)
    fast = replication.partition_records.apply_run  # nearly every record of a large snapshot
    replay = controller._replay
    count = 0
    # Every object loaded lives on, and none is in a cycle: collections during the load would only rescan the
    # growing heap (measured: 4.5x slower at 200k partitions). They stay tracked for good (CPython never untracks
    # a NamedTuple, nor a key tuple holding a Uuid: a Python class's instances are GC objects), so after the load
    # the collector would walk them once per generation, in three pauses at later turns of the event loop
    # (measured at 1.2M partitions: 70, 90 and 110 ms). A node freezes them at once instead (settle_bulk_load); the
    # replaced state's garbage goes first, by a collection while the heap is small.
    collecting = gc.isenabled()
    if collecting:
        gc.collect()
    gc.disable()
    try:
        for batch in batches:
            values = batch.records
            i = fast(values)
            while i < len(values):
                try:
                    replay(deserialize(values[i]).message, -1)  # -1: not at a log offset (see the module's docstring)
                except Exception as e:
                    raise ValueError(f"record {count + i} of the snapshot: {type(e).__name__}: {e}") from e
                i = fast(values, i + 1)
            count += len(values)
    finally:
        replication.partition_records.bulk(False)
        if collecting:
            gc.enable()
            settle_bulk_load()
    return count


# -- the policy ---------------------------------------------------------------------------------------------------


class Snapshotter:
    """Kafka's SnapshotGenerator for one controller: counts the bytes of committed batches, takes a snapshot when
    enough have been committed or enough time has passed, and writes it without holding up commits."""

    def __init__(self, controller: QuorumController, clock: Callable[[], float] = time.monotonic) -> None:
        self.controller = controller
        self.clock = clock  # the policy's time (tests replace it)
        self.chunk_records = CHUNK_RECORDS
        # A writer that can (the runtime's) writes in a forked child: see quorum/log/snapshot_fork.py.
        self.in_child = True
        self.bytes_since = 0  # bytes of committed batches not in a snapshot taken (or being written)
        self.last_snapshot_at = clock()  # Kafka's: the interval first runs from the start
        self.last_snapshot_bytes = 0  # the latest snapshot's size (written or loaded here; 0: unknown)
        self._last: tuple[int, int, int] | None = None  # the last committed batch: (last offset, epoch, timestamp)
        self._task: asyncio.Task[SnapshotId] | None = None
        self._writer: SnapshotWriter | None = None  # the task's
        self._retry_at = 0.0
        self._backoff = 0.0

    @property
    def writing(self) -> bool:
        return self._task is not None

    def committed(self, batch: CommittedBatch) -> None:
        """After ``batch`` was applied (the committed view then holds exactly the state through it). Never raises:
        a snapshot failing must not stop commits."""
        self._last = (batch.last_offset, batch.epoch, batch.append_timestamp)
        self.bytes_since += batch.size_bytes
        self.controller.metrics.bytes_since_snapshot = self.bytes_since
        if self._task is not None:
            return
        settings = self.controller.settings
        now = self.clock()
        if now < self._retry_at:
            return
        threshold = max(
            settings.snapshot_max_new_record_bytes, int(settings.snapshot_growth_ratio * self.last_snapshot_bytes)
        )
        if self.bytes_since >= threshold:
            reason = f"at least {threshold} bytes were committed"
        elif (
            settings.snapshot_max_interval_ms > 0
            and now - self.last_snapshot_at >= settings.snapshot_max_interval_ms / 1000
        ):
            reason = f"{settings.snapshot_max_interval_ms} ms passed"
        else:
            return
        try:
            self._begin(reason)
        except Exception:
            pass  # logged and backed off by _begin

    def loaded(self, snapshot_id: SnapshotId, timestamp: int, size_bytes: int = 0) -> None:
        """The state was replaced by a snapshot's: count from there (Kafka resets its counters too)."""
        self._last = (snapshot_id.end_offset - 1, snapshot_id.epoch, timestamp)
        self.last_snapshot_bytes = size_bytes
        self.bytes_since = 0
        self.controller.metrics.bytes_since_snapshot = 0
        self.last_snapshot_at = self.clock()

    async def force(self, reason: str = "an operator asked for one") -> SnapshotId | None:
        """A snapshot of the committed state now, once frozen; the latest snapshot's id if nothing was committed
        since it; None if nothing was ever committed. Raises what made writing it fail."""
        while self._task is not None:
            try:
                await asyncio.shield(self._task)
            except Exception:
                pass  # logged; this call takes its own
        if self.controller.failed:
            raise RuntimeError("the controller stopped after a fatal fault: its state cannot be trusted")
        latest = self.controller.raft.latest_snapshot_id()
        if self._last is None or (latest is not None and latest.end_offset > self._last[0]):
            return latest
        task = self._begin(reason)
        if task is None:
            return self.controller.raft.latest_snapshot_id()
        return await asyncio.shield(task)

    async def close(self) -> None:
        task, writer = self._task, self._writer
        if task is None or writer is None:
            return
        task.cancel()
        with contextlib.suppress(BaseException):  # cancelled, or already logged as snapshot_failed
            await task
        if self._task is task:  # cancelled before it ever ran: nobody aborted its writer
            self._task = None
            writer.abort()

    def _begin(self, reason: str) -> asyncio.Task[SnapshotId] | None:
        """Capture the image and start writing it; None if Raft has this snapshot (or a later one) already."""
        assert self._last is not None
        last_offset, epoch, timestamp = self._last
        snapshot_id = SnapshotId(last_offset + 1, epoch)
        started = time.monotonic()
        writer = None
        try:
            writer = self.controller.raft.create_snapshot(snapshot_id, timestamp)
            if writer is None:
                # This snapshot or a later one exists (forced, or installed from the leader): the log is covered.
                self.bytes_since = 0
                self.controller.metrics.bytes_since_snapshot = 0
                self._taken(self.clock())
                return None
            fork = getattr(writer, "fork", None) if self.in_child and snapshot_fork.supported() else None
            # A child forked now holds the state as it is now: nothing to copy (the copy held up the loop for
            # ~57 ms at 2M partitions, measured here; the fork takes ~15 ms).
            image = capture(self.controller, copy=fork is None)
            if fork is not None:
                fork(image.encoded_runs)  # the child asks for runs: its helpers encode all but one
        except Exception as e:
            if writer is not None:
                with contextlib.suppress(Exception):  # the error that got us here is the one to report
                    writer.abort()
            self._failed(snapshot_id, e)
            raise
        pending, self.bytes_since = self.bytes_since, 0  # commits from now on count toward the next snapshot
        self.controller.metrics.bytes_since_snapshot = 0
        self._writer = writer
        self._task = spawn(
            self._write(None if fork is not None else image, writer, reason, started, self.clock(), pending),
            name=f"snapshot-{snapshot_id}",
            on_error=_already_logged,
        )
        return self._task

    async def _write(
        self,
        image: ImageCapture | None,
        writer: SnapshotWriter,
        reason: str,
        started: float,
        at: float,
        pending: int,
    ) -> SnapshotId:
        """Write ``image`` in chunks from this task; None: a child forked by :meth:`_begin` writes it."""
        snapshot_id = writer.snapshot_id
        count = 0
        freezing = False
        try:
            if image is None:
                freezing = True  # the writer removes its file itself if this fails
                size, count = await writer.write_all()  # type: ignore[attr-defined]
            else:
                records = image.encoded()
                while chunk := list(islice(records, self.chunk_records)):
                    writer.append(chunk)
                    count += len(chunk)
                    await asyncio.sleep(0)  # commits and requests run between chunks
                freezing = True
                size = await writer.freeze()
        except BaseException as e:
            self._task = None
            if not freezing:  # once freezing, the writer completes or removes its file itself
                with contextlib.suppress(Exception):  # the error that got us here is the one to report
                    writer.abort()
            if isinstance(e, Exception):
                self.bytes_since += pending  # still not in any snapshot
                self.controller.metrics.bytes_since_snapshot = self.bytes_since
                self._failed(snapshot_id, e)
            raise
        self._task = None
        self._taken(at)
        self.last_snapshot_bytes = size
        seconds = time.monotonic() - started
        m = self.controller.metrics
        m.snapshots_generated += 1
        m.last_snapshot_id = snapshot_id
        m.last_snapshot_time = started
        m.last_snapshot_seconds = seconds
        m.last_snapshot_bytes = size
        log.info(
            "snapshot_generated",
            node_id=self.controller.node_id,
            snapshot_id=str(snapshot_id),
            reason=reason,
            records=count,
            bytes=size,
            seconds=round(seconds, 3),
            records_per_s=round(count / seconds) if seconds > 0 else None,
        )
        return snapshot_id

    def _taken(self, at: float) -> None:
        self.last_snapshot_at = at
        self._backoff = 0.0
        self._retry_at = 0.0

    def _failed(self, snapshot_id: SnapshotId, error: Exception) -> None:
        # Not fatal (Kafka's snapshot generator reports to a non-fatal fault handler): the log still holds
        # everything; retried on a later commit once the backoff has passed.
        self._backoff = min(max(2 * self._backoff, RETRY_MIN_S), RETRY_MAX_S)
        self._retry_at = self.clock() + self._backoff
        self.controller.metrics.snapshot_failures += 1
        log.warning(
            "snapshot_failed",
            node_id=self.controller.node_id,
            snapshot_id=str(snapshot_id),
            error=f"{type(error).__name__}: {error}",
            retry_in_s=self._backoff,
        )


def _already_logged(error: BaseException) -> None:
    """A snapshot task's failure was logged as snapshot_failed where it happened; a forced one re-raises it."""
