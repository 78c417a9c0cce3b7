"""The Controller service's requests for a partition's life after creation — AlterPartition, ElectLeaders,
DeleteTopics, CreatePartitions — and for configs: IncrementalAlterConfigs, the legacy AlterConfigs, DescribeConfigs.

Protobuf in, controller/requests.py values to the QuorumController, protobuf out. As for every request of the
service, fields are checked here first (INVALID_REQUEST with a message naming the field and value: a topic id
that is not base64url, a negative partition index, an empty topic name); Kafka's own rules live in the controller.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import grpc

from controller.authorizer import AclOperation as Op
from controller.authorizer import ResourceType as Res
from controller.requests import (
    CONFIG_TYPE_IDS,
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterPartitionData,
    AlterPartitionResponse,
    AlterPartitionTopic,
    ConfigResource,
    ConfigResourceResult,
    DeleteTopicState,
    ElectionType,
    NewPartitions,
)
from pykraft.api import controller_pb2 as pb
from pykraft.authorization import (
    ALTER_CONFIGS_CHECKS,
    DESCRIBE_CONFIGS_CHECKS,
    Caller,
    config_refusals,
    deletion_refusals,
)
from pykraft.quota_service import throttled_error
from pykraft.servicer_part import ServicerPart
from quorum.errors import Errors, KafkaError
from quorum.log.message import ZERO_UUID, Uuid

if TYPE_CHECKING:
    from pykraft.quota_service import MutationThrottle

DEFAULT_TIMEOUT_MS = 30_000
ELECTION_TIMEOUT_MS = 60_000  # ElectLeaders' default in Kafka's schema
YIELD_EVERY = 500  # partitions of an AlterPartition read or answered between two yields to the loop
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")  # Kafka's Uuid.toString(): 16 bytes, base64url, no padding
# Kafka's DescribeConfigs ConfigType ids, by the controller's type names.


class RequestError(KafkaError):
    """A request-level problem found before the controller saw the request."""


def kafka_request(context: object) -> bool:
    """Whether the call came over the Kafka listener, whose requests name topics and partitions as Kafka's clients
    do: an empty topic name or a negative partition index is then a name like any other, which the controller answers
    for that entry alone (UNKNOWN_TOPIC_OR_PARTITION), as Kafka's controller does. Over gRPC they are proto3 fields
    left unset, refused for the whole request."""
    return getattr(context, "kafka_request", False) is True


class LifecycleServicer(ServicerPart):
    """Part of :class:`pykraft.service.ControllerService` (see :class:`~pykraft.servicer_part.ServicerPart`)."""

    if TYPE_CHECKING:
        # KIP-599's throttling (pykraft/quota_service.py)
        def _throttle(self, context: grpc.aio.ServicerContext, caller: Caller) -> MutationThrottle: ...
        def _partitions_of(self, topic: DeleteTopicState) -> int: ...
        def _added_partitions(self, topic: NewPartitions) -> int: ...

    @staticmethod
    def _timeout(timeout_ms: int, default: int = DEFAULT_TIMEOUT_MS) -> int:
        if timeout_ms < 0:
            raise RequestError(f"timeout_ms: {timeout_ms} is negative", Errors.INVALID_REQUEST)
        return timeout_ms or default

    @staticmethod
    def _topic_id(text: str, field: str) -> Uuid:
        """A topic id as Kafka prints it (22 base64url characters); anything else is INVALID_REQUEST."""
        if not _UUID_TEXT.fullmatch(text):
            raise RequestError(f"{field}: {text!r} is not a base64url topic id", Errors.INVALID_REQUEST)
        return Uuid(text)

    @staticmethod
    def _partition_index(index: int, field: str, context: object = None) -> int:
        if index < 0 and not kafka_request(context):
            raise RequestError(f"{field}: partition index {index} is negative", Errors.INVALID_REQUEST)
        return index

    @staticmethod
    def _name(name: str, field: str, context: object = None) -> str:
        if not name and not kafka_request(context):
            raise RequestError(f"{field}: the topic name is empty", Errors.INVALID_REQUEST)
        return name

    # -- AlterPartition (from partition leaders) -----------------------------------------------------------

    async def AlterPartition(
        self, request: pb.AlterPartitionRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterPartitionResponse:
        async def call() -> pb.AlterPartitionResponse:
            (await self._caller(context)).require_cluster(Op.CLUSTER_ACTION)
            timeout = self._timeout(request.timeout_ms)
            topics = []
            read = 0
            for i, t in enumerate(request.topics):
                topic_id = self._topic_id(t.topic_id, f"topics[{i}].topic_id")
                partitions = []
                for j, p in enumerate(t.partitions):
                    read += 1
                    if read % YIELD_EVERY == 0:
                        await asyncio.sleep(0)  # thousands of changes: other requests get the loop between slices
                    where = f"topics[{i}].partitions[{j}]"
                    self._partition_index(p.partition_index, f"{where}.partition_index")
                    if p.leader_recovery_state not in (0, 1):
                        raise RequestError(
                            f"{where}.leader_recovery_state: {p.leader_recovery_state} is not 0 (RECOVERED) or "
                            "1 (RECOVERING)",
                            Errors.INVALID_REQUEST,
                        )
                    partitions.append(
                        AlterPartitionData(
                            partition_index=p.partition_index,
                            leader_epoch=p.leader_epoch,
                            new_isr=tuple((b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs),
                            partition_epoch=p.partition_epoch,
                            leader_recovery_state=p.leader_recovery_state,
                        )
                    )
                topics.append(AlterPartitionTopic(topic_id, tuple(partitions)))
            answer: AlterPartitionResponse = await self.controller.alter_partition(
                request.broker_id, request.broker_epoch, topics, timeout_ms=timeout
            )
            out = pb.AlterPartitionResponse(error_code=int(answer.error.code), error_message=answer.error.message or "")
            by_topic: dict[bytes, pb.AlterPartitionResponse.TopicData] = {}
            for n, r in enumerate(answer.partitions, 1):
                if n % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                topic = by_topic.get(r.topic_id)
                if topic is None:
                    topic = by_topic[r.topic_id] = out.topics.add(topic_id=str(r.topic_id))
                topic.partitions.add(
                    partition_index=r.partition_index,
                    error_code=int(r.error.code),
                    error_message=r.error.message or "",
                    leader_id=r.leader_id,
                    leader_epoch=r.leader_epoch,
                    isr=r.isr,
                    leader_recovery_state=r.leader_recovery_state,
                    partition_epoch=r.partition_epoch,
                )
            return out

        def summarize(response: pb.AlterPartitionResponse) -> dict[str, Any]:
            return partition_results([(t.topic_id, p) for t in response.topics for p in t.partitions])

        return await self._serve(
            "AlterPartition",
            pb.AlterPartitionResponse,
            call,
            summarize,
            broker_id=request.broker_id,
            broker_epoch=request.broker_epoch,
            partition_count=sum(len(t.partitions) for t in request.topics),
        )

    # -- a partition's life after creation -------------------------------------------------------------------

    async def ElectLeaders(
        self, request: pb.ElectLeadersRequest, context: grpc.aio.ServicerContext
    ) -> pb.ElectLeadersResponse:
        async def call() -> pb.ElectLeadersResponse:
            (await self._caller(context)).require_cluster(Op.ALTER)
            timeout = self._timeout(request.timeout_ms, ELECTION_TIMEOUT_MS)
            if request.election_type not in tuple(ElectionType):
                raise RequestError(
                    f"election_type: {request.election_type} is not 0 (PREFERRED) or 1 (UNCLEAN)",
                    Errors.INVALID_REQUEST,
                )
            partitions: list[tuple[str, int]] | None = None
            if request.HasField("topic_partitions"):
                partitions = []
                for i, t in enumerate(request.topic_partitions.topics):
                    where = f"topic_partitions[{i}]"
                    self._name(t.topic, f"{where}.topic", context)
                    for j, index in enumerate(t.partitions):
                        index = self._partition_index(index, f"{where}.partitions[{j}]", context)
                        partitions.append((t.topic, index))
            results = await self.controller.elect_leaders(request.election_type, partitions, timeout_ms=timeout)
            out = pb.ElectLeadersResponse()
            by_topic: dict[str, pb.ElectLeadersResponse.ReplicaElectionResult] = {}
            for r in results:
                topic = by_topic.get(r.topic)
                if topic is None:
                    topic = by_topic[r.topic] = out.replica_election_results.add(topic=r.topic)
                topic.partition_result.add(
                    partition_id=r.partition, error_code=int(r.error.code), error_message=r.error.message or ""
                )
            return out

        def summarize(response: pb.ElectLeadersResponse) -> dict[str, Any]:
            codes = [p.error_code for t in response.replica_election_results for p in t.partition_result]
            return {
                "elected": codes.count(Errors.NONE),
                "not_needed": codes.count(Errors.ELECTION_NOT_NEEDED),
                "failed": sum(1 for c in codes if c not in (Errors.NONE, Errors.ELECTION_NOT_NEEDED)),
            }

        tp = request.topic_partitions if request.HasField("topic_partitions") else None
        return await self._serve(
            "ElectLeaders",
            pb.ElectLeadersResponse,
            call,
            summarize,
            election_type=request.election_type,
            partitions="all" if tp is None else sum(len(t.partitions) for t in tp.topics),
        )

    async def DeleteTopics(
        self, request: pb.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTopicsResponse:
        async def call() -> pb.DeleteTopicsResponse:
            caller = await self._caller(context)
            timeout = self._timeout(request.timeout_ms)
            topics = []
            for i, t in enumerate(request.topics):
                name = self._name(t.name, f"topics[{i}].name", context) if t.HasField("name") else None
                topic_id = self._topic_id(t.topic_id, f"topics[{i}].topic_id") if t.topic_id else None
                topics.append(DeleteTopicState(name, None if topic_id == ZERO_UUID else topic_id))
            refused: dict[int, tuple[str | None, Uuid | None]] = {}
            ctl = self.controller
            # With deletion disabled the whole request is refused first (Kafka's order); DELETE on the CLUSTER
            # allows every topic.
            if caller.enforced and ctl.settings.delete_topic_enable and not caller.cluster_allowed(Op.DELETE):
                replication = ctl.replication

                def name_of(topic_id: Uuid) -> str | None:
                    info = replication.topics.get(topic_id)
                    return None if info is None else info.name

                refused = deletion_refusals(
                    caller, [(t.name, t.topic_id) for t in topics], replication.topics_by_name.__contains__, name_of
                )
            # KIP-599: each topic's partitions, recorded in request order; a topic met in debt is throttled.
            throttle = self._throttle(context, caller)
            candidates = [i for i in range(len(topics)) if i not in refused]
            held = throttle.admit([self._partitions_of(topics[i]) for i in candidates])
            throttled = {candidates[j] for j in held}
            position = {i: j for j, i in enumerate(candidates)} if throttle.charged else {}
            passed = [topics[i] for i in candidates if i not in throttled]
            results = iter(await self.controller.delete_topics(passed, timeout_ms=timeout))
            out = pb.DeleteTopicsResponse()
            if throttled:
                out.throttle_time_ms = throttle.throttle_time_ms
            for i in range(len(topics)):  # in request order, refusals in their places
                if i in throttled:
                    name, topic_id = topics[i].name, topics[i].topic_id
                    code, message = throttled_error()
                elif i in refused:
                    name, topic_id = refused[i]
                    what = name if name is not None else f"with id {topic_id}"
                    code, message = Errors.TOPIC_AUTHORIZATION_FAILED, caller.denied(Op.DELETE, Res.TOPIC, what)
                else:
                    r = next(results)
                    name, topic_id, code, message = r.name, r.topic_id, r.error.code, r.error.message or ""
                    if r.error.failed and position:  # nothing deleted: its partitions go back to the bucket
                        throttle.refund(position[i])
                item = out.responses.add(error_code=int(code), error_message=message)
                if name is not None:
                    item.name = name
                if topic_id is not None:
                    item.topic_id = str(topic_id)
            return out

        def summarize(response: pb.DeleteTopicsResponse) -> dict[str, Any]:
            return {
                "results": {(r.name or r.topic_id): r.error_code for r in response.responses[:20]},
                "failed": sum(1 for r in response.responses if r.error_code),
            }

        return await self._serve(
            "DeleteTopics",
            pb.DeleteTopicsResponse,
            call,
            summarize,
            topics=[t.name if t.HasField("name") else t.topic_id for t in request.topics[:20]],
        )

    async def CreatePartitions(
        self, request: pb.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CreatePartitionsResponse:
        async def call() -> pb.CreatePartitionsResponse:
            caller = await self._caller(context)
            timeout = self._timeout(request.timeout_ms)
            topics = [
                NewPartitions(
                    self._name(t.name, f"topics[{i}].name", context),
                    t.count,
                    tuple(tuple(a.broker_ids) for a in t.assignments.assignments)
                    if t.HasField("assignments")
                    else None,
                )
                for i, t in enumerate(request.topics)
            ]
            out = pb.CreatePartitionsResponse()
            if caller.enforced:  # ALTER on each topic named once (the controller refuses duplicates first)
                counts = Counter(t.name for t in topics)
                once = [t.name for t in topics if counts[t.name] == 1]
                allowed = caller.allowed_names(Op.ALTER, Res.TOPIC, once)
                for name in once:  # before the controller's results, as Kafka's ControllerApis
                    if name not in allowed:
                        out.results.add(
                            name=name,
                            error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                            error_message=caller.denied(Op.ALTER, Res.TOPIC, name),
                        )
                topics = [t for t in topics if t.name in allowed or counts[t.name] > 1]
            throttle = self._throttle(context, caller)
            held = throttle.admit([self._added_partitions(t) for t in topics])
            names = [t.name for t in topics]
            passed = [t for i, t in enumerate(topics) if i not in held] if held else topics
            results = await self.controller.create_partitions(
                passed, validate_only=request.validate_only, timeout_ms=timeout
            )
            for r in results:
                if r.error.failed:
                    throttle.refund_named(r.name, names)
                out.results.add(name=r.name, error_code=int(r.error.code), error_message=r.error.message or "")
            if held:  # KIP-599: after the controller's results
                code, message = throttled_error()
                for i in sorted(held):
                    out.results.add(name=names[i], error_code=code, error_message=message)
                out.throttle_time_ms = throttle.throttle_time_ms
            return out

        def summarize(response: pb.CreatePartitionsResponse) -> dict[str, Any]:
            return {
                "results": {r.name: r.error_code for r in response.results[:20]},
                "failed": sum(1 for r in response.results if r.error_code),
            }

        return await self._serve(
            "CreatePartitions",
            pb.CreatePartitionsResponse,
            call,
            summarize,
            counts={t.name: t.count for t in request.topics[:20]},
            validate_only=request.validate_only,
        )

    # -- configs ---------------------------------------------------------------------------------------------

    async def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> pb.IncrementalAlterConfigsResponse:
        return await self._serve_alter_configs(
            "IncrementalAlterConfigs",
            request,
            context,
            pb.IncrementalAlterConfigsResponse,
            lambda c: c.config_operation,
            self.controller.incremental_alter_configs,
        )

    async def AlterConfigs(
        self, request: pb.AlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterConfigsResponse:
        """Kafka's legacy AlterConfigs: each resource's dynamic configs replaced by the request's; the checks, codes
        and authorization (ALTER_CONFIGS) of IncrementalAlterConfigs."""
        return await self._serve_alter_configs(
            "AlterConfigs",
            request,
            context,
            pb.AlterConfigsResponse,
            lambda c: AlterConfigOp.SET,
            self.controller.legacy_alter_configs,
        )

    async def _serve_alter_configs(
        self,
        name: str,
        request: pb.IncrementalAlterConfigsRequest | pb.AlterConfigsRequest,
        context: grpc.aio.ServicerContext,
        response_type: type[Any],
        operation: Callable[[Any], int],
        alter: Callable[..., Awaitable[list[ConfigResourceResult]]],
    ) -> Any:
        """Both alter-configs calls: the request's resources (each config's operation from ``operation``) through
        ``alter``, logged alike."""

        async def call() -> Any:
            resources = [
                AlterConfigsResource(
                    r.resource_type,
                    r.resource_name,
                    tuple(
                        AlterableConfig(c.name, operation(c), c.value if c.HasField("value") else None)
                        for c in r.configs
                    ),
                )
                for r in request.resources
            ]
            out = response_type()
            await self._alter_configs(context, request, resources, out, alter)
            return out

        return await self._serve(
            name,
            response_type,
            call,
            _summarize_config_changes,
            resources=[f"{r.resource_type}:{r.resource_name}" for r in request.resources[:20]],
            configs=[c.name for r in request.resources[:20] for c in r.configs][:40],
            validate_only=request.validate_only,
        )

    async def _alter_configs(
        self,
        context: grpc.aio.ServicerContext,
        request: pb.IncrementalAlterConfigsRequest | pb.AlterConfigsRequest,
        resources: list[AlterConfigsResource],
        out: pb.IncrementalAlterConfigsResponse | pb.AlterConfigsResponse,
        alter: Callable[..., Awaitable[list[ConfigResourceResult]]],
    ) -> None:
        """Authorize each resource (ALTER_CONFIGS), then have the controller ``alter`` the others; one result per
        resource in ``out``, the refusals first, as Kafka's ControllerApis answers."""
        caller = await self._caller(context)
        timeout = self._timeout(request.timeout_ms)
        if caller.enforced:
            keys = [(r.resource_type, r.resource_name) for r in resources]
            counts = Counter(keys)
            # A resource named twice is answered "Duplicate resource." by the controller, unauthorized.
            refused = config_refusals(caller, [k if counts[k] == 1 else (-1, k[1]) for k in keys], ALTER_CONFIGS_CHECKS)
            for i, (code, message) in refused.items():  # before the controller's results, as Kafka's
                out.responses.add(
                    error_code=code, error_message=message, resource_type=keys[i][0], resource_name=keys[i][1]
                )
            resources = [r for i, r in enumerate(resources) if i not in refused]
        results = await alter(resources, validate_only=request.validate_only, timeout_ms=timeout)
        for r in results:
            out.responses.add(
                error_code=int(r.error.code),
                error_message=r.error.message or "",
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )

    async def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeConfigsResponse:
        async def call() -> pb.DescribeConfigsResponse:
            caller = await self._caller(context, read=True)
            timeout = self._timeout(request.timeout_ms)
            resources = [
                ConfigResource(
                    r.resource_type,
                    r.resource_name,
                    tuple(r.configuration_keys.keys) if r.HasField("configuration_keys") else None,
                )
                for r in request.resources
            ]
            refused: dict[int, tuple[Errors, str]] = {}
            if caller.enforced:
                keys = [(r.resource_type, r.resource_name) for r in resources]
                refused = config_refusals(caller, keys, DESCRIBE_CONFIGS_CHECKS)
                resources = [r for i, r in enumerate(resources) if i not in refused]
            results = await self.controller.describe_configs(
                resources,
                include_synonyms=request.include_synonyms,
                include_documentation=request.include_documentation,
                timeout_ms=timeout,
            )
            out = pb.DescribeConfigsResponse()
            Entry = pb.DescribeConfigsResponse.DescribeConfigsResourceResult
            Synonym = pb.DescribeConfigsResponse.DescribeConfigsSynonym
            for r in results:
                result = out.results.add(
                    error_code=int(r.error.code),
                    error_message=r.error.message or "",
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for c in r.configs:
                    result.configs.append(
                        Entry(
                            name=c.name,
                            value=c.value,
                            read_only=c.read_only,
                            config_source=int(c.source),
                            is_sensitive=c.is_sensitive,
                            synonyms=[Synonym(name=y.name, value=y.value, source=int(y.source)) for y in c.synonyms],
                            config_type=CONFIG_TYPE_IDS.get(c.config_type, 0),
                            documentation=c.documentation,
                        )
                    )
            for i, (code, message) in refused.items():  # after the others, as Kafka's ConfigHelper
                r = request.resources[i]
                out.results.add(
                    error_code=code, error_message=message, resource_type=r.resource_type, resource_name=r.resource_name
                )
            return out

        def summarize(response: pb.DescribeConfigsResponse) -> dict[str, Any]:
            return {"results": [f"{r.resource_type}:{r.resource_name}:{r.error_code}" for r in response.results]}

        return await self._serve(
            "DescribeConfigs",
            pb.DescribeConfigsResponse,
            call,
            summarize,
            resources=[f"{r.resource_type}:{r.resource_name}" for r in request.resources[:20]],
            include_synonyms=request.include_synonyms,
        )


def _summarize_config_changes(response: pb.IncrementalAlterConfigsResponse | pb.AlterConfigsResponse) -> dict[str, Any]:
    return {"results": [f"{r.resource_type}:{r.resource_name}:{r.error_code}" for r in response.responses]}


def partition_results(results: list[tuple[Any, Any]]) -> dict[str, Any]:
    """A response's per-partition codes for its log line: (topic, partition message) pairs; the first 20 shown."""
    return {
        "results": [f"{t}-{p.partition_index}:{p.error_code}" for t, p in results[:20]],
        "failed": sum(1 for _, p in results if p.error_code),
    }
