"""``python -m quorum.sim``: replay a seed, or soak many.

python -m quorum.sim --seed 1234 --voters 5           # replay one seed exactly
python -m quorum.sim --seeds 10000 --steps 5000        # a long soak
python -m quorum.sim --seeds 200 --bug persist-vote-as-none   # how many seeds catch a broken rule

A seed's fault mix is one of three kinds, by seed mod 3 (quorum.sim.faults.Faults.for_seed).
"""

from __future__ import annotations

import argparse
import sys
import time

from quorum.raft.core import KNOWN_BUGS
from quorum.sim.harness import InvariantViolation, quiet_logs, run_seed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m quorum.sim", description=__doc__)
    p.add_argument("--seed", type=int, help="run this one seed")
    p.add_argument("--seeds", type=int, default=100, help="run seeds first..first+N-1 (default 100)")
    p.add_argument("--first", type=int, default=0, help="first seed of a range")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--voters", type=int, default=3)
    p.add_argument("--bug", action="append", default=[], choices=sorted(KNOWN_BUGS), help="break a rule on purpose")
    args = p.parse_args(argv)
    quiet_logs()
    seeds = [args.seed] if args.seed is not None else range(args.first, args.first + args.seeds)
    started = time.perf_counter()
    failed: list[int] = []
    steps = acked = taken = installed = installing = 0
    for seed in seeds:
        try:
            stats = run_seed(seed, voters=args.voters, steps=args.steps, bugs=frozenset(args.bug))
        except InvariantViolation as e:
            failed.append(seed)
            print(f"FAIL {e}", file=sys.stderr)
            continue
        steps += stats.steps
        acked += stats.acked
        taken += stats.snapshots_taken
        installed += stats.snapshots_installed
        installing += stats.snapshots_installed > 0
    elapsed = time.perf_counter() - started
    first = f" (first: seed {failed[0]})" if failed else ""
    print(
        f"{len(seeds)} seeds x {args.steps} steps, {args.voters} voters: {len(failed)} failed{first}; "
        f"{steps} steps, {acked} acknowledged appends, {taken} snapshots taken, {installed} installed through "
        f"FetchSnapshot (in {installing} seeds), {elapsed:.1f} s"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
