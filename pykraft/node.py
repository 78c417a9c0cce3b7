"""``pykraft node``: one controller process — data directory, metadata log, Raft over gRPC, admin API, metrics.

Settings come from flags and/or a Kafka-style properties file (``node.id``, ``controller.quorum.voters``,
``metadata.log.dir`` or ``log.dirs``, ``controller.quorum.*``, ``metadata.log.segment.bytes``); flags win.

A fatal fault (a storage error, an exception out of the Raft core, a record the controller cannot apply) ends the
process with exit code 70 after one ``fatal_fault`` log line naming the cause (:mod:`quorum.fault`).

``security.protocol=SSL`` (off by default) puts every listener and the peer streams on mutual TLS with the
``ssl.*`` settings of :mod:`pykraft.security.tls`; SIGHUP rereads the certificate files (new connections get them).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import faulthandler
import hashlib
import signal
import ssl
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import structlog

from controller.authorizer import parse_super_users
from controller.configs import BROKER_CONFIGS
from controller.placement import PLACERS
from controller.quorum_controller import ControllerSettings, QuorumController
from controller.records import deserialize
from pykraft import gc_pauses, loop_stalls
from pykraft.authorization import authorizer_enabled, controller_authorization
from pykraft.metrics_http import MetricsTls, ReloadingSslContext, metrics_tls_settings, metrics_url
from pykraft.security.peer_identity import certificate_authenticator, controller_name, peer_authenticator
from pykraft.security.ssl_context import ReloadingSslContext as FileSslContext
from pykraft.security.tls import (
    ClientAuth,
    ReloadingServerCredentials,
    TlsSettings,
    channel_credentials,
    client_ssl_context,
)
from pykraft.service import ControllerService
from quorum.errors import KafkaError
from quorum.fault import ProcessTerminatingFaultHandler, spawn
from quorum.huge_pages import collapse_periodically
from quorum.log.log import PREALLOCATE_CHUNK, LogConfig, LogCorruptionError, MetadataLog
from quorum.log.meta_properties import DirectoryLock, StorageIdentityError, ensure_meta_properties, read_properties
from quorum.log.quorum_state import QuorumStateStore
from quorum.memory import release_periodically
from quorum.raft.config import RaftConfig, VoterAddress, parse_voters
from quorum.raft.runtime import RaftNode
from quorum.transport.admin import RAW_APPEND_SETTING, QuorumAdminService
from quorum.transport.server import new_server

if TYPE_CHECKING:
    from pykraft.kafka.listener import KafkaListener

log = structlog.get_logger("pykraft.node")


FRAMES_PORT_SETTING = "pykraft.quorum.frames.port"
HUGE_PAGES_SETTING = "pykraft.memory.huge.pages"


class ConfigError(Exception):
    pass


@dataclass
class NodeSettings:
    node_id: int
    voters: dict[int, VoterAddress]
    data_dir: Path
    cluster_id: str
    raft: RaftConfig = field(default_factory=RaftConfig)
    log: LogConfig = field(default_factory=LogConfig)
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    listen_host: str | None = None
    metrics_port: int | None = None
    raw_appends: bool = False  # unsafe.raw.append.enable: the quorum admin's AppendRecords (tests, benchmarks)
    # Kafka's advertised.listeners: what clients are told to dial for each controller (NOT_CONTROLLER hints, the
    # quorum's leader endpoint) when the voter addresses are not theirs to reach, e.g. from outside a container
    # network. With external_port they are told so on that second listener only; without, on the voter port.
    advertised: dict[int, VoterAddress] | None = None
    external_port: int | None = None
    tls: TlsSettings | None = None  # security.protocol=SSL: mutual TLS on every listener and peer stream
    # pykraft.quorum.frames.port: where peers' streams may also come as frames (quorum/transport/frames.py), on the
    # listen host; 0: any free port (peers learn it from the voter port), -1: off (gRPC streams only, both ways).
    frames_port: int = 0
    # pykraft.memory.huge.pages: keep the dense heap in transparent huge pages, so that peers learn of a kill -9
    # sooner (quorum/huge_pages.py)
    huge_pages: bool = True
    metrics_tls: MetricsTls | None = None  # metrics.tls (on by default with SSL): /metrics over HTTPS
    # kafka.listener: Kafka's binary protocol on this HOST:PORT (plaintext; pykraft.kafka), and
    # kafka.controller.listeners: every controller's, so clients are sent to the active one (KIP-919)
    kafka_listener: tuple[str, int] | None = None
    kafka_listeners: dict[int, tuple[str, int]] = field(default_factory=dict)
    kafka_max_request_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    kafka_idle_ms: int = 600_000  # connections.max.idle.ms
    # max.connections, max.connections.per.ip, queued.max.request.bytes: pykraft.kafka.listener's bounds
    kafka_max_connections: int = 4096
    kafka_max_connections_per_ip: int = 1024
    kafka_queued_max_request_bytes: int = 256 * 1024 * 1024

    @property
    def address(self) -> VoterAddress:
        return self.voters[self.node_id]


def default_cluster_id(voters: dict[int, VoterAddress]) -> str:
    """Without --cluster-id, every node derives the same id from the voter set (22-char base64, like Kafka's)."""
    spec = ",".join(str(voters[v]) for v in sorted(voters))
    return base64.urlsafe_b64encode(hashlib.sha256(spec.encode()).digest()[:16]).rstrip(b"=").decode()


CONTROLLER_CONFIGS = {  # Kafka config name -> (ControllerSettings field, type)
    "num.partitions": ("num_partitions", int),
    "default.replication.factor": ("default_replication_factor", int),
    "broker.session.timeout.ms": ("session_timeout_ms", int),
    "metadata.max.idle.interval.ms": ("max_idle_interval_ms", int),
    "replica.placement.strategy": ("replica_placer", str),  # pykraft's: striped (Kafka's KRaft) | rack-unaware
    "delete.topic.enable": ("delete_topic_enable", bool),
    "auto.leader.rebalance.enable": ("auto_leader_rebalance_enable", bool),
    "leader.imbalance.check.interval.seconds": ("leader_imbalance_check_interval_s", int),
    "metadata.log.max.record.bytes.between.snapshots": ("snapshot_max_new_record_bytes", int),
    "metadata.log.max.snapshot.interval.ms": ("snapshot_max_interval_ms", int),
    "pykraft.snapshot.growth.ratio": ("snapshot_growth_ratio", float),  # pykraft's (see ControllerSettings)
    "pykraft.shutdown.snapshot.min.bytes": ("shutdown_snapshot_min_bytes", int),  # a broker's (ControllerSettings)
    "super.users": ("super_users", str),  # the authorizer's (controller/authorizer.py)
    "allow.everyone.if.no.acl.found": ("allow_everyone_if_no_acl_found", bool),
    "authorizer.class.name": ("authorizer_class_name", str),  # pykraft/authorization.py: empty = off
    "controller.event.queue.max.size": ("event_queue_max_size", int),  # pykraft's (see ControllerSettings)
    "controller.quota.window.num": ("quota_window_num", int),
    "controller.quota.window.size.seconds": ("quota_window_size_s", int),
}


def bool_property(props: dict[str, str], name: str, default: bool) -> bool:
    value = props.get(name, str(default)).strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name} must be true or false, got {props[name]!r}")
    return value == "true"


def int_property(props: dict[str, str], name: str, default: int) -> int:
    try:
        return int(props.get(name, default))
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {props[name]!r}") from None


def controller_settings(props: dict[str, str]) -> ControllerSettings:
    kwargs: dict[str, object] = {}
    for name, (attr, kind) in CONTROLLER_CONFIGS.items():
        if name not in props:
            continue
        if kind is bool:
            kwargs[attr] = bool_property(props, name, True)
        elif kind is int:
            kwargs[attr] = int_property(props, name, 0)
        elif kind is float:
            try:
                kwargs[attr] = float(props[name])
            except ValueError:
                raise ValueError(f"{name} must be a number, got {props[name]!r}") from None
        else:
            kwargs[attr] = props[name]
    settings = ControllerSettings(**kwargs)  # type: ignore[arg-type]
    if settings.replica_placer not in PLACERS:
        raise ValueError(
            f"replica.placement.strategy must be one of {sorted(PLACERS)}, got {settings.replica_placer!r}"
        )
    if settings.num_partitions < 1 or settings.default_replication_factor < 1:
        raise ValueError("num.partitions and default.replication.factor must be at least 1")
    if settings.snapshot_growth_ratio < 0:
        raise ValueError(f"pykraft.snapshot.growth.ratio must not be negative, got {settings.snapshot_growth_ratio}")
    if settings.shutdown_snapshot_min_bytes < -1:
        raise ValueError(
            "pykraft.shutdown.snapshot.min.bytes must be -1 (never) or more, "
            f"got {settings.shutdown_snapshot_min_bytes}"
        )
    if settings.snapshot_max_new_record_bytes < 1 or settings.snapshot_max_interval_ms < 0:
        raise ValueError(
            "metadata.log.max.record.bytes.between.snapshots must be at least 1 and "
            "metadata.log.max.snapshot.interval.ms at least 0"
        )
    if settings.leader_imbalance_check_interval_s < 1:
        raise ValueError("leader.imbalance.check.interval.seconds must be at least 1")
    for name, value in (
        ("controller.event.queue.max.size", settings.event_queue_max_size),
        ("controller.quota.window.num", settings.quota_window_num),
        ("controller.quota.window.size.seconds", settings.quota_window_size_s),
    ):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    parse_super_users(settings.super_users)  # a principal that is not Type:name is refused at start, as in Kafka
    authorizer_enabled(settings.authorizer_class_name)  # an authorizer we do not have: refused at start
    # Broker configs in the properties are this node's static level (under dynamic ones, above the defaults).
    for name, value in props.items():
        if name in BROKER_CONFIGS:
            try:
                BROKER_CONFIGS[name].parse(value)
            except KafkaError as e:
                raise ValueError(str(e)) from None
            settings.static_broker_configs[name] = value
    return settings


def add_node_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="Kafka-style properties file (node.id, controller.quorum.voters, ...)")
    p.add_argument("--node-id", type=int, help="node.id")
    p.add_argument("--controller-quorum-voters", help="controller.quorum.voters: 1@host:port,2@host:port,...")
    p.add_argument("--data-dir", help="metadata.log.dir: holds meta.properties and __cluster_metadata-0/")
    p.add_argument("--cluster-id", help="cluster id (default: derived from the voter set, the same on every node)")
    p.add_argument("--listen-host", help="interface to bind (default: this node's host in the voter list)")
    p.add_argument("--metrics-port", type=int, help="serve Prometheus metrics on this port (default: off)")
    p.add_argument(
        "--advertised-endpoints",
        metavar="ID@HOST:PORT,...",
        help="where clients reach each controller (like advertised.listeners), the same list on every node: "
        "NOT_CONTROLLER hints and `quorum describe` name these instead of the voter addresses",
    )
    p.add_argument(
        "--external-port",
        type=int,
        help="a second listener (on --listen-host) for clients outside the voters' network: it alone answers "
        "with --advertised-endpoints; the voter port keeps naming the voter addresses",
    )
    p.add_argument(
        "--kafka-listener",
        metavar="HOST:PORT",
        help="answer Kafka's binary protocol (admin APIs) here (kafka.listener; SSL when security.protocol=SSL); "
        "port 0: any free one",
    )
    p.add_argument(
        "--kafka-controller-listeners",
        metavar="ID@HOST:PORT,...",
        help="every controller's Kafka listener, the same list on every node (kafka.controller.listeners): "
        "Metadata sends Kafka clients to the active controller's",
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Kafka config, e.g. controller.quorum.election.timeout.ms=500 (repeatable)",
    )


def settings_from_args(args: argparse.Namespace) -> NodeSettings:
    props: dict[str, str] = {}
    if args.config:
        try:
            props = read_properties(Path(args.config))
        except OSError as e:
            raise ConfigError(f"--config {args.config}: {e.strerror}") from None
    for item in args.override:
        name, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"--override {item!r}: expected NAME=VALUE")
        props[name.strip()] = value.strip()
    if args.node_id is not None:
        props["node.id"] = str(args.node_id)
    if args.controller_quorum_voters:
        props["controller.quorum.voters"] = args.controller_quorum_voters
    if args.data_dir:
        props["metadata.log.dir"] = args.data_dir
    if getattr(args, "kafka_listener", None):
        props["kafka.listener"] = args.kafka_listener
    if getattr(args, "kafka_controller_listeners", None):
        props["kafka.controller.listeners"] = args.kafka_controller_listeners
    for required in ("node.id", "controller.quorum.voters"):
        if required not in props:
            raise ConfigError(f"{required} is required (flag --{required.replace('.', '-')} or the --config file)")
    data_dir = props.get("metadata.log.dir") or props.get("log.dirs", "").split(",")[0]
    if not data_dir:
        raise ConfigError("a data directory is required (--data-dir, or metadata.log.dir / log.dirs)")
    try:
        node_id = int_property(props, "node.id", -1)
        voters = parse_voters(props["controller.quorum.voters"])
        raft = RaftConfig.from_properties(props)
        log_config = LogConfig(
            segment_bytes=int_property(props, "metadata.log.segment.bytes", LogConfig.segment_bytes),
            preallocate_bytes=PREALLOCATE_CHUNK if bool_property(props, "log.preallocate", False) else 0,
            retention_bytes=int_property(props, "metadata.max.retention.bytes", LogConfig.retention_bytes),
            retention_ms=int_property(props, "metadata.max.retention.ms", LogConfig.retention_ms),
        )
        controller = controller_settings(props)
        raw_appends = bool_property(props, RAW_APPEND_SETTING, False)
        frames_port = int_property(props, FRAMES_PORT_SETTING, 0)
        if not -1 <= frames_port < 65536:
            raise ValueError(f"{FRAMES_PORT_SETTING} must be -1 (off), 0 (any free port) or a port, got {frames_port}")
        huge_pages = bool_property(props, HUGE_PAGES_SETTING, True)
        tls = TlsSettings.from_properties(props)
        if tls is not None:
            tls.load(server=True)  # a missing or mismatched file is a usage error now, not a fault at start
        metrics_tls = metrics_tls_settings(props, tls)
        kafka_listener, kafka_listeners = kafka_listener_settings(props)
        kafka_max_request_bytes = int_property(props, "socket.request.max.bytes", 100 * 1024 * 1024)
        kafka_idle_ms = int_property(props, "connections.max.idle.ms", 600_000)
        kafka_bounds = {
            name: int_property(props, name, default)
            for name, default in (
                ("max.connections", NodeSettings.kafka_max_connections),
                ("max.connections.per.ip", NodeSettings.kafka_max_connections_per_ip),
                ("queued.max.request.bytes", NodeSettings.kafka_queued_max_request_bytes),
            )
        }
        for name, value in kafka_bounds.items():
            if value < 1:  # Kafka's unlimited is not on offer: a flood must meet a bound
                raise ValueError(f"{name} must be at least 1, got {value}")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if node_id not in voters:
        raise ConfigError(f"node.id {node_id} is not in controller.quorum.voters ({', '.join(map(str, voters))})")
    advertised = advertised_endpoints(args, voters)
    return NodeSettings(
        node_id=node_id,
        voters=voters,
        data_dir=Path(data_dir),
        raft=raft,
        log=log_config,
        controller=controller,
        cluster_id=args.cluster_id or props.get("cluster.id") or default_cluster_id(voters),
        listen_host=args.listen_host,
        metrics_port=args.metrics_port,
        raw_appends=raw_appends,
        frames_port=frames_port,
        huge_pages=huge_pages,
        advertised=advertised,
        external_port=getattr(args, "external_port", None),
        tls=tls,
        metrics_tls=metrics_tls,
        kafka_listener=kafka_listener,
        kafka_listeners=kafka_listeners,
        kafka_max_request_bytes=kafka_max_request_bytes,
        kafka_idle_ms=kafka_idle_ms,
        kafka_max_connections=kafka_bounds["max.connections"],
        kafka_max_connections_per_ip=kafka_bounds["max.connections.per.ip"],
        kafka_queued_max_request_bytes=kafka_bounds["queued.max.request.bytes"],
    )


def kafka_listener_settings(props: dict[str, str]) -> tuple[tuple[str, int] | None, dict[int, tuple[str, int]]]:
    """``kafka.listener`` (HOST:PORT, or Kafka's ``CONTROLLER://HOST:PORT`` form) and ``kafka.controller.listeners``
    (ID@HOST:PORT,...). ValueError names the setting."""
    own = None
    spec = props.get("kafka.listener", "").strip()
    if spec:
        own = _host_port(spec.rpartition("://")[2], "kafka.listener")
    others: dict[int, tuple[str, int]] = {}
    for item in filter(None, (i.strip() for i in props.get("kafka.controller.listeners", "").split(","))):
        node, at, where = item.partition("@")
        if not at or not node.strip().isdigit():
            raise ValueError(f"kafka.controller.listeners: {item!r} is not ID@HOST:PORT")
        others[int(node)] = _host_port(where, "kafka.controller.listeners")
    return own, others


def _host_port(spec: str, setting: str) -> tuple[str, int]:
    host, colon, port = spec.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{setting}: {spec!r} is not HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def advertised_endpoints(args: argparse.Namespace, voters: dict[int, VoterAddress]) -> dict[int, VoterAddress] | None:
    spec, external = getattr(args, "advertised_endpoints", None), getattr(args, "external_port", None)
    if external is not None and not 0 < external < 65536:
        raise ConfigError(f"--external-port {external} is not a port")
    if not spec:
        if external is not None:
            raise ConfigError("--external-port needs --advertised-endpoints: what to tell the clients there")
        return None
    try:
        advertised = parse_voters(spec)
    except ValueError as e:
        raise ConfigError(str(e).replace("controller.quorum.voters", "--advertised-endpoints")) from None
    if set(advertised) != set(voters):  # a hint must exist for whichever voter leads
        raise ConfigError(
            f"--advertised-endpoints names nodes {sorted(advertised)}, controller.quorum.voters {sorted(voters)}"
        )
    return advertised


async def serve(
    settings: NodeSettings,
    *,
    companion: Callable[[RaftNode], Coroutine[object, object, object]] | None = None,
    with_controller: bool = True,
) -> int:
    """Run the node until SIGTERM/SIGINT; a leader resigns first so a successor takes over at once.

    ``companion`` runs beside the node in the same loop (benchmarks drive appends from inside the process, as
    the controller will). ``with_controller=False`` runs the quorum alone: the Raft benchmark appends opaque
    records that no controller could replay."""
    structlog.contextvars.bind_contextvars(node_id=settings.node_id)
    reloading = None
    metrics_reloading: ReloadingSslContext | None = None  # metrics.tls: the /metrics endpoint's certificate
    frames_reloading: FileSslContext | None = None  # the peer frame listener's
    if settings.tls is not None:
        try:
            reloading = ReloadingServerCredentials(settings.tls)
            if settings.frames_port >= 0:
                required = settings.tls.client_auth is ClientAuth.REQUIRED
                frames_reloading = FileSslContext(settings.tls, client_auth_required=required, name="peer_frames")
            if settings.metrics_port is not None and settings.metrics_tls is not None:
                metrics_reloading = ReloadingSslContext(settings.metrics_tls)
        except (ValueError, ssl.SSLError) as e:  # the files changed since the settings were read
            raise ConfigError(str(e)) from None
    faults = ProcessTerminatingFaultHandler()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    lock = DirectoryLock(settings.data_dir)
    try:
        ensure_meta_properties(settings.data_dir, settings.cluster_id, settings.node_id)
        metadata_log = MetadataLog.open(settings.data_dir, settings.log)
    except BaseException:
        lock.release()
        raise
    node = RaftNode(
        node_id=settings.node_id,
        voters=settings.voters,
        cluster_id=settings.cluster_id,
        log=metadata_log,
        store=QuorumStateStore(metadata_log.dir),
        config=settings.raft,
        faults=faults,
    )
    controller = QuorumController(settings.node_id, node, settings.controller, faults) if with_controller else None
    if settings.tls is not None:
        # With ssl.client.auth=none no peer presents a certificate: encrypted, but nobody's identity to check.
        authenticate = None
        if settings.tls.client_auth is ClientAuth.REQUIRED:
            authenticate = peer_authenticator(settings.tls.mapper(), settings.voters)
        frame_ssl = client_ssl_context(settings.tls) if settings.frames_port >= 0 else None
        node.transport.secure(channel_credentials(settings.tls), authenticate, controller_name, frame_ssl)
    server = new_server()
    node.transport.add_to_server(server)
    named = settings.voters if settings.external_port is not None else settings.advertised or settings.voters
    add_client_services(server, settings, node, controller, named)
    host = settings.listen_host or settings.address.host
    bind = f"[{host}]:{settings.address.port}" if ":" in host else f"{host}:{settings.address.port}"
    external = None
    if settings.external_port is not None:  # clients only (no Raft), told the advertised endpoints
        external = new_server()
        add_client_services(external, settings, node, controller, settings.advertised or settings.voters)
    listeners = [(server, settings.address.port)] + ([(external, settings.external_port)] if external else [])
    for srv, port_ in listeners:
        where = f"[{host}]:{port_}" if ":" in host else f"{host}:{port_}"
        try:
            if reloading is None:
                port = srv.add_insecure_port(where)
            else:
                port = srv.add_secure_port(where, reloading.credentials())
        except RuntimeError:
            port = 0
        if port == 0:
            metadata_log.close()
            lock.release()
            raise ConfigError(f"cannot listen on {where}: the address is in use or not local")
    # The frame listener before the voter port serves: a peer waiting for this node asks FrameEndpoint the moment
    # the port answers, and a port of 0 then would keep it on a gRPC stream until that stream breaks.
    frames = None
    if settings.frames_port < 0:
        node.transport.dial_frames = False
    else:
        frames_tls, frames_auth = None, None
        if frames_reloading is not None:
            frames_tls = frames_reloading.context
            if frames_reloading.client_auth_required:
                frames_auth = certificate_authenticator(settings.tls.mapper(), settings.voters)  # type: ignore[union-attr]
        try:
            frames = await node.transport.listen_frames(host, settings.frames_port, frames_tls, frames_auth)
        except OSError as e:
            await server.stop(0)
            metadata_log.close()
            lock.release()
            raise ConfigError(f"{FRAMES_PORT_SETTING}: cannot listen on {host}:{settings.frames_port}: {e}") from None
    await server.start()
    if external is not None:
        await external.start()
    kafka = None
    if settings.kafka_listener is not None and controller is not None:
        try:
            kafka = await start_kafka_listener(settings, controller)
        except ConfigError:
            await server.stop(0)
            metadata_log.close()
            lock.release()
            raise
    # Only a node that is up reports its GC pauses: a refused start must print its one-line error and nothing more.
    gc_pauses.install()
    loop_stalls.watch()
    if controller is not None:
        controller.start()  # registers with Raft before it starts: the latest snapshot loads before timers run
    node.start()
    if settings.metrics_port is not None:
        from pykraft.metrics import serve_metrics

        registry = serve_metrics(node, controller, host, settings.metrics_port, faults, metrics_reloading)
        if kafka is not None:
            from pykraft.kafka.metrics import KafkaListenerCollector

            registry.register(KafkaListenerCollector(kafka))
    log.info(
        "node_started",
        listen=bind,
        external_port=settings.external_port,
        frames_port=frames,
        kafka_listener=None if kafka is None else f"{settings.kafka_listener[0]}:{kafka.port}",  # type: ignore[index]
        tls=reloading is not None,
        metrics=None if settings.metrics_port is None else metrics_url(host, settings.metrics_port, metrics_reloading),
        cluster_id=settings.cluster_id,
        data_dir=str(settings.data_dir),
        voters=",".join(map(str, settings.voters.values())),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if reloading is not None:

        def reload_certificates() -> None:
            log.info("tls_reload_requested", signal="SIGHUP")
            reloading.request_reload()
            if metrics_reloading is not None:
                metrics_reloading.request_reload()
            if frames_reloading is not None:
                frames_reloading.request_reload()
            if kafka is not None and kafka.tls is not None:
                kafka.tls.request_reload()

        loop.add_signal_handler(signal.SIGHUP, reload_certificates)
    failed: list[BaseException] = []

    def companion_failed(e: BaseException) -> None:  # a benchmark's own bug: stop the node, say why, exit 1
        log.error("companion_failed", error=f"{type(e).__name__}: {e}")
        failed.append(e)
        stop.set()

    task = spawn(companion(node), name="companion", on_error=companion_failed) if companion is not None else None
    releasing = [spawn(release_periodically(), name="memory-release", on_error=_release_failed)]
    if settings.huge_pages:
        releasing.append(spawn(collapse_periodically(), name="huge-pages", on_error=_huge_pages_failed))
    await stop.wait()
    for t in releasing:
        t.cancel()
    loop_stalls.STALLS.stop()
    if task is not None:
        task.cancel()
    log.info("node_stopping", role=node.core.role.name if node.core else "?")
    if kafka is not None:  # first: no request reaches a closing controller
        await kafka.stop()
    if controller is not None:
        await controller.close()
    await node.shutdown(graceful=True)
    await server.stop(grace=0.5)
    if external is not None:
        await external.stop(grace=0.5)
    lock.release()
    log.info("node_stopped")
    return 1 if failed else 0


async def start_kafka_listener(settings: NodeSettings, controller: QuorumController) -> KafkaListener:
    """The Kafka protocol listener, answering through the same Controller service: an SSL listener with the node's
    own certificate when the node is on TLS (callers named by their certificates), else plaintext (callers are
    ``User:ANONYMOUS``)."""
    from pykraft.kafka.listener import KafkaListener
    from pykraft.kafka.registry import ListenerInfo
    from pykraft.security.ssl_context import ReloadingSslContext as KafkaSslContext

    assert settings.kafka_listener is not None
    host, port = settings.kafka_listener
    mapper = settings.tls.mapper() if settings.tls is not None else None
    named = settings.advertised or settings.voters
    service = ControllerService(controller, settings.cluster_id, named, mapper=mapper)
    info = ListenerInfo(settings.node_id, settings.cluster_id, dict(settings.kafka_listeners))
    tls = None
    if settings.tls is not None:
        required = settings.tls.client_auth is ClientAuth.REQUIRED
        try:
            tls = KafkaSslContext(settings.tls, client_auth_required=required, name="kafka")
        except (ValueError, ssl.SSLError) as e:  # the files changed since the settings were read
            raise ConfigError(str(e)) from None
    listener = KafkaListener(
        service,
        info,
        max_request_bytes=settings.kafka_max_request_bytes,
        idle_ms=settings.kafka_idle_ms,
        tls=tls,
        max_connections=settings.kafka_max_connections,
        max_connections_per_ip=settings.kafka_max_connections_per_ip,
        queued_max_request_bytes=settings.kafka_queued_max_request_bytes,
    )
    try:
        await listener.start(host, port)
    except OSError as e:
        raise ConfigError(f"kafka.listener {host}:{port}: cannot listen ({e.strerror})") from None
    # A wildcard bind is no address to give clients: they are told loopback then, unless the list names one
    advertised = host if host not in ("0.0.0.0", "::", "") else "127.0.0.1"
    info.listeners.setdefault(settings.node_id, (advertised, listener.port))
    return listener


def _release_failed(e: BaseException) -> None:  # not fatal: the node only keeps its free pages
    log.warning("memory_release_failed", error=f"{type(e).__name__}: {e}")


def _huge_pages_failed(e: BaseException) -> None:  # not fatal: the heap stays in small pages
    log.warning("huge_pages_failed", error=f"{type(e).__name__}: {e}")


def add_client_services(
    server: grpc.aio.Server,
    settings: NodeSettings,
    node: RaftNode,
    controller: QuorumController | None,
    named: dict[int, VoterAddress],
) -> None:
    """The APIs clients call, naming the controllers by ``named`` in their hints."""
    mapper = settings.tls.mapper() if settings.tls is not None else None
    authorization = controller_authorization(controller, mapper)
    QuorumAdminService(
        node,
        check_record=deserialize,
        raw_appends=settings.raw_appends,
        endpoints=named,
        authorize=authorization.quorum_admin_check if authorization.enabled else None,
    ).add_to_server(server)
    if controller is not None:
        ControllerService(controller, settings.cluster_id, named, mapper=mapper).add_to_server(server)


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from_args(args)
    except ConfigError as e:
        print(f"pykraft node: {e}", file=sys.stderr)
        return 2
    # A crash in native code (gRPC, the event loop) then leaves the Python stacks of every thread in the log.
    faulthandler.enable()
    try:
        return run_loop(serve(settings))
    except (ConfigError, StorageIdentityError, LogCorruptionError) as e:
        print(f"pykraft node: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # the data directory cannot be made or opened: before the node runs, not a fault of it
        print(f"pykraft node: storage error before start: {e}", file=sys.stderr)
        return 1


def run_loop(main: Coroutine[object, object, int]) -> int:
    """Run ``main`` on uvloop when installed (faster gRPC and socket I/O), else on asyncio's loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but stay runnable without it
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
