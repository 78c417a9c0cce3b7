"""A silent leader (a paused process, a cut link: no connection reset) is noticed by its followers' overdue fetches
(``fetch_silence_ms``), and candidacy ranking keeps the survivors of a lost leader from splitting their votes.

The claims, each checked here in the simulator:
- a healthy leader is never deposed while messages take under a quarter of the grace each way and some are lost or
  duplicated (and each of two planted rule breakers, acting at once on an overdue fetch, is caught);
- a leader cut off from every voter is replaced well before the fetch timeout;
- after a crash or a silence, exactly one election: no split votes, over many trials.
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from simkit import calm, commit, core, describe, wait_for_leader

from quorum.raft.messages import Envelope, FetchRequest, VoteRequest
from quorum.raft.roles import Follower
from quorum.raft.silence import BUG_SILENCE_WITHOUT_GRACE, BUG_SILENCE_WITHOUT_PRE_VOTE, LATE_TICK_SLACK_MS
from quorum.sim.harness import SIM_CONFIG, Faults, Simulation

CFG = SIM_CONFIG
FIRST_LEADER_MS = 2 * CFG.election_timeout_ms + 200
GRACE_MS = CFG.fetch_silence_ms - CFG.fetch_max_wait_ms
# The documented bound: a fetch and its answer, or a probe and its answer, each within half the grace.
MAX_DELAY_MS = GRACE_MS // 4 - 1
HEALTHY_RUN_MS = 8_000


def healthy_faults() -> Faults:
    """No crash, partition or resignation: only a jittery, lossy network within the bound, and steady appends."""
    return dataclasses.replace(
        Faults.none(), kind="healthy", drop=0.02, duplicate=0.02, max_delay_ms=MAX_DELAY_MS, append_interval_ms=20
    )


def count_sent(sim: Simulation) -> dict[str, int]:
    """Count the probes (fetches that must be answered at once) and pre-votes the nodes send."""
    counts = {"probes": 0, "pre_votes": 0}
    send = sim._send

    def counting(env: Envelope) -> None:
        m = env.message
        if isinstance(m, FetchRequest) and m.max_wait_ms == 0 and m.replica_id in sim.nodes:
            counts["probes"] += 1
        elif isinstance(m, VoteRequest) and m.pre_vote:
            counts["pre_votes"] += 1
        send(env)

    sim._send = counting  # type: ignore[method-assign]
    return counts


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", range(3))
def test_a_healthy_leader_is_never_deposed(seed: int, voters: int) -> None:
    sim = Simulation(seed, voters, faults=healthy_faults())
    counts = count_sent(sim)
    leader = wait_for_leader(sim, FIRST_LEADER_MS)
    epoch = core(sim, leader).epoch
    sim.run_for(HEALTHY_RUN_MS)
    assert all(core(sim, i).epoch == epoch for i in sim.nodes), "; ".join(describe(sim, i) for i in sim.nodes)
    assert core(sim, leader).is_leader
    # Lost answers made followers probe: the mechanism ran, and a probe's answer was always enough.
    assert counts["probes"] > 0, counts


@pytest.mark.parametrize("bug", [BUG_SILENCE_WITHOUT_PRE_VOTE, BUG_SILENCE_WITHOUT_GRACE])
def test_acting_at_once_on_an_overdue_fetch_is_caught(bug: str) -> None:
    # The check above, with a rule broken: a follower that starts an election as soon as one fetch is overdue
    # (no probe, no pre-vote), or that suspects its leader at the max wait itself (no grace for the network).
    deposed = []
    for seed in range(3):
        sim = Simulation(seed, 3, faults=healthy_faults(), bugs=frozenset({bug}))
        leader = wait_for_leader(sim, FIRST_LEADER_MS)
        epoch = core(sim, leader).epoch
        sim.run_for(HEALTHY_RUN_MS)
        deposed.append(max(core(sim, i).epoch for i in sim.nodes) > epoch)
    assert all(deposed), (
        f"the broken rule {bug!r} went unnoticed in seeds {[s for s, d in enumerate(deposed) if not d]}"
    )


def lose_leader(seed: int, voters: int, how: str) -> tuple[int, int]:
    """Elect, commit, then at a random moment crash the leader or cut it off (silent); return the time until the
    survivors have a settled leader, and the elections they started to get it."""
    sim = calm(seed, voters)
    leader = wait_for_leader(sim, FIRST_LEADER_MS)
    commit(sim, leader, b"before")
    sim.run_for(random.Random(seed).randrange(2 * CFG.fetch_max_wait_ms))  # any phase of the followers' fetches
    survivors = [i for i in sim.nodes if i != leader]
    elections = sum(core(sim, i).metrics.elections for i in survivors)
    started = sim.now
    if how == "crash":
        sim.crash(leader)
    else:
        sim.partition([leader], survivors)
    successor = wait_for_leader(sim, CFG.fetch_timeout_ms + 4 * CFG.election_timeout_ms, among=survivors)
    assert successor != leader
    return sim.now - started, sum(core(sim, i).metrics.elections for i in survivors) - elections


TRIALS = 40


@pytest.mark.parametrize("voters", [3, 5])
def test_a_silent_leader_is_replaced_before_the_fetch_timeout(voters: int) -> None:
    results = [lose_leader(seed, voters, "silent") for seed in range(TRIALS)]
    times = sorted(t for t, _ in results)
    # Noticed within the silence mark of the last fetch sent (at most a max wait before the cut), then a
    # pre-vote, a vote and the new leader's first commit: a few round trips of at most 5 ms each.
    assert times[-1] <= CFG.fetch_max_wait_ms + CFG.fetch_silence_ms + 60 < CFG.fetch_timeout_ms + 60, times
    splits = [e for _, e in results if e != 1]
    # Three voters: never. Five: four followers each notice at their own moment, and pre-votes can still cross
    # (1 in 150 seeds when this was written); the split is then settled within the time bound above.
    allowed = 0 if voters == 3 else TRIALS // 20
    assert len(splits) <= allowed, f"{len(splits)} of {TRIALS} trials needed more than one election: {results}"


@pytest.mark.parametrize("voters", [3, 5])
def test_the_survivors_of_a_crash_elect_once(voters: int) -> None:
    results = [lose_leader(seed, voters, "crash") for seed in range(TRIALS)]
    times = sorted(t for t, _ in results)
    # The connections reset: every survivor noticed in the same millisecond, and ranking let one stand.
    assert times[-1] <= 60, times
    splits = [e for _, e in results if e != 1]
    assert not splits, f"{len(splits)} of {TRIALS} trials needed more than one election: {results}"


def test_a_late_timer_is_not_taken_for_silence() -> None:
    sim = calm(3, 3)
    leader = wait_for_leader(sim, FIRST_LEADER_MS)
    commit(sim, leader, b"x")
    sim.run_for(CFG.fetch_max_wait_ms // 2)
    follower = next(i for i in sim.nodes if i != leader)
    c = core(sim, follower)
    f = c.role
    assert isinstance(f, Follower) and f.fetch_correlation is not None and not f.probing
    overdue, asked = f.overdue_at, f.fetch_correlation
    # The node's loop was stalled past the deadline: the answer may be waiting in its input. No probe yet.
    late = LATE_TICK_SLACK_MS + 10
    c.tick(overdue + late)
    assert f.fetch_correlation == asked and not f.probing and f.overdue_at == overdue + late + LATE_TICK_SLACK_MS
    assert f.overdue_at + GRACE_MS // 2 < f.fetch_deadline  # (what follows is the silence rule, not the timeout)
    # On time, it looks once more after reading its input (a millisecond later), then probes the overdue fetch;
    # the probe overdue on time too, the leader is lost.
    c.tick(f.overdue_at)
    assert f.fetch_correlation == asked and not f.probing
    c.tick(f.overdue_at)
    assert f.probing and f.fetch_correlation != asked and c.take_messages()
    c.tick(f.overdue_at)
    assert isinstance(c.role, Follower)
    c.tick(f.overdue_at)
    assert not isinstance(c.role, Follower) and c.role.name == "Prospective"


def stall_leader(sim: Simulation, leader: int, start: int, length: int) -> None:
    """From ``start`` for ``length`` ms the leader's process is stalled (a long request, a collection): whatever it
    sends, and whatever reaches it, waits for the end of the stall."""
    transmit = sim._transmit

    def held(env: Envelope, target: object) -> None:
        if start <= sim.now < start + length and leader in (env.source, env.destination):
            sim._schedule(start + length - sim.now, lambda: transmit(env, target))  # type: ignore[arg-type]
        else:
            transmit(env, target)  # type: ignore[arg-type]

    sim._transmit = held  # type: ignore[method-assign]


def run_stalls(seed: int, stalls: list[int]) -> tuple[int, int]:
    """Stall the leader once a second for each length in turn, from the moment a follower's fetch is due (so that
    its answer comes about that late); the epoch before and after."""
    sim = calm(seed, 3)
    leader = wait_for_leader(sim, FIRST_LEADER_MS)
    epoch = core(sim, leader).epoch
    for length in stalls:
        sim.run_for(500)
        due = min(r.due_ms for i in sim.nodes if isinstance(r := core(sim, i).role, Follower))
        sim.run_for(max(0, due - sim.now))
        stall_leader(sim, leader, sim.now, length)
        sim.run_for(500)
    return epoch, max(core(sim, i).epoch for i in sim.nodes)


@pytest.mark.parametrize("seed", range(4))
def test_a_leader_seen_stalling_is_given_longer(seed: int) -> None:
    # A first stall just short of the grace makes a follower probe, then answers: that follower now gives the
    # leader twice the time it took, and refuses the other's pre-vote meanwhile. A stall more than twice as
    # long is then waited out; out of the blue it deposes the leader.
    teach, long = GRACE_MS - 15, 2 * GRACE_MS + 20
    assert CFG.fetch_max_wait_ms + long < CFG.fetch_timeout_ms
    before, after = run_stalls(seed, [teach, long])
    assert after == before, f"the leader was deposed during stalls of {teach} then {long} ms"
    before, after = run_stalls(seed, [long])
    assert after > before, f"a {long} ms stall out of the blue went unnoticed: the test shows nothing"
