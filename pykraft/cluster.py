"""``pykraft cluster up | down | describe | bootstrap``: a local cluster on loopback.

``up`` starts 3 controller nodes and 6 broker agents over 3 racks (by default) as background processes, data under
``--data-dir`` (./data) and their logs in its ``logs/`` folder (``*.log``: the structured events, rotated by size;
``*.out``: anything else a process prints, such as a crash's stacks — nothing beside the data looks like a segment),
waits until a controller leads and every broker is unfenced, and returns, printing the bootstrap servers. If the
cluster does not become healthy in time, ``up`` stops every process it started and says so. Each broker replicates
the metadata log as a Raft observer into its own ``broker-<id>/metadata`` directory (and is unfenced once it has
caught up with its registration). Controller ports 9091.. are used when free, otherwise free ones are chosen (and
``up`` says so); a restart reuses every port of the previous run (controllers, brokers, metrics) where free, so
scrape targets stay put. ``cluster.json`` in the data directory records what was started, so ``down`` stops
exactly those processes (by PID, checked against their command line) — brokers first (controlled shutdown), then
controllers (the leader resigns).

``up --tls`` makes (or keeps) a private CA and a certificate per controller (``controller-<id>``), broker
(``broker-<id>``) and admin client (``admin``) under ``<data-dir>/tls`` (:mod:`pykraft.security.ca`), starts every
process with ``security.protocol=SSL`` and its own certificate (mutual TLS everywhere), and writes
``tls/admin.properties`` for the admin tools' ``--command-config``; its own checks, and ``describe`` of the data
directory, use it. The controllers then authorize every request (Kafka's StandardAuthorizer), and the brokers the
reads they answer from their metadata images; ``admin``, the brokers and the controllers are ``super.users``, any
other principal needs ACLs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from pykraft.cli_common import add_bootstrap_arguments, at_least, non_negative_int, positive_int
from pykraft.client import AdminClient, AdminError
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.command_config import CommandConfigError, tls_settings_from_command_config
from pykraft.security.tls import TlsSettings
from pykraft.testing import free_ports
from quorum.fault import FATAL_EVENT, FATAL_EXIT_CODE
from quorum.log.message import Uuid
from quorum.log.meta_properties import META_PROPERTIES, read_properties

STATE_FILE = "cluster.json"
STOPPED_FILE = "cluster.stopped.json"  # what `down` stopped: `up` restarts on its ports (the voter set names them)
DEFAULT_PORTS = (9091, 9092, 9093)
LOGS_DIR = "logs"  # each process's output: logs/controller-1.out, logs/broker-101.out
TLS_DIR = "tls"  # with --tls: the CA, every process's certificate and key, admin.properties
ADMIN_PROPERTIES = "admin.properties"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"  # with --tls: ACLs enforced


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="cluster_command", required=True, metavar="SUBCOMMAND")
    up = sub.add_parser("up", help="start a local cluster in the background")
    up.add_argument("--data-dir", default="./data", help="where the nodes' data and logs/ go")
    up.add_argument("--controllers", type=positive_int, default=3, help="controller nodes (Raft voters)")
    up.add_argument("--brokers", type=non_negative_int, default=6, help="broker agents (Raft observers)")
    up.add_argument("--racks", type=positive_int, default=3, help="racks the brokers are spread over")
    up.add_argument(
        "--timeout", type=at_least(0.1, float), default=60, help="seconds to wait for the cluster to be healthy"
    )
    up.add_argument(
        "--produce-rate",
        type=float,
        default=0.0,
        metavar="MSGS",
        help="each broker's simulated produce rate: messages per second per partition it leads (default 0: idle)",
    )
    up.add_argument("--replica-lag-time-max-ms", type=int, default=30_000, help="the brokers' replica.lag.time.max.ms")
    up.add_argument(
        "--initial-partition-bytes",
        type=int,
        default=0,
        metavar="N",
        help="log bytes each original replica starts with (default 0); replicas a reassignment adds start empty",
    )
    up.add_argument(
        "--disk-rate",
        type=int,
        default=None,
        metavar="BYTES_PER_S",
        help="bytes per second each broker may append as a follower (default: unlimited)",
    )
    up.add_argument(
        "--tls",
        action="store_true",
        help=f"mutual TLS everywhere: a private CA and a certificate per process under DATA/{TLS_DIR}, and "
        f"DATA/{TLS_DIR}/{ADMIN_PROPERTIES} for the admin tools' --command-config",
    )
    down = sub.add_parser("down", help="stop the local cluster started in --data-dir")
    down.add_argument("--data-dir", default="./data", help="the directory `cluster up` was given")
    boot = sub.add_parser("bootstrap", help="print the bootstrap servers of the cluster in --data-dir")
    boot.add_argument("--data-dir", default="./data", help="the directory `cluster up` was given")
    desc = sub.add_parser("describe", help="controllers (processes, ports), brokers, racks, fencing")
    add_bootstrap_arguments(desc, required=False, help="controller nodes (default: the cluster in --data-dir)")
    desc.add_argument("--data-dir", default="./data", help="the directory `cluster up` was given")
    desc.add_argument("--output", choices=("text", "json"), default="text", help="text or one JSON object")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        # As a server binds (gRPC sets SO_REUSEADDR): connections in TIME_WAIT, left by a node that just stopped,
        # do not make the port busy; a listener does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int, data_dir: Path) -> bool:
    """Is ``pid`` still the pykraft process we started for ``data_dir``?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return "pykraft" in cmdline and str(data_dir) in cmdline


def _state(data_dir: Path, name: str = STATE_FILE) -> dict | None:
    path = data_dir / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _running(state: dict, data_dir: Path) -> list[int]:
    return [p["pid"] for p in state["controllers"] + state["brokers"] if _alive(p["pid"], data_dir)]


def _formatted_cluster_id(data_dir: Path) -> str | None:
    """The cluster id a controller's data directory was formatted with, if one was."""
    for meta in sorted(data_dir.glob(f"controller-*/{META_PROPERTIES}")):
        cluster_id = read_properties(meta).get("cluster.id")
        if cluster_id:
            return cluster_id
    return None


def _spawn(args: list[str], log_path: Path) -> int:
    with log_path.open("ab") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return proc.pid


class PortPlan:
    """The ports of a cluster run: the previous run's where still free (the voter set and scrape targets stay
    put), the defaults where asked, else ports free now; never the same port twice."""

    def __init__(self) -> None:
        self.taken: set[int] = set()

    def _fresh(self, n: int) -> list[int]:
        ports: list[int] = []
        while len(ports) < n:
            ports += [p for p in free_ports(n - len(ports)) if p not in self.taken and p not in ports]
        return ports

    def choose(self, n: int, previous: list[int] | None, default: list[int] | None = None) -> list[int]:
        for wanted in (previous, default):
            if wanted and len(wanted) == n and not set(wanted) & self.taken and all(map(_port_free, wanted)):
                self.taken.update(wanted)
                return list(wanted)
        ports = self._fresh(n)
        self.taken.update(ports)
        return ports


def _previous(previous: dict | None, group: str, key: str) -> list[int] | None:
    if not previous:
        return None
    try:
        return [int(p[key]) for p in previous[group]]
    except (KeyError, TypeError, ValueError):
        return None  # a cluster.json from an older pykraft: no such port recorded


def _stop(pids: list[int], data_dir: Path, grace_s: float = 20) -> list[int]:
    """SIGTERM our processes (checked by command line), SIGKILL what is left after ``grace_s``; returns the PIDs
    still alive after that (none, normally)."""
    pids = [pid for pid in pids if _alive(pid, data_dir)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(pid, data_dir) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid, data_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    time.sleep(0.1)
    return [pid for pid in pids if _alive(pid, data_dir)]


def _prepare(data_dir: Path) -> str | None:
    """Make the data directory and its logs folder; a one-line reason when that cannot be done."""
    if data_dir.exists() and not data_dir.is_dir():
        return f"--data-dir {data_dir}: exists and is not a directory"
    try:
        (data_dir / LOGS_DIR).mkdir(parents=True, exist_ok=True)
        probe = data_dir / ".pykraft-write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return f"--data-dir {data_dir}: {e.strerror or e}"
    return None


def up(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    problem = _prepare(data_dir)
    if problem:
        print(f"pykraft cluster up: {problem}", file=sys.stderr)
        return 1
    state = _state(data_dir)
    if state and _running(state, data_dir):
        print(f"A cluster is already running from {data_dir}.")
        print(f"Bootstrap servers: {state['bootstrap']}")
        if state.get("tls"):
            print(f"TLS: clients need --command-config {state['tls']['admin_properties']}")
        return 0
    n = args.controllers
    previous = state or _state(data_dir, STOPPED_FILE)
    # The cluster id is chosen once and kept: the nodes' data is formatted for it, whatever ports they get later.
    cluster_id = (previous or {}).get("cluster_id") or _formatted_cluster_id(data_dir) or str(Uuid.random())
    plan = PortPlan()
    before = _previous(previous, "controllers", "port")
    defaults = list(DEFAULT_PORTS[:n]) if n <= len(DEFAULT_PORTS) else None
    ports = plan.choose(n, before, defaults)
    wanted = before if before and len(before) == n else defaults
    if wanted and ports != wanted:
        what = "the previous run's ports" if wanted == before else "the default ports"
        print(
            f"note: {what} {','.join(map(str, wanted))} are in use; the controllers listen on "
            f"{','.join(map(str, ports))} instead"
        )
    metrics = plan.choose(n, _previous(previous, "controllers", "metrics_port"))
    # Kafka's protocol on each controller, for Kafka's own admin clients (an SSL listener with --tls: each
    # controller's own certificate, clients' from the cluster CA)
    kafka_ports = plan.choose(n, _previous(previous, "controllers", "kafka_port"))
    kafka_listeners = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(kafka_ports))
    broker_ports = plan.choose(args.brokers, _previous(previous, "brokers", "port"))
    broker_metrics = plan.choose(args.brokers, _previous(previous, "brokers", "metrics_port"))
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
    py = [sys.executable, "-m", "pykraft"]
    logs = data_dir / LOGS_DIR
    broker_ids = [101 + j for j in range(args.brokers)]
    certs: dict[str, CertFiles] = {}
    admin_properties: Path | None = None
    if args.tls:
        names = [f"controller-{i + 1}" for i in range(n)] + [f"broker-{b}" for b in broker_ids] + ["admin"]
        certs = ensure_cluster_certificates(data_dir / TLS_DIR, names)
        admin_properties = _write_admin_properties(data_dir / TLS_DIR, certs["admin"])

    def tls_options(name: str) -> list[str]:  # every process is started with its own certificate
        if not certs:
            return []
        # The controllers authorize every request, and the brokers every read they answer from their images; the
        # cluster's own principals are super users (as in Kafka's setups): ACLs are for everyone else.
        props = {**certs[name].properties(), "super.users": ";".join(f"User:{p}" for p in sorted(certs))}
        props["authorizer.class.name"] = AUTHORIZER
        return [a for k, v in props.items() for a in ("--override", f"{k}={v}")]

    controllers = []
    for i, (port, mport) in enumerate(zip(ports, metrics, strict=True)):
        node_dir = data_dir / f"controller-{i + 1}"
        args_ = [
            *py,
            "node",
            "--node-id",
            str(i + 1),
            "--controller-quorum-voters",
            voters,
            "--data-dir",
            str(node_dir),
            "--cluster-id",
            cluster_id,
            "--metrics-port",
            str(mport),
            "--override",
            f"default.replication.factor={min(3, max(args.brokers, 1))}",
            "--override",
            "num.partitions=3",
            *tls_options(f"controller-{i + 1}"),
        ]
        if kafka_ports:
            args_ += [
                "--kafka-listener",
                f"127.0.0.1:{kafka_ports[i]}",
                "--kafka-controller-listeners",
                kafka_listeners,
            ]
        log_path, out_path = logs / f"controller-{i + 1}.log", logs / f"controller-{i + 1}.out"
        pid = _spawn([*args_, "--log-file", str(log_path)], out_path)
        controllers.append(
            {
                "id": i + 1,
                "port": port,
                "metrics_port": mport,
                "kafka_port": kafka_ports[i] if kafka_ports else None,
                "pid": pid,
                "data_dir": str(node_dir),
                "log": str(log_path),
                "out": str(out_path),
            }
        )
    brokers = []
    broker_options = ["--initial-partition-bytes", str(args.initial_partition_bytes)]
    if args.disk_rate is not None:
        broker_options += ["--disk-rate", str(args.disk_rate)]
    for j, broker_id in enumerate(broker_ids):
        rack = f"rack-{j % args.racks + 1}"
        metadata_dir = data_dir / f"broker-{broker_id}" / "metadata"
        args_ = [
            *py,
            "broker",
            "--broker-id",
            str(broker_id),
            "--rack",
            rack,
            "--bootstrap-server",
            bootstrap,
            "--listener",
            f"127.0.0.1:{broker_ports[j]}",
            "--controller-quorum-voters",
            voters,
            "--metadata-dir",
            str(metadata_dir),
            "--cluster-id",
            cluster_id,
            "--data-dir-tag",
            str(data_dir),
            "--produce-rate",
            str(args.produce_rate),
            "--replica-lag-time-max-ms",
            str(args.replica_lag_time_max_ms),
            "--metrics-port",
            str(broker_metrics[j]),
            *broker_options,
            *tls_options(f"broker-{broker_id}"),
        ]
        log_path, out_path = logs / f"broker-{broker_id}.log", logs / f"broker-{broker_id}.out"
        pid = _spawn([*args_, "--log-file", str(log_path)], out_path)
        brokers.append(
            {
                "id": broker_id,
                "rack": rack,
                "pid": pid,
                "port": broker_ports[j],
                "metrics_port": broker_metrics[j],
                "metadata_dir": str(metadata_dir),
                "log": str(log_path),
                "out": str(out_path),
            }
        )
    state = {
        "cluster_id": cluster_id,
        "bootstrap": bootstrap,
        "voters": voters,
        "controllers": controllers,
        "brokers": brokers,
        "started": time.time(),
    }
    if admin_properties is not None:
        state["tls"] = {"dir": str(data_dir / TLS_DIR), "admin_properties": str(admin_properties)}
    (data_dir / STATE_FILE).write_text(json.dumps(state, indent=2))
    try:
        tls = tls_settings_from_command_config(admin_properties) if admin_properties is not None else None
        controller_id = asyncio.run(_wait_healthy(bootstrap, args.brokers, args.timeout, tls))
    except TimeoutError as e:
        print(f"pykraft cluster up: {e}", file=sys.stderr)
        for c in controller_states(state, data_dir):
            if c["state"] != "running":
                print(f"  {_controller_line(c)}", file=sys.stderr)
        # Nothing half-started is left behind: stop what this run started (brokers first), keep data and logs.
        started = [p["pid"] for p in brokers] + [p["pid"] for p in controllers]
        left = _stop([p["pid"] for p in brokers], data_dir, grace_s=5) + _stop(
            [p["pid"] for p in controllers], data_dir, grace_s=5
        )
        (data_dir / STATE_FILE).replace(data_dir / STOPPED_FILE)
        if left:
            print(
                f"pykraft cluster up: stopped {len(started) - len(left)} of the {len(started)} processes it started; "
                f"still running: PIDs {' '.join(map(str, left))} (kill them with: kill {' '.join(map(str, left))})",
                file=sys.stderr,
            )
        else:
            print(
                f"pykraft cluster up: stopped the {len(started)} processes it started; data kept in {data_dir}, "
                f"their output in {logs}",
                file=sys.stderr,
            )
        return 1
    print(
        f"Cluster is up: {n} controllers (active: node {controller_id}), {args.brokers} brokers over "
        f"{min(args.racks, max(args.brokers, 1))} racks; data in {data_dir}, logs in {logs}"
    )
    print(f"Bootstrap servers: {bootstrap}")
    if kafka_ports:
        print(
            "Kafka protocol (bootstrap.servers of Kafka admin clients): "
            + ",".join(f"127.0.0.1:{p}" for p in kafka_ports)
            # admin.properties holds librdkafka's (confluent-kafka's) own names for them, usable as they stand
            + (
                f" over SSL (confluent-kafka: security.protocol=SSL, ssl.ca.location, ssl.certificate.location, "
                f"ssl.key.location as in {admin_properties})"
                if admin_properties is not None
                else ""
            )
        )
    if admin_properties is not None:
        print(
            f"TLS: mutual TLS everywhere (CA and certificates in {data_dir / TLS_DIR}); admin tools need "
            f"--command-config {admin_properties}"
        )
    scheme = "https" if admin_properties is not None else "http"  # metrics.tls: on with each process's TLS
    print("Metrics: " + ", ".join(f"{scheme}://127.0.0.1:{m}/metrics" for m in metrics))
    if broker_metrics:
        print("Broker metrics: " + ", ".join(f"{scheme}://127.0.0.1:{m}/metrics" for m in broker_metrics))
    secure = f" --command-config {admin_properties}" if admin_properties is not None else ""
    print(
        f"Try:  pykraft topics --bootstrap-server {bootstrap}{secure} --create --topic orders --partitions 6 "
        "--replication-factor 3"
    )
    print(f"Stop: pykraft cluster down --data-dir {args.data_dir}")
    return 0


def _write_admin_properties(directory: Path, admin: CertFiles) -> Path:
    """The admin client's settings in Kafka's properties form (absolute paths: usable from any directory)."""
    path = directory / ADMIN_PROPERTIES
    lines = ["# pykraft cluster up --tls: pass to the admin tools as --command-config " + str(path)]
    lines += [f"{k}={v}" for k, v in admin.properties().items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _state_tls(state: dict) -> TlsSettings | None:
    """The admin settings of a ``--tls`` cluster's state (None: a plaintext cluster)."""
    if not state.get("tls"):
        return None
    return tls_settings_from_command_config(state["tls"]["admin_properties"])


async def _wait_healthy(bootstrap: str, brokers: int, timeout: float, tls: TlsSettings | None = None) -> int:
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    async with AdminClient(bootstrap, request_timeout_ms=2000, default_api_timeout_ms=3000, tls=tls) as admin:
        while time.monotonic() < deadline:
            try:  # no call outlives --timeout
                remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
                cluster = await admin.describe_cluster(min(3000, remaining_ms))
                unfenced = sum(1 for b in cluster.brokers if not b.fenced)
                if unfenced >= brokers:
                    return cluster.controller_id
                last = f"{unfenced} of {brokers} brokers unfenced"
            except AdminError as e:
                last = str(e)
            await asyncio.sleep(0.2)
    raise TimeoutError(f"the cluster was not healthy within {timeout:.0f} s ({last})")


def down(args: argparse.Namespace) -> int:
    data_dir = Path(args.data_dir).resolve()
    state = _state(data_dir)
    if state is None:
        print(f"No cluster state in {data_dir} ({STATE_FILE} missing): nothing to stop.")
        return 0
    left = []
    for group in ("brokers", "controllers"):  # brokers first: controlled shutdown needs a controller
        left += _stop([p["pid"] for p in state[group]], data_dir)
    if left:
        print(f"pykraft cluster down: PIDs {' '.join(map(str, left))} did not stop", file=sys.stderr)
    # Kept aside, not deleted: the data was made with these controller ports, `up` must reuse them.
    (data_dir / STATE_FILE).replace(data_dir / STOPPED_FILE)
    again = " --tls" if state.get("tls") else ""
    print(
        f"Stopped the cluster in {data_dir} "
        f"(data kept; `pykraft cluster up --data-dir {args.data_dir}{again}` restarts it)."
    )
    return 0


def bootstrap(args: argparse.Namespace) -> int:
    state = _state(Path(args.data_dir).resolve())
    if state is None:
        print(f"pykraft cluster: no cluster in {args.data_dir}; run `pykraft cluster up` first", file=sys.stderr)
        return 1
    print(state["bootstrap"])
    return 0


TAIL_BYTES = 1 << 20  # how much of a node's log to read back for its last fatal fault


def last_fatal_fault(log_path: Path) -> dict | None:
    """The ``fatal_fault`` event a node logged after its last start, if it did (then it exited with code 70)."""
    try:
        with log_path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - TAIL_BYTES))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if '"node_started"' not in line and f'"{FATAL_EVENT}"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == "node_started":
            return None
        if event.get("event") == FATAL_EVENT:
            return event
    return None


def controller_states(state: dict, data_dir: Path) -> list[dict]:
    """Each controller process of a local cluster: running, exited after a fatal fault (with its cause, from its
    log), or exited otherwise."""
    out = []
    for c in state["controllers"]:
        entry = {
            "id": c["id"],
            "endpoint": f"127.0.0.1:{c['port']}",
            "metricsPort": c.get("metrics_port"),
            "pid": c["pid"],
            "state": "running",
        }
        if not _alive(c["pid"], data_dir):
            fault = last_fatal_fault(Path(c.get("log") or data_dir / f"controller-{c['id']}.log"))
            entry["state"] = "exited"
            if fault is not None:
                entry["state"] = "fatal"
                keep = ("cause", "error", "errno", "file", "epoch", "log_end_offset", "high_watermark", "timestamp")
                entry["fatalFault"] = {k: fault[k] for k in keep if k in fault}
        out.append(entry)
    return out


def _controller_line(c: dict) -> str:
    if c["state"] == "running":
        status = f"running (pid {c['pid']})"
    elif c["state"] == "exited":
        status = "not running"
    else:
        f = c["fatalFault"]
        status = f"exited after a fatal fault (code {FATAL_EXIT_CODE}): {f['cause']}: {f.get('error', '')}"
    metrics = c.get("metricsPort") or "-"
    return f"{c['id']:<16}{c['endpoint']:<22}{metrics!s:<9}{status}"


def describe(args: argparse.Namespace) -> int:
    servers = args.bootstrap_server
    tls = args.tls
    controllers: list[dict] | None = None
    if not servers:
        data_dir = Path(args.data_dir).resolve()
        state = _state(data_dir)
        if state is None:
            print(
                "pykraft cluster describe: give --bootstrap-server, or --data-dir of a running cluster", file=sys.stderr
            )
            return 1
        servers = state["bootstrap"]
        controllers = controller_states(state, data_dir)
        if tls is None:
            try:
                tls = _state_tls(state)
            except CommandConfigError as e:
                print(f"pykraft cluster describe: {e}", file=sys.stderr)
                return 1

    async def fetch():  # type: ignore[no-untyped-def]
        async with AdminClient(
            servers, default_api_timeout_ms=10_000, connect_timeout_ms=args.connect_timeout_ms, tls=tls
        ) as admin:
            return await admin.describe_cluster()

    try:
        cluster = asyncio.run(fetch())
    except (AdminError, ValueError) as e:
        if controllers is not None:  # what the local processes say is worth knowing most when none answers
            for c in controllers:
                print(_controller_line(c), file=sys.stderr)
        print(f"pykraft cluster describe: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        extra = {} if controllers is None else {"controllers": controllers}
        print(
            json.dumps(
                {
                    **extra,
                    "clusterId": cluster.cluster_id,
                    "controllerId": cluster.controller_id,
                    "brokers": [
                        {
                            "id": b.broker_id,
                            "rack": b.rack,
                            "fenced": b.fenced,
                            "inControlledShutdown": b.in_controlled_shutdown,
                            "epoch": b.broker_epoch,
                            "listeners": [f"{n}://{h}:{p}" for n, h, p in b.listeners],
                            "lastHeartbeatAgeMs": b.last_heartbeat_age_ms,
                        }
                        for b in cluster.brokers
                    ],
                }
            )
        )
        return 0
    print(f"ClusterId:    {cluster.cluster_id}")
    print(f"ControllerId: {cluster.controller_id}")
    print(f"{'BrokerId':<10}{'Rack':<10}{'State':<20}{'Epoch':>8}  Listener")
    for b in cluster.brokers:
        state_ = "controlled-shutdown" if b.in_controlled_shutdown else "fenced" if b.fenced else "unfenced"
        listener = ",".join(f"{n}://{h}:{p}" for n, h, p in b.listeners)
        print(f"{b.broker_id:<10}{b.rack or '-':<10}{state_:<20}{b.broker_epoch:>8}  {listener}")
    if controllers is not None:
        print()
        print(f"{'ControllerNode':<16}{'Endpoint':<22}{'Metrics':<9}Process")
        for c in controllers:
            print(_controller_line(c))
    return 0


def run(args: argparse.Namespace) -> int:
    return {"up": up, "down": down, "bootstrap": bootstrap, "describe": describe}[args.cluster_command](args)
