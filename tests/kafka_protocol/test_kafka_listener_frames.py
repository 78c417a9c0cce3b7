"""Frames that are no request — sizes out of range, truncated headers and bodies, api keys Kafka does not define,
hostile array counts, random bytes — close their connection after one log line, and nothing else
happens: the node answers the next client, nothing is written to the metadata log, memory stays bounded. Also the
listener's metrics and its settings."""

from __future__ import annotations

import random
import resource
import socket
import struct
import time
from collections.abc import Iterator

import pytest
from kafka_helpers import KafkaNode, kafka_node, raw_connection, raw_request, raw_response, read_frame
from prometheus_client import CollectorRegistry, generate_latest

from pykraft.kafka.apis.api_versions import ApiVersionsRequest, ApiVersionsResponse
from pykraft.kafka.apis.create_topics import CreateTopicsRequest
from pykraft.kafka.metrics import KafkaListenerCollector
from pykraft.kafka.protocol import RequestHeader, encode_request
from pykraft.node import kafka_listener_settings

MAX_REQUEST = 1 << 20


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaNode]:
    with kafka_node(tmp_path_factory.mktemp("kafka-frames")) as node:
        node.listener.max_request_bytes = MAX_REQUEST
        yield node


def closed_after(live: KafkaNode, data: bytes, *, half_close: bool = False) -> bool:
    """Send ``data`` on a fresh connection: True when the listener closed it without answering."""
    with raw_connection(live.bootstrap) as sock:
        sock.sendall(data)
        if half_close:  # a truncated frame: the client gives up, the listener must see the end
            sock.shutdown(socket.SHUT_WR)
        return read_frame(sock) is None


def still_serving(live: KafkaNode) -> None:
    with raw_connection(live.bootstrap) as sock:
        raw_request(sock, 18, 3, ApiVersionsRequest.encode(ApiVersionsRequest.cls(), 3), correlation_id=5)
        assert raw_response(sock, 18, 3)[0] == 5


def create_topics_frame(version: int, body: bytes) -> bytes:
    return encode_request(RequestHeader(19, version, 3, "fuzz", 2 if version >= 5 else 1), body)


def test_bad_frames_close_the_connection_and_change_nothing(live: KafkaNode) -> None:
    before = live.controller.committed_offset
    refused_before = sum(live.listener.stats.refused.values())
    topic = CreateTopicsRequest.fields[0].type.element.cls(name="t", num_partitions=1, replication_factor=1)
    valid_v4 = CreateTopicsRequest.encode(CreateTopicsRequest.cls(topics=[topic], timeout_ms=1000), 4)
    valid_v7 = CreateTopicsRequest.encode(CreateTopicsRequest.cls(topics=[topic], timeout_ms=1000), 7)
    cases = {
        "negative size": struct.pack(">i", -1),
        "size above socket.request.max.bytes": struct.pack(">i", MAX_REQUEST + 1) + b"x" * 100,
        "header shorter than 8 bytes": struct.pack(">i", 4) + b"\x00\x12\x00\x00",
        "unknown api key": encode_request(RequestHeader(9999, 0, 1, "fuzz", 1), b""),
        "client id past the end": struct.pack(">ihhih", 12, 3, 1, 1, 500) + b"ab",
        "CreateTopics v4 truncated body": create_topics_frame(4, valid_v4[:-3]),
        "CreateTopics v7 truncated body": create_topics_frame(7, valid_v7[:-1]),
        "CreateTopics v4 with 2^31-1 topics": create_topics_frame(4, struct.pack(">i", 2**31 - 1) + b"\x00" * 8),
        "CreateTopics v7 with a huge compact count": create_topics_frame(7, b"\xff\xff\xff\xff\x07" + b"\x00" * 8),
        "CreateTopics v4 topic name of 30000 bytes claimed": create_topics_frame(
            4, struct.pack(">ih", 1, 30000) + b"t"
        ),
    }
    for what, data in cases.items():
        assert closed_after(live, data), what
    # a frame that promises 1 MiB and sends 10 bytes, then gives up
    assert closed_after(live, struct.pack(">i", MAX_REQUEST) + b"\x00\x12" + b"\x00" * 8, half_close=True)
    still_serving(live)
    assert live.controller.committed_offset == before  # not one record written
    assert sum(live.listener.stats.refused.values()) - refused_before == len(cases) + 1


def test_apis_and_versions_we_do_not_serve_get_unsupported_version_and_keep_the_connection(live: KafkaNode) -> None:
    """A Kafka API we do not serve (Produce), or one we serve at a version we do not (Metadata v99, ApiVersions v99),
    is answered as KIP-511 answers ApiVersions: v0, UNSUPPORTED_VERSION, our ranges; the next request on the same
    connection is served. A key Kafka does not define is no request: that connection is closed."""
    before = live.controller.committed_offset
    unserved = [(0, 9, 2, b"\x00" * 20), (3, 99, 2, b"\x00"), (18, 99, 2, b""), (19, -1, 1, b"")]
    with raw_connection(live.bootstrap) as sock:
        for correlation_id, (api_key, version, header_version, body) in enumerate(unserved, start=40):
            sock.sendall(encode_request(RequestHeader(api_key, version, correlation_id, "old", header_version), body))
            frame = read_frame(sock)
            assert frame is not None, (api_key, version)
            assert struct.unpack_from(">i", frame)[0] == correlation_id  # response header v0: the id alone
            answer = ApiVersionsResponse.decode(frame[4:], 0)
            assert answer.error_code == 35  # UNSUPPORTED_VERSION
            ranges = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
            assert ranges[18] == (0, 3) and ranges[3][0] == 0 and 0 not in ranges
        raw_request(sock, 18, 3, ApiVersionsRequest.encode(ApiVersionsRequest.cls(), 3), correlation_id=50)
        assert raw_response(sock, 18, 3)[0] == 50
    assert closed_after(live, encode_request(RequestHeader(9999, 0, 1, "fuzz", 1), b""))
    assert live.controller.committed_offset == before


def test_random_frames_never_crash_or_write(live: KafkaNode) -> None:
    rng = random.Random(20)
    before = live.controller.committed_offset
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answered = 0
    for _ in range(300):
        # read-only APIs, unknown keys and garbage headers; mutating APIs only truncated (never valid)
        api_key = rng.choice([3, 18, 29, 60, rng.randrange(-32768, 32768)])
        header = struct.pack(">hhi", api_key, rng.randrange(-2, 16), rng.randrange(2**31))
        body = header + rng.randbytes(rng.randrange(0, 64))
        kind = rng.random()
        if kind < 0.2:
            body = body[: rng.randrange(0, len(body) + 1)]
        elif kind < 0.3:  # a hostile count where the client id or the first array's length goes
            body = header + rng.choice([b"\x7f\xff", b"\x80\x00"]) + struct.pack(">i", 2**31 - 1) + body[8:]
        frame = struct.pack(">i", len(body)) + body
        with raw_connection(live.bootstrap) as sock:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
            reply = read_frame(sock)
            if reply is not None:  # it happened to be a valid request: answered, to its correlation id
                assert reply[:4] == body[4:8]
                answered += 1
    still_serving(live)
    assert live.controller.committed_offset == before
    assert answered > 0  # some random frames were requests: the fuzzer reached the handlers too
    deadline = time.monotonic() + 2
    while live.listener.stats.connections and time.monotonic() < deadline:  # the listener keeps no connection
        time.sleep(0.01)
    assert live.listener.stats.connections == 0
    rss_growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert rss_growth_kib < 64 * 1024, rss_growth_kib


def test_idle_and_trickling_connections_are_closed(live: KafkaNode) -> None:
    live.listener.idle_s = 0.2
    try:
        started = time.monotonic()
        with raw_connection(live.bootstrap) as sock:  # silent
            assert read_frame(sock) is None
        with raw_connection(live.bootstrap) as sock:  # a frame promised, never finished
            sock.sendall(struct.pack(">i", 100) + b"\x00\x12")
            assert read_frame(sock) is None
        assert time.monotonic() - started < 3
    finally:
        live.listener.idle_s = 600
    still_serving(live)


def test_metrics_name_api_and_version(live: KafkaNode) -> None:
    still_serving(live)
    with raw_connection(live.bootstrap) as sock:
        raw_request(sock, 18, 77, b"", correlation_id=1)  # answered at v0, counted once as "unsupported"
        assert raw_response(sock, 18, 0)[1].error_code == 35
    registry = CollectorRegistry()
    registry.register(KafkaListenerCollector(live.listener))
    text = generate_latest(registry).decode()
    assert 'kafka_network_requestmetrics_requests_total{request="ApiVersions",version="3"}' in text
    assert 'kafka_network_requestmetrics_errors_total{request="ApiVersions",version="unsupported"}' in text
    assert 'version="77"' not in text  # a client's made-up version is no new series
    assert 'kafka_network_requestmetrics_total_time_seconds_count{request="ApiVersions"}' in text
    assert "pykraft_kafka_listener_connections_accepted_total" in text


def test_listener_settings() -> None:
    props = {"kafka.listener": "CONTROLLER://127.0.0.1:9192", "kafka.controller.listeners": "1@a:1, 2@[::1]:2"}
    assert kafka_listener_settings(props) == (("127.0.0.1", 9192), {1: ("a", 1), 2: ("::1", 2)})
    assert kafka_listener_settings({}) == (None, {})
    for bad in ({"kafka.listener": "nohost"}, {"kafka.controller.listeners": "x@h:1"}, {"kafka.listener": "h:99999"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            kafka_listener_settings(bad)
