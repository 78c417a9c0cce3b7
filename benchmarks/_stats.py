"""What every benchmark counts the same way: successes, errors by code, and the elapsed time actually measured.

A latency or a rate counts only successful requests; a failed one (an error code, a gRPC error, a timeout, an
exception) is counted by its code or type, printed beside the figures, and fails every acceptance target. Rates
are over the time from the first request sent to the last answer received (``time.perf_counter``), never over a
nominal duration or a schedule's length.
"""

from __future__ import annotations

import compileall
import json
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from quorum.errors import Errors, KafkaError

PRODUCT_PACKAGES = ("quorum", "controller", "broker", "pykraft")


def compile_product() -> None:
    """Byte-compile the product's modules (only what changed), as ``make bytecode`` does and as pip does for a
    package it installs, so that a node's start in a benchmark is not also the compile of its sources (an editable
    install, where PYTHONDONTWRITEBYTECODE is set: 0.4-0.7 s of every process start on this machine)."""
    root = Path(__file__).resolve().parent.parent
    for package in PRODUCT_PACKAGES:
        if not compileall.compile_dir(root / package, quiet=1, workers=0):
            raise RuntimeError(f"cannot byte-compile {root / package}")


def error_name(code: int) -> str:
    """A Kafka error code's name (``TOPIC_ALREADY_EXISTS``), or the number if pykraft does not know it."""
    try:
        return Errors(code).name
    except ValueError:
        return f"error code {code}"


def exception_name(e: BaseException) -> str:
    """A KafkaError by its code, a gRPC error by its status (``grpc UNAVAILABLE``), anything else by its type."""
    if isinstance(e, KafkaError):
        return e.code.name
    status = getattr(e, "code", None)
    if callable(status):  # grpc.RpcError: code() is a grpc.StatusCode (duck-typed: not every benchmark loads grpc)
        return f"grpc {status().name}"
    return type(e).__name__


class Tally:
    """One measurement's requests: the successes and their latencies, the failures and their codes, and the window
    from the first request sent (:meth:`sent`) to the last answer received (:meth:`answered`)."""

    def __init__(self) -> None:
        self.ok = 0
        self.latencies_ms: list[float] = []
        self.failed = 0
        self.errors: Counter[str] = Counter()
        self.first_sent: float | None = None
        self.last_answer: float | None = None

    def sent(self) -> float:
        now = time.perf_counter()
        if self.first_sent is None:
            self.first_sent = now
        return now

    def answered(self) -> float:
        """Call when an answer arrives, a success or an error alike (the time was spent either way)."""
        self.last_answer = now = time.perf_counter()
        return now

    def success(self, latency_ms: float | None = None) -> None:
        self.ok += 1
        if latency_ms is not None:
            self.latencies_ms.append(latency_ms)

    def failure(self, *names: str) -> None:
        """One failed request, with the codes it failed with (several: one per topic of a CreateTopics)."""
        self.failed += 1
        self.errors.update(names or ["unknown"])

    def exception(self, e: BaseException) -> None:
        self.failure(exception_name(e))

    @property
    def elapsed(self) -> float:
        if self.first_sent is None or self.last_answer is None:
            return 0.0
        return self.last_answer - self.first_sent

    def rate(self, count: float | None = None) -> float:
        """``count`` (default: the successful requests) per measured second; 0 if nothing was measured."""
        elapsed = self.elapsed
        return (self.ok if count is None else count) / elapsed if elapsed > 0 else 0.0

    def percentile(self, p: float) -> float:
        return percentile(self.latencies_ms, p)

    def summary(self) -> dict[str, Any]:
        """The counts for a report (JSON-able): ``ok``, ``failed``, ``errors`` by name, ``elapsed_s``."""
        return {"ok": self.ok, "failed": self.failed, "errors": dict(self.errors), "elapsed_s": self.elapsed}


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def errors_text(r: dict[str, Any]) -> str:
    """``errors none``, or ``3 failed (TOPIC_ALREADY_EXISTS 3)`` for a :meth:`Tally.summary` (or a dict holding one's
    ``failed`` and ``errors``)."""
    if not r.get("failed"):
        return "errors none"
    codes = ", ".join(f"{name} {n}" for name, n in sorted(r["errors"].items()))
    return f"{r['failed']} failed ({codes})"


def failures(measured: dict[str, dict[str, Any]], what: str = "request") -> tuple[int, str]:
    """How many requests (or ``what``) of ``measured`` (label -> summary) failed, and `` -- 3 request(s) failed:
    CODE 3`` to put after a FAIL line ('' if none did)."""
    total = sum(r.get("failed", 0) for r in measured.values())
    if not total:
        return 0, ""
    codes: Counter[str] = Counter()
    for r in measured.values():
        codes.update(r.get("errors", {}))
    return total, f" -- {total} {what}(s) failed: " + ", ".join(f"{c} {n}" for c, n in sorted(codes.items()))


def print_failures(measured: dict[str, dict[str, Any]], what: str = "request") -> None:
    """One line naming the measurements that had failures, if any did."""
    failed = {label: r for label, r in measured.items() if r.get("failed")}
    if failed:
        print(f"  failed {what}s by measurement: " + "; ".join(f"{k}: {errors_text(r)}" for k, r in failed.items()))


def acceptance(
    checks: list[tuple[str, bool]], measured: dict[str, dict[str, Any]], what: str = "request"
) -> list[dict[str, Any]]:
    """Print the PASS/FAIL lines; every target FAILS if any request (or ``what``) of ``measured`` (label ->
    summary) failed, saying how many and with which codes. Returns the checks for the JSON report."""
    total, why = failures(measured, what)
    out = []
    for text, ok in checks:
        passed = ok and not total
        print(f"  {'PASS' if passed else 'FAIL'}  {text}{why}")
        out.append({"name": text, "target_met": ok, "pass": passed})
    print_failures(measured, what)
    return out


def median(values: list[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count); NaN for none."""
    if not values:
        return float("nan")
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def proc_kib_field(path: str, field: str) -> int | None:
    """A ``Name:   N kB`` line of a /proc file (``status``, ``smaps_rollup``, ``meminfo``), in bytes; None where the
    file or the line is missing."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def huge_page_bytes(pid: int) -> int | None:
    """A process's anonymous memory in transparent huge pages now (AnonHugePages of /proc/PID/smaps_rollup)."""
    return proc_kib_field(f"/proc/{pid}/smaps_rollup", "AnonHugePages")


def rss_bytes(pid: int) -> int | None:
    """A process's resident set size now (VmRSS of Linux /proc/PID/status), or None where there is none."""
    return proc_kib_field(f"/proc/{pid}/status", "VmRSS")
    return None


def log_events(path: Path, event: str, since: int = 0) -> list[dict[str, Any]]:
    """The JSON log lines of ``event`` in a process's log from byte ``since`` on."""
    out = []
    try:
        with path.open("rb") as f:
            f.seek(since)
            for line in f:
                if b'"event"' not in line or event.encode() not in line:
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                if item.get("event") == event:
                    out.append(item)
    except OSError:
        pass
    return out


# -- Prometheus text, as the nodes serve it --------------------------------------------------------------------

_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def metrics_text(port: int, timeout: float = 2.0) -> str | None:
    """A node's /metrics on loopback, or None while it does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            return r.read().decode()
    except OSError:
        return None


def prometheus_samples(text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """Each sample of a Prometheus text exposition: ``(name, labels, value)``."""
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name_labels, _, value = line.rpartition(" ")
        name, _, labels = name_labels.partition("{")
        yield name, dict(_LABEL.findall(labels)), float(value)


def parse_stage_metrics(text: str) -> dict[str, float]:
    """``side/stage`` -> summed seconds and ``side/samples`` -> count (quorum/raft/hops.py), from a node's
    Prometheus text."""
    out: dict[str, float] = {}
    for name, labels, value in prometheus_samples(text):
        if name == "pykraft_raft_commit_stage_seconds_total":
            out[f"{labels['side']}/{labels['stage']}"] = value
        elif name == "pykraft_raft_commit_stage_samples_total":
            out[f"{labels['side']}/samples"] = value
    return out
