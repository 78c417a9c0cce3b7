"""``pykraft snapshot create``: each node named snapshots its own committed state now (every controller and broker
keeps its own snapshots, as Kafka's do), e.g. before maintenance; one line per node with the snapshot's id."""

from __future__ import annotations

import asyncio
import sys

import grpc

from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.security.channels import ClientTls, aio_channel
from pykraft.security.tls import TlsSettings
from quorum.errors import Errors


async def create(target: str, timeout_ms: int, tls: ClientTls | None = None) -> pb.CreateSnapshotResponse:
    async with aio_channel(target, tls) as channel:
        stub = pb_grpc.ControllerStub(channel)
        return await stub.CreateSnapshot(pb.CreateSnapshotRequest(timeout_ms=timeout_ms), timeout=timeout_ms / 1000 + 5)


def run(targets: list[str], timeout_ms: int, tls: TlsSettings | None = None) -> int:
    failed = 0
    client_tls = ClientTls.of(tls)
    for target in targets:
        try:
            r = asyncio.run(create(target, timeout_ms, client_tls))
        except grpc.aio.AioRpcError as e:
            print(f"{target}: cannot reach it: {e.code().name} ({e.details()})", file=sys.stderr)
            failed += 1
            continue
        if r.error_code != Errors.NONE:
            print(f"{target}: {Errors(r.error_code).name}: {r.error_message}", file=sys.stderr)
            failed += 1
        elif r.end_offset < 0:
            print(f"node {r.node_id} ({target}): nothing committed yet, no snapshot")
        else:
            what = "created" if r.created else "unchanged since the latest"
            name = f"{r.end_offset:020d}-{r.epoch:010d}.checkpoint"
            where = f"node {r.node_id} ({target})"
            print(f"{where}: snapshot {r.end_offset}-{r.epoch} {what} ({r.size_bytes:,} bytes, {name})")
    return 1 if failed else 0
