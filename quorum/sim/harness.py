"""The simulator: real :class:`~quorum.raft.core.RaftCore` instances driven by one seeded event queue.

Everything random comes from one ``random.Random(seed)``, and events are ordered by (time, sequence number), so a
seed replays exactly. The fault model (:mod:`quorum.sim.faults`): message loss, delay (hence reordering),
duplication, symmetric, one-way and bridge partitions, crashes, restarts, slow disks, graceful resignations; and
crash points, where a node dies inside a storage operation of a handler (its election state written or not, a batch
appended but not flushed, a truncation done in part), some of the messages it had queued already sent, and a
supervisor restarts it within tens of ms. A crash keeps the flushed log and perhaps some batches after it (the OS
may have written them). Requests to a down node wait for it, as the transport's do, until the request timeout.
Each seed runs one of three fault mixes (classic, elections, replication: seed mod 3).

After *every* event the invariants in :meth:`Simulation.check_invariants` run: one leader per epoch, one vote per
voter per epoch, a node acts only on the epoch, vote and leader it stored, log matching, leader completeness (for
leaders, and for any node that could still win a vote), identical committed prefixes, monotonic high watermarks, a
majority-durable high watermark, acknowledged appends committed. The first violation raises
:class:`InvariantViolation` naming the seed, the step and the virtual time.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import structlog

from quorum.errors import KafkaError
from quorum.log.quorum_state import ElectionState
from quorum.raft.config import RaftConfig
from quorum.raft.core import RaftCore, SafetyViolation
from quorum.raft.messages import NO_LEADER, REQUEST_TYPES, Envelope, VoteResponse
from quorum.raft.roles import Follower, Leader, Prospective
from quorum.sim.faults import CrashPoint, CrashPoints, FaultInjection, Faults
from quorum.sim.storage import SimBatch, SimLog, SimStore

__all__ = ["CLUSTER_ID", "SIM_CONFIG", "Faults", "InvariantViolation", "SimNode", "Simulation", "Stats", "run_seed"]

T = TypeVar("T")

CLUSTER_ID = "sim-cluster"

# Timeouts scaled down from Kafka's defaults so that a few thousand steps see many elections; the protocol does not
# depend on the absolute values. Messages take ~1-5 ms here, so the ratios stay realistic.
SIM_CONFIG = RaftConfig(
    election_timeout_ms=150,
    fetch_timeout_ms=300,
    election_backoff_max_ms=150,
    append_linger_ms=5,
    request_timeout_ms=300,
    retry_backoff_ms=10,
    fetch_max_wait_ms=50,
    fetch_max_bytes=4096,
    unreachable_leader_backoff_ms=20,
)


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimNode:
    node_id: int
    log: SimLog
    store: SimStore
    core: RaftCore | None = None
    tick_at: int | None = None
    flushing: bool = False
    slow_disk: bool = False
    last_hw: int = 0  # high watermark seen this incarnation (must never fall)
    checked_hw: int = 0

    @property
    def up(self) -> bool:
        return self.core is not None


@dataclass
class Stats:
    steps: int = 0
    appends: int = 0
    acked: int = 0
    elections: int = 0
    crashes: int = 0
    crash_points: int = 0  # crashes inside a handler's storage operation (counted in crashes too)
    partitions: int = 0
    leaders: set[int] = field(default_factory=set)


class Simulation(FaultInjection):
    def __init__(
        self,
        seed: int,
        voters: int = 3,
        *,
        config: RaftConfig = SIM_CONFIG,
        faults: Faults | None = None,
        bugs: frozenset[str] = frozenset(),
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or Faults.for_seed(seed)
        self.config = replace(config, **self.faults.tuning)
        self.bugs = bugs
        self.now = 0
        self.stats = Stats()
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._blocked: set[tuple[int, int]] = set()  # (from, to) pairs whose messages are dropped
        self._waiting: dict[int, list[tuple[int, Envelope]]] = {}  # down node -> (expiry, request) held for it
        self._seen_batches: dict[tuple[int, int], bytes] = {}  # (base offset, epoch) -> chain hash
        self._committed: dict[int, bytes] = {0: b""}  # committed batch boundary -> chain hash up to it
        self._committed_end = 0
        self._committed_in: dict[int, int] = {}  # epoch -> the largest boundary first seen committed in it
        self._leaders: dict[int, int] = {}  # epoch -> leader id
        self._votes: dict[tuple[int, int], int] = {}  # (voter, epoch) -> the candidate it granted its vote
        self._pending: list[tuple[int, int, int, bytes]] = []  # (node, epoch, offset, value) awaiting commit
        self.acked: dict[int, bytes] = {}  # offset -> value of every acknowledged append
        self._append_counter = 0
        self._calm = False  # set when healing: no more faults or client appends
        self.nodes = {i: self._new_node(i) for i in range(1, voters + 1)}
        for node in self.nodes.values():
            self._start(node)
        self._schedule(self._exp(self.faults.chaos_interval_ms), self._chaos)
        self._schedule(self._exp(self.faults.append_interval_ms), self._client_append)

    # -- plumbing --------------------------------------------------------------------------------------------

    def _exp(self, mean: float) -> int:
        return max(1, int(self.rng.expovariate(1 / mean)))

    def _schedule(self, delay: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + delay, next(self._seq), action))

    def _new_node(self, node_id: int) -> SimNode:
        points = CrashPoints(node_id, self.rng, lambda: self.faults)
        return SimNode(node_id, SimLog(self._check_log_matching, points), SimStore(points))

    def _start(self, node: SimNode) -> None:
        try:
            node.core = RaftCore(
                node_id=node.node_id,
                voters=list(self.nodes),
                cluster_id=CLUSTER_ID,
                log=node.log,
                store=node.store,
                config=self.config,
                rng=random.Random(self.rng.random()),
                now_ms=self.now,
                bugs=self.bugs,
            )
        except CrashPoint:  # died while recovering its election state: the supervisor tries again
            self.stats.crashes += 1
            self.stats.crash_points += 1
            self._schedule(self.rng.randint(5, 50), lambda: self._supervisor_restart(node))
            return
        node.last_hw = node.checked_hw = 0
        node.tick_at = None
        node.flushing = False
        self._after(node)
        for expiry, env in self._waiting.pop(node.node_id, []):
            if expiry >= self.now:
                self._transmit(env, node.core)

    def _call(self, node: SimNode, call: Callable[[RaftCore], T]) -> T | None:
        """One input to ``node``'s core, then what it asked for. A crash point inside it kills the node there:
        the core is dropped half-way through its handler, and None is returned."""
        core = node.core
        assert core is not None
        try:
            result = call(core)
        except CrashPoint:
            self._die_at_crash_point(node, core)
            return None
        self._after(node)
        return result

    def _after(self, node: SimNode) -> None:
        """Carry out what the core asked for: send messages, start a flush, schedule its next tick."""
        core = node.core
        if core is None:
            return
        for env in core.take_messages():
            self._send(env)
        if core.poll_flush():
            end, batches = node.log.begin_flush()
            delay = self.rng.randint(20, 200) if node.slow_disk else self.rng.randint(0, 3)
            incarnation = core

            def done() -> None:
                if node.core is not incarnation:
                    return  # crashed meanwhile: the flush never finished
                node.log.complete_flush(batches)
                self._call(node, lambda c: c.flushed(end, self.now))

            self._schedule(delay, done)
        deadline = max(core.next_deadline(), self.now)
        if node.tick_at is None or deadline < node.tick_at or node.tick_at < self.now:
            node.tick_at = deadline
            incarnation = core

            def tick() -> None:
                if node.core is not incarnation or node.tick_at != deadline:
                    return
                node.tick_at = None
                self._call(node, lambda c: c.tick(self.now))

            self._schedule(deadline - self.now, tick)

    def _send(self, env: Envelope) -> None:
        m = env.message
        if isinstance(m, VoteResponse) and m.vote_granted and not m.pre_vote:
            self._check_one_vote(env.source, m.epoch, env.destination)
        if (env.source, env.destination) in self._blocked or self.rng.random() < self.faults.drop:
            return
        # Addressed to the destination's current incarnation: its connections die with it, so a message in flight
        # when it crashes never reaches the next one (which would take a stale response for the answer to its own
        # request: correlation ids start over with each incarnation).
        target = self.nodes[env.destination].core
        if target is None and isinstance(m, REQUEST_TYPES):
            # The transport's stream to a down peer waits for it to come back, holding requests until the request
            # timeout: a node restarted at once hears what was sent to it meanwhile (quorum/transport/peer.py).
            self._waiting.setdefault(env.destination, []).append((self.now + self.config.request_timeout_ms, env))
            return
        self._transmit(env, target)

    def _transmit(self, env: Envelope, target: RaftCore | None) -> None:
        copies = 2 if self.rng.random() < self.faults.duplicate else 1
        for _ in range(copies):
            if self.rng.random() < self.faults.long_delay:
                delay = self.rng.randint(20, 200)
            else:
                delay = self.rng.randint(1, self.faults.max_delay_ms)
            self._schedule(delay, lambda env=env: self._deliver(env, target))

    def _deliver(self, env: Envelope, target: RaftCore | None) -> None:
        node = self.nodes[env.destination]
        if node.core is None or node.core is not target or (env.source, env.destination) in self._blocked:
            return
        self._call(node, lambda c: c.handle(env, self.now))

    # -- client and faults -----------------------------------------------------------------------------------

    def _client_append(self) -> None:
        if self._calm:
            return
        self._schedule(self._exp(self.faults.append_interval_ms), self._client_append)
        leaders = [n for n in self.nodes.values() if n.core is not None and n.core.is_leader]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        core = node.core
        assert core is not None
        self._append_counter += 1
        value = f"s{self.seed}-v{self._append_counter}".encode()
        atomic = self.rng.random() < 0.5
        try:
            offset = self._call(node, lambda c: c.append(c.epoch, [value], self.now, atomic=atomic))
        except KafkaError:
            return
        if offset is not None:  # else it died appending: never acknowledged, its fate undecided
            self.stats.appends += 1
            self._pending.append((node.node_id, core.epoch, offset, value))

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.core = None
        f = self.faults
        survivors = 0
        if node.log.unflushed and f.unflushed_survives > 0 and self.rng.random() < f.unflushed_survives:
            survivors = self.rng.randint(1, node.log.unflushed)
        node.log.crash(survivors)
        self.stats.crashes += 1
        # Requests it was holding for down peers die with its process.
        for held in self._waiting.values():
            held[:] = [(expiry, env) for expiry, env in held if env.source != node_id]
        # Connections to a dead process are reset: its peers notice.
        for other in self.nodes.values():
            if other.core is not None:
                self._call(other, lambda c: c.peer_unreachable(node_id, self.now))

    def restart(self, node_id: int) -> None:
        self._start(self.nodes[node_id])

    # -- scenario controls (public: tests script faults with these) ---------------------------------------------

    def partition(self, *groups: list[int]) -> None:
        """Cut the network into ``groups``: messages cross no group boundary (both directions)."""
        side = {n: i for i, g in enumerate(groups) for n in g}
        self._blocked = {(a, b) for a in self.nodes for b in self.nodes if side.get(a, -1) != side.get(b, -2)}

    def block(self, source: int, destination: int) -> None:
        """Drop every message from ``source`` to ``destination`` (a one-way partition)."""
        self._blocked.add((source, destination))

    def heal(self) -> None:
        self._blocked = set()

    def leader(self) -> int | None:
        """The id of the up node that leads the highest epoch, if any."""
        best = None
        for n in self.nodes.values():
            if n.core is not None and n.core.is_leader and (best is None or n.core.epoch > best.core.epoch):
                best = n
        return None if best is None else best.node_id

    def run_for(self, ms: int) -> None:
        deadline = self.now + ms
        while self._queue and self._queue[0][0] <= deadline:
            self.step()
        self.now = max(self.now, deadline)

    def append(self, node_id: int, value: bytes) -> int:
        """A client append on ``node_id`` (must lead); it counts as acknowledged once committed."""
        node = self.nodes[node_id]
        core = node.core
        assert core is not None
        offset = self._call(node, lambda c: c.append(c.epoch, [value], self.now))
        assert offset is not None, f"node {node_id} died at a crash point while appending"
        self._pending.append((node_id, core.epoch, offset, value))
        return offset

    # -- running ---------------------------------------------------------------------------------------------

    def step(self) -> None:
        when, _, action = heapq.heappop(self._queue)
        self.now = when
        try:
            action()
        except SafetyViolation as e:
            raise self._violation(str(e)) from None
        self.stats.steps += 1
        self.check_invariants()

    def run(self, steps: int) -> Stats:
        for _ in range(steps):
            self.step()
        return self.stats

    def run_until(self, predicate: Callable[[], bool], max_ms: int) -> bool:
        deadline = self.now + max_ms
        while self._queue and self._queue[0][0] <= deadline:
            self.step()
            if predicate():
                return True
        return predicate()

    def heal_and_converge(self, max_ms: int = 30_000) -> None:
        """Stop the faults, restart everything, and check that a leader commits a fresh append everywhere."""
        self._calm = True
        self.faults = Faults.none()
        self._blocked = set()
        for node in self.nodes.values():
            node.slow_disk = False
            if not node.up:
                self._start(node)
        deadline = self.now + max_ms
        attempt = 0
        while True:
            # A leader elected just before the heal may still lose to a better log; an append it took is then
            # simply not acknowledged. Try again under whoever leads, until one is acknowledged.
            if not self.run_until(lambda: self._settled_leader() is not None, deadline - self.now):
                raise self._violation(f"no stable leader within {max_ms} ms of healing the cluster")
            leader = self._settled_leader()
            assert leader is not None and leader.core is not None
            attempt += 1
            value = f"s{self.seed}-final-{attempt}".encode()
            offset = self.append(leader.node_id, value)
            self.run_until(lambda o=offset: o in self.acked or not self._pending, deadline - self.now)
            if offset in self.acked:
                break
            if self.now >= deadline:
                raise self._violation(f"no fresh append was acknowledged within {max_ms} ms of healing")
        target = offset + 1
        done = self.run_until(
            lambda: all(n.core is not None and n.core.high_watermark >= target for n in self.nodes.values()),
            max(deadline - self.now, 1),
        )
        if not done:
            raise self._violation(f"not every node learned that offset {offset} is committed within {max_ms} ms")
        for node in self.nodes.values():
            self._check_acked_present(node)

    def _settled_leader(self) -> SimNode | None:
        """The leader every node follows, once it has committed in its epoch; None while that is not so."""
        for n in self.nodes.values():
            core = n.core
            if core is not None and isinstance(core.role, Leader) and core.role.high_watermark is not None:
                others = (m.core for m in self.nodes.values() if m is not n)
                if all(o is not None and isinstance(o.role, Follower) and o.leader_id == n.node_id for o in others):
                    return n
        return None

    # -- invariants ------------------------------------------------------------------------------------------

    def _violation(self, what: str) -> InvariantViolation:
        return InvariantViolation(
            f"seed {self.seed}, step {self.stats.steps}, t={self.now} ms: {what}\n"
            f"  replay: python -m quorum.sim --seed {self.seed} --voters {len(self.nodes)}"
            + (f" --bug {' --bug '.join(sorted(self.bugs))}" if self.bugs else "")
            + "\n  nodes: "
            + "; ".join(self._describe(n) for n in self.nodes.values())
        )

    def _describe(self, n: SimNode) -> str:
        if n.core is None:
            return f"{n.node_id}: down (log end {n.log.end_offset})"
        c = n.core
        return f"{n.node_id}: {c.role.name} epoch {c.epoch} leo {n.log.end_offset} hw {c.high_watermark}"

    def _check_log_matching(self, batch: SimBatch) -> None:
        key = (batch.base_offset, batch.epoch)
        seen = self._seen_batches.setdefault(key, batch.chain)
        if seen != batch.chain:
            raise self._violation(
                f"log matching: two different logs hold a batch at offset {batch.base_offset} in epoch {batch.epoch}"
            )

    def check_invariants(self) -> None:
        for node in self.nodes.values():
            core = node.core
            if core is None:
                continue
            self._check_durable_election_state(node, core)
            if isinstance(core.role, Leader):
                leader = self._leaders.setdefault(core.epoch, node.node_id)
                if leader != node.node_id:
                    raise self._violation(f"two leaders in epoch {core.epoch}: {leader} and {node.node_id}")
                self._check_leader_completeness(node)
            hw = core.high_watermark
            if hw < node.last_hw:
                raise self._violation(f"node {node.node_id}'s high watermark fell from {node.last_hw} to {hw}")
            node.last_hw = hw
            if hw > node.checked_hw:
                self._check_committed(node, hw)
                node.checked_hw = hw
        self._check_majority_durable()
        self._check_electable_hold_committed()
        self._settle_pending()

    def _check_durable_election_state(self, node: SimNode, core: RaftCore) -> None:
        """A node acts only on the election state it stored: epoch, vote and leader. Acting on more (a vote or a
        leader a crash would make it forget) lets it vote twice in one epoch."""
        stored = node.store.state or ElectionState()  # nothing stored yet: epoch 0, no leader, no vote
        role = core.role
        if stored.leader_epoch != core.epoch:
            raise self._violation(f"node {node.node_id} acts in epoch {core.epoch} but stored {stored.leader_epoch}")
        if role.voted_id != stored.voted_id:
            raise self._violation(
                f"node {node.node_id} acts on a vote for {role.voted_id} in epoch {core.epoch} "
                f"but stored a vote for {stored.voted_id}"
            )
        # The one allowed difference: a leader that stepped down to pre-vote forgets it leads (knowing less).
        stepped_down = isinstance(role, Prospective) and (role.leader_id, stored.leader_id) == (NO_LEADER, node.node_id)
        if role.leader_id != stored.leader_id and not stepped_down:
            raise self._violation(
                f"node {node.node_id} acts on leader {role.leader_id} in epoch {core.epoch} "
                f"but stored leader {stored.leader_id}"
            )

    def _check_leader_completeness(self, node: SimNode) -> None:
        """Raft's Leader Completeness: whatever was committed in an earlier epoch is in this leader's log.
        (A stale leader of an older epoch need not hold what later epochs committed.)"""
        assert node.core is not None
        epoch = node.core.epoch
        end = max((b for e, b in self._committed_in.items() if e < epoch), default=0)
        if end == 0:
            return
        batch = node.log.batch_ending_at(end)
        if batch is None or batch.chain != self._committed[end]:
            raise self._violation(
                f"leader completeness: leader {node.node_id} (epoch {node.core.epoch if node.core else '?'}) lacks "
                f"committed entries below offset {end}"
            )

    def _check_committed(self, node: SimNode, hw: int) -> None:
        batch = node.log.batch_ending_at(hw)
        if batch is None:
            raise self._violation(f"node {node.node_id}'s high watermark {hw} is not a batch boundary of its log")
        if hw <= self._committed_end:
            expected = self._committed.get(hw)
            if expected is not None and expected != batch.chain:
                raise self._violation(f"committed prefix below {hw} differs on node {node.node_id}")
            if expected is None:
                raise self._violation(f"node {node.node_id} committed up to {hw}, not a committed batch boundary")
            return
        # Extends what is committed: the known committed prefix must be a prefix of this node's log.
        prev = node.log.batch_ending_at(self._committed_end) if self._committed_end else None
        if self._committed_end and (prev is None or prev.chain != self._committed[self._committed_end]):
            raise self._violation(
                f"node {node.node_id} commits up to {hw} on a log that does not hold the committed prefix "
                f"below {self._committed_end}"
            )
        for b in node.log.batches:
            if self._committed_end < b.last_offset + 1 <= hw:
                self._committed[b.last_offset + 1] = b.chain
        self._committed_end = hw
        epoch = node.core.epoch if node.core else 0
        self._committed_in[epoch] = max(self._committed_in.get(epoch, 0), hw)

    def _check_one_vote(self, voter: int, epoch: int, candidate: int) -> None:
        """Election safety at the voter: one vote per epoch, whatever crashes happened between two grants."""
        first = self._votes.setdefault((voter, epoch), candidate)
        if first != candidate:
            raise self._violation(f"node {voter} granted its vote in epoch {epoch} to both {first} and {candidate}")

    def _check_electable_hold_committed(self) -> None:
        """Leader completeness for every node that could still win a vote, not only for leaders: a node whose log
        lacks committed entries must be less up to date than a majority (who would refuse it their votes), else
        it could be elected and overwrite them (Raft's Figure 8). Down nodes count with the log they restart on."""
        end = self._committed_end
        if end == 0:
            return
        chain = self._committed[end]
        keys = {n.node_id: (n.log.last_epoch, n.log.end_offset) for n in self.nodes.values()}
        for node in self.nodes.values():
            held = node.log.batch_ending_at(end)
            if held is not None and held.chain == chain:
                continue
            mine = keys[node.node_id]
            supporters = sorted(i for i, k in keys.items() if k <= mine)
            if len(supporters) >= len(self.nodes) // 2 + 1:
                raise self._violation(
                    f"node {node.node_id} lacks committed entries below offset {end} but its log (last epoch "
                    f"{mine[0]}, end {mine[1]}) is as up to date as those of {supporters}, a majority: it could be "
                    "elected and overwrite them"
                )

    def _check_majority_durable(self) -> None:
        for node in self.nodes.values():
            core = node.core
            if core is None or not isinstance(core.role, Leader) or core.role.high_watermark is None:
                continue
            hw = core.role.high_watermark
            durable = sum(1 for n in self.nodes.values() if n.log.durable_end >= hw)
            if durable < core.majority:
                raise self._violation(f"leader {node.node_id}'s high watermark {hw} is durable on only {durable} nodes")

    def _settle_pending(self) -> None:
        still = []
        for node_id, epoch, offset, value in self._pending:
            core = self.nodes[node_id].core
            if core is None or core.epoch != epoch or not core.is_leader:
                continue  # never acknowledged: the append's fate is undecided, which is allowed
            if core.high_watermark > offset:
                data, _ = self.nodes[node_id].log.read(offset, 1 << 20)
                if value not in data:
                    raise self._violation(f"acknowledged append at offset {offset} does not hold its value")
                self.acked[offset] = value
                self.stats.acked += 1
            else:
                still.append((node_id, epoch, offset, value))
        self._pending = still

    def _check_acked_present(self, node: SimNode) -> None:
        values = b"".join(b.data for b in node.log.batches)
        missing = [o for o, v in self.acked.items() if v not in values]
        if missing:
            raise self._violation(f"acknowledged appends lost on node {node.node_id}: offsets {missing[:5]}")
        for offset in self.acked:
            if offset >= node.log.end_offset:
                raise self._violation(f"node {node.node_id} lacks acknowledged offset {offset}")


def quiet_logs() -> None:
    """The simulator runs thousands of elections and truncations: log only errors."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


def run_seed(seed: int, *, voters: int = 3, steps: int = 2000, bugs: frozenset[str] = frozenset(), **kw: Any) -> Stats:
    sim = Simulation(seed, voters, bugs=bugs, **kw)
    sim.run(steps)
    sim.heal_and_converge()
    return sim.stats
