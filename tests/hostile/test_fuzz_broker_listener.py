"""Fuzzing a broker's listener (the data plane's ReplicaFetch service, in this process, with no partitions yet):
random, mutated and garbage Fetch and DescribeReplicas payloads get an answer or INVALID_ARGUMENT — never UNKNOWN (a
handler that raised), never a fault — and a valid request is still answered afterwards. Same seed and budget
variables as test_fuzz_grpc.py."""

from __future__ import annotations

import random
from collections import Counter

import grpc
from fuzz_helpers import fuzz_count, fuzz_seed, payload
from google.protobuf.message_factory import GetMessageClass

from pykraft.api import broker_pb2 as bpb
from pykraft.api import broker_pb2_grpc as bpb_grpc
from pykraft.replica.data_plane import DataPlane
from pykraft.replica.partition import ReplicaConfig
from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler

SERVICE = bpb.DESCRIPTOR.services_by_name["ReplicaFetch"]


async def test_fuzz_broker_listener() -> None:
    seed = fuzz_seed()
    print(f"fuzz seed {seed} (PYKRAFT_FUZZ_SEED={seed} replays it)")
    rng = random.Random(seed)
    count = fuzz_count(300)
    [port] = free_ports(1)
    faults = LoggingFaultHandler()
    plane = DataPlane(101, ("127.0.0.1", port), None, lambda: 1, ReplicaConfig(), faults)  # type: ignore[arg-type]
    assert await plane.start_server()
    statuses: Counter[tuple[str, str]] = Counter()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            for method in SERVICE.methods:
                cls = GetMessageClass(method.input_type)
                call = channel.unary_unary(f"/{SERVICE.full_name}/{method.name}")
                for _ in range(count):
                    body = payload(rng, cls)
                    try:
                        await call(body, timeout=10)
                        code = grpc.StatusCode.OK
                    except grpc.aio.AioRpcError as e:
                        code = e.code()
                        assert code != grpc.StatusCode.UNKNOWN, f"seed {seed}: {method.name} on {body[:200]!r}: {e}"
                    statuses[method.name, code.name] += 1
                    assert not faults.faults, f"seed {seed}: {faults.faults}"
            print(f"statuses: {sorted(statuses.items())}")
            response = await bpb_grpc.ReplicaFetchStub(channel).DescribeReplicas(bpb.DescribeReplicasRequest())
            assert list(response.replicas) == []
    finally:
        await plane.stop()
    assert not faults.faults, f"seed {seed}: {faults.faults}"
