"""The pykraft admin client, async (:class:`AdminClient`) and sync (:class:`SyncAdminClient`).

Shaped like Kafka's admin clients::

    async with AdminClient("127.0.0.1:9091,127.0.0.1:9092") as admin:
        results = await admin.create_topics([NewTopic("orders", num_partitions=6, replication_factor=3)])
        results["orders"].raise_for_error()

It finds the active controller from a bootstrap list and follows NOT_CONTROLLER hints; it retries on
NOT_CONTROLLER, on transport failures (UNAVAILABLE) and on the REQUEST_TIMED_OUT of a controller whose event queue
was full (the message says so: the request was refused before it was queued, so resending is safe even for a
write; any other REQUEST_TIMED_OUT is returned, as the request may have been applied) with exponential backoff and
jitter, within an overall deadline.
Per-topic errors are results, not exceptions: a batch of topics can partly succeed.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import grpc

from controller.event_queue import QUEUE_FULL_MESSAGE
from controller.requests import (
    CONFIG_TYPE_IDS,
    AlterConfigsResource,
    AlterPartitionResponse,
    AlterPartitionResult,
    AlterPartitionTopic,
    ConfigEntry,
    ConfigResource,
    ConfigResourceResult,
    ConfigSynonym,
    CreatePartitionsResult,
    DeleteTopicResult,
    DescribeConfigsResult,
    ElectionResult,
)
from controller.results import NO_ERROR, ApiError
from pykraft.acl_client import AclAdmin
from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.quota_client import CLIENT_ID_METADATA, DEFAULT_CLIENT_ID, QuotaAdmin
from pykraft.security.channels import ClientTls, aio_channel, blocking_channel, unavailable_cause
from pykraft.security.tls import TlsSettings
from quorum.errors import Errors, KafkaError
from quorum.log.message import Uuid

T = TypeVar("T")
RETRIABLE_CODES = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED}


class AdminError(KafkaError):
    """A request that failed as a whole (after retries), with Kafka's error code."""


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    replica_assignment: dict[int, list[int]] | None = None  # partition -> brokers; needs -1 count and factor
    topic_configs: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error_code: int
    error_message: str
    topic_id: str = ""
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def error(self) -> str:
        return Errors(self.error_code).name if self.error_code in Errors._value2member_map_ else str(self.error_code)

    def raise_for_error(self) -> None:
        if self.error_code:
            raise AdminError(f"{self.name}: {self.error} ({self.error_message})", Errors(self.error_code))


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int]
    leader_recovery_state: int = 0  # 1: RECOVERING, after an unclean election
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: str
    error_code: int
    error_message: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]


@dataclass(frozen=True)
class NewPartitions:
    """Kafka's NewPartitions.increaseTo(total_count, new_assignments): the topic's new partition count and, for
    a manual assignment, one broker list per new partition (None: the controller places them)."""

    total_count: int
    new_assignments: list[list[int]] | None = None


@dataclass(frozen=True)
class PartitionReassignment:
    """Kafka's PartitionReassignment: a moving partition's replicas (the target, then those being removed) and
    the replicas being added and removed."""

    replicas: list[int]
    adding_replicas: list[int]
    removing_replicas: list[int]


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    broker_epoch: int
    listeners: list[tuple[str, str, int]]
    last_heartbeat_age_ms: int

    def endpoint(self, listener_name: str = "PLAINTEXT") -> tuple[str, int] | None:
        """(host, port) of the named listener, or None when the broker registered none by that name."""
        return next(((host, port) for name, host, port in self.listeners if name == listener_name), None)


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: list[BrokerInfo]


# Kafka's DescribeConfigs ConfigType ids, as the controller names the types.
_CONFIG_TYPE_NAMES = {number: name for name, number in CONFIG_TYPE_IDS.items()}


def _api_error(code: int, message: str) -> ApiError:
    """A response's error code and message as the controller's ApiError (a code this client does not know is
    UNKNOWN_SERVER_ERROR, its number kept in the message)."""
    if not code:
        return NO_ERROR
    if code in Errors._value2member_map_:
        return ApiError(Errors(code), message or None)
    return ApiError(Errors.UNKNOWN_SERVER_ERROR, f"error code {code}: {message}")


def _queue_full(response: Any) -> bool:
    """The controller refused the request because its event queue was full: REQUEST_TIMED_OUT with the queue's own
    message (controller/event_queue.py), which only a request that was never queued gets."""
    return response.error_code == Errors.REQUEST_TIMED_OUT and response.error_message.startswith(QUEUE_FULL_MESSAGE)


_NO_ANSWER = ApiError(Errors.UNKNOWN_SERVER_ERROR, "The server returned no result for this partition.")


def _local_partition_error(topic: str, partition: int) -> ApiError | None:
    """Kafka's AdminClient checks of a partition it is asked about, made before any request."""
    if not topic:
        return ApiError(
            Errors.INVALID_TOPIC_EXCEPTION, f"The given topic name '{topic}' cannot be represented in a request."
        )
    if partition < 0:
        return ApiError(Errors.INVALID_TOPIC_EXCEPTION, f"The given partition index {partition} is not valid.")
    return None


def parse_bootstrap_servers(bootstrap: str | list[str]) -> list[str]:
    """A comma list of ``host:port`` (IPv6 hosts in brackets: ``[::1]:9091``), checked as Kafka's clients check
    ``bootstrap.servers``: a missing or out-of-range port is an error here, never a dial to port 0."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    servers = [s.strip() for s in items if s.strip()]
    if not servers:
        raise ValueError("no server given: expected HOST:PORT[,HOST:PORT...]")
    for s in servers:
        host, colon, port = s.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        elif ":" in host:
            raise ValueError(f"{s!r}: put an IPv6 address in brackets, e.g. [::1]:9091")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{s!r} is not HOST:PORT with a port from 1 to 65535 (e.g. 127.0.0.1:9091)")
    return servers


class AdminClient(AclAdmin, QuotaAdmin):  # ACLs: pykraft/acl_client.py; quotas, throttling: quota_client.py
    def __init__(
        self,
        bootstrap_servers: str | list[str],
        *,
        request_timeout_ms: int = 30_000,
        default_api_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        connect_timeout_ms: int | None = None,
        blocking_transport: bool = False,
        tls: TlsSettings | grpc.ChannelCredentials | ClientTls | None = None,
        server_name: str | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        retry_on_quota_violation: bool = True,
    ) -> None:
        """``client_id``: sent with every request (gRPC metadata ``client-id``, Kafka's header clientId), for
        client quotas. ``retry_on_quota_violation``: wait out THROTTLING_QUOTA_EXCEEDED's throttle time and resend
        the throttled topics (pykraft/quota_client.py). ``connect_timeout_ms``: give up a call after this long
        when no server has answered this client yet ("no controller reachable at …"), instead of retrying dead
        endpoints until the call's deadline; None: the call's deadline alone (a long-running agent that waits for
        its controllers to start).
        ``blocking_transport``: calls go over blocking gRPC channels, each in the loop's default executor — for a
        second event loop in a process (grpc.aio serves one: completions of a second loop's calls are read by
        whichever loop polls first, and lost to the other).
        ``tls``: TLS settings (``security.protocol=SSL``, the ``ssl.*`` files: read and checked here, a bad one
        raises TlsConfigError) or channel credentials; every channel, blocking or not, is then a TLS channel.
        ``server_name``: the name servers' certificates must carry (default: the host dialled)."""
        self.servers = parse_bootstrap_servers(bootstrap_servers)
        self.tls = ClientTls.of(tls, server_name)
        self.connect_timeout_ms = connect_timeout_ms
        self._answered = False  # has any server answered (anything, even NOT_CONTROLLER)?
        self.request_timeout_ms = request_timeout_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.blocking_transport = blocking_transport
        self._channels: dict[str, grpc.aio.Channel | grpc.Channel] = {}
        self._controller: str | None = None  # the last known active controller
        self.attempts = 0
        self.queue_full_retries = 0  # requests resent because the controller's event queue was full
        self.client_id = client_id
        self.retry_on_quota_violation = retry_on_quota_violation
        self._metadata = ((CLIENT_ID_METADATA, client_id),)

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for ch in self._channels.values():
            if isinstance(ch, grpc.aio.Channel):
                await ch.close()
            else:
                ch.close()
        self._channels.clear()

    def _stub(self, target: str) -> Any:
        ch = self._channels.get(target)
        if ch is None:
            ch = self._channels[target] = (
                blocking_channel(target, self.tls) if self.blocking_transport else aio_channel(target, self.tls)
            )
        if isinstance(ch, grpc.aio.Channel):
            return pb_grpc.ControllerStub(ch)
        return _ExecutorStub(pb_grpc.ControllerStub(ch))

    async def _call(self, method: str, request: Any, timeout_ms: int | None = None) -> Any:
        """Send to the controller, following NOT_CONTROLLER hints and retrying transport failures and a full event
        queue's refusals, until the overall deadline. Returns the response (its own error_code may still be set:
        per-request errors, or the last queue-full refusal when no retry fits before the deadline)."""
        started = time.monotonic()
        deadline = started + (timeout_ms or self.default_api_timeout_ms) / 1000
        backoff = self.retry_backoff_ms / 1000
        candidates = list(self.servers)
        last_error = "no attempt made"
        queue_full: Any = None  # the last queue-full refusal: what the caller gets if the deadline ends the retries
        tried = 0
        while True:
            target = self._controller or candidates[tried % len(candidates)]
            tried += 1
            now = time.monotonic()
            remaining = deadline - now
            if not self._answered and self.connect_timeout_ms is not None:
                unreached = started + self.connect_timeout_ms / 1000 - now
                if unreached <= 0:
                    raise AdminError(
                        f"no controller reachable at {','.join(self.servers)} within "
                        f"{self.connect_timeout_ms / 1000:g} s ({last_error})",
                        Errors.NETWORK_EXCEPTION,
                    )
                remaining = min(remaining, unreached)
            if remaining <= 0:
                if queue_full is not None:
                    return queue_full  # the backoff's sleep overran the deadline
                raise AdminError(
                    f"{method} did not succeed before its deadline: {last_error}", Errors.REQUEST_TIMED_OUT
                )
            self.attempts += 1
            try:
                response = await getattr(self._stub(target), method)(
                    request, timeout=min(remaining, self.request_timeout_ms / 1000), metadata=self._metadata
                )
            except grpc.RpcError as e:  # grpc.aio's AioRpcError, or a blocking call's error: both have code()
                if e.code() not in RETRIABLE_CODES:
                    raise AdminError(f"{method} to {target}: {e.code().name} {e.details()}") from None
                last_error, queue_full = f"{target}: {e.code().name}", None
                if e.code() == grpc.StatusCode.UNAVAILABLE and e.details():
                    # gRPC's detail ends in the cause ("...: connect: Connection refused (111)"): keep that part,
                    # or say what a failed TLS handshake means.
                    last_error += f" ({unavailable_cause(e.details(), self.tls is not None)})"
                self._controller = None
            else:
                self._answered = True
                if _queue_full(response):
                    # Never queued, nothing done: resend to the same controller after a backoff, as Kafka's admin
                    # client retries a retriable error. Out of time, the caller gets this answer.
                    self._controller = target
                    queue_full = response
                    pause = backoff * (0.8 + 0.4 * random.random())
                    if time.monotonic() + pause >= deadline:
                        return response
                    self.queue_full_retries += 1
                    await asyncio.sleep(pause)
                    backoff = min(backoff * 2, self.retry_backoff_max_ms / 1000)
                    continue
                if response.error_code != Errors.NOT_CONTROLLER:
                    self._controller = target
                    return response
                last_error, queue_full = f"{target}: NOT_CONTROLLER ({response.error_message})", None
                hint = response.controller.controller_endpoint
                self._controller = hint if hint and hint != target else None
                if self._controller is not None:
                    continue  # go straight to the controller it named
            pause = min(backoff * (0.8 + 0.4 * random.random()), max(0.0, deadline - time.monotonic()))
            await asyncio.sleep(pause)
            backoff = min(backoff * 2, self.retry_backoff_max_ms / 1000)

    @staticmethod
    def _check(response: Any, method: str) -> None:
        if response.error_code:
            raise AdminError(f"{method}: {response.error_message}", Errors(response.error_code))

    # -- topics ----------------------------------------------------------------------------------------------

    async def create_topics(
        self, new_topics: list[NewTopic], *, validate_only: bool = False, timeout_ms: int | None = None
    ) -> dict[str, CreateTopicResult]:
        deadline = self._quota_deadline(timeout_ms)
        results: dict[str, CreateTopicResult] = {}
        pending, call_timeout = new_topics, timeout_ms
        while True:
            request = pb.CreateTopicsRequest(
                validate_only=validate_only, timeout_ms=call_timeout or self.request_timeout_ms
            )
            for t in pending:
                topic = request.topics.add(
                    name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor
                )
                for index, brokers in sorted((t.replica_assignment or {}).items()):
                    topic.assignments.add(partition_index=index, broker_ids=brokers)
                for name, value in t.topic_configs.items():
                    config = topic.configs.add(name=name)
                    if value is not None:
                        config.value = value
            response = await self._call("CreateTopics", request, call_timeout)
            self._check(response, "CreateTopics")
            for r in response.topics:
                results[r.name] = CreateTopicResult(
                    r.name,
                    r.error_code,
                    r.error_message,
                    r.topic_id,
                    r.num_partitions,
                    r.replication_factor,
                    {c.name: c.value for c in r.configs},
                )
            throttled = {r.name for r in response.topics if self._throttled(r.error_code)}
            if not await self._wait_throttle(len(throttled), response.throttle_time_ms, deadline):
                return results
            pending = [t for t in pending if t.name in throttled]
            call_timeout = self._remaining_ms(deadline, timeout_ms)

    async def describe_topics(
        self, names: list[str] | None = None, timeout_ms: int | None = None
    ) -> list[TopicDescription]:
        response = await self._call("DescribeTopics", pb.DescribeTopicsRequest(names=names or []), timeout_ms)
        self._check(response, "DescribeTopics")
        return [
            TopicDescription(
                t.name,
                t.topic_id,
                t.error_code,
                t.error_message,
                [
                    PartitionInfo(
                        p.partition_index,
                        p.leader_id,
                        p.leader_epoch,
                        p.partition_epoch,
                        list(p.replicas),
                        list(p.isr),
                        list(p.offline_replicas),
                        p.leader_recovery_state,
                        list(p.adding_replicas),
                        list(p.removing_replicas),
                    )
                    for p in t.partitions
                ],
                dict(t.configs),
            )
            for t in response.topics
        ]

    async def delete_topics(
        self, topics: list[str], *, topic_ids: list[str] | None = None, timeout_ms: int | None = None
    ) -> list[DeleteTopicResult]:
        """Delete topics by name and/or by id (base64url); one result per topic named, in request order."""
        named: list[tuple[str | None, str | None]] = [(n, None) for n in topics]
        named += [(None, i) for i in topic_ids or []]
        results: list[DeleteTopicResult | None] = [None] * len(named)
        deadline = self._quota_deadline(timeout_ms)
        pending, call_timeout = list(range(len(named))), timeout_ms
        while True:
            request = pb.DeleteTopicsRequest(timeout_ms=call_timeout or self.request_timeout_ms)
            for i in pending:
                name, topic_id = named[i]
                if name is not None:
                    request.topics.add(name=name)
                else:
                    request.topics.add(topic_id=topic_id)
            response = await self._call("DeleteTopics", request, call_timeout)
            self._check(response, "DeleteTopics")
            throttled = []
            for i, r in zip(pending, response.responses, strict=False):
                results[i] = DeleteTopicResult(
                    r.name if r.HasField("name") else None,
                    Uuid(r.topic_id) if r.topic_id else None,
                    _api_error(r.error_code, r.error_message),
                )
                if self._throttled(r.error_code):
                    throttled.append(i)
            if not await self._wait_throttle(len(throttled), response.throttle_time_ms, deadline):
                return [r for r in results if r is not None]
            pending, call_timeout = throttled, self._remaining_ms(deadline, timeout_ms)

    async def create_partitions(
        self, new_partitions: dict[str, NewPartitions], *, validate_only: bool = False, timeout_ms: int | None = None
    ) -> dict[str, CreatePartitionsResult]:
        """Raise topics' partition counts (Kafka's createPartitions); per-topic results by name."""
        deadline = self._quota_deadline(timeout_ms)
        results: dict[str, CreatePartitionsResult] = {}
        pending, call_timeout = dict(new_partitions), timeout_ms
        while True:
            request = pb.CreatePartitionsRequest(
                validate_only=validate_only, timeout_ms=call_timeout or self.request_timeout_ms
            )
            for name, n in pending.items():
                topic = request.topics.add(name=name, count=n.total_count)
                if n.new_assignments is not None:
                    topic.assignments.SetInParent()  # present even when empty: [] is not null
                    for brokers in n.new_assignments:
                        topic.assignments.assignments.add(broker_ids=brokers)
            response = await self._call("CreatePartitions", request, call_timeout)
            self._check(response, "CreatePartitions")
            for r in response.results:
                results[r.name] = CreatePartitionsResult(r.name, _api_error(r.error_code, r.error_message))
            throttled = {r.name for r in response.results if self._throttled(r.error_code)}
            if not await self._wait_throttle(len(throttled), response.throttle_time_ms, deadline):
                return results
            pending = {k: v for k, v in pending.items() if k in throttled}
            call_timeout = self._remaining_ms(deadline, timeout_ms)

    async def elect_leaders(
        self, election_type: int, topic_partitions: list[tuple[str, int]] | None, *, timeout_ms: int | None = None
    ) -> list[ElectionResult]:
        """Kafka's electLeaders: ``election_type`` an ElectionType (0 preferred, 1 unclean); ``topic_partitions``
        None elects for every partition (results then leave out those whose leader needs no election)."""
        request = pb.ElectLeadersRequest(
            election_type=int(election_type), timeout_ms=timeout_ms or max(self.request_timeout_ms, 60_000)
        )
        if topic_partitions is not None:
            request.topic_partitions.SetInParent()
            by_topic: dict[str, list[int]] = {}
            for topic, partition in topic_partitions:
                by_topic.setdefault(topic, []).append(partition)
            for topic, partitions in by_topic.items():
                request.topic_partitions.topics.add(topic=topic, partitions=partitions)
        response = await self._call("ElectLeaders", request, timeout_ms)
        self._check(response, "ElectLeaders")
        return [
            ElectionResult(t.topic, p.partition_id, _api_error(p.error_code, p.error_message))
            for t in response.replica_election_results
            for p in t.partition_result
        ]

    async def alter_partition_reassignments(
        self, reassignments: dict[tuple[str, int], list[int] | None], *, timeout_ms: int | None = None
    ) -> dict[tuple[str, int], ApiError]:
        """Kafka's alterPartitionReassignments: per (topic, partition) the target replicas, or None to cancel its
        reassignment; an ApiError for each (NO_ERROR: accepted). As in Kafka's client, a partition with an empty
        topic name or a negative index fails here (INVALID_TOPIC_EXCEPTION) and is not sent."""
        results = {tp: _local_partition_error(*tp) or _NO_ANSWER for tp in reassignments}
        request = pb.AlterPartitionReassignmentsRequest(timeout_ms=timeout_ms or max(self.request_timeout_ms, 60_000))
        topics: dict[str, pb.AlterPartitionReassignmentsRequest.ReassignableTopic] = {}
        for (topic, partition), replicas in reassignments.items():
            if results[(topic, partition)] is _NO_ANSWER:
                if topic not in topics:
                    topics[topic] = request.topics.add(name=topic)
                p = topics[topic].partitions.add(partition_index=partition)
                if replicas is not None:
                    p.replicas.SetInParent()  # present even when empty: [] is not null
                    p.replicas.broker_ids.extend(replicas)
        if topics:
            response = await self._call("AlterPartitionReassignments", request, timeout_ms)
            self._check(response, "AlterPartitionReassignments")
            for t in response.responses:
                for p in t.partitions:
                    if (t.name, p.partition_index) in results:
                        results[(t.name, p.partition_index)] = _api_error(p.error_code, p.error_message)
        return results

    async def list_partition_reassignments(
        self, partitions: list[tuple[str, int]] | None = None, *, timeout_ms: int | None = None
    ) -> dict[tuple[str, int], PartitionReassignment]:
        """Kafka's listPartitionReassignments: the ongoing reassignments of these partitions (None: of every
        partition); partitions that are not moving, or do not exist, are left out."""
        request = pb.ListPartitionReassignmentsRequest(timeout_ms=timeout_ms or max(self.request_timeout_ms, 60_000))
        if partitions is not None:
            request.topics.SetInParent()  # present even when empty: an empty list asks for nothing
            by_topic: dict[str, list[int]] = {}
            for topic, partition in partitions:
                if (local := _local_partition_error(topic, partition)) is not None:
                    raise AdminError(f"ListPartitionReassignments: {local.message}", local.code)
                by_topic.setdefault(topic, []).append(partition)
            for topic, indexes in by_topic.items():
                request.topics.topics.add(name=topic, partition_indexes=indexes)
        response = await self._call("ListPartitionReassignments", request, timeout_ms)
        self._check(response, "ListPartitionReassignments")
        return {
            (t.name, p.partition_index): PartitionReassignment(
                list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
            )
            for t in response.topics
            for p in t.partitions
        }

    async def list_topics(self, timeout_ms: int | None = None) -> list[str]:
        return [t.name for t in await self.describe_topics(None, timeout_ms)]

    # -- configs ---------------------------------------------------------------------------------------------

    async def incremental_alter_configs(
        self, resources: list[AlterConfigsResource], *, validate_only: bool = False, timeout_ms: int | None = None
    ) -> list[ConfigResourceResult]:
        """Set, delete, append to or subtract from configs of topics and brokers; one result per resource."""
        request = pb.IncrementalAlterConfigsRequest(
            validate_only=validate_only, timeout_ms=timeout_ms or self.request_timeout_ms
        )
        for r in resources:
            resource = request.resources.add(resource_type=int(r.resource_type), resource_name=r.resource_name)
            for c in r.configs:
                resource.configs.add(name=c.name, config_operation=int(c.op), value=c.value)
        response = await self._call("IncrementalAlterConfigs", request, timeout_ms)
        self._check(response, "IncrementalAlterConfigs")
        return [
            ConfigResourceResult(r.resource_type, r.resource_name, _api_error(r.error_code, r.error_message))
            for r in response.responses
        ]

    async def alter_configs(
        self,
        configs: Mapping[ConfigResource, Mapping[str, str | None]],
        *,
        validate_only: bool = False,
        timeout_ms: int | None = None,
    ) -> list[ConfigResourceResult]:
        """Kafka's legacy AlterConfigs: each resource's dynamic configs become exactly ``configs[resource]`` (a key
        set now and not named is removed; a None value is refused); one result per resource."""
        request = pb.AlterConfigsRequest(validate_only=validate_only, timeout_ms=timeout_ms or self.request_timeout_ms)
        for r, values in configs.items():
            resource = request.resources.add(resource_type=int(r.resource_type), resource_name=r.resource_name)
            for name, value in values.items():
                config = resource.configs.add(name=name)
                if value is not None:
                    config.value = value
        response = await self._call("AlterConfigs", request, timeout_ms)
        self._check(response, "AlterConfigs")
        return [
            ConfigResourceResult(r.resource_type, r.resource_name, _api_error(r.error_code, r.error_message))
            for r in response.responses
        ]

    async def describe_configs(
        self,
        resources: list[ConfigResource],
        *,
        include_synonyms: bool = False,
        include_documentation: bool = False,
        timeout_ms: int | None = None,
    ) -> list[DescribeConfigsResult]:
        """Each resource's configs (all of them, or the ``keys`` asked for), with their sources."""
        request = pb.DescribeConfigsRequest(
            include_synonyms=include_synonyms,
            include_documentation=include_documentation,
            timeout_ms=timeout_ms or self.request_timeout_ms,
        )
        for r in resources:
            resource = request.resources.add(resource_type=int(r.resource_type), resource_name=r.resource_name)
            if r.keys is not None:
                resource.configuration_keys.SetInParent()
                resource.configuration_keys.keys.extend(r.keys)
        response = await self._call("DescribeConfigs", request, timeout_ms)
        self._check(response, "DescribeConfigs")
        return [
            DescribeConfigsResult(
                r.resource_type,
                r.resource_name,
                _api_error(r.error_code, r.error_message),
                tuple(
                    ConfigEntry(
                        c.name,
                        c.value if c.HasField("value") else None,
                        c.config_source,
                        c.read_only,
                        c.is_sensitive,
                        tuple(
                            ConfigSynonym(y.name, y.value if y.HasField("value") else None, y.source)
                            for y in c.synonyms
                        ),
                        _CONFIG_TYPE_NAMES.get(c.config_type, "unknown"),
                        c.documentation if c.HasField("documentation") else None,
                    )
                    for c in r.configs
                ),
            )
            for r in response.results
        ]

    async def describe_cluster(self, timeout_ms: int | None = None) -> ClusterDescription:
        response = await self._call("DescribeCluster", pb.DescribeClusterRequest(), timeout_ms)
        self._check(response, "DescribeCluster")
        return ClusterDescription(
            response.cluster_id,
            response.controller_id,
            [
                BrokerInfo(
                    b.broker_id,
                    b.rack or None,
                    b.fenced,
                    b.in_controlled_shutdown,
                    b.broker_epoch,
                    [(x.name, x.host, x.port) for x in b.listeners],
                    b.last_heartbeat_age_ms,
                )
                for b in response.brokers
            ],
        )

    # -- brokers (the broker agent's side) -------------------------------------------------------------------

    async def register_broker(
        self, broker_id: int, incarnation_id: str, rack: str | None, listeners: list[tuple[str, str, int]]
    ) -> int:
        request = pb.RegisterBrokerRequest(broker_id=broker_id, incarnation_id=incarnation_id, rack=rack or "")
        for name, host, port in listeners:
            request.listeners.add(name=name, host=host, port=port)
        response = await self._call("RegisterBroker", request)
        self._check(response, "RegisterBroker")
        return response.broker_epoch

    async def heartbeat(
        self, broker_id: int, broker_epoch: int, metadata_offset: int, *, want_shutdown: bool = False
    ) -> pb.BrokerHeartbeatResponse:
        request = pb.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            current_metadata_offset=metadata_offset,
            want_shutdown=want_shutdown,
        )
        response = await self._call("BrokerHeartbeat", request, self.request_timeout_ms)
        self._check(response, "BrokerHeartbeat")
        return response

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: list[AlterPartitionTopic], *, timeout_ms: int | None = None
    ) -> AlterPartitionResponse:
        """A partition leader's AlterPartition: the ISR (and leader recovery state) it wants for its partitions.
        Request-level errors (STALE_BROKER_EPOCH, BROKER_ID_NOT_REGISTERED, ...) raise AdminError with the code;
        each partition's new state, or its error, is in the response."""
        timeout = timeout_ms or self.request_timeout_ms
        request = pb.AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch, timeout_ms=timeout)
        for t in topics:
            topic = request.topics.add(topic_id=str(t.topic_id))
            for p in t.partitions:
                topic.partitions.add(
                    partition_index=p.partition_index,
                    leader_epoch=p.leader_epoch,
                    new_isr_with_epochs=[
                        pb.AlterPartitionRequest.BrokerState(broker_id=b, broker_epoch=e) for b, e in p.new_isr
                    ],
                    leader_recovery_state=int(p.leader_recovery_state),
                    partition_epoch=p.partition_epoch,
                )
        response = await self._call("AlterPartition", request, timeout)
        self._check(response, "AlterPartition")
        return AlterPartitionResponse(
            NO_ERROR,
            tuple(
                AlterPartitionResult(
                    topic_id=Uuid(t.topic_id),
                    partition_index=p.partition_index,
                    error=_api_error(p.error_code, p.error_message),
                    leader_id=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    isr=tuple(p.isr),
                    leader_recovery_state=p.leader_recovery_state,
                    partition_epoch=p.partition_epoch,
                )
                for t in response.topics
                for p in t.partitions
            ),
        )


class _ExecutorStub:
    """A blocking stub's calls, awaitable: each runs in the running loop's default executor."""

    def __init__(self, stub: pb_grpc.ControllerStub) -> None:
        self._stub = stub

    def __getattr__(self, method: str) -> Callable[..., Awaitable[Any]]:
        call = getattr(self._stub, method)

        async def invoke(request: Any, timeout: float | None = None, metadata: Any = None) -> Any:
            return await asyncio.get_running_loop().run_in_executor(
                None, partial(call, request, timeout=timeout, metadata=metadata)
            )

        return invoke


class SyncAdminClient:
    """The same client for code without an event loop: each call runs on a private loop in its own thread."""

    def __init__(self, bootstrap_servers: str | list[str], **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="pykraft-admin", daemon=True)
        self._thread.start()
        self._client = self._run(self._make(bootstrap_servers, kwargs))

    @staticmethod
    async def _make(bootstrap: str | list[str], kwargs: dict[str, Any]) -> AdminClient:
        return AdminClient(bootstrap, **kwargs)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._client, name)
        if not asyncio.iscoroutinefunction(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            awaitable: Awaitable[Any] = method(*args, **kwargs)
            return self._run(awaitable)  # type: ignore[arg-type]

        return call

    def close(self) -> None:
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> SyncAdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
