"""One partition replica on one broker: its simulated log, and — where the broker leads — its followers' fetch
state and the ISR decisions of Kafka's ``Partition`` (maybeShrinkIsr, maybeExpandIsr, maybeIncrementLeaderHW and the
pending-AlterPartition states).

Pure: every method that depends on time takes ``now_ms``; nothing here reads a clock, sleeps or sends. Decisions
that need the controller come back as a :class:`PendingChange`, which the caller sends as AlterPartition and answers
with :meth:`Partition.on_alter_result` / :meth:`Partition.on_alter_error`.

Offsets count messages. A leader's log grows at ``produce_rate`` messages per second from the moment it became
leader (computed when asked, so an idle agent costs nothing); each message counts as :data:`MESSAGE_BYTES` bytes
when a fetch's size is bounded (and against the replication throttles: :mod:`pykraft.replica.throttle`).

Partition sizes: the agent's ``initial_partition_bytes`` (``pykraft broker --initial-partition-bytes``) is the data
every partition held before this simulation began. The first time a broker sees a partition, a replica in the
partition's original assignment (its replicas minus those being added by a reassignment) starts with
``initial_partition_bytes // MESSAGE_BYTES`` messages, high watermark included: all original replicas hold the same
data, so they are in sync. A replica the broker holds because it is one of the partition's ``adding`` replicas (a
reassignment's target) starts empty and copies the leader's whole log through fetches, at the pace the throttles
and the disk rate allow. A restarted agent sees every partition for the first time again.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple

from controller.partition_change import PartitionRegistration
from controller.requests import LeaderRecoveryState
from quorum.errors import Errors
from quorum.log.message import Uuid

MESSAGE_BYTES = 1024  # what one simulated message counts for against a fetch's max bytes
NO_LEADER = -1


@dataclass(frozen=True)
class ReplicaConfig:
    """The data plane's settings, by Kafka's broker config names."""

    produce_rate: float = 0.0  # messages per second appended to each partition this broker leads
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    replica_fetch_wait_max_ms: int = 500  # replica.fetch.wait.max.ms: a caught-up follower's pause between fetches
    replica_fetch_max_bytes: int = 1_048_576  # replica.fetch.max.bytes: per partition and fetch
    replica_fetch_response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes: per fetch
    replica_fetch_backoff_ms: int = 1000  # replica.fetch.backoff.ms: after a failed fetch
    replica_socket_timeout_ms: int = 30_000  # replica.socket.timeout.ms: a fetch's deadline
    initial_partition_bytes: int = 0  # the log an original replica starts with (see the module docstring)
    disk_rate: int | None = None  # bytes per second this broker may append as a follower (None: unlimited)

    def __post_init__(self) -> None:
        if self.produce_rate < 0:
            raise ValueError(f"produce rate {self.produce_rate} must not be negative")
        if self.replica_lag_time_max_ms <= 0:
            raise ValueError(f"replica.lag.time.max.ms {self.replica_lag_time_max_ms} must be positive")
        if self.replica_fetch_max_bytes < MESSAGE_BYTES:
            raise ValueError(f"replica.fetch.max.bytes {self.replica_fetch_max_bytes} is below one message")
        if self.initial_partition_bytes < 0:
            raise ValueError(f"initial partition bytes {self.initial_partition_bytes} must not be negative")
        if self.disk_rate is not None and self.disk_rate <= 0:
            raise ValueError(f"disk rate {self.disk_rate} must be positive")

    @property
    def initial_messages(self) -> int:
        return self.initial_partition_bytes // MESSAGE_BYTES


class BrokerState(NamedTuple):
    """What the controller last said about a broker (describe_cluster)."""

    epoch: int
    fenced: bool
    in_controlled_shutdown: bool
    endpoint: tuple[str, int] | None


class BrokerView:
    """The registered brokers as last described; Kafka's KRaftMetadataCache for the checks a leader makes."""

    def __init__(self, brokers: dict[int, BrokerState] | None = None) -> None:
        self.brokers = brokers or {}

    def eligible(self, broker_id: int, fetch_epoch: int | None) -> bool:
        """Kafka's isReplicaIsrEligible (KRaft): registered, unfenced, not shutting down, and the broker epoch its
        fetches carry is the registered one (-1: not checked)."""
        b = self.brokers.get(broker_id)
        if b is None or b.fenced or b.in_controlled_shutdown or fetch_epoch is None:
            return False
        return fetch_epoch == -1 or fetch_epoch == b.epoch

    def stale(self, broker_id: int, fetch_epoch: int) -> bool:
        """A fetch from an older incarnation of the broker (Kafka's updateFetchStateOrThrow check)."""
        b = self.brokers.get(broker_id)
        return fetch_epoch != -1 and b is not None and b.epoch > fetch_epoch


@dataclass(slots=True)
class ReplicaState:
    """The leader's view of one follower (Kafka's ``ReplicaState``)."""

    broker_id: int
    log_end_offset: int = -1  # -1: unknown (no fetch in this leader epoch yet)
    last_fetch_leader_leo: int = 0  # the leader's LEO when the previous fetch arrived
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0
    broker_epoch: int | None = None  # from its fetches
    # Its fetch session with this leader (pykraft.replica.fetch_session): the session it is in, what it last asked
    # (fetch offset, current leader epoch, max bytes) and what it was last told (high watermark, log end).
    session: Any = None
    fetch_offset: int = -1
    fetch_leader_epoch: int = -1
    fetch_max_bytes: int = 0
    told_high_watermark: int = -1
    told_log_end_offset: int = -1
    parked: Any = None  # the session, while this follower needs nothing until the partition changes

    def update_fetch_state(self, fetch_offset: int, now_ms: int, leader_leo: int, broker_epoch: int) -> None:
        """Kafka's Replica.updateFetchStateOrThrow: caught up now if the fetch reads up to the leader's current LEO,
        else caught up as of the previous fetch if it reads up to the LEO the leader had then."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = max(leader_leo, self.last_fetch_leader_leo)
        self.last_fetch_time_ms = now_ms
        self.broker_epoch = broker_epoch

    def is_caught_up(self, leader_leo: int, now_ms: int, max_lag_ms: int) -> bool:
        return leader_leo == self.log_end_offset or now_ms - self.last_caught_up_time_ms <= max_lag_ms

    def reset(self, now_ms: int, leader_leo: int, is_new_leader: bool, in_sync: bool) -> None:
        """Kafka's resetReplicaState, at a new leader epoch: an ISR member counts as caught up now, others never."""
        self.last_caught_up_time_ms = now_ms if in_sync else 0
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_time_ms = now_ms
        if is_new_leader:
            self.log_end_offset = -1
            self.broker_epoch = None


class Remotes(tuple[ReplicaState, ...]):
    """A leader's followers, looked up by broker id. A tuple, not a dict: a broker leads up to a third of a million
    partitions, mostly with two followers each, and two entries cost a dict 200 bytes, a tuple 72."""

    __slots__ = ()

    def get(self, broker_id: int) -> ReplicaState | None:
        for r in self:
            if r.broker_id == broker_id:
                return r
        return None

    def values(self) -> Remotes:
        return self

    def items(self) -> Iterator[tuple[int, ReplicaState]]:
        return ((r.broker_id, r) for r in self)

    def all_parked(self, isr: tuple[int, ...]) -> bool:
        """Is every follower in ``isr`` parked in a fetch session (and is there one)?"""
        found = False
        for r in self:
            if r.broker_id in isr:
                if r.parked is None:
                    return False
                found = True
        return found


NO_REMOTES = Remotes()  # a follower's: one shared empty tuple, not one each


class ChangeKind(enum.Enum):
    SHRINK = "isr_shrink"
    EXPAND = "isr_expand"
    RECOVER = "leader_recovered"  # RECOVERING -> RECOVERED after an unclean election, the ISR unchanged


@dataclass(eq=False, slots=True)
class PendingChange:
    """An AlterPartition in flight (Kafka's PendingExpandIsr / PendingShrinkIsr): until it is answered the leader
    starts no other change, and counts the larger of the old and proposed ISRs for the high watermark."""

    partition: Partition
    kind: ChangeKind
    new_isr: tuple[tuple[int, int], ...]  # (broker id, broker epoch)
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int
    old_isr: tuple[int, ...]
    # For the log line, as tuples (see detail): a broker behind its metadata can hold a hundred thousand changes
    # waiting for the controller, and as dicts they cost ~700 bytes each.
    facts: tuple[Any, ...] = ()

    @property
    def members(self) -> tuple[int, ...]:
        return tuple(b for b, _ in self.new_isr)

    @property
    def detail(self) -> dict[str, object]:
        """Who was out of sync and why (a shrink), who joins (an expansion): the log line's fields."""
        if self.kind == ChangeKind.SHRINK:
            out, leo, hw = self.facts
            behind = [{"broker": b, "log_end_offset": e, "caught_up_ms_ago": ago} for b, e, ago in out]
            return {"out_of_sync": behind, "leader_log_end_offset": leo, "high_watermark": hw}
        if self.kind == ChangeKind.EXPAND:
            joining, leo, hw = self.facts
            return {"joining": joining, "log_end_offset": leo, "high_watermark": hw}
        return {}


PartitionKey = tuple[Uuid, int]


class PartitionMetadata(NamedTuple):
    """A partition as the controller describes it."""

    topic_id: Uuid
    topic: str
    index: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED
    adding: tuple[int, ...] = ()  # replicas a reassignment is adding (in ``replicas`` too)
    removing: tuple[int, ...] = ()  # replicas a reassignment will remove (in ``replicas`` too)
    key: PartitionKey | None = None  # (topic_id, index) as the image keys it: a broker's replicas share that tuple

    @property
    def partition_key(self) -> PartitionKey:
        return self.key if self.key is not None else (self.topic_id, self.index)


# What a replica is told of its partition: a PartitionMetadata, or the metadata image's own PartitionRegistration
# (a broker reads its image without building a PartitionMetadata per partition). Both have these fields.
Assignment = PartitionMetadata | PartitionRegistration
PartitionUpdate = tuple[PartitionKey, str, Assignment]  # (key, topic name, assignment): one partition that changed
# A replica's assignment before any metadata: no replicas, no leader, epochs -1.
UNASSIGNED: Assignment = PartitionRegistration((), (), NO_LEADER, -1, -1)


class FetchItem(NamedTuple):
    """One partition of a follower's fetch: where it reads from and how much it may take."""

    partition: Partition
    fetch_offset: int
    leader_epoch: int
    max_bytes: int  # replica.fetch.max.bytes, or less: what the follower quota and the disk rate allow now
    disk_reserved: int = 0  # taken ahead from the disk rate; what does not move is given back
    follower_reserved: int = 0  # taken ahead from the follower quota (a throttled partition)


class FetchAnswer(NamedTuple):
    """A leader's answer for one partition of a fetch."""

    error: Errors
    high_watermark: int = -1
    log_end_offset: int = -1
    records_end_offset: int = -1  # where the follower's log ends after appending what this answer carries


# Errors of an AlterPartition partition after which the leader's state is stale: stay pending, wait for metadata.
STALE_STATE_ERRORS = frozenset(
    {
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.UNKNOWN_TOPIC_ID,
        Errors.FENCED_LEADER_EPOCH,
        Errors.INVALID_UPDATE_VERSION,
        Errors.INVALID_REQUEST,
        Errors.NEW_LEADER_ELECTED,
    }
)
# Errors that say the change was not applied and our epochs are right: back to the committed state.
NOT_APPLIED_ERRORS = frozenset({Errors.OPERATION_NOT_ATTEMPTED, Errors.INELIGIBLE_REPLICA})


def _assigned(field: str, of: str = "state") -> Any:
    """A read-only attribute of a Partition's assignment tuple (``state``, or ``seen``), read in C."""
    return property(attrgetter(f"{of}.{field}"))


class Partition:
    __slots__ = (  # a broker holds up to a million of them
        "_produce_origin",
        "config",
        "epoch_start_offset",
        "fetch_backoff_until_ms",
        "fetch_blocked",
        "followed_from",
        "high_watermark",
        "key",
        "leader_log_end_offset",
        "local_id",
        "log_end_offset",
        "metadata_stale",
        "pending",
        "remotes",
        "seen",
        "sent_epoch",
        "sent_gen",
        "sent_offset",
        "state",
        "topic",
    )

    def __init__(
        self,
        topic_id: Uuid,
        topic: str,
        index: int,
        local_id: int,
        config: ReplicaConfig,
        key: PartitionKey | None = None,
    ) -> None:
        self.key = key if key is not None else (topic_id, index)  # (topic id, index): the image's tuple if given
        self.topic = topic
        self.local_id = local_id
        self.config = config
        # The assignment (replicas, ISR, leader, epochs ...): the metadata's own tuple as last applied, shared with
        # the image and every replica given the same one (8 fields of their own were 64 bytes a replica). An
        # AlterPartition answer replaces it with a copy holding the ISR and partition epoch the controller confirmed.
        self.state: Assignment = UNASSIGNED
        self.seen: Assignment = UNASSIGNED  # the metadata last applied (its epochs decide what applies next)
        self.pending: PendingChange | None = None
        self.remotes = NO_REMOTES
        self.log_end_offset = 0
        self.high_watermark = 0
        self.epoch_start_offset: int | None = None  # the LEO when this broker began leading in this leader epoch
        self._produce_origin: tuple[int, int] | None = None  # (time, LEO) since which the log grows
        self.metadata_stale = False  # an AlterPartition answer said our state is old: apply the next metadata
        # follower side
        self.leader_log_end_offset = -1  # the leader's LEO in its last answer (-1: none yet from this leader)
        self.fetch_blocked = False  # FENCED_LEADER_EPOCH: our leader epoch is old; wait for new metadata
        self.fetch_backoff_until_ms = 0
        self.followed_from = NO_LEADER  # the leader this replica is indexed under as a follower (the manager's)
        # What this follower's fetch session with that leader holds of it (pykraft.replica.fetch_session).
        self.sent_gen = 0
        self.sent_offset = -1
        self.sent_epoch = -1

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def topic_id(self) -> Uuid:
        return self.key[0]

    # The assignment's fields, read from its tuple (written only through apply_metadata and on_alter_result).
    replicas: tuple[int, ...] = _assigned("replicas")
    isr: tuple[int, ...] = _assigned("isr")  # the committed ISR, as the controller last confirmed it
    leader: int = _assigned("leader")
    leader_epoch: int = _assigned("leader_epoch")
    partition_epoch: int = _assigned("partition_epoch")
    adding: tuple[int, ...] = _assigned("adding")
    removing: tuple[int, ...] = _assigned("removing")
    leader_recovery_state: int = _assigned("leader_recovery_state")
    seen_leader_epoch: int = _assigned("leader_epoch", "seen")
    seen_partition_epoch: int = _assigned("partition_epoch", "seen")

    @property
    def index(self) -> int:
        return self.key[1]

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.local_id

    @property
    def is_reassigning(self) -> bool:
        """Kafka's Partition.isReassigning: replicas are being added."""
        return bool(self.adding)

    @property
    def is_adding_local(self) -> bool:
        """Kafka's isAddingLocalReplica: this broker's replica is one a reassignment adds."""
        return self.local_id in self.adding

    @property
    def in_isr(self) -> bool:
        return self.local_id in self.isr

    def start_log(self, messages: int) -> None:
        """The log this replica held before the simulation began (all original replicas hold the same data)."""
        self.log_end_offset = self.high_watermark = max(0, messages)

    # -- the simulated log ------------------------------------------------------------------------------------

    def leo(self, now_ms: int) -> int:
        """The log end offset; a leader's grows at the produce rate."""
        if self._produce_origin is not None and self.config.produce_rate > 0:
            since, base = self._produce_origin
            produced = base + int(max(0, now_ms - since) * self.config.produce_rate / 1000)
            if produced > self.log_end_offset:
                self.log_end_offset = produced
        return self.log_end_offset

    def peek_leo(self, now_ms: int) -> int:
        """The log end offset at ``now_ms`` without recording it (for readers on another thread: metrics)."""
        origin = self._produce_origin
        if origin is not None and self.config.produce_rate > 0:
            since, base = origin
            return max(self.log_end_offset, base + int(max(0, now_ms - since) * self.config.produce_rate / 1000))
        return self.log_end_offset

    @property
    def growing(self) -> bool:
        """Does this leader's log grow by itself (the simulated producers)?"""
        return self._produce_origin is not None and self.config.produce_rate > 0

    def _stop_producing(self, now_ms: int) -> None:
        self.leo(now_ms)
        self._produce_origin = None

    # -- metadata -----------------------------------------------------------------------------------------------

    @property
    def metadata_seen(self) -> tuple[int, int]:
        """(leader epoch, partition epoch) of the metadata last applied."""
        return self.seen.leader_epoch, self.seen.partition_epoch

    def changes_with(self, m: Assignment) -> bool:
        """Would :meth:`apply_metadata` apply ``m`` (or metadata with its epochs)?"""
        seen = self.seen
        if (
            m.leader_epoch == seen.leader_epoch
            and m.partition_epoch == seen.partition_epoch
            and not self.metadata_stale
        ):
            return False
        return m.partition_epoch >= self.state.partition_epoch

    def apply_metadata(self, m: Assignment, now_ms: int, broker_epoch: int) -> PendingChange | None:
        """Apply the controller's view if it changed since the last one applied (polled metadata is treated as a
        delta, as a Kafka broker sees only changed partitions), or if an AlterPartition answer said ours is stale.
        Older than what an AlterPartition answer gave us: skipped (Kafka's partition-epoch check). Returns the
        AlterPartition to send for a partition led in RECOVERING state."""
        if not self.changes_with(m):
            return None
        self.seen = m
        self.metadata_stale = False
        if m.leader == self.local_id:
            self._make_leader(m, now_ms)
            return self.maybe_recover(broker_epoch)
        self._make_follower(m, now_ms)
        return None

    def _make_leader(self, m: Assignment, now_ms: int) -> None:
        was_leader = self.is_leader
        leo = self.leo(now_ms)
        old_leader_epoch = self.state.leader_epoch
        # The leader epoch never goes back (an equal one is no new epoch): m's own tuple unless it would.
        self.state = (
            m if m.leader_epoch >= old_leader_epoch or not was_leader else m._replace(leader_epoch=old_leader_epoch)
        )
        self.pending = None
        followers = [b for b in m.replicas if b != self.local_id]
        self.remotes = Remotes(self.remotes.get(b) or ReplicaState(b) for b in followers)
        if m.leader_epoch > old_leader_epoch or not was_leader:
            self.epoch_start_offset = leo
            for r in self.remotes.values():
                r.reset(now_ms, leo, is_new_leader=not was_leader, in_sync=r.broker_id in m.isr)
            if self.config.produce_rate > 0:  # idle: no tuple per partition led
                self._produce_origin = (now_ms, leo)
        self.fetch_blocked = False

    def _make_follower(self, m: Assignment, now_ms: int) -> None:
        if self.is_leader:
            self._stop_producing(now_ms)
        if m.leader_epoch != self.leader_epoch or m.leader != self.leader:
            self.fetch_blocked = False
            self.fetch_backoff_until_ms = 0
            self.leader_log_end_offset = -1
        self.state = m
        self.pending = None
        self.remotes = NO_REMOTES
        self.epoch_start_offset = None

    # -- leader: the ISR ---------------------------------------------------------------------------------------

    def maximal_isr(self) -> Collection[int]:
        """The ISR the high watermark must wait for: while a change is in flight, the larger of old and new."""
        if self.pending is None:
            return self.isr  # no set built per call: the ISR expiration asks this of every partition led
        return frozenset(self.isr) | frozenset(self.pending.members)

    def high_watermark_now(self, now_ms: int, brokers: BrokerView) -> int:
        """Kafka's maybeIncrementLeaderHW: the lowest LEO among the maximal ISR and the followers that are caught
        up and eligible but not yet in it (so they can join); never moves back."""
        if not self.is_leader:
            return self.high_watermark
        leo = self.leo(now_ms)
        new = leo
        maximal = self.maximal_isr()
        lag = self.config.replica_lag_time_max_ms
        for r in self.remotes:
            if r.log_end_offset < new and (
                r.broker_id in maximal
                or (r.is_caught_up(leo, now_ms, lag) and brokers.eligible(r.broker_id, r.broker_epoch))
            ):
                new = r.log_end_offset
        if new > self.high_watermark:
            self.high_watermark = new
        return self.high_watermark

    def out_of_sync(self, now_ms: int) -> list[int]:
        """Kafka's getOutOfSyncReplicas: ISR followers not caught up within replica.lag.time.max.ms."""
        if self.pending is not None or not self.is_leader:
            return []
        leo = self.leo(now_ms)
        lag = self.config.replica_lag_time_max_ms
        return [
            b
            for b in self.isr
            if b != self.local_id and ((r := self.remotes.get(b)) is None or not r.is_caught_up(leo, now_ms, lag))
        ]

    def maybe_shrink(self, now_ms: int, broker_epoch: int) -> PendingChange | None:
        out = self.out_of_sync(now_ms)
        if not out:
            return None
        behind = tuple(
            (b, r.log_end_offset, now_ms - r.last_caught_up_time_ms) if (r := self.remotes.get(b)) else (b, -1, -1)
            for b in out
        )
        facts = (behind, self.leo(now_ms), self.high_watermark)
        return self._propose(ChangeKind.SHRINK, tuple(b for b in self.isr if b not in out), broker_epoch, facts)

    def maybe_expand(self, follower: ReplicaState, brokers: BrokerView, broker_epoch: int) -> PendingChange | None:
        """Kafka's maybeExpandIsr: an eligible follower outside the ISR whose LEO reached the high watermark and
        this leader epoch's start offset joins it."""
        if self.pending is not None or not self.is_leader or follower.broker_id in self.isr:
            return None
        if not brokers.eligible(follower.broker_id, follower.broker_epoch):
            return None
        leo = follower.log_end_offset
        if self.epoch_start_offset is None or leo < self.high_watermark or leo < self.epoch_start_offset:
            return None
        facts = (follower.broker_id, leo, self.high_watermark)
        return self._propose(ChangeKind.EXPAND, (*self.isr, follower.broker_id), broker_epoch, facts)

    def maybe_recover(self, broker_epoch: int) -> PendingChange | None:
        """A leader elected uncleanly (RECOVERING) tells the controller it has recovered, as Kafka's leader does."""
        if self.pending is not None or not self.is_leader:
            return None
        if self.leader_recovery_state != LeaderRecoveryState.RECOVERING:
            return None
        return self._propose(ChangeKind.RECOVER, self.isr, broker_epoch, ())

    def _propose(
        self, kind: ChangeKind, members: tuple[int, ...], broker_epoch: int, facts: tuple[Any, ...]
    ) -> PendingChange:
        def epoch_of(b: int) -> int:
            if b == self.local_id:
                return broker_epoch
            r = self.remotes.get(b)
            return r.broker_epoch if r is not None and r.broker_epoch is not None else -1

        self.pending = PendingChange(
            partition=self,
            kind=kind,
            new_isr=tuple((b, epoch_of(b)) for b in members),
            leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch,
            # A leader always sends RECOVERED: it marks itself recovered on election (Kafka's makeLeader).
            leader_recovery_state=LeaderRecoveryState.RECOVERED,
            old_isr=self.isr,
            facts=facts,
        )
        return self.pending

    def on_alter_result(
        self,
        pending: PendingChange,
        leader_epoch: int,
        isr: tuple[int, ...],
        leader_recovery_state: int,
        partition_epoch: int,
        now_ms: int,
        brokers: BrokerView,
    ) -> bool:
        """Kafka's handleAlterPartitionUpdate. True if the answer was applied; False if it is stale (metadata
        moved on since it was sent, or it names another leader epoch or an older partition epoch: then the change
        stays pending until the next metadata replaces it)."""
        if self.pending is not pending:
            return False
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            self.metadata_stale = True
            return False
        self.state = self.state._replace(
            isr=tuple(isr), leader_recovery_state=leader_recovery_state, partition_epoch=partition_epoch
        )
        self.pending = None
        self.high_watermark_now(now_ms, brokers)
        return True

    def on_alter_error(self, pending: PendingChange, error: Errors) -> bool:
        """Kafka's handleAlterPartitionError. Returns True if the request should be sent again."""
        if self.pending is not pending:
            return False
        if error in NOT_APPLIED_ERRORS:
            self.pending = None  # the controller says it did nothing and our epochs are right
            return False
        if error in STALE_STATE_ERRORS:
            self.metadata_stale = True  # stay pending (act on nothing) until metadata replaces the state
            return False
        return True

    # -- leader: answering a follower's fetch ---------------------------------------------------------------

    def answer_fetch(
        self,
        replica_id: int,
        replica_epoch: int,
        fetch_offset: int,
        current_leader_epoch: int,
        max_messages: int,
        now_ms: int,
        brokers: BrokerView,
        broker_epoch: int,
    ) -> tuple[FetchAnswer, PendingChange | None]:
        """Kafka's leader side of a follower fetch: epoch checks (FENCED_LEADER_EPOCH when the follower's is older,
        UNKNOWN_LEADER_EPOCH when newer), leadership, the follower's fetch state, ISR expansion, the high
        watermark. The answer carries at most ``max_messages`` past ``fetch_offset``."""
        if current_leader_epoch >= 0:
            if current_leader_epoch < self.leader_epoch:
                return FetchAnswer(Errors.FENCED_LEADER_EPOCH), None
            if current_leader_epoch > self.leader_epoch:
                return FetchAnswer(Errors.UNKNOWN_LEADER_EPOCH), None
        if not self.is_leader:
            return FetchAnswer(Errors.NOT_LEADER_OR_FOLLOWER), None
        follower = self.remotes.get(replica_id)
        if follower is None or brokers.stale(replica_id, replica_epoch):
            return FetchAnswer(Errors.NOT_LEADER_OR_FOLLOWER), None
        leo = self.leo(now_ms)
        if fetch_offset > leo or fetch_offset < 0:
            # Kafka's answer to an offset past the log end; the follower truncates to our LEO.
            return FetchAnswer(Errors.OFFSET_OUT_OF_RANGE, self.high_watermark, leo, leo), None
        follower.update_fetch_state(fetch_offset, now_ms, leo, replica_epoch)
        hw = self.high_watermark_now(now_ms, brokers)
        change = self.maybe_expand(follower, brokers, broker_epoch)
        end = min(leo, fetch_offset + max(0, max_messages))
        return FetchAnswer(Errors.NONE, hw, leo, end), change

    # -- follower -----------------------------------------------------------------------------------------------

    def fetchable(self, now_ms: int) -> bool:
        return (
            not self.is_leader
            and self.leader >= 0
            and self.local_id in self.replicas
            and not self.fetch_blocked
            and now_ms >= self.fetch_backoff_until_ms
        )

    def on_fetch_answer(self, sent_leader_epoch: int, answer: FetchAnswer, now_ms: int) -> FetchOutcome:
        """Apply the leader's answer. Ignored when the partition changed leader epoch since the fetch was sent."""
        if self.is_leader or sent_leader_epoch != self.leader_epoch:
            return IGNORED
        error = answer.error
        if error in (Errors.NONE, Errors.OFFSET_OUT_OF_RANGE):
            self.leader_log_end_offset = answer.log_end_offset
        if error == Errors.NONE:
            fetched = answer.records_end_offset - self.log_end_offset
            self.log_end_offset = max(self.log_end_offset, answer.records_end_offset)
            self.high_watermark = min(answer.high_watermark, self.log_end_offset)
            # Behind only if this answer carried records: a leader that held back a throttled replica answers with
            # none, and the follower then waits replica.fetch.wait.max.ms rather than asking again at once.
            behind = fetched > 0 and answer.records_end_offset < answer.log_end_offset
            return FetchOutcome(max(0, fetched), behind)
        if error == Errors.OFFSET_OUT_OF_RANGE:
            if 0 <= answer.log_end_offset < self.log_end_offset:
                self.log_end_offset = answer.log_end_offset  # Kafka: a follower ahead of its leader truncates
                self.high_watermark = min(self.high_watermark, self.log_end_offset)
            return FetchOutcome(0, True)
        if error == Errors.FENCED_LEADER_EPOCH:
            self.fetch_blocked = True
            return FetchOutcome(0, False, error, refresh=True)
        self.fetch_backoff_until_ms = now_ms + self.config.replica_fetch_backoff_ms
        return FetchOutcome(0, False, error, refresh=error != Errors.UNKNOWN_LEADER_EPOCH)


class FetchOutcome(NamedTuple):
    messages: int  # messages appended
    behind: bool  # the leader had more than this answer carried: fetch again at once
    error: Errors = Errors.NONE
    refresh: bool = False  # the metadata is probably stale: poll the controller now


IGNORED = FetchOutcome(0, False)
