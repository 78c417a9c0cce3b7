"""``pykraft broker``: a broker agent — it registers with the controller, heartbeats, gets unfenced, and on SIGTERM
goes through controlled shutdown; its simulated data plane (:mod:`pykraft.replica`) replicates message counts
between brokers and keeps the ISRs real through AlterPartition. It stands in for a Kafka broker so placement,
fencing, leadership and ISR changes can be exercised for real.

``--pause-replication`` (or SIGUSR1, which toggles it) stops fetching as a follower, so this broker's replicas fall
behind and leave their ISRs after replica.lag.time.max.ms.

``--initial-partition-bytes N`` gives every replica of a partition's original assignment N bytes of log when the agent
first sees it (a reassignment's new replicas start empty and copy the leader's log); ``--disk-rate`` bounds the bytes
the agent appends as a follower; the replication throttles come from the controller's dynamic configs (see
:mod:`pykraft.replica.throttle`). ``--metrics-port`` serves Prometheus metrics on ``--metrics-host`` (127.0.0.1)
(:mod:`pykraft.broker_metrics`); each replica's series are on ``/metrics`` up to ``--metrics-replica-series-max``
replicas, and always on ``/metrics/replicas``.

With ``--controller-quorum-voters`` (and ``--metadata-dir``) the agent replicates the metadata log as a Raft observer
(:mod:`broker.observer`) and keeps its own image: heartbeats report the image's offset (so the controller unfences
it only once it has caught up with its registration), the data plane reads topics, brokers and throttle configs from
the image instead of polling the controller, and the listener also serves the Controller service over the image —
reads answered locally, writes refused with NOT_CONTROLLER naming the leader. Without the voters the agent polls the
controller as before (``describe_cluster``/``describe_topics`` every heartbeat interval) and reports the offset the
controller tells it: enough for a few brokers, not for millions of partitions.

``security.protocol=SSL`` with the ``ssl.*`` settings (:mod:`pykraft.security.tls`; ``--override`` or ``--config``, as
``pykraft node`` takes them; off by default) puts everything the agent dials or serves on mutual TLS with its own
certificate (``broker-<id>`` from the cluster CA): registration and heartbeats, the observer's fetches and
DescribeQuorum calls to the voters, its listener (fetches, DescribeReplicas, the Controller service over the image)
and its fetchers to other brokers. SIGHUP rereads the certificate files for the listener's new connections."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import structlog

from controller.authorizer import AclOperation
from controller.configs import BROKER_CONFIGS
from controller.quorum_controller import ControllerSettings
from pykraft import loop_stalls
from pykraft.authorization import controller_authorization
from pykraft.broker_metrics import DEFAULT_REPLICA_SERIES_MAX, REPLICAS_PATH, serve_broker_metrics
from pykraft.cli_common import non_negative_int
from pykraft.client import AdminClient, AdminError
from pykraft.loop_thread import LoopThread
from pykraft.metrics_http import METRICS_SETTINGS, ReloadingSslContext, metrics_tls_settings, metrics_url
from pykraft.node import CONTROLLER_CONFIGS, controller_settings, int_property
from pykraft.replica.data_plane import DataPlane, DescribeCheck
from pykraft.replica.partition import ReplicaConfig
from pykraft.security.tls import TLS_SETTINGS, TlsSettings
from pykraft.service import ControllerService
from quorum.errors import Errors
from quorum.fault import FaultHandler, LoggingFaultHandler, ProcessTerminatingFaultHandler, spawn
from quorum.log.log import LogConfig, LogCorruptionError
from quorum.log.message import Uuid
from quorum.log.meta_properties import META_PROPERTIES, StorageIdentityError, read_properties
from quorum.memory import release_periodically
from quorum.raft.config import RaftConfig, VoterAddress, parse_voters

if TYPE_CHECKING:
    from broker.observer import MetadataObserver

log = structlog.get_logger("pykraft.broker")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker-id", type=int, required=True, help="this broker's id (node.id), unique in the cluster")
    p.add_argument("--rack", help="broker.rack (default: none)")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]", help="controller nodes")
    p.add_argument("--listener", default=None, metavar="HOST:PORT", help="advertised PLAINTEXT listener")
    p.add_argument("--heartbeat-interval-ms", type=int, default=2000, help="broker.heartbeat.interval.ms")
    p.add_argument(
        "--produce-rate",
        type=float,
        default=0.0,
        metavar="MSGS",
        help="messages per second appended to each partition this broker leads (default 0: idle)",
    )
    p.add_argument("--replica-lag-time-max-ms", type=int, default=30_000, help="replica.lag.time.max.ms")
    p.add_argument("--replica-fetch-wait-max-ms", type=int, default=500, help="replica.fetch.wait.max.ms")
    p.add_argument("--replica-fetch-max-bytes", type=int, default=1_048_576, help="replica.fetch.max.bytes")
    p.add_argument("--pause-replication", action="store_true", help="do not fetch as a follower (SIGUSR1 toggles it)")
    p.add_argument(
        "--initial-partition-bytes",
        type=int,
        default=0,
        metavar="N",
        help="log bytes each replica of a partition's original assignment starts with (default 0); "
        "replicas a reassignment adds start empty and copy the leader's log",
    )
    p.add_argument(
        "--disk-rate",
        type=int,
        default=None,
        metavar="BYTES_PER_S",
        help="bytes per second this broker may append as a follower (default: unlimited)",
    )
    p.add_argument(
        "--metrics-port", type=int, default=0, help="serve Prometheus metrics on --metrics-host:PORT (default 0: off)"
    )
    p.add_argument(
        "--metrics-host",
        default="127.0.0.1",
        help="interface for the metrics endpoint (0.0.0.0 in a container whose port is published)",
    )
    p.add_argument(
        "--metrics-replica-series-max",
        type=non_negative_int,
        default=DEFAULT_REPLICA_SERIES_MAX,
        metavar="N",
        help="list each replica's kafka_log_* series on /metrics only while this broker holds at most N replicas "
        f"(default {DEFAULT_REPLICA_SERIES_MAX:,}; 0: never); {REPLICAS_PATH} always lists them all",
    )
    p.add_argument(
        "--controller-quorum-voters",
        metavar="ID@HOST:PORT,...",
        help="controller.quorum.voters: replicate the metadata log as a Raft observer (needs --metadata-dir)",
    )
    p.add_argument(
        "--metadata-dir", metavar="DIR", help="metadata.log.dir: the observer's meta.properties and log copy"
    )
    p.add_argument(
        "--cluster-id", help="the cluster's id (default: the metadata dir's meta.properties, else the controllers')"
    )
    p.add_argument(
        "--config", metavar="FILE", help="Kafka-style properties file: the settings --override takes, one a line"
    )
    p.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a metadata log, snapshot, controller.quorum.* or broker config, e.g. "
        "metadata.log.max.record.bytes.between.snapshots=1048576 (repeatable; with the observer), or a TLS "
        "setting: security.protocol=SSL, ssl.certificate.location, ssl.key.location, ssl.ca.location, "
        "ssl.client.auth, ssl.principal.mapping.rules",
    )
    p.add_argument("--data-dir-tag", help=argparse.SUPPRESS)  # lets `pykraft cluster down` recognise its processes


LOG_CONFIGS = ("metadata.log.segment.bytes", "metadata.max.retention.bytes", "metadata.max.retention.ms")


@dataclass
class ObserverSettings:
    """What the metadata observer is built from (see :func:`observer_settings`)."""

    voters: dict[int, VoterAddress]
    metadata_dir: Path
    cluster_id: str | None
    raft: RaftConfig
    log: LogConfig
    controller: ControllerSettings


def broker_properties(args: argparse.Namespace) -> dict[str, str]:
    """``--config`` then ``--override`` (the last wins), names checked. Raises ValueError for a usage error."""
    props: dict[str, str] = {}
    config = getattr(args, "config", None)
    if config:
        try:
            props = read_properties(Path(config))
        except OSError as e:
            raise ValueError(f"--config {config}: {e.strerror}") from None
    for item in args.override:
        name, eq, value = item.partition("=")
        if not eq:
            raise ValueError(f"--override {item!r}: expected NAME=VALUE")
        props[name.strip()] = value.strip()
    for name in props:
        known = name in RaftConfig.KAFKA_NAMES or name in LOG_CONFIGS or name in CONTROLLER_CONFIGS
        if not known and name not in BROKER_CONFIGS and name not in TLS_SETTINGS and name not in METRICS_SETTINGS:
            raise ValueError(f"{name}: not a config the broker agent knows")
    return props


def tls_settings(args: argparse.Namespace) -> TlsSettings | None:
    """The agent's TLS settings (None: PLAINTEXT), its files checked now. Raises ValueError (TlsConfigError)."""
    tls = TlsSettings.from_properties(broker_properties(args))
    if tls is not None:
        tls.load(server=True)  # it serves a listener: certificate and key needed, as for a node
    return tls


def observer_settings(args: argparse.Namespace) -> ObserverSettings | None:
    """The observer's settings from the command line; None without ``--controller-quorum-voters`` (the agent then
    polls the controller). Raises ValueError for a usage error (one line)."""
    props = {k: v for k, v in broker_properties(args).items() if k not in TLS_SETTINGS and k not in METRICS_SETTINGS}
    if not args.controller_quorum_voters:
        if args.metadata_dir or props or args.cluster_id:
            raise ValueError("--metadata-dir, --cluster-id and --override need --controller-quorum-voters")
        return None
    if not args.metadata_dir:
        raise ValueError("--controller-quorum-voters needs --metadata-dir: where the observer keeps its log")
    voters = parse_voters(args.controller_quorum_voters)
    if args.broker_id in voters:
        raise ValueError(
            f"--broker-id {args.broker_id} is a controller's node id in --controller-quorum-voters: "
            "a broker needs an id of its own"
        )
    log_config = LogConfig(
        segment_bytes=int_property(props, "metadata.log.segment.bytes", LogConfig.segment_bytes),
        retention_bytes=int_property(props, "metadata.max.retention.bytes", LogConfig.retention_bytes),
        retention_ms=int_property(props, "metadata.max.retention.ms", LogConfig.retention_ms),
    )
    return ObserverSettings(
        voters,
        Path(args.metadata_dir),
        args.cluster_id,
        RaftConfig.from_properties(props),
        log_config,
        controller_settings(props),
    )


async def resolve_cluster_id(settings: ObserverSettings, admin: AdminClient) -> str:
    """``--cluster-id``, else the one the metadata dir was formatted with, else the controllers' (DescribeCluster,
    retried until they answer): the observer's fetches carry it, and the voters refuse another."""
    if settings.cluster_id:
        return settings.cluster_id
    meta = settings.metadata_dir / META_PROPERTIES
    if meta.exists():
        cluster_id = read_properties(meta).get("cluster.id")
        if cluster_id:
            return cluster_id
    while True:
        try:
            return (await admin.describe_cluster()).cluster_id
        except AdminError as e:
            log.warning("cluster_id_unknown", error=str(e), reason="the controllers did not answer DescribeCluster")
            await asyncio.sleep(1)


def image_services(observer: MetadataObserver, tls: TlsSettings | None) -> list[Callable[[grpc.aio.Server], None]]:
    """The Controller service over the observer's image. With ``authorizer.class.name`` among the broker's settings
    (the image's, as a controller's), every read it answers is authorized as on the controllers — the caller named by
    the listener's ``ssl.principal.mapping.rules``, decided by the image's committed ACLs and ``super.users`` —
    and writes still get NOT_CONTROLLER first."""
    mapper = tls.mapper() if tls is not None else None
    service = ControllerService(observer.image, observer.cluster_id, observer.voters, mapper=mapper)
    if service.authorization.enabled:
        log.info("broker_authorization_enabled", super_users=observer.image.settings.super_users)
    return [service.add_to_server]


def describe_check(observer: MetadataObserver, tls: TlsSettings | None) -> DescribeCheck | None:
    """With authorization on (the image's ``authorizer.class.name``), the check of the listener's DescribeReplicas:
    DESCRIBE on the CLUSTER, as Kafka's DescribeLogDirs."""
    authorization = controller_authorization(observer.image, tls.mapper() if tls is not None else None)
    return partial(authorization.cluster_refusal, operation=AclOperation.DESCRIBE) if authorization.enabled else None


class BrokerAgent:
    def __init__(
        self,
        broker_id: int,
        rack: str | None,
        bootstrap: str,
        listener: tuple[str, int],
        heartbeat_interval_ms: int = 2000,
        *,
        replica_config: ReplicaConfig | None = None,
        pause_replication: bool = False,
        faults: FaultHandler | None = None,
        admin: AdminClient | None = None,
        observer: MetadataObserver | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.rack = rack
        self.listener = listener
        self.tls = tls
        self.interval = heartbeat_interval_ms / 1000
        self.admin = admin or AdminClient(bootstrap, request_timeout_ms=5000, default_api_timeout_ms=15_000, tls=tls)
        # Registration and heartbeats run on their own loop, thread and client (see pykraft/loop_thread.py): a main
        # loop busy for seconds (a large snapshot loading into the image) must not get a live broker fenced.
        self._lifecycle = LoopThread(f"broker-{broker_id}-lifecycle")
        self._lifecycle_admin = self._lifecycle.call(_admin_client(bootstrap, tls), timeout=10)
        self.incarnation = str(Uuid.random())
        self.epoch = -1
        self.metadata_offset = -1  # without an observer: the offset the controller last told us
        self.fenced = True
        self.observer = observer
        self.data_plane = DataPlane(
            broker_id,
            listener,
            self.admin,
            lambda: self.epoch,
            replica_config or ReplicaConfig(),
            faults or LoggingFaultHandler(),
            metadata_interval_ms=heartbeat_interval_ms,
            paused=pause_replication,
            image=observer.image if observer is not None else None,
            tls=tls,
        )
        if observer is not None:
            self.data_plane.check_describe = describe_check(observer, tls)

    @property
    def current_metadata_offset(self) -> int:
        """What heartbeats report: the observer's image, or (without one) what the controller last said."""
        return self.observer.current_metadata_offset if self.observer is not None else self.metadata_offset

    def services(self) -> list[Callable[[grpc.aio.Server], None]]:
        """Served on the listener beside fetches: the Controller service over the image, when there is one."""
        return [] if self.observer is None else image_services(self.observer, self.tls)

    async def register(self) -> None:
        while True:
            try:
                self.epoch = await self._lifecycle_admin.register_broker(
                    self.broker_id, self.incarnation, self.rack, [("PLAINTEXT", *self.listener)]
                )
                log.info(
                    "broker_registered",
                    broker_id=self.broker_id,
                    broker_epoch=self.epoch,
                    rack=self.rack,
                    metadata_offset=self.current_metadata_offset,
                )
                return
            except AdminError as e:
                log.warning(
                    "broker_registration_failed", broker_id=self.broker_id, error=str(e), error_code=int(e.code)
                )
                await asyncio.sleep(1)

    async def heartbeat(self, want_shutdown: bool = False) -> bool:
        """One heartbeat; True if the controller says to shut down."""
        offset = self.current_metadata_offset
        try:
            r = await self._lifecycle_admin.heartbeat(self.broker_id, self.epoch, offset, want_shutdown=want_shutdown)
        except AdminError as e:
            if e.code in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                log.warning("broker_reregistering", broker_id=self.broker_id, reason=str(e), error_code=int(e.code))
                await self.register()
            else:
                log.warning("broker_heartbeat_failed", broker_id=self.broker_id, error=str(e), error_code=int(e.code))
            return False
        self.metadata_offset = max(self.metadata_offset, r.metadata_offset)
        if r.is_fenced != self.fenced:
            self.fenced = r.is_fenced
            log.info(
                "broker_fencing_changed",
                broker_id=self.broker_id,
                fenced=r.is_fenced,
                broker_epoch=self.epoch,  # the offset of its registration: what it had to catch up with
                metadata_offset=offset,
            )
        return r.should_shut_down

    async def run(self, stop: asyncio.Event) -> None:
        lifecycle = self._lifecycle
        try:
            # Up before registering: followers find it through the registration.
            await self.data_plane.start_server(self.services())
            await lifecycle.run(self.register())
            self.data_plane.start()
            woken = asyncio.Event()  # waited on and set only on the lifecycle loop
            beating = spawn(lifecycle.run(self._beat(woken)), name="broker-heartbeats", on_error=_heartbeats_failed)
            stopping = spawn(stop.wait(), name="broker-stop", on_error=_heartbeats_failed)
            await asyncio.wait([beating, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            lifecycle.loop.call_soon_threadsafe(woken.set)
            await beating  # its error, if it ended with one
            log.info("broker_controlled_shutdown", broker_id=self.broker_id)
            await lifecycle.run(self._controlled_shutdown())
            await self.data_plane.stop()
            await self.admin.close()
            log.info("broker_stopped", broker_id=self.broker_id)
        finally:
            await lifecycle.run(self._lifecycle_admin.close())
            await lifecycle.close()

    async def _beat(self, woken: asyncio.Event) -> None:
        while not woken.is_set():
            await self.heartbeat()
            # While fenced, report progress quickly (a Kafka broker catching up does the same).
            wait = 0.1 if self.fenced else self.interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), wait)

    async def _controlled_shutdown(self) -> None:
        for _ in range(60):
            if await self.heartbeat(want_shutdown=True):
                break
            await asyncio.sleep(0.5)


def _heartbeats_failed(e: BaseException) -> None:
    # Raised again where the agent awaits its heartbeats: this line says what stopped them, at once.
    log.error("broker_heartbeats_failed", error=f"{type(e).__name__}: {e}")


async def _admin_client(bootstrap: str, tls: TlsSettings | None = None) -> AdminClient:
    # Blocking channels: grpc.aio serves the main loop only (see AdminClient's blocking_transport).
    return AdminClient(
        bootstrap, request_timeout_ms=5000, default_api_timeout_ms=15_000, blocking_transport=True, tls=tls
    )


def replica_config(args: argparse.Namespace) -> ReplicaConfig:
    """The data plane's settings from the command line (ValueError when one is out of range)."""
    return ReplicaConfig(
        produce_rate=args.produce_rate,
        replica_lag_time_max_ms=args.replica_lag_time_max_ms,
        replica_fetch_wait_max_ms=args.replica_fetch_wait_max_ms,
        replica_fetch_max_bytes=args.replica_fetch_max_bytes,
        initial_partition_bytes=args.initial_partition_bytes,
        disk_rate=args.disk_rate,
    )


async def _main(
    args: argparse.Namespace,
    settings: ObserverSettings | None,
    tls: TlsSettings | None = None,
    metrics_tls: ReloadingSslContext | None = None,
) -> int:
    structlog.contextvars.bind_contextvars(broker_id=args.broker_id)
    host, port = "127.0.0.1", 9000 + args.broker_id
    if args.listener:
        h, _, p = args.listener.rpartition(":")
        if not h or not p.isdigit():
            print(f"pykraft broker: --listener {args.listener!r} is not HOST:PORT", file=sys.stderr)
            return 2
        host, port = h, int(p)
    config = replica_config(args)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    faults = ProcessTerminatingFaultHandler()
    admin_client = AdminClient(args.bootstrap_server, request_timeout_ms=5000, default_api_timeout_ms=15_000, tls=tls)
    async with admin_client as admin:
        observer = None
        if settings is not None:
            # Imported here: every other command of the CLI parses its arguments through this module.
            from broker.observer import MetadataObserver

            # A failure of either is raised again by result() below; the watcher only makes sure it is logged.
            def failed(e: BaseException) -> None:
                log.error("cluster_id_resolution_failed", error=f"{type(e).__name__}: {e}")

            resolving = spawn(resolve_cluster_id(settings, admin), name="resolve-cluster-id", on_error=failed)
            stopping = spawn(stop.wait(), name="wait-for-stop", on_error=failed)
            await asyncio.wait([resolving, stopping], return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not resolving.done():  # stopped while the controllers were still unreachable
                resolving.cancel()
                return 0
            try:
                observer = MetadataObserver(
                    args.broker_id,
                    settings.voters,
                    resolving.result(),
                    settings.metadata_dir,
                    settings.raft,
                    settings.log,
                    settings.controller,
                    faults,
                    tls=tls,
                )
            except (StorageIdentityError, LogCorruptionError, OSError) as e:
                print(f"pykraft broker: {e}", file=sys.stderr)
                return 1
        agent = BrokerAgent(
            args.broker_id,
            args.rack,
            args.bootstrap_server,
            (host, port),
            args.heartbeat_interval_ms,
            replica_config=config,
            pause_replication=args.pause_replication,
            faults=faults,
            admin=admin,
            observer=observer,
            tls=tls,
        )
        reloading = agent.data_plane.server_credentials
        if reloading is not None:

            def reload_certificates() -> None:
                reloading.request_reload()
                if metrics_tls is not None:
                    metrics_tls.request_reload()

            loop.add_signal_handler(signal.SIGHUP, reload_certificates)
        try:
            if args.metrics_port:
                try:
                    plane = agent.data_plane
                    serve_broker_metrics(
                        plane.manager,
                        args.metrics_host,
                        args.metrics_port,
                        observer=observer,
                        replica_series_max=args.metrics_replica_series_max,
                        tls=metrics_tls,
                        replicas_applied=(lambda: plane.applied_offset) if observer is not None else None,
                    )
                except OSError as e:
                    where = f"{args.metrics_host}:{args.metrics_port}"
                    print(f"pykraft broker: cannot serve metrics on {where}: {e}", file=sys.stderr)
                    return 2
                log.info(
                    "broker_metrics_listening",
                    url=metrics_url(args.metrics_host, args.metrics_port, metrics_tls),
                    replicas_url=metrics_url(args.metrics_host, args.metrics_port, metrics_tls, REPLICAS_PATH),
                )
            if observer is not None:
                observer.start()  # catching up starts now, before registering
            loop.add_signal_handler(signal.SIGUSR1, lambda: agent.data_plane.set_paused(not agent.data_plane.paused))
            releasing = spawn(release_periodically(), name="memory-release", on_error=_release_failed)
            stalls = loop_stalls.watch()
            try:
                await agent.run(stop)
                if observer is not None:  # stopped cleanly: the restart loads this rather than replaying the tail
                    await observer.snapshot_before_close()
            finally:
                releasing.cancel()
                stalls.stop()
        finally:
            if observer is not None:
                await observer.close()
    return 0


def _release_failed(e: BaseException) -> None:  # not fatal: the broker only keeps its free pages
    log.warning("memory_release_failed", error=f"{type(e).__name__}: {e}")


def run(args: argparse.Namespace) -> int:
    if args.broker_id < 0:
        print(f"pykraft broker: --broker-id {args.broker_id} must not be negative", file=sys.stderr)
        return 2
    if not 0 <= args.metrics_port <= 65535:
        print(f"pykraft broker: --metrics-port {args.metrics_port} is not a port", file=sys.stderr)
        return 2
    try:
        settings = observer_settings(args)
        tls = tls_settings(args)
        metrics = metrics_tls_settings(broker_properties(args), tls)
        metrics_tls = ReloadingSslContext(metrics) if metrics is not None and args.metrics_port else None
        return asyncio.run(_main(args, settings, tls, metrics_tls))
    except (ValueError, ssl.SSLError) as e:
        print(f"pykraft broker: {e}", file=sys.stderr)
        return 2
