"""The replicas of one broker (Kafka's ``ReplicaManager``, minus the storage).

:class:`ReplicaManager` is synchronous and reads time only through the clock it is given, so tests drive it with a
virtual one. It answers fetches as a leader, applies fetch answers as a follower, applies the controller's
metadata (whole, or as deltas: what it costs follows what changed), and hands every ISR change to ``submit``
(:mod:`pykraft.replica.alter_partition` sends them). Per-leader indexes of the replicas it follows keep a fetch's
cost to that leader's replicas, and fetch sessions (:mod:`pykraft.replica.session_fetching`) to those that
changed.

Throttles (:mod:`pykraft.replica.throttle`) bound what moves: as a follower, a throttled partition (listed in its
topic's follower.replication.throttled.replicas for this broker, this replica out of the ISR) asks for no more than
the follower quota holds and is left out of the fetch when it holds less than a message; the disk rate bounds every
partition's fetch the same way. As a leader, a throttled follower (listed for this broker in
leader.replication.throttled.replicas, the follower out of the ISR) gets no more than the leader quota holds, and an
answer with no records (no error) when it is spent. Partitions that are not throttled are never held back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Generator, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import structlog

from controller.partition_change import PartitionRegistration
from controller.requests import AlterPartitionResult
from pykraft.replica.fetch_session import FollowerSessions, LeaderSessions
from pykraft.replica.partition import (
    MESSAGE_BYTES,
    NO_LEADER,
    BrokerState,
    BrokerView,
    ChangeKind,
    FetchAnswer,
    FetchItem,
    Partition,
    PartitionKey,
    PartitionMetadata,
    PartitionUpdate,
    PendingChange,
    ReplicaConfig,
)
from pykraft.replica.session_fetching import SessionFetching, drain
from pykraft.replica.throttle import UNLIMITED, ReplicationThrottles
from quorum.errors import Errors
from quorum.log.message import Uuid

log = structlog.get_logger("pykraft.replica")


@dataclass
class ReplicaCounters:
    fetches_answered: int = 0  # fetch requests answered as a leader
    messages_sent: int = 0  # messages those answers carried
    fetches_sent: int = 0  # fetch requests sent as a follower
    messages_fetched: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    alter_partition_errors: dict[str, int] = field(default_factory=dict)
    # Kafka's BrokerTopicMetrics ReplicationBytesIn/Out and ReassignmentBytesIn/Out
    replication_bytes_in: int = 0  # appended as a follower
    replication_bytes_out: int = 0  # sent to followers as a leader
    reassignment_bytes_in: int = 0  # appended for replicas this broker is adding
    reassignment_bytes_out: int = 0  # sent to replicas a reassignment is adding


class ReplicaInfo(NamedTuple):
    """One replica a broker holds, as DescribeReplicas answers it (Kafka's DescribeLogDirs, plus replica state)."""

    broker_id: int
    topic_id: Uuid
    topic: str
    partition: int
    size_bytes: int  # log_end_offset * MESSAGE_BYTES
    log_end_offset: int
    high_watermark: int
    is_leader: bool
    in_isr: bool
    throttled: bool  # its replication is throttled now (as a leader towards some follower, or as a follower)


class LedCounts(NamedTuple):
    """The replicas a broker leads: how many, and how many are in each state its status and metrics report."""

    leaders: int
    under_replicated: int
    reassigning: int
    pending_isr_changes: int
    leader_throttled: int  # throttled towards some follower now (0 while no leader quota is in force)


class ReplicaManager(SessionFetching):
    def __init__(
        self,
        broker_id: int,
        config: ReplicaConfig,
        clock: Callable[[], int],
        broker_epoch: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.broker_epoch = broker_epoch
        self.partitions: dict[PartitionKey, Partition] = {}
        self.brokers = BrokerView()
        self.submit: Callable[[PendingChange], None] = lambda change: None
        self.request_refresh: Callable[[], None] = lambda: None
        self.counters = ReplicaCounters()
        disk_rate = config.disk_rate if config.disk_rate is not None else UNLIMITED
        # Two messages of burst at least: a rate below one message per fetch wait still moves whole messages.
        self.throttles = ReplicationThrottles(broker_id, clock(), disk_rate, min_burst=2 * MESSAGE_BYTES)
        # When each bounded replica was last granted quota: the longest-waiting is served first, so none starves.
        self._granted: dict[PartitionKey, int] = {}
        self._grants = 0
        # Indexes kept as metadata is applied, so that nothing per fetch walks every replica held here.
        self._by_leader: dict[int, dict[PartitionKey, Partition]] = {}  # leader -> the replicas followed from it
        # The replicas led here: what the ISR expiration and the status walk (a third of those held, at RF 3), not
        # every replica (at 2M partitions a walk of all, every 15 s, was 7% of an idle broker's samples).
        self._led: dict[PartitionKey, Partition] = {}
        self._moving: dict[PartitionKey, str] = {}  # replicas out of an ISR or reassigning -> topic
        # Led replicas under-replicated, and led replicas a reassignment adds to: kept as replicas change, so that a
        # scrape counts them without walking every replica led here (~333k at 2M partitions: a walk took 0.2 s of
        # CPU, and brokers busy with a restarted peer's ISR expansions answered /metrics in more than 2 s).
        self._under: set[PartitionKey] = set()
        self._reassigning: set[PartitionKey] = set()
        self._stale_keys = False  # some replica's key is a newer (equal) tuple than the maps hold: see rekey()
        self.sessions = FollowerSessions()
        self.leader_sessions = LeaderSessions()

    # -- metadata -----------------------------------------------------------------------------------------------

    def apply_metadata(self, partitions: Iterable[PartitionMetadata], brokers: dict[int, BrokerState]) -> int:
        """The controller's current view: every partition (those without a replica here are skipped) and every
        registered broker. Partitions that no longer have a replica here are dropped. Returns how many partitions
        changed state."""
        mine = [m for m in partitions if self.broker_id in m.replicas]
        keys = {m.partition_key for m in mine}
        return self.apply_delta(mine, [k for k in self.partitions if k not in keys], brokers)

    def apply_delta(
        self,
        changed: Iterable[PartitionMetadata],
        removed: Iterable[PartitionKey],
        brokers: dict[int, BrokerState] | None = None,
    ) -> int:
        """What changed in the controller's view since the last apply (Kafka's ReplicaManager.applyDelta):
        partitions that came or changed (one without a replica here is dropped), partitions that went (keys not
        held here are ignored), and every registered broker if they changed. Returns how many partitions changed
        state. Costs what changed, not what is held."""
        return self.apply_updates(((m.partition_key, m.topic, m) for m in changed), removed, brokers, image_keys=False)

    def apply_updates(
        self,
        changed: Iterable[PartitionUpdate],
        removed: Iterable[PartitionKey],
        brokers: dict[int, BrokerState] | None = None,
        *,
        image_keys: bool = True,
    ) -> int:
        """:meth:`apply_delta` of ``(key, topic name, assignment)`` updates, as a broker reads them from its metadata
        image: the image's own key tuples (``image_keys``: a replica takes the image's tuple, see :meth:`rekey`) and
        registrations, no PartitionMetadata built per partition."""
        now = self.clock()
        epoch = self.broker_epoch()
        if brokers is not None:
            self.brokers = BrokerView(brokers)
        changes = 0
        gone = []
        me = self.broker_id
        for key, topic, m in changed:
            if me not in m.replicas:
                gone.append(key)
                continue
            p = self.partitions.get(key)
            if p is None:
                p = self.partitions[key] = Partition(key[0], topic, key[1], me, self.config, key)
                if me not in m.adding:  # an original replica: it holds the partition's data already
                    p.start_log(self.config.initial_messages)
            elif image_keys and p.key is not key:
                p.key = key  # an equal tuple from a reloaded image: the maps take it in rekey()
                self._stale_keys = True
            before = p.metadata_seen
            if p.remotes and p.changes_with(m):
                # Before: a leader that becomes a follower forgets its followers. A change that keeps this leader and
                # its epoch (an ISR change) wakes only those it takes out of the ISR: one that stays in still holds
                # the whole idle log (why it was parked), and waking it costs an answer for nothing — for each of
                # the ~170k partitions a peer's controlled shutdown shrinks here at 2M partitions.
                same_leader = m.leader == me and m.leader_epoch == p.leader_epoch
                self.leader_sessions.unpark(p, keep=m.isr if same_leader else ())
            change = p.apply_metadata(m, now, epoch)
            if p.metadata_seen != before:
                changes += 1
                self._index(key, p)
            if change is not None:
                self.submit(change)
        dropped = False
        for key in (*gone, *removed):
            p = self.partitions.pop(key, None)
            if p is None:
                continue
            dropped = True
            self._unindex(key, p)
            log.info("replica_removed", topic=p.topic, partition=p.index, topic_id=str(p.topic_id))
        if dropped:
            self.throttles.retain({p.topic for p in self.partitions.values()})
            self._granted = {k: v for k, v in self._granted.items() if k in self.partitions}
        return changes

    def holds(self, key: PartitionKey, registration: PartitionRegistration) -> bool:
        """Is the partition held here, and would the image's ``registration`` (its leader and partition epochs) not
        be applied to it? Then a full read passes it over: :meth:`apply_delta` would change nothing. Its key is
        taken (the image's tuple, for :meth:`rekey`)."""
        p = self.partitions.get(key)
        if p is None or p.changes_with(registration):
            return False
        if p.key is not key:
            p.key = key
            self._stale_keys = True
        return True

    def rekey(self) -> None:
        """After a full read of a reloaded image: hold every replica under its own key (the new image's tuple). A
        dict keeps the key it was first given, so the replaced image's tuples (and topic ids) would live on, one
        per replica. The maps are rebuilt in one pass (a delete and insert per key would leave a dummy each)."""
        if not self._stale_keys:
            return
        self._stale_keys = False
        self.partitions = {p.key: p for p in self.partitions.values()}
        self._by_leader = {leader: {p.key: p for p in ps.values()} for leader, ps in self._by_leader.items()}
        self._led = {p.key: p for p in self._led.values()}
        self._moving = {self.partitions[k].key: topic for k, topic in self._moving.items() if k in self.partitions}
        self._under = {self.partitions[k].key for k in self._under if k in self.partitions}
        self._reassigning = {self.partitions[k].key for k in self._reassigning if k in self.partitions}
        self._granted = {self.partitions[k].key: n for k, n in self._granted.items() if k in self.partitions}

    def _index(self, key: PartitionKey, p: Partition) -> None:
        """Keep the indexes of led replicas, of followed replicas per leader and of the replicas that move (see
        topics_to_watch)."""
        if p.is_leader:
            self._led[key] = p
        else:
            self._led.pop(key, None)
        leader = p.leader if not p.is_leader and p.leader >= 0 else NO_LEADER
        old = p.followed_from
        if old != leader:
            if old != NO_LEADER:
                self._unfollow(key, p)
            if leader != NO_LEADER:
                p.followed_from = leader
                self._by_leader.setdefault(leader, {})[key] = p
                self.sessions.changed(leader, key)
        elif leader != NO_LEADER:
            self.sessions.changed(leader, key)
        self._note_moving(key, p)

    def _unfollow(self, key: PartitionKey, p: Partition) -> None:
        leader, p.followed_from = p.followed_from, NO_LEADER
        followed = self._by_leader[leader]
        del followed[key]
        if not followed:
            del self._by_leader[leader]
        self.sessions.changed(leader, key)

    def _unindex(self, key: PartitionKey, p: Partition) -> None:
        self._led.pop(key, None)
        if p.followed_from != NO_LEADER:
            self._unfollow(key, p)
        self._moving.pop(key, None)
        self._under.discard(key)
        self._reassigning.discard(key)
        self.leader_sessions.unpark(p)  # its sessions answer that it is gone

    def _note_moving(self, key: PartitionKey, p: Partition) -> None:
        """After any change of the replica's assignment, ISR or leadership: the indexes of what moves."""
        led = p.is_leader
        if p.adding or p.removing or not p.in_isr or (led and len(p.isr) < len(p.replicas)):
            self._moving[key] = p.topic
        else:
            self._moving.pop(key, None)
        if led and under_replicated(p):
            self._under.add(key)
        else:
            self._under.discard(key)
        if led and p.adding:
            self._reassigning.add(key)
        else:
            self._reassigning.discard(key)

    def led_replicas(self) -> list[Partition]:
        """The replicas led here, as a list (a copy: safe to read on another thread while the loop changes them)."""
        return list(self._led.values())

    def led_counts(self, *, walk: bool = True) -> LedCounts:
        """The replicas led here: how many, under-replicated and reassigning from the indexes, and with ``walk``
        (tests; the status line counts them a slice at a time, :meth:`summary_steps`) those with an ISR change in
        flight, counted in one pass over :meth:`led_replicas`. ``leader_throttled`` by a pass too, only while a
        leader quota is in force (else none can be). The metrics thread asks without ``walk``: its cost then does
        not grow with the replicas led."""
        limited = not self.throttles.leader.unlimited
        pending = throttled = 0
        if walk or limited:
            led = self.led_replicas()
            leaders = len(led)
            for p in led:
                pending += p.pending is not None
                throttled += limited and self.throttled(p)
        else:
            leaders = len(self._led)
        return LedCounts(leaders, len(self._under), len(self._reassigning), pending if walk else -1, throttled)

    def topics_to_watch(self) -> set[str]:
        """Topics whose throttle configs this broker needs: where it holds a replica that is out of the ISR (its
        own, or as leader a follower's) or under reassignment. Empty when nothing moves."""
        return set(self._moving.values())

    # -- throttles ----------------------------------------------------------------------------------------------

    def follower_throttled(self, p: Partition) -> bool:
        """Kafka's shouldFollowerThrottle, minus the quota check: listed for this broker and out of the ISR."""
        return (
            not self.throttles.follower.unlimited and not p.in_isr and self.throttles.follower_listed(p.topic, p.index)
        )

    def leader_throttled(self, p: Partition, follower_id: int) -> bool:
        """Kafka's shouldLeaderThrottle, minus the quota check: listed for this broker, the follower out of the
        ISR."""
        return (
            not self.throttles.leader.unlimited
            and follower_id not in p.isr
            and self.throttles.leader_listed(p.topic, p.index)
        )

    def throttled(self, p: Partition) -> bool:
        """Is this replica's replication throttled now (towards some follower as leader, or as a follower)?"""
        if p.is_leader:
            return any(self.leader_throttled(p, b) for b in p.replicas if b != self.broker_id)
        return self.follower_throttled(p)

    # -- leader -------------------------------------------------------------------------------------------------

    def answer_fetch(
        self, replica_id: int, replica_epoch: int, max_bytes: int, items: Iterable[tuple[bytes, int, int, int, int]]
    ) -> list[tuple[bytes, int, FetchAnswer]]:
        """A follower's fetch for its partitions led here: ``(topic id, partition, fetch offset, current leader
        epoch, partition max bytes)`` each; answers in request order. The whole answer carries at
        most ``max_bytes`` (replica.fetch.response.max.bytes) and each partition at most its own max bytes."""
        now = self.clock()
        epoch = self.broker_epoch()
        budget = [max(1, max_bytes // MESSAGE_BYTES)]
        self.counters.fetches_answered += 1
        return [
            (
                topic_id,
                index,
                self._answer_one(
                    topic_id,
                    index,
                    fetch_offset,
                    leader_epoch,
                    partition_max_bytes,
                    replica_id,
                    replica_epoch,
                    budget,
                    now,
                    epoch,
                ),
            )
            for topic_id, index, fetch_offset, leader_epoch, partition_max_bytes in items
        ]

    def _answer_one(
        self,
        topic_id: bytes,
        index: int,
        fetch_offset: int,
        leader_epoch: int,
        partition_max_bytes: int,
        replica_id: int,
        replica_epoch: int,
        budget: list[int],
        now: int,
        epoch: int,
    ) -> FetchAnswer:
        p = self.partitions.get((topic_id, index))  # type: ignore[arg-type]  # bytes hash as the Uuid does
        if p is None:
            return FetchAnswer(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        per_partition = min(max(1, partition_max_bytes // MESSAGE_BYTES), budget[0])
        throttled = p.is_leader and self.leader_throttled(p, replica_id)
        if throttled:  # no more than the quota holds, and nothing unless it holds a tenth of a second's worth
            quota = self.throttles.leader
            want = min(per_partition, max(0, p.leo(now) - fetch_offset)) * MESSAGE_BYTES
            can = quota.available(now) // MESSAGE_BYTES
            per_partition = (
                min(per_partition, can) if can * MESSAGE_BYTES >= quota.min_grant(want, MESSAGE_BYTES) else 0
            )
        answer, change = p.answer_fetch(
            replica_id, replica_epoch, fetch_offset, leader_epoch, per_partition, now, self.brokers, epoch
        )
        if answer.error == Errors.NONE:
            sent = answer.records_end_offset - fetch_offset
            budget[0] = max(0, budget[0] - sent)
            if throttled and sent == 0 and fetch_offset < answer.log_end_offset:
                self.throttles.counters.leader_holds += 1  # the quota is spent: no records, no error
            self._count_sent(p, replica_id, sent, throttled, now)
        if change is not None:
            self.submit(change)
        return answer

    def _count_sent(self, p: Partition, replica_id: int, messages: int, throttled: bool, now: int) -> None:
        sent = messages * MESSAGE_BYTES
        if sent <= 0:
            return
        self.counters.messages_sent += messages
        self.counters.replication_bytes_out += sent
        if replica_id in p.adding:
            self.counters.reassignment_bytes_out += sent
        if self.throttles.leader_listed(p.topic, p.index):
            self.throttles.leader.take(sent, now)  # as Kafka: a listed partition's bytes count, in the ISR or not
        if throttled:
            self.throttles.counters.leader_throttled_bytes += sent

    def maybe_shrink_isr(self) -> int:
        """Kafka's isr-expiration task, run every replica.lag.time.max.ms / 2. Returns the changes started."""
        return drain(self.shrink_isr_steps())

    def shrink_isr_steps(self, pause_every: int = 0) -> Generator[None, None, int]:
        """:meth:`maybe_shrink_isr` in steps: a pause after every ``pause_every`` replicas led (0: none). At 2M
        partitions a broker leads ~330k, and one pass held its loop for 90-140 ms of CPU (a niced broker's loop was
        then late up to 1.9 s). A replica no longer led when its turn comes is passed over; the clock and the broker
        epoch are read again after each pause."""
        now = self.clock()
        epoch = self.broker_epoch()
        started = 0
        led = list(self._led.values()) if pause_every else self._led.values()  # a copy: it may change when paused
        for i, p in enumerate(led, 1):
            if pause_every and i % pause_every == 0:
                yield
                now, epoch = self.clock(), self.broker_epoch()
            if pause_every and self._led.get(p.key) is not p:
                continue  # no longer led (or led anew) since the pass began
            if p.pending is not None:
                # Kafka's maybeShrinkIsr does nothing while a change is in flight; its answer raises the high
                # watermark. A broker back from a restart at 2M partitions has ~250k expansions waiting: each walk
                # looked at all of them for nothing.
                continue
            if p.remotes.all_parked(p.isr):
                continue  # every ISR follower parked: it holds the whole idle log, nothing to shrink or raise
            p.high_watermark_now(now, self.brokers)
            change = p.maybe_shrink(now, epoch)
            if change is not None:
                self.submit(change)
                started += 1
        return started

    def on_alter_answer(self, change: PendingChange, result: AlterPartitionResult | None, error: Errors) -> bool:
        """One partition's AlterPartition answer. Returns True if it should be sent again."""
        p = change.partition
        if self.partitions.get(p.key) is not p:
            return False  # the replica was dropped meanwhile
        if error == Errors.NONE and result is not None:
            old_epoch = p.partition_epoch
            applied = p.on_alter_result(
                change,
                result.leader_epoch,
                result.isr,
                result.leader_recovery_state,
                result.partition_epoch,
                self.clock(),
                self.brokers,
            )
            if applied:
                self._log_change(change, result, old_epoch)
                self._note_moving(p.key, p)
                self.leader_sessions.unpark(p, keep=p.isr)  # as for metadata: those still in sync sleep on
            elif p.metadata_stale:
                self.request_refresh()
            return False
        retry = p.on_alter_error(change, error)
        self.leader_sessions.unpark(p)  # a change no longer in flight: the followers' fetches count again
        name = error.name if isinstance(error, Errors) else str(error)
        self.counters.alter_partition_errors[name] = self.counters.alter_partition_errors.get(name, 0) + 1
        (log.debug if retry else log.info)(
            "alter_partition_failed",
            topic=p.topic,
            partition=p.index,
            change=change.kind.value,
            proposed_isr=list(change.members),
            leader_epoch=change.leader_epoch,
            partition_epoch=change.partition_epoch,
            error=name,
            message=result.error.message if result is not None else None,
            then="retry" if retry else "refresh metadata" if p.metadata_stale else "back to the committed ISR",
        )
        if p.metadata_stale:
            self.request_refresh()
        return retry

    def _log_change(self, change: PendingChange, result: AlterPartitionResult, old_partition_epoch: int) -> None:
        if change.kind == ChangeKind.SHRINK:
            self.counters.isr_shrinks += 1
        elif change.kind == ChangeKind.EXPAND:
            self.counters.isr_expands += 1
        p = change.partition
        log.info(
            change.kind.value,
            topic=p.topic,
            partition=p.index,
            topic_id=str(p.topic_id),
            old_isr=list(change.old_isr),
            new_isr=list(result.isr),
            leader_epoch=result.leader_epoch,
            partition_epoch=result.partition_epoch,
            previous_partition_epoch=old_partition_epoch,
            leader_recovery_state=result.leader_recovery_state,
            **change.detail,
        )

    # -- follower -----------------------------------------------------------------------------------------------

    def followed_leaders(self) -> set[int]:
        """The brokers this one fetches from (leaders of its follower replicas)."""
        return set(self._by_leader)

    def fetch_batch(self, leader_id: int) -> list[FetchItem]:
        """The replicas to fetch from ``leader_id`` now, each with the bytes it may take: replica.fetch.max.bytes,
        bounded by the disk rate, and for a throttled partition by the follower quota (Kafka's
        shouldFollowerThrottle leaves it out when the quota is spent). What a bounded fetch may take is reserved
        from its buckets until the answer comes (:meth:`on_fetch_answers`, :meth:`fetch_failed`) — no more than
        the replica lagged behind at the last answer, plus a fetch wait's production — and handed out to the
        replicas that waited longest first, so none starves."""
        now = self.clock()
        candidates = [p for p in self._by_leader.get(leader_id, {}).values() if p.fetchable(now)]
        if not candidates:
            return []
        candidates.sort(key=lambda p: self._granted.get(p.key, -1))
        t = self.throttles
        out = []
        for p in candidates:
            throttled = self.follower_throttled(p)
            if t.disk.unlimited and not throttled:
                out.append(FetchItem(p, p.log_end_offset, p.leader_epoch, self.config.replica_fetch_max_bytes))
                continue
            want = self._fetch_want(p)
            grant, floor = want, MESSAGE_BYTES
            for bucket in (t.disk, t.follower) if throttled else (t.disk,):
                grant = min(grant, bucket.available(now))
                floor = max(floor, bucket.min_grant(want, MESSAGE_BYTES))
            grant -= grant % MESSAGE_BYTES
            if grant < floor:
                if throttled and t.follower.available(now) < floor:
                    t.counters.follower_skips += 1
                else:
                    t.counters.disk_holds += 1
                continue
            t.disk.take(grant, now)
            if throttled:
                t.follower.take(grant, now)
            self._grants += 1
            self._granted[p.key] = self._grants
            disk_reserved = 0 if t.disk.unlimited else grant
            out.append(FetchItem(p, p.log_end_offset, p.leader_epoch, grant, disk_reserved, grant if throttled else 0))
        return out

    def _fetch_want(self, p: Partition) -> int:
        """What a bounded replica asks for: replica.fetch.max.bytes, or less when its last answer said it lagged
        less (plus what the leader may produce over a fetch wait), in whole messages."""
        want = self.config.replica_fetch_max_bytes
        if p.leader_log_end_offset >= 0:
            slack = int(self.config.produce_rate * self.config.replica_fetch_wait_max_ms / 1000) + 1
            want = min(want, (max(0, p.leader_log_end_offset - p.log_end_offset) + slack) * MESSAGE_BYTES)
        return max(MESSAGE_BYTES, want - want % MESSAGE_BYTES)

    def fetch_delay_ms(self, leader_id: int) -> int:
        """How long a fetcher with nothing to ask for should wait: replica.fetch.wait.max.ms, or less when a
        replica held back by a quota can move sooner."""
        now = self.clock()
        wait = self.config.replica_fetch_wait_max_ms
        t = self.throttles
        if self.unbounded:
            return wait
        for p in self._by_leader.get(leader_id, {}).values():
            if not p.fetchable(now):
                continue
            throttled = self.follower_throttled(p)
            if t.disk.unlimited and not throttled:
                continue
            want = self._fetch_want(p)
            need = max(
                t.disk.wait_ms(t.disk.min_grant(want, MESSAGE_BYTES), now),
                t.follower.wait_ms(t.follower.min_grant(want, MESSAGE_BYTES), now) if throttled else 0,
            )
            if need > 0:
                wait = min(wait, need)
        return max(1, wait)

    def on_fetch_answers(self, sent: list[FetchItem], answers: dict[tuple[bytes, int], FetchAnswer]) -> bool:
        """Apply a leader's answers to what was sent. Returns True if some partition is still behind (the
        leader had more than it carried): fetch again at once."""
        return drain(self.fetch_answer_steps(sent, answers))

    def fetch_answer_steps(
        self, sent: list[FetchItem], answers: dict[tuple[bytes, int], FetchAnswer], pause_every: int = 0
    ) -> Generator[None, None, bool]:
        """:meth:`on_fetch_answers` in steps: a pause after every ``pause_every`` items (0: none). What changes
        while paused is what may change while a fetch is in flight: each answer is checked against its replica's
        state when it is applied."""
        now = self.clock()
        behind = refresh = False
        t = self.throttles
        for i, item in enumerate(sent, 1):
            if pause_every and i % pause_every == 0:
                yield
                now = self.clock()
            p = item.partition
            answer = answers.get((p.topic_id, p.index))
            outcome = p.on_fetch_answer(item.leader_epoch, answer, now) if answer is not None else None
            got = outcome.messages * MESSAGE_BYTES if outcome is not None else 0
            self._settle(item, got, now)
            if outcome is None:
                continue
            self.counters.messages_fetched += outcome.messages
            if got:
                self.counters.replication_bytes_in += got
                if p.is_adding_local:
                    self.counters.reassignment_bytes_in += got
                if item.follower_reserved:
                    t.counters.follower_throttled_bytes += got
            behind = behind or outcome.behind
            refresh = refresh or outcome.refresh
        self.counters.fetches_sent += 1
        if refresh:
            self.request_refresh()
        return behind

    def _settle(self, item: FetchItem, got: int, now: int) -> None:
        """Bytes that moved against what was reserved: the rest goes back to the buckets."""
        t = self.throttles
        if item.disk_reserved:
            t.disk.give_back(item.disk_reserved - got)
        else:
            t.disk.take(got, now)
        if item.follower_reserved:
            t.follower.give_back(item.follower_reserved - got)
        elif got and t.follower_listed(item.partition.topic, item.partition.index):
            t.follower.take(got, now)  # as Kafka: a listed partition's bytes count, in the ISR or not

    def fetch_failed(self, sent: list[FetchItem]) -> None:
        """The leader could not be reached: back off these partitions (replica.fetch.backoff.ms)."""
        now = self.clock()
        until = now + self.config.replica_fetch_backoff_ms
        for item in sent:
            item.partition.fetch_backoff_until_ms = until
            self._settle(item, 0, now)

    # -- what a test or a status line wants -------------------------------------------------------------------

    def summary(self) -> dict[str, int]:
        return drain(self.summary_steps())

    def summary_steps(self, pause_every: int = 0) -> Generator[None, None, dict[str, int]]:
        """:meth:`summary` in steps: a pause after every ``pause_every`` replicas (0: none). A broker may hold a
        million (at 2M partitions, RF 3, six brokers), and the status line's one pass held its loop as long as the
        isr-expiration pass did. The sums are over the replicas held when it began."""
        replicas = list(self.partitions.values())
        step = pause_every or max(1, len(replicas))
        producing = self.config.produce_rate > 0
        count_throttled = not (self.unbounded and self.throttles.leader.unlimited)
        leos = throttled = pending = 0
        for start in range(0, len(replicas), step):
            if start:
                yield
            now = self.clock()
            part = replicas[start : start + step]
            # The cheapest passes that answer: no log grows without a producer.
            leos += sum(p.leo(now) for p in part) if producing else sum(p.log_end_offset for p in part)
            if count_throttled:
                throttled += sum(1 for p in part if self.throttled(p))
            pending += sum(1 for p in part if p.pending is not None and self._led.get(p.key) is p)
        led = self.led_counts(walk=False)
        return {
            "partitions": len(replicas),
            "leaders": led.leaders,
            "under_replicated": led.under_replicated,
            "reassigning": led.reassigning,
            "pending_isr_changes": pending,
            "throttled": throttled,
            "log_end_offset_sum": leos,
        }

    def describe_replicas(self, wanted: Collection[tuple[bytes, int]] | None = None) -> list[ReplicaInfo]:
        """Every replica held here (or those of ``wanted`` held here), ordered by topic and partition."""
        now = self.clock()
        out = []
        for key, p in sorted(self.partitions.items(), key=lambda kv: (kv[1].topic, kv[1].index)):
            if wanted is not None and key not in wanted:
                continue
            leo = p.leo(now)
            hw = p.high_watermark_now(now, self.brokers) if p.is_leader else p.high_watermark
            info = ReplicaInfo(
                self.broker_id,
                p.topic_id,
                p.topic,
                p.index,
                leo * MESSAGE_BYTES,
                leo,
                hw,
                p.is_leader,
                p.in_isr,
                self.throttled(p),
            )
            out.append(info)
        return out


def under_replicated(p: Partition) -> bool:
    """Kafka's isUnderReplicated (on the leader): fewer in the ISR than the replication factor, which during a
    reassignment counts the replicas minus those being added."""
    return p.is_leader and len(p.isr) < len(p.replicas) - len(p.adding)
