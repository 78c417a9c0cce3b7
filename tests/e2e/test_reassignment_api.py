"""Partition reassignment end to end: AlterPartitionReassignments and ListPartitionReassignments through the
AdminClient and raw gRPC, and ``pykraft reassign-partitions``, against one ``pykraft node`` process with brokers
the test drives (see lifecycle_helpers).

The brokers here move no data, so a move that only reorders or shrinks a partition to in-sync replicas completes
at once, and one that adds a replica stays in progress until the test, as the partition's leader, takes the new
replica into the ISR (an AlterPartition) — or cancels it. Each test makes its own topics, so the order of the tests
does not matter; every test leaves no reassignment running (--execute refuses while one is).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from e2e_helpers import run_pykraft
from lifecycle_helpers import LifecycleCluster, change_isr, start_cluster, stop_cluster

from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource, ConfigResource, ConfigResourceType
from pykraft import reassign_cli
from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.cli import main
from pykraft.client import AdminError, NewTopic, PartitionInfo, PartitionReassignment
from quorum.errors import Errors

RACKS = {101: "rack-1", 102: "rack-2", 103: "rack-3", 104: "rack-1"}
PROG = "pykraft reassign-partitions"


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LifecycleCluster]:
    lc = start_cluster(tmp_path_factory.mktemp("reassignment"), RACKS)
    try:
        yield lc
    finally:
        stop_cluster(lc)


def create(lc: LifecycleCluster, name: str, assignment: dict[int, list[int]]) -> None:
    lc.admin.create_topics([NewTopic(name, replica_assignment=assignment)])[name].raise_for_error()


def partitions(lc: LifecycleCluster, name: str) -> dict[int, PartitionInfo]:
    [d] = lc.admin.describe_topics([name])
    assert d.error_code == 0, d
    return {p.partition: p for p in d.partitions}


def codes(results: dict[tuple[str, int], object]) -> dict[tuple[str, int], int]:
    return {tp: int(e.code) for tp, e in results.items()}  # type: ignore[attr-defined]


def raw(lc: LifecycleCluster, method: str, request: object) -> object:
    with grpc.insecure_channel(lc.bootstrap) as channel:
        return getattr(pb_grpc.ControllerStub(channel), method)(request, timeout=10)


# -- the API ---------------------------------------------------------------------------------------------------------


def test_alter_list_and_cancel(lc: LifecycleCluster) -> None:
    create(lc, "ra-move", {0: [101, 102], 1: [102, 103]})
    results = lc.admin.alter_partition_reassignments({("ra-move", 0): [101, 102, 104], ("ra-move", 1): [103, 102]})
    assert codes(results) == {("ra-move", 0): 0, ("ra-move", 1): 0}, results
    moving = PartitionReassignment([101, 102, 104], [104], [])
    # Partition 1 only changed order: done at once. Partition 0 waits for 104 to join the ISR.
    assert lc.admin.list_partition_reassignments() == {("ra-move", 0): moving}
    listed = lc.admin.list_partition_reassignments([("ra-move", 0), ("ra-move", 1), ("ra-move", 9), ("nope", 0)])
    assert listed == {("ra-move", 0): moving}  # not moving, unknown: left out, as Kafka
    assert lc.admin.list_partition_reassignments([]) == {}
    p = partitions(lc, "ra-move")
    assert (p[0].replicas, p[0].adding_replicas, p[1].replicas) == ([101, 102, 104], [104], [103, 102]), p

    results = lc.admin.alter_partition_reassignments({("ra-move", 0): None})
    assert codes(results) == {("ra-move", 0): 0}, results
    assert partitions(lc, "ra-move")[0].replicas == [101, 102]
    again = lc.admin.alter_partition_reassignments({("ra-move", 0): None, ("ra-move", 1): None})
    assert codes(again) == {("ra-move", 0): 85, ("ra-move", 1): 85}, again
    assert again[("ra-move", 0)].code == Errors.NO_REASSIGNMENT_IN_PROGRESS


def test_a_move_completes_when_the_new_replica_joins_the_isr(lc: LifecycleCluster) -> None:
    create(lc, "ra-done", {0: [101, 102]})
    assert codes(lc.admin.alter_partition_reassignments({("ra-done", 0): [102, 104]})) == {("ra-done", 0): 0}
    p = partitions(lc, "ra-done")[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([102, 104, 101], [104], [101]), p
    response = change_isr(lc, "ra-done", 0, [101, 102, 104])  # the leader (101) takes 104 in: the move completes
    assert [r.error.code for r in response.partitions] in ([Errors.NONE], [Errors.NEW_LEADER_ELECTED]), response
    p = partitions(lc, "ra-done")[0]
    assert (p.replicas, sorted(p.isr), p.adding_replicas, p.removing_replicas) == ([102, 104], [102, 104], [], [])
    assert p.leader == 102, p
    assert lc.admin.list_partition_reassignments([("ra-done", 0)]) == {}


def test_partition_errors(lc: LifecycleCluster) -> None:
    create(lc, "ra-err", {0: [101, 102]})
    results = lc.admin.alter_partition_reassignments(
        {
            ("ra-err-none", 0): [101],
            ("ra-err", 7): [101],
            ("ra-err", 0): [101, 101],
            ("", 0): [101],
            ("ra-err", -1): [101],
        }
    )
    assert codes(results) == {
        ("ra-err-none", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("ra-err", 7): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("ra-err", 0): Errors.INVALID_REPLICA_ASSIGNMENT,
        ("", 0): Errors.INVALID_TOPIC_EXCEPTION,  # Kafka's client refuses these itself; they are not sent
        ("ra-err", -1): Errors.INVALID_TOPIC_EXCEPTION,
    }, results
    assert "ra-err-none" in (results[("ra-err-none", 0)].message or ""), results
    assert results[("ra-err", -1)].message == "The given partition index -1 is not valid.", results
    for target in ([], [101, 999]):
        [e] = lc.admin.alter_partition_reassignments({("ra-err", 0): target}).values()
        assert e.code == Errors.INVALID_REPLICA_ASSIGNMENT, (target, e)
    assert partitions(lc, "ra-err")[0].replicas == [101, 102]
    with pytest.raises(AdminError) as list_error:
        lc.admin.list_partition_reassignments([("ra-err", -2)])
    assert list_error.value.code == Errors.INVALID_TOPIC_EXCEPTION


def test_request_errors_name_the_field(lc: LifecycleCluster) -> None:
    create(lc, "ra-req", {0: [101, 102]})
    Alter = pb.AlterPartitionReassignmentsRequest
    target = Alter.ReplicaList(broker_ids=[102, 101])
    cases = {
        "topics[1].partitions[0]: partition ra-req-0 is already named by topics[0].partitions[0]": Alter(
            topics=[
                Alter.ReassignableTopic(name="ra-req", partitions=[Alter.ReassignablePartition(replicas=target)]),
                Alter.ReassignableTopic(name="ra-req", partitions=[Alter.ReassignablePartition(replicas=target)]),
            ]
        ),
        "topics[0].partitions[0].partition_index: partition index -3 is negative": Alter(
            topics=[
                Alter.ReassignableTopic(name="ra-req", partitions=[Alter.ReassignablePartition(partition_index=-3)])
            ]
        ),
        "topics[0].name: the topic name is empty": Alter(topics=[Alter.ReassignableTopic(name="")]),
        "timeout_ms: -1 is negative": Alter(timeout_ms=-1),
    }
    for message, request in cases.items():
        response = raw(lc, "AlterPartitionReassignments", request)
        assert (response.error_code, response.error_message) == (Errors.INVALID_REQUEST, message), response  # type: ignore[attr-defined]
    assert partitions(lc, "ra-req")[0].replicas == [101, 102]  # nothing of a refused request is done

    List = pb.ListPartitionReassignmentsRequest
    bad = List(
        topics=List.TopicList(topics=[List.ListPartitionReassignmentsTopics(name="x", partition_indexes=[0, -1])])
    )
    response = raw(lc, "ListPartitionReassignments", bad)
    assert response.error_code == Errors.INVALID_REQUEST, response  # type: ignore[attr-defined]
    assert response.error_message == "topics[0].partition_indexes[1]: partition index -1 is negative"  # type: ignore[attr-defined]
    everything = raw(lc, "ListPartitionReassignments", List())
    assert everything.error_code == 0, everything  # type: ignore[attr-defined]


# -- pykraft reassign-partitions -------------------------------------------------------------------------------------


@dataclass
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(lc: LifecycleCluster, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run ``pykraft reassign-partitions --bootstrap-server B <args>`` in-process."""

    def run(*args: str) -> Ran:
        capsys.readouterr()
        try:
            code = main(["reassign-partitions", "--bootstrap-server", lc.bootstrap, *args])
        except SystemExit as e:  # argparse's own usage errors
            code = int(e.code or 0)
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run


def plan(tmp_path: Path, moves: dict[tuple[str, int], list[int]], name: str = "plan.json") -> str:
    path = tmp_path / name
    entries = [{"topic": t, "partition": p, "replicas": r} for (t, p), r in moves.items()]
    path.write_text(json.dumps({"version": 1, "partitions": entries}))
    return str(path)


def topic_configs(lc: LifecycleCluster, topic: str) -> dict[str, str]:
    [d] = lc.admin.describe_topics([topic])
    return d.configs


def broker_throttles(lc: LifecycleCluster, broker: int) -> dict[str, str | None]:
    [r] = lc.admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, str(broker))])
    return {c.name: c.value for c in r.configs if c.name.endswith("throttled.rate") and c.source == 2}


def test_cli_generate(lc: LifecycleCluster, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    create(lc, "rc-gen", {0: [101, 102], 1: [102, 103], 2: [103, 101]})
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "rc-gen"}], "version": 1}))
    r = cli("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "101,102,104")
    assert (r.code, r.err) == (0, ""), r
    current = reassign_cli.reassignment_json({("rc-gen", 0): [101, 102], ("rc-gen", 1): [102, 103],
                                              ("rc-gen", 2): [103, 101]})  # fmt: skip
    head, proposed = r.out.split("\n\nProposed partition reassignment configuration\n")
    assert head == f"Current partition replica assignment\n{current}", r.out
    assignment = json.loads(proposed)
    assert assignment["version"] == 1 and len(assignment["partitions"]) == 3, proposed
    for p in assignment["partitions"]:
        assert set(p["replicas"]) <= {101, 102, 104} and len(set(p["replicas"])) == 2, p
        assert set(p["replicas"]) != {101, 104}, p  # both on rack-1: rack-aware placement keeps them apart
        assert p["log_dirs"] == ["any", "any"], p
    r = cli("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "101,104", "--disable-rack-aware")
    assert r.code == 0 and all(sorted(p["replicas"]) == [101, 104] for p in json.loads(r.out.splitlines()[-1])[
        "partitions"]), r  # fmt: skip

    for broker_list, message in {
        "101,999": "Unknown broker id 999",
        "101,101": "Broker list contains duplicate entries: [101]",
        "101": "--broker-list: topic rc-gen (replication factor 2): The target replication factor of 2 cannot be "
        "reached because only 1 broker(s) are registered.",
    }.items():
        r = cli("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", broker_list)
        assert (r.code, r.out, r.err) == (2, "", f"{PROG}: {message}\n"), r
    topics.write_text(json.dumps({"topics": [{"topic": "rc-gen-none"}]}))
    r = cli("--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "101,102")
    assert (r.code, r.err) == (2, f"{PROG}: Topic rc-gen-none not found.\n"), r


def test_cli_execute_verify_with_throttles(lc: LifecycleCluster, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    create(lc, "rc-move", {0: [101, 102], 1: [102, 103]})
    leader, follower = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
    alter = [
        AlterConfigsResource(
            ConfigResourceType.TOPIC, "rc-move", (AlterableConfig(leader, AlterConfigOp.SET, "1:101"),)
        )
    ]
    assert not lc.admin.incremental_alter_configs(alter)[0].error.failed
    path = plan(tmp_path, {("rc-move", 0): [101, 102, 104], ("rc-move", 1): [103, 102]})

    r = cli("--execute", "--reassignment-json-file", path, "--throttle", "1000000")
    rollback = reassign_cli.reassignment_json({("rc-move", 0): [101, 102], ("rc-move", 1): [102, 103]})
    assert (r.code, r.err) == (0, ""), r
    assert r.out == (
        f"Current partition replica assignment\n\n{rollback}\n\n"
        "Save this to use as the --reassignment-json-file option during rollback\n"
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the throttle is "
        "removed.\n"
        "The inter-broker throttle limit was set to 1000000 B/s\n"
        "Successfully started partition reassignments for rc-move-0,rc-move-1\n"
    ), r.out
    configs = topic_configs(lc, "rc-move")  # appended to what was there
    assert (configs[leader], configs[follower]) == ("1:101,0:101,0:102,1:102,1:103", "0:104"), configs
    for broker in (101, 102, 103, 104):
        assert broker_throttles(lc, broker) == dict.fromkeys(reassign_cli.RATES, "1000000"), broker

    r = cli("--list")
    assert (r.code, r.out) == (0, "Current partition reassignments:\nrc-move-0: replicas: 101,102,104. adding: 104.\n")
    r = cli("--execute", "--reassignment-json-file", path)
    assert (r.code, r.out, r.err) == (1, "", reassign_cli.CANNOT_EXECUTE + "\n"), r

    r = cli("--verify", "--reassignment-json-file", path)
    assert r.code == 0, r
    lines = r.out.splitlines()
    assert lines[:2] == [
        "Status of partition reassignment:",
        "Reassignment of partition rc-move-0 is still in progress.",
    ]
    # The test's brokers serve no DescribeReplicas: the progress is unknown, and says why.
    assert lines[2].startswith("  adding replica 104: progress unknown (leader 101: 127.0.0.1:19101: UNAVAILABLE"), r
    assert lines[3:] == ["Reassignment of partition rc-move-1 is completed.", ""], r.out  # throttles kept
    assert topic_configs(lc, "rc-move")[follower] == "0:104"

    assert [p.error.code for p in change_isr(lc, "rc-move", 0, [101, 102, 104]).partitions] == [0]
    r = cli("--verify", "--reassignment-json-file", path)
    assert (r.code, r.err) == (0, ""), r
    assert r.out == (
        "Status of partition reassignment:\n"
        "Reassignment of partition rc-move-0 is completed.\n"
        "Reassignment of partition rc-move-1 is completed.\n\n"
        "Clearing broker-level throttles on brokers 101,102,103,104\n"
        "Clearing topic-level throttles on topic rc-move\n"
    ), r.out
    assert leader not in topic_configs(lc, "rc-move") and follower not in topic_configs(lc, "rc-move")
    assert all(broker_throttles(lc, b) == {} for b in (101, 102, 103, 104))
    r = cli(
        "--verify", "--reassignment-json-file", plan(tmp_path, {("rc-move", 0): [101, 103]}), "--preserve-throttles"
    )
    assert r.out == (
        "Status of partition reassignment:\n"
        "There is no active reassignment of partition rc-move-0, but replica set is 101,102,104 rather than "
        "101,103.\n\n"
    ), r.out


def test_cli_cancel(lc: LifecycleCluster, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    create(lc, "rc-cancel", {0: [101, 102], 1: [101, 102]})
    path = plan(tmp_path, {("rc-cancel", 0): [103, 104], ("rc-cancel", 1): [104, 103]})
    assert cli("--execute", "--reassignment-json-file", path).code == 0
    assert partitions(lc, "rc-cancel")[0].replicas == [103, 104, 101, 102]
    r = cli("--cancel", "--reassignment-json-file", path, "--preserve-throttles")
    assert (r.code, r.err) == (0, ""), r
    assert r.out == "Successfully cancelled partition reassignments for: rc-cancel-0,rc-cancel-1\n", r.out
    assert [p.replicas for p in partitions(lc, "rc-cancel").values()] == [[101, 102], [101, 102]]
    r = cli("--cancel", "--reassignment-json-file", path)
    assert r.out == (
        "None of the specified partition reassignments are active.\n"
        "Clearing broker-level throttles on brokers 101,102,103,104\n"
        "Clearing topic-level throttles on topic rc-cancel\n"
    ), r
    assert cli("--list").out == "No partition reassignments found.\n"


def test_cli_verify_wait_follows_to_the_end(lc: LifecycleCluster, cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    create(lc, "rc-wait", {0: [101, 102]})
    path = plan(tmp_path, {("rc-wait", 0): [101, 102, 103]})
    assert cli("--execute", "--reassignment-json-file", path).code == 0
    p = partitions(lc, "rc-wait")[0]
    [d] = lc.admin.describe_topics(["rc-wait"])
    request = pb.AlterPartitionRequest(broker_id=101, broker_epoch=lc.brokers.epoch(101), timeout_ms=5000)
    request.topics.add(topic_id=d.topic_id).partitions.add(
        partition_index=0, leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
        new_isr_with_epochs=[pb.AlterPartitionRequest.BrokerState(broker_id=b, broker_epoch=lc.brokers.epoch(b))
                             for b in (101, 102, 103)],
    )  # fmt: skip
    # 103 catches up a moment after --verify --wait starts (blocking gRPC from a thread: the CLI has the loop).
    timer = threading.Timer(0.8, lambda: raw(lc, "AlterPartition", request))
    monkeypatch.setattr(reassign_cli, "WAIT_POLL_S", 0.1)
    timer.start()
    try:
        r = cli("--verify", "--reassignment-json-file", path, "--wait")
    finally:
        timer.join()
    assert (r.code, r.err) == (0, ""), r
    lines = r.out.splitlines()
    assert lines[0] == f"[{'-' * 30}]   0%  0/1 partitions done, bytes copied unknown", r.out
    assert lines[1] == f"[{'#' * 30}] 100%  1/1 partitions done", r.out
    assert lines[2:5] == ["Status of partition reassignment:", "Reassignment of partition rc-wait-0 is completed.", ""]
    assert lines[5].startswith("Clearing broker-level throttles"), r.out


def test_cli_bad_input_changes_nothing(lc: LifecycleCluster, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    create(lc, "rc-bad", {0: [101, 102], 1: [102, 103]})
    path = tmp_path / "bad.json"
    where = "--reassignment-json-file: "

    def entries(*items: dict[str, object]) -> str:
        return json.dumps({"partitions": [{"topic": "rc-bad", "partition": 0, **item} for item in items]})

    cases = {
        "{not json": f"{where}not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2",
        '{"version": 2, "partitions": []}': f"{where}Not supported version field value 2",
        entries({"topic": "rc-bad-none", "replicas": [101]}): "Topic rc-bad-none not found.",
        entries({"partition": 5, "replicas": [101]}): "Unable to find partition: rc-bad-5",
        entries({"replicas": [101]}, {"replicas": [102]}):
            "Partition reassignment contains duplicate topic partitions: rc-bad-0",
        entries({"replicas": [101, 102, 101]}):
            "Partition replica lists may not contain duplicate entries: rc-bad-0 contains multiple entries for 101",
        entries({"replicas": [101, 998, 999]}): "Unknown broker ids 998,999",
        entries({"replicas": []}): "Partition replica list cannot be empty: rc-bad-0",
        entries({"replicas": [101, 103], "log_dirs": ["any"]}):
            f"{where}Size of replicas list [101, 103] is different from size of log dirs list [any] for partition "
            "rc-bad-0",
        entries({"replicas": [101], "log_dirs": ["/data"]}):
            f'{where}partitions[0]: log dir "/data" for partition rc-bad-0: pykraft brokers have no log directories, '
            'so "log_dirs" can only say "any"',
        entries({"partition": "0", "replicas": [101]}):
            f'{where}partitions[0]: "partition" must be a partition index (0 or more), got "0"',
    }  # fmt: skip
    for text, message in cases.items():
        path.write_text(text)
        r = cli("--execute", "--reassignment-json-file", str(path), "--throttle", "1000")
        assert (r.code, r.out, r.err) == (2, "", f"{PROG}: {message}\n"), (text, r)
    r = cli("--execute", "--reassignment-json-file", str(tmp_path / "missing.json"))
    assert r.code == 2 and r.err.startswith(f"{PROG}: --reassignment-json-file {tmp_path}/missing.json: cannot read"), r
    assert [p.replicas for p in partitions(lc, "rc-bad").values()] == [[101, 102], [102, 103]]
    assert "leader.replication.throttled.replicas" not in topic_configs(lc, "rc-bad")
    assert cli("--list").out == "No partition reassignments found.\n"


def test_cli_as_a_real_process(lc: LifecycleCluster) -> None:
    r = run_pykraft("reassign-partitions", "--bootstrap-server", lc.bootstrap, "--list")
    assert (r.returncode, r.stdout, r.stderr) == (0, "No partition reassignments found.\n", ""), r
    r = run_pykraft("reassign-partitions", "--bootstrap-server", lc.bootstrap, "--list", "--wait")
    assert (r.returncode, r.stdout) == (2, ""), r
    assert r.stderr == f'{PROG}: Option "[wait]" can\'t be used with action "[list]"\n', r
