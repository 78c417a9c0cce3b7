"""Scale benchmark: 3 controllers and 6 brokers (Raft observers) holding millions of partitions, fsync on.

    python benchmarks/scale.py [--partitions 2000000] [--quick] [--json] [--dir DIR] [--brokers 6]
                               [--trials N] [--idle-minutes M] [--appender-seconds S] [--keep]

Prints, measured in one run, each figure beside its target (PASS/FAIL):
- creating N partitions (topics of 100 partitions, RF 3, 99 topics per CreateTopics request, 4 requests in
  flight): the time from the first request until every controller and observer holds and has applied what the
  leader had committed by the last answer (target <= 90 s at 2M), with a progress line every 15 s, and the ISR
  shrinks and expansions the brokers' leaders made meanwhile (and again at the end, from the creation on): churn
  after the creation loads every node through the phases that follow;
- memory: each controller's and broker's RSS (/proc VmRSS) minus the same process's RSS with the cluster empty,
  per partition the leader holds (target <= 400 B), once every broker's replica manager holds the partitions its
  image holds (``pykraft_broker_replicas_applied_offset``; it applies them after the image, and how long after
  the catch-up is printed);
- a controller restarted at N partitions (after ``pykraft snapshot create`` on it, as an operator does before
  maintenance, then SIGTERM): exec to ready — its log end and applied offset (its metrics) at the leader's high
  watermark — with ``snapshot_loaded``'s records/s; then it is made the active controller (the leader stopped
  gracefully and restarted until it is) and its DescribeTopics of every topic compared with the leader's before
  the restart. The same restart for a broker: exec to its ``metadata_caught_up`` line (its image holds the high
  watermark it last heard of) (target <= 5 s each); its clean stop ends with a snapshot of its image
  (``shutdown_snapshot``), printed beside the stop's duration. The product's modules are byte-compiled first, as pip
  compiles an installed package (``make bytecode``): an editable install's sources would otherwise be compiled
  again at each start wherever PYTHONDONTWRITEBYTECODE is set, as on this machine;
- a snapshot of N partitions forced on the leader (the CreateSnapshot request until frozen, and
  ``snapshot_generated``'s own seconds; target <= 10 s) while one client creates 1 topic/request at 200
  requests/s on a fixed schedule: its p50/p99 from the scheduled times during the snapshot (target p99 <= 50 ms)
  and just before without one (the baseline; every node snapshots first, so no policy snapshot lands in it);
- kill -9 of the active controller: the time until a CreateTopics is accepted again (a new one to each surviving
  controller every 10 ms, each given 1 s), median of trials, vs the same on the empty cluster first (<= 1.5x);
- a follower stopped, its data directory deleted, started: snapshot bytes / time from exec to
  ``snapshot_installed`` (target >= 100 MiB/s), beside the fetch itself (``snapshot_fetch_started`` to installed),
  a file copy + fsync of the same snapshot and a raw loopback gRPC transfer of it in the same 8 MiB requests;
- a second, small cluster (10,000 partitions) with metadata.max.retention.ms=30000,
  metadata.log.max.snapshot.interval.ms=20000 and 16 KiB segments, left idle M minutes (10; 1 with --quick):
  segments, snapshots and bytes per node each minute, and a bound asserted after the first minute;
- CPU seconds per process beside every phase (/proc utime+stime, and its ended children's: a node's snapshots are
  written by forked children), their share of the machine's cores and the machine's load average (it is shared:
  other work shows there), so a CPU wall shows as one.

The brokers run at nice 10 (see ``BROKER_NICE``). Only successful requests count in a latency or a rate; failures
are counted by code beside the figures and fail the target measured over them (see ``_stats.py``). A client's retry
after NOT_CONTROLLER (a leader change) is counted as a failed attempt. The main cluster uses Kafka's defaults except
segments of 8 MiB and metadata.max.retention.bytes of 100 MiB at 2M partitions, both scaled with the partition count
so that a small run also rolls segments, deletes them and sends snapshots. The run stops (saying where and why, with
what it measured) if the machine's available memory falls under 3 GiB. Without a ``pykraft broker`` that is a Raft
observer (``--metadata-dir``), stub brokers (registration and heartbeats, one process) stand in and the broker
figures are reported as not measured. Brokers are killed (-9) at the end: a controlled shutdown of millions of
leaderships measures nothing here and takes minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _scale_cluster import (  # noqa: E402
    STARTED,
    Bench,
    Settings,
    log_size,
    metadata_files,
    observer_brokers_available,
    stub_brokers_main,
    wall_time,
)
from _scale_measure import cpu_text, isr_changes, loop_stalls_text, quorum_churn  # noqa: E402
from _scale_phases import (  # noqa: E402
    APPENDER_RATE,
    IDLE_OVERRIDES,
    IDLE_PARTITIONS,
    IN_FLIGHT,
    PARTITIONS_PER_TOPIC,
    TOPICS_PER_REQUEST,
    create_partitions,
    idle_cluster,
    snapshot_under_load,
)
from _scale_restarts import (  # noqa: E402
    CHUNK_BYTES,
    chunk_server_main,
    digest_when_active,
    failover,
    kill_text,
    leader_digest,
    new_broker,
    new_broker_text,
    restart_broker,
    restart_controller,
    same_as_a_broker,
    wiped_follower,
)
from _stats import acceptance, compile_product, errors_text, log_events, ratio, rss_bytes  # noqa: E402

from pykraft.testing import free_ports  # noqa: E402
from quorum.log.log import MAX_RETAINED_SNAPSHOTS, METADATA_PARTITION_DIR  # noqa: E402

FULL_PARTITIONS = 2_000_000
QUICK_PARTITIONS = 50_000
REPLICAS_APPLIED_TIMEOUT_S = 600  # the wait for the brokers' replica managers before memory is measured

# The targets (at 2,000,000 partitions).
CREATE_TARGET_S = 90.0
BYTES_PER_PARTITION_TARGET = 400
RESTART_TARGET_S = 5.0
SNAPSHOT_TARGET_S = 10.0
APPENDER_P99_TARGET_MS = 50.0
FAILOVER_RATIO_TARGET = 1.5
INSTALL_TARGET_MIB_S = 100.0
END_CATCH_UP_S = 15.0  # how long every node may take, at the end, to hold and apply what was committed by then
# A broker's scrape at the end may take this long (Prometheus's default scrape_timeout) before it counts as not
# answering: at 2M partitions, brokers busy with a restarted peer's ISR expansions answered in more than 2 s, and
# "did not answer" then hid whether their images were caught up.
END_SCRAPE_TIMEOUT_S = 10.0


# -- the run -------------------------------------------------------------------------------------------------------


def settings_for(args: argparse.Namespace) -> Settings:
    partitions = args.partitions or (QUICK_PARTITIONS if args.quick else FULL_PARTITIONS)
    scale = partitions / FULL_PARTITIONS
    return Settings(
        partitions=partitions,
        brokers=args.brokers,
        trials=args.trials or (2 if args.quick else 5),
        idle_minutes=args.idle_minutes if args.idle_minutes is not None else (1 if args.quick else 10),
        appender_window_s=args.appender_seconds or (3.0 if args.quick else 5.0),
        segment_bytes=max(64 * 1024, int(8 * 2**20 * scale)),
        retention_bytes=max(2**20, int(100 * 2**20 * scale)),
        create_deadline_s=args.create_deadline or (600.0 if args.quick else 900.0),
    )


@contextlib.contextmanager
def phase(report: dict[str, Any], name: str, bench: Bench) -> Iterator[None]:
    """A phase that fails (an RPC refused or cut off, a node that never got ready: the quorum under load) is
    reported as failed, with why, and the next phase runs; only running short of memory stops the run."""
    try:
        yield
    except Exception as e:
        if bench.abort:
            raise
        report.setdefault("phase_errors", {})[name] = f"{type(e).__name__}: {e}"
        print(f"    PHASE FAILED ({name}): {type(e).__name__}: {str(e)[:600]}", flush=True)


def print_memory(memory: dict[str, Any]) -> None:
    for name, m in memory["processes"].items():
        per = m["bytes_per_partition"]
        verdict = "PASS" if per <= BYTES_PER_PARTITION_TARGET else "FAIL"
        print(
            f"    {name:>4}: RSS empty {m['rss_empty'] / 2**20:,.0f} MiB -> {m['rss_full'] / 2**20:,.0f} MiB: "
            f"{per:,.0f} B/partition  {verdict} (<= {BYTES_PER_PARTITION_TARGET})"
        )


async def settle_isr(bench: Bench, report: dict[str, Any], timeout: float = 600) -> None:
    """Before the FetchSnapshot installs: wait until every ISR is whole again. The broker restart of phase 5 took
    that broker out of the ISR of every partition it follows, and at 2M partitions the expansions that bring it
    back (a PartitionChangeRecord each, replayed by every process) keep both cores busy for minutes. A node joining
    then measures the machine's leftover share, not its FetchSnapshot."""
    settled, under = await bench.wait_isr_whole(timeout)
    report["isr_whole_before_installs_s"] = settled
    if settled is None:
        print(f"    still under-replicated after {timeout:.0f} s ({under}): measured anyway", flush=True)
    else:
        print(f"    every ISR whole again after {settled:.1f} s of waiting: installs measured on a settled cluster")


async def run_async(args: argparse.Namespace, settings: Settings, root: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"settings": settings.__dict__}
    observers = observer_brokers_available()
    report["observers"] = observers
    overrides = {
        "metadata.log.segment.bytes": settings.segment_bytes,
        "metadata.max.retention.bytes": settings.retention_bytes,
    }
    report["overrides"] = overrides
    bench = Bench(root / "main", settings, overrides, observers)
    chunk_port = free_ports(1)[0]
    chunk_server: subprocess.Popen[bytes] | None = None
    n = settings.partitions
    try:
        await bench.start()
        leader = await bench.leader_id()
        brokers = f"{settings.brokers} observer brokers" if observers else f"{settings.brokers} STUB brokers"
        print(
            f"pykraft scale benchmark: {n:,} partitions, 3 controllers, {brokers}; leader c{leader}; "
            f"overrides {overrides}; data in {root}",
            flush=True,
        )
        if not observers:
            print(
                "  NOTE: `pykraft broker` has no --metadata-dir here: brokers are not Raft observers yet. Stub brokers "
                "(registration and heartbeats) stand in; every broker figure is NOT MEASURED (FAIL)."
            )

        print(f"\n[1] kill -9 of the active controller, empty cluster ({settings.trials} trials)", flush=True)
        r = await failover(bench, settings.trials, "empty-probe")
        report["failover_empty"] = r
        print(f"    unavailable: median {r['median_s']:.2f} s (min {r['min_s']:.2f}, max {r['max_s']:.2f})")
        print(f"    {kill_text(r)}")
        print(f"    {cpu_text(r)}")

        await asyncio.sleep(2.0)
        rss_empty = {name: rss_bytes(pid) for name, pid in bench.pids().items() if name != "stub brokers"}
        pids_empty = bench.pids()

        print(
            f"\n[2] creating {n:,} partitions ({n // PARTITIONS_PER_TOPIC:,} topics x 100, RF 3, "
            f"{TOPICS_PER_REQUEST} topics/request, {IN_FLIGHT} in flight)",
            flush=True,
        )
        log_marks = {i: log_size(nd.log_path) for i, nd in bench.cluster.nodes.items()}
        broker_marks = {i: log_size(b.log_path) for i, b in bench.brokers.items()}
        r = await create_partitions(bench, n, settings.create_deadline_s)
        r["quorum"] = quorum_churn(bench, log_marks)
        r["isr_changes"] = isr_changes(bench, broker_marks)
        report["create"] = r
        complete = r["created_partitions"] == n and r["caught_up_after_s"] is not None
        verdict = "PASS" if complete and r["total_s"] <= CREATE_TARGET_S and observers and not r["failed"] else "FAIL"
        if complete:
            print(
                f"    {r['created_partitions']:,} partitions in {r['total_s']:.1f} s ({r['partitions_per_s']:,.0f}/s) "
                f"to every controller and observer caught up  {verdict} (<= {CREATE_TARGET_S:.0f} s"
                f"{'' if observers else ', with observers: not measured'})"
            )
        else:
            print(
                f"    NOT COMPLETE  {verdict}: {r['created_partitions']:,} of {n:,} partitions created in "
                f"{r['answered_s']:.0f} s"
                + (f" (stopped sending at the {r['deadline_s']:.0f} s deadline)" if r["stopped_at_deadline"] else "")
                + (
                    f"; all caught up {r['caught_up_after_s']:.1f} s later"
                    if r["caught_up_after_s"] is not None
                    else f"; NOT all caught up: {r['not_caught_up'].get('why', '')[:300]}"
                )
            )
        print(
            f"    requests: p50 {r['request_p50_ms']:,.0f} ms, p99 {r['request_p99_ms']:,.0f} ms; "
            f"{r['retried_attempts']} attempt(s) retried on a new leader; {errors_text(r)}"
        )
        q = r["quorum"]
        print(
            f"    the quorum meanwhile: {q['leaders_elected']} leader(s) elected, brokers fenced {q['brokers_fenced']} "
            f"time(s), snapshots taken {q['snapshots']}, GC pauses >= 50 ms per controller: "
            + ", ".join(
                f"{k} {v['count']} ({v['seconds']:.1f} s, longest {v['longest_ms']:.0f} ms)" for k, v in q["gc"].items()
            )
            + f"; ISR shrinks {r['isr_changes']['shrinks']:,}, expansions {r['isr_changes']['expands']:,}"
        )
        print(f"    {cpu_text(r)}")

        held = r["leader_partition_count"] or 0
        print(f"    the leader holds {held:,} partitions; broker images hold the last request's topics: "
              f"{r['broker_images_hold_the_last_request']}")  # fmt: skip
        print("\n[3] memory: RSS minus the same process's RSS with the cluster empty", flush=True)
        # The brokers' images caught up; their replica managers apply those partitions after them (29-44 s later
        # at 2M). Measured before they hold every replica, a broker's figure would leave some out.
        applied_s, not_applied = await bench.wait_replicas_applied(REPLICAS_APPLIED_TIMEOUT_S)
        report["replicas_applied_after_s"] = applied_s
        if applied_s is not None:
            print(f"    every broker's replica manager held its partitions {applied_s:.1f} s after the images did")
        elif bench.brokers:
            print(f"    NOT every broker's replica manager holds its partitions (measured anyway): {not_applied}")
        await asyncio.sleep(1.0)
        processes = {}
        for name, pid in bench.pids().items():
            if name == "stub brokers" or pids_empty.get(name) != pid or rss_empty.get(name) is None:
                continue
            full = rss_bytes(pid) or 0
            processes[name] = {
                "rss_empty": rss_empty[name],
                "rss_full": full,
                "bytes_per_partition": (full - rss_empty[name]) / held if held else float("nan"),
            }
        report["memory"] = {"partitions": held, "processes": processes}
        print_memory(report["memory"])

        with phase(report, "snapshot", bench):
            print(
                f"\n[4] a forced snapshot on the leader, {APPENDER_RATE} CreateTopics/s (1 topic each) meanwhile",
                flush=True,
            )
            r = await snapshot_under_load(bench, settings.appender_window_s)
            report["snapshot"] = r
            s, b, d = r["snapshot"], r["baseline"], r["during"]
            verdict = "PASS" if s["request_to_frozen_s"] <= SNAPSHOT_TARGET_S and not s["error"] else "FAIL"
            print(
                f"    snapshot {s['id']} of c{r['leader']}: {s['bytes'] or 0:,} bytes, {s['records'] or 0:,} records, "
                f"request to frozen {s['request_to_frozen_s']:.2f} s  {verdict} (<= {SNAPSHOT_TARGET_S:.0f} s); "
                f"snapshot_generated {s['generated_s']} s ({s['records_per_s'] or 0:,} records/s); the child "
                f"writing it used {s['child_cpu_s']} CPU s"
            )
            verdict = "PASS" if d["p99_ms"] <= APPENDER_P99_TARGET_MS and not d["failed"] else "FAIL"
            print(
                f"    appender during the snapshot: p50 {d['p50_ms']:.1f} ms, p99 {d['p99_ms']:.1f} ms, max "
                f"{d['max_ms']:.1f} ms over {d['requests']} requests  {verdict} "
                f"(p99 <= {APPENDER_P99_TARGET_MS:.0f} ms); {errors_text(d)}"
            )
            if d["slowest_at_s"] is not None:
                first, last = d["slowest_at_s"]
                print(
                    f"      its slowest 1 % were sent {first:.2f}-{last:.2f} s after the snapshot request "
                    f"(of {d['elapsed_s']:.2f} s)"
                )
            print(
                f"    appender baseline (no snapshot): p50 {b['p50_ms']:.1f} ms, p99 {b['p99_ms']:.1f} ms, max "
                f"{b['max_ms']:.1f} ms over {b['requests']} requests; {errors_text(b)}"
            )
            print(f"    during: {cpu_text(d)}")
            print(f"    baseline: {cpu_text(b)}")
            for window, w in (("baseline", b), ("during", d)):
                for name, text in w["commit_path"].items():
                    print(f"    {window} commit path, {name}: {text}")
            for window, w in (("baseline", b), ("during", d)):
                stalls = loop_stalls_text(w["loop_stalls"])
                print(f"    {window}: controllers' event loops 50 ms or more late, ms: {stalls}")

        with phase(report, "restart_controller", bench):
            print("\n[5] a controller restarted (snapshot created on it first, then SIGTERM)", flush=True)
            before = await leader_digest(bench)
            r = await restart_controller(bench)
            report["restart_controller"] = r
            loaded = r["snapshot_loaded"] or {}
            verdict = "PASS" if r["ready_s"] <= RESTART_TARGET_S else "FAIL"
            print(
                f"    c{r['node']}: exec to ready {r['ready_s']:.2f} s  {verdict} (<= {RESTART_TARGET_S:.0f} s); "
                f"snapshot_loaded {loaded.get('records', 0):,} records in {loaded.get('seconds')} s "
                f"({loaded.get('records_per_s') or 0:,} records/s), delivered in {r['snapshot_delivered_s']} s; "
                f"{r['tail_records']} records replayed after it; the process used {r['process_cpu_s']:.1f} CPU s"
            )
            moves, after = await digest_when_active(bench, r["node"])
            r["leadership_moves"] = moves
            r["describe_equal"] = before == after
            r["described"] = after
            against = "the leader's before the restart"
            if not r["describe_equal"] and bench.brokers:
                # Leaders and ISRs may have moved meanwhile (the brokers' data planes shrink and expand ISRs): then
                # compare with what a broker's image, replayed from the log on its own, says now.
                r["describe_equal"], against = await same_as_a_broker(bench, r["node"], after), "a broker's image"
            print(
                f"    made active in {moves} graceful leader stop(s): its DescribeTopics "
                f"({after['topics']:,} topics, {after['partitions']:,} partitions) "
                f"{'EQUAL to' if r['describe_equal'] else 'DIFFERENT from'} {against}"
            )
        with phase(report, "restart_broker", bench):
            if observers:
                r = await restart_broker(bench)
                report["restart_broker"] = r
                loaded = r["snapshot_loaded"] or {}
                verdict = "PASS" if r["ready_s"] <= RESTART_TARGET_S else "FAIL"
                print(
                    f"    b{r['broker']}: exec to ready {r['ready_s']:.2f} s  {verdict} (<= {RESTART_TARGET_S:.0f} s); "
                    f"snapshot_loaded {loaded.get('records', 0):,} records ({loaded.get('records_per_s') or 0:,} "
                    f"records/s); {r['tail_records']} records replayed after it; the process used "
                    f"{r['process_cpu_s']:.1f} CPU s; its controlled shutdown (SIGTERM to exit) took "
                    f"{r['stop_s']:.1f} s"
                )
                if (last := r["shutdown_snapshot"]) is not None:
                    print(
                        f"    it stopped with snapshot {last['snapshot_id']} of its image "
                        f"({last['bytes_since']:,} bytes committed since its previous one), taken "
                        f"{last['seconds']:.1f} s after the controlled shutdown"
                    )
                elif (why := r["no_shutdown_snapshot"]) is not None:
                    print(f"    it stopped without a snapshot of its image: {why['event']} {why.get('error', '')}")
                print(f"    exec to ready: {cpu_text(r)}")
            else:
                print(f"    broker: NOT MEASURED  FAIL (<= {RESTART_TARGET_S:.0f} s): brokers are not observers here")

        with phase(report, "failover_full", bench):
            print(
                f"\n[6] kill -9 of the active controller at {held:,} partitions ({settings.trials} trials)", flush=True
            )
            r = await failover(bench, settings.trials, "full-probe")
            report["failover_full"] = r
            base = report["failover_empty"]["median_s"]
            factor = ratio(r["median_s"], base)
            verdict = "PASS" if factor <= FAILOVER_RATIO_TARGET else "FAIL"
            print(
                f"    unavailable: median {r['median_s']:.2f} s (min {r['min_s']:.2f}, max {r['max_s']:.2f}) vs "
                f"{base:.2f} s empty: {factor:.2f}x  {verdict} (<= {FAILOVER_RATIO_TARGET}x)"
            )
            print(f"    {kill_text(r)}")
            print(
                "    killed node back and caught up after: "
                + ", ".join(f"{t['killed_node_ready_after_restart_s']:.1f} s" for t in r["trials"])
            )
            print(f"    {cpu_text(r)}")

        with phase(report, "wiped_follower", bench):
            print("\n[7] a follower wiped and restarted: FetchSnapshot from the leader", flush=True)
            if bench.brokers:
                await settle_isr(bench, report)
            view = await bench.leader_view()
            if view is not None and view.latest_snapshot_end_offset >= 0:
                leader_dir = bench.cluster.nodes[view.leader_id].data_dir / METADATA_PARTITION_DIR
                snapshot_path = sorted(leader_dir.glob("*.checkpoint"))[-1]
                chunk_server = subprocess.Popen(
                    [sys.executable, __file__, "--chunk-server", str(chunk_port), "--file", str(snapshot_path)],
                    stdout=subprocess.PIPE,
                )
                assert chunk_server.stdout is not None
                await asyncio.to_thread(chunk_server.stdout.readline)
            r = await wiped_follower(bench, chunk_port if chunk_server is not None else None)
            report["wiped_follower"] = r
            rate = r.get("mib_per_s")
            verdict = "PASS" if r["installed"] and rate is not None and rate >= INSTALL_TARGET_MIB_S else "FAIL"
            if r["installed"]:
                print(
                    f"    c{r['node']}: snapshot {r['snapshot']} ({(r['snapshot_bytes'] or 0) / 2**20:,.1f} MiB) "
                    f"installed {r['exec_to_installed_s']:.2f} s after exec: {rate or 0:,.1f} MiB/s  {verdict} "
                    f"(>= {INSTALL_TARGET_MIB_S:.0f} MiB/s); fetch_started to installed "
                    f"{r.get('fetch_started_to_installed_s', float('nan')):.2f} s "
                    f"({r.get('transfer_mib_per_s') or 0:,.1f} MiB/s); ready (caught up) {r['ready_s']:.2f} s "
                    "after exec"
                )
                print(
                    f"    baselines: file copy + fsync {r.get('file_copy_mib_per_s', float('nan')):,.0f} MiB/s, raw "
                    f"loopback gRPC in {CHUNK_BYTES >> 20} MiB requests "
                    f"{r.get('raw_grpc_mib_per_s', float('nan')):,.0f} MiB/s"
                )
            else:
                print(
                    f"    c{r['node']}: NO snapshot installed  FAIL (the leader's log starts at "
                    f"{r['leader_log_start']}: it sent the log instead); ready {r['ready_s']:.2f} s after exec"
                )
            print(f"    {cpu_text(r)}")

        if bench.brokers:
            with phase(report, "new_broker", bench):
                print("\n[8] a new broker joins: FetchSnapshot as an observer (over its gRPC stream)", flush=True)
                r = await new_broker(bench)
                report["new_broker"] = r
                print(f"    {new_broker_text(r, INSTALL_TARGET_MIB_S)}")
                print(f"    {cpu_text(r)}")

        with phase(report, "files_at_end", bench):
            files = {f"c{i}": metadata_files(nd.data_dir) for i, nd in bench.cluster.nodes.items()}
            files.update({f"b{i}": metadata_files(b.data_dir) for i, b in bench.brokers.items()})
            report["files_at_end"] = files
            report["files_bounded"] = all(
                f["snapshots"] <= MAX_RETAINED_SNAPSHOTS and f["partial_snapshots"] == 0 for f in files.values()
            )
            # Converged: every node holds and applied what was committed when the run ended, within a few seconds
            # (an instant's comparison would count the NoOp committed while an observer's fetch is on its way).
            hw, behind = await bench.lagging()
            try:
                await bench.wait_caught_up(END_CATCH_UP_S, scrape_timeout=END_SCRAPE_TIMEOUT_S)
                behind = {}
            except TimeoutError as e:
                behind = {"why": str(e)}
            report["all_caught_up_at_end"] = not behind
            report["behind_at_end"] = behind
            report["slowest_scrape_at_end_s"] = {f"b{b}": round(t, 2) for b, t in bench.slowest_scrape_s.items()}
            if behind:
                print(f"    NOT all caught up with offset {hw} within {END_CATCH_UP_S:.0f} s of the end: {behind}")
            if bench.slowest_scrape_s:
                scrapes = ", ".join(f"b{b} {t:.1f}" for b, t in sorted(bench.slowest_scrape_s.items()))
                print(f"    brokers' slowest /metrics answer, s (at most {END_SCRAPE_TIMEOUT_S:.0f}): {scrapes}")
            rb = report.get("restart_broker")
            if rb:
                b = bench.brokers[rb["broker"]]
                unfenced = [
                    e for e in log_events(b.log_path, "broker_fencing_changed", rb["log_since"]) if not e["fenced"]
                ]
                rb["unfenced_after_s"] = wall_time(unfenced[0]) - rb["exec_wall_time"] if unfenced else None
                print(
                    f"    the restarted broker b{rb['broker']} was unfenced "
                    + (f"{rb['unfenced_after_s']:.1f} s after its exec" if unfenced else "NOT YET (fenced to the end)")
                )
            churn = isr_changes(bench, broker_marks)
            report["isr_changes_from_creation_on"] = churn
            print(
                f"    ISR changes from the start of the creation to the end: {churn['shrinks']:,} shrinks, "
                f"{churn['expands']:,} expansions (the broker restart's controlled shutdown takes it out of every ISR)"
            )
            print(
                "\n    on disk at the end: "
                + "; ".join(
                    f"{k} {f['bytes'] / 2**20:,.1f} MiB ({f['segments']} seg, {f['snapshots']} snap)"
                    for k, f in files.items()
                )
            )
    except Exception as e:  # a phase that could not finish: say where and why, keep what was measured
        why = bench.abort or f"{type(e).__name__}: {e}"
        done = [k for k in report if k not in ("settings", "observers", "overrides")]
        report["aborted"] = {"after": done, "why": why}
        print(f"\n    STOPPED after {done or 'the start'}: {why}", flush=True)
    finally:
        bench.stop()
        if chunk_server is not None:
            chunk_server.kill()
            chunk_server.wait()

    if settings.idle_minutes > 0:
        print(
            f"\n[9] idle cluster for {settings.idle_minutes:g} min ({IDLE_PARTITIONS:,} partitions, {IDLE_OVERRIDES})",
            flush=True,
        )
        r = await idle_cluster(root / "idle", settings.idle_minutes, settings.brokers, observers)
        report["idle"] = r
        verdict = "PASS" if r["bounded"] else "FAIL"
        print(
            f"    after the first minute: at most {r['worst_after_first_minute']['segments']} segments and "
            f"{r['worst_after_first_minute']['snapshots']} snapshots on a node  {verdict} (bound: "
            f"{r['segment_bound']} segments for a log growing {r['log_growth_bytes_per_s']:,.0f} B/s, "
            f"{r['snapshot_bound']} snapshots)"
        )
        print(f"    {cpu_text(r)}")
    return report


def checks(report: dict[str, Any]) -> list[tuple[str, bool, dict[str, Any]]]:
    """Each target: its text, whether the figure meets it, and the requests it was measured over (a failed one
    fails it: a create attempt answered NOT_CONTROLLER, say, fails the creation target, not the others). A target
    whose phase did not run is listed as not measured, and fails."""
    observers = report["observers"]
    out: list[tuple[str, bool, dict[str, Any]]] = []

    def target(text: str, ok: bool, measured: dict[str, Any] | None = None) -> None:
        out.append((text, bool(ok), measured or {}))

    def missing(text: str) -> None:
        target(f"{text} (NOT MEASURED)", False)

    c = report.get("create")
    text = f"partitions created and every observer caught up in <= {CREATE_TARGET_S:.0f} s"
    if c:
        complete = c["created_partitions"] == c["partitions"] == c["leader_partition_count"] - c["partitions_before"]
        target(
            f"{c['partitions']:,} {text} (took {c['total_s']:.1f} s{'' if observers else ', no observers'}"
            f"{'' if complete else ', NOT ALL CREATED'})",
            observers and complete and c["total_s"] <= CREATE_TARGET_S,
            {"create": c},
        )
    else:
        missing(text)
    m = report.get("memory")
    text = f"memory <= {BYTES_PER_PARTITION_TARGET} B/partition on every controller and broker"
    if m:
        worst = max((p["bytes_per_partition"] for p in m["processes"].values()), default=float("nan"))
        brokers = observers and any(k.startswith("b") for k in m["processes"])
        target(
            f"{text} (worst {worst:,.0f}{'' if brokers else ', brokers not measured'})",
            brokers and worst <= BYTES_PER_PARTITION_TARGET,
        )
    else:
        missing(text)
    for key, what in (("restart_controller", "controller"), ("restart_broker", "broker")):
        r = report.get(key)
        text = f"{what} restarted at scale ready in <= {RESTART_TARGET_S:.0f} s"
        if r:
            target(f"{text} (took {r['ready_s']:.2f} s)", r["ready_s"] <= RESTART_TARGET_S)
        else:
            missing(text)
    rc = report.get("restart_controller")
    if rc and "describe_equal" in rc:
        target("restarted controller's DescribeTopics equal the leader's (or a broker image's)", rc["describe_equal"])
    s = report.get("snapshot")
    text = f"snapshot written in <= {SNAPSHOT_TARGET_S:.0f} s"
    text_p99 = f"appender p99 <= {APPENDER_P99_TARGET_MS:.0f} ms during the snapshot"
    if s:
        target(
            f"{text} (took {s['snapshot']['request_to_frozen_s']:.2f} s)",
            s["snapshot"]["request_to_frozen_s"] <= SNAPSHOT_TARGET_S and not s["snapshot"]["error"],
        )
        target(
            f"{text_p99} (was {s['during']['p99_ms']:.1f} ms; baseline {s['baseline']['p99_ms']:.1f} ms)",
            s["during"]["p99_ms"] <= APPENDER_P99_TARGET_MS,
            {"appender baseline": s["baseline"], "appender during the snapshot": s["during"]},
        )
    else:
        missing(text)
        missing(text_p99)
    f, e = report.get("failover_full"), report.get("failover_empty")
    text = f"kill -9 failover at scale <= {FAILOVER_RATIO_TARGET}x the empty cluster's"
    if f and e:
        factor = ratio(f["median_s"], e["median_s"])
        target(
            f"{text} ({f['median_s']:.2f} s vs {e['median_s']:.2f} s = {factor:.2f}x)", factor <= FAILOVER_RATIO_TARGET
        )
    else:
        missing(text)
    for key, who in (("wiped_follower", "wiped follower"), ("new_broker", "a new broker")):
        text = f"{who} installs a snapshot at >= {INSTALL_TARGET_MIB_S:.0f} MiB/s"
        if (w := report.get(key)) is None:
            missing(text)
            continue
        rate = w.get("mib_per_s") if w["installed"] else None
        target(
            f"{text} ({f'{rate:,.1f} MiB/s' if rate else 'no snapshot installed'})", (rate or 0) >= INSTALL_TARGET_MIB_S
        )
    i = report.get("idle")
    if i:
        target(f"idle cluster's segments and snapshots bounded over {i['minutes']:g} min", i["bounded"])
    elif report["settings"]["idle_minutes"] > 0:
        missing("idle cluster's segments and snapshots bounded")
    return out


def run(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    base = Path(args.dir) if args.dir else ROOT
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="scale-bench-", dir=base))
    started = time.perf_counter()
    compile_product()

    def interrupted(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, interrupted)
    try:
        report = asyncio.run(run_async(args, settings, root))
        report["wall_s"] = time.perf_counter() - started
        print(f"\nacceptance (issue targets; this run took {report['wall_s']:.0f} s):")
        if "aborted" in report:
            print(f"  the run STOPPED early: {report['aborted']['why']}")
        report["checks"] = [
            result for text, ok, measured in checks(report) for result in acceptance([(text, ok)], measured)
        ]
        if args.json:
            print(json.dumps(report, default=str))
    finally:
        for bench in STARTED:
            bench.kill_all()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--partitions", type=int, default=None, help=f"default {FULL_PARTITIONS:,} ({QUICK_PARTITIONS:,} with --quick)"
    )
    p.add_argument("--quick", action="store_true", help="50,000 partitions, 1 idle minute, 2 trials")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dir", help="where the data directories go (default: the repository's disk)")
    p.add_argument("--brokers", type=int, default=6)
    p.add_argument("--trials", type=int, default=None, help="kill -9 trials (default 5; 2 with --quick)")
    p.add_argument(
        "--idle-minutes", type=float, default=None, help="the idle phase (default 10; 1 with --quick; 0: skip)"
    )
    p.add_argument(
        "--appender-seconds",
        type=float,
        default=None,
        help="the appender's baseline window (default 5; 3 with --quick)",
    )
    p.add_argument(
        "--create-deadline",
        type=float,
        default=None,
        help="stop sending CreateTopics after this many seconds and go on at the size reached (default 900)",
    )
    p.add_argument("--keep", action="store_true", help="keep the data directories and logs")
    p.add_argument("--stub-brokers", help=argparse.SUPPRESS)
    p.add_argument("--count", type=int, default=6, help=argparse.SUPPRESS)
    p.add_argument("--chunk-server", type=int, help=argparse.SUPPRESS)
    p.add_argument("--file", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.stub_brokers:
        return stub_brokers_main(args.stub_brokers, args.count)
    if args.chunk_server:
        return chunk_server_main(args.chunk_server, args.file)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
