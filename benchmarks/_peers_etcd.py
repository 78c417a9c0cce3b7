"""The etcd side of ``peers.py``: its gRPC messages encoded by hand, and 3 etcd members on loopback.

No etcd client library and no etcd .proto files: the two messages the benchmark needs are small enough to write
as protobuf wire bytes, and grpcio passes bytes through when a method has no serializers.

- ``/etcdserverpb.KV/Put``: PutRequest ``{1: key bytes, 2: value bytes}``; any OK answer means committed.
- ``/etcdserverpb.Maintenance/Status``: StatusRequest is empty; StatusResponse ``{1: header {2: member_id},
  4: leader, 5: raftIndex (committed), 6: raftTerm, 7: raftAppliedIndex}``.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _peers_cluster import VALUE, Proc, System, Write, grpc_error

PUT = "/etcdserverpb.KV/Put"
STATUS = "/etcdserverpb.Maintenance/Status"
NOT_INSTALLED = "etcd not installed: apt-get install etcd-server, or make bench-peers"
ELECTION_LINE = b"became candidate"  # etcd's raft logs it once per election it starts (pre-vote is off by default)


# -- protobuf wire format, the little of it needed --------------------------------------------------------------


def encode_varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # an int64's two's complement, as protobuf sends it
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def length_delimited(field: int, value: bytes) -> bytes:
    return encode_varint(field << 3 | 2) + encode_varint(len(value)) + value


def put_request(key: bytes, value: bytes) -> bytes:
    return length_delimited(1, key) + length_delimited(2, value)


def decode_fields(data: bytes) -> dict[int, list[int | bytes]]:
    """Field number -> its values (varints as ints, length-delimited as bytes, fixed as little-endian ints)."""
    fields: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(data):
        key, pos = decode_varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = decode_varint(data, pos)
        elif wire == 2:
            size, pos = decode_varint(data, pos)
            if pos + size > len(data):
                raise ValueError(f"field {number}: {size} bytes past the end")
            value, pos = data[pos : pos + size], pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                raise ValueError(f"field {number}: truncated fixed{width * 8}")
            value, pos = int.from_bytes(data[pos : pos + width], "little"), pos + width
        else:
            raise ValueError(f"field {number}: unsupported wire type {wire}")
        fields.setdefault(number, []).append(value)
    return fields


def _last_int(fields: dict[int, list[int | bytes]], number: int) -> int:
    values = fields.get(number)
    value = values[-1] if values else 0
    if not isinstance(value, int):
        raise ValueError(f"field {number} is not a varint")
    return value


@dataclass(frozen=True)
class EtcdStatus:
    member_id: int
    leader: int  # a member id; 0 when the member knows no leader
    raft_index: int  # committed
    raft_term: int
    raft_applied_index: int


def decode_status(data: bytes) -> EtcdStatus:
    fields = decode_fields(data)
    header = fields.get(1, [b""])[-1]
    if not isinstance(header, bytes):
        raise ValueError("StatusResponse.header is not a message")
    return EtcdStatus(
        member_id=_last_int(decode_fields(header), 2),
        leader=_last_int(fields, 4),
        raft_index=_last_int(fields, 5),
        raft_term=_last_int(fields, 6),
        raft_applied_index=_last_int(fields, 7),
    )


# -- the processes ------------------------------------------------------------------------------------------------


def etcd_binary() -> str | None:
    return shutil.which("etcd")


def etcd_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    first = out.splitlines()[0] if out else ""
    return first.removeprefix("etcd Version:").strip() or "?"


def etcd_args(binary: str, index: int, root: Path, client_ports: list[int], peer_ports: list[int]) -> list[str]:
    """Member ``index`` (1-based) of 3, etcd's default tuning (heartbeat 100 ms, election 1000 ms), 127.0.0.1 only."""
    name = f"e{index}"
    cluster = ",".join(f"e{i + 1}=http://127.0.0.1:{p}" for i, p in enumerate(peer_ports))
    client = f"http://127.0.0.1:{client_ports[index - 1]}"
    peer = f"http://127.0.0.1:{peer_ports[index - 1]}"
    return [
        binary,
        "--name",
        name,
        "--data-dir",
        str(root / name),
        "--listen-client-urls",
        client,
        "--advertise-client-urls",
        client,
        "--listen-peer-urls",
        peer,
        "--initial-advertise-peer-urls",
        peer,
        "--initial-cluster",
        cluster,
        "--initial-cluster-token",
        "pykraft-peers-bench",
        "--initial-cluster-state",
        "new",
    ]


def etcd_env(env: dict[str, str], machine: str) -> dict[str, str]:
    """etcd 3.4 refuses to start on an architecture other than amd64 (and ppc64le) unless told it may."""
    if machine not in ("x86_64", "amd64", "ppc64le"):
        arch = {"aarch64": "arm64"}.get(machine, machine)
        return {**env, "ETCD_UNSUPPORTED_ARCH": arch}
    return env


async def status(channel, timeout: float) -> EtcdStatus | None:
    """A member's own status, or None if it does not answer within ``timeout``."""
    import grpc

    call = channel.unary_unary(STATUS, request_serializer=None, response_deserializer=None)
    try:
        return decode_status(await call(b"", timeout=timeout))
    except (TimeoutError, grpc.aio.AioRpcError):
        return None


# -- etcd as the benchmark sees it -------------------------------------------------------------------------------


class Etcd(System):
    name = "etcd"
    election_marker = ELECTION_LINE

    def __init__(self, binary: str, root: Path, client_ports: list[int], peer_ports: list[int]) -> None:
        env = etcd_env(dict(os.environ), platform.machine())
        procs = {
            i: Proc(etcd_args(binary, i, root, client_ports, peer_ports), root / f"etcd{i}.log", env) for i in (1, 2, 3)
        }
        super().__init__({i: f"127.0.0.1:{client_ports[i - 1]}" for i in (1, 2, 3)}, procs)
        self.version = etcd_version(binary)
        self.keys = 0
        self.puts: dict[int, Any] = {}

    async def open(self) -> None:
        await super().open()
        self.puts = {
            i: ch.unary_unary(PUT, request_serializer=None, response_deserializer=None)
            for i, ch in self.channels.items()
        }

    async def write(self, member: int, timeout: float) -> Write:
        import grpc

        self.keys += 1
        try:
            await self.puts[member](put_request(b"peers/%05d" % (self.keys % 10_000), VALUE), timeout=timeout)
        except grpc.aio.AioRpcError as e:
            return Write(False, grpc_error(e))
        return Write(True)

    async def leader_if_whole(self) -> int | None:
        if not all(p.running for p in self.procs.values()):
            return None
        views = await asyncio.gather(*(status(ch, 1.0) for ch in self.channels.values()))
        if any(v is None for v in views):
            return None
        by_member = {v.member_id: i for i, v in zip(self.channels, views, strict=True) if v is not None}
        leaders = {v.leader for v in views if v is not None}
        states = {(v.raft_term, v.raft_index) for v in views if v is not None}
        applied = all(v.raft_applied_index == v.raft_index for v in views if v is not None)
        if len(leaders) == 1 and len(states) == 1 and applied:
            return by_member.get(leaders.pop())
        return None
