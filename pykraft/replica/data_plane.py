"""The data plane's I/O: the fetch service on the broker's listener, one fetcher per leader broker, the metadata
poller, the ISR-expiration timer and the AlterPartition sender, all around one :class:`ReplicaManager`.

Metadata comes from one of two places:

- the broker's own metadata image (``image``: the QuorumController its Raft observer feeds, see
  :mod:`broker.observer`), read in place (:class:`~pykraft.replica.image_metadata.ImageMetadata`): no RPC. It is
  looked at every :data:`IMAGE_POLL_INTERVAL_S`; after the first read only the partitions whose committed value
  changed are read and applied (Kafka's metadata deltas), in slices that yield to the loop. Never later than that:
  a replica applied late is fetched late, and a leader shrinks followers that have not fetched a new partition
  within replica.lag.time.max.ms. Nothing is applied before the image holds this broker's own
  registration (Kafka's brokers wait for their initial catch-up likewise): a log replayed from its start passes
  through states long gone.
- without an image, the active controller: ``describe_cluster`` and ``describe_topics`` over gRPC every
  ``metadata_interval_ms`` (the heartbeat interval). Fine for a few brokers and topics; at millions of partitions
  every broker polling every topic would swamp the controller, which is why brokers observe the log.

Either way, at once when a fetch or an AlterPartition answer says ours is stale. A follower fetches back to back
while its leader has more than one answer carries, else every replica.fetch.wait.max.ms (no long poll; sooner when
a throttled replica's quota refills); after a failure it backs off replica.fetch.backoff.ms. Its fetches go in
incremental fetch sessions (:mod:`pykraft.replica.fetch_session`): an idle partition costs nothing per fetch.

With the metadata the broker also reads the throttle configs: its own BROKER resource
(``leader/follower.replication.throttled.rate``: the effective value, per-broker, else the cluster default, else
unthrottled) and, only for topics where it holds a replica out of the ISR or under reassignment, the TOPIC
resources' ``leader/follower.replication.throttled.replicas``. From the controller (``describe_configs``) they are
read at every poll; from the image in place (:mod:`pykraft.replica.throttle_configs`), and only what may have
changed: everything when the configs changed, else the topics newly watched. A change takes effect then, and is
logged.

The fetch listener also answers DescribeReplicas: the replicas held here, their sizes and state;
:func:`describe_replicas` is its client.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import grpc
import structlog

from controller.quorum_controller import QuorumController
from controller.requests import ConfigResource, ConfigResourceType, DescribeConfigsResult
from pykraft.api import broker_pb2 as pb
from pykraft.api import broker_pb2_grpc as pb_grpc
from pykraft.client import AdminClient, AdminError, ClusterDescription, TopicDescription
from pykraft.replica.alter_partition import AlterPartitionSender
from pykraft.replica.image_metadata import ImageMetadata, apply_image
from pykraft.replica.manager import ReplicaInfo, ReplicaManager
from pykraft.replica.partition import BrokerState, FetchAnswer, PartitionMetadata, ReplicaConfig
from pykraft.replica.session_fetching import drain_pausing
from pykraft.replica.throttle import (
    BROKER_KEYS,
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    TOPIC_KEYS,
    parse_rate,
)
from pykraft.replica.throttle_configs import ThrottleConfigReader
from pykraft.security.channels import ClientTls, aio_channel
from pykraft.security.peer_identity import ReplicaCheck, broker_name, replica_authenticator
from pykraft.security.tls import ClientAuth, ReloadingServerCredentials, TlsSettings
from quorum.errors import Errors, KafkaError
from quorum.fault import FaultHandler, cancel_until_done, fault_message, spawn
from quorum.log.message import Uuid
from quorum.transport.limits import MAX_MESSAGE_BYTES
from quorum.transport.server import new_server

log = structlog.get_logger("pykraft.replica")

STATUS_INTERVAL_S = 30.0  # how often a data_plane_status line is logged
MIN_REFRESH_GAP_S = 0.1  # metadata polls asked for by stale answers come at most this often
IMAGE_POLL_INTERVAL_S = 0.1  # how often the local image is looked at (a few integer compares when unchanged)
ENCODE_SLICE = 100_000  # fetch entries encoded or decoded (~2 us each) before the loop may run
SCAN_SLICE = 5_000  # replicas a periodic pass over all of them (ISR expiry, status) looks at before the loop runs
# An authorization check of a call (the caller may DESCRIBE the CLUSTER): None, or why it is refused.
DescribeCheck = Callable[[grpc.aio.ServicerContext], Awaitable[str | None]]
CHANNEL_OPTIONS = [
    # The brokers' listener sends at most MAX_MESSAGE_BYTES (its SERVER_OPTIONS): a replica fetch answer is cut at
    # replica.fetch.response.max.bytes (10 MiB), a DescribeReplicas of 100k replicas is ~5 MiB. More is a fault.
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # A restarted leader is found again within replica.fetch.backoff.ms, not gRPC's default of up to 2 minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def grpc_target(host: str, port: int) -> str:
    """gRPC's address form: an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _error(code: int) -> Errors:
    return Errors(code) if code in Errors._value2member_map_ else Errors.UNKNOWN_SERVER_ERROR


def partitions_of(topics: Iterable[TopicDescription]) -> list[PartitionMetadata]:
    out = []
    for t in topics:
        if t.error_code:
            continue
        topic_id = Uuid(t.topic_id)
        for p in t.partitions:
            out.append(
                PartitionMetadata(
                    topic_id,
                    t.name,
                    p.partition,
                    p.leader,
                    p.leader_epoch,
                    p.partition_epoch,
                    tuple(p.replicas),
                    tuple(p.isr),
                    getattr(p, "leader_recovery_state", 0),
                    tuple(p.adding_replicas),
                    tuple(p.removing_replicas),
                )
            )
    return out


def brokers_of(cluster: ClusterDescription, listener_name: str = "PLAINTEXT") -> dict[int, BrokerState]:
    out = {}
    for b in cluster.brokers:
        out[b.broker_id] = BrokerState(b.broker_epoch, b.fenced, b.in_controlled_shutdown, b.endpoint(listener_name))
    return out


def _refused(context: grpc.aio.ServicerContext, reason: str) -> Any:
    """End the call with PERMISSION_DENIED once the handler returns (its answer is not sent). The status is set, not
    raised with context.abort(): in grpcio 1.78 an aborted call may keep its HTTP/2 stream counted as open, and
    enough of them leave the connection refusing every call (quorum/transport/server.py)."""
    context.set_code(grpc.StatusCode.PERMISSION_DENIED)
    context.set_details(reason)
    return None


class FetchService(pb_grpc.ReplicaFetchServicer):
    """A leader's side of followers' fetches."""

    def __init__(
        self,
        manager: ReplicaManager,
        check_replica: ReplicaCheck | None = None,
        check_describe: DescribeCheck | None = None,
    ) -> None:
        self.manager = manager
        self.check_replica = check_replica  # mutual TLS: a fetch must come with its replica's certificate
        self.check_describe = check_describe  # authorization: DescribeReplicas needs DESCRIBE on the CLUSTER

    async def Fetch(self, request: pb.FetchRequest, context: grpc.aio.ServicerContext) -> pb.FetchResponse:
        if self.check_replica is not None and (refused := self.check_replica(context, request.replica_id)):
            log.warning("fetch_refused", replica_id=request.replica_id, reason=refused)
            return _refused(context, refused)
        steps = self.manager.answer_session_fetch(
            request.replica_id,
            request.broker_epoch,
            request.max_bytes,
            request.session_id,
            request.session_epoch,
            (
                (p.topic_id, p.partition, p.fetch_offset, p.current_leader_epoch, p.partition_max_bytes)
                for p in request.partitions
            ),
            ((f.topic_id, f.partition) for f in request.forgotten),
        )
        error, session_id, answers = await drain_pausing(steps)  # see answer_session_fetch
        response = pb.FetchResponse(error_code=int(error), session_id=session_id)
        add = response.partitions.add
        for i, (topic_id, index, a) in enumerate(answers, 1):
            if i % ENCODE_SLICE == 0:
                await asyncio.sleep(0)
            add(
                topic_id=topic_id,
                partition=index,
                error_code=int(a.error),
                high_watermark=a.high_watermark,
                log_end_offset=a.log_end_offset,
                records_end_offset=a.records_end_offset,
            )
        return response

    async def DescribeReplicas(
        self, request: pb.DescribeReplicasRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeReplicasResponse:
        if self.check_describe is not None and (refused := await self.check_describe(context)):
            return _refused(context, refused)  # the answer has no error code
        wanted = {(p.topic_id, p.partition) for p in request.partitions} if request.partitions else None
        response = pb.DescribeReplicasResponse(broker_id=self.manager.broker_id)
        add = response.replicas.add
        for r in self.manager.describe_replicas(wanted):
            add(
                topic_id=bytes(r.topic_id),
                topic=r.topic,
                partition=r.partition,
                size_bytes=r.size_bytes,
                log_end_offset=r.log_end_offset,
                high_watermark=r.high_watermark,
                is_leader=r.is_leader,
                in_isr=r.in_isr,
                throttled=r.throttled,
            )
        return response


async def describe_replicas(
    endpoint: tuple[str, int],
    timeout_s: float = 5.0,
    *,
    partitions: Sequence[tuple[Uuid, int]] | None = None,
    tls: ClientTls | None = None,
) -> list[ReplicaInfo]:
    """Ask the broker whose fetch listener is ``endpoint`` (its PLAINTEXT listener in describe_cluster) for the
    replicas it holds (all, or those of ``partitions`` it holds: ``(topic id, partition)``): sizes, offsets, state.
    Raises :class:`AdminError` (BROKER_NOT_AVAILABLE, or REQUEST_TIMED_OUT) when it cannot be asked."""
    target = grpc_target(*endpoint)
    request = pb.DescribeReplicasRequest()
    for topic_id, index in partitions or ():
        request.partitions.add(topic_id=bytes(topic_id), partition=index)
    async with aio_channel(target, tls, CHANNEL_OPTIONS) as channel:
        try:
            response = await pb_grpc.ReplicaFetchStub(channel).DescribeReplicas(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as e:
            code = Errors.REQUEST_TIMED_OUT if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED else None
            raise AdminError(
                f"broker at {target} did not answer DescribeReplicas: {e.code().name} {e.details() or ''}".rstrip(),
                code or Errors.BROKER_NOT_AVAILABLE,
            ) from e
    return [
        ReplicaInfo(
            response.broker_id,
            Uuid(r.topic_id),
            r.topic,
            r.partition,
            r.size_bytes,
            r.log_end_offset,
            r.high_watermark,
            r.is_leader,
            r.in_isr,
            r.throttled,
        )
        for r in response.replicas
    ]


class DataPlane:
    def __init__(
        self,
        broker_id: int,
        listener: tuple[str, int],
        admin: AdminClient,
        broker_epoch: Callable[[], int],
        config: ReplicaConfig,
        faults: FaultHandler,
        *,
        metadata_interval_ms: int = 2000,
        paused: bool = False,
        image: QuorumController | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        self.broker_id = broker_id
        # TLS (the broker's own certificate): the listener asks every client for one from the CA, fetchers show it.
        self.server_credentials = ReloadingServerCredentials(tls) if tls is not None else None
        self.client_tls = ClientTls.of(tls)
        required = tls is not None and tls.client_auth is ClientAuth.REQUIRED
        self.check_replica = replica_authenticator(tls.mapper()) if tls is not None and required else None
        self.check_describe: DescribeCheck | None = None  # set by the agent when its image authorizes requests
        self.image = ImageMetadata(image, broker_id) if image is not None else None
        self.throttle_reader = ThrottleConfigReader(image, broker_id) if image is not None else None
        self.listener = listener
        self.admin = admin
        self.broker_epoch = broker_epoch
        self.config = config
        self.faults = faults
        self.metadata_interval_ms = metadata_interval_ms
        self.paused = paused
        self.manager = ReplicaManager(broker_id, config, now_ms, broker_epoch)
        self.sender = AlterPartitionSender(broker_id, broker_epoch, self._alter_partition, self.manager.on_alter_answer)
        self.manager.submit = self.sender.submit
        self._refresh = asyncio.Event()
        self.manager.request_refresh = self._refresh.set
        self.metadata_polls = 0
        self.last_poll_ms = 0.0
        # The image's last offset that the replica manager holds all of (-1: none yet; image-fed brokers only): the
        # image is replayed first, its partitions applied here after it, a slice at a time.
        self.applied_offset = -1
        self.config_polls = 0
        self._configs_failing = False
        self._server: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._fetchers: dict[int, asyncio.Task[None]] = {}
        self._channels: dict[tuple[tuple[str, int], int], grpc.aio.Channel] = {}  # by (endpoint, leader id)
        self._fetch_failing: set[int] = set()

    # -- lifecycle --------------------------------------------------------------------------------------------

    async def start_server(self, services: Sequence[Callable[[grpc.aio.Server], None]] = ()) -> bool:
        """Serve fetches on the listener, and ``services`` (each adds itself to the server: the agent's Controller
        service over its image). False (and an error line) if it cannot be bound: the agent then runs its control
        plane only, and followers of its partitions cannot fetch."""
        server = new_server()
        service = FetchService(self.manager, self.check_replica, self.check_describe)
        pb_grpc.add_ReplicaFetchServicer_to_server(service, server)
        for add in services:
            add(server)
        bind = grpc_target(*self.listener)
        try:
            if self.server_credentials is None:
                bound = server.add_insecure_port(bind)
            else:
                bound = server.add_secure_port(bind, self.server_credentials.credentials())
        except RuntimeError:
            bound = 0
        if bound == 0:
            log.error("data_plane_listener_failed", listen=bind, reason="the address is in use or not local")
            return False
        await server.start()
        self._server = server
        log.info("data_plane_listening", listen=bind, tls=self.server_credentials is not None)
        return True

    def start(self) -> None:
        """Start polling metadata, fetching, expiring ISR members and sending AlterPartition (after the agent has
        registered: fetches and AlterPartition carry its broker epoch)."""
        for name, work in (
            ("alter-partition", self.sender.run()),
            ("metadata-poller", self._poll_metadata()),
            ("isr-expiration", self._expire_isr()),
            ("data-plane-status", self._log_status()),
        ):
            self._tasks.append(spawn(work, name=name, on_error=self._failed(name)))
        log.info(
            "data_plane_started",
            produce_rate=self.config.produce_rate,
            replica_lag_time_max_ms=self.config.replica_lag_time_max_ms,
            paused=self.paused,
        )

    async def stop(self) -> None:
        await cancel_until_done([*self._tasks, *self._fetchers.values()])
        self._tasks.clear()
        self._fetchers.clear()
        for ch in self._channels.values():
            await ch.close()
        self._channels.clear()
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None

    def set_paused(self, paused: bool) -> None:
        """Stop (or resume) fetching as a follower: a test's way to make this broker fall out of the ISRs."""
        if paused != self.paused:
            self.paused = paused
            log.info("replication_paused" if paused else "replication_resumed", broker_id=self.broker_id)

    def _failed(self, doing: str) -> Callable[[BaseException], None]:
        def report(e: BaseException) -> None:
            self.faults.handle_fault(fault_message(f"running the data plane's {doing} task", e), e)

        return report

    # -- metadata -----------------------------------------------------------------------------------------------

    async def poll_metadata_once(self) -> int:
        """Apply the current metadata (and throttle configs); returns how many partitions changed state."""
        if self.image is not None:
            return await self._apply_image()
        started = time.perf_counter()
        cluster = await self.admin.describe_cluster(timeout_ms=self.metadata_interval_ms * 5)
        topics = await self.admin.describe_topics(timeout_ms=self.metadata_interval_ms * 5)
        metadata = partitions_of(topics)
        changed = self.manager.apply_metadata(metadata, brokers_of(cluster))
        self.metadata_polls += 1
        self._sync_fetchers()
        await self.poll_configs()
        self.last_poll_ms = (time.perf_counter() - started) * 1000
        return changed

    async def _apply_image(self) -> int:
        image = self.image
        assert image is not None
        if not image.ready(self.broker_epoch()):
            return 0  # still catching up to its registration
        started = time.perf_counter()
        offset = image.image.committed_offset  # the image as it is now: the read below takes all of it
        news, changed = await apply_image(image, self.manager)
        self.applied_offset = offset
        if news.metadata:
            self.metadata_polls += 1
            self._sync_fetchers()
        if news.metadata or news.configs:  # the topics to watch follow the partitions' state
            await self.poll_configs()
            self.last_poll_ms = (time.perf_counter() - started) * 1000
        return changed

    async def _describe_configs(self, resources: list[ConfigResource]) -> list[DescribeConfigsResult]:
        return await self.admin.describe_configs(resources, timeout_ms=self.metadata_interval_ms * 5)

    async def poll_configs(self) -> None:
        """Read the throttle configs: this broker's rates and, for topics where something moves, the throttled
        replicas. A failure keeps what was known (one warning until it works again)."""
        if self.throttle_reader is not None:
            await self._read_image_configs(self.throttle_reader)
            return
        resources = [ConfigResource(ConfigResourceType.BROKER, str(self.broker_id), BROKER_KEYS)]
        resources += [
            ConfigResource(ConfigResourceType.TOPIC, t, TOPIC_KEYS) for t in sorted(self.manager.topics_to_watch())
        ]
        try:
            results = await self._describe_configs(resources)
        except KafkaError as e:  # AdminError from the controller; the image's own errors (a timeout) likewise
            if not self._configs_failing:
                log.warning("throttle_config_poll_failed", error=str(e))
            self._configs_failing = True
            return
        if self._configs_failing:
            log.info("throttle_config_poll_recovered")
        self._configs_failing = False
        self.config_polls += 1
        self.apply_configs(results)

    async def _read_image_configs(self, reader: ThrottleConfigReader) -> None:
        """From the image, in place: only what may have changed since the last read (see throttle_configs). The
        topics this broker holds values of are re-read too when the configs change, watched or not: none goes
        stale (ReplicationThrottles.retain drops those of topics no longer held)."""
        throttles = self.manager.throttles
        known = throttles.leader_replicas.keys() | throttles.follower_replicas.keys()
        reads = await reader.read(self.manager.topics_to_watch(), known)
        self.config_polls += 1
        if reads.rates is not None:
            throttles.set_rates(*reads.rates, self.manager.clock())
        for topic, leader, follower in reads.topics:
            throttles.set_topic(topic, leader, follower)

    def apply_configs(self, results: Iterable[DescribeConfigsResult]) -> None:
        throttles = self.manager.throttles
        for r in results:
            if r.error.failed:  # a topic deleted meanwhile, say: keep what was known
                log.debug("throttle_config_unavailable", resource=r.resource_name, error=r.error.code.name)
                continue
            values = {c.name: c.value for c in r.configs}
            if r.resource_type == ConfigResourceType.BROKER:
                rates = parse_rate(values.get(LEADER_RATE)), parse_rate(values.get(FOLLOWER_RATE))
                throttles.set_rates(*rates, self.manager.clock())
            elif r.resource_type == ConfigResourceType.TOPIC:
                throttles.set_topic(r.resource_name, values.get(LEADER_REPLICAS), values.get(FOLLOWER_REPLICAS))

    async def _poll_metadata(self) -> None:
        failing = False
        while True:
            self._refresh.clear()
            try:
                changed = await self.poll_metadata_once()
            except AdminError as e:
                if not failing:
                    log.warning("metadata_poll_failed", error=str(e))
                failing = True
            else:
                if failing:
                    log.info("metadata_poll_recovered")
                failing = False
                if changed:
                    log.debug("metadata_applied", changed=changed, poll_ms=round(self.last_poll_ms, 1))
            # Looking at an unchanged image costs a few compares; a delta costs what changed, needed either way.
            wait = IMAGE_POLL_INTERVAL_S if self.image is not None else self.metadata_interval_ms / 1000
            try:
                await asyncio.wait_for(self._refresh.wait(), wait)
                await asyncio.sleep(MIN_REFRESH_GAP_S)
            except TimeoutError:
                pass

    async def _alter_partition(self, broker_id: int, broker_epoch: int, topics: list) -> object:
        try:
            return await self.admin.alter_partition(broker_id, broker_epoch, topics, timeout_ms=15_000)
        except AdminError as e:
            if e.code in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
                self._refresh.set()
            raise

    async def _expire_isr(self) -> None:
        interval = self.config.replica_lag_time_max_ms / 2 / 1000  # Kafka's isr-expiration schedule
        while True:
            await asyncio.sleep(interval)
            await drain_pausing(self.manager.shrink_isr_steps(SCAN_SLICE))

    async def _log_status(self) -> None:
        while True:
            await asyncio.sleep(STATUS_INTERVAL_S)
            c = self.manager.counters
            log.info(
                "data_plane_status",
                **await drain_pausing(self.manager.summary_steps(SCAN_SLICE)),
                paused=self.paused,
                fetches_sent=c.fetches_sent,
                messages_fetched=c.messages_fetched,
                fetches_answered=c.fetches_answered,
                replication_bytes_in=c.replication_bytes_in,
                replication_bytes_out=c.replication_bytes_out,
                reassignment_bytes_in=c.reassignment_bytes_in,
                reassignment_bytes_out=c.reassignment_bytes_out,
                isr_shrinks=c.isr_shrinks,
                isr_expands=c.isr_expands,
                metadata_polls=self.metadata_polls,
                last_metadata_poll_ms=round(self.last_poll_ms, 1),
            )

    # -- follower fetchers --------------------------------------------------------------------------------------

    def _sync_fetchers(self) -> None:
        for leader_id in self.manager.followed_leaders():
            if leader_id not in self._fetchers:
                name = f"fetcher-{leader_id}"
                self._fetchers[leader_id] = spawn(self._fetch_from(leader_id), name=name, on_error=self._failed(name))

    def _channel(self, endpoint: tuple[str, int], leader_id: int) -> grpc.aio.Channel:
        ch = self._channels.get((endpoint, leader_id))
        if ch is None:
            # With TLS the leader must prove to be broker-<leader_id>, whatever address the metadata gave for it.
            tls = self.client_tls and ClientTls(self.client_tls.credentials, broker_name(leader_id))
            ch = self._channels[(endpoint, leader_id)] = aio_channel(grpc_target(*endpoint), tls, CHANNEL_OPTIONS)
        return ch

    async def _fetch_from(self, leader_id: int) -> None:
        """Kafka's ReplicaFetcherThread for one leader broker: every partition followed from it in one request."""
        wait = self.config.replica_fetch_wait_max_ms / 1000
        try:
            while leader_id in self.manager.followed_leaders():
                fetch = None if self.paused else self.manager.session_fetch(leader_id)
                if fetch is None:
                    await asyncio.sleep(wait if self.paused else self.manager.fetch_delay_ms(leader_id) / 1000)
                    continue
                broker = self.manager.brokers.brokers.get(leader_id)
                if broker is None or broker.endpoint is None:
                    self.manager.session_failed(leader_id, fetch)
                    await asyncio.sleep(wait)
                    continue
                request = pb.FetchRequest(
                    replica_id=self.broker_id,
                    broker_epoch=self.broker_epoch(),
                    max_bytes=self.config.replica_fetch_response_max_bytes,
                    session_id=fetch.session_id,
                    session_epoch=fetch.session_epoch,
                )
                add = request.partitions.add
                for i, item in enumerate(fetch.items, 1):
                    if i % ENCODE_SLICE == 0:
                        await asyncio.sleep(0)  # a full fetch after a restart names ~250k partitions
                    add(
                        topic_id=bytes(item.partition.topic_id),
                        partition=item.partition.index,
                        fetch_offset=item.fetch_offset,
                        current_leader_epoch=item.leader_epoch,
                        partition_max_bytes=item.max_bytes,
                    )
                forget = request.forgotten.add
                for topic_id, index in fetch.forgotten:
                    forget(topic_id=bytes(topic_id), partition=index)
                stub = pb_grpc.ReplicaFetchStub(self._channel(broker.endpoint, leader_id))
                try:
                    response = await stub.Fetch(request, timeout=self.config.replica_socket_timeout_ms / 1000)
                except grpc.aio.AioRpcError as e:
                    self.manager.session_failed(leader_id, fetch)
                    if leader_id not in self._fetch_failing:
                        self._fetch_failing.add(leader_id)
                        log.warning("fetch_failed", leader=leader_id, endpoint=broker.endpoint, code=e.code().name)
                    continue
                if leader_id in self._fetch_failing:
                    self._fetch_failing.discard(leader_id)
                    log.info("fetch_recovered", leader=leader_id)
                answers = {}
                for i, a in enumerate(response.partitions, 1):
                    if i % ENCODE_SLICE == 0:
                        await asyncio.sleep(0)
                    answers[a.topic_id, a.partition] = FetchAnswer(
                        _error(a.error_code), a.high_watermark, a.log_end_offset, a.records_end_offset
                    )
                error = _error(response.error_code)
                steps = self.manager.on_session_response(leader_id, fetch, error, response.session_id, answers)
                if not await drain_pausing(steps):  # a full fetch's answer, a slice at a time
                    await asyncio.sleep(self.manager.fetch_delay_ms(leader_id) / 1000)
        finally:
            if self._fetchers.get(leader_id) is asyncio.current_task():
                del self._fetchers[leader_id]
                self.manager.sessions.reset(leader_id)
