"""The simulator's invariants, checked after every event (the checking half of
:class:`~quorum.sim.harness.Simulation`, a mixin).

One leader per epoch, one vote per voter per epoch, a node acts only on the epoch, vote and leader it stored, log
matching, leader completeness (for leaders, and for any node that could still win a vote), identical committed
prefixes, monotonic high watermarks, a majority-durable high watermark, acknowledged appends committed. With
snapshots: a committed prefix that a snapshot covers counts as held (a node holds what its log holds, and below its
log start what its latest snapshot holds), an up node's log never ends before its latest snapshot (what the real
log's open guarantees) and its high watermark is never below it (a snapshot holds only committed offsets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.log.quorum_state import ElectionState
from quorum.raft.messages import NO_LEADER
from quorum.raft.roles import Leader, Prospective

if TYPE_CHECKING:
    from quorum.raft.core import RaftCore
    from quorum.sim.harness import SimNode, Stats
    from quorum.sim.storage import SimBatch, SimLog


class InvariantViolation(AssertionError):
    pass


class Invariants:
    # Provided by the Simulation.
    seed: int
    now: int
    bugs: frozenset[str]
    nodes: dict[int, SimNode]
    stats: Stats
    acked: dict[int, bytes]
    _seen_batches: dict[tuple[int, int], bytes]
    _committed: dict[int, bytes]
    _committed_end: int
    _committed_in: dict[int, int]
    _leaders: dict[int, int]
    _votes: dict[tuple[int, int], int]
    _pending: list[tuple[int, int, int, bytes]]
    _installs_by_dead_cores: int

    def _violation(self, what: str) -> InvariantViolation:
        return InvariantViolation(
            f"seed {self.seed}, step {self.stats.steps}, t={self.now} ms: {what}\n"
            f"  replay: python -m quorum.sim --seed {self.seed} --voters {len(self.nodes)}"
            + (f" --bug {' --bug '.join(sorted(self.bugs))}" if self.bugs else "")
            + "\n  nodes: "
            + "; ".join(self._describe(n) for n in self.nodes.values())
        )

    def _describe(self, n: SimNode) -> str:
        snap = n.log.latest_snapshot()
        extra = f" start {n.log.start_offset} snapshot {snap}" if snap is not None else ""
        if n.core is None:
            return f"{n.node_id}: down (log end {n.log.end_offset}{extra})"
        c = n.core
        return f"{n.node_id}: {c.role.name} epoch {c.epoch} leo {n.log.end_offset} hw {c.high_watermark}{extra}"

    @staticmethod
    def _log_of(n: SimNode) -> SimLog:
        """The log a node counts with: a down node's as its restart will find it."""
        return n.log if n.core is not None else n.log.reopened()

    def _check_log_matching(self, batch: SimBatch) -> None:
        key = (batch.base_offset, batch.epoch)
        seen = self._seen_batches.setdefault(key, batch.chain)
        if seen != batch.chain:
            raise self._violation(
                f"log matching: two different logs hold a batch at offset {batch.base_offset} in epoch {batch.epoch}"
            )

    def check_invariants(self) -> None:
        installed = self._installs_by_dead_cores
        for node in self.nodes.values():
            core = node.core
            if core is None:
                continue
            installed += core.metrics.snapshots_installed
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
            if node.log.snapshots:
                latest = node.log.latest_snapshot()
                assert latest is not None
                if node.log.end_offset < latest.end_offset or hw < latest.end_offset:
                    self._snapshot_violation(node, core)
            if hw > node.checked_hw:
                self._check_committed(node, hw)
                node.checked_hw = hw
        self.stats.snapshots_installed = installed
        self._check_majority_durable()
        self._check_electable_hold_committed()
        self._settle_pending()

    def _snapshot_violation(self, node: SimNode, core: RaftCore) -> None:
        """An up node's log reaches its latest snapshot (an install empties the log to start at its end; the open
        finishes an interrupted one), and its high watermark does too (a snapshot holds only committed offsets):
        check_invariants found one of them broken."""
        snapshot = node.log.latest_snapshot()
        if node.log.end_offset < snapshot.end_offset:  # type: ignore[union-attr]
            raise self._violation(
                f"node {node.node_id}'s log ends at {node.log.end_offset}, before its latest snapshot {snapshot}"
            )
        raise self._violation(
            f"node {node.node_id}'s high watermark {core.high_watermark} is below its latest snapshot {snapshot}"
        )

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
        """Raft's Leader Completeness: whatever was committed in an earlier epoch is in this leader's log (or in
        the snapshot that covers the offsets below its log start). (A stale leader of an older epoch need not hold
        what later epochs committed.)"""
        assert node.core is not None
        epoch = node.core.epoch
        end = max((b for e, b in self._committed_in.items() if e < epoch), default=0)
        if end == 0:
            return
        if node.log.chain_at(end) != self._committed[end]:
            raise self._violation(
                f"leader completeness: leader {node.node_id} (epoch {epoch}) lacks committed entries below offset {end}"
            )

    def _check_committed(self, node: SimNode, hw: int) -> None:
        log = node.log
        chain = log.chain_at(hw)
        if chain is None:
            raise self._violation(f"node {node.node_id}'s high watermark {hw} is not a batch boundary of its log")
        if hw <= self._committed_end:
            expected = self._committed.get(hw)
            if expected is not None and expected != chain:
                raise self._violation(f"committed prefix below {hw} differs on node {node.node_id}")
            if expected is None:
                raise self._violation(f"node {node.node_id} committed up to {hw}, not a committed batch boundary")
            return
        # Extends what is committed: the known committed prefix must be a prefix of this node's log.
        if self._committed_end and log.chain_at(self._committed_end) != self._committed[self._committed_end]:
            raise self._violation(
                f"node {node.node_id} commits up to {hw} on a log that does not hold the committed prefix "
                f"below {self._committed_end}"
            )
        for end, chain in log.chains_between(self._committed_end, hw):
            self._committed[end] = chain
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
        it could be elected and overwrite them (Raft's Figure 8). Down nodes count with the log they restart on;
        a snapshot covering the committed prefix counts as holding it."""
        end = self._committed_end
        if end == 0:
            return
        chain = self._committed[end]
        logs = {n.node_id: self._log_of(n) for n in self.nodes.values()}
        lacking = [i for i, log in logs.items() if log.chain_at(end) != chain]
        if not lacking:
            return
        keys = {i: (log.last_epoch, log.end_offset) for i, log in logs.items()}
        for node_id in lacking:
            mine = keys[node_id]
            supporters = sorted(i for i, k in keys.items() if k <= mine)
            if len(supporters) >= len(self.nodes) // 2 + 1:
                raise self._violation(
                    f"node {node_id} lacks committed entries below offset {end} but its log (last epoch "
                    f"{mine[0]}, end {mine[1]}) is as up to date as those of {supporters}, a majority: it could be "
                    "elected and overwrite them"
                )

    def _check_majority_durable(self) -> None:
        for node in self.nodes.values():
            core = node.core
            if core is None or not isinstance(core.role, Leader) or core.role.high_watermark is None:
                continue
            hw = core.role.high_watermark
            durable = sum(1 for n in self.nodes.values() if self._log_of(n).durable_end >= hw)
            if durable < core.majority:
                raise self._violation(f"leader {node.node_id}'s high watermark {hw} is durable on only {durable} nodes")

    def _settle_pending(self) -> None:
        still = []
        for node_id, epoch, offset, value in self._pending:
            core = self.nodes[node_id].core
            if core is None or core.epoch != epoch or not core.is_leader:
                continue  # never acknowledged: the append's fate is undecided, which is allowed
            if core.high_watermark > offset:
                # (In the leader's log, or in its snapshot if it was taken and cleaned up since.)
                if value not in self.nodes[node_id].log.data_from(offset):
                    raise self._violation(f"acknowledged append at offset {offset} does not hold its value")
                self.acked[offset] = value
                self.stats.acked += 1
            else:
                still.append((node_id, epoch, offset, value))
        self._pending = still

    def _check_acked_present(self, node: SimNode) -> None:
        log = self._log_of(node)
        values = log.data()  # an acknowledged value may live in the snapshot's bytes
        missing = [o for o, v in self.acked.items() if v not in values]
        if missing:
            raise self._violation(f"acknowledged appends lost on node {node.node_id}: offsets {missing[:5]}")
        for offset in self.acked:
            if offset >= log.end_offset:
                raise self._violation(f"node {node.node_id} lacks acknowledged offset {offset}")
