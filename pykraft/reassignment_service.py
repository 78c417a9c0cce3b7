"""The Controller service's partition reassignment requests (Kafka's KIP-455): AlterPartitionReassignments and
ListPartitionReassignments.

Protobuf in, controller/requests.py values to the QuorumController, protobuf out. Fields are checked here first,
as for every request of the service (INVALID_REQUEST, the message naming the field and value): an empty topic
name, a negative partition index, a negative timeout, and a partition named twice in one AlterPartitionReassignments
— Kafka's AdminClient cannot send that (it takes a map), and its controller would write two changes computed from
the same state. Kafka's own rules (unknown topic or partition, the target's validity, cancelling what is not
moving) live in the controller and come back per partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import grpc

from controller.authorizer import AclOperation as Op
from controller.requests import ReassignablePartition, ReassignableTopic
from controller.topic_names import shown
from pykraft.api import controller_pb2 as pb
from pykraft.lifecycle_service import LifecycleServicer, RequestError, partition_results
from pykraft.servicer_part import ServicerPart
from quorum.errors import Errors

if TYPE_CHECKING:
    pass

REASSIGNMENT_TIMEOUT_MS = 60_000  # the default of both requests in Kafka's schemas


class ReassignmentServicer(ServicerPart):
    """Part of :class:`pykraft.service.ControllerService` (see :class:`~pykraft.servicer_part.ServicerPart`)."""

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AlterPartitionReassignmentsResponse:
        async def call() -> pb.AlterPartitionReassignmentsResponse:
            (await self._caller(context)).require_cluster(Op.ALTER)
            timeout = LifecycleServicer._timeout(request.timeout_ms, REASSIGNMENT_TIMEOUT_MS)
            topics = _reassignable_topics(request, context)
            results = await self.controller.alter_partition_reassignments(topics, timeout_ms=timeout)
            out = pb.AlterPartitionReassignmentsResponse()
            for t in results:
                topic = out.responses.add(name=t.name)
                for p in t.partitions:
                    topic.partitions.add(
                        partition_index=p.partition_index,
                        error_code=int(p.error.code),
                        error_message=p.error.message or "",
                    )
            return out

        def summarize(response: pb.AlterPartitionReassignmentsResponse) -> dict[str, Any]:
            return partition_results([(t.name, p) for t in response.responses for p in t.partitions])

        return await self._serve(
            "AlterPartitionReassignments",
            pb.AlterPartitionReassignmentsResponse,
            call,
            summarize,
            partitions=[
                f"{t.name}-{p.partition_index}:{list(p.replicas.broker_ids) if p.HasField('replicas') else 'cancel'}"
                for t in request.topics
                for p in t.partitions
            ][:20],
        )

    async def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPartitionReassignmentsResponse:
        async def call() -> pb.ListPartitionReassignmentsResponse:
            (await self._caller(context, read=True)).require_cluster(Op.DESCRIBE)
            timeout = LifecycleServicer._timeout(request.timeout_ms, REASSIGNMENT_TIMEOUT_MS)
            topics: list[tuple[str, tuple[int, ...]]] | None = None
            if request.HasField("topics"):
                topics = []
                for i, t in enumerate(request.topics.topics):
                    where = f"topics[{i}]"
                    LifecycleServicer._name(t.name, f"{where}.name", context)
                    indexes = tuple(
                        LifecycleServicer._partition_index(index, f"{where}.partition_indexes[{j}]", context)
                        for j, index in enumerate(t.partition_indexes)
                    )
                    topics.append((t.name, indexes))
            listed = await self.controller.list_partition_reassignments(topics, timeout_ms=timeout)
            out = pb.ListPartitionReassignmentsResponse()
            for t in listed:
                topic = out.topics.add(name=t.name)
                for p in t.partitions:
                    topic.partitions.add(
                        partition_index=p.partition_index,
                        replicas=p.replicas,
                        adding_replicas=p.adding,
                        removing_replicas=p.removing,
                    )
            return out

        def summarize(response: pb.ListPartitionReassignmentsResponse) -> dict[str, Any]:
            return {"ongoing": sum(len(t.partitions) for t in response.topics)}

        asked = request.topics.topics if request.HasField("topics") else None
        return await self._serve(
            "ListPartitionReassignments",
            pb.ListPartitionReassignmentsResponse,
            call,
            summarize,
            topics="all" if asked is None else [t.name for t in asked[:20]],
        )


def _reassignable_topics(
    request: pb.AlterPartitionReassignmentsRequest, context: object = None
) -> list[ReassignableTopic]:
    """The request's topics as the controller takes them; a field that cannot be right is a RequestError (an empty
    name or a negative index is one only over gRPC: see :func:`~pykraft.lifecycle_service.kafka_request`)."""
    seen: dict[tuple[str, int], str] = {}
    topics = []
    for i, t in enumerate(request.topics):
        LifecycleServicer._name(t.name, f"topics[{i}].name", context)
        partitions = []
        for j, p in enumerate(t.partitions):
            where = f"topics[{i}].partitions[{j}]"
            index = LifecycleServicer._partition_index(p.partition_index, f"{where}.partition_index", context)
            first = seen.setdefault((t.name, index), where)
            if first != where:
                raise RequestError(
                    f"{where}: partition {shown(t.name)}-{index} is already named by {first}", Errors.INVALID_REQUEST
                )
            replicas = tuple(p.replicas.broker_ids) if p.HasField("replicas") else None
            partitions.append(ReassignablePartition(index, replicas))
        topics.append(ReassignableTopic(t.name, tuple(partitions)))
    return topics
