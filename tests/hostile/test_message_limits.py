"""Message size limits on a live node's listener: a request over MAX_MESSAGE_BYTES is refused by gRPC with
RESOURCE_EXHAUSTED (on a unary call and on the peer stream), never read into Python, and the node goes on serving;
one just under the limit gets through to the service."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import grpc
import pytest
from hostile_helpers import live_node
from structlog.testing import capture_logs

import quorum.transport.server as server_module
from controller.authorizer import AclOperation, ResourceType
from pykraft.api import controller_pb2 as cpb
from pykraft.api import controller_pb2_grpc as cpb_grpc
from pykraft.authorization import denied_message
from quorum.errors import Errors
from quorum.transport.limits import CHANNEL_OPTIONS, MAX_MESSAGE_BYTES, SERVER_OPTIONS
from quorum.transport.pb import quorum_pb2 as qpb
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc

BIG = [("grpc.max_send_message_length", 4 * MAX_MESSAGE_BYTES)]  # the client may send more than the node takes


def test_every_listener_sets_its_limits_explicitly() -> None:
    for options in (SERVER_OPTIONS, CHANNEL_OPTIONS):
        names = dict(options)
        assert names["grpc.max_receive_message_length"] == MAX_MESSAGE_BYTES
        assert names["grpc.max_send_message_length"] == MAX_MESSAGE_BYTES
    names = dict(SERVER_OPTIONS)
    assert {"grpc.max_concurrent_streams", "grpc.max_allowed_incoming_connections"} <= names.keys()


async def test_oversized_requests_get_resource_exhausted(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live, grpc.aio.insecure_channel(live.address, options=BIG) as channel:
        controller = cpb_grpc.ControllerStub(channel)
        name = "x" * (MAX_MESSAGE_BYTES + 1)
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await controller.CreateTopics(cpb.CreateTopicsRequest(topics=[cpb.CreateTopicsRequest.Topic(name=name)]))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value

        admin = qpb_grpc.QuorumAdminStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as e:
            await admin.AppendRecords(qpb.AppendRecordsRequest(records=[b"\0" * (MAX_MESSAGE_BYTES + 1)]))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value

        call = qpb_grpc.QuorumPeerStub(channel).Exchange()
        records = b"\0" * (MAX_MESSAGE_BYTES + 1)
        await call.write(qpb.PeerMessage(source=7, fetch_response=qpb.FetchResponse(records=records)))
        assert await call.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        # Just under the limit reaches the service, which answers (raw appends are off on this node).
        response = await admin.AppendRecords(qpb.AppendRecordsRequest(records=[b"\0" * (MAX_MESSAGE_BYTES - 1024)]))
        assert response.error_code != 0 and len(response.error_message) < 1000, response.error_message[:200]
        assert await live.serves(channel) and live.healthy


async def test_a_request_that_is_no_message_gets_invalid_argument(tmp_path: Path) -> None:
    """Left to gRPC, undecodable bytes were UNKNOWN and a traceback at ERROR per request (found by the fuzzer)."""
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append  # type: ignore[method-assign]
    logging.getLogger("grpc").addHandler(handler)
    try:
        await _undecodable_requests(tmp_path)
    finally:
        logging.getLogger("grpc").removeHandler(handler)
    assert not errors, [r.getMessage() for r in errors]


async def _undecodable_requests(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live, grpc.aio.insecure_channel(live.address) as channel:
        for path in ("/pykraft.controller.v1.Controller/CreateTopics", "/pykraft.quorum.v1.QuorumAdmin/DescribeQuorum"):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await channel.unary_unary(path)(b"\xff\xff\xff", timeout=5)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
            assert "not a valid message" in (e.value.details() or "")
        with pytest.raises(grpc.aio.AioRpcError) as e:
            async for _ in channel.unary_stream("/pykraft.quorum.v1.QuorumAdmin/ExportLog")(b"\xff\xff\xff", timeout=5):
                pass
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
        # A valid request on the same methods is still served (the guard decodes, the handler answers).
        chunks = [c async for c in qpb_grpc.QuorumAdminStub(channel).ExportLog(qpb.ExportLogRequest())]
        assert chunks and chunks[0].cluster_id
        assert await live.serves(channel) and live.healthy


async def test_the_guard_wraps_a_methods_handler_once_and_anew_when_it_changes() -> None:
    """Wrapping per call cost ~45 us of every call; the wrapped handler still refuses what is no message."""
    guard = server_module.DecodeGuard()
    method = "/pykraft.quorum.v1.QuorumAdmin/DescribeQuorum"

    async def describe(request: qpb.DescribeQuorumRequest, context: object) -> qpb.DescribeQuorumResponse:
        return qpb.DescribeQuorumResponse(node_id=7)

    def handler_of() -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(
            describe,
            request_deserializer=qpb.DescribeQuorumRequest.FromString,
            response_serializer=qpb.DescribeQuorumResponse.SerializeToString,
        )

    current = handler_of()

    async def continuation(details: object) -> grpc.RpcMethodHandler:
        return current

    details = grpc.HandlerCallDetails()
    details.method = method  # type: ignore[attr-defined]
    first = await guard.intercept_service(continuation, details)
    assert await guard.intercept_service(continuation, details) is first
    current = handler_of()  # the service registered again
    second = await guard.intercept_service(continuation, details)
    assert second is not first and await guard.intercept_service(continuation, details) is second

    class Context:
        code = None

        def set_code(self, code: grpc.StatusCode) -> None:
            self.code = code

        def set_details(self, details: str) -> None:
            pass

        def peer(self) -> str:
            return "ipv4:127.0.0.1:1"

    context = Context()
    assert (await second.unary_unary(qpb.DescribeQuorumRequest().SerializeToString(), context)).node_id == 7
    assert context.code is None
    await second.unary_unary(b"\xff\xff\xff", context)
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT and guard.refused == 1


async def test_refused_calls_do_not_use_up_a_connections_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In grpcio 1.78 a call ended with context.abort() may stay counted as an open HTTP/2 stream: refused calls
    used up a connection's streams and it then refused every new call (found by the fuzzer after ~120,000 payloads;
    with 4 streams a connection, within 10 refusals). Refusals set the status instead."""
    limited = [(k, 4 if k == "grpc.max_concurrent_streams" else v) for k, v in server_module.SERVER_OPTIONS]
    monkeypatch.setattr(server_module, "SERVER_OPTIONS", limited)
    async with live_node(tmp_path) as live, grpc.aio.insecure_channel(live.address) as channel:
        describe = channel.unary_unary("/pykraft.controller.v1.Controller/DescribeCluster")
        exchange = channel.stream_stream("/pykraft.quorum.v1.QuorumPeer/Exchange")
        for _ in range(25):
            with pytest.raises(grpc.aio.AioRpcError) as e:
                await describe(b"\xff\xff\xff", timeout=5)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value
        for _ in range(25):
            stream = exchange(timeout=5)
            with contextlib.suppress(grpc.aio.AioRpcError):
                await stream.write(b"\xff\xff\xff")
            assert await stream.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert await live.serves(channel) and live.healthy


async def test_a_topic_name_of_megabytes_is_answered_with_its_error_not_a_transport_error(tmp_path: Path) -> None:
    """Kafka caps topic names at 249 characters; a request may carry one of ~15 MiB. Echoed whole in the error
    message beside the name the answer carries, CreateTopics' answer passed the 16 MiB send limit and the client got
    RESOURCE_EXHAUSTED instead of INVALID_TOPIC_EXCEPTION. Messages and log lines echo the first 100 characters and
    the length; the answer still names the topic as it was sent (as Kafka's does)."""
    name = "x" * (15 * 1024 * 1024)
    shown = "x" * 100 + f"…({len(name)} chars)"
    options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES), ("grpc.max_send_message_length", -1)]
    async with live_node(tmp_path) as live, grpc.aio.insecure_channel(live.address, options=options) as channel:
        controller = cpb_grpc.ControllerStub(channel)
        with capture_logs() as logs:
            created = await controller.CreateTopics(
                cpb.CreateTopicsRequest(topics=[cpb.CreateTopicsRequest.Topic(name=name)]), timeout=30
            )
            [topic] = created.topics
            assert topic.error_code == Errors.INVALID_TOPIC_EXCEPTION and topic.name == name
            assert topic.error_message == (
                f"Topic name is illegal, it can't be longer than 249 characters, topic name: {shown}"
            )
            described = await controller.DescribeTopics(cpb.DescribeTopicsRequest(names=[name]), timeout=30)
            assert described.topics[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
            assert described.topics[0].error_message == f"Topic '{shown}' does not exist."
            Deleted = cpb.DeleteTopicsRequest.DeleteTopicState
            deleted = await controller.DeleteTopics(cpb.DeleteTopicsRequest(topics=[Deleted(name=name)]), timeout=30)
            assert deleted.responses[0].error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
            assert len(deleted.responses[0].error_message) < 300
            configs = await controller.DescribeConfigs(
                cpb.DescribeConfigsRequest(
                    resources=[cpb.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=name)]
                ),
                timeout=30,
            )
            assert configs.results[0].error_code == Errors.INVALID_TOPIC_EXCEPTION
            assert len(configs.results[0].error_message) < 300
        assert logs and all(len(repr(event)) < 10_000 for event in logs), max(len(repr(e)) for e in logs)
        assert await live.serves(channel) and live.healthy
    # With authorization on, a refusal's message names the topic the same way.
    refused = denied_message("User:alice", "10.0.0.5", AclOperation.CREATE, ResourceType.TOPIC, name)
    assert refused.endswith(f"may not CREATE TOPIC {shown}")
