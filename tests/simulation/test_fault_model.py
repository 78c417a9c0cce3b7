"""The simulator's fault model piece by piece, and the invariants added with it, each shown able to fail.

Crash points (:mod:`quorum.sim.faults`): the simulated stores raise :class:`CrashPoint` inside a write, an append or
a truncation, leaving a legal on-disk state; the harness kills the node there, lets out some of what it had queued,
and its supervisor restarts it. A crash keeps the flushed log and perhaps some unflushed batches after it. Requests
to a down node wait for it until the request timeout. Each seed runs one of three fault mixes, by seed mod 3.
"""

from __future__ import annotations

import random

import pytest
from simkit import calm, commit, core, wait_all_hw, wait_for_leader

from quorum.errors import Errors
from quorum.log.batch import build_batch
from quorum.log.quorum_state import ElectionState
from quorum.raft.messages import BeginQuorumEpochRequest, Envelope, VoteResponse
from quorum.raft.roles import Voted
from quorum.sim.faults import CrashPoint, CrashPoints, Faults
from quorum.sim.harness import CLUSTER_ID, InvariantViolation, Simulation
from quorum.sim.storage import SimLog, SimStore


def points(rates: dict[str, float], seed: int = 0, node_id: int = 1) -> CrashPoints:
    return CrashPoints(node_id, random.Random(seed), lambda: Faults(crash_points=rates))


def batch(offset: int, epoch: int, value: bytes = b"v") -> bytes:
    return build_batch([(None, value)], base_offset=offset, epoch=epoch)


# -- storage ------------------------------------------------------------------------------------------------------


def test_crash_point_is_not_an_exception() -> None:
    """The core's ``except Exception`` (or a narrower one) must never swallow a crash point."""
    assert issubclass(CrashPoint, BaseException) and not issubclass(CrashPoint, Exception)


def test_a_store_write_dies_before_or_after_the_write_never_half_way() -> None:
    outcomes = set()
    for seed in range(20):
        store = SimStore(points({"vote": 1.0}, seed))
        old = ElectionState(leader_epoch=3, voters=(1, 2, 3))
        store.state = old
        new = ElectionState(leader_epoch=3, voted_id=2, voters=(1, 2, 3))
        with pytest.raises(CrashPoint):
            store.write(new)
        assert store.read() in (old, new)
        outcomes.add(store.read() == new)
    assert outcomes == {True, False}, "both outcomes of a crash at a write must happen"
    # Only the kinds with a chance die: a leader's write here is safe.
    store = SimStore(points({"vote": 1.0}))
    store.write(ElectionState(leader_epoch=4, leader_id=2, voted_id=2, voters=(1, 2, 3)))
    assert store.read() is not None and store.read().leader_id == 2  # type: ignore[union-attr]


def test_store_writes_are_told_apart_by_what_they_record() -> None:
    cases = [
        (ElectionState(leader_epoch=1, voters=(1, 2)), "epoch"),
        (ElectionState(leader_epoch=1, voted_id=1, voters=(1, 2)), "candidacy"),  # node 1 votes for itself
        (ElectionState(leader_epoch=1, voted_id=2, voters=(1, 2)), "vote"),
        (ElectionState(leader_epoch=1, leader_id=2, voted_id=2, voters=(1, 2)), "leader"),
    ]
    for state, kind in cases:
        assert points({kind: 1.0}).hit_write(state), kind
        others = {k: 1.0 for _, k in cases if k != kind}
        assert not points(others).hit_write(state), kind


def test_an_append_dies_after_appending_and_a_truncation_stops_anywhere() -> None:
    log = SimLog(crash_points=points({"append": 1.0}))
    with pytest.raises(CrashPoint):
        log.append(batch(0, 1))
    assert log.end_offset == 1 and not log.batches[0].durable  # appended, not flushed
    cuts = set()
    for seed in range(30):
        log = SimLog()
        for i in range(4):
            log.append(batch(i, 1))
        log.crash_points = points({"truncate": 1.0}, seed)
        with pytest.raises(CrashPoint):
            log.truncate_to(1)
        cuts.add(log.end_offset)
        assert log.epochs.end_offset_for(1, log.end_offset) == (1, log.end_offset)  # epoch cache follows the cut
    assert cuts == {1, 2, 3, 4}, "nothing done, done in part, all done"


def test_a_crash_keeps_the_flushed_prefix_and_perhaps_some_unflushed_batches() -> None:
    for survivors, end in [(0, 2), (1, 3), (2, 4), (9, 4)]:
        log = SimLog()
        for i in range(4):
            log.append(batch(i, 1))
        log.complete_flush(log.batches[:2])
        assert log.unflushed == 2
        log.crash(survivors)
        assert log.end_offset == end
        assert log.durable_end == end and log.unflushed == 0  # what survived is on disk now


# -- the harness --------------------------------------------------------------------------------------------------


def test_seeds_take_turns_over_the_three_fault_mixes() -> None:
    kinds = [Simulation(seed, 3).faults.kind for seed in range(6)]
    assert kinds == ["classic", "elections", "replication"] * 2
    assert Simulation(2, 3).config.fetch_max_bytes == 128  # a mix's tuning reaches the cores' config
    assert Faults.none().crash_points == {}


def test_a_voter_dying_at_its_vote_is_restarted_and_never_double_votes() -> None:
    """With the rule intact (vote durable before the answer), voters dying at every vote write cost elections
    time, never safety: no grant leaves before the vote is stored, so no voter grants two candidates."""
    sim = calm(3, 3)
    sim.faults.crash_points = {"vote": 1.0}
    sim.faults.quick_restart = 1.0
    sim.faults.release = 1.0
    sim.run_for(2000)  # every vote for another node dies there (a vote written before it died stands)
    assert sim.stats.crash_points >= 3
    sim.faults.crash_points = {}
    sim.run_for(60)
    assert all(n.up for n in sim.nodes.values())  # the supervisor brought each one back
    leader = wait_for_leader(sim, 3000)
    commit(sim, leader, b"after the crashes")


def test_requests_to_a_down_node_wait_for_its_restart_until_they_time_out() -> None:
    sim = calm(1, 3)
    leader = wait_for_leader(sim, 1000)
    other = next(i for i in sim.nodes if i != leader)
    delivered: list[Envelope] = []
    deliver = sim._deliver

    def spy(env: Envelope, target: object) -> None:
        if env.destination == other:
            delivered.append(env)
        deliver(env, target)  # type: ignore[arg-type]

    sim._deliver = spy  # type: ignore[method-assign]
    request = BeginQuorumEpochRequest(CLUSTER_ID, leader, core(sim, leader).epoch, 777)
    sim.crash(other)
    sim._send(Envelope(leader, other, request))
    sim.run_for(10)
    assert not any(e.message is request for e in delivered)  # held while it is down
    sim.restart(other)
    sim.run_for(10)
    assert any(e.message is request for e in delivered)  # delivered to the new incarnation
    # Held longer than the request timeout: dropped, as the transport drops it.
    delivered.clear()
    sim.crash(other)
    sim._send(Envelope(leader, other, request))
    sim.run_for(sim.config.request_timeout_ms + 1)
    sim.restart(other)
    sim.run_for(10)
    assert not any(e.message is request for e in delivered)


# -- the invariants added with the fault model --------------------------------------------------------------------


def test_acting_on_a_vote_it_did_not_store_is_a_violation() -> None:
    sim = calm(1, 3)
    leader = wait_for_leader(sim, 1000)
    follower, third = (i for i in sim.nodes if i != leader)
    c = core(sim, follower)
    sim.check_invariants()
    c.role = Voted(c.epoch, third, sim.now + 1000)  # a vote it never wrote to its quorum-state
    with pytest.raises(InvariantViolation, match=f"node {follower} acts on a vote for {third} in epoch {c.epoch}"):
        sim.check_invariants()


def test_a_voter_granting_two_candidates_in_one_epoch_is_a_violation() -> None:
    sim = calm(1, 3)

    def grant(to: int, epoch: int, pre_vote: bool = False, granted: bool = True) -> None:
        sim._send(Envelope(1, to, VoteResponse(Errors.NONE, epoch, -1, granted, pre_vote, 1)))

    grant(2, 5)
    grant(2, 5)  # the same vote again (a duplicated request): fine
    grant(3, 5, pre_vote=True)  # a pre-vote binds nothing
    grant(3, 5, granted=False)
    grant(3, 6)  # the next epoch
    with pytest.raises(InvariantViolation, match="node 1 granted its vote in epoch 5 to both 2 and 3"):
        grant(3, 5)


def test_a_node_that_lacks_committed_entries_and_could_win_a_vote_is_a_violation() -> None:
    """Raft's Figure 8: committed entries are safe only if every node lacking them is less up to date than a
    majority. Two down nodes are edited into that state: one lost the committed tail and holds a later epoch."""
    sim = calm(1, 3)
    leader = wait_for_leader(sim, 1000)
    end = commit(sim, leader, b"committed") + 1
    wait_all_hw(sim, end)
    a, b = (i for i in sim.nodes if i != leader)
    sim.crash(a)
    sim.crash(b)
    sim.check_invariants()  # b holds the committed entries: fine
    log = sim.nodes[a].log
    log.truncate_to(end - 1)
    log.append(batch(end - 1, core(sim, leader).epoch + 1, b"never committed"))
    # a's log (later last epoch) is as up to date as b's: a and b elect a, which overwrites the committed entry.
    with pytest.raises(InvariantViolation, match=f"node {a} lacks committed entries below offset {end}"):
        sim.check_invariants()
