"""``pykraft reassign-partitions`` without a cluster: the command line's rules, Kafka's JSON files and their checks,
the text it prints, the throttles it would set, and the progress it reads from brokers' DescribeReplicas (against
a fake broker served in-process)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator

import grpc
import pytest

from pykraft import reassign_cli as rc
from pykraft.api import broker_pb2, broker_pb2_grpc
from pykraft.cli import build_parser
from pykraft.cli_common import UsageError
from pykraft.client import PartitionReassignment


def usage_error(call, *args) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError) as e:
        call(*args)
    return str(e.value)


def check(*argv: str) -> str:
    args = build_parser().parse_args(["reassign-partitions", *argv])
    return rc.check_args(args)


def test_command_line_rules() -> None:
    b = ("--bootstrap-server", "h:1")
    assert check(*b, "--list") == "list"
    assert check("--bootstrap-controller", "h:1", "--cancel", "--reassignment-json-file", "f") == "cancel"
    assert check(*b, "--execute", "--reassignment-json-file", "f", "--throttle", "10", "--additional") == "execute"
    exactly_one = "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list"
    assert usage_error(check, *b) == exactly_one
    assert usage_error(check, *b, "--list", "--verify") == exactly_one
    assert usage_error(check, "--list") == "Please specify either --bootstrap-server or --bootstrap-controller"
    assert usage_error(check, *b, "--bootstrap-controller", "h:2", "--list") == (
        "Please don't specify both --bootstrap-server and --bootstrap-controller"
    )
    assert usage_error(check, *b, "--generate", "--broker-list", "1") == (
        'Missing required argument "[topics-to-move-json-file]"'
    )
    assert usage_error(check, *b, "--verify", "--reassignment-json-file", "f", "--throttle", "5") == (
        'Option "[throttle]" can\'t be used with action "[verify]"'
    )
    assert usage_error(check, "--bootstrap-controller", "h:1", "--verify", "--reassignment-json-file", "f") == (
        'Option "[bootstrap-controller]" can\'t be used with action "[verify]"'
    )
    assert usage_error(check, *b, "--list", "--wait") == 'Option "[wait]" can\'t be used with action "[list]"'


def test_reassignment_file() -> None:
    text = json.dumps(
        {"partitions": [{"topic": "a", "partition": 1, "replicas": [3, 1]},
                        {"topic": "b", "partition": 0, "replicas": [2], "log_dirs": ["any"]}]}
    )  # fmt: skip
    assert rc.parse_reassignment(text) == [rc.Move("a", 1, (3, 1)), rc.Move("b", 0, (2,))]  # no version: 1
    formatted = rc.reassignment_json({("b", 0): [2], ("a", 1): [3, 1]})
    assert formatted == (
        '{"version":1,"partitions":[{"topic":"a","partition":1,"replicas":[3,1],"log_dirs":["any","any"]},'
        '{"topic":"b","partition":0,"replicas":[2],"log_dirs":["any"]}]}'
    )  # Kafka's formatAsReassignmentJson, which reads back as it was written
    assert rc.parse_reassignment(formatted) == [rc.Move("a", 1, (3, 1)), rc.Move("b", 0, (2,))]
    assert rc.parse_reassignment('{"version": 1}') == []

    where = "--reassignment-json-file"
    for bad, message in {
        "[]": "expected a JSON object, got []",
        '{"version": "1"}': '"version" must be an integer, got "1"',
        '{"partitions": {}}': '"partitions" must be a list of objects',
        '{"partitions": [{"partition": 0, "replicas": [1]}]}': 'partitions[0]: "topic" must be a topic name, got null',
        '{"partitions": [{"topic": "a", "partition": true, "replicas": [1]}]}':
            'partitions[0]: "partition" must be a partition index (0 or more), got true',
        '{"partitions": [{"topic": "a", "partition": -1, "replicas": [1]}]}':
            'partitions[0]: "partition" must be a partition index (0 or more), got -1',
        '{"partitions": [{"topic": "a", "partition": 0, "replicas": ["1"]}]}':
            'partitions[0]: "replicas" must be a list of broker ids, got ["1"]',
        '{"partitions": [{"topic": "a", "partition": 0}]}': 'partitions[0]: "replicas" must be a list of broker ids, '
        "got null",
        '{"partitions": [{"topic": "a", "partition": 0, "replicas": [1], "log_dirs": "any"}]}':
            'partitions[0]: "log_dirs" must be a list of strings, got "any"',
    }.items():  # fmt: skip
        assert usage_error(rc.parse_reassignment, bad) == f"{where}: {message}", bad


def test_execute_checks() -> None:
    assert usage_error(rc.check_for_execute, []) == "Partition reassignment list cannot be empty"
    moves = [rc.Move("a", 0, (1, 2, 1, 2)), rc.Move("b", 3, (4, 4)), rc.Move("c", 0, (1,))]
    assert usage_error(rc.check_for_execute, moves) == (
        "Partition replica lists may not contain duplicate entries: a-0 contains multiple entries for 1,2. "
        "b-3 contains multiple entries for 4"
    )
    twice = [rc.Move("a", 0, (1,)), rc.Move("b", 0, (1,)), rc.Move("a", 0, (2,)), rc.Move("b", 0, (3,))]
    assert usage_error(rc.check_for_execute, twice) == (
        "Partition reassignment contains duplicate topic partitions: a-0,b-0"
    )
    rc.check_for_execute([rc.Move("a", 0, (1, 2)), rc.Move("a", 1, (2, 1))])


def test_generate_inputs() -> None:
    assert rc.parse_topics_to_move('{"topics": [{"topic": "a"}, {"topic": "b"}], "version": 1}') == ["a", "b"]
    where = "--topics-to-move-json-file"
    assert usage_error(rc.parse_topics_to_move, '{"topics": [{"topic": "a"}, {"topic": "a"}]}') == (
        "List of topics to reassign contains duplicate entries: [a]"
    )
    assert usage_error(rc.parse_topics_to_move, '{"topics": []}').startswith(f"{where}: no topics to move")
    assert usage_error(rc.parse_topics_to_move, '{"version": 3}') == f"{where}: Not supported version field value 3"
    assert rc.parse_broker_list("1, 2,3") == [1, 2, 3]
    assert usage_error(rc.parse_broker_list, "1,x") == "--broker-list: 'x' is not a broker id"
    assert usage_error(rc.parse_broker_list, "1,2,1,2") == "Broker list contains duplicate entries: [1, 2]"


def test_list_and_status_text() -> None:
    assert rc.list_text({}) == "No partition reassignments found."
    listed = {("b", 0): PartitionReassignment([3, 1], [], [1]), ("a", 10): PartitionReassignment([1, 2, 3], [3], [])}
    assert rc.list_text(listed) == (
        "Current partition reassignments:\na-10: replicas: 1,2,3. adding: 3.\nb-0: replicas: 3,1. removing: 1."
    )
    states = [
        rc.PartitionState(("t", 1), (1, 2), (2, 3), True),
        rc.PartitionState(("t", 0), (2, 3, 1), (2, 3), False, (rc.Progress(3, 250, 1000), rc.Progress(4, why="x"))),
        rc.PartitionState(("s", 0), (1,), (1,), True),
    ]
    assert rc.status_text(states) == (
        "Status of partition reassignment:\n"
        "Reassignment of partition s-0 is completed.\n"
        "Reassignment of partition t-0 is still in progress.\n"
        "  adding replica 3: 250 of 1000 bytes (25%)\n"
        "  adding replica 4: progress unknown (x)\n"
        "There is no active reassignment of partition t-1, but replica set is 1,2 rather than 2,3."
    )
    moving = rc.PartitionState(("t", 0), (1, 2), (2,), False, (rc.Progress(2, 300, 1000), rc.Progress(3, 700, 1000)))
    assert rc.wait_text([moving, rc.PartitionState(("t", 1), (1,), (1,), True)], width=10) == (
        "[#######---]  75%  1/2 partitions done, 1000 of 2000 bytes copied"
    )
    assert rc.wait_text([states[1]], width=4) == "[----]   0%  0/1 partitions done, bytes copied unknown"


def test_throttles_follow_kafkas_move_map() -> None:
    ongoing = {
        ("other", 0): PartitionReassignment([1, 2, 3], [3], []),
        ("t", 0): PartitionReassignment([4, 5, 1], [4, 5], [1]),
    }
    proposed = {("t", 0): (5, 6), ("t", 1): (2, 3)}
    current = {("t", 0): [4, 5, 1], ("t", 1): [1, 2]}
    per_topic, brokers = rc.throttles(ongoing, proposed, current)
    # t-0 is moving already: its source stays 1 (not 4 and 5, which are still being added).
    assert per_topic == {"other": ("0:1,0:2", "0:3"), "t": ("0:1,1:1,1:2", "0:5,0:6,1:3")}
    assert brokers == [1, 2, 3, 5, 6]


class FakeBroker(broker_pb2_grpc.ReplicaFetchServicer):
    def __init__(self, broker_id: int, sizes: dict[tuple[bytes, int], int]) -> None:
        self.broker_id, self.sizes = broker_id, sizes

    async def DescribeReplicas(self, request, context):  # type: ignore[no-untyped-def]
        Replica = broker_pb2.DescribeReplicasResponse.Replica
        wanted = {(p.topic_id, p.partition) for p in request.partitions}
        return broker_pb2.DescribeReplicasResponse(
            broker_id=self.broker_id,
            replicas=[
                Replica(topic_id=t, partition=p, size_bytes=n) for (t, p), n in self.sizes.items() if (t, p) in wanted
            ],
        )


@pytest.fixture
async def fake_brokers() -> AsyncIterator[dict[int, tuple[str, int]]]:
    topic = bytes(range(16))
    servers, endpoints = [], {}
    for broker_id, sizes in {1: {(topic, 0): 4096, (topic, 1): 100}, 2: {(topic, 0): 1024}}.items():
        server = grpc.aio.server()
        broker_pb2_grpc.add_ReplicaFetchServicer_to_server(FakeBroker(broker_id, sizes), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        servers.append(server)
        endpoints[broker_id] = ("127.0.0.1", port)
    try:
        yield endpoints
    finally:
        for server in servers:
            await server.stop(None)


async def test_progress_from_describe_replicas(fake_brokers: dict[int, tuple[str, int]]) -> None:
    topic = bytes(range(16))
    endpoints = {**fake_brokers, 4: None, 5: ("127.0.0.1", 1)}  # 4 has no PLAINTEXT listener, 5 is down
    moving = {("t", 0): (topic, 1, [2, 3, 4, 5]), ("t", 1): (topic, -1, [2]), ("t", 2): (topic, 1, [2])}
    progress = await rc.replica_progress(moving, endpoints)
    assert progress[("t", 0)][0] == rc.Progress(2, 1024, 4096)
    assert progress[("t", 0)][0].text() == "  adding replica 2: 1024 of 4096 bytes (25%)"
    assert progress[("t", 0)][1:] == (
        rc.Progress(3, why="broker 3: no PLAINTEXT listener"),
        rc.Progress(4, why="broker 4: no PLAINTEXT listener"),
        rc.Progress(5, why="broker 5: 127.0.0.1:1: UNAVAILABLE"),
    )
    assert progress[("t", 1)] == (rc.Progress(2, why="the partition has no leader"),)
    assert progress[("t", 2)] == (rc.Progress(2, why="leader 1 does not report the partition"),)


@pytest.mark.parametrize("tty", [True, False])
async def test_wait_output(tty: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    moving = rc.PartitionState(("t", 0), (1, 2), (2,), False, (rc.Progress(2, 500, 1000),))
    rounds = iter([[moving], [moving], [rc.PartitionState(("t", 0), (2,), (2,), True)]])

    async def find_states(*args: object) -> tuple[list[rc.PartitionState], bool]:
        return next(rounds), False

    monkeypatch.setattr(rc, "find_states", find_states)
    monkeypatch.setattr(rc, "WAIT_POLL_S", 0)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: tty)
    await rc.follow(None, [], {})  # type: ignore[arg-type]
    half = f"[{'#' * 15}{'-' * 15}]  50%  0/1 partitions done, 500 of 1000 bytes copied"
    done = f"[{'#' * 30}] 100%  1/1 partitions done"
    # A terminal redraws one line; otherwise a line at first and when a partition finishes (not every poll).
    assert capsys.readouterr().out == (f"\r{half}\r{half}\r{done}\n" if tty else f"{half}\n{done}\n")
