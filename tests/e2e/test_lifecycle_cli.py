"""``pykraft topics --alter/--delete/--describe <report>``, ``pykraft leader-election`` and ``pykraft configs``
against a ``pykraft node`` process, with brokers the test drives (see lifecycle_helpers).

The commands run in-process through ``pykraft.cli.main`` (the console script's code) with their output captured;
two run as real processes, to check the exit code and that a usage error is one line. Output is compared with
what Kafka's kafka-topics.sh, kafka-leader-election.sh and kafka-configs.sh print.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e_helpers import run_pykraft
from lifecycle_helpers import LifecycleCluster, start_cluster, stop_cluster

from controller.requests import AlterPartitionData, AlterPartitionTopic
from pykraft.cli import main
from pykraft.client import NewTopic, PartitionInfo
from quorum.log.message import Uuid

RACKS = {101: "rack-1", 102: "rack-2", 103: "rack-3", 104: "rack-1"}
TOPIC_ERROR = "Error while executing topic command : "


@dataclass
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LifecycleCluster]:
    lc = start_cluster(tmp_path_factory.mktemp("lifecycle-cli"), RACKS)
    try:
        yield lc
    finally:
        stop_cluster(lc)


@pytest.fixture
def cli(lc: LifecycleCluster, capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    """Run ``pykraft <command> --bootstrap-server B <args>`` in-process."""

    def run(command: str, *args: str) -> Ran:
        capsys.readouterr()
        try:
            code = main([command, "--bootstrap-server", lc.bootstrap, *args])
        except SystemExit as e:  # argparse's own usage errors
            code = int(e.code or 0)
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run


def create(lc: LifecycleCluster, name: str, assignment: dict[int, list[int]], **configs: str) -> str:
    results = lc.admin.create_topics([NewTopic(name, replica_assignment=assignment, topic_configs=configs)])
    results[name].raise_for_error()
    return results[name].topic_id


def partitions(lc: LifecycleCluster, name: str) -> list[PartitionInfo]:
    [d] = lc.admin.describe_topics([name])
    assert d.error_code == 0, d
    return d.partitions


def shrink_isr(lc: LifecycleCluster, topic: str, index: int, isr: list[int]) -> None:
    """The partition's leader asks for a new ISR, as a broker whose followers fell behind (or caught up) would."""
    [d] = lc.admin.describe_topics([topic])
    p = d.partitions[index]
    data = AlterPartitionData(index, p.leader_epoch, tuple((b, lc.brokers.epoch(b)) for b in isr), p.partition_epoch)
    response = lc.admin.alter_partition(
        p.leader, lc.brokers.epoch(p.leader), [AlterPartitionTopic(Uuid(d.topic_id), (data,))]
    )
    assert [r.error.code for r in response.partitions] == [0], response


def partition_line(topic: str, index: int, leader: int | str, replicas: list[int], isr: list[int]) -> str:
    return (
        f"\tTopic: {topic}\tPartition: {index}\tLeader: {leader}\tReplicas: {','.join(map(str, replicas))}\t"
        f"Isr: {','.join(map(str, isr))}\tElr: \tLastKnownElr: "
    )


# -- topics --delete -----------------------------------------------------------------------------------------------


def test_delete_by_name_and_by_regex(lc: LifecycleCluster, cli) -> None:  # type: ignore[no-untyped-def]
    for name in ("del-one", "del-x1", "del-x2", "del-keep"):
        create(lc, name, {0: [101]})
    r = cli("topics", "--delete", "--topic", "del-one")
    assert (r.code, r.out, r.err) == (0, "", ""), r  # kafka-topics.sh prints nothing on success
    r = cli("topics", "--delete", "--topic", "del-x.*")
    assert (r.code, r.out, r.err) == (0, "", ""), r
    r = cli("topics", "--list", "--output", "json")
    names = json.loads(r.out)
    assert "del-keep" in names and not {"del-one", "del-x1", "del-x2"} & set(names), names

    r = cli("topics", "--delete", "--topic", "del-one")
    assert (r.code, r.err) == (1, f"{TOPIC_ERROR}Topic 'del-one' does not exist as expected\n"), r
    r = cli("topics", "--delete", "--topic", "del-nothing.*")
    assert (r.code, r.err) == (1, f"{TOPIC_ERROR}Topic 'del-nothing.*' does not exist as expected\n"), r
    for topic in ("del-one", "del-nothing.*"):
        r = cli("topics", "--delete", "--topic", topic, "--if-exists")
        assert (r.code, r.out, r.err) == (0, "", ""), r
    r = cli("topics", "--delete", "--topic", "del-[")
    assert (r.code, r.err) == (2, "pykraft topics: del-[ is an invalid regex.\n"), r


# -- topics --alter ------------------------------------------------------------------------------------------------


def test_alter_partitions(lc: LifecycleCluster, cli) -> None:  # type: ignore[no-untyped-def]
    create(lc, "grow", {0: [101, 102], 1: [102, 103]})
    r = cli("topics", "--alter", "--topic", "grow", "--partitions", "4")
    assert (r.code, r.out, r.err) == (0, "", ""), r
    assert len(partitions(lc, "grow")) == 4

    r = cli("topics", "--alter", "--topic", "grow", "--partitions", "6", "--validate-only")
    assert (r.code, r.out) == (0, "Topic grow can have 6 partitions; nothing was changed.\n"), r
    assert len(partitions(lc, "grow")) == 4

    # As kafka-topics.sh: the assignment lists every partition; the entries past the current count are used.
    r = cli("topics", "--alter", "--topic", "grow", "--partitions", "5",
            "--replica-assignment", "101:102,102:103,103:104,104:101,104:103")  # fmt: skip
    assert r.code == 0, r
    assert partitions(lc, "grow")[4].replicas == [104, 103]

    r = cli("topics", "--alter", "--topic", "grow", "--partitions", "3")
    assert r.code == 1 and r.err.startswith(TOPIC_ERROR) and "3" in r.err and "5" in r.err, r
    assert len(r.err.splitlines()) == 1, r
    r = cli("topics", "--alter", "--topic", "no-such-topic", "--partitions", "3")
    assert (r.code, r.err) == (1, f"{TOPIC_ERROR}Topic 'no-such-topic' does not exist as expected\n"), r
    r = cli("topics", "--alter", "--topic", "no-such-topic", "--partitions", "3", "--if-exists")
    assert (r.code, r.out, r.err) == (0, "", ""), r


def test_topics_usage_errors(lc: LifecycleCluster, cli) -> None:  # type: ignore[no-untyped-def]
    cases = {
        ("--alter", "--topic", "grow"): 'Missing required argument "[partitions]"',
        ("--delete",): 'Missing required argument "[topic]"',
        ("--alter", "--topic", "grow", "--partitions", "9", "--config", "a=b"): (
            'Option "[config]" can\'t be used with option "[alter]". To alter topic configs, use pykraft configs.'
        ),
        ("--describe", "--partitions", "3"): 'Option "[partitions]" can\'t be used with option "[describe]"',
        ("--delete", "--topic", "x", "--under-replicated-partitions"): (
            'Option "[under-replicated-partitions]" can\'t be used with option "[delete]"'
        ),
        ("--create", "--topic", "x", "--if-exists"): 'Option "[if-exists]" can\'t be used with option "[create]"',
        ("--alter", "--topic", "x", "--partitions", "3", "--replica-assignment", "1:1"): (
            "Partition replica lists may not contain duplicate entries: 1"
        ),
    }
    for args, message in cases.items():
        r = cli("topics", *args)
        assert (r.code, r.out, r.err) == (2, "", f"pykraft topics: {message}\n"), (args, r)


# -- topics --describe with a report option -------------------------------------------------------------------------


def test_describe_reports(lc: LifecycleCluster, cli) -> None:  # type: ignore[no-untyped-def]
    create(lc, "report", {0: [101, 102, 103], 1: [102, 103, 101], 2: [103, 101, 102]}, **{"min.insync.replicas": "2"})
    create(lc, "report-offline", {0: [104]})
    shrink_isr(lc, "report", 0, [101, 102])  # at min.insync.replicas (2)
    shrink_isr(lc, "report", 1, [102])  # under it
    lc.brokers.controlled_shutdown(104)  # report-offline's only replica: no leader
    try:
        scope = ("--topic", "report.*")
        expected = {
            "--under-replicated-partitions": [
                partition_line("report", 0, 101, [101, 102, 103], [101, 102]),
                partition_line("report", 1, 102, [102, 103, 101], [102]),
            ],
            "--unavailable-partitions": [
                partition_line("report-offline", 0, "none", [104], [104]) + "\tOffline: 104",
            ],
            "--under-min-isr-partitions": [
                partition_line("report", 1, 102, [102, 103, 101], [102]),
                partition_line("report-offline", 0, "none", [104], [104]) + "\tOffline: 104",
            ],
            "--at-min-isr-partitions": [
                partition_line("report", 0, 101, [101, 102, 103], [101, 102]),
                partition_line("report-offline", 0, "none", [104], [104]) + "\tOffline: 104",  # min 1, ISR 1
            ],
        }
        for option, lines in expected.items():
            r = cli("topics", "--describe", *scope, option)
            assert (r.code, r.out.splitlines(), r.err) == (0, lines, ""), (option, r)

        r = cli("topics", "--describe", *scope, "--under-replicated-partitions", "--unavailable-partitions")
        assert r.out.splitlines() == expected["--under-replicated-partitions"] + expected["--unavailable-partitions"]

        r = cli("topics", "--describe", *scope, "--under-min-isr-partitions", "--output", "json")
        described = json.loads(r.out)
        assert [(t["name"], [p["partition"] for p in t["partitions"]]) for t in described] == [
            ("report", [1]),
            ("report-offline", [0]),
        ], described
        offline = described[1]["partitions"][0]
        assert (offline["leader"], offline["isr"], offline["offlineReplicas"]) == (-1, [104], [104]), offline
        assert (offline["leaderRecoveryState"], offline["addingReplicas"]) == ("RECOVERED", []), offline

        r = cli("topics", "--describe", "--topic", "report")  # a plain describe still shows everything
        assert r.out.splitlines()[0].startswith("Topic: report\t") and len(r.out.splitlines()) == 4, r
    finally:
        lc.brokers.start(104)


# -- leader-election -----------------------------------------------------------------------------------------------


def test_leader_election(lc: LifecycleCluster, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    create(lc, "elect", {0: [102, 103], 1: [103, 102]})
    r = cli("leader-election", "--election-type", "preferred", "--topic", "elect", "--partition", "0")
    assert (r.code, r.out, r.err) == (0, "Valid replica already elected for partitions elect-0\n", ""), r

    lc.brokers.controlled_shutdown(102)  # elect-0 moves to 103
    lc.brokers.start(102)
    shrink_isr(lc, "elect", 0, [103, 102])  # 103, leading, takes 102 back into the ISR
    shrink_isr(lc, "elect", 1, [103, 102])
    spec = tmp_path / "elect.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "elect", "partition": p} for p in (1, 0, 7)]}))
    r = cli("leader-election", "--election-type", "PREFERRED", "--path-to-json-file", str(spec))
    lines = r.out.splitlines()
    assert lines[:2] == [
        "Successfully completed leader election (PREFERRED) for partitions elect-0",
        "Valid replica already elected for partitions elect-1",
    ], r
    assert lines[2].startswith(
        "Error completing leader election (PREFERRED) for partition: elect-7: UnknownTopicOrPartitionException: "
    ), r
    assert (len(lines), r.code, r.err) == (3, 1, "1 replica(s) could not be elected\n"), r
    assert partitions(lc, "elect")[0].leader == 102

    r = cli("leader-election", "--election-type", "unclean", "--topic", "elect", "--partition", "1", "--output", "json")
    assert r.code == 0 and json.loads(r.out) == {
        "electionType": "UNCLEAN", "succeeded": [], "noop": ["elect-1"], "failed": []
    }, r  # fmt: skip
    # Every partition: both of elect's have their preferred leader, so they are not even listed. (Other tests'
    # partitions may fail: a broker back from a shutdown is not in their ISRs, nothing here adds it back.)
    r = cli("leader-election", "--election-type", "preferred", "--all-topic-partitions")
    failures = r.out.count("Error completing leader election (PREFERRED) for partition: ")
    assert "elect-" not in r.out and r.code == (1 if failures else 0), r
    assert r.err == (f"{failures} replica(s) could not be elected\n" if failures else ""), r


def test_leader_election_usage_errors(lc: LifecycleCluster, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    only_one = "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file"
    duplicated = tmp_path / "dup.json"
    duplicated.write_text('{"partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 0}]}')
    no_field = tmp_path / "nofield.json"
    no_field.write_text('{"topics": []}')
    cases = {
        ("--all-topic-partitions",): "Missing required option(s): election-type",
        ("--election-type", "preferred"): only_one,
        ("--election-type", "preferred", "--all-topic-partitions", "--topic", "t", "--partition", "0"): only_one,
        ("--election-type", "preferred", "--topic", "t"): "Missing required option(s): partition",
        ("--election-type", "preferred", "--all-topic-partitions", "--partition", "0"): (
            "Option partition is only allowed if topic is used"
        ),
        ("--election-type", "preferred", "--path-to-json-file", str(duplicated)): (
            "Replica election data contains duplicate partitions: t-0"
        ),
        ("--election-type", "preferred", "--path-to-json-file", str(no_field)): (
            'Replica election data is missing "partitions" field'
        ),
    }
    for args, message in cases.items():
        r = cli("leader-election", *args)
        assert (r.code, r.out, r.err) == (2, "", f"pykraft leader-election: {message}\n"), (args, r)


def test_usage_errors_as_real_processes(lc: LifecycleCluster) -> None:
    r = run_pykraft("leader-election", "--bootstrap-server", lc.bootstrap, "--election-type", "sideways",
                    "--all-topic-partitions")  # fmt: skip
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.startswith("pykraft leader-election: error: argument --election-type: invalid choice: ") and (
        len(r.stderr.splitlines()) == 1
    ), r.stderr
    r = run_pykraft("configs", "--bootstrap-server", lc.bootstrap, "--entity-type", "brokers",
                    "--entity-name", "one", "--describe")  # fmt: skip
    assert (r.returncode, r.stdout) == (2, ""), r
    assert (
        r.stderr == "pykraft configs: The entity name for brokers must be a valid integer broker id, but it is: one\n"
    )


# -- configs -------------------------------------------------------------------------------------------------------


def test_configs_topic_alter_and_describe(lc: LifecycleCluster, cli) -> None:  # type: ignore[no-untyped-def]
    create(lc, "cfg", {0: [101]})
    entity = ("--entity-type", "topics", "--entity-name", "cfg")
    r = cli("configs", *entity, "--alter", "--add-config", "retention.ms=3600000,cleanup.policy=[compact,delete]")
    assert (r.code, r.out, r.err) == (0, "Completed updating config for topic cfg.\n", ""), r
    retention = (
        "  retention.ms=3600000 sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000, DEFAULT_CONFIG:log.retention.hours=168}"
    )
    cleanup = (
        "  cleanup.policy=compact,delete sensitive=false "
        "synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}"
    )
    r = cli("configs", *entity, "--describe")
    assert (r.code, r.out.splitlines()) == (0, ["Dynamic configs for topic cfg are:", cleanup, retention]), r

    r = cli("configs", *entity, "--describe", "--output", "json")
    [described] = json.loads(r.out)
    assert (described["entityName"], [c["name"] for c in described["configs"]]) == (
        "cfg",
        ["cleanup.policy", "retention.ms"],
    ), described
    assert described["configs"][1]["synonyms"][1] == {
        "name": "log.retention.hours", "value": "168", "source": "DEFAULT_CONFIG"
    }, described  # fmt: skip

    r = cli("configs", *entity, "--alter", "--delete-config", "retention.ms,no.such.config")
    assert (r.code, r.out, r.err) == (1, "", "Invalid config(s): no.such.config\n"), r
    r = cli("configs", *entity, "--alter", "--delete-config", "retention.ms")
    assert (r.code, r.out) == (0, "Completed updating config for topic cfg.\n"), r
    r = cli("configs", *entity, "--describe")
    assert r.out.splitlines() == ["Dynamic configs for topic cfg are:", cleanup], r

    args = (*entity, "--alter", "--add-config", "retention.ms=-5")
    r = cli("configs", *args)
    assert (r.code, r.out) == (1, ""), r
    assert r.err.splitlines() == [
        f"Error while executing config command with args '--bootstrap-server {lc.bootstrap} {' '.join(args)}'",
        "InvalidConfigurationException: Invalid value -5 for configuration retention.ms: Value must be at least -1",
    ], r

    r = cli("configs", *entity, "--describe", "--all")
    lines = r.out.splitlines()
    assert lines[0] == "All configs for topic cfg are:" and cleanup in lines, r
    assert "  min.insync.replicas=1 sensitive=false synonyms={DEFAULT_CONFIG:min.insync.replicas=1}" in lines, r
    r = cli("configs", "--entity-type", "topics", "--entity-name", "no-such-topic", "--describe")
    assert r.code == 1 and r.err.splitlines()[1].startswith("UnknownTopicOrPartitionException: "), r


def test_configs_brokers(lc: LifecycleCluster, cli) -> None:  # type: ignore[no-untyped-def]
    default = ("--entity-type", "brokers", "--entity-default")
    one = ("--entity-type", "brokers", "--entity-name", "101")
    r = cli("configs", *default, "--alter", "--add-config", "log.retention.ms=7200000")
    assert (r.code, r.out, r.err) == (0, "Completed updating default config for brokers in the cluster.\n", ""), r
    try:
        r = cli("configs", *one, "--alter", "--add-config", "log.retention.ms=1800000")
        assert (r.code, r.out, r.err) == (0, "Completed updating config for broker 101.\n", ""), r
        r = cli("configs", "--entity-type", "brokers", "--describe")
        assert r.code == 0, r
        assert r.out.splitlines() == [
            "Dynamic configs for broker 101 are:",
            "  log.retention.ms=1800000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=1800000, "
            "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000, DEFAULT_CONFIG:log.retention.hours=168}",
            "Dynamic configs for broker 102 are:",
            "Dynamic configs for broker 103 are:",
            "Dynamic configs for broker 104 are:",
            "Default configs for brokers in the cluster are:",
            "  log.retention.ms=7200000 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000}",
        ], r
    finally:
        r = cli("configs", *one, "--alter", "--delete-config", "log.retention.ms")
        assert r.code == 0, r
        r = cli("configs", *default, "--alter", "--delete-config", "log.retention.ms")
        assert r.code == 0, r
    r = cli("configs", *default, "--describe")
    assert (r.code, r.out) == (0, "Default configs for brokers in the cluster are:\n"), r


def test_configs_usage_errors(lc: LifecycleCluster, cli) -> None:  # type: ignore[no-untyped-def]
    topic = ("--entity-type", "topics", "--entity-name", "cfg")
    cases = {
        topic: "Command must include exactly one action: --describe, --alter",
        ("--entity-type", "groups", "--describe"): (
            "Invalid entity type groups, the entity type must be one of topics, brokers, users, clients with a "
            "--bootstrap-server argument"
        ),
        ("--entity-type", "topics", "--entity-default", "--describe"): (
            "--entity-default must not be specified with --describe of topics"
        ),
        ("--entity-type", "topics", "--alter", "--add-config", "a=b"): (
            "An entity name must be specified with --alter of topics"
        ),
        ("--entity-type", "brokers", "--alter", "--add-config", "a=b"): (
            "An entity-name or default entity must be specified with --alter of brokers"
        ),
        (*topic, "--alter"): "At least one of --add-config or --delete-config must be specified with --alter",
        (*topic, "--alter", "--add-config", "retention.ms"): (
            'Invalid entity config: all configs to be added must be in the format "key=val".'
        ),
        (*topic, "--alter", "--add-config", "retention ms=1"): "Invalid character found for config key: retention ms",
        (*topic, "--describe", "--delete-config", "a"): (
            'Option "[describe]" can\'t be used with option "[delete-config]"'
        ),
    }
    for args, message in cases.items():
        r = cli("configs", *args)
        assert (r.code, r.out, r.err) == (2, "", f"pykraft configs: {message}\n"), (args, r)
