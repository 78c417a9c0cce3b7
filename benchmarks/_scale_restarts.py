"""The scale benchmark's phases that stop nodes (``scale.py``): a controller and a broker restarted (and the
restarted controller made active to compare its DescribeTopics), kill -9 failover trials, a follower wiped and
rebuilt from the leader's snapshot; and that last one's baselines: a file copy + fsync, and a raw gRPC transfer
from a server answering byte ranges of the snapshot (run as ``scale.py --chunk-server``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import grpc  # noqa: E402
from _scale_cluster import (  # noqa: E402
    BIG_MESSAGES,
    Bench,
    BrokerProcess,
    NotLeader,
    log_size,
    metadata_files,
    wall_time,
)
from _scale_measure import PhaseCpu  # noqa: E402
from _stats import error_name, huge_page_bytes, log_events, median, rss_bytes  # noqa: E402
from create_topics import cpu_seconds, failed_codes, topic_request  # noqa: E402

from pykraft.api import controller_pb2_grpc as pb_grpc  # noqa: E402
from pykraft.testing import free_ports  # noqa: E402
from quorum.log.log import METADATA_PARTITION_DIR  # noqa: E402

CHUNK_BYTES = 8 * 1024 * 1024  # Raft's fetch_max_bytes: a FetchSnapshot answer's size


async def restart_controller(bench: Bench) -> dict[str, Any]:
    """A follower, snapshotted first (as before maintenance), stopped gracefully and started: exec to ready."""
    leader = await bench.leader_id()
    node_id = next(i for i in bench.cluster.nodes if i != leader)
    node = bench.cluster.nodes[node_id]
    snap, _ = await bench.create_snapshot(node.address)
    code = await asyncio.to_thread(node.terminate, 60)
    since = log_size(node.log_path)
    meter = PhaseCpu(bench)
    started = time.perf_counter()
    node.start()
    ready = await bench.wait_node_ready(
        f"controller {node_id}", lambda: bench.controller_progress(node_id), started, timeout=600
    )
    assert node.proc is not None
    cpu = cpu_seconds(node.proc.pid)
    progress = await bench.controller_progress(node_id)
    loaded = log_events(node.log_path, "snapshot_loaded", since)
    delivered = log_events(node.log_path, "snapshot_delivered", since)
    return {
        "node": node_id,
        "exit_code": code,
        "snapshot": f"{snap.end_offset}-{snap.epoch}",
        "snapshot_bytes": snap.size_bytes,
        "ready_s": ready,
        "process_cpu_s": cpu,
        "snapshot_loaded": loaded[-1] if loaded else None,
        "snapshot_delivered_s": delivered[-1]["seconds"] if delivered else None,
        "tail_records": (progress[1] + 1 - snap.end_offset) if progress else None,
        **meter.used(),
    }


async def restart_broker(bench: Bench) -> dict[str, Any]:
    """A broker, snapshotted first, stopped gracefully (controlled shutdown) and started: exec to ready — its
    ``metadata_caught_up`` line (the image holds the high watermark it last heard of), or its metrics when it
    exports a log end and an applied offset."""
    broker_id = min(bench.brokers)
    b = bench.brokers[broker_id]
    uses_metrics = await bench.broker_progress(broker_id) is not None
    snap, _ = await bench.create_snapshot(f"127.0.0.1:{b.listener_port}")
    stopping = time.perf_counter()
    stop_since = log_size(b.log_path)
    code = await asyncio.to_thread(b.terminate, 120)
    stop_s = time.perf_counter() - stopping  # SIGTERM to exit: the controlled shutdown, then a snapshot
    since = log_size(b.log_path)
    shutdown_snapshot = log_events(b.log_path, "shutdown_snapshot", stop_since)
    no_snapshot = [
        e
        for name in ("shutdown_snapshot_skipped", "shutdown_snapshot_failed")
        for e in log_events(b.log_path, name, stop_since)
    ]
    meter = PhaseCpu(bench)
    started_wall = time.time()
    started = time.perf_counter()
    b.start()
    assert b.proc is not None
    if uses_metrics:
        ready = await bench.wait_node_ready(
            f"broker {broker_id}", partial(bench.broker_progress, broker_id), started, timeout=600
        )
        how = "metrics"
    else:
        deadline = time.monotonic() + 600
        while not (caught := log_events(b.log_path, "metadata_caught_up", since)):
            if time.monotonic() > deadline or not b.alive:
                raise TimeoutError(f"broker {broker_id} logged no metadata_caught_up")
            await asyncio.sleep(0.02)
        ready = wall_time(caught[-1]) - started_wall
        how = "metadata_caught_up"
    cpu = cpu_seconds(b.proc.pid)
    loaded = log_events(b.log_path, "snapshot_loaded", since)
    observer = log_events(b.log_path, "metadata_observer_started", since)
    caught_up = log_events(b.log_path, "metadata_caught_up", since)
    # The records its image replayed after the snapshot: the controlled shutdown's changes among them.
    tail = caught_up[-1]["metadata_offset"] - observer[-1]["loaded_offset"] if caught_up and observer else None
    return {
        "broker": broker_id,
        "exit_code": code,
        "stop_s": stop_s,
        "tail_records": tail,
        "snapshot": f"{snap.end_offset}-{snap.epoch}" if not snap.error_code else error_name(snap.error_code),
        "snapshot_bytes": snap.size_bytes,
        "shutdown_snapshot": shutdown_snapshot[-1] if shutdown_snapshot else None,
        "no_shutdown_snapshot": no_snapshot[-1] if no_snapshot else None,  # why not: skipped, or failed
        "ready_s": ready,
        "ready_from": how,
        "exec_wall_time": started_wall,
        "log_since": since,
        "process_cpu_s": cpu,
        "snapshot_loaded": loaded[-1] if loaded else None,
        "observer_load_s": observer[-1].get("load_seconds") if observer else None,
        **meter.used(),
    }


async def make_active(bench: Bench, node_id: int, max_moves: int = 8) -> int:
    """Stop the leader gracefully (it resigns), start it again and wait until it is ready, until ``node_id``
    leads; the number of moves it took."""
    for moves in range(max_moves + 1):
        leader = await bench.leader_id()
        while leader is None:
            await asyncio.sleep(0.05)
            leader = await bench.leader_id()
        if leader == node_id:
            await bench.cluster.wait_for_leader(timeout=60)
            return moves
        if moves == max_moves:
            break
        node = bench.cluster.nodes[leader]
        await asyncio.to_thread(node.terminate, 60)
        await bench.cluster.wait_for_leader(timeout=60)
        started = time.perf_counter()
        node.start()
        await bench.wait_node_ready(f"controller {leader}", partial(bench.controller_progress, leader), started, 600)
    raise RuntimeError(f"controller {node_id} did not become the leader in {max_moves} moves")


async def leader_digest(bench: Bench, attempts: int = 10) -> dict[str, Any]:
    """The leader's description of every topic asked for (again from the next leader if it changes meanwhile)."""
    for _ in range(attempts):
        leader, _ = await bench.cluster.wait_for_leader(timeout=60)
        try:
            return await bench.topics_digest(bench.cluster.nodes[leader].address)
        except NotLeader:
            continue
    raise RuntimeError(f"no leader stayed one through a DescribeTopics of every topic in {attempts} attempts")


async def digest_when_active(bench: Bench, node_id: int, attempts: int = 5) -> tuple[int, dict[str, Any]]:
    """Make ``node_id`` the active controller and describe every topic there: (leader moves it took, digest)."""
    moves = 0
    for _ in range(attempts):
        moves += await make_active(bench, node_id)
        try:
            return moves, await bench.topics_digest(bench.cluster.nodes[node_id].address)
        except NotLeader:
            continue
    raise RuntimeError(f"controller {node_id} did not stay active through a DescribeTopics in {attempts} attempts")


async def same_as_a_broker(bench: Bench, node_id: int, first: dict[str, Any], attempts: int = 10) -> bool:
    """Does controller ``node_id`` describe every topic as a broker's image does, at some instant? (Both follow
    the same log; asked one after the other they may be an ISR change apart, so a few rounds.)"""
    broker = next(iter(bench.brokers.values()))
    mine = first
    for _ in range(attempts):
        theirs = await bench.topics_digest(f"127.0.0.1:{broker.listener_port}")
        if theirs == mine:
            return True
        await asyncio.sleep(1.0)
        mine = await bench.topics_digest(bench.cluster.nodes[node_id].address)
    return False


async def failover_trial(bench: Bench, prefix: str) -> dict[str, Any]:
    """kill -9 of the active controller; the seconds until a CreateTopics is accepted again (every surviving
    controller asked every 10 ms, each ask answered or timed out within 1 s), and until the first survivor saw
    the leader's connection end; then the node is restarted and caught up again, and a bare process of the
    killed node's size is killed the same way (:func:`socket_close_after_kill_s`)."""
    leader, epoch = await bench.cluster.wait_for_leader(timeout=60)
    survivors = [bench.cluster.nodes[i] for i in bench.cluster.nodes if i != leader]
    node = bench.cluster.nodes[leader]
    assert node.proc is not None
    resident = rss_bytes(node.proc.pid) or 0
    huge = huge_page_bytes(node.proc.pid) or 0
    logs_since = {n.node_id: log_size(n.log_path) for n in survivors}
    channels = [grpc.aio.insecure_channel(n.address) for n in survivors]
    stubs = [pb_grpc.ControllerStub(ch) for ch in channels]
    errors: dict[str, int] = {}
    attempt = 0

    accepted: list[float] = []

    async def ask(stub: pb_grpc.ControllerStub, name: str) -> bool:
        bench.topic_names.append(name)
        try:
            r = await stub.CreateTopics(topic_request([name]), timeout=1.0)
        except grpc.aio.AioRpcError as e:
            key = f"grpc {e.code().name}"
            errors[key] = errors.get(key, 0) + 1
            return False
        codes = failed_codes(r, 1)
        for c in codes:
            errors[c] = errors.get(c, 0) + 1
        if not codes:
            accepted.append(time.perf_counter())
        return not codes

    try:
        for s in stubs:  # connected before the kill: the client exists already
            await ask(s, f"{prefix}-warm-{id(s)}")
        errors.clear()
        accepted.clear()
        asks: list[asyncio.Task[bool]] = []
        killed_wall = time.time()
        started = time.perf_counter()
        node.kill()
        # Every 10 ms a new CreateTopics to each survivor, not waiting for the earlier ones (each gives up after
        # 1 s): the first one accepted ends the outage, whichever it was.
        while not accepted:
            attempt += 1
            asks += [asyncio.create_task(ask(s, f"{prefix}-{attempt}-{k}")) for k, s in enumerate(stubs)]
            if time.perf_counter() - started > 120:
                raise TimeoutError(f"no CreateTopics accepted within 120 s of the kill ({errors})")
            await asyncio.sleep(0.01)
        unavailable = min(accepted) - started
        await asyncio.gather(*asks)
    finally:
        for ch in channels:
            await ch.close()
    new_leader, new_epoch = await bench.cluster.wait_for_leader(timeout=60)
    restarted = time.perf_counter()
    node.start()
    ready = await bench.wait_node_ready(
        f"controller {leader}", lambda: bench.controller_progress(leader), restarted, 600
    )
    # A follower logs the leader's connection ending as its role changes (to Prospective: pre-vote).
    seen = [
        wall_time(e)
        for n in survivors
        for e in log_events(n.log_path, "role_changed", logs_since[n.node_id])
        if e.get("old_role") == "Follower" and wall_time(e) >= killed_wall
    ]
    return {
        "killed": leader,
        "epoch": epoch,
        "new_leader": new_leader,
        "new_epoch": new_epoch,
        "unavailable_s": unavailable,
        "leader_loss_seen_s": min(seen) - killed_wall if seen else None,
        "killed_rss_bytes": resident,
        "killed_huge_page_bytes": huge,
        "bare_process_close_s": await asyncio.to_thread(socket_close_after_kill_s, resident),
        "attempts": attempt,
        "errors_while_unavailable": errors,
        "killed_node_ready_after_restart_s": ready,
    }


async def failover(bench: Bench, trials: int, prefix: str) -> dict[str, Any]:
    meter = PhaseCpu(bench)
    results = [await failover_trial(bench, f"{prefix}-{t}") for t in range(trials)]
    times = [r["unavailable_s"] for r in results]
    seen = [r["leader_loss_seen_s"] for r in results if r["leader_loss_seen_s"] is not None]
    return {
        "trials": results,
        "median_s": median(times),
        "min_s": min(times),
        "max_s": max(times),
        "loss_seen_median_s": median(seen) if seen else None,
        "bare_close_median_s": median([r["bare_process_close_s"] for r in results]),
        "killed_rss_median_bytes": median([r["killed_rss_bytes"] for r in results]),
        "killed_huge_page_median_bytes": median([r["killed_huge_page_bytes"] for r in results]),
        **meter.used(),
    }


def kill_text(failover: dict[str, Any]) -> str:
    """Where a failover's time went before anyone could act: the kernel's exit of the killed process."""
    seen, bare = failover["loss_seen_median_s"], failover["bare_close_median_s"]
    return (
        f"a survivor saw the leader's connection end after: median "
        f"{'n/a' if seen is None else f'{seen * 1000:.0f} ms'}; a bare process of the killed node's RSS "
        f"({failover['killed_rss_median_bytes'] / 2**20:,.0f} MiB, of it in huge pages "
        f"{failover['killed_huge_page_median_bytes'] / 2**20:,.0f} MiB; the bare one in 4 KiB pages) killed the same "
        f"way closes its socket after {bare * 1000:.0f} ms (median): the kernel frees a killed process's memory "
        "before closing its sockets"
    )


def socket_close_after_kill_s(resident: int) -> float:
    """A bare Python process holding ``resident`` bytes of touched memory and one TCP connection, killed with
    SIGKILL: the seconds until its peer reads the connection's end. Linux frees a killed process's memory before it
    closes its files (``do_exit``: ``exit_mm`` before ``exit_files``), so a survivor learns of a kill -9 later the
    larger the killed node is: here 7-11 ms at 50 MiB, 36-54 ms at 500 MiB, 70-95 ms at 1 GiB."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        child = subprocess.Popen(
            [sys.executable, "-c", _BARE_PROCESS, str(resident), str(port)], stdin=subprocess.DEVNULL
        )
        try:
            server.settimeout(60)
            conn, _ = server.accept()
            with conn:
                conn.settimeout(60)
                conn.recv(1)  # its memory is touched: the child says so
                started = time.perf_counter()
                child.kill()
                try:
                    conn.recv(1)
                except ConnectionResetError:
                    pass
                return time.perf_counter() - started
        finally:
            child.kill()
            child.wait()


_BARE_PROCESS = """
import socket, sys, time
memory = bytearray(int(sys.argv[1]))
memory[::4096] = b"\\x01" * len(range(0, len(memory), 4096))  # every page touched: resident
with socket.create_connection(("127.0.0.1", int(sys.argv[2]))) as s:
    s.sendall(b"r")
    time.sleep(600)
"""


async def wiped_follower(bench: Bench, chunk_port: int | None) -> dict[str, Any]:
    """A follower stopped, its data directory deleted, started: the snapshot it fetches, per second."""
    view = await bench.leader_view()
    assert view is not None
    leader = view.leader_id
    leader_node = bench.cluster.nodes[leader]
    node_id = next(i for i in bench.cluster.nodes if i != leader)
    node = bench.cluster.nodes[node_id]
    out: dict[str, Any] = {
        "node": node_id,
        "leader_log_start": view.log_start_offset,
        "leader_snapshot": f"{view.latest_snapshot_end_offset}-{view.latest_snapshot_epoch}",
        "leader_snapshot_bytes": view.latest_snapshot_bytes,
    }
    await asyncio.to_thread(node.terminate, 60)
    shutil.rmtree(node.data_dir)
    since = log_size(node.log_path)
    meter = PhaseCpu(bench)
    started_wall = time.time()
    started = time.perf_counter()
    node.start()
    ready = await bench.wait_node_ready(
        f"controller {node_id}", lambda: bench.controller_progress(node_id), started, 600
    )
    out.update(meter.used())
    out["ready_s"] = ready
    out.update(install_figures(node.log_path, since, node.data_dir, started_wall))
    if out["installed"]:
        source = leader_node.data_dir / METADATA_PARTITION_DIR / out["snapshot_file"]
        if source.exists():
            out["file_copy_mib_per_s"] = file_copy_rate(source, bench.root / "copy.tmp") / 2**20
            if chunk_port is not None:
                out["raw_grpc_mib_per_s"] = await raw_grpc_rate(chunk_port, source.stat().st_size) / 2**20
    out["files"] = metadata_files(node.data_dir)
    return out


async def new_broker(bench: Bench, timeout: float = 600) -> dict[str, Any]:
    """A broker that never ran joins (the next id, an empty metadata directory): its observer fetches the leader's
    snapshot over its gRPC stream. Exec to snapshot installed per second; then to caught up and unfenced. It
    stays in the cluster (and in the end-of-run checks)."""
    template = bench.brokers[max(bench.brokers)]
    broker_id = max(bench.brokers) + 1
    listener_port, metrics_port = free_ports(2)
    data_dir = bench.root / f"broker{broker_id}"
    args = list(template.args)  # the same command line, but for what must be its own
    for flag, value in (
        ("--broker-id", str(broker_id)),
        ("--listener", f"127.0.0.1:{listener_port}"),
        ("--metrics-port", str(metrics_port)),
        ("--metadata-dir", str(data_dir)),
    ):
        args[args.index(flag) + 1] = value
    b = BrokerProcess(
        broker_id, template.rack, args, data_dir, bench.root / f"broker{broker_id}.log", listener_port, metrics_port
    )
    bench.brokers[broker_id] = b
    meter = PhaseCpu(bench)
    started_wall = time.time()
    b.start()
    deadline = time.monotonic() + timeout
    events: dict[str, list[dict[str, Any]]] = {}

    def seen(name: str, **match: Any) -> list[dict[str, Any]]:
        events[name] = [e for e in log_events(b.log_path, name) if all(e.get(k) == v for k, v in match.items())]
        return events[name]

    while not (seen("metadata_caught_up") and seen("broker_fencing_changed", fenced=False)):
        if time.monotonic() > deadline or not b.alive:
            raise TimeoutError(f"broker {broker_id} was not caught up and unfenced within {timeout:.0f} s")
        await asyncio.sleep(0.05)
    out: dict[str, Any] = {"broker": broker_id, **meter.used()}
    since_exec = {name: wall_time(found[-1]) - started_wall for name, found in events.items()}
    out["caught_up_s"], out["unfenced_s"] = since_exec["metadata_caught_up"], since_exec["broker_fencing_changed"]
    out.update(install_figures(b.log_path, 0, data_dir, started_wall))
    return out


def install_figures(log_path: Path, since: int, data_dir: Path, started_wall: float) -> dict[str, Any]:
    """A node's FetchSnapshot from its log (from byte ``since``): whether it installed one, which, its size, and
    per second from exec (``started_wall``) and from the fetch's start."""
    installed = log_events(log_path, "snapshot_installed", since)
    fetch_started = log_events(log_path, "snapshot_fetch_started", since)
    out: dict[str, Any] = {"installed": bool(installed), "fetches": len(fetch_started)}
    if not installed:
        return out
    sid = installed[-1]["snapshot"]
    offset, _, epoch = sid.partition("-")
    name = f"{int(offset):020d}-{int(epoch):010d}.checkpoint"
    path = data_dir / METADATA_PARTITION_DIR / name
    size = path.stat().st_size if path.exists() else None
    t_installed = wall_time(installed[-1]) - started_wall
    out.update(snapshot=sid, snapshot_file=name, snapshot_bytes=size, exec_to_installed_s=t_installed)
    out["mib_per_s"] = size / t_installed / 2**20 if size and t_installed > 0 else None
    if fetch_started:
        transfer = wall_time(installed[-1]) - wall_time(fetch_started[-1])
        out["fetch_started_to_installed_s"] = transfer
        out["transfer_mib_per_s"] = size / transfer / 2**20 if size and transfer > 0 else None
    return out


def new_broker_text(r: dict[str, Any], target_mib_s: float) -> str:
    if not r["installed"]:
        caught_up = f"caught up {r['caught_up_s']:.2f} s after exec"
        return f"b{r['broker']}: NO snapshot installed  FAIL (it was sent the log); {caught_up}"
    rate = r["mib_per_s"] or 0
    verdict = "PASS" if rate >= target_mib_s else "FAIL"
    return (
        f"b{r['broker']}: snapshot {r['snapshot']} ({(r['snapshot_bytes'] or 0) / 2**20:,.1f} MiB) installed "
        f"{r['exec_to_installed_s']:.2f} s after exec: {rate:,.1f} MiB/s  {verdict} (>= {target_mib_s:.0f} MiB/s); "
        f"fetch_started to installed {r.get('fetch_started_to_installed_s', float('nan')):.2f} s "
        f"({r.get('transfer_mib_per_s') or 0:,.1f} MiB/s, {r['fetches']} fetch(es) started); caught up "
        f"{r['caught_up_s']:.2f} s and unfenced {r['unfenced_s']:.2f} s after exec"
    )


# -- the raw gRPC baseline for snapshot transfer: a server answering byte ranges of a file ------------------------


def chunk_server_main(port: int, path: str) -> int:
    from pykraft.node import run_loop

    async def read(request: bytes, context: Any) -> bytes:
        position = int.from_bytes(request, "big")
        with open(path, "rb") as f:  # as the leader does: a read of the snapshot file per request
            f.seek(position)
            return f.read(CHUNK_BYTES)

    async def main() -> int:
        server = grpc.aio.server(options=BIG_MESSAGES)
        handler = grpc.unary_unary_rpc_method_handler(read)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Chunks", {"Read": handler}),))
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()
        return 0

    return run_loop(main())


async def raw_grpc_rate(port: int, size: int) -> float:
    """Bytes/s fetching ``size`` bytes from the chunk server, one 8 MiB request after another."""
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=BIG_MESSAGES) as ch:
        read = ch.unary_unary("/bench.Chunks/Read")
        await read((0).to_bytes(8, "big"), timeout=30)  # connected and warm
        started = time.perf_counter()
        position = 0
        while position < size:
            data = await read(position.to_bytes(8, "big"), timeout=30)
            if not data:
                break
            position += len(data)
        return position / (time.perf_counter() - started)


def file_copy_rate(source: Path, dest: Path) -> float:
    """Bytes/s copying ``source`` in 8 MiB chunks and fsyncing the copy (what installing a fetched snapshot writes)."""
    started = time.perf_counter()
    copied = 0
    with source.open("rb") as src, dest.open("wb") as out:
        while chunk := src.read(CHUNK_BYTES):
            out.write(chunk)
            copied += len(chunk)
        out.flush()
        os.fsync(out.fileno())
    rate = copied / (time.perf_counter() - started)
    dest.unlink()
    return rate
