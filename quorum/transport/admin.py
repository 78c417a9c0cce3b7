"""The quorum admin service: DescribeQuorum (for ``pykraft quorum describe``), ExportLog (``pykraft export``), and
AppendRecords: raw appends through the leader, answered once committed — for tests and benchmarks only.

AppendRecords is refused unless the node was started with ``unsafe.raw.append.enable=true``. Raw records bypass
the controller: well-formed but meaningless records would reach every controller's replay, and a raw record
sharing a batch with the controller's own could let an older value win for a key. Kafka has no such door into
its metadata log; ours stays shut unless a test or benchmark opens it for itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc

from quorum.errors import Errors, KafkaError
from quorum.raft.config import VoterAddress
from quorum.raft.runtime import RaftNode
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

DEFAULT_APPEND_TIMEOUT_MS = 5000
RAW_APPEND_SETTING = "unsafe.raw.append.enable"
# (context, API name) -> None when the caller may call it, else why not (CLUSTER_AUTHORIZATION_FAILED); the node
# supplies it when authorization is on (pykraft/authorization.py): the quorum layer knows no principals or ACLs.
AdminCheck = Callable[[grpc.aio.ServicerContext, str], Awaitable[str | None]]


class QuorumAdminService(pb_grpc.QuorumAdminServicer):
    def __init__(
        self,
        node: RaftNode,
        check_record: Callable[[bytes], object] | None = None,
        *,
        raw_appends: bool = False,
        endpoints: dict[int, VoterAddress] | None = None,
        authorize: AdminCheck | None = None,
    ) -> None:
        """``check_record`` raises ValueError for a record the log's readers could not take (the quorum layer
        knows no record format; the node process supplies the metadata record decoder). ``endpoints``: where
        this listener's clients reach each voter (advertised endpoints; default: the voter addresses)."""
        self.node = node
        self.endpoints = endpoints
        self.check_record = check_record
        self.raw_appends = raw_appends
        self.authorize = authorize

    def add_to_server(self, server: grpc.aio.Server) -> None:
        pb_grpc.add_QuorumAdminServicer_to_server(self, server)

    def _leader_endpoint(self, leader_id: int) -> str:
        addr = (self.endpoints or self.node.voters).get(leader_id)
        return f"{addr.host}:{addr.port}" if addr else ""

    async def DescribeQuorum(
        self, request: pb.DescribeQuorumRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeQuorumResponse:
        d = self.node.describe()
        leader_end = int(d["log_end_offset"]) if d["role"] == "Leader" else -1
        voters, observers = (
            [
                pb.ReplicaState(
                    replica_id=v["id"],
                    log_end_offset=v["log_end_offset"],
                    last_fetch_age_ms=v["last_fetch_age_ms"],
                    lag=leader_end - v["log_end_offset"] if leader_end >= 0 and v["log_end_offset"] >= 0 else -1,
                )
                for v in d[kind]  # type: ignore[attr-defined]
            ]
            for kind in ("voters", "observers")
        )
        snapshot = d["latest_snapshot"]
        return pb.DescribeQuorumResponse(
            log_start_offset=int(d["log_start_offset"]),  # type: ignore[call-overload]
            latest_snapshot_end_offset=snapshot.end_offset if snapshot else -1,  # type: ignore[attr-defined]
            latest_snapshot_epoch=snapshot.epoch if snapshot else -1,  # type: ignore[attr-defined]
            latest_snapshot_bytes=int(d["latest_snapshot_bytes"]),  # type: ignore[call-overload]
            cluster_id=str(d["cluster_id"]),
            node_id=int(d["node_id"]),
            leader_id=int(d["leader_id"]),
            leader_epoch=int(d["leader_epoch"]),
            high_watermark=int(d["high_watermark"]),
            role=str(d["role"]),
            voters=voters,
            observers=observers,
            log_end_offset=int(d["log_end_offset"]),
            leader_endpoint=self._leader_endpoint(int(d["leader_id"])),
            epoch_start_offset=int(d["epoch_start_offset"]),
        )

    async def AppendRecords(
        self, request: pb.AppendRecordsRequest, context: grpc.aio.ServicerContext
    ) -> pb.AppendRecordsResponse:
        leader = self.node.leader_and_epoch
        if not self.raw_appends:
            return self._error(
                Errors.CLUSTER_AUTHORIZATION_FAILED,
                f"AppendRecords is disabled on node {self.node.node_id}: raw records bypass the controller. Only "
                f"tests and benchmarks turn it on, with --override {RAW_APPEND_SETTING}=true",
                leader,
            )
        if self.authorize is not None and (denied := await self.authorize(context, "AppendRecords")):
            return self._error(Errors.CLUSTER_AUTHORIZATION_FAILED, denied, leader)
        if not request.records:
            return self._error(Errors.INVALID_REQUEST, "records: at least one record is required", leader)
        if request.timeout_ms < 0:
            return self._error(Errors.INVALID_REQUEST, f"timeout_ms: {request.timeout_ms} is negative", leader)
        timeout = (request.timeout_ms or DEFAULT_APPEND_TIMEOUT_MS) / 1000
        if self.check_record is not None:
            for i, value in enumerate(request.records):
                try:
                    self.check_record(value)
                except ValueError as e:
                    return self._error(Errors.INVALID_REQUEST, f"records[{i}]: {e}", leader)
        epoch = leader.epoch
        try:
            records = list(request.records)
            if request.atomic:
                last = self.node.append_atomic(epoch, records)
            else:
                last = self.node.append(epoch, records)
            await asyncio.wait_for(self.node.wait_committed(last, epoch), timeout)
        except KafkaError as e:
            return self._error(e.code, str(e), self.node.leader_and_epoch)
        except TimeoutError:
            return self._error(Errors.REQUEST_TIMED_OUT, f"not committed within {timeout * 1000:.0f} ms", leader)
        return pb.AppendRecordsResponse(
            error_code=0, base_offset=last - len(records) + 1, last_offset=last, epoch=epoch, leader_id=leader.leader_id
        )

    def _error(self, code: Errors, message: str, leader: object) -> pb.AppendRecordsResponse:
        return pb.AppendRecordsResponse(
            error_code=int(code),
            error_message=message,
            epoch=leader.epoch,
            leader_id=leader.leader_id,  # type: ignore[attr-defined]
        )

    async def ExportLog(
        self, request: pb.ExportLogRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ExportLogChunk]:
        """Batches below the high watermark as of now, read through the log's index a chunk at a time. The log may
        grow meanwhile; what is below this high watermark never changes (it is committed), so the copy is
        consistent."""
        if self.authorize is not None and (denied := await self.authorize(context, "ExportLog")):
            # A stream has no error field: the status carries Kafka's code name.
            # The status set, not context.abort(): an aborted call may keep its HTTP/2 stream counted as open
            # (grpcio 1.78), and enough of them leave the connection refusing every call (quorum/transport/server.py).
            context.set_code(grpc.StatusCode.PERMISSION_DENIED)
            context.set_details(f"CLUSTER_AUTHORIZATION_FAILED: {denied}")
            return
        node = self.node
        hw = node.high_watermark
        leader = node.leader_and_epoch
        max_bytes = request.max_chunk_bytes or 4 * 1024 * 1024
        offset = node.log.start_offset
        first = True
        snapshot = node.log.latest_snapshot()
        if offset > 0 and snapshot is not None:
            position, size = 0, 1
            while position < size:
                found = node.log.read_snapshot(snapshot, position, max_bytes)
                if found is None:
                    context.set_code(grpc.StatusCode.UNAVAILABLE)
                    context.set_details(f"snapshot {snapshot} was replaced during the export: export again")
                    return
                data, size = found
                chunk = pb.ExportLogChunk(snapshot_name=snapshot.file_name, snapshot_data=data, first_offset=offset)
                if first:
                    chunk.cluster_id, chunk.node_id, chunk.high_watermark = node.cluster_id, node.node_id, hw
                    chunk.leader_epoch, chunk.log_start_offset = leader.epoch, offset
                    first = False
                yield chunk
                position += len(data)
                await asyncio.sleep(0)
        while offset < hw:
            data, next_offset = node.log.read(offset, max_bytes)
            data, next_offset = _committed_prefix(data, hw, offset)
            if not data:
                break
            chunk = pb.ExportLogChunk(batches=data, first_offset=offset, next_offset=next_offset)
            if first:
                chunk.cluster_id = node.cluster_id
                chunk.node_id = node.node_id
                chunk.high_watermark = hw
                chunk.leader_epoch = leader.epoch
                chunk.log_start_offset = node.log.start_offset
                first = False
            yield chunk
            offset = next_offset
            await asyncio.sleep(0)  # let the node work between chunks
        if first:  # an empty committed log: still say where it stands
            yield pb.ExportLogChunk(
                cluster_id=node.cluster_id,
                node_id=node.node_id,
                high_watermark=hw,
                leader_epoch=leader.epoch,
                first_offset=offset,
                next_offset=offset,
            )


def _committed_prefix(data: bytes, hw: int, offset: int) -> tuple[bytes, int]:
    """The whole batches of ``data`` that end below ``hw`` (a batch is committed as a whole)."""
    pos = 0
    next_offset = offset
    while pos + 61 <= len(data):
        base = int.from_bytes(data[pos : pos + 8], "big", signed=True)
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        last = base + int.from_bytes(data[pos + 23 : pos + 27], "big")
        if last >= hw:
            break
        pos += length + 12
        next_offset = last + 1
    return data[:pos], next_offset
