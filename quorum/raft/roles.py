"""The roles a voter can be in, each holding its own data (Kafka's ``EpochState`` classes).

Transitions live in :mod:`quorum.raft.core`; a role only answers questions about itself — above all, whether it
may grant a vote. Times are milliseconds on the core's clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from quorum.log.snapshots import SnapshotId
from quorum.raft.accumulator import BatchAccumulator
from quorum.raft.messages import NO_LEADER, FetchRequest
from quorum.raft.storage import SnapshotInstall


@dataclass
class Unattached:
    """Knows the epoch but no leader, and has not voted in it."""

    epoch: int
    election_deadline: int
    name = "Unattached"
    leader_id = NO_LEADER
    voted_id = -1

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now_ms: int) -> bool:
        return log_up_to_date


@dataclass
class Voted:
    """Has voted in this epoch (durably); no leader known yet."""

    epoch: int
    voted_id: int
    election_deadline: int
    name = "Voted"
    leader_id = NO_LEADER

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now_ms: int) -> bool:
        # A pre-vote binds nothing: judge the log. A real vote only for the one already granted in this epoch.
        return log_up_to_date if pre_vote else candidate == self.voted_id


@dataclass
class Prospective:
    """Pre-vote (KIP-996): asks whether it *could* win before bumping the epoch, so a node that was cut off
    cannot depose a healthy leader when it returns. Keeps the leader and vote it knew in this epoch."""

    epoch: int
    election_deadline: int
    leader_id: int = NO_LEADER
    voted_id: int = -1
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    started_at: int = 0
    stand_at: int | None = None  # won the pre-vote but waits (candidacy ranking): stands or asks again then
    name = "Prospective"

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now_ms: int) -> bool:
        if pre_vote:
            return log_up_to_date
        if self.leader_id != NO_LEADER:
            return False
        return candidate == self.voted_id if self.voted_id >= 0 else log_up_to_date


@dataclass
class Candidate:
    """Has bumped the epoch and voted for itself; gathers votes."""

    epoch: int
    local_id: int
    election_deadline: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    backoff_until: int | None = None
    name = "Candidate"
    leader_id = NO_LEADER

    @property
    def voted_id(self) -> int:
        return self.local_id

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now_ms: int) -> bool:
        return log_up_to_date if pre_vote else candidate == self.local_id


@dataclass
class Follower:
    """Knows the leader of its epoch and fetches from it."""

    epoch: int
    leader_id: int
    fetch_deadline: int  # no successful fetch by then: the leader is presumed gone
    voted_id: int = -1
    last_fetch_ok_ms: int | None = None
    leader_unreachable: bool = False  # the transport saw the connection to the leader fail
    leader_resigned: bool = False  # the leader sent EndQuorumEpoch
    prospective_at: int | None = None  # an earlier start of pre-vote (unreachable or resigned leader)
    fetch_correlation: int | None = None  # the outstanding fetch
    fetch_sent_ms: int = 0
    # The outstanding fetch is overdue at this time (0 when silence detection is off): then a probe goes out,
    # and a probe overdue in turn means the leader is silent (quorum.raft.silence).
    due_ms: int = 0  # when the leader should have answered the outstanding fetch at the latest
    overdue_at: int = 0
    learned_grace_ms: int = 0  # a longer grace, learned when the leader answered after a probe (decays)
    learned_at: int = 0
    overdue_seen: bool = False  # overdue_at passed once; acted on at the next look, after the input was read
    probing: bool = False
    awaiting_flush: bool = False  # appended a fetch's records; the next fetch waits for them to be durable
    fetch_timeout_ms: int = 2000
    snapshot_id: SnapshotId | None = None  # the leader's snapshot being fetched (our fetch offset was below its log)
    snapshot: SnapshotInstall | None = None
    name = "Follower"

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now_ms: int) -> bool:
        if not pre_vote:
            return False  # this epoch has a leader
        heard_recently = self.last_fetch_ok_ms is not None and now_ms - self.last_fetch_ok_ms < self.fetch_timeout_ms
        # Our own fetch and its probe went unanswered too: we find the leader silent ourselves.
        silent = self.fetch_correlation is not None and self.probing and now_ms >= self.overdue_at
        return log_up_to_date and (self.leader_unreachable or self.leader_resigned or silent or not heard_recently)


@dataclass
class ReplicaState:
    """The leader's view of one voter."""

    end_offset: int = 0  # durable on that voter (the fetch offset of its last valid fetch in this epoch)
    last_fetch_ms: int | None = None
    sent_high_watermark: int = -1
    parked: FetchRequest | None = None  # a fetch waiting for new data
    parked_deadline: int = 0
    answered_ms: int | None = None  # when its last fetch was answered (an observer's answers are spaced out)


# Observers a leader keeps track of. Fetches under made-up replica ids (anyone who reaches a plaintext port can send
# them) would otherwise grow the map, and DescribeQuorum's observer list, for OBSERVER_SESSION_TIMEOUT_MS. Far above
# any real cluster's brokers; a real observer forgotten is tracked again at its next fetch.
MAX_OBSERVERS = 1024


@dataclass
class Leader:
    epoch: int
    local_id: int
    epoch_start_offset: int  # offset of this epoch's LeaderChangeMessage
    accumulator: BatchAccumulator
    replicas: dict[int, ReplicaState]  # every other voter
    check_quorum_deadline: int
    begin_epoch_resend_at: int
    flushed_offset: int = 0  # durable on the leader itself
    high_watermark: int | None = None  # unknown until an entry of this epoch is committed
    observers: dict[int, ReplicaState] = field(default_factory=dict)  # replicas that fetch but never vote
    name = "Leader"

    def replica(self, replica_id: int) -> ReplicaState:
        """A voter's state, or an observer's (created at its first fetch; at :data:`MAX_OBSERVERS` the observer
        heard from longest ago is forgotten first, one not waiting on a parked fetch if there is one)."""
        s = self.replicas.get(replica_id)
        if s is None:
            s = self.observers.get(replica_id)
            if s is None:
                if len(self.observers) >= MAX_OBSERVERS:
                    stalest = min(
                        self.observers.items(),
                        key=lambda o: (o[1].parked is not None, o[1].last_fetch_ms or -1),
                    )
                    del self.observers[stalest[0]]
                s = self.observers[replica_id] = ReplicaState()
        return s

    def all_replicas(self) -> list[tuple[int, ReplicaState]]:
        return [*self.replicas.items(), *self.observers.items()]

    @property
    def leader_id(self) -> int:
        return self.local_id

    @property
    def voted_id(self) -> int:
        return self.local_id

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now_ms: int) -> bool:
        return False


@dataclass
class Resigned:
    """A leader stepping down (shutdown, or check-quorum failed): serves nothing, tells the voters who should
    succeed it, and waits for the next epoch."""

    epoch: int
    local_id: int
    election_deadline: int
    preferred_successors: tuple[int, ...]
    unacknowledged: set[int] = field(default_factory=set)
    resend_at: int = 0
    name = "Resigned"

    @property
    def leader_id(self) -> int:
        return self.local_id

    @property
    def voted_id(self) -> int:
        return self.local_id

    def can_grant_vote(self, candidate: int, log_up_to_date: bool, pre_vote: bool, now_ms: int) -> bool:
        return pre_vote and log_up_to_date  # help a successor along; never a real vote in its own epoch


Role = Unattached | Voted | Prospective | Candidate | Follower | Leader | Resigned
