"""The simulator: real :class:`~quorum.raft.core.RaftCore` instances driven by one seeded event queue.

Everything random comes from one ``random.Random(seed)``, and events are ordered by (time, sequence number), so a
seed replays exactly. The fault model (:mod:`quorum.sim.faults`): message loss, delay (hence reordering),
duplication, symmetric, one-way and bridge partitions, crashes, restarts, slow disks, graceful resignations; and
crash points, where a node dies inside a storage operation of a handler (its election state written or not, a batch
appended but not flushed, a truncation or a snapshot install done in part), some of the messages it had queued
already sent, and a supervisor restarts it within tens of ms. A crash keeps the flushed log and perhaps some
batches after it (the OS may have written them). Requests to a down node wait for it, as the transport's do, until
the request timeout. Each seed runs one of three fault mixes (classic, elections, replication: seed mod 3). Nodes
snapshot their committed prefix at random moments and clean their logs up to it, so that lagging and restarted
nodes catch up by fetching a snapshot (FetchSnapshot).

After *every* event the invariants of :mod:`quorum.sim.invariants` run (:meth:`Simulation.check_invariants`); the
first violation raises :class:`InvariantViolation` naming the seed, the step and the virtual time.
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
from quorum.log.snapshots import SnapshotId
from quorum.raft.config import RaftConfig
from quorum.raft.core import RaftCore, SafetyViolation
from quorum.raft.messages import REQUEST_TYPES, Envelope, VoteResponse
from quorum.raft.roles import Follower, Leader
from quorum.sim.faults import CrashPoint, CrashPoints, FaultInjection, Faults
from quorum.sim.invariants import Invariants, InvariantViolation
from quorum.sim.storage import SimLog, SimStore

__all__ = ["CLUSTER_ID", "SIM_CONFIG", "Faults", "InvariantViolation", "SimNode", "Simulation", "Stats", "run_seed"]

T = TypeVar("T")

CLUSTER_ID = "sim-cluster"
# Each incarnation of a node numbers its requests from incarnation * CORRELATION_SPAN, so that a response tells which
# incarnation asked (see Simulation._send).
CORRELATION_SPAN = 1 << 32

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
    fetch_silence_ms=110,  # 50 ms max wait + 60 ms grace: messages of up to 15 ms each way never look silent
    pre_vote_yield_ms=20,
    high_watermark_linger_ms=5,
    observer_linger_ms=5,
)


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
    incarnation: int = 0  # how many times it started: its correlation ids are incarnation * CORRELATION_SPAN + n
    checked_hw: int = 0
    wiped: bool = False  # its data was lost while down: it starts empty, and asks the voters who leads

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
    snapshots_taken: int = 0
    snapshots_installed: int = 0  # FetchSnapshot installs, every incarnation of every core (its metrics)
    leaders: set[int] = field(default_factory=set)


class Simulation(FaultInjection, Invariants):
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
        self._installs_by_dead_cores = 0  # snapshots_installed of the cores crashes discarded
        self._append_counter = 0
        self._calm = False  # set when healing: no more faults or client appends
        self.nodes = {i: self._new_node(i) for i in range(1, voters + 1)}
        for node in self.nodes.values():
            self._start(node)
        self._schedule(self._exp(self.faults.chaos_interval_ms), self._chaos)
        self._schedule(self._exp(self.faults.append_interval_ms), self._client_append)
        # Snapshots are no fault: they go on at this rate while heal_and_converge calms everything else. (None at
        # all draws nothing from the RNG: a scripted run replays as it did before snapshots existed.)
        self._snapshot_interval_ms = self.faults.snapshot_interval_ms
        if self._snapshot_interval_ms > 0:
            self._schedule(self._exp(self._snapshot_interval_ms), self._snapshot_event)

    # -- plumbing --------------------------------------------------------------------------------------------

    def _exp(self, mean: float) -> int:
        return max(1, int(self.rng.expovariate(1 / mean)))

    def _schedule(self, delay: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (self.now + delay, next(self._seq), action))

    def _new_node(self, node_id: int) -> SimNode:
        points = CrashPoints(node_id, self.rng, lambda: self.faults)
        return SimNode(node_id, SimLog(self._check_log_matching, points), SimStore(points))

    def _start(self, node: SimNode) -> None:
        node.log.open()  # the restart's recovery: finishes an install a crash interrupted
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
                ask_for_leader=node.wiped,
            )
            node.wiped = False
        except CrashPoint:  # died while recovering its election state: the supervisor tries again
            self.stats.crashes += 1
            self.stats.crash_points += 1
            self._schedule(self.rng.randint(5, 50), lambda: self._supervisor_restart(node))
            return
        node.incarnation += 1
        node.core._correlation = node.incarnation * CORRELATION_SPAN  # (a core numbers from 1 in each process)
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
        if (
            not isinstance(m, REQUEST_TYPES)
            and m.correlation_id // CORRELATION_SPAN != self.nodes[env.destination].incarnation
        ):
            # The answer to a request of the destination's previous incarnation (delayed, it arrived after the
            # restart): it would go back on that process's connection, which died with it.
            return
        if (env.source, env.destination) in self._blocked or self.rng.random() < self.faults.drop:
            return
        # Addressed to the destination's current incarnation: its connections die with it, so a message in flight
        # when it crashes never reaches the next one (which could take a stale response for the answer to its own
        # request: a real process numbers its requests from 1 again).
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
        if node.core is not None:
            self._installs_by_dead_cores += node.core.metrics.snapshots_installed
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

    def wipe(self, node_id: int) -> None:
        """Lose a down node's whole data directory (log, snapshots, quorum-state): it restarts empty.

        Raft's safety assumes a voter never forgets its vote: a wiped voter may vote again in an epoch where it
        already voted (the one-vote invariant still checks every grant), which is why Kafka refuses to format a
        voter's directory outside its storage tool. Use it only where the vote cannot matter, e.g. a settled
        leader that the wiped node rejoins as a follower."""
        node = self.nodes[node_id]
        assert not node.up, f"node {node_id} must be down to lose its data"
        points = CrashPoints(node_id, self.rng, lambda: self.faults)
        node.log, node.store = SimLog(self._check_log_matching, points), SimStore(points)
        node.wiped = True

    def take_snapshot(self, node_id: int, clean: bool = True) -> SnapshotId | None:
        """``node_id`` snapshots its log up to its high watermark (its committed prefix, a batch boundary), then
        (``clean``) deletes what that snapshot covers. None if it has nothing new to snapshot."""
        node = self.nodes[node_id]
        assert node.core is not None, f"node {node_id} is down"
        taken = node.log.take_snapshot(node.core.high_watermark)
        if taken is not None:
            self.stats.snapshots_taken += 1
        if clean:
            node.log.clean()
        return taken

    def _snapshot_event(self) -> None:
        self._schedule(self._exp(self._snapshot_interval_ms), self._snapshot_event)
        up = [n for n in self.nodes.values() if n.up]
        if up:
            # Mostly cleaned at once: lagging nodes then need the snapshot; sometimes the log keeps its prefix.
            self.take_snapshot(self.rng.choice(up).node_id, clean=self.rng.random() < 0.8)

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


def quiet_logs() -> None:
    """The simulator runs thousands of elections and truncations: log only errors."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))


def run_seed(seed: int, *, voters: int = 3, steps: int = 2000, bugs: frozenset[str] = frozenset(), **kw: Any) -> Stats:
    sim = Simulation(seed, voters, bugs=bugs, **kw)
    sim.run(steps)
    sim.heal_and_converge()
    return sim.stats
