"""``pykraft broker``: a broker agent — it registers with the controller, heartbeats, gets unfenced, and on SIGTERM
goes through controlled shutdown; its simulated data plane (:mod:`pykraft.replica`) replicates message counts
between brokers and keeps the ISRs real through AlterPartition. It stands in for a Kafka broker so placement,
fencing, leadership and ISR changes can be exercised for real.

``--pause-replication`` (or SIGUSR1, which toggles it) stops fetching as a follower, so this broker's replicas fall
behind and leave their ISRs after replica.lag.time.max.ms.

``--initial-partition-bytes N`` gives every replica of a partition's original assignment N bytes of log when the agent
first sees it (a reassignment's new replicas start empty and copy the leader's log); ``--disk-rate`` bounds the bytes
the agent appends as a follower; the replication throttles come from the controller's dynamic configs (see
:mod:`pykraft.replica.throttle`). ``--metrics-port`` serves Prometheus metrics on 127.0.0.1
(:mod:`pykraft.broker_metrics`)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import structlog

from pykraft.broker_metrics import serve_broker_metrics
from pykraft.client import AdminClient, AdminError
from pykraft.replica.data_plane import DataPlane
from pykraft.replica.partition import ReplicaConfig
from quorum.errors import Errors
from quorum.fault import FaultHandler, LoggingFaultHandler, ProcessTerminatingFaultHandler
from quorum.log.message import Uuid

log = structlog.get_logger("pykraft.broker")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker-id", type=int, required=True)
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
        "--metrics-port", type=int, default=0, help="serve Prometheus metrics on 127.0.0.1:PORT (default 0: off)"
    )
    p.add_argument("--data-dir-tag", help=argparse.SUPPRESS)  # lets `pykraft cluster down` recognise its processes


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
    ) -> None:
        self.broker_id = broker_id
        self.rack = rack
        self.listener = listener
        self.interval = heartbeat_interval_ms / 1000
        self.admin = AdminClient(bootstrap, request_timeout_ms=5000, default_api_timeout_ms=15_000)
        self.incarnation = str(Uuid.random())
        self.epoch = -1
        self.metadata_offset = -1
        self.fenced = True
        self.data_plane = DataPlane(
            broker_id,
            listener,
            self.admin,
            lambda: self.epoch,
            replica_config or ReplicaConfig(),
            faults or LoggingFaultHandler(),
            metadata_interval_ms=heartbeat_interval_ms,
            paused=pause_replication,
        )

    async def register(self) -> None:
        while True:
            try:
                self.epoch = await self.admin.register_broker(
                    self.broker_id, self.incarnation, self.rack, [("PLAINTEXT", *self.listener)]
                )
                log.info("broker_registered", broker_id=self.broker_id, broker_epoch=self.epoch, rack=self.rack)
                return
            except AdminError as e:
                log.warning("broker_registration_failed", broker_id=self.broker_id, error=str(e))
                await asyncio.sleep(1)

    async def heartbeat(self, want_shutdown: bool = False) -> bool:
        """One heartbeat; True if the controller says to shut down."""
        try:
            r = await self.admin.heartbeat(
                self.broker_id, self.epoch, self.metadata_offset, want_shutdown=want_shutdown
            )
        except AdminError as e:
            if e.code in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                log.warning("broker_reregistering", broker_id=self.broker_id, reason=str(e))
                await self.register()
            else:
                log.warning("broker_heartbeat_failed", broker_id=self.broker_id, error=str(e))
            return False
        self.metadata_offset = max(self.metadata_offset, r.metadata_offset)
        if r.is_fenced != self.fenced:
            self.fenced = r.is_fenced
            log.info("broker_fencing_changed", broker_id=self.broker_id, fenced=r.is_fenced)
        return r.should_shut_down

    async def run(self, stop: asyncio.Event) -> None:
        await self.data_plane.start_server()  # up before registering: followers find it through the registration
        await self.register()
        self.data_plane.start()
        while not stop.is_set():
            await self.heartbeat()
            # While fenced, report progress quickly (a Kafka broker catching up does the same).
            wait = 0.1 if self.fenced else self.interval
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except TimeoutError:
                pass
        log.info("broker_controlled_shutdown", broker_id=self.broker_id)
        for _ in range(60):
            if await self.heartbeat(want_shutdown=True):
                break
            await asyncio.sleep(0.5)
        await self.data_plane.stop()
        await self.admin.close()
        log.info("broker_stopped", broker_id=self.broker_id)


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


async def _main(args: argparse.Namespace) -> int:
    structlog.contextvars.bind_contextvars(broker_id=args.broker_id)
    host, port = "127.0.0.1", 9000 + args.broker_id
    if args.listener:
        h, _, p = args.listener.rpartition(":")
        if not h or not p.isdigit():
            print(f"pykraft broker: --listener {args.listener!r} is not HOST:PORT", file=sys.stderr)
            return 2
        host, port = h, int(p)
    config = replica_config(args)
    agent = BrokerAgent(
        args.broker_id,
        args.rack,
        args.bootstrap_server,
        (host, port),
        args.heartbeat_interval_ms,
        replica_config=config,
        pause_replication=args.pause_replication,
        faults=ProcessTerminatingFaultHandler(),
    )
    if args.metrics_port:
        try:
            serve_broker_metrics(agent.data_plane.manager, "127.0.0.1", args.metrics_port)
        except OSError as e:
            print(f"pykraft broker: cannot serve metrics on 127.0.0.1:{args.metrics_port}: {e}", file=sys.stderr)
            return 2
        log.info("broker_metrics_listening", url=f"http://127.0.0.1:{args.metrics_port}/metrics")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, lambda: agent.data_plane.set_paused(not agent.data_plane.paused))
    await agent.run(stop)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.broker_id < 0:
        print(f"pykraft broker: --broker-id {args.broker_id} must not be negative", file=sys.stderr)
        return 2
    if not 0 <= args.metrics_port <= 65535:
        print(f"pykraft broker: --metrics-port {args.metrics_port} is not a port", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_main(args))
    except ValueError as e:
        print(f"pykraft broker: {e}", file=sys.stderr)
        return 2
