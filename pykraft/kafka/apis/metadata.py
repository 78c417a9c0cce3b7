"""Metadata (key 3), v0-12: the controllers clients may talk to, the active controller's id, and the committed
topics (ids, partitions, leaders, epochs, replicas, ISR, replicas on fenced brokers).

Answered through the gRPC service's DescribeTopics (the same reads, the same authorization: topics the caller may
not DESCRIBE are left out of a listing and refused by name), from this node's committed state on a standby too, as
Kafka's controllers answer Metadata from their image. A missing name is UNKNOWN_TOPIC_OR_PARTITION; topics are
never created automatically. The "brokers" are the controllers' Kafka listeners — as Kafka's controller answers
KIP-919 clients — because the brokers' registered listeners do not speak Kafka's protocol here: the active
controller's when it is known, so every later request goes there; this node's when no leader is known. The
unfenced registered brokers are listed too, each at that same listener, so that a request a client sends to a
broker by its id (its configs) reaches the controller that answers it.
"""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.errors import Errors
from quorum.log.message import BOOL, INT16, INT32, STRING, UUID, ZERO_UUID, Field, Message, Struct, Uuid, array

_RequestTopic = Struct(
    "MetadataRequestTopic",
    [Field("TopicId", UUID, "10+", ignorable=True), Field("Name", STRING, nullable="10+")],
)
MetadataRequest = Message(
    "MetadataRequest",
    [
        Field("Topics", array(_RequestTopic), nullable="1+"),
        Field("AllowAutoTopicCreation", BOOL, "4+", default=True),
        Field("IncludeClusterAuthorizedOperations", BOOL, "8-10"),
        Field("IncludeTopicAuthorizedOperations", BOOL, "8+"),
    ],
    api_key=3,
    versions="0-12",
    flexible="9+",
)

_Broker = Struct(
    "MetadataResponseBroker",
    [
        Field("NodeId", INT32),
        Field("Host", STRING),
        Field("Port", INT32),
        Field("Rack", STRING, "1+", nullable="1+", default=None, ignorable=True),
    ],
)
_Partition = Struct(
    "MetadataResponsePartition",
    [
        Field("ErrorCode", INT16),
        Field("PartitionIndex", INT32),
        Field("LeaderId", INT32),
        Field("LeaderEpoch", INT32, "7+", default=-1, ignorable=True),
        Field("ReplicaNodes", array(INT32)),
        Field("IsrNodes", array(INT32)),
        Field("OfflineReplicas", array(INT32), "5+", ignorable=True),
    ],
)
_Topic = Struct(
    "MetadataResponseTopic",
    [
        Field("ErrorCode", INT16),
        Field("Name", STRING, nullable="12+"),
        Field("TopicId", UUID, "10+", ignorable=True),
        Field("IsInternal", BOOL, "1+", ignorable=True),
        Field("Partitions", array(_Partition)),
        Field("TopicAuthorizedOperations", INT32, "8+", default=-(2**31)),
    ],
)
MetadataResponse = Message(
    "MetadataResponse",
    [
        Field("ThrottleTimeMs", INT32, "3+", ignorable=True),
        Field("Brokers", array(_Broker)),
        Field("ClusterId", STRING, "2+", nullable="2+", default=None, ignorable=True),
        Field("ControllerId", INT32, "1+", default=-1, ignorable=True),
        Field("Topics", array(_Topic)),
        Field("ClusterAuthorizedOperations", INT32, "8-10", default=-(2**31)),
    ],
    api_key=3,
    versions="0-12",
    flexible="9+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    controller = ctx.controller
    wanted = request.topics  # type: ignore[attr-defined]
    every = wanted is None or (version == 0 and not wanted)  # v0: an empty list means every topic
    names: list[str] = []
    unknown_ids: list[Uuid] = []
    if not every:
        committed = controller.replication.topics.committed()
        for t in wanted:
            if t.name is not None:
                names.append(t.name)
            else:  # by id (v10+): its name from the committed topics
                info = committed.get(t.topic_id)
                if info is None:
                    unknown_ids.append(t.topic_id)
                else:
                    names.append(info.name)
    topics = []
    error = Errors.NONE
    if every or names:
        # Any controller answers Metadata from its committed state, a standby included, as Kafka's do: a listing
        # from a standby must not come back empty while the client takes it for the cluster's.
        ctx.call.local_reads = True
        described = await ctx.service.DescribeTopics(pb.DescribeTopicsRequest(names=names), ctx.call)
        error = described.error_code
        if error == Errors.NONE:
            topics = [_topic(t) for t in described.topics]
        else:  # a refusal of the whole request: each name gets it, and the client asks again
            topics = [_Topic.cls(error_code=Errors.LEADER_NOT_AVAILABLE, name=n) for n in names]
    for topic_id in unknown_ids:
        topics.append(
            _Topic.cls(error_code=Errors.UNKNOWN_TOPIC_ID, name=None if version >= 12 else "", topic_id=topic_id)
        )
    leader = controller.node_id if controller.active else controller.leader.leader_id
    listeners = ctx.info.listeners
    shown = leader if leader in listeners else ctx.info.node_id
    brokers = []
    if shown in listeners:
        host, port = listeners[shown]
        brokers.append(_Broker.cls(node_id=shown, host=host, port=port))
        # The unfenced registered brokers, at that same listener: a client sends a broker's own requests (its
        # configs: DescribeConfigs / IncrementalAlterConfigs of BROKER 101) to the node of that id, and the
        # controller is what answers them here; the partitions' leaders and replicas then name known nodes too.
        for b in sorted(controller.cluster.brokers.committed().values()):
            if not b.fenced and b.id != shown:
                brokers.append(_Broker.cls(node_id=b.id, host=host, port=port, rack=b.rack))
    return MetadataResponse.cls(
        brokers=brokers,
        cluster_id=ctx.info.cluster_id,
        controller_id=leader if leader in listeners else -1,
        topics=topics,
    )


def _topic(t: pb.TopicDescription) -> object:
    if t.error_code:
        return _Topic.cls(error_code=t.error_code, name=t.name)
    return _Topic.cls(
        name=t.name,
        topic_id=Uuid(t.topic_id) if t.topic_id else ZERO_UUID,
        partitions=[
            _Partition.cls(
                error_code=Errors.LEADER_NOT_AVAILABLE if p.leader_id < 0 else Errors.NONE,
                partition_index=p.partition_index,
                leader_id=p.leader_id,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=list(p.offline_replicas),
            )
            for p in t.partitions
        ],
    )


register(Api(3, "Metadata", MetadataRequest, MetadataResponse, handle))
