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
from quorum.log.snapshots import CorruptSnapshotError, SnapshotId
from quorum.raft.messages import BeginQuorumEpochRequest, Envelope, FetchRequest, VoteResponse
from quorum.raft.roles import Voted
from quorum.sim.faults import CrashPoint, CrashPoints, Faults
from quorum.sim.harness import CLUSTER_ID, InvariantViolation, Simulation
from quorum.sim.storage import SimLog, SimSnapshotInstall, SimStore


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


def test_the_answer_to_a_previous_incarnations_request_never_reaches_the_next_one() -> None:
    """Regression (harness): a request delayed past its sender's crash and restart was answered to the new
    incarnation, whose correlation ids start over: it took a stale DivergingEpoch for the answer to its own fetch and
    truncated what the leader had counted (seed 5902, 3 voters, 5,000 steps: "durable on only 1 nodes"). The answer
    would go back on the dead process's connection; each incarnation now numbers its requests apart."""
    sim = calm(1, 3)
    leader = wait_for_leader(sim, 1000)
    follower = next(i for i in sim.nodes if i != leader)
    held: list[Envelope] = []
    stale: list[object] = []  # the leader's answers to the held request
    send, deliver = sim._send, sim._deliver

    def hold(env: Envelope) -> None:
        m = env.message
        if env.source == follower and isinstance(m, FetchRequest) and not held:
            held.append(env)  # delayed in the network past the crash
            return
        if held and env.destination == follower and m.correlation_id == held[0].message.correlation_id:
            stale.append(m)
        send(env)

    def spy(env: Envelope, target: object) -> None:
        assert not any(env.message is m for m in stale), f"delivered to the next incarnation: {env.message}"
        deliver(env, target)  # type: ignore[arg-type]

    sim._send, sim._deliver = hold, spy  # type: ignore[method-assign]
    assert sim.run_until(lambda: bool(held), 500)
    sim.crash(follower)
    sim.restart(follower)
    sim.run_for(50)  # the new incarnation fetches on
    send(held[0])  # the old request arrives at last; the leader answers it (at once, or when it parked it)
    commit(sim, leader, b"still fine")
    sim.run_for(100)
    assert stale  # answered, and never delivered


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


# -- snapshots ----------------------------------------------------------------------------------------------------

EPOCHS = [1, 1, 2, 2, 3, 3]  # one batch per offset


def filled(epochs: list[int] = EPOCHS, value: bytes = b"v", **kw: object) -> SimLog:
    log = SimLog(**kw)  # type: ignore[arg-type]
    for i, e in enumerate(epochs):
        log.append(batch(i, e, value + str(i).encode()))
    return log


def installing(log: SimLog, sid: SnapshotId, data: bytes) -> SimSnapshotInstall:
    install = log.begin_snapshot(sid)
    install.write(0, data[:10])  # in chunks, as FetchSnapshot brings it
    install.write(10, data[10:])
    return install


def test_a_snapshot_holds_the_log_prefix_and_cleaning_keeps_what_the_node_holds() -> None:
    log = filled()
    chains = {b.last_offset + 1: b.chain for b in log.batches}
    whole = log.data()
    sid = log.take_snapshot(4)
    assert sid == SnapshotId(4, 2)  # the epoch of its last batch
    assert log.snapshots[sid] == b"".join(b.data for b in log.batches[:4])
    assert log.take_snapshot(3) is None and log.take_snapshot(4) is None  # not beyond the latest
    log.clean()
    assert (log.start_offset, log.end_offset, len(log.batches)) == (4, 6, 2)
    # What the node holds is unchanged: the prefix lives in the snapshot (chains, bytes, epochs).
    assert log.data() == whole
    assert all(log.chain_at(end) == chain for end, chain in chains.items()) and log.chain_at(0) == b""
    assert list(log.chains_between(1, 5)) == [(e, chains[e]) for e in range(2, 6)]
    assert log.data_from(1) == whole[len(batch(0, 1, b"v0")) :]  # from the batch holding offset 1
    assert log.end_offset_for_epoch(2) == (2, 4)  # the snapshot at the log start answers for its epoch
    assert log.end_offset_for_epoch(1) == (-1, -1)
    with pytest.raises(ValueError, match="below the log start"):
        log.read(3, 100)
    with pytest.raises(ValueError, match="below the log start"):
        log.truncate_to(3)
    assert log.durable_end == 4  # nothing flushed, but the snapshot is durable
    # A second snapshot takes the first's bytes below the log start; cleaning then forgets the first.
    second = log.take_snapshot(5)
    assert second == SnapshotId(5, 3) and log.snapshots[second] == whole[: -len(log.batches[-1].data)]
    log.clean()
    assert log.snapshots.keys() == {second} and log.start_offset == 5
    # Truncated to its start, the log is empty but its last epoch is still the snapshot's (Kafka's
    # lastFetchedEpoch): reporting 0 would make it look less up to date than it is in a vote.
    log.truncate_to(5)
    assert (log.end_offset, log.last_epoch, log.epochs.entries) == (5, 3, [])
    log.append(batch(5, 3, b"v5"))
    assert log.chain_at(6) == chains[6]  # the chain goes on from the snapshot's


def test_an_install_empties_the_log_to_start_at_the_snapshot() -> None:
    leader = filled()
    sid = leader.take_snapshot(6)
    assert sid is not None
    data = leader.snapshots[sid]
    follower = filled([1, 1], b"other")  # a divergent log
    install = installing(follower, sid, data)
    with pytest.raises(ValueError, match="expected"):
        install.write(3, b"x")  # chunks arrive in order
    assert follower.install_snapshot(install) == 6
    assert (follower.start_offset, follower.end_offset, follower.batches) == (6, 6, [])
    assert follower.snapshots == {sid: data} and follower.last_epoch == 3 and follower.durable_end == 6
    assert follower.chain_at(6) == leader.chain_at(6) and follower.data() == leader.data()
    follower.append(batch(6, 4))
    leader.append(batch(6, 4))
    assert follower.chain_at(7) == leader.chain_at(7)
    with pytest.raises(ValueError, match="already installed"):
        follower.install_snapshot(install)


@pytest.mark.parametrize("damage", ["crc", "short", "epoch", "gap"])
def test_a_damaged_snapshot_is_refused_and_leaves_no_trace(damage: str) -> None:
    leader = filled()
    sid = leader.take_snapshot(6)
    assert sid is not None
    data = leader.snapshots[sid]
    sizes = [len(b.data) for b in leader.batches]
    if damage == "crc":
        data = data[:-1] + bytes([data[-1] ^ 1])
    elif damage == "short":
        data = data[: -sizes[-1]]
    elif damage == "epoch":
        sid = SnapshotId(6, 4)
    else:
        data = data[: sizes[0]] + data[sum(sizes[:2]) :]
    follower = filled([1, 1], b"other")
    before = (follower.data(), follower.start_offset, dict(follower.snapshots))
    with pytest.raises(CorruptSnapshotError):
        follower.install_snapshot(installing(follower, sid, data))
    assert (follower.data(), follower.start_offset, dict(follower.snapshots)) == before


def test_an_install_dies_before_the_snapshot_is_durable_or_after_it_with_the_log_cut_anywhere() -> None:
    leader = filled()
    sid = leader.take_snapshot(6)
    assert sid is not None
    outcomes = set()
    for seed in range(40):
        follower = filled([1, 1, 1, 1], b"old", crash_points=points({"install": 1.0}, seed))
        follower.complete_flush(follower.batches)
        with pytest.raises(CrashPoint):
            follower.install_snapshot(installing(follower, sid, leader.snapshots[sid]))
        follower.crash()
        durable = sid in follower.snapshots
        outcomes.add((durable, follower.end_offset))
        assert follower.reopened().end_offset == (6 if durable else 4)
        follower.open()  # the restart finishes the install
        if durable:
            assert (follower.start_offset, follower.end_offset, follower.last_epoch) == (6, 6, 3)
        else:
            assert (follower.end_offset, follower.snapshots) == (4, {})
    assert outcomes == {(False, 4)} | {(True, end) for end in range(5)}, outcomes


def test_the_restart_empties_a_longer_log_of_an_older_epoch_than_the_snapshot() -> None:
    """The leader sends a snapshot when the follower's last epoch is older than every epoch its log holds; such a
    follower's log may end beyond the snapshot, diverging below its end. A crash after the snapshot is durable and
    before the log is emptied must not leave that log in place (Kafka's truncateToLatestSnapshot)."""
    leader = filled()
    sid = leader.take_snapshot(4)
    assert sid is not None
    follower = filled([1] * 8, b"stale")  # epoch 1 up to offset 8: offsets 2-3 differ from the snapshot's
    follower.snapshots[sid] = leader.snapshots[sid]  # durable, log not emptied yet
    follower.open()
    assert (follower.start_offset, follower.end_offset, follower.last_epoch) == (4, 4, 2)
    assert follower.chain_at(4) == leader.chain_at(4)


def test_a_node_whose_log_or_high_watermark_is_below_its_snapshot_is_a_violation() -> None:
    sim = calm(1, 3)
    leader = wait_for_leader(sim, 1000)
    commit(sim, leader, b"committed")
    wait_all_hw(sim, max(sim.acked) + 1)
    follower = next(i for i in sim.nodes if i != leader)
    log = sim.nodes[follower].log
    sim.check_invariants()
    epoch = core(sim, follower).epoch
    log.snapshots[SnapshotId(log.end_offset + 5, epoch)] = b""  # as if installed without emptying the log
    with pytest.raises(InvariantViolation, match=f"node {follower}'s log ends at {log.end_offset}, before its latest"):
        sim.check_invariants()
    log.snapshots.clear()
    c = core(sim, leader)
    c.append(c.epoch, [b"not committed yet"], sim.now)
    llog = sim.nodes[leader].log
    assert llog.end_offset > c.high_watermark
    llog.snapshots[SnapshotId(llog.end_offset, c.epoch)] = b""
    with pytest.raises(InvariantViolation, match=f"node {leader}'s high watermark {c.high_watermark} is below"):
        sim.check_invariants()
