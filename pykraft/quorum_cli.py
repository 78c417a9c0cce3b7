"""``pykraft quorum describe``: who leads, at which epoch, and how far behind each voter is — like
``kafka-metadata-quorum describe --status --replication``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

import grpc

from pykraft.security.channels import ClientTls, aio_channel, unavailable_cause
from pykraft.security.tls import TlsSettings
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc


class Unreachable(Exception):
    """None of the servers answered."""


async def _ask(target: str, timeout_s: float, tls: ClientTls | None = None) -> pb.DescribeQuorumResponse:
    async with aio_channel(target, tls) as channel:
        return await pb_grpc.QuorumAdminStub(channel).DescribeQuorum(pb.DescribeQuorumRequest(), timeout=timeout_s)


async def describe(
    servers: list[str] | str, timeout_s: float = 5.0, tls: TlsSettings | ClientTls | None = None
) -> pb.DescribeQuorumResponse:
    """Ask the servers in turn until one answers; if it does not lead, ask the leader it names (it alone knows
    every voter's progress). Raises :class:`Unreachable` when no server answers within ``timeout_s``."""
    servers = [servers] if isinstance(servers, str) else servers
    client_tls = ClientTls.of(tls)
    deadline = time.monotonic() + timeout_s
    errors: list[str] = []
    answered: pb.DescribeQuorumResponse | None = None
    while answered is None:
        for target in servers:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                answered = await _ask(target, remaining, client_tls)
                break
            except grpc.aio.AioRpcError as e:
                cause = ""
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    cause = f" ({unavailable_cause(e.details(), client_tls is not None)})"
                errors.append(f"{target}: {e.code().name}{cause}")
        if answered is None:
            if time.monotonic() >= deadline:
                raise Unreachable(
                    f"no controller reachable at {','.join(servers)} within {timeout_s:g} s ({'; '.join(errors[-3:])})"
                )
            await asyncio.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    resp = answered
    for _ in range(3):
        if resp.role == "Leader" or not resp.leader_endpoint or resp.leader_endpoint in servers[:1]:
            return resp
        try:
            resp = await _ask(resp.leader_endpoint, max(0.5, deadline - time.monotonic()), client_tls)
        except grpc.aio.AioRpcError:
            return resp  # the leader it names is down (no quorum, or mid-election): report what we were told
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


def status_text(resp: pb.DescribeQuorumResponse) -> str:
    """``kafka-metadata-quorum describe --status``. MaxFollowerLagTimeMs is the time since the most lagging
    follower's last fetch (the leader keeps no caught-up time; for a follower that lags it is a lower bound)."""
    followers = [v for v in resp.voters if v.replica_id != resp.leader_id]
    known = resp.role == "Leader"
    max_lag = max((v.lag for v in followers), default=0) if known else -1
    max_lag_ms = max((v.last_fetch_age_ms for v in followers), default=0) if known else -1
    rows = [
        ("ClusterId", resp.cluster_id),
        ("LeaderId", resp.leader_id),
        ("LeaderEpoch", resp.leader_epoch),
        ("HighWatermark", resp.high_watermark),
        ("MaxFollowerLag", max_lag),
        ("MaxFollowerLagTimeMs", max_lag_ms),
        ("CurrentVoters", "[" + ",".join(str(v.replica_id) for v in resp.voters) + "]"),
        ("CurrentObservers", "[" + ",".join(str(o.replica_id) for o in resp.observers) + "]"),
    ]
    return "\n".join(f"{name + ':':<24}{value}" for name, value in rows)


def replication_text(resp: pb.DescribeQuorumResponse, now_ms: int | None = None) -> str:
    """``kafka-metadata-quorum describe --replication``: one row per voter and observer, timestamps in epoch ms
    (-1 where this node does not know; LastCaughtUpTimestamp: the last fetch of a replica with no lag)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    header = ("NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status")
    rows = [header]
    replicas = [(v, "Leader" if v.replica_id == resp.leader_id else "Follower") for v in resp.voters]
    replicas += [(o, "Observer") for o in resp.observers]
    for r, status in replicas:
        fetched = now_ms - r.last_fetch_age_ms if r.last_fetch_age_ms >= 0 else -1
        caught_up = fetched if r.lag == 0 else -1
        rows.append((r.replica_id, r.log_end_offset, r.lag, fetched, caught_up, status))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(f"{v!s:<{w}}" for v, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def run(args: argparse.Namespace) -> int:
    try:
        resp = asyncio.run(describe(args.bootstrap_server, args.connect_timeout_ms / 1000, args.tls))
    except Unreachable as e:
        print(f"pykraft quorum describe: {e}", file=sys.stderr)
        return 1
    if args.status and args.output == "text":
        print(status_text(resp))
    if args.replication and args.output == "text":
        if args.status:
            print()
        print(replication_text(resp))
    if not (args.status or args.replication) or args.output == "json":
        print(render(resp, args.output))
    return 0
