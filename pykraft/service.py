"""The public gRPC Controller service: protobuf in, QuorumController calls, protobuf out.

Request fields are checked here first (a message that names the field and value); Kafka's rules live in the
controller. A node that is not the active controller answers NOT_CONTROLLER with the controller's id and endpoint.
A broker serves it too, over its metadata image: reads from the image, writes answered NOT_CONTROLLER.
Every request is logged as one structured event: what was asked, the result codes, the latency. With
``authorizer.class.name`` set, every request is authorized as Kafka's ControllerApis does
(:mod:`pykraft.authorization`), after the NOT_CONTROLLER answer of a node that is not the controller. The requests of
a partition's life after creation, and the config requests, are in :mod:`pykraft.lifecycle_service`; partition
reassignment in :mod:`pykraft.reassignment_service`; ACLs in :mod:`pykraft.acl_service`; client quotas and KIP-599's
throttling of CreateTopics / CreatePartitions / DeleteTopics in :mod:`pykraft.quota_service`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import grpc
import structlog

from controller.authorizer import AclOperation as Op
from controller.authorizer import ResourceType as Res
from controller.cluster_control import Endpoint, HeartbeatRequest, RegisterBrokerRequest
from controller.quorum_controller import NotControllerError, QuorumController, TopicDescription
from controller.replication_control import METADATA_TOPIC, NewTopic
from controller.results import ApiError
from controller.topic_names import shown
from pykraft.acl_service import AclServicer
from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.authorization import OPEN, Caller, Unauthenticated, controller_authorization, creation_checks
from pykraft.lifecycle_service import LifecycleServicer, RequestError
from pykraft.quota_service import QuotaServicer, throttled_error
from pykraft.reassignment_service import ReassignmentServicer
from pykraft.security.principal import SslPrincipalMapper
from quorum.errors import Errors, KafkaError
from quorum.log.message import Uuid
from quorum.raft.config import VoterAddress
from quorum.raft.runtime import RaftNode

log = structlog.get_logger("pykraft.service")
R = TypeVar("R")
# The caller of the request this task serves (set by _caller, read by _serve's log line); gRPC runs each request in
# its own task, so it never leaks into another request.
_CALLER: ContextVar[Caller | None] = ContextVar("pykraft_caller", default=None)
DESCRIBE_CHUNK = 2000  # partitions described between two yields to the event loop
# Asked again and again (brokers' heartbeats, pollers, describes): their successes are per-request chatter, logged
# at DEBUG, as is any NOT_CONTROLLER (clients try each node in turn). Requests that change state stay at INFO.
CHATTER_APIS = frozenset(
    {
        "BrokerHeartbeat",
        "DescribeCluster",
        "DescribeTopics",
        "DescribeConfigs",
        "ListPartitionReassignments",
        "DescribeAcls",
        "DescribeClientQuotas",
    }
)


def bounded(value: Any) -> Any:
    """A log field with every string in it (lists, dicts and their keys too) as :func:`shown` echoes names."""
    if isinstance(value, str):
        return shown(value)
    if isinstance(value, dict):
        return {bounded(k): bounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [bounded(v) for v in value]
    return value


class ControllerService(
    LifecycleServicer, ReassignmentServicer, AclServicer, QuotaServicer, pb_grpc.ControllerServicer
):
    def __init__(
        self,
        controller: QuorumController,
        cluster_id: str,
        voters: dict[int, VoterAddress],
        *,
        mapper: SslPrincipalMapper | None = None,
    ) -> None:
        """``mapper``: the TLS listener's ``ssl.principal.mapping.rules`` (default: pykraft's), naming callers when
        the controller's settings turn authorization on."""
        self.controller = controller
        self.cluster_id = cluster_id
        self.voters = voters
        self.authorization = controller_authorization(controller, mapper)
        self._quota_mapper = mapper or SslPrincipalMapper()  # names callers for quotas, authorization on or off
        self._templates: dict[tuple[tuple[str, str, int], ...], pb.CreateTopicsResponse.TopicResult] = {}
        self._broker_states: dict[int, tuple[bool, bool, bool]] = {}  # the last heartbeat answer, by broker

    def add_to_server(self, server: grpc.aio.Server) -> None:
        pb_grpc.add_ControllerServicer_to_server(self, server)

    def _hint(self) -> pb.ControllerHint:
        leader = self.controller.leader.leader_id
        addr = self.voters.get(leader)
        return pb.ControllerHint(controller_id=leader, controller_endpoint=f"{addr.host}:{addr.port}" if addr else "")

    async def _caller(
        self, context: grpc.aio.ServicerContext, *, read: bool = False, controller_only: bool = True
    ) -> Caller:
        """Who sent the request, for its authorization checks (:data:`OPEN`, allowing everything, when
        authorization is off). A node that would answer NOT_CONTROLLER answers it first, as before (``read``:
        a broker's image serves the request itself); ``controller_only=False`` for requests any node serves."""
        if not self.authorization.enabled:
            return OPEN
        ctl = self.controller
        if controller_only and not ctl.active and not (read and (ctl.settings.serve_local_reads or local(context))):
            raise NotControllerError(
                f"node {ctl.node_id} is not the controller; the leader is node {ctl.leader.leader_id}",
                ctl.leader.leader_id,
            )
        caller = await self.authorization.caller(context)
        _CALLER.set(caller)
        return caller

    async def _serve(
        self,
        name: str,
        response_type: type[R],
        call: Callable[[], Awaitable[R]],
        summarize: Callable[[R], dict[str, Any]] | None = None,
        chatter: Callable[[], bool] | None = None,
        **fields: Any,
    ) -> R:
        """Run ``call``; turn request-level Kafka errors into the response's error fields, and log the request
        (one line, with what ``summarize`` picks from the response): at DEBUG if it succeeded and ``chatter()`` says
        so (by default: if its API is in :data:`CHATTER_APIS`), or was refused with NOT_CONTROLLER; else at INFO."""
        started = time.monotonic()
        error_code = Errors.NONE
        _CALLER.set(None)
        try:
            response = await call()
            error_code = getattr(response, "error_code", Errors.NONE)  # a request-level error answered, not raised
        except Unauthenticated:  # the call's status says so (logged as principal_refused): no answer is sent
            return response_type()
        except NotControllerError as e:
            error_code = e.code
            response = response_type(error_code=int(e.code), error_message=str(e), controller=self._hint())
        except KafkaError as e:
            error_code = e.code
            response = response_type(error_code=int(e.code), error_message=str(e), controller=self._hint())
        latency_ms = (time.monotonic() - started) * 1000
        if summarize is not None and error_code == Errors.NONE:
            fields.update(summarize(response))
        caller = _CALLER.get()
        if caller is not None:  # authorization on: who asked, for the audit trail
            fields["principal"], fields["host"] = caller.principal, caller.host
        fields = {k: bounded(v) for k, v in fields.items()}  # names a client sent may be megabytes long
        ok_is_chatter = name in CHATTER_APIS if chatter is None else chatter()
        quiet = error_code == Errors.NOT_CONTROLLER or (error_code == Errors.NONE and ok_is_chatter)
        (log.debug if quiet else log.info)(
            "request",
            api=name,
            error_code=int(error_code),
            latency_ms=round(latency_ms, 2),
            committed_offset=self.controller.committed_offset,
            **fields,
        )
        return response

    # -- CreateTopics ----------------------------------------------------------------------------------------

    def _configs_template(self, configs: tuple[tuple[str, str, int], ...]) -> pb.CreateTopicsResponse.TopicResult:
        """A result carrying just these configs, built once: most topics report the same ~30 effective configs,
        and copying them in C is ~6x cheaper than adding them one by one."""
        template = self._templates.get(configs)
        if template is None:
            if len(self._templates) >= 64:
                self._templates.clear()
            template = self._templates[configs] = pb.CreateTopicsResponse.TopicResult(
                configs=[pb.CreateTopicsResponse.Config(name=n, value=v, config_source=s) for n, v, s in configs]
            )
        return template

    async def CreateTopics(
        self, request: pb.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateTopicsResponse:
        async def call() -> pb.CreateTopicsResponse:
            caller = await self._caller(context)
            timeout = self._timeout(request.timeout_ms)
            topics = [
                NewTopic(
                    name=t.name,
                    num_partitions=t.num_partitions,
                    replication_factor=t.replication_factor,
                    assignments=tuple((a.partition_index, tuple(a.broker_ids)) for a in t.assignments),
                    configs=tuple((c.name, c.value if c.HasField("value") else None) for c in t.configs),
                )
                for t in request.topics
            ]
            refused: list[str] = []
            describable: set[str] | None = None  # None: every topic's configs are shown
            if caller.enforced:
                refused, describable = creation_checks(caller, [t.name for t in topics], METADATA_TOPIC)
                if refused:
                    skip = set(refused)
                    topics = [t for t in topics if t.name not in skip]
            throttle = self._throttle(context, caller)
            default_partitions = self.controller.settings.num_partitions
            throttled = throttle.admit(
                [t.num_partitions if t.num_partitions > 0 else len(t.assignments) or default_partitions for t in topics]
            )
            passed = [t for i, t in enumerate(topics) if i not in throttled] if throttled else topics
            results = await self.controller.create_topics(
                passed, validate_only=request.validate_only, timeout_ms=timeout
            )
            out = pb.CreateTopicsResponse()
            for r in results:
                if r.error.failed:  # nothing created: its partitions go back to the bucket
                    throttle.refund_named(r.name, [t.name for t in topics])
                item = out.topics.add()
                hidden = describable is not None and r.name not in describable and not r.error.failed
                if r.configs and not hidden:
                    item.MergeFrom(self._configs_template(r.configs))
                item.name = r.name
                item.error_code = int(r.error.code)
                item.error_message = r.error.message or ""
                if hidden:  # Kafka's answer to a creator who may not DESCRIBE_CONFIGS the topic
                    item.topic_config_error_code = Errors.TOPIC_AUTHORIZATION_FAILED
                    item.num_partitions = item.replication_factor = -1
                else:
                    item.num_partitions = r.num_partitions
                    item.replication_factor = r.replication_factor
                if r.topic_id is not None:
                    item.topic_id = str(r.topic_id)
            for name in refused:  # after the controller's results, as Kafka's ControllerApis
                out.topics.add(
                    name=name,
                    error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                    error_message=caller.denied(Op.CREATE, Res.TOPIC, name),
                )
            if throttled:
                code, message = throttled_error()
                for i in sorted(throttled):
                    out.topics.add(name=topics[i].name, error_code=code, error_message=message)
                out.throttle_time_ms = throttle.throttle_time_ms
            return out

        def summarize(response: pb.CreateTopicsResponse) -> dict[str, Any]:
            topics = response.topics
            return {
                "results": {t.name: t.error_code for t in topics[:20]},
                "failed": sum(1 for t in topics if t.error_code),
            }

        return await self._serve(
            "CreateTopics",
            pb.CreateTopicsResponse,
            call,
            summarize,
            topic_count=len(request.topics),
            validate_only=request.validate_only,
        )

    # -- reads -----------------------------------------------------------------------------------------------

    async def DescribeTopics(
        self, request: pb.DescribeTopicsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeTopicsResponse:
        async def call() -> pb.DescribeTopicsResponse:
            caller = await self._caller(context, read=True)
            timeout = self._timeout(request.timeout_ms)
            names: list[str] | None = list(request.names) or None
            visible: set[str] | None = None  # with authorization: the names asked for that the caller may DESCRIBE
            if caller.enforced and names is not None:
                visible = caller.allowed_names(Op.DESCRIBE, Res.TOPIC, names)
                names = [n for n in names if n in visible]
            described = (
                await self.controller.describe_topics(names, timeout, local=local(context))
                if names is None or names
                else []
            )
            if caller.enforced and visible is None:  # every topic: those the caller may not DESCRIBE are left out
                described = [d for d in described if caller.allowed(Op.DESCRIBE, Res.TOPIC, d.name, log_denied=False)]
            if visible is not None and len(described) < len(request.names):
                # Refused names keep their place; existence is not revealed (Kafka's Metadata answer).
                found = iter(described)
                described = [
                    next(found)
                    if n in visible
                    else TopicDescription(n, None, (), (), _refused(caller.denied(Op.DESCRIBE, Res.TOPIC, n)))
                    for n in request.names
                ]
            fenced = {b.id for b in self.controller.cluster.brokers.committed().values() if b.fenced}
            out = pb.DescribeTopicsResponse()
            built = 0
            for d in described:
                built += len(d.partitions) + 1
                if built >= DESCRIBE_CHUNK:
                    # A whole cluster's answer takes a second to build at 100k partitions: let the loop serve
                    # the quorum's fetches meanwhile (followers take a leader silent that long for gone).
                    built = 0
                    await asyncio.sleep(0)
                t = out.topics.add(name=d.name, error_code=int(d.error.code), error_message=d.error.message or "")
                if d.topic_id is not None:
                    t.topic_id = str(d.topic_id)
                for index, p in d.partitions:
                    t.partitions.add(
                        partition_index=index,
                        leader_id=p.leader,
                        leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        replicas=p.replicas,
                        isr=p.isr,
                        offline_replicas=[r for r in p.replicas if r in fenced],
                        leader_recovery_state=p.leader_recovery_state,
                        adding_replicas=p.adding,
                        removing_replicas=p.removing,
                    )
                if d.configs and (
                    not caller.enforced or caller.allowed(Op.DESCRIBE_CONFIGS, Res.TOPIC, d.name, log_denied=False)
                ):
                    t.configs.update(dict(d.configs))
            return out

        return await self._serve("DescribeTopics", pb.DescribeTopicsResponse, call, names=list(request.names)[:20])

    async def CreateSnapshot(
        self, request: pb.CreateSnapshotRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreateSnapshotResponse:
        async def call() -> pb.CreateSnapshotResponse:
            # Any node snapshots its own state. No Kafka RPC does this: ALTER on the CLUSTER, as operator requests.
            (await self._caller(context, controller_only=False)).require_cluster(Op.ALTER)
            before = self.controller.raft.latest_snapshot_id()
            try:
                async with asyncio.timeout(self._timeout(request.timeout_ms) / 1000):
                    snapshot_id = await self.controller.force_snapshot()
            except TimeoutError:
                raise KafkaError(
                    "the snapshot was not frozen in time (it may still be)", Errors.REQUEST_TIMED_OUT
                ) from None
            except OSError as e:
                raise KafkaError(f"writing the snapshot failed: {e}", Errors.KAFKA_STORAGE_ERROR) from None
            out = pb.CreateSnapshotResponse(node_id=self.controller.node_id, end_offset=-1)
            if snapshot_id is not None:
                out.end_offset, out.epoch = snapshot_id.end_offset, snapshot_id.epoch
                out.created = snapshot_id != before
                raft = self.controller.raft
                if isinstance(raft, RaftNode):
                    out.size_bytes = raft.log.snapshots.size(snapshot_id)
            return out

        return await self._serve("CreateSnapshot", pb.CreateSnapshotResponse, call)

    async def DescribeCluster(
        self, request: pb.DescribeClusterRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeClusterResponse:
        async def call() -> pb.DescribeClusterResponse:
            (await self._caller(context, read=True)).require_cluster(Op.DESCRIBE)
            brokers = await self.controller.describe_cluster(self._timeout(request.timeout_ms))
            now = int(time.monotonic() * 1000)
            # A broker's image answers too (serve_local_reads): the controller is then the leader it follows.
            ctl = self.controller
            controller_id = ctl.node_id if ctl.active else ctl.leader.leader_id
            out = pb.DescribeClusterResponse(cluster_id=self.cluster_id, controller_id=controller_id)
            for b in brokers:
                last = self.controller.cluster.last_contact_ms(b.id)
                out.brokers.add(
                    broker_id=b.id,
                    rack=b.rack or "",
                    fenced=b.fenced,
                    in_controlled_shutdown=b.in_controlled_shutdown,
                    broker_epoch=b.epoch,
                    incarnation_id=str(b.incarnation_id),
                    listeners=[
                        pb.Listener(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                        for e in b.endpoints
                    ],
                    last_heartbeat_age_ms=-1 if last is None else now - last,
                )
            return out

        return await self._serve("DescribeCluster", pb.DescribeClusterResponse, call)

    # -- brokers ---------------------------------------------------------------------------------------------

    async def RegisterBroker(
        self, request: pb.RegisterBrokerRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterBrokerResponse:
        async def call() -> pb.RegisterBrokerResponse:
            (await self._caller(context)).require_cluster(Op.CLUSTER_ACTION)
            timeout = self._timeout(request.timeout_ms)
            try:
                incarnation = Uuid(request.incarnation_id)
            except (ValueError, TypeError):
                raise RequestError(
                    f"incarnation_id: {request.incarnation_id!r} is not a base64url UUID", Errors.INVALID_REQUEST
                ) from None
            for listener in request.listeners:
                if not 0 < listener.port < 65536:
                    raise RequestError(f"listeners: port {listener.port} is out of range", Errors.INVALID_REQUEST)
            registration = RegisterBrokerRequest(
                broker_id=request.broker_id,
                incarnation_id=incarnation,
                rack=request.rack or None,
                endpoints=tuple(Endpoint(x.name, x.host, x.port, x.security_protocol) for x in request.listeners),
            )
            epoch = await self.controller.register_broker(registration, timeout)
            return pb.RegisterBrokerResponse(broker_epoch=epoch)

        return await self._serve(
            "RegisterBroker", pb.RegisterBrokerResponse, call, broker_id=request.broker_id, rack=request.rack
        )

    async def BrokerHeartbeat(
        self, request: pb.BrokerHeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.BrokerHeartbeatResponse:
        changed = False

        async def call() -> pb.BrokerHeartbeatResponse:
            nonlocal changed
            (await self._caller(context)).require_cluster(Op.CLUSTER_ACTION)
            timeout = self._timeout(request.timeout_ms)
            reply = await self.controller.broker_heartbeat(
                HeartbeatRequest(
                    request.broker_id,
                    request.broker_epoch,
                    request.current_metadata_offset,
                    request.want_fence,
                    request.want_shutdown,
                ),
                timeout,
            )
            state = (reply.is_fenced, reply.in_controlled_shutdown, reply.should_shut_down)
            changed = self._broker_states.get(request.broker_id) != state
            self._broker_states[request.broker_id] = state
            return pb.BrokerHeartbeatResponse(
                is_caught_up=reply.is_caught_up,
                is_fenced=reply.is_fenced,
                in_controlled_shutdown=reply.in_controlled_shutdown,
                should_shut_down=reply.should_shut_down,
                metadata_offset=self.controller.committed_offset,
            )

        def summarize(r: pb.BrokerHeartbeatResponse) -> dict[str, Any]:
            return {
                "fenced": r.is_fenced,
                "in_controlled_shutdown": r.in_controlled_shutdown,
                "should_shut_down": r.should_shut_down,
            }

        # At INFO only when the broker's state changed (unfenced, shutting down): the rest is the steady beat.
        return await self._serve(
            "BrokerHeartbeat",
            pb.BrokerHeartbeatResponse,
            call,
            summarize,
            chatter=lambda: not changed,
            broker_id=request.broker_id,
        )


def local(context: object) -> bool:
    """The caller takes this node's committed state even on a standby: Kafka's Metadata, which any controller
    answers from its own image (``CallContext.local_reads``); gRPC callers are sent to the controller."""
    return getattr(context, "local_reads", False) is True


def _refused(message: str) -> ApiError:
    return ApiError(Errors.TOPIC_AUTHORIZATION_FAILED, message)
