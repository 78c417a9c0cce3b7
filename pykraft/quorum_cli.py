"""``pykraft quorum describe``: who leads, at which epoch, and how far behind each voter is — like
``kafka-metadata-quorum describe --status --replication``."""

from __future__ import annotations

import asyncio
import json
import sys

import grpc

from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc


async def describe(bootstrap: str, timeout_s: float = 5.0) -> pb.DescribeQuorumResponse:
    """Ask ``bootstrap``; if it does not lead, ask the leader it names (it alone knows every voter's progress)."""
    target = bootstrap
    answered: pb.DescribeQuorumResponse | None = None
    for _ in range(3):
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                stub = pb_grpc.QuorumAdminStub(channel)
                resp = await stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=timeout_s)
        except grpc.aio.AioRpcError:
            if answered is None:
                raise  # the bootstrap server itself cannot be reached
            return answered  # the leader it names is down (no quorum, or mid-election): report what we were told
        answered = resp
        if resp.role == "Leader" or not resp.leader_endpoint or resp.leader_endpoint == target:
            return resp
        target = resp.leader_endpoint
    return resp


def render(resp: pb.DescribeQuorumResponse, output: str) -> str:
    voters = [
        {
            "id": v.replica_id,
            "logEndOffset": v.log_end_offset,
            "lag": v.lag,
            "lastFetchAgeMs": v.last_fetch_age_ms,
            "status": "Leader" if v.replica_id == resp.leader_id else "Follower",
        }
        for v in resp.voters
    ]
    voters += [
        {
            "id": o.replica_id,
            "logEndOffset": o.log_end_offset,
            "lag": o.lag,
            "lastFetchAgeMs": o.last_fetch_age_ms,
            "status": "Observer",
        }
        for o in resp.observers
    ]
    snapshot = (
        {
            "endOffset": resp.latest_snapshot_end_offset,
            "epoch": resp.latest_snapshot_epoch,
            "bytes": resp.latest_snapshot_bytes,
        }
        if resp.latest_snapshot_end_offset >= 0
        else None
    )
    if output == "json":
        return json.dumps(
            {
                "clusterId": resp.cluster_id,
                "leaderId": resp.leader_id,
                "leaderEpoch": resp.leader_epoch,
                "highWatermark": resp.high_watermark,
                "answeredBy": resp.node_id,
                "answeredByRole": resp.role,
                "logStartOffset": resp.log_start_offset,
                "latestSnapshot": snapshot,
                "voters": voters,
            }
        )
    lines = [
        f"ClusterId:      {resp.cluster_id}",
        f"LeaderId:       {resp.leader_id}",
        f"LeaderEpoch:    {resp.leader_epoch}",
        f"HighWatermark:  {resp.high_watermark}",
        f"AnsweredBy:     node {resp.node_id} ({resp.role})",
        f"LogStartOffset: {resp.log_start_offset}",
        "LatestSnapshot: "
        + (f"{snapshot['endOffset']}-{snapshot['epoch']} ({snapshot['bytes']:,} bytes)" if snapshot else "none"),
        "",
        f"{'NodeId':<8}{'LogEndOffset':>14}{'Lag':>8}{'LastFetchAgeMs':>16}  Status",
    ]
    for v in voters:
        known = resp.role == "Leader" or v["id"] == resp.node_id
        offset = str(v["logEndOffset"]) if known else "?"
        lag = str(v["lag"]) if known and v["lag"] >= 0 else "?"
        age = str(v["lastFetchAgeMs"]) if known and v["lastFetchAgeMs"] >= 0 else "?"
        lines.append(f"{v['id']:<8}{offset:>14}{lag:>8}{age:>16}  {v['status']}")
    return "\n".join(lines)


def run(bootstrap: str, output: str) -> int:
    try:
        resp = asyncio.run(describe(bootstrap))
    except grpc.aio.AioRpcError as e:
        print(f"pykraft: cannot reach {bootstrap}: {e.code().name} ({e.details()})", file=sys.stderr)
        return 1
    print(render(resp, output))
    return 0
