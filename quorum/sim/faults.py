"""The simulator's fault model: per-seed fault rates, and crash points inside a handler's storage operations.

A real node can die between any two of its storage operations: after writing its epoch but before its vote, after
appending a batch but before flushing it, half-way through a truncation, after a fetched snapshot is durable but
before the log is emptied to start at it; and the messages it had already handed
to its transport may or may not have left. The simulated stores (:mod:`quorum.sim.storage`) ask a node's
:class:`CrashPoints` at each operation whether the node dies there; if so they raise :class:`CrashPoint`, which the
harness catches around every call into a core and turns into a crash. Every decision draws from the simulation's
one RNG, so a seed still replays exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from quorum.log.quorum_state import ElectionState

if TYPE_CHECKING:
    from quorum.raft.core import RaftCore
    from quorum.raft.messages import Envelope
    from quorum.sim.harness import SimNode, Stats


class CrashPoint(BaseException):
    """The node dies inside a storage operation. A BaseException, so that no ``except Exception`` in the core can
    swallow it: it must unwind to the harness, which discards the core half-way through its handler."""


@dataclass
class Faults:
    """Fault rates (probabilities per event, per message or per storage operation). ``Faults()`` is the classic
    mix; :meth:`for_seed` picks one of three kinds of run per seed; :meth:`none` turns everything off."""

    kind: str = "classic"
    drop: float = 0.02
    duplicate: float = 0.02
    max_delay_ms: int = 5  # a message takes 1 ms to this
    long_delay: float = 0.03  # a message delayed up to 200 ms (reorders it past many others)
    chaos_interval_ms: int = 60  # mean time between fault injections
    crash_weight: float = 1.0
    crash_leader: float = 0.0  # a crash picks the leader (else any up node)
    partition_weight: float = 1.0
    one_way_weight: float = 0.5
    bridge_weight: float = 0.5  # two halves cut apart, one node reaching both
    heal_weight: float = 2.0
    slow_disk_weight: float = 0.5
    resign_weight: float = 0.5
    append_interval_ms: int = 8  # mean time between client appends
    # Mean time between two snapshots (of some up node's committed prefix, its log then cleaned up to it): often
    # enough that nodes which lag (restarted, cut off) mostly catch up through FetchSnapshot. 0: none.
    snapshot_interval_ms: int = 150
    # Crash points: the chance that one storage operation of a handler is where its node dies, per kind of
    # operation: election-state writes of an "epoch" (no vote), a "candidacy" (its own vote), a "vote" (for
    # another), a "leader"; a log "append" (the batch not flushed yet); a "truncate" (not done, done in part, or
    # done); an "install" of a fetched snapshot (not done, or the snapshot durable and the log emptied in part).
    # Election-state writes and installs are rare and decide much: they get high chances; appends are frequent.
    crash_points: dict[str, float] = field(
        default_factory=lambda: {
            "epoch": 0.05,
            "candidacy": 0.05,
            "vote": 0.05,
            "leader": 0.05,
            "append": 0.003,
            "truncate": 0.1,
            "install": 0.2,
        }
    )
    release: float = 0.5  # each message the handler queued before its crash point left anyway
    unflushed_survives: float = 0.5  # a crash keeps some unflushed batches after the durable prefix (the OS wrote them)
    quick_restart: float = 0.8  # a node that died at a crash point is restarted by its supervisor within tens of ms
    # RaftConfig fields set for this run: safety must not depend on them (e.g. a small fetch_max_bytes makes
    # followers acknowledge offsets mid-way through a new leader's uncommitted tail).
    tuning: dict[str, int] = field(default_factory=dict)

    @classmethod
    def none(cls) -> Faults:
        """No random faults, no crash points, no random client appends or snapshots (for scripted tests and the
        final heal)."""
        return cls(
            kind="none",
            drop=0,
            duplicate=0,
            long_delay=0,
            chaos_interval_ms=10**9,
            append_interval_ms=10**9,
            snapshot_interval_ms=0,
            crash_points={},
            unflushed_survives=0,
            quick_restart=0,
        )

    @classmethod
    def for_seed(cls, seed: int) -> Faults:
        """The fault mix of a seed: the three kinds of run take turns (seed mod 3: classic, elections,
        replication), so that any short range of seeds covers each of them."""
        return (cls, cls.elections, cls.replication)[seed % 3]()

    @classmethod
    def elections(cls) -> Faults:
        """Many elections, often two candidates in one epoch: election timeouts short beside a jittery network
        (1-20 ms), leaders crashing, voters dying as they vote and restarted at once, quiet clients (logs even)."""
        return cls(
            kind="elections",
            drop=0,
            duplicate=0,
            max_delay_ms=20,
            long_delay=0.01,
            chaos_interval_ms=40,
            crash_weight=3,
            crash_leader=0.5,
            partition_weight=0.3,
            one_way_weight=0,
            bridge_weight=0,
            heal_weight=1,
            slow_disk_weight=0,
            resign_weight=1,
            append_interval_ms=100,
            snapshot_interval_ms=50,  # few commits: snapshot each one soon, or lagging nodes rarely need one
            crash_points={"vote": 0.5, "leader": 0.1, "append": 0.003, "truncate": 0.1, "install": 0.2},
            release=1.0,
            unflushed_survives=1.0,
            quick_restart=0.9,
            tuning={
                "election_timeout_ms": 20,
                "fetch_timeout_ms": 40,
                "request_timeout_ms": 40,
                "election_backoff_max_ms": 20,
                "fetch_max_bytes": 128,
                # Below the fetch timeout (as Kafka's defaults are, 500 ms to 2 s): a parked fetch held longer
                # than it made every quiet follower time out, a new election every ~50 ms for ever once the
                # cluster healed, and a lagging node never finished fetching a snapshot from one leader.
                "fetch_max_wait_ms": 30,
            },
        )

    @classmethod
    def replication(cls) -> Faults:
        """Leaders lost mid-replication: nodes dying as they append (what they had not flushed may survive),
        small fetch answers (followers acknowledge offsets mid-way through a tail), slow disks, resignations."""
        return cls(
            kind="replication",
            drop=0,
            duplicate=0.02,
            max_delay_ms=20,
            long_delay=0.05,
            chaos_interval_ms=40,
            crash_weight=3,
            crash_leader=0.5,
            one_way_weight=1,
            bridge_weight=1,
            heal_weight=2,
            slow_disk_weight=1,
            resign_weight=4,
            append_interval_ms=10,
            snapshot_interval_ms=50,  # leaders rarely commit under this churn: snapshot what they do at once
            crash_points={"vote": 0.1, "append": 0.05, "truncate": 0.1, "install": 0.2},
            unflushed_survives=1.0,
            quick_restart=0.5,
            tuning={"fetch_max_bytes": 128},
        )


class CrashPoints:
    """Decides, for one node's storage, whether it dies at an operation; ``faults`` returns the current rates
    (the harness swaps them when it heals the cluster)."""

    def __init__(self, node_id: int, rng: random.Random, faults: Callable[[], Faults]) -> None:
        self.node_id = node_id
        self.rng = rng
        self._faults = faults

    def hit(self, op: str) -> bool:
        """True: the node dies at this ``op`` (a key of :attr:`Faults.crash_points`)."""
        p = self._faults().crash_points.get(op, 0.0)
        return p > 0 and self.rng.random() < p  # no draw when off: a calm run consumes the RNG as before

    def hit_write(self, state: ElectionState) -> bool:
        """``hit`` for writing ``state``, by what it records."""
        if state.leader_id >= 0:
            return self.hit("leader")
        if state.voted_id < 0:
            return self.hit("epoch")
        return self.hit("candidacy" if state.voted_id == self.node_id else "vote")


class FaultInjection:
    """The fault-injecting half of :class:`~quorum.sim.harness.Simulation` (a mixin): a random fault every
    ``chaos_interval_ms`` or so, and the death of a node at a crash point."""

    # Provided by the Simulation.
    now: int
    rng: random.Random
    faults: Faults
    nodes: dict[int, SimNode]
    stats: Stats
    _blocked: set[tuple[int, int]]
    _calm: bool

    if TYPE_CHECKING:

        def _schedule(self, delay: int, action: Callable[[], None]) -> None: ...
        def _exp(self, mean: float) -> int: ...
        def _start(self, node: SimNode) -> None: ...
        def _send(self, env: Envelope) -> None: ...
        def _call(self, node: SimNode, call: Callable[[RaftCore], object]) -> object: ...
        def crash(self, node_id: int) -> None: ...
        def leader(self) -> int | None: ...

    def _die_at_crash_point(self, node: SimNode, core: RaftCore) -> None:
        # A real driver sends each message as soon as the core queues it: some of those queued before the crash
        # point are on the wire (in any order, as per-peer streams are independent), the rest die with the process.
        f = self.faults
        left = [env for env in core.take_messages() if self.rng.random() < f.release]
        if len(left) > 1 and self.rng.random() < 0.5:
            self.rng.shuffle(left)
        for env in left:
            self._send(env)
        self.stats.crash_points += 1
        self.crash(node.node_id)
        # A supervisor restarts it at once, so it usually rejoins the epoch it died in: where a forgotten vote
        # or leader does harm.
        if self.rng.random() < f.quick_restart:
            self._schedule(self.rng.randint(5, 50), lambda: self._supervisor_restart(node))

    def _supervisor_restart(self, node: SimNode) -> None:
        if not node.up:
            self._start(node)

    def _chaos(self) -> None:
        if self._calm:
            return
        self._schedule(self._exp(self.faults.chaos_interval_ms), self._chaos)
        f = self.faults
        actions: list[tuple[float, Callable[[], None]]] = [
            (f.crash_weight, self._crash_or_restart),
            (f.partition_weight, self._partition),
            (f.one_way_weight, self._one_way),
            (f.bridge_weight, self._bridge),
            (f.heal_weight, self._heal),
            (f.slow_disk_weight, self._toggle_slow_disk),
            (f.resign_weight, self._resign_leader),
        ]
        total = sum(w for w, _ in actions)
        pick = self.rng.random() * total
        for weight, action in actions:
            pick -= weight
            if pick <= 0:
                action()
                return

    def _crash_or_restart(self) -> None:
        down = [n for n in self.nodes.values() if not n.up]
        up = [n for n in self.nodes.values() if n.up]
        if down and (self.rng.random() < 0.6 or len(down) * 2 >= len(self.nodes)):
            self._start(self.rng.choice(down))
        elif up:
            leader = self.leader()
            # A leader's crash is the interesting one: its followers all lose it at once and elect together.
            if leader is not None and self.rng.random() < self.faults.crash_leader:
                self.crash(leader)
            else:
                self.crash(self.rng.choice(up).node_id)

    def _partition(self) -> None:
        ids = list(self.nodes)
        self.rng.shuffle(ids)
        cut = self.rng.randint(1, len(ids) - 1)
        a, b = ids[:cut], ids[cut:]
        self._blocked = {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}
        self.stats.partitions += 1

    def _bridge(self) -> None:
        """Jepsen's bridge: two halves that cannot talk, and one node that talks to both (often the leader, so
        that its crash leaves two sides electing through the one voter both can reach)."""
        ids = list(self.nodes)
        leader = self.leader()
        bridge = leader if leader is not None and self.rng.random() < 0.5 else self.rng.choice(ids)
        rest = [i for i in ids if i != bridge]
        self.rng.shuffle(rest)
        a, b = rest[: len(rest) // 2], rest[len(rest) // 2 :]
        self._blocked = {(x, y) for x in a for y in b} | {(y, x) for x in a for y in b}
        self.stats.partitions += 1

    def _one_way(self) -> None:
        x, y = self.rng.sample(list(self.nodes), 2)
        self._blocked.add((x, y))
        self.stats.partitions += 1

    def _heal(self) -> None:
        self._blocked = set()

    def _toggle_slow_disk(self) -> None:
        node = self.rng.choice(list(self.nodes.values()))
        node.slow_disk = not node.slow_disk

    def _resign_leader(self) -> None:
        for node in self.nodes.values():
            if node.core is not None and node.core.is_leader:
                self._call(node, lambda c: c.resign(self.now))
