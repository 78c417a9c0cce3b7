"""Fuzzing a live node in this process: random, mutated and garbage payloads to every public gRPC method (the
Controller service, the quorum admin) and to the Raft peer stream, on gRPC and on frames. Nothing may crash it (no
fault, the controller and the Raft core alive, a real client still answered and a write still committed), no handler
may fail with an unexpected exception (gRPC's UNKNOWN), a refused request may not change the log, garbage on the peer
stream may not move the leader, its epoch or the committed offset, and memory stays bounded.

The short budget runs in the normal suite; ``make fuzz`` runs PYKRAFT_FUZZ_COUNT (100,000) payloads per method.
Every run prints its seed: PYKRAFT_FUZZ_SEED=<seed> replays it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import structlog
from fuzz_helpers import fuzz_count, fuzz_seed, mutate, payload, random_message
from google.protobuf.message import DecodeError
from google.protobuf.message_factory import GetMessageClass
from hostile_helpers import CLUSTER_ID, LiveNode, live_node, rss_bytes

from controller.quorum_controller import ControllerSettings
from pykraft.api import controller_pb2 as cpb
from quorum.raft.core import RaftCore
from quorum.raft.runtime import RaftNode
from quorum.transport.frames import FRAME
from quorum.transport.limits import MAX_MESSAGE_BYTES
from quorum.transport.pb import quorum_pb2 as qpb

SERVICES = [
    (cpb.DESCRIPTOR.services_by_name["Controller"], "pykraft.controller.v1"),
    (qpb.DESCRIPTOR.services_by_name["QuorumAdmin"], "pykraft.quorum.v1"),
]
# A session that never expires: brokers the fuzzer happens to register are not fenced by the controller later,
# which would write records while a refused request is being checked for writing none.
SETTINGS = ControllerSettings(max_idle_interval_ms=0, session_timeout_ms=10**9)
RSS_GROWTH_LIMIT = 300 * 1024 * 1024
# Transport outcomes after which the request may still be running on the node
UNFINISHED = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)
BUDGET_S = 10.0  # the short budget: payloads per method until the count or the time is spent


@pytest.fixture(autouse=True)
def quiet_node() -> Iterator[None]:
    """The node's lines at ERROR and above only: a request line (or a rejected-message warning) per payload would
    be millions of lines under ``make fuzz``."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    yield
    structlog.configure(**old)


def methods() -> list[tuple[str, type, bool]]:
    """(path, request class, server-streaming) of every public method."""
    out = []
    for service, _ in SERVICES:
        for method in service.methods:
            out.append(
                (f"/{service.full_name}/{method.name}", GetMessageClass(method.input_type), method.server_streaming)
            )
    return out


async def call(channel: grpc.aio.Channel, path: str, body: bytes, streaming: bool) -> tuple[grpc.StatusCode, bytes]:
    try:
        if streaming:
            chunks = [chunk async for chunk in channel.unary_stream(path)(body, timeout=10)]
            return grpc.StatusCode.OK, chunks[0] if chunks else b""
        return grpc.StatusCode.OK, await channel.unary_unary(path)(body, timeout=10)
    except grpc.aio.AioRpcError as e:
        return e.code(), (e.details() or "").encode()


async def settled(node: RaftNode, quiet_s: float = 0.3, timeout_s: float = 10.0) -> None:
    """Wait until the log has stopped growing for ``quiet_s`` and all of it is committed: a timed-out write may
    still be appended (a fixed short sleep was not enough on a loaded machine), and must not be charged to the
    next, refused, payload."""
    async with asyncio.timeout(timeout_s):
        end, since = node.log.end_offset, time.monotonic()
        while time.monotonic() - since < quiet_s or node.high_watermark < end:
            await asyncio.sleep(0.01)
            if node.log.end_offset != end:
                end, since = node.log.end_offset, time.monotonic()


async def test_fuzz_public_methods(tmp_path: Path) -> None:
    seed = fuzz_seed()
    print(f"fuzz seed {seed} (PYKRAFT_FUZZ_SEED={seed} replays it)")
    rng = random.Random(seed)
    count = fuzz_count(250)
    async with live_node(tmp_path, SETTINGS) as live, grpc.aio.insecure_channel(live.address) as channel:
        log = live.node.log
        rss_before = rss_bytes()
        statuses: Counter[tuple[str, str]] = Counter()
        failures: list[str] = []
        deadline = time.monotonic() + BUDGET_S * (count / 250)
        for path, cls, streaming in methods():
            response_cls = None if streaming else cls
            for i in range(count):
                if time.monotonic() > deadline and i >= 20:
                    break
                body = payload(rng, cls)
                end_before = log.end_offset
                code, answer = await call(channel, path, body, streaming)
                statuses[path.rsplit("/", 1)[1], code.name] += 1
                if code == grpc.StatusCode.UNKNOWN:
                    failures.append(f"{path} raised on {body[:200]!r}: {answer[:300]!r}")
                refused = code != grpc.StatusCode.OK
                if not refused and response_cls is not None:
                    error_code = _error_code(path, answer)
                    if error_code == 7:  # REQUEST_TIMED_OUT: the write may still complete; let it
                        await settled(live.node)
                        continue
                    refused = error_code not in (0, None)
                if refused and log.end_offset != end_before:
                    failures.append(f"{path} refused ({code.name}) yet the log grew: {body[:200]!r}")
                if log.end_offset != end_before or code in UNFINISHED:
                    # A write may go on after its answer (a controlled shutdown's moves, in steps) or after the
                    # client gave up on it: let it end before the next payload is charged with what it appends.
                    await settled(live.node)
                if not live.healthy:
                    failures.append(f"{path}: the node failed on {body[:200]!r}: {live.faults.faults}")
                    break
            assert not failures, f"seed {seed}: " + "\n".join(failures[:10])
        print(f"statuses: {sorted(statuses.items())}")
        assert await live.serves(channel), f"seed {seed}"
        assert await live.commits("after-fuzz") and live.healthy, f"seed {seed}: {live.faults.faults}"
        growth = rss_bytes() - rss_before
        assert growth < RSS_GROWTH_LIMIT, f"seed {seed}: RSS grew by {growth} bytes"


def _error_code(path: str, answer: bytes) -> int | None:
    """The response's request-level error_code (None when it has none)."""
    service, method = path.strip("/").split("/")
    for descriptor, _ in SERVICES:
        if descriptor.full_name == service:
            output = GetMessageClass(descriptor.methods_by_name[method].output_type)
            response = output.FromString(answer)
            return getattr(response, "error_code", None)
    return None


@dataclass(frozen=True)
class AtRest:
    """The quorum before peer garbage: what it may not move, and the memory it may not grow by much."""

    core: RaftCore
    state: tuple[int, int, int, int]  # leader, epoch, high watermark, log end
    rss: int

    async def unmoved(self, live: LiveNode, channel: grpc.aio.Channel, seed: int) -> None:
        core, node = self.core, live.node
        assert live.healthy, f"seed {seed}: {live.faults.faults}"
        after = (core.leader_id, core.epoch, core.high_watermark, node.log.end_offset)
        assert after == self.state, f"seed {seed}: (leader, epoch, high watermark, log end) {self.state} -> {after}"
        assert node.core is core and await live.serves(channel)
        assert await live.commits("after-peer-fuzz"), f"seed {seed}"
        growth = rss_bytes() - self.rss
        assert growth < RSS_GROWTH_LIMIT, f"seed {seed}: RSS grew by {growth} bytes"


async def quorum_at_rest(live: LiveNode) -> AtRest:
    """Once what the new leader wrote is committed (its own fsync), so that nothing moves below but by the fuzz."""
    core = live.node.core
    assert core is not None
    async with asyncio.timeout(10):
        while core.high_watermark != live.node.log.end_offset:
            await asyncio.sleep(0.01)
    state = (core.leader_id, core.epoch, core.high_watermark, live.node.log.end_offset)
    return AtRest(core, state, rss_bytes())


PEER_BODIES = [f.name for f in qpb.PeerMessage.DESCRIPTOR.oneofs_by_name["body"].fields]


def peer_message(rng: random.Random) -> bytes:
    """A PeerMessage: random, mutated, or a valid request with one field wrong."""
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randbytes(rng.randint(0, 64))
    message = random_message(rng, qpb.PeerMessage)
    if kind == 3:  # plausible: our cluster id and a small source, the rest random
        body = rng.choice(PEER_BODIES)
        inner = getattr(message, body)
        inner.SetInParent()
        if hasattr(inner, "cluster_id"):
            inner.cluster_id = CLUSTER_ID
        message.source = rng.choice([1, 2, 3, 101, -1, 0])
    data = message.SerializeToString()
    return mutate(rng, data) if kind == 2 else data


async def test_fuzz_peer_stream(tmp_path: Path) -> None:
    seed = fuzz_seed()
    print(f"fuzz seed {seed} (PYKRAFT_FUZZ_SEED={seed} replays it)")
    rng = random.Random(seed)
    count = fuzz_count(4000)
    async with live_node(tmp_path, SETTINGS) as live, grpc.aio.insecure_channel(live.address) as channel:
        before = await quorum_at_rest(live)
        exchange = channel.stream_stream("/pykraft.quorum.v1.QuorumPeer/Exchange")
        sent = 0
        codes: Counter[str] = Counter()
        deadline = time.monotonic() + BUDGET_S * (count / 4000)
        while sent < count and (time.monotonic() < deadline or sent < 200):
            stream = exchange(timeout=10)
            for _ in range(rng.randint(1, 50)):
                data = peer_message(rng)
                try:
                    qpb.PeerMessage.FromString(data)
                except DecodeError:
                    if rng.random() < 0.9:
                        continue  # undecodable: sent now and then (it ends the stream), mostly skipped
                try:
                    await stream.write(data)
                except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                    break  # the node ended the stream (an undecodable message): what it said is below
                sent += 1
            with contextlib.suppress(grpc.aio.AioRpcError, asyncio.InvalidStateError):
                await stream.done_writing()
                async for _ in stream:
                    pass
            codes[f"{(await stream.code()).name}: {(await stream.details())[:60]}"] += 1
            assert live.healthy, f"seed {seed}: {live.faults.faults}"
        # INTERNAL endings are this client's: a write racing the node's INVALID_ARGUMENT after an undecodable one.
        print(f"peer messages sent: {sent}, stream endings: {dict(codes)}")
        print(f"observers the leader tracks: {len(getattr(before.core.role, 'observers', {}))}")
        assert not any(c.startswith("UNKNOWN") for c in codes), f"seed {seed}: {codes}"
        await before.unmoved(live, channel, seed)


async def test_fuzz_peer_frames(tmp_path: Path) -> None:
    """The same payloads as frame connections (quorum/transport/frames.py): frames of random, mutated and plausible
    PeerMessages, now and then bytes that are none, or a length header past the limit."""
    seed = fuzz_seed()
    print(f"fuzz seed {seed} (PYKRAFT_FUZZ_SEED={seed} replays it)")
    rng = random.Random(seed)
    count = fuzz_count(2000)
    async with live_node(tmp_path, SETTINGS) as live, grpc.aio.insecure_channel(live.address) as channel:
        transport = live.node.transport
        port = await transport.listen_frames("127.0.0.1", 0)
        before = await quorum_at_rest(live)
        sent = connections = 0
        deadline = time.monotonic() + BUDGET_S * (count / 4000)
        while sent < count and (time.monotonic() < deadline or sent < 200):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            connections += 1
            for _ in range(rng.randint(1, 50)):
                data = peer_message(rng)
                try:
                    qpb.PeerMessage.FromString(data)
                except DecodeError:
                    if rng.random() < 0.9:
                        continue  # undecodable: sent now and then (it ends the connection), mostly skipped
                header = len(data) if rng.random() < 0.99 else rng.randint(MAX_MESSAGE_BYTES + 1, 2**32 - 1)
                writer.write(FRAME.pack(header) + data)
                sent += 1
            writer.write_eof()
            with contextlib.suppress(ConnectionError):
                async with asyncio.timeout(10):
                    while await reader.read(65536):  # answers, until the node ends the connection
                        pass
            writer.close()
            assert live.healthy, f"seed {seed}: {live.faults.faults}"
        print(f"peer frames sent: {sent} on {connections} connections; undecodable endings: {transport.undecodable}")
        await before.unmoved(live, channel, seed)
