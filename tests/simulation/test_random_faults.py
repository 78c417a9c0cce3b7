"""The CI soak: the real consensus core under random faults, seed after seed.

Each seed runs 2,000 simulator steps of random faults — message loss, duplication, delays (reordering), symmetric,
one-way and bridge partitions, crashes that lose unflushed writes (or keep some of them), restarts, slow disks,
leader resignations, and crash points: a node dying inside a storage operation of a handler (election state written
or not, a batch appended but not flushed, a truncation or a snapshot install done in part) with some of its queued
messages already sent, then restarted at once by its supervisor. Nodes snapshot their committed prefix and clean
their logs up to it at random moments (then on through the heal), so restarted and cut-off nodes mostly catch up
by fetching a snapshot (FetchSnapshot): every chunk of seeds must install snapshots, most of its seeds at least
one. Seeds take turns over three fault mixes (``quorum.sim.faults.Faults``, seed mod 3): classic (the steady mix: a
loaded cluster, every fault now and then), elections (short timeouts, a jittery network, voters dying as they vote)
and replication (small fetches, nodes dying as they append, frequent resignations). Every invariant of
:class:`quorum.sim.harness.Simulation` is checked after every step; then the cluster heals and a leader must commit
a fresh append on every node (``heal_and_converge``).

CI runs 500 seeds with 3 voters and 100 seeds with 5 voters. For a long soak set ``PYKRAFT_SIM_SEEDS`` (the number
of 3-voter seeds; 5-voter seeds scale to a fifth of it, never fewer than the CI number), e.g.::

    PYKRAFT_SIM_SEEDS=20000 .venv/bin/python -m pytest tests/simulation/test_random_faults.py

On top of the harness's invariants, every Fetch must name an offset the fetcher holds durably
(:func:`simkit.guard_fetch_offsets`) and virtual time must keep moving (:func:`simkit.guard_progress`: a livelock
would otherwise hang ``heal_and_converge``). A failure lists every failing seed of its chunk with the harness's message,
which names the seed, step and time and the command that replays it (``python -m quorum.sim --seed N --voters V``;
a failure of the fetch-offset check alone replays under pytest, with ``PYKRAFT_SIM_SEEDS`` covering the seed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest
from simkit import guard_fetch_offsets, guard_progress

from quorum.sim.faults import Faults
from quorum.sim.harness import InvariantViolation, Simulation

STEPS = 2000
CI_SEEDS_3 = 500
CI_SEEDS_5 = 100
CHUNK = 50  # seeds per test: failures are reported per chunk, and a chunk runs in a few seconds


def _seed_counts() -> tuple[int, int]:
    raw = os.environ.get("PYKRAFT_SIM_SEEDS", "").strip()
    if not raw:
        return CI_SEEDS_3, CI_SEEDS_5
    try:
        n = int(raw)
    except ValueError:
        raise pytest.UsageError(f"PYKRAFT_SIM_SEEDS must be an integer, got {raw!r}") from None
    if n <= 0:
        raise pytest.UsageError(f"PYKRAFT_SIM_SEEDS must be positive, got {n}")
    return max(n, CI_SEEDS_3), max(n // 5, CI_SEEDS_5)


SEEDS_3, SEEDS_5 = _seed_counts()


def _chunks(voters: int, total: int) -> list:
    params = []
    for first in range(0, total, CHUNK):
        seeds = range(first, min(first + CHUNK, total))
        params.append(pytest.param(voters, seeds, id=f"{voters}voters-seeds{seeds[0]}-{seeds[-1]}"))
    return params


@dataclass
class Tally:
    """What a chunk of seeds exercised: proof that the faults really happened, not just that nothing broke."""

    seeds: int = 0
    acked: int = 0
    crashes: int = 0
    partitions: int = 0
    truncations: int = 0
    max_epoch: int = 0
    crash_points: int = 0
    classic_seeds: int = 0
    classic_acked: int = 0  # the classic mix keeps a loaded cluster committing; the other two churn leaders
    snapshots_taken: int = 0
    snapshots_installed: int = 0  # FetchSnapshot installs
    installing_seeds: int = 0  # seeds with at least one

    def add(self, sim: Simulation, kind: str) -> None:
        self.seeds += 1
        self.acked += sim.stats.acked
        self.crashes += sim.stats.crashes
        self.crash_points += sim.stats.crash_points
        self.partitions += sim.stats.partitions
        self.snapshots_taken += sim.stats.snapshots_taken
        self.snapshots_installed += sim.stats.snapshots_installed
        self.installing_seeds += sim.stats.snapshots_installed > 0
        if kind == "classic":
            self.classic_seeds += 1
            self.classic_acked += sim.stats.acked
        for node in sim.nodes.values():
            assert node.core is not None  # heal_and_converge restarts every node
            self.truncations += node.core.metrics.truncations
            self.max_epoch = max(self.max_epoch, node.core.epoch)


def run_seed(seed: int, voters: int) -> Simulation:
    sim = guard_progress(guard_fetch_offsets(Simulation(seed, voters)))
    sim.run(STEPS)
    sim.heal_and_converge()
    return sim


def kind_of(seed: int) -> str:
    return Faults.for_seed(seed).kind


@pytest.mark.parametrize(("voters", "seeds"), _chunks(3, SEEDS_3) + _chunks(5, SEEDS_5))
def test_random_faults(voters: int, seeds: range) -> None:
    failures: list[str] = []
    tally = Tally()
    for seed in seeds:
        try:
            sim = run_seed(seed, voters)
        except InvariantViolation as e:
            failures.append(str(e))
            continue
        except Exception as e:  # a crash of the core or the harness is a failure of this seed too
            failures.append(
                f"seed {seed}: {type(e).__name__}: {e}\n  replay: python -m quorum.sim --seed {seed} --voters {voters}"
            )
            continue
        assert sim.stats.steps >= STEPS, f"seed {seed} stopped after {sim.stats.steps} steps"
        # heal_and_converge acknowledged a fresh append: every seed ends with at least one.
        assert sim.stats.acked >= 1 and sim.acked, f"seed {seed}: nothing acknowledged"
        tally.add(sim, kind_of(seed))
    if failures:
        header = (
            f"{len(failures)} of {len(seeds)} seeds failed ({voters} voters, {STEPS} steps); this chunk alone: "
            f"pytest tests/simulation/test_random_faults.py -k '{voters}voters-seeds{seeds[0]}-{seeds[-1]}'"
        )
        pytest.fail(header + "\n\n" + "\n\n".join(failures), pytrace=False)
    # The chunk really was a fault soak: crashes (at crash points too), partitions, elections beyond the first,
    # divergent logs repaired, a loaded cluster committing, and lagging nodes catching up through snapshots.
    # (Thresholds are a fraction of what the CI chunks see: 30-45 crashes of which 17-21 at crash points, 20-33
    # partitions per seed; ~190 acknowledged appends per classic seed, 5 per seed of the two churning mixes; 40-80
    # truncations and epochs past 30 per chunk; 71-97 snapshot installs per chunk, in 34-42 of its 50 seeds.)
    if tally.seeds >= 20:
        assert tally.crashes >= 12 * tally.seeds, tally
        assert tally.crash_points >= 6 * tally.seeds, tally
        assert tally.partitions >= 10 * tally.seeds, tally
        assert tally.classic_acked >= 50 * tally.classic_seeds, tally
        assert tally.truncations >= tally.seeds // 2, tally
        assert tally.max_epoch >= 15, tally
        assert tally.snapshots_installed >= tally.seeds, tally
        assert tally.installing_seeds >= tally.seeds // 2, tally
