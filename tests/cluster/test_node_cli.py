"""The command line against real processes: ``pykraft quorum describe`` on a running cluster, and ``pykraft node``
refusing to start on a data directory that is not its own, without a required flag, or on a directory in use.

The describe tests run without the controller's idle NoOpRecords, so that offsets, lags and the high watermark
hold still and can be checked exactly."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from cluster_helpers import record, wait_caught_up

from pykraft.node import default_cluster_id
from pykraft.testing import Cluster, free_ports
from quorum.raft.config import parse_voters

PYKRAFT = [sys.executable, "-m", "pykraft"]


def pykraft(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYKRAFT, *args], capture_output=True, text=True, timeout=timeout, check=False)


def one_line_error(stderr: str) -> str:
    """The whole of stderr, which must be one line and no traceback."""
    text = stderr.strip()
    assert text, "nothing on stderr"
    assert "\n" not in text, f"more than one line on stderr:\n{stderr}"
    assert "Traceback" not in text, stderr
    return text


def parse_text(out: str) -> tuple[dict[str, str], list[list[str]]]:
    """``pykraft quorum describe`` text: the ``Name: value`` header, then one table row per voter."""
    head, _, table = out.partition("\n\n")
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in head.splitlines())}
    header, *rows = table.splitlines()
    assert header.split() == ["NodeId", "LogEndOffset", "Lag", "LastFetchAgeMs", "Status"], header
    return fields, [row.split() for row in rows]


def check_text(out: str, cluster: Cluster, leader: int, epoch: int, end: int, answered_by: int) -> None:
    fields, rows = parse_text(out)
    assert fields["ClusterId"] == default_cluster_id(parse_voters(cluster.voters))
    assert fields["LeaderId"] == str(leader)
    assert fields["LeaderEpoch"] == str(epoch)
    assert fields["HighWatermark"] == str(end)
    assert fields["AnsweredBy"] == f"node {answered_by} (Leader)"
    assert [int(r[0]) for r in rows] == sorted(cluster.nodes)
    for node_id, log_end, lag, age, status in rows:
        assert status == ("Leader" if int(node_id) == leader else "Follower")
        assert (int(log_end), int(lag)) == (end, 0), rows
        assert 0 <= int(age) < 2000, rows  # a follower fetches at least every fetch.max.wait (500 ms)


def check_json(out: str, cluster: Cluster, leader: int, epoch: int, end: int, answered_by: int) -> None:
    doc = json.loads(out)
    assert doc["clusterId"] == default_cluster_id(parse_voters(cluster.voters))
    assert (doc["leaderId"], doc["leaderEpoch"], doc["highWatermark"]) == (leader, epoch, end)
    assert (doc["answeredBy"], doc["answeredByRole"]) == (answered_by, "Leader")
    assert [v["id"] for v in doc["voters"]] == sorted(cluster.nodes)
    for v in doc["voters"]:
        assert v["status"] == ("Leader" if v["id"] == leader else "Follower")
        assert (v["logEndOffset"], v["lag"]) == (end, 0), doc
        assert 0 <= v["lastFetchAgeMs"] < 2000, doc


async def commit_some(cluster: Cluster, n: int = 5) -> tuple[int, int, int]:
    leader, _ = await cluster.wait_for_leader()
    for i in range(n):
        resp = await cluster.append(leader, [record(f"cli-{i}")])
        assert resp.error_code == 0, resp
    return await wait_caught_up(cluster)


# -- quorum describe -----------------------------------------------------------------------------------------------


async def test_describe_leader_text_and_json(quiet_cluster: Cluster) -> None:
    cluster = quiet_cluster
    leader, epoch, end = await commit_some(cluster)
    address = cluster.nodes[leader].address
    text = pykraft("quorum", "describe", "--bootstrap-server", address)
    assert text.returncode == 0, text.stderr
    check_text(text.stdout, cluster, leader, epoch, end, answered_by=leader)
    as_json = pykraft("quorum", "describe", "--bootstrap-server", address, "--output", "json")
    assert as_json.returncode == 0, as_json.stderr
    check_json(as_json.stdout, cluster, leader, epoch, end, answered_by=leader)


async def test_describe_through_follower_reports_leader_view(quiet_cluster: Cluster) -> None:
    cluster = quiet_cluster
    leader, epoch, end = await commit_some(cluster)
    follower = next(n for n in cluster.nodes if n != leader)
    address = cluster.nodes[follower].address
    as_json = pykraft("quorum", "describe", "--bootstrap-server", address, "--output", "json")
    assert as_json.returncode == 0, as_json.stderr
    check_json(as_json.stdout, cluster, leader, epoch, end, answered_by=leader)
    text = pykraft("quorum", "describe", "--bootstrap-server", address)
    assert text.returncode == 0, text.stderr
    check_text(text.stdout, cluster, leader, epoch, end, answered_by=leader)


async def test_describe_without_a_reachable_leader_reports_the_bootstrap_view(quiet_cluster: Cluster) -> None:
    """With the leader and a majority gone, the survivor still answers: the command reports its own view instead
    of failing on the dead leader it names."""
    cluster = quiet_cluster
    leader, epoch, end = await commit_some(cluster)
    survivor, other = (n for n in cluster.nodes if n != leader)
    cluster.nodes[other].kill()
    cluster.nodes[leader].kill()
    result = pykraft("quorum", "describe", "--bootstrap-server", cluster.nodes[survivor].address, "--output", "json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["answeredBy"] == survivor and doc["answeredByRole"] != "Leader", doc
    assert doc["leaderEpoch"] >= epoch and doc["highWatermark"] == end, doc
    text = pykraft("quorum", "describe", "--bootstrap-server", cluster.nodes[survivor].address)
    assert text.returncode == 0, text.stderr
    _, rows = parse_text(text.stdout)
    assert [r[1:3] for r in rows if int(r[0]) != survivor] == [["?", "?"], ["?", "?"]], text.stdout


def test_describe_unreachable_bootstrap_server() -> None:
    """Every server dead: one line naming them, after --connect-timeout-ms (not at once, not after 30 s)."""
    a, b = free_ports(2)
    started = time.monotonic()
    servers = f"127.0.0.1:{a},127.0.0.1:{b}"
    result = pykraft("quorum", "describe", "--bootstrap-server", servers, "--connect-timeout-ms", "1500")
    took = time.monotonic() - started
    assert result.returncode == 1, result
    assert result.stdout == ""
    message = one_line_error(result.stderr)
    assert message.startswith(f"pykraft quorum describe: no controller reachable at {servers} within 1.5 s"), message
    assert "UNAVAILABLE" in message, message
    assert 1.5 <= took < 8, f"took {took:.1f} s"


async def test_describe_status_and_replication_as_kafka_metadata_quorum(quiet_cluster: Cluster) -> None:
    """--status and --replication print kafka-metadata-quorum.sh's blocks; a dead first server in the comma list
    is skipped."""
    cluster = quiet_cluster
    leader, epoch, end = await commit_some(cluster)
    (dead,) = free_ports(1)
    follower = next(n for n in cluster.nodes if n != leader)
    servers = f"127.0.0.1:{dead},{cluster.nodes[follower].address}"
    status = pykraft("quorum", "describe", "--bootstrap-server", servers, "--status")
    assert status.returncode == 0, status.stderr
    fields = {k: v.strip() for k, _, v in (line.partition(":") for line in status.stdout.splitlines())}
    assert list(fields) == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ], status.stdout
    assert (fields["LeaderId"], fields["LeaderEpoch"], fields["HighWatermark"]) == (str(leader), str(epoch), str(end))
    assert fields["MaxFollowerLag"] == "0" and 0 <= int(fields["MaxFollowerLagTimeMs"]) < 2000, fields
    assert fields["CurrentVoters"] == "[" + ",".join(map(str, sorted(cluster.nodes))) + "]", fields
    assert fields["CurrentObservers"] == "[]", fields

    before_ms = time.time() * 1000
    replication = pykraft("quorum", "describe", "--bootstrap-server", servers, "--replication")
    assert replication.returncode == 0, replication.stderr
    header, *rows = [line.split() for line in replication.stdout.splitlines()]
    assert header == ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]
    assert sorted(int(r[0]) for r in rows) == sorted(cluster.nodes), rows
    for node_id, log_end, lag, fetched, caught_up, state in rows:
        assert state == ("Leader" if int(node_id) == leader else "Follower"), rows
        assert (int(log_end), int(lag)) == (end, 0), rows
        assert before_ms - 5000 < int(fetched) <= time.time() * 1000 and caught_up == fetched, rows


def test_bootstrap_server_values_are_checked_before_dialling() -> None:
    for bad, why in (("127.0.0.1", "not HOST:PORT"), ("127.0.0.1:0", "port from 1 to 65535"), (",", "no server")):
        result = pykraft("quorum", "describe", "--bootstrap-server", bad)
        assert result.returncode == 2, result
        message = one_line_error(result.stderr)
        assert "argument --bootstrap-server" in message and why in message, message


# -- pykraft node: refusing to start -------------------------------------------------------------------------------


def start_node(node_id: int, voters: str, data_dir: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """Start ``pykraft node`` and wait until it serves (its "node_started" log line)."""
    args = [*PYKRAFT, "node", "--node-id", str(node_id), "--controller-quorum-voters", voters, "--data-dir",
            str(data_dir), *extra]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while '"node_started"' not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"node {node_id} did not start (exit {proc.returncode}):\n{log.read_text()}")
        time.sleep(0.02)
    return proc


def stop_node(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        assert proc.wait(15) == 0
    finally:
        proc.kill()
        proc.wait()


def format_dir(tmp_path: Path, node_id: int, voters: str, data_dir: Path, *extra: str) -> str:
    """Let a real node format ``data_dir``; returns its meta.properties."""
    stop_node(start_node(node_id, voters, data_dir, tmp_path / f"format-{node_id}.log", *extra))
    return (data_dir / "meta.properties").read_text()


def test_data_dir_of_another_node_is_refused(tmp_path: Path) -> None:
    p1, p2 = free_ports(2)
    voters = f"1@127.0.0.1:{p1},2@127.0.0.1:{p2}"
    data_dir = tmp_path / "node1"
    meta = format_dir(tmp_path, 1, voters, data_dir)
    assert "node.id=1" in meta
    result = pykraft("node", "--node-id", "2", "--controller-quorum-voters", voters, "--data-dir", str(data_dir))
    assert result.returncode == 1, result
    message = one_line_error(result.stderr)
    assert "node.id=1" in message and "node 2" in message, message
    assert (data_dir / "meta.properties").read_text() == meta


def test_data_dir_of_another_cluster_is_refused(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    voters = f"1@127.0.0.1:{port}"
    data_dir = tmp_path / "node1"
    meta = format_dir(tmp_path, 1, voters, data_dir)
    formatted_for = default_cluster_id(parse_voters(voters))
    assert f"cluster.id={formatted_for}" in meta
    result = pykraft(
        "node", "--node-id", "1", "--controller-quorum-voters", voters, "--data-dir", str(data_dir),
        "--cluster-id", "other",
    )  # fmt: skip
    assert result.returncode == 1, result
    message = one_line_error(result.stderr)
    assert formatted_for in message and "cluster other" in message, message
    assert (data_dir / "meta.properties").read_text() == meta


def test_a_data_dir_that_cannot_be_made_is_a_one_line_error(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    data_dir = blocker / "node1"
    result = pykraft("node", "--node-id", "1", "--controller-quorum-voters", f"1@127.0.0.1:{port}",
                     "--data-dir", str(data_dir))  # fmt: skip
    assert result.returncode == 1, result
    message = one_line_error(result.stderr)
    assert message.startswith("pykraft node: storage error before start: ") and str(data_dir) in message, message


def test_a_frame_port_in_use_is_a_one_line_error_naming_the_setting(tmp_path: Path) -> None:
    port, taken = free_ports(2)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen(1)
        override = f"pykraft.quorum.frames.port={taken}"
        result = pykraft("node", "--node-id", "1", "--controller-quorum-voters", f"1@127.0.0.1:{port}",
                         "--data-dir", str(tmp_path / "node1"), "--override", override)  # fmt: skip
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    message = result.stderr.strip().splitlines()[-1]  # after the log's opening line: the listeners come later
    assert message.startswith(f"pykraft node: {override.split('=')[0]}: cannot listen on 127.0.0.1:{taken}: "), message


def test_missing_required_flags(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    voters = f"1@127.0.0.1:{port}"
    data_dir = tmp_path / "never-created"
    cases = [
        (["node", "--node-id", "1", "--data-dir", str(data_dir)], "controller.quorum.voters is required"),
        (["node", "--controller-quorum-voters", voters, "--data-dir", str(data_dir)], "node.id is required"),
        (["node", "--node-id", "1", "--controller-quorum-voters", voters], "a data directory is required"),
        (["quorum", "describe"], "the following arguments are required: --bootstrap-server"),
    ]
    for args, expected in cases:
        result = pykraft(*args)
        assert result.returncode == 2, (args, result)
        assert expected in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert not data_dir.exists()


async def test_second_process_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    with Cluster(root=tmp_path, size=1, raw_appends=True) as single:
        leader, _ = await single.wait_for_leader()
        node = single.nodes[leader]
        meta = (node.data_dir / "meta.properties").read_text()
        result = subprocess.run(node.args, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 1, result
        message = one_line_error(result.stderr)
        assert "in use" in message and str(node.data_dir) in message, message
        assert node.running
        assert (node.data_dir / "meta.properties").read_text() == meta
        resp = await single.append(leader, [record("still-serving")])
        assert resp.error_code == 0, resp
        assert node.terminate() == 0


async def test_a_native_crash_leaves_the_python_stacks_in_the_log(tmp_path: Path) -> None:
    """faulthandler is on in the node: a segfault (say, in gRPC's C core) prints every thread's Python stack."""
    with Cluster(root=tmp_path, size=1) as single:
        leader, _ = await single.wait_for_leader()
        node = single.nodes[leader]
        assert node.proc is not None
        node.proc.send_signal(signal.SIGSEGV)
        assert node.proc.wait(timeout=30) == -signal.SIGSEGV
        log = node.log_path.read_text()
        assert "Fatal Python error: Segmentation fault" in log and "File " in log, log[-2000:]
