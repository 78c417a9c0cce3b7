"""The CI soak: the real consensus core under random faults, seed after seed.

Each seed runs 2,000 simulator steps of random faults — message loss, duplication, long delays (reordering),
symmetric and one-way partitions, crashes that lose unflushed writes, restarts, slow disks, leader resignations —
with every invariant of :class:`quorum.sim.harness.Simulation` checked after every step, then heals the cluster and
requires a leader that commits a fresh append on every node (``heal_and_converge``).

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

    def add(self, sim: Simulation) -> None:
        self.seeds += 1
        self.acked += sim.stats.acked
        self.crashes += sim.stats.crashes
        self.partitions += sim.stats.partitions
        for node in sim.nodes.values():
            assert node.core is not None  # heal_and_converge restarts every node
            self.truncations += node.core.metrics.truncations
            self.max_epoch = max(self.max_epoch, node.core.epoch)


def run_seed(seed: int, voters: int) -> Simulation:
    sim = guard_progress(guard_fetch_offsets(Simulation(seed, voters)))
    sim.run(STEPS)
    sim.heal_and_converge()
    return sim


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
        tally.add(sim)
    if failures:
        header = (
            f"{len(failures)} of {len(seeds)} seeds failed ({voters} voters, {STEPS} steps); this chunk alone: "
            f"pytest tests/simulation/test_random_faults.py -k '{voters}voters-seeds{seeds[0]}-{seeds[-1]}'"
        )
        pytest.fail(header + "\n\n" + "\n\n".join(failures), pytrace=False)
    # The chunk really was a fault soak: crashes, partitions, elections beyond the first, divergent logs repaired.
    # (Thresholds are a fraction of what the CI chunks see: ~10 crashes, ~30 partitions, ~180 acknowledged appends
    # per seed, 50-100 truncations and epochs past 10 per chunk.)
    if tally.seeds >= 20:
        assert tally.crashes >= 4 * tally.seeds, tally
        assert tally.partitions >= 10 * tally.seeds, tally
        assert tally.acked >= 50 * tally.seeds, tally
        assert tally.truncations >= tally.seeds // 5, tally
        assert tally.max_epoch >= 8, tally
