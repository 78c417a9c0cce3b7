"""DescribeQuorum (key 55), v0-2: the metadata partition's leader, epoch, high watermark, voters and observers
(their log end offsets and last fetch times), from the same Raft state the quorum admin's DescribeQuorum reads.
As Kafka's controllers answer it: only the leader knows its followers' progress, so another node answers
NOT_LEADER_OR_FOLLOWER (6); a partition other than ``__cluster_metadata-0`` is UNKNOWN_TOPIC_OR_PARTITION; DESCRIBE
on the CLUSTER when authorization is on. v2's nodes are the voters' Kafka listeners; directory ids are not kept here
(zero). LastCaughtUpTimestamp is not tracked: -1 (unknown), as Kafka allows."""

from __future__ import annotations

import time

from controller.authorizer import AclOperation as Op
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.errors import Errors, KafkaError
from quorum.log.message import INT16, INT32, INT64, STRING, UINT16, UUID, Field, Message, Struct, array
from quorum.raft.runtime import RaftNode

METADATA_TOPIC, METADATA_PARTITION = "__cluster_metadata", 0

_RequestPartition = Struct("PartitionData", [Field("PartitionIndex", INT32)])
_RequestTopic = Struct("TopicData", [Field("TopicName", STRING), Field("Partitions", array(_RequestPartition))])
DescribeQuorumRequest = Message(
    "DescribeQuorumRequest", [Field("Topics", array(_RequestTopic))], api_key=55, versions="0-2", flexible="0+"
)
_Replica = Struct(
    "ReplicaState",
    [
        Field("ReplicaId", INT32),
        Field("ReplicaDirectoryId", UUID, "2+", ignorable=True),
        Field("LogEndOffset", INT64),
        Field("LastFetchTimestamp", INT64, "1+", default=-1, ignorable=True),
        Field("LastCaughtUpTimestamp", INT64, "1+", default=-1, ignorable=True),
    ],
)
_Partition = Struct(
    "PartitionData",
    [
        Field("PartitionIndex", INT32),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, "2+", nullable="2+", default=None, ignorable=True),
        Field("LeaderId", INT32),
        Field("LeaderEpoch", INT32),
        Field("HighWatermark", INT64),
        Field("CurrentVoters", array(_Replica)),
        Field("Observers", array(_Replica)),
    ],
)
_Topic = Struct("TopicData", [Field("TopicName", STRING), Field("Partitions", array(_Partition))])
_Listener = Struct("Listener", [Field("Name", STRING, "2+"), Field("Host", STRING, "2+"), Field("Port", UINT16, "2+")])
_Node = Struct("Node", [Field("NodeId", INT32, "2+"), Field("Listeners", array(_Listener), "2+")])
DescribeQuorumResponse = Message(
    "DescribeQuorumResponse",
    [
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, "2+", nullable="2+", default=None, ignorable=True),
        Field("Topics", array(_Topic)),
        Field("Nodes", array(_Node), "2+", ignorable=True),
    ],
    api_key=55,
    versions="0-2",
    flexible="0+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    authorization = ctx.service.authorization
    if authorization.enabled:
        try:
            (await authorization.caller(ctx.call)).require_cluster(Op.DESCRIBE)
        except KafkaError as e:
            return DescribeQuorumResponse.cls(error_code=int(e.code), error_message=str(e))
    raft = ctx.controller.raft
    d = raft.describe() if isinstance(raft, RaftNode) else None
    topics = []
    for t in request.topics:  # type: ignore[attr-defined]
        partitions = []
        for p in t.partitions:
            out = _Partition.cls(partition_index=p.partition_index, leader_id=-1, leader_epoch=-1, high_watermark=-1)
            if (t.topic_name, p.partition_index) != (METADATA_TOPIC, METADATA_PARTITION):
                out.error_code = Errors.UNKNOWN_TOPIC_OR_PARTITION
                out.error_message = f"{t.topic_name}-{p.partition_index} is not the metadata partition"
            elif d is None or d["role"] != "Leader":
                out.error_code = Errors.NOT_LEADER_OR_FOLLOWER
                out.error_message = "only the quorum's leader describes it"
                if d is not None:
                    out.leader_id, out.leader_epoch = int(d["leader_id"]), int(d["leader_epoch"])  # type: ignore[call-overload]
            else:
                now_ms = int(time.time() * 1000)
                out.leader_id, out.leader_epoch = int(d["leader_id"]), int(d["leader_epoch"])  # type: ignore[call-overload]
                out.high_watermark = int(d["high_watermark"])  # type: ignore[call-overload]
                out.current_voters = [_replica(r, now_ms) for r in d["voters"]]  # type: ignore[attr-defined]
                out.observers = [_replica(r, now_ms) for r in d["observers"]]  # type: ignore[attr-defined]
            partitions.append(out)
        topics.append(_Topic.cls(topic_name=t.topic_name, partitions=partitions))
    listeners = ctx.info.listeners
    voters = raft.voters if isinstance(raft, RaftNode) else {}
    nodes = [
        _Node.cls(node_id=v, listeners=[_Listener.cls(name="CONTROLLER", host=listeners[v][0], port=listeners[v][1])])
        for v in sorted(voters)
        if v in listeners
    ]
    return DescribeQuorumResponse.cls(topics=topics, nodes=nodes)


def _replica(r: dict, now_ms: int) -> object:
    age = r["last_fetch_age_ms"]
    return _Replica.cls(
        replica_id=r["id"],
        log_end_offset=r["log_end_offset"],
        last_fetch_timestamp=now_ms - age if age >= 0 else -1,
    )


register(Api(55, "DescribeQuorum", DescribeQuorumRequest, DescribeQuorumResponse, handle))
