"""The consensus core: Kafka KRaft's election and replication rules as a deterministic state machine.

Inputs: a peer message (:meth:`handle`), the passage of time (:meth:`tick`), an append (:meth:`append`), a
completed flush (:meth:`flushed`), a broken connection (:meth:`peer_unreachable`), a resignation (:meth:`resign`).
Outputs: messages (:meth:`take_messages`), a flush to start (:meth:`poll_flush`), the high watermark and the
leader. The core never reads a clock, sleeps, or touches a socket: its driver — the asyncio node or the simulator —
does, and passes ``now_ms`` in. It reads and writes the log through :class:`~quorum.raft.storage.RaftLog` (buffered;
durability only through the flush it requests) and makes its epoch and vote durable through an
:class:`~quorum.raft.storage.ElectionStore` before acting on them.

Replication is Kafka's *pull* model: followers fetch from the leader with their log end offset and last epoch; the
leader checks that pair against its epoch cache and answers with records or with the point where the follower's
log diverges — or, when the follower needs offsets below the leader's log start (retention deleted them), with the
id of its latest snapshot, which the follower pulls in chunks (FetchSnapshot), installs, and fetches on from.
A follower fetches again only once what it appended is flushed, so its fetch offset tells the leader
exactly what it holds durably. The high watermark is the largest offset durable on a majority (the leader counted
only after its own flush) once it passes the start of the leader's epoch. A fetch with nothing new waits (parked)
up to the fetch max wait; a higher high watermark alone answers it only after a short linger, so that under
steady writes the next records carry it (one answer per commit, not two). An observer, which gates no commit, is
answered at most once per observer linger while news keeps coming: one answer carries several commits.

An *observer* (a node not among the voters: a broker) replicates the log the same way but never votes, never
stands for election and never counts for the high watermark. It finds the leader by itself: with no leader known
it fetches from a random voter, whose refusal names the leader and epoch (Kafka's observers do the same). It
fetches again as soon as it has appended, its flush running meanwhile (Kafka's observers do not flush at all).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from quorum.errors import Errors, NotLeaderError
from quorum.histogram import Histogram
from quorum.log.batch import CorruptBatchError, iter_batches
from quorum.log.control import LeaderChangeMessage, Voter, encode_control
from quorum.log.quorum_state import ElectionState
from quorum.log.snapshots import SnapshotId
from quorum.raft.accumulator import BatchAccumulator
from quorum.raft.config import RaftConfig
from quorum.raft.messages import (
    NO_LEADER,
    REQUEST_TYPES,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Envelope,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.roles import Candidate, Follower, Leader, Prospective, ReplicaState, Resigned, Role, Unattached, Voted
from quorum.raft.silence import BUG_SILENCE_WITHOUT_GRACE, BUG_SILENCE_WITHOUT_PRE_VOTE, SilentLeader
from quorum.raft.snapshot_fetch import BUG_INSTALL_WITHOUT_TRUNCATE, SnapshotFetching
from quorum.raft.storage import ElectionStore, RaftLog, SnapshotInstall

log = structlog.get_logger("quorum.raft")

OBSERVER_SESSION_TIMEOUT_MS = 300_000  # the leader forgets an observer it has not heard from for this long
# A replica (voter or observer) heard from this recently is still catching up: retention keeps the log it needs
# (within metadata.max.retention.bytes, see MetadataLog.clean). One not heard from since is down or gone.
CATCH_UP_WINDOW_MS = 30_000

# Test-only rule breakers: the simulation must catch each of them (proof that its invariants can fail).
BUG_HW_BEFORE_FSYNC = "count-leader-before-fsync"
BUG_SKIP_DIVERGENCE_CHECK = "skip-divergence-check"
BUG_VOTE_BEFORE_PERSIST = "reply-to-vote-before-persisting"
BUG_VOTE_PERSISTED_AS_NONE = "persist-vote-as-none"
BUG_COMMIT_BY_COUNTING = "commit-earlier-epoch-by-counting"
KNOWN_BUGS = frozenset(
    {
        BUG_SILENCE_WITHOUT_PRE_VOTE,
        BUG_SILENCE_WITHOUT_GRACE,
        BUG_HW_BEFORE_FSYNC,
        BUG_SKIP_DIVERGENCE_CHECK,
        BUG_VOTE_BEFORE_PERSIST,
        BUG_VOTE_PERSISTED_AS_NONE,
        BUG_COMMIT_BY_COUNTING,
        BUG_INSTALL_WITHOUT_TRUNCATE,
    }
)


class SafetyViolation(RuntimeError):
    """The core was asked to do something that would break Raft's safety (e.g. truncate committed data)."""


@dataclass
class CoreMetrics:
    elections: int = 0  # times this node became a candidate
    leader_changes: int = 0
    appended_records: int = 0  # records appended as leader
    appended_batches: int = 0
    committed_offset_advances: int = 0
    truncations: int = 0
    resignations: int = 0
    snapshots_installed: int = 0
    snapshot_bytes_fetched: int = 0
    # From the first pre-vote of an election to leading or following a leader (seconds, the driver's clock).
    election_seconds: Histogram = field(default_factory=Histogram)


class RaftCore(SilentLeader, SnapshotFetching):
    def __init__(
        self,
        *,
        node_id: int,
        voters: Sequence[int],
        cluster_id: str,
        log: RaftLog,
        store: ElectionStore,
        config: RaftConfig,
        rng: random.Random,
        now_ms: int,
        wall_offset_ms: int = 0,
        bugs: frozenset[str] = frozenset(),
        ask_for_leader: bool = False,
    ) -> None:
        if bugs - KNOWN_BUGS:
            raise ValueError(f"unknown test bugs {sorted(bugs - KNOWN_BUGS)}")
        self.id = node_id
        self.observer = node_id not in voters
        self.voters = tuple(sorted(voters))
        self.others = tuple(v for v in self.voters if v != node_id)
        self.majority = len(self.voters) // 2 + 1
        self.cluster_id = cluster_id
        self.log = log
        self.store = store
        self.config = config
        self.rng = rng
        self.wall_offset_ms = wall_offset_ms
        self.bugs = bugs
        self.metrics = CoreMetrics()
        # Offsets below it are committed, as far as this node knows; a snapshot holds only committed offsets.
        snapshot = log.latest_snapshot()
        self.high_watermark = snapshot.end_offset if snapshot is not None else 0
        self._outbox: list[Envelope] = []
        self._correlation = 0
        self._bootstrap_correlation: int | None = None  # an observer's fetch to a random voter, to find the leader
        self._bootstrap_target: int | None = None  # the voter it went to
        # An observer's leader lost: (epoch, leader, until) — voters that have not noticed yet still name it.
        self._lost_leader: tuple[int, int, int] | None = None
        # An observer's snapshot fetch cut off by the loss of its leader: (leader, snapshot id, the partial install).
        self._paused_snapshot: tuple[int, SnapshotId, SnapshotInstall] | None = None
        self._vote_sent: dict[int, int] = {}  # voter -> when the current election's request went out
        self._granted_pre_vote_at: int | None = None  # the last time this node granted a pre-vote
        self._flush_needed = False
        self._flush_in_flight = False
        self._durable_offset = log.end_offset  # recovery re-validated what is on disk
        self._truncated_below: int | None = None  # lowest truncation point since the running flush began
        self._log = log_ = structlog.get_logger("quorum.raft").bind(node_id=node_id)
        self._election_started_ms: int | None = None  # this node went Prospective and no leader is known since
        self.role: Role = self._restore(now_ms)
        if self.observer and self.role.leader_id == NO_LEADER:
            self._bootstrap_fetch(self.role, now_ms)
        elif ask_for_leader and self.role.leader_id == NO_LEADER and self.others:
            self._ask_voters_for_leader()
        log_.info("raft_started", role=self.role.name, epoch=self.role.epoch, log_end_offset=log.end_offset)

    # -- state -----------------------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.role.epoch

    @property
    def leader_id(self) -> int:
        return self.role.leader_id

    @property
    def is_leader(self) -> bool:
        return isinstance(self.role, Leader)

    def catch_up_offset(self, now_ms: int) -> int | None:
        """On a leader, the lowest fetch offset still in the log of the replicas heard from within
        :data:`CATCH_UP_WINDOW_MS`: what retention keeps for them (:meth:`MetadataLog.clean`). Replicas already
        below the log start need a snapshot whatever is kept. None elsewhere, or when every replica is caught up."""
        r = self.role
        if not isinstance(r, Leader):
            return None
        start, end = self.log.start_offset, self.log.end_offset
        needed = [
            s.end_offset
            for _, s in r.all_replicas()
            if s.last_fetch_ms is not None
            and now_ms - s.last_fetch_ms <= CATCH_UP_WINDOW_MS
            and start <= s.end_offset < end
        ]
        return min(needed, default=None)

    def has_output(self) -> bool:
        """Messages to send or a flush to start."""
        return bool(self._outbox) or (self._flush_needed and not self._flush_in_flight)

    def append_deadline(self) -> int | None:
        """When the leader's open batch must be written even if the disk is still busy (its linger)."""
        r = self.role
        return r.accumulator.next_deadline() if isinstance(r, Leader) else None

    def take_messages(self) -> list[Envelope]:
        out, self._outbox = self._outbox, []
        return out

    def poll_flush(self) -> bool:
        """True when the driver should start a flush of the log now; it must then call :meth:`flushed`."""
        if self._flush_needed and not self._flush_in_flight:
            self._flush_needed = False
            self._flush_in_flight = True
            self._truncated_below = None
            return True
        return False

    def next_deadline(self) -> int:
        """The earliest time :meth:`tick` has something to do."""
        r = self.role
        if isinstance(r, Leader):
            deadlines = [r.check_quorum_deadline, r.begin_epoch_resend_at]
            deadlines += [s.parked_deadline for _, s in r.all_replicas() if s.parked is not None]
            linger = r.accumulator.next_deadline()
            if linger is not None:
                deadlines.append(linger)
            return min(deadlines)
        if isinstance(r, Follower):
            deadlines = [r.fetch_deadline]
            if r.prospective_at is not None:
                deadlines.append(r.prospective_at)
            if r.fetch_correlation is not None:
                deadlines.append(r.fetch_sent_ms + self.config.request_timeout_ms)
                if r.overdue_at:
                    deadlines.append(r.overdue_at)
            elif not r.awaiting_flush:
                deadlines.append(r.fetch_sent_ms)  # a retry is due
            return min(deadlines)
        if isinstance(r, Resigned):
            return min(r.election_deadline, r.resend_at) if r.unacknowledged else r.election_deadline
        deadline = r.election_deadline
        if isinstance(r, Candidate) and r.backoff_until is not None:
            # Lost this election: only the end of the backoff matters (no vote is resent meanwhile).
            return min(deadline, r.backoff_until)
        if isinstance(r, Prospective | Candidate) and self._vote_sent:
            deadline = min(deadline, min(self._vote_sent.values()) + self.config.request_timeout_ms)
        if isinstance(r, Prospective) and r.stand_at is not None:
            deadline = min(deadline, r.stand_at)
        return deadline

    # -- inputs ----------------------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        r = self.role
        if isinstance(r, Leader):
            self._tick_leader(r, now)
        elif isinstance(r, Follower):
            if now >= r.fetch_deadline:
                self._leader_lost(now, f"no fetch from leader {r.leader_id} for {self.config.fetch_timeout_ms} ms")
            elif r.prospective_at is not None and now >= r.prospective_at:
                why = "leader resigned" if r.leader_resigned else f"connection to leader {r.leader_id} lost"
                self._leader_lost(now, why)
            elif r.fetch_correlation is not None and r.overdue_at and now >= r.overdue_at:
                self._on_fetch_overdue(r, now)
            elif r.fetch_correlation is not None and now >= r.fetch_sent_ms + self.config.request_timeout_ms:
                self._send_fetch(r, now)  # the request or its answer was lost
            elif r.fetch_correlation is None and not r.awaiting_flush and now >= r.fetch_sent_ms:
                self._send_fetch(r, now)
        elif isinstance(r, Resigned):
            if now >= r.election_deadline:
                self._to_prospective(now, "resigned leader's election timeout")
            elif r.unacknowledged and now >= r.resend_at:
                self._send_end_quorum_epoch(r, now)
        elif self.observer:
            if now >= r.election_deadline:
                self._bootstrap_fetch(r, now)
        elif isinstance(r, Candidate) and r.backoff_until is not None and now >= r.backoff_until:
            self._to_prospective(now, "vote rejected by a majority; backoff over")
        elif isinstance(r, Prospective) and r.stand_at is not None and now >= r.stand_at:
            if self._granted_pre_vote_at is not None and self._granted_pre_vote_at >= r.started_at:
                # The voter we yielded to has not won: ask again, among whoever else is asking now.
                self._to_prospective(now, "yielded to a voter that did not win")
            else:
                self._to_candidate(now, f"pre-vote granted by {sorted(r.granted)}")
        elif now >= r.election_deadline:
            self._to_prospective(now, f"election timeout in {r.name}")
        elif isinstance(r, Prospective | Candidate):
            self._resend_votes(r, now)

    def handle(self, envelope: Envelope, now: int) -> None:
        source, message = envelope.source, envelope.message
        if isinstance(message, REQUEST_TYPES):
            error = self._validate_request(source, message)
            if error is not None:
                self._reply(source, message, error)
                return
        elif source not in self.others:
            return  # a response from a node that is not a voter: ignore
        handler = _HANDLERS[type(message)]
        handler(self, source, message, now)

    def append(self, epoch: int, records: Sequence[bytes], now: int, *, atomic: bool = False) -> int:
        """Leader only: queue records for the log; returns the offset of the last one."""
        r = self.role
        if not isinstance(r, Leader):
            raise NotLeaderError(f"node {self.id} is not the leader", leader_id=self.leader_id, epoch=self.epoch)
        last = r.accumulator.append(epoch, records, now, now + self.wall_offset_ms, atomic)
        self.metrics.appended_records += len(records)
        self._maybe_drain(r, now)
        return last

    def flushed(self, offset: int, now: int) -> None:
        """The flush the driver started after :meth:`poll_flush` made everything below ``offset`` durable."""
        self._flush_in_flight = False
        if self._truncated_below is not None:
            offset = min(offset, self._truncated_below)  # bytes re-appended after a truncation are not covered
        self._durable_offset = max(self._durable_offset, min(offset, self.log.end_offset))
        r = self.role
        if isinstance(r, Leader):
            r.flushed_offset = self._durable_offset
            self._update_leader_hw(r, now)
            self._maybe_drain(r, now)
        elif isinstance(r, Follower) and r.awaiting_flush:
            if self._flush_needed:  # more was appended meanwhile: wait for that flush too
                return
            r.awaiting_flush = False
            self._send_fetch(r, now)

    def peer_unreachable(self, peer: int, now: int) -> None:
        """The transport lost its connection to ``peer`` (refused or reset, not a slow reply)."""
        r = self.role
        if isinstance(r, Follower) and peer == r.leader_id and not r.leader_unreachable:
            r.leader_unreachable = True
            # At once: when every survivor saw the reset at the same moment, candidacy ranking (see
            # _on_vote_request) lets only one of them win the pre-vote.
            r.prospective_at = now
            r.fetch_correlation = None
            r.fetch_sent_ms = now + self.config.retry_backoff_ms
        elif isinstance(r, Prospective | Candidate) and peer in self._vote_sent:
            self._vote_sent[peer] = now - self.config.request_timeout_ms + self.config.retry_backoff_ms
        elif isinstance(r, Unattached) and self.observer and self._bootstrap_correlation is not None:
            if peer == self._bootstrap_target:  # no answer will come: ask another voter after the backoff
                r.election_deadline = min(r.election_deadline, now + self.config.retry_backoff_ms)

    def resign(self, now: int) -> None:
        """Graceful shutdown: a leader hands over at once (EndQuorumEpoch names its successors)."""
        if isinstance(self.role, Leader):
            self._to_resigned(self.role, now, "shutdown")

    # -- request validation and replies ----------------------------------------------------------------------

    def _validate_request(self, source: int, m: Message) -> Errors | None:
        if m.cluster_id != self.cluster_id:
            return Errors.INCONSISTENT_CLUSTER_ID
        if isinstance(m, FetchRequest | FetchSnapshotRequest):
            # Anyone but this node may fetch: voters, and observers (which then never count for the quorum).
            return Errors.INCONSISTENT_VOTER_SET if m.replica_id != source or source == self.id else None
        claimed = m.replica_id if isinstance(m, VoteRequest) else m.leader_id
        if source not in self.others or claimed != source or self.observer:
            return Errors.INCONSISTENT_VOTER_SET
        return None

    def _reply(self, dest: int, request: Message, error: Errors) -> None:
        epoch, leader = self.epoch, self.leader_id
        c = request.correlation_id
        reply: Message
        if isinstance(request, VoteRequest):
            reply = VoteResponse(error, epoch, leader, False, request.pre_vote, c)
        elif isinstance(request, BeginQuorumEpochRequest):
            reply = BeginQuorumEpochResponse(error, epoch, leader, c)
        elif isinstance(request, EndQuorumEpochRequest):
            reply = EndQuorumEpochResponse(error, epoch, leader, c)
        elif isinstance(request, FetchSnapshotRequest):
            reply = FetchSnapshotResponse(error, epoch, leader, correlation_id=c)
        else:
            reply = FetchResponse(error, epoch, leader, -1, correlation_id=c)
        self._send(dest, reply)

    def _send(self, dest: int, message: Message) -> None:
        self._outbox.append(Envelope(self.id, dest, message))

    def _next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    # -- transitions -----------------------------------------------------------------------------------------

    def _restore(self, now: int) -> Role:
        state = self.store.read()
        epoch = state.leader_epoch if state else 0
        if self.log.last_epoch > epoch:
            # The log saw a later epoch than the stored state (the state file was lost): start over, unattached.
            epoch, state = self.log.last_epoch, None
            self._persist(epoch, NO_LEADER, -1)
        if state is None:
            return Unattached(epoch, self._election_deadline(now))
        if state.leader_id == self.id:
            # Kafka: a leader restarting comes back Resigned in the same epoch, so it never reuses the epoch.
            return Resigned(epoch, self.id, self._election_deadline(now), self.others)
        if state.leader_id in self.others:
            return Follower(
                epoch,
                state.leader_id,
                self._fetch_deadline(now),
                voted_id=state.voted_id,
                fetch_timeout_ms=self.config.fetch_timeout_ms,
            )
        if state.voted_id >= 0:
            return Voted(epoch, state.voted_id, self._election_deadline(now))
        return Unattached(epoch, self._election_deadline(now))

    def _persist(self, epoch: int, leader_id: int, voted_id: int) -> None:
        self.store.write(ElectionState(leader_epoch=epoch, leader_id=leader_id, voted_id=voted_id, voters=self.voters))

    def _fetch_deadline(self, now: int) -> int:
        # Jittered, unlike Kafka's: followers of a silent (paused) leader all reset this timer on the same last
        # fetch, so without jitter they go to pre-vote together, both win it, and split the vote in the next
        # epoch. A split with the old leader silent is never a rejection by a majority, so it costs a whole
        # election timeout (1-2 s). A quarter of the election timeout of jitter makes that rare.
        return now + self.config.fetch_timeout_ms + self.rng.randrange(self.config.election_timeout_ms // 4 + 1)

    def _election_deadline(self, now: int) -> int:
        t = self.config.election_timeout_ms
        return now + t + self.rng.randrange(t)

    def _become(self, role: Role, now: int, reason: str) -> None:
        old = self.role
        self.role = role
        self._vote_sent = {}
        if isinstance(old, Follower) and old.snapshot is not None:
            self._leave_snapshot_fetch(old, role)
        if isinstance(role, Leader):
            self._drop_paused_snapshot()  # a leader fetches nothing
        if isinstance(old, Leader):
            self._fail_parked_fetches(old)  # answered as the new role: the fetchers learn the change at once
        if old.leader_id != role.leader_id or old.epoch != role.epoch:
            self.metrics.leader_changes += 1
        if self._election_started_ms is not None and isinstance(role, Leader | Follower):
            self.metrics.election_seconds.observe((now - self._election_started_ms) / 1000)
            self._election_started_ms = None
        self._log.info(
            "role_changed",
            old_role=old.name,
            role=role.name,
            epoch=role.epoch,
            leader_id=role.leader_id,
            reason=reason,
            log_end_offset=self.log.end_offset,
            high_watermark=self.high_watermark,
        )

    def _to_unattached(self, epoch: int, now: int, reason: str) -> None:
        self._persist(epoch, NO_LEADER, -1)
        self._become(Unattached(epoch, self._election_deadline(now)), now, reason)

    def _to_voted(self, epoch: int, candidate: int, now: int) -> None:
        self._persist(epoch, NO_LEADER, -1 if BUG_VOTE_PERSISTED_AS_NONE in self.bugs else candidate)
        self._become(Voted(epoch, candidate, self._election_deadline(now)), now, f"granted vote to {candidate}")

    def _to_follower(self, epoch: int, leader_id: int, now: int, reason: str) -> None:
        voted = self.role.voted_id if self.role.epoch == epoch else -1
        self._persist(epoch, leader_id, voted)
        f = Follower(
            epoch, leader_id, self._fetch_deadline(now), voted_id=voted, fetch_timeout_ms=self.config.fetch_timeout_ms
        )
        self._become(f, now, reason)
        if (self._flush_in_flight or self._flush_needed) and not self.observer:
            # A voter's fetch offset tells the leader what it holds durably: what was appended before (as a
            # follower that went Prospective and back, or as a leader) must be flushed first.
            f.awaiting_flush = True
        else:
            self._send_fetch(f, now)

    def _leader_lost(self, now: int, reason: str) -> None:
        if not self.observer:
            self._to_prospective(now, reason)
            return
        # An observer has no say in elections: forget the leader and look for it again.
        self._lost_leader = (self.epoch, self.leader_id, now + self.config.fetch_timeout_ms)
        self._to_unattached(self.epoch, now, reason)
        self._bootstrap_fetch(self.role, now)

    def _bootstrap_fetch(self, r: Role, now: int) -> None:
        """An observer with no leader asks a random voter; its answer (an error naming the leader) is enough."""
        r.election_deadline = now + self.config.request_timeout_ms  # type: ignore[union-attr]
        # Not the voter asked last (it may be down), nor the leader just lost, while another is left to ask.
        avoid = {self._bootstrap_target}
        if self._lost_leader is not None and now < self._lost_leader[2]:
            avoid.add(self._lost_leader[1])
        self._bootstrap_target = self.rng.choice([v for v in self.voters if v not in avoid] or self.voters)
        self._send(self._bootstrap_target, self._who_leads(self.config.fetch_max_bytes))

    def _ask_voters_for_leader(self) -> None:
        """A voter that starts with an empty data directory (new, or wiped: ``ask_for_leader``) asks every other voter
        once who leads (Kafka's voters wait for the leader's BeginQuorumEpoch resend, up to fetch.timeout/2 away, or
        their own election timeout). The first answer naming a leader makes it a follower; nothing else changes
        (its election timer runs on), and a voter with state on disk never asks: it may have voted in this epoch."""
        request = self._who_leads(0)
        for voter in self.others:
            self._send(voter, request)

    def _who_leads(self, max_bytes: int) -> FetchRequest:
        """A fetch answered at once (a refusal naming the leader, or the leader's own answer), under a new bootstrap
        correlation id: its answer goes to :meth:`_on_bootstrap_response`."""
        self._bootstrap_correlation = self._next_correlation()
        return FetchRequest(
            self.cluster_id, self.id, self.epoch, self.log.end_offset, self.log.last_epoch, max_bytes, 0,
            self._bootstrap_correlation,
        )  # fmt: skip

    def _on_bootstrap_response(self, source: int, m: FetchResponse, now: int) -> None:
        self._bootstrap_correlation = None
        leader = m.leader_id
        lost = self._lost_leader
        if lost is not None and (m.epoch, leader) == lost[:2] and now < lost[2] and source != leader:
            leader = NO_LEADER  # that voter has not noticed yet that the leader is gone: not a leader to follow
        self._learn(m.epoch, leader, now, f"voter {source} named leader {m.leader_id}")
        r = self.role
        if self.observer and not isinstance(r, Follower):
            # No leader named (an election is running): ask again after the backoff, as Kafka's observers do.
            r.election_deadline = min(r.election_deadline, now + self.config.retry_backoff_ms)  # type: ignore[union-attr]

    def _to_prospective(self, now: int, reason: str) -> None:
        r = self.role
        p = Prospective(
            r.epoch, self._election_deadline(now), leader_id=r.leader_id, voted_id=r.voted_id, started_at=now
        )
        if isinstance(r, Resigned | Leader):
            p.leader_id = NO_LEADER  # we were the leader of this epoch; we are not any more
        p.granted.add(self.id)
        if self._election_started_ms is None:  # a retry goes on timing the same election
            self._election_started_ms = now
        self._become(p, now, reason)
        if len(p.granted) >= self.majority:
            self._to_candidate(now, "pre-vote: no other voters")
            return
        for voter in self.others:
            self._send_vote_request(voter, p.epoch, True, now)

    def _to_candidate(self, now: int, reason: str) -> None:
        epoch = self.epoch + 1
        self._persist(epoch, NO_LEADER, self.id)
        c = Candidate(epoch, self.id, self._election_deadline(now))
        c.granted.add(self.id)
        self.metrics.elections += 1
        self._become(c, now, reason)
        self._log.info("election_started", epoch=epoch, last_offset=self.log.end_offset, last_epoch=self.log.last_epoch)
        if len(c.granted) >= self.majority:
            self._to_leader(c, now)
            return
        for voter in self.others:
            self._send_vote_request(voter, epoch, False, now)

    def _to_leader(self, c: Candidate, now: int) -> None:
        self._persist(c.epoch, self.id, self.id)
        start = self.log.end_offset
        acc = BatchAccumulator(
            c.epoch,
            start,
            linger_ms=self.config.append_linger_ms,
            max_batch_bytes=self.config.max_batch_bytes,
            max_pending_bytes=self.config.max_pending_bytes,
        )
        replicas = {v: ReplicaState() for v in self.others}
        check_quorum = now + self.config.fetch_timeout_ms * 3 // 2
        leader = Leader(c.epoch, self.id, start, acc, replicas, check_quorum, now + self.config.fetch_timeout_ms // 2)
        leader.flushed_offset = self._durable_offset
        self._become(leader, now, f"won the election with votes from {sorted(c.granted)}")
        # The first entry of every epoch: it lets the high watermark advance (only entries of the current epoch
        # are committed by counting) and records who won.
        change = LeaderChangeMessage(
            leader_id=self.id,
            voters=[Voter(voter_id=v) for v in self.voters],
            granting_voters=[Voter(voter_id=v) for v in sorted(c.granted)],
        )
        key, value = encode_control(change)
        acc.append_control(key, value, now + self.wall_offset_ms)
        for voter in self.others:
            self._send(voter, BeginQuorumEpochRequest(self.cluster_id, self.id, c.epoch, self._next_correlation()))
        self._maybe_drain(leader, now)

    def _to_resigned(self, r: Leader, now: int, reason: str) -> None:
        successors = tuple(sorted(self.others, key=lambda v: (-r.replicas[v].end_offset, v)))
        resigned = Resigned(r.epoch, self.id, self._election_deadline(now), successors, set(self.others))
        self.metrics.resignations += 1
        self._become(resigned, now, reason)
        self._log.info("leader_resigned", epoch=r.epoch, reason=reason, preferred_successors=list(successors))
        self._send_end_quorum_epoch(resigned, now)

    def _send_end_quorum_epoch(self, r: Resigned, now: int) -> None:
        for voter in sorted(r.unacknowledged):
            request = EndQuorumEpochRequest(
                self.cluster_id, self.id, r.epoch, r.preferred_successors, self._next_correlation()
            )
            self._send(voter, request)
        r.resend_at = now + self.config.request_timeout_ms

    def _learn(self, epoch: int, leader_id: int, now: int, reason: str) -> bool:
        """React to a message showing a later epoch, or the leader of ours; True if the role changed."""
        if epoch > self.epoch:
            if leader_id in self.others:
                self._to_follower(epoch, leader_id, now, reason)
            else:
                self._to_unattached(epoch, now, reason)
            return True
        if epoch == self.epoch and leader_id in self.others and self.leader_id == NO_LEADER:
            self._to_follower(epoch, leader_id, now, reason)
            return True
        return False

    # -- elections -------------------------------------------------------------------------------------------

    def _send_vote_request(self, voter: int, epoch: int, pre_vote: bool, now: int) -> None:
        request = VoteRequest(
            self.cluster_id,
            self.id,
            epoch,
            self.log.last_epoch,
            self.log.end_offset,
            pre_vote,
            self._next_correlation(),
        )
        self._vote_sent[voter] = now
        self._send(voter, request)

    def _resend_votes(self, r: Prospective | Candidate, now: int) -> None:
        if isinstance(r, Candidate) and r.backoff_until is not None:
            return
        for voter, sent in list(self._vote_sent.items()):
            if now >= sent + self.config.request_timeout_ms:
                self._send_vote_request(voter, r.epoch, isinstance(r, Prospective), now)

    def _on_vote_request(self, source: int, m: VoteRequest, now: int) -> None:
        illegal = m.last_offset_epoch > m.replica_epoch if m.pre_vote else m.last_offset_epoch >= m.replica_epoch
        if m.last_offset < 0 or m.last_offset_epoch < 0 or illegal:
            self._reply(source, m, Errors.INVALID_REQUEST)
            return
        if m.replica_epoch < self.epoch:
            self._reply(source, m, Errors.FENCED_LEADER_EPOCH)
            return
        if m.replica_epoch > self.epoch:
            self._to_unattached(m.replica_epoch, now, f"vote request from {source} in epoch {m.replica_epoch}")
        ours = (self.log.last_epoch, self.log.end_offset)
        up_to_date = (m.last_offset_epoch, m.last_offset) >= ours
        r = self.role
        granted = r.can_grant_vote(source, up_to_date, m.pre_vote, now) and not self.observer
        outranked = isinstance(r, Prospective) and (m.last_offset_epoch, m.last_offset, -source) < (*ours, -self.id)
        if m.pre_vote and outranked:
            # Candidacy ranking: of voters seeking pre-votes at the same time (they noticed the leader's loss
            # together), only the best placed (longest log, then lowest id) may collect them, so that two never
            # become candidates of one epoch and split its votes. We ask the lesser one again: it grants now.
            granted = False
            if source not in r.granted:  # type: ignore[union-attr]
                self._send_vote_request(source, r.epoch, True, now)
        if granted and m.pre_vote:
            self._granted_pre_vote_at = now
        reply = VoteResponse(Errors.NONE, self.epoch, self.leader_id, granted, m.pre_vote, m.correlation_id)
        if BUG_VOTE_BEFORE_PERSIST in self.bugs:
            self._send(source, reply)
        if granted and not m.pre_vote and isinstance(r, Unattached | Prospective) and r.voted_id < 0:
            self._to_voted(self.epoch, source, now)  # durable before the answer leaves
        elif granted and not m.pre_vote and isinstance(r, Voted):
            r.election_deadline = self._election_deadline(now)
        if BUG_VOTE_BEFORE_PERSIST not in self.bugs:
            self._send(source, reply)

    def _on_vote_response(self, source: int, m: VoteResponse, now: int) -> None:
        if self._learn(m.epoch, m.leader_id, now, f"vote response from {source}"):
            return
        r = self.role
        if m.error != Errors.NONE or m.epoch != self.epoch:
            return
        self._vote_sent.pop(source, None)
        if isinstance(r, Prospective) and m.pre_vote:
            (r.granted if m.vote_granted else r.rejected).add(source)
            if m.vote_granted:
                r.rejected.discard(source)  # asked again (candidacy ranking): it changed its mind
            if len(r.granted) >= self.majority:
                self._stand_or_wait(r, now)
            elif len(r.rejected) > len(self.voters) - self.majority:
                if r.leader_id in self.others:
                    self._to_follower(r.epoch, r.leader_id, now, f"pre-vote rejected by {sorted(r.rejected)}")
                else:
                    r.election_deadline = min(r.election_deadline, now + self._backoff(1))
        elif isinstance(r, Candidate) and not m.pre_vote:
            (r.granted if m.vote_granted else r.rejected).add(source)
            if len(r.granted) >= self.majority:
                self._to_leader(r, now)
            elif len(r.rejected) > len(self.voters) - self.majority and r.backoff_until is None:
                r.backoff_until = now + self._backoff(self.metrics.elections)

    def _stand_or_wait(self, r: Prospective, now: int) -> None:
        """Won the pre-vote: stand for election, unless a better-ranked voter may be about to (candidacy ranking)."""
        window = r.started_at + self.config.pre_vote_yield_ms
        granted_at = self._granted_pre_vote_at
        if granted_at is not None and now < granted_at + self.config.pre_vote_yield_ms:
            r.stand_at = granted_at + self.config.pre_vote_yield_ms  # we granted one: it goes first
        elif r.rejected and now < window:
            # A voter refused: perhaps one that ranks above us and is asking us in turn (it refuses, then asks).
            # Give its request the time to arrive; granting it, we yield.
            r.stand_at = window
        else:
            self._to_candidate(now, f"pre-vote granted by {sorted(r.granted)}")

    def _backoff(self, retries: int) -> int:
        # Kafka's binaryExponentialElectionBackoffMs: 100 ms x rand(2^retries), capped.
        return min(100 * self.rng.randrange(2 << min(20, max(retries, 1) - 1)), self.config.election_backoff_max_ms)

    # -- leader ----------------------------------------------------------------------------------------------

    def _tick_leader(self, r: Leader, now: int) -> None:
        if now >= r.check_quorum_deadline:
            if len(self.voters) > 1:
                self._to_resigned(
                    r, now, f"check-quorum: no majority fetched within {self.config.fetch_timeout_ms * 3 // 2} ms"
                )
                return
            # A lone voter is its own quorum; move the deadline on, or next_deadline() stays in the past forever.
            r.check_quorum_deadline = now + self.config.fetch_timeout_ms * 3 // 2
        for replica_id, s in r.all_replicas():
            if s.parked is not None and now >= s.parked_deadline:
                self._answer_fetch(r, replica_id, s.parked, now)
        for observer, s in list(r.observers.items()):
            if s.last_fetch_ms is not None and now - s.last_fetch_ms > OBSERVER_SESSION_TIMEOUT_MS:
                del r.observers[observer]
        if now >= r.begin_epoch_resend_at:
            # As Kafka's leader, every fetch.timeout/2: a voter that restarted (its data wiped, say) learns the
            # leader from it, not at its election timeout through a refused pre-vote. Kafka sends it to every
            # voter; one that fetched within that time knows the leader already, and is not prodded.
            heard_since = now - self.config.fetch_timeout_ms // 2
            for voter, s in r.replicas.items():
                if s.last_fetch_ms is None or s.last_fetch_ms < heard_since:
                    self._send(
                        voter, BeginQuorumEpochRequest(self.cluster_id, self.id, r.epoch, self._next_correlation())
                    )
            r.begin_epoch_resend_at = now + self.config.fetch_timeout_ms // 2
        self._maybe_drain(r, now)

    def _maybe_drain(self, r: Leader, now: int) -> None:
        # Group commit: while a write is on its way (to the local disk, or to a majority: written but not yet
        # committed), appends gather into the open batch; it goes out when that write completes (or its linger
        # expires). A lone append pays nothing; under load each replication round carries one batch with all
        # that arrived meanwhile, instead of a batch per local fsync and a fetch round trip for each.
        uncommitted = r.high_watermark is None or r.high_watermark < self.log.end_offset
        if not r.accumulator.needs_drain(now, self._flush_in_flight or self._flush_needed or uncommitted):
            return
        for batch in r.accumulator.drain():
            info = self.log.append(batch.encode(r.epoch), r.epoch)
            if info.base_offset != batch.base_offset:
                raise SafetyViolation(f"batch for offset {batch.base_offset} landed at {info.base_offset}")
            self.metrics.appended_batches += 1
        self._flush_needed = True
        self._wake_parked_fetches(r, now)

    def _update_leader_hw(self, r: Leader, now: int) -> None:
        own = self.log.end_offset if BUG_HW_BEFORE_FSYNC in self.bugs else r.flushed_offset
        ends = sorted([own, *(s.end_offset for s in r.replicas.values())], reverse=True)
        candidate = ends[len(self.voters) // 2]
        reaches_own_epoch = candidate > r.epoch_start_offset or BUG_COMMIT_BY_COUNTING in self.bugs
        if reaches_own_epoch and (r.high_watermark is None or candidate > r.high_watermark):
            r.high_watermark = candidate
            if candidate > self.high_watermark:
                self.high_watermark = candidate
                self.metrics.committed_offset_advances += 1
            self._wake_parked_fetches(r, now)

    def _serving_leader(self, source: int, m: FetchRequest | FetchSnapshotRequest) -> Leader | None:
        """This node as the leader of the fetcher's epoch, or None after answering why not."""
        r = self.role
        if m.leader_epoch < self.epoch:
            self._reply(source, m, Errors.FENCED_LEADER_EPOCH)
        elif m.leader_epoch > self.epoch:
            self._reply(source, m, Errors.UNKNOWN_LEADER_EPOCH)
        elif not isinstance(r, Leader):
            self._reply(source, m, Errors.NOT_LEADER_OR_FOLLOWER)
        else:
            return r
        return None

    def _on_fetch_request(self, source: int, m: FetchRequest, now: int) -> None:
        r = self._serving_leader(source, m)
        if r is None:
            return
        if m.fetch_offset < 0 or m.last_fetched_epoch < 0 or m.last_fetched_epoch > r.epoch or m.max_bytes <= 0:
            self._reply(source, m, Errors.INVALID_REQUEST)
            return
        s = r.replica(source)
        s.parked = None
        s.last_fetch_ms = now
        self._note_check_quorum(r, now)
        snapshot = self._snapshot_needed(m)
        if snapshot is not None:
            # It holds no more than its fetch offset (a wiped voter: nothing); never count it for more.
            s.end_offset = min(s.end_offset, m.fetch_offset)
            response = FetchResponse(
                Errors.NONE,
                r.epoch,
                self.id,
                self._leader_hw(r),
                snapshot_end_offset=snapshot.end_offset,
                snapshot_epoch=snapshot.epoch,
                correlation_id=m.correlation_id,
            )
            self._send(source, response)
            return
        diverging = self._divergence(m)
        if diverging is not None:
            epoch, end = diverging
            response = FetchResponse(
                Errors.NONE,
                r.epoch,
                self.id,
                self._leader_hw(r),
                diverging_epoch=epoch,
                diverging_end_offset=end,
                correlation_id=m.correlation_id,
            )
            self._send(source, response)
            return
        s.end_offset = m.fetch_offset
        self._update_leader_hw(r, now)
        self._maybe_drain(r, now)  # a commit lets the next batch go, in this very answer
        if m.max_wait_ms <= 0:
            self._answer_fetch(r, source, m, now)
            return
        records = m.fetch_offset < self.log.end_offset
        s.parked = m  # answered at once below if it has records and is not an observer's held answer
        s.parked_deadline = now + min(m.max_wait_ms, self.config.fetch_max_wait_ms)
        if records or s.sent_high_watermark < self._leader_hw(r):
            self._news_for_parked(r, source, s, records, now)

    def _snapshot_needed(self, m: FetchRequest) -> SnapshotId | None:
        """The snapshot to send instead of records (Kafka's validateOffsetAndEpoch): the fetcher needs offsets below
        our log start, or its last epoch is older than every epoch our log still holds, so where it diverges can
        only be below our log start."""
        start = self.log.start_offset
        snapshot = self.log.latest_snapshot()
        if snapshot is None or start == 0:
            return None
        if m.fetch_offset < start or self.log.end_offset_for_epoch(m.last_fetched_epoch)[0] < 0:
            return snapshot
        return None

    def _divergence(self, m: FetchRequest) -> tuple[int, int] | None:
        """Where the fetcher's log stops matching ours, or None if (fetch offset, last epoch) is a prefix of it."""
        if m.fetch_offset == 0 or BUG_SKIP_DIVERGENCE_CHECK in self.bugs:
            return None
        epoch, end = self.log.end_offset_for_epoch(m.last_fetched_epoch)
        if epoch < 0:
            return 0, self.log.start_offset  # it holds only epochs older than anything we have
        if epoch != m.last_fetched_epoch or end < m.fetch_offset:
            return epoch, end
        return None

    def _note_check_quorum(self, r: Leader, now: int) -> None:
        heard = 1 + sum(
            1
            for s in r.replicas.values()
            if s.last_fetch_ms is not None and now - s.last_fetch_ms <= self.config.fetch_timeout_ms * 3 // 2
        )
        if heard >= self.majority:
            r.check_quorum_deadline = now + self.config.fetch_timeout_ms * 3 // 2

    @staticmethod
    def _leader_hw(r: Leader) -> int:
        return -1 if r.high_watermark is None else r.high_watermark

    def _answer_fetch(self, r: Leader, voter: int, m: FetchRequest, now: int) -> None:
        s = r.replica(voter)
        s.parked = None
        s.answered_ms = now
        records = b""
        if m.fetch_offset < self.log.end_offset:
            records, _ = self.log.read(m.fetch_offset, min(m.max_bytes, self.config.fetch_max_bytes))
        hw = self._leader_hw(r)
        s.sent_high_watermark = hw
        self._send(voter, FetchResponse(Errors.NONE, r.epoch, self.id, hw, records, correlation_id=m.correlation_id))

    def _wake_parked_fetches(self, r: Leader, now: int) -> None:
        hw = self._leader_hw(r)
        end = self.log.end_offset
        for replica_id, s in r.all_replicas():
            if s.parked is None:
                continue
            records = s.parked.fetch_offset < end
            if records or s.sent_high_watermark < hw:
                self._news_for_parked(r, replica_id, s, records, now)

    def _news_for_parked(self, r: Leader, replica_id: int, s: ReplicaState, records: bool, now: int) -> None:
        """There is news for a parked fetch: records, or only a higher high watermark. Records answer it at once,
        a high watermark alone within high_watermark_linger_ms (0: at once); an observer answered less than
        observer_linger_ms ago waits for that time to be up either way. See RaftConfig."""
        assert s.parked is not None
        held = self._observer_held_until(r, replica_id, s, now)
        if held is not None:
            s.parked_deadline = min(s.parked_deadline, held)
            return
        linger = 0 if records else self.config.high_watermark_linger_ms
        if linger <= 0:
            self._answer_fetch(r, replica_id, s.parked, now)
        else:
            s.parked_deadline = min(s.parked_deadline, now + linger)

    def _observer_held_until(self, r: Leader, replica_id: int, s: ReplicaState, now: int) -> int | None:
        """Until when news for an observer waits (its last answer plus observer_linger_ms), or None: a voter, or
        an observer free to be answered now."""
        if replica_id in r.replicas or s.answered_ms is None:
            return None
        until = s.answered_ms + self.config.observer_linger_ms
        return until if until > now else None

    def _fail_parked_fetches(self, r: Leader) -> None:
        for replica_id, s in r.all_replicas():
            if s.parked is not None:
                self._reply(replica_id, s.parked, Errors.NOT_LEADER_OR_FOLLOWER)
                s.parked = None

    # -- follower --------------------------------------------------------------------------------------------

    def _send_fetch(self, f: Follower, now: int, *, probe: bool = False) -> None:
        f.fetch_correlation = self._next_correlation()
        f.fetch_sent_ms = now
        if f.snapshot is not None and f.snapshot_id is not None:
            # A chunk (up to 8 MiB) takes its transfer time: over an observer's gRPC stream, past the silence grace
            # (a new broker at 2M partitions suspected its leader 40 times in 50 s). The silence rule does not
            # watch it: the fetch timeout, renewed by each chunk, does. A node this far behind cannot lead anyway.
            f.probing, f.overdue_seen, f.overdue_at = False, False, 0
        else:
            self._arm_overdue(f, now, probe, 0 if probe else self.config.fetch_max_wait_ms)
        if f.snapshot is not None and f.snapshot_id is not None:
            self._send(
                f.leader_id,
                FetchSnapshotRequest(
                    self.cluster_id,
                    self.id,
                    f.epoch,
                    f.snapshot_id.end_offset,
                    f.snapshot_id.epoch,
                    f.snapshot.size,
                    self.config.fetch_max_bytes,
                    f.fetch_correlation,
                ),
            )
            return
        request = FetchRequest(
            self.cluster_id,
            self.id,
            f.epoch,
            self.log.end_offset,
            self.log.last_epoch,
            self.config.fetch_max_bytes,
            0 if probe else self.config.fetch_max_wait_ms,
            f.fetch_correlation,
        )
        self._send(f.leader_id, request)

    def _on_fetch_response(self, source: int, m: FetchResponse, now: int) -> None:
        if m.correlation_id == self._bootstrap_correlation:
            self._on_bootstrap_response(source, m, now)
            return
        if self._learn(m.epoch, m.leader_id, now, f"fetch response from {source}"):
            return
        f = self.role
        if not isinstance(f, Follower) or source != f.leader_id or m.correlation_id != f.fetch_correlation:
            return  # stale, duplicated, or not from our leader
        f.fetch_correlation = None
        if m.error != Errors.NONE or m.epoch != f.epoch:
            f.fetch_sent_ms = now + self.config.retry_backoff_ms  # retry after a backoff
            return
        f.last_fetch_ok_ms = now
        f.fetch_deadline = self._fetch_deadline(now)
        self._note_answer_time(f, now)
        if f.leader_unreachable:
            f.leader_unreachable = False
            if not f.leader_resigned:
                f.prospective_at = None
        if m.diverging_epoch >= 0:
            self._truncate_diverging(m.diverging_epoch, m.diverging_end_offset, now)
            self._send_fetch(f, now)
            return
        if m.snapshot_end_offset >= 0:
            self._start_snapshot_fetch(f, SnapshotId(m.snapshot_end_offset, m.snapshot_epoch), now)
            return
        self._drop_paused_snapshot()  # the leader sends the log: no snapshot to resume
        appended = self._append_fetched(m.records, f, now)
        if m.high_watermark >= 0:
            new_hw = min(m.high_watermark, self.log.end_offset)
            if new_hw > self.high_watermark:
                self.high_watermark = new_hw
                self.metrics.committed_offset_advances += 1
        if appended:
            self._flush_needed = True
            if self.observer:
                # Kafka's observers do not flush before fetching again: no quorum counts what they hold. A broker
                # whose busy loop took two turns per fetch (the answer, then the flush's completion) fell behind
                # the leader's log start during a large creation and had to install snapshot after snapshot.
                self._send_fetch(f, now)
            else:
                f.awaiting_flush = True  # a voter's fetch offset tells the leader what it holds durably
        else:
            self._send_fetch(f, now)

    def _append_fetched(self, records: bytes, f: Follower, now: int) -> bool:
        appended = False
        try:
            for batch in iter_batches(records, path=f"fetch from {f.leader_id}"):
                if batch.base_offset != self.log.end_offset:
                    self._log.warning(
                        "fetched_batch_out_of_place", base_offset=batch.base_offset, log_end_offset=self.log.end_offset
                    )
                    break
                self.log.append(batch.buffer)
                appended = True
        except (CorruptBatchError, ValueError) as e:
            self._log.warning("fetched_batch_rejected", leader_id=f.leader_id, error=str(e))
        return appended

    def _truncate_diverging(self, epoch: int, end_offset: int, now: int) -> None:
        local_epoch, local_end = self.log.end_offset_for_epoch(epoch)
        if local_epoch < 0:
            target = self.log.start_offset
        elif local_epoch == epoch:
            target = min(local_end, end_offset)
        else:
            target = local_end
        target = min(target, self.log.end_offset)
        if target < self.high_watermark:
            raise SafetyViolation(
                f"node {self.id}: asked to truncate to {target}, below the high watermark {self.high_watermark}"
            )
        old_end = self.log.end_offset
        new_end = self.log.truncate_to(target)
        self._durable_offset = min(self._durable_offset, new_end)
        if self._flush_in_flight:
            self._truncated_below = new_end if self._truncated_below is None else min(self._truncated_below, new_end)
        self.metrics.truncations += 1
        self._log.warning(
            "log_truncated_for_divergence",
            epoch=self.epoch,
            diverging_epoch=epoch,
            diverging_end_offset=end_offset,
            old_end=old_end,
            new_end=new_end,
        )

    # -- quorum epoch announcements --------------------------------------------------------------------------

    def _on_begin_quorum_epoch(self, source: int, m: BeginQuorumEpochRequest, now: int) -> None:
        if m.leader_epoch < self.epoch:
            self._reply(source, m, Errors.FENCED_LEADER_EPOCH)
            return
        if m.leader_epoch == self.epoch and self.leader_id not in (NO_LEADER, source):
            self._log.error("conflicting_leader", epoch=m.leader_epoch, claimed=source, known=self.leader_id)
            self._reply(source, m, Errors.INVALID_REQUEST)
            return
        r = self.role
        if isinstance(r, Prospective) and r.epoch == m.leader_epoch and r.leader_id == source:
            self._to_follower(r.epoch, source, now, f"leader {source} is alive (BeginQuorumEpoch)")
        elif not self._learn(m.leader_epoch, source, now, f"BeginQuorumEpoch from {source}"):
            r = self.role
            if isinstance(r, Follower) and r.fetch_correlation is None and not r.awaiting_flush:
                self._send_fetch(r, now)
        self._send(source, BeginQuorumEpochResponse(Errors.NONE, self.epoch, self.leader_id, m.correlation_id))

    def _on_begin_quorum_epoch_response(self, source: int, m: BeginQuorumEpochResponse, now: int) -> None:
        self._learn(m.epoch, m.leader_id, now, f"BeginQuorumEpoch response from {source}")

    def _on_end_quorum_epoch(self, source: int, m: EndQuorumEpochRequest, now: int) -> None:
        if m.leader_epoch < self.epoch:
            self._reply(source, m, Errors.FENCED_LEADER_EPOCH)
            return
        self._learn(m.leader_epoch, source, now, f"EndQuorumEpoch from {source}")
        r = self.role
        if isinstance(r, Follower) and r.leader_id == source and r.epoch == m.leader_epoch:
            r.leader_resigned = True
            at = now + self._successor_backoff(m.preferred_successors)
            r.prospective_at = at if r.prospective_at is None else min(r.prospective_at, at)
        self._send(source, EndQuorumEpochResponse(Errors.NONE, self.epoch, self.leader_id, m.correlation_id))

    def _successor_backoff(self, successors: tuple[int, ...]) -> int:
        # Kafka's strictExponentialElectionBackoffMs: the most caught-up successor goes first, at once.
        n = len(successors)
        position = successors.index(self.id) if self.id in successors else -1
        cap = self.config.election_backoff_max_ms
        if position == 0:
            return 0
        if position < 0:
            return cap
        return min(cap, (cap >> (n - 1)) << (position - 1))

    def _on_end_quorum_epoch_response(self, source: int, m: EndQuorumEpochResponse, now: int) -> None:
        if self._learn(m.epoch, m.leader_id, now, f"EndQuorumEpoch response from {source}"):
            return
        r = self.role
        if isinstance(r, Resigned) and m.error == Errors.NONE:
            r.unacknowledged.discard(source)


_HANDLERS = {
    VoteRequest: RaftCore._on_vote_request,
    VoteResponse: RaftCore._on_vote_response,
    BeginQuorumEpochRequest: RaftCore._on_begin_quorum_epoch,
    BeginQuorumEpochResponse: RaftCore._on_begin_quorum_epoch_response,
    EndQuorumEpochRequest: RaftCore._on_end_quorum_epoch,
    EndQuorumEpochResponse: RaftCore._on_end_quorum_epoch_response,
    FetchRequest: RaftCore._on_fetch_request,
    FetchResponse: RaftCore._on_fetch_response,
    FetchSnapshotRequest: RaftCore._on_fetch_snapshot_request,
    FetchSnapshotResponse: RaftCore._on_fetch_snapshot_response,
}
