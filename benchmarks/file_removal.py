"""File removal benchmark: what removing a large file does to other processes' fdatasync, unlink vs gradual.

    .venv/bin/python benchmarks/file_removal.py [--mib 247] [--trials 3] [--dir DIR] [--json]   (~15 s)

Why: on a filesystem that trims freed blocks as it frees them (ext4 mounted with ``discard``, as this machine's
root filesystem is), unlinking a big file trims all its blocks at once, and a virtual disk serves nothing else
meanwhile: every other process's fdatasync waits behind the trim. pykraft removes files of that size when retention
drops an old snapshot (~247 MiB at 2,000,000 partitions) or segment (quorum/log/deleter.py), while the Raft leader
and followers fdatasync their logs on the same disk. ``quorum.log.files.remove_gradually`` cuts the file from its
end ``REMOVE_CHUNK_BYTES`` (8 MiB) at a time, then unlinks what is left, so the trims come in small pieces between
which other I/O gets through.

What is measured, in a temp dir under ``--dir`` (default: the system temp dir; give the data dir's filesystem if it
is another one). Each trial:

1. Three processes start, each looping "append 200 bytes to its own file + ``os.fdatasync`` + sleep 5 ms" (standing
   in for a leader and two followers), recording the start and the duration of every fdatasync;
2. a ``--mib`` MiB file is written in 1 MiB writes, fdatasynced every 8 MiB and at the end (as a snapshot is);
3. 1 s later (the quiet window: the disk's normal figure) the file is removed, by ``os.unlink`` (the baseline) or
   by ``remove_gradually``; its wall time is the removal's;
4. 1 s later the loops stop.

``--trials`` trials per method, the methods alternating (unlink, gradual, gradual, unlink, ...) so that drift falls
on both. Printed per trial and per method: the removal's wall time; the loops' fdatasync max / p99 / count in the
window [removal start, removal end + 0.3 s] (a sync counts if it ran during any of it: one that started just before
the removal and waited through it counts); the same in the quiet window before (syncs wholly inside [write end +
0.3 s, removal start)) and after (syncs that started after the removal window, to the end: a trim deferred to a
later journal commit would show there). The headline is the ratio gradual / unlink of the loops' worst fdatasync
during the removal (median over trials of each trial's worst), beside the ratio of the removal times. Without
online discard (``fstrim`` later, or a device without trim) both methods should look alike: the filesystem and its
mount options are printed first. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _stats import median, percentile, ratio

from quorum.log.files import REMOVE_CHUNK_BYTES, remove_gradually

MIB = 1 << 20
APPEND_BYTES = 200
LOOP_SLEEP = 0.005
LOOPS = 3
WRITE_SYNC_BYTES = 8 * MIB  # the big file is fdatasynced every 8 MiB written, and at the end
QUIET_S = 1.0  # between the big file's last fdatasync and its removal
AFTER_S = 1.0  # between the removal's end and the loops' stop
SETTLE_S = 0.3  # a removal's window runs this long past its end; the quiet window starts this long after the write
METHODS: dict[str, Callable[[Path], object]] = {"unlink": os.unlink, "gradual": remove_gradually}

# time.monotonic is CLOCK_MONOTONIC on Linux: one clock for every process, so the loops' times and this process's
# removal window compare directly.
clock = time.monotonic


# -- the fdatasync loops ---------------------------------------------------------------------------------------------


def sync_loop(path: str, ready: Any, stop: Any, out: Any) -> None:
    """Append 200 bytes + fdatasync + sleep 5 ms until ``stop`` is set; put ``(samples, failed)`` on ``out``, the
    samples as (start, duration) of each fdatasync. ``ready`` is set once the first fdatasync is done."""
    samples: list[tuple[float, float]] = []
    failed = 0
    record = b"r" * APPEND_BYTES
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        while not stop.is_set():
            try:
                os.write(fd, record)
                t0 = clock()
                os.fdatasync(fd)
                samples.append((t0, clock() - t0))
            except OSError:
                failed += 1
            ready.set()
            time.sleep(LOOP_SLEEP)
    finally:
        os.close(fd)
        out.put((samples, failed))


def write_big_file(path: Path, size_mib: int) -> None:
    """``size_mib`` MiB in 1 MiB writes, fdatasynced every 8 MiB and at the end, as a snapshot is written."""
    block = os.urandom(MIB)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        unsynced = 0
        for _ in range(size_mib):
            os.write(fd, block)
            unsynced += MIB
            if unsynced >= WRITE_SYNC_BYTES:
                os.fdatasync(fd)
                unsynced = 0
        os.fdatasync(fd)
    finally:
        os.close(fd)


def window(samples: list[tuple[float, float]], start: float, end: float, *, overlap: bool) -> dict[str, Any]:
    """Max, p99 (ms) and count of the fdatasyncs in [start, end): those that overlap it (``overlap``), or else those
    wholly inside it."""
    if overlap:
        xs = [d * 1e3 for t, d in samples if t < end and t + d > start]
    else:
        xs = [d * 1e3 for t, d in samples if t >= start and t + d <= end]
    return {
        "max_ms": max(xs) if xs else float("nan"),
        "p99_ms": percentile(xs, 99),
        "count": len(xs),
        "durations_ms": xs,
    }


def trial(root: Path, method: str, size_mib: int) -> dict[str, Any]:
    """One trial: the loops, the big file written, a quiet second, its removal by ``method``, a second after."""
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    out = ctx.Queue()
    readies = [ctx.Event() for _ in range(LOOPS)]
    loops = [
        ctx.Process(target=sync_loop, args=(str(root / f"loop{i}.log"), readies[i], stop, out), daemon=True)
        for i in range(LOOPS)
    ]
    big = root / "snapshot.bin"
    samples: list[tuple[float, float]] = []
    failed = 0
    try:
        for p in loops:
            p.start()
        for ready in readies:
            if not ready.wait(10):
                raise RuntimeError("an fdatasync loop did not start within 10 s")
        t_write = clock()
        write_big_file(big, size_mib)
        t_written = clock()
        time.sleep(QUIET_S)
        t0 = clock()
        METHODS[method](big)
        t1 = clock()
        time.sleep(AFTER_S)
        t_end = clock()
        stop.set()
        for _ in loops:
            got, bad = out.get(timeout=10)
            samples.extend(got)
            failed += bad
    finally:
        stop.set()
        for p in loops:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        big.unlink(missing_ok=True)
    return {
        "method": method,
        "write_s": t_written - t_write,
        "removal_ms": (t1 - t0) * 1e3,
        "during": window(samples, t0, t1 + SETTLE_S, overlap=True),
        "quiet": window(samples, t_written + SETTLE_S, t0, overlap=False),
        "after": window(samples, t1 + SETTLE_S, t_end, overlap=False),
        "failed_fdatasyncs": failed,
    }


# -- where it ran ----------------------------------------------------------------------------------------------------


def unescape_mount_field(field: str) -> str:
    """/proc/self/mounts writes a space, tab, newline and backslash in a path as octal escapes (``\\040``)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def mount_of(path: Path) -> dict[str, Any]:
    """The mount holding ``path`` (the longest mount point that is a prefix of it; the last one mounted there wins):
    its device, mount point, filesystem type and options."""
    resolved = str(path.resolve())
    best: dict[str, Any] = {"device": "unknown", "mount_point": "", "fs": "unknown", "options": []}
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return best
    for line in lines:
        fields = line.split()
        if len(fields) < 4:
            continue
        mount_point = unescape_mount_field(fields[1])
        inside = resolved == mount_point or resolved.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best["mount_point"]):
            best = {
                "device": unescape_mount_field(fields[0]),
                "mount_point": mount_point,
                "fs": fields[2],
                "options": fields[3].split(","),
            }
    return best


def online_discard(options: list[str]) -> str | None:
    """The mount option that trims freed blocks as they are freed (``discard``, or btrfs's ``discard=sync|async``),
    or None."""
    return next((o for o in options if o == "discard" or o.startswith("discard=")), None)


# -- output ----------------------------------------------------------------------------------------------------------


def fmt_window(w: dict[str, Any]) -> str:
    return f"max {w['max_ms']:6.2f}  p99 {w['p99_ms']:6.2f}  n {w['count']:4d}"


def summarize(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """One method's trials: removal time and per-trial worst fdatasync as medians and ranges, the p99 and count
    over every trial's fdatasyncs pooled."""

    def pooled(name: str) -> list[float]:
        return [x for t in trials for x in t[name]["durations_ms"]]

    out: dict[str, Any] = {
        "trials": len(trials),
        "removal_ms": [t["removal_ms"] for t in trials],
        "removal_ms_median": median([t["removal_ms"] for t in trials]),
        "failed_fdatasyncs": sum(t["failed_fdatasyncs"] for t in trials),
    }
    for name in ("quiet", "during", "after"):
        maxes = [t[name]["max_ms"] for t in trials]
        xs = pooled(name)
        out[name] = {
            "max_ms_per_trial": maxes,
            "max_ms_median": median(maxes),
            "max_ms_worst": max(xs) if xs else float("nan"),
            "p99_ms_pooled": percentile(xs, 99),
            "count": len(xs),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where to make the temp dir: the data dirs' filesystem (default: the system temp dir)",
    )
    parser.add_argument(
        "--mib", type=int, default=247, help="the removed file's size (default 247: a 2M-partition snapshot)"
    )
    parser.add_argument("--trials", type=int, default=3, help="trials per method, alternating (default 3)")
    parser.add_argument("--json", action="store_true", help="also print every figure as one JSON object (last line)")
    args = parser.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix=".bench-file-removal-", dir=args.dir))
    p = print
    try:
        mount = mount_of(root)
        discard = online_discard(mount["options"])
        p(f"pykraft file removal benchmark   python {platform.python_version()}, {os.cpu_count()} CPUs")
        p(f"dir {root}")
        p(f"  {mount['fs']} on {mount['device']} mounted at {mount['mount_point']}: {','.join(mount['options'])}")
        if discard:
            p(f"  online discard: yes ({discard}): freed blocks are trimmed as they are freed")
        else:
            p("  online discard: no: freed blocks are not trimmed as they are freed; both methods should look alike")
        p(
            f"{LOOPS} loops of {APPEND_BYTES} B append + fdatasync + {LOOP_SLEEP * 1e3:g} ms sleep, each its own file;"
            f" a {args.mib} MiB file written (1 MiB writes, fdatasync every {WRITE_SYNC_BYTES // MIB} MiB), then"
            f"\nafter {QUIET_S:g} s removed by os.unlink or remove_gradually ({REMOVE_CHUNK_BYTES // MIB} MiB cuts"
            f" from the end); {args.trials} trials per method, alternating; load average"
            f" {' / '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        p(
            f"loops' fdatasync ms: 'quiet' = the {QUIET_S:g} s before the removal, 'during' = overlapping [removal"
            f" start, end + {SETTLE_S:g} s],\n'after' = from there to the loops' stop {AFTER_S:g} s after the removal\n"
        )
        p(
            f"{'trial':>5} {'method':>8} {'write s':>7} {'removal ms':>10}   {'during (ms)':<31}"
            f"{'quiet (ms)':<31}{'after (ms)':<31}"
        )
        sys.stdout.flush()
        order = [
            m for i in range(args.trials) for m in (("unlink", "gradual") if i % 2 == 0 else ("gradual", "unlink"))
        ]
        trials: list[dict[str, Any]] = []
        for i, method in enumerate(order, 1):
            t = trial(root, method, args.mib)
            trials.append(t)
            p(
                f"{i:>5} {method:>8} {t['write_s']:>7.2f} {t['removal_ms']:>10.1f}   {fmt_window(t['during'])}   "
                f"{fmt_window(t['quiet'])}   {fmt_window(t['after'])}"
                + (f"   {t['failed_fdatasyncs']} fdatasync(s) failed" if t["failed_fdatasyncs"] else "")
            )
            sys.stdout.flush()

        summary = {m: summarize([t for t in trials if t["method"] == m]) for m in METHODS}
        p(
            f"\nPer method over {args.trials} trials: removal time median (each trial); loops' fdatasync ms: max ="
            f" median of each trial's max [worst of all], p99 and n over all trials' syncs in the window"
        )
        for m, s in summary.items():
            d, q = s["during"], s["quiet"]
            p(
                f"  {m:>8}  removal {s['removal_ms_median']:6.1f} ms ("
                + ", ".join(f"{x:.1f}" for x in s["removal_ms"])
                + f")   during: max {d['max_ms_median']:6.2f} [{d['max_ms_worst']:6.2f}] p99 {d['p99_ms_pooled']:6.2f}"
                f" n {d['count']:4d}   quiet: max {q['max_ms_median']:5.2f} [{q['max_ms_worst']:5.2f}]"
                f" p99 {q['p99_ms_pooled']:5.2f}"
                + (f"   {s['failed_fdatasyncs']} fdatasync(s) failed" if s["failed_fdatasyncs"] else "")
            )
        u, g = summary["unlink"], summary["gradual"]
        worst_ratio = ratio(g["during"]["max_ms_median"], u["during"]["max_ms_median"])
        worst_of_all_ratio = ratio(g["during"]["max_ms_worst"], u["during"]["max_ms_worst"])
        removal_ratio = ratio(g["removal_ms_median"], u["removal_ms_median"])
        p(
            f"\nloops' worst fdatasync during the removal, gradual / unlink: {worst_ratio:.2f}x"
            f" ({g['during']['max_ms_median']:.2f} / {u['during']['max_ms_median']:.2f} ms, medians of the trials'"
            f" worst; worst of all: {worst_of_all_ratio:.2f}x)"
        )
        p(
            f"removal time, gradual / unlink: {removal_ratio:.2f}x"
            f" ({g['removal_ms_median']:.1f} / {u['removal_ms_median']:.1f} ms, medians)"
        )
        if args.json:
            for t in trials:
                for name in ("during", "quiet", "after"):
                    del t[name]["durations_ms"]
            p(
                json.dumps(
                    {
                        "config": {
                            "dir": str(root),
                            "mount": mount,
                            "online_discard": discard,
                            "mib": args.mib,
                            "trials_per_method": args.trials,
                            "chunk_bytes": REMOVE_CHUNK_BYTES,
                            "python": platform.python_version(),
                            "cpus": os.cpu_count(),
                        },
                        "trials": trials,
                        "summary": summary,
                        "ratios": {
                            "worst_fdatasync_gradual_over_unlink": worst_ratio,
                            "worst_of_all_fdatasync_gradual_over_unlink": worst_of_all_ratio,
                            "removal_time_gradual_over_unlink": removal_ratio,
                        },
                    }
                )
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
