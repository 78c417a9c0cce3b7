"""The pure parts of ``benchmarks/peers.py``: the etcd messages it encodes and decodes by hand (no etcd library, no
.proto), the pykraft record it writes, and how it summarizes rounds and failover trials."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from controller.records import deserialize
from controller.records.metadata import NoOpRecord

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # the benchmark's modules import each other by name (_stats, _peers_etcd, ...)
_spec = importlib.util.spec_from_file_location("peers_bench", BENCHMARKS / "peers.py")
assert _spec is not None and _spec.loader is not None
peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peers)
etcd = peers.etcd
cluster = sys.modules["_peers_cluster"]

# A StatusResponse from etcd 3.4.23 (Debian's etcd-server) after 300 puts. Its JSON gateway said of the same
# member: member_id 3947949491485878839 (the leader), revision 301, raftIndex 308, raftTerm 2, raftAppliedIndex 308,
# version "3.4.23", dbSize 73728.
ETCD_STATUS = bytes.fromhex(
    "0a1a08be909492ced485d6830110b7d4ccb9d3e4fbe43618ad0220021206332e342e32331880c00420b7d4ccb9d3e4fbe43628b40230"
    "0238b4024880c004"
)


@pytest.mark.parametrize("n", [0, 1, 127, 128, 300, 16_383, 16_384, 2**32, 2**63 - 1, 2**64 - 1])
def test_varint_round_trip(n: int) -> None:
    data = etcd.encode_varint(n)
    assert etcd.decode_varint(data + b"\xff", 0) == (n, len(data))


def test_varint_bytes_and_negatives() -> None:
    assert etcd.encode_varint(1) == b"\x01"
    assert etcd.encode_varint(300) == b"\xac\x02"
    assert etcd.encode_varint(-1) == b"\xff" * 9 + b"\x01"  # an int64 -1: ten bytes, as protobuf sends it
    with pytest.raises(ValueError, match="truncated"):
        etcd.decode_varint(b"\x80\x80", 0)


def test_put_request_bytes() -> None:
    assert etcd.put_request(b"k", b"v") == b"\x0a\x01k\x12\x01v"
    value = b"v" * 200  # a length past one varint byte
    assert etcd.put_request(b"key", value) == b"\x0a\x03key\x12\xc8\x01" + value
    assert etcd.decode_fields(etcd.put_request(b"key", value)) == {1: [b"key"], 2: [value]}


def test_decode_a_real_status_response() -> None:
    status = etcd.decode_status(ETCD_STATUS)
    assert status == etcd.EtcdStatus(
        member_id=3947949491485878839,
        leader=3947949491485878839,
        raft_index=308,
        raft_term=2,
        raft_applied_index=308,
    )
    fields = etcd.decode_fields(ETCD_STATUS)
    assert fields[2] == [b"3.4.23"] and fields[3] == [73728]


def test_decode_status_of_a_follower_skips_fields_it_does_not_know() -> None:
    header = etcd.length_delimited(1, etcd.encode_varint(2 << 3) + etcd.encode_varint(7))  # member_id 7
    fixed64 = etcd.encode_varint(11 << 3 | 1) + (5).to_bytes(8, "little")
    fixed32 = etcd.encode_varint(12 << 3 | 5) + (6).to_bytes(4, "little")
    varints = b"".join(
        etcd.encode_varint(f << 3) + etcd.encode_varint(v) for f, v in ((4, 9), (5, 12), (6, 3), (7, 11))
    )
    body = header + fixed64 + varints + fixed32  # leader 9, raftIndex 12, raftTerm 3, raftAppliedIndex 11
    assert etcd.decode_status(body) == etcd.EtcdStatus(
        member_id=7, leader=9, raft_index=12, raft_term=3, raft_applied_index=11
    )
    assert etcd.decode_status(b"") == etcd.EtcdStatus(0, 0, 0, 0, 0)  # proto3: every field at its default
    with pytest.raises(ValueError, match="past the end"):
        etcd.decode_fields(etcd.encode_varint(1 << 3 | 2) + b"\x05ab")
    with pytest.raises(ValueError, match="wire type"):
        etcd.decode_fields(etcd.encode_varint(1 << 3 | 3))


def test_etcd_members_listen_on_loopback_only() -> None:
    args = etcd.etcd_args("/usr/bin/etcd", 2, Path("/d"), [1001, 1002, 1003], [2001, 2002, 2003])
    flags = dict(zip(args[1::2], args[2::2], strict=True))
    assert flags["--name"] == "e2" and flags["--data-dir"] == "/d/e2"
    assert flags["--listen-client-urls"] == "http://127.0.0.1:1002"
    assert flags["--listen-peer-urls"] == "http://127.0.0.1:2002"
    assert flags["--initial-cluster"] == "e1=http://127.0.0.1:2001,e2=http://127.0.0.1:2002,e3=http://127.0.0.1:2003"
    assert not any(f.startswith(("--heartbeat", "--election")) for f in flags)  # etcd's default tuning
    assert "ETCD_UNSUPPORTED_ARCH" not in etcd.etcd_env({}, "x86_64")
    assert etcd.etcd_env({}, "aarch64")["ETCD_UNSUPPORTED_ARCH"] == "arm64"


def test_the_pykraft_record_is_a_100_byte_metadata_record() -> None:
    record = cluster.pykraft_record()
    assert len(record) == 100
    assert isinstance(deserialize(record).message, NoOpRecord)


def tally(latencies: list[float], failures: list[str], first: float, last: float) -> object:
    t = peers.Tally()
    for x in latencies:
        t.success(x)
    for name in failures:
        t.failure(name)
    t.first_sent, t.last_answer = first, last
    return t


def test_rounds_are_pooled() -> None:
    a = tally([1.0] * 98 + [50.0, 60.0], ["grpc UNAVAILABLE"], 10.0, 12.0)
    b = tally([3.0] * 100, ["grpc UNAVAILABLE", "NOT_LEADER_OR_FOLLOWER"], 20.0, 22.0)
    s = peers.summarize([a, b])
    assert s["ok"] == 200 and s["failed"] == 3
    assert s["errors"] == {"grpc UNAVAILABLE": 2, "NOT_LEADER_OR_FOLLOWER": 1}
    assert s["ops_per_s"] == pytest.approx(200 / 4.0)  # over the measured time of both rounds, not the wall clock
    assert s["rounds_ops_per_s"] == pytest.approx([50.0, 50.0])
    assert s["p50_ms"] == 3.0 and s["p99_ms"] == 50.0
    assert s["mean_ms"] == pytest.approx((98 + 110 + 300) / 200)
    assert math.isnan(peers.summarize([peers.Tally()])["p50_ms"])


def test_failover_summary_counts_a_trial_that_gave_up() -> None:
    trials = [{"failover_ms": ms} for ms in [*range(100, 1100, 100), 480.0, 520.0]] + [{"failover_ms": None}]
    s = peers.failover_summary(trials)
    assert s["trials"] == 13 and s["gave_up"] == 1
    assert s["over_500ms"] == 7  # 520, 600..1000 and the one that gave up (500 itself is not over)
    assert s["median_ms"] == 520 and s["max_ms"] == math.inf and s["p99_ms"] == math.inf
    assert s["p90_ms"] == 1000
    assert peers.json_safe({"a": [math.inf, math.nan, 1.5], ("x", 1): 2}) == {"a": [None, None, 1.5], "('x', 1)": 2}


def test_ratios_by_round() -> None:
    assert peers.by_round_ratios({"rounds_ops_per_s": [10.0, 30.0]}, {"rounds_ops_per_s": [20.0, 0.0]})[0] == 0.5
    with pytest.raises(ValueError):
        peers.by_round_ratios({"rounds_ops_per_s": [1.0]}, {"rounds_ops_per_s": [1.0, 2.0]})
    assert peers.fmt_ratio(1.0, 0.0) == "-" and peers.fmt_ratio(3.0, 2.0) == "1.50x"
    assert peers.fmt_ms(math.inf) == "gave up" and peers.fmt_ms(1234.4) == "1,234" and peers.fmt_ms(2.346) == "2.35"


def test_stage_metrics_are_parsed_and_turned_into_hops() -> None:
    text = "\n".join(
        [
            "# HELP pykraft_raft_commit_stage_seconds_total x",
            'pykraft_raft_commit_stage_seconds_total{node_id="1",side="leader",stage="written"} 0.01',
            'pykraft_raft_commit_stage_seconds_total{node_id="1",side="leader",stage="flushed"} 0.8',
            'pykraft_raft_commit_stage_seconds_total{node_id="1",side="leader",stage="replicated"} 1.2',
            'pykraft_raft_commit_stage_seconds_total{node_id="1",side="leader",stage="committed"} 1.3',
            'pykraft_raft_commit_stage_samples_total{node_id="1",side="leader"} 1000.0',
            'pykraft_raft_commit_stage_samples_total{node_id="1",side="follower"} 0.0',
        ]
    )
    leader = cluster.parse_stage_metrics(text)
    assert leader["leader/replicated"] == 1.2 and leader["leader/samples"] == 1000.0
    follower = {"follower/flushed": 0.7, "follower/fetch_sent": 0.75, "follower/samples": 1000.0, "leader/samples": 0}
    hops = peers.commit_hops({1: leader, 2: follower, 3: dict(follower)}, total_ms=2.5)
    assert hops["client_call_ms"] == pytest.approx(1.2)  # 2.5 - 1.3
    assert hops["follower_write_fsync_ms"] == pytest.approx(0.7)
    assert hops["follower_fetch_sent_ms"] == pytest.approx(0.05)
    assert hops["transport_both_ways_ms"] == pytest.approx(1.2 - 0.01 - 0.75)
    assert hops["commit_after_ack_ms"] == pytest.approx(0.1)
    assert peers.commit_hops({}, 2.5) == {}


def test_stage_sums_are_not_taken_from_the_stage_histograms() -> None:
    """The duration histogram's samples carry the same side and stage labels as the sums: only the sums count."""
    text = "\n".join(
        [
            'pykraft_raft_commit_stage_seconds_total{node_id="1",side="leader",stage="committed"} 1.3',
            'pykraft_raft_commit_stage_duration_seconds_bucket{node_id="1",side="leader",stage="committed",'
            'le="0.005"} 9.0',
            'pykraft_raft_commit_stage_duration_seconds_count{node_id="1",side="leader",stage="committed"} 10.0',
            'pykraft_raft_commit_stage_duration_seconds_sum{node_id="1",side="leader",stage="committed"} 0.2',
            'pykraft_raft_commit_stage_samples_total{node_id="1",side="leader"} 10.0',
        ]
    )
    assert cluster.parse_stage_metrics(text) == {"leader/committed": 1.3, "leader/samples": 10.0}


def test_a_front_joins_requests_into_one_holding_every_record() -> None:
    """The batching front forwards its clients' AppendRecords requests as their bytes joined: protobuf concatenates
    a repeated field, so the leader receives one request holding every record, in order."""
    from quorum.transport.pb import quorum_pb2 as pb

    first = pb.AppendRecordsRequest(records=[b"a", b"bb"], timeout_ms=10_000).SerializeToString()
    second = pb.AppendRecordsRequest(records=[b"ccc"], timeout_ms=10_000).SerializeToString()
    joined = pb.AppendRecordsRequest.FromString(first + second)
    assert list(joined.records) == [b"a", b"bb", b"ccc"] and joined.timeout_ms == 10_000
