"""The command line end to end: ``pykraft cluster up|bootstrap|describe|down`` and ``pykraft topics`` (shaped like
``kafka-topics.sh``), each run as a separate process the way a user runs them.

One ``cluster up`` serves the module; ``cluster down`` runs in the fixture's finally whatever happens. While
``cluster up`` picks its controller ports, the test holds 9091-9093 (the CLI's defaults, when free) so the CLI
falls back to ports chosen free at run time: these tests never take fixed ports other work may want.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import run_pykraft

from pykraft.cluster import DEFAULT_PORTS, LOGS_DIR, STATE_FILE, STOPPED_FILE
from pykraft.testing import default_ports_held, free_ports

ERROR = "Error while executing topic command : "


def cluster_up(data_dir: Path, *options: str) -> str:
    with default_ports_held():
        r = run_pykraft("cluster", "up", "--data-dir", str(data_dir), *options, timeout=180)
    assert r.returncode == 0, f"cluster up failed: {r.stdout}\n{r.stderr}\n{logs(data_dir)}"
    return r.stdout


def cluster_down(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return run_pykraft("cluster", "down", "--data-dir", str(data_dir), timeout=120)


def logs(data_dir: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((data_dir / LOGS_DIR).glob("*.*")))


def pid_running(pid: int, data_dir: Path) -> bool:
    """Is ``pid`` a live (not zombie) process of this cluster? (PIDs are checked against the command line, so a
    reused PID does not count.)"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[0]
    return state != "Z" and "pykraft" in cmdline and str(data_dir) in cmdline


def ports_of(data_dir: Path) -> list[tuple[int, int]]:
    state = json.loads((data_dir / STATE_FILE).read_text())
    return [(p["port"], p["metrics_port"]) for p in state["controllers"] + state["brokers"]]


def state_pids(data_dir: Path) -> list[int]:
    state = json.loads((data_dir / STATE_FILE).read_text())
    return [p["pid"] for p in state["controllers"] + state["brokers"]]


@pytest.fixture(scope="module")
def cluster_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data_dir = tmp_path_factory.mktemp("cli") / "data"
    try:
        out = cluster_up(data_dir)
        assert "Cluster is up: 3 controllers" in out and "6 brokers over 3 racks" in out, out
        # The defaults were held: the move is announced, with the ports taken instead.
        assert re.search(
            r"^note: the default ports 9091,9092,9093 are in use; the controllers listen on \d+", out, re.M
        ), out
        yield data_dir
    finally:
        down = cluster_down(data_dir)
        assert down.returncode == 0, down.stderr


@pytest.fixture(scope="module")
def bootstrap(cluster_dir: Path) -> str:
    r = run_pykraft("cluster", "bootstrap", "--data-dir", str(cluster_dir))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_pykraft("topics", "--bootstrap-server", bootstrap, *args)


def describe_json(bootstrap: str, topic: str) -> dict:
    r = topics(bootstrap, "--describe", "--topic", topic, "--output", "json")
    assert r.returncode == 0, r.stderr
    [described] = json.loads(r.stdout)
    return described


# -- cluster -------------------------------------------------------------------------------------------------------


def test_cluster_bootstrap_and_describe(cluster_dir: Path, bootstrap: str) -> None:
    state = json.loads((cluster_dir / STATE_FILE).read_text())
    assert bootstrap == state["bootstrap"]
    servers = bootstrap.split(",")
    assert len(servers) == 3 and all(re.fullmatch(r"127\.0\.0\.1:\d+", s) for s in servers), bootstrap
    assert not {int(s.rsplit(":", 1)[1]) for s in servers} & set(DEFAULT_PORTS), "fixed default ports taken"

    r = run_pykraft("cluster", "describe", "--data-dir", str(cluster_dir), "--output", "json")
    assert r.returncode == 0, r.stderr
    desc = json.loads(r.stdout)
    assert desc["clusterId"] and desc["controllerId"] in (1, 2, 3), desc
    brokers = desc["brokers"]
    assert sorted(b["id"] for b in brokers) == list(range(101, 107)), brokers
    assert Counter(b["rack"] for b in brokers) == {"rack-1": 2, "rack-2": 2, "rack-3": 2}, brokers
    assert not any(b["fenced"] or b["inControlledShutdown"] for b in brokers), brokers
    assert all(len(b["listeners"]) == 1 and b["listeners"][0].startswith("PLAINTEXT://") for b in brokers)
    controllers = desc["controllers"]  # the local processes, from cluster.json (a fatal exit is shown with its cause)
    assert [(c["id"], c["state"]) for c in controllers] == [(1, "running"), (2, "running"), (3, "running")]
    assert [c["endpoint"] for c in controllers] == servers and [c["pid"] for c in controllers] == [
        p["pid"] for p in state["controllers"]
    ]
    assert [c["metricsPort"] for c in controllers] == [p["metrics_port"] for p in state["controllers"]], controllers
    # Each process logs to logs/<name>.log (its other output in .out): nothing beside the data looks like a segment.
    names = [f"controller-{i}" for i in (1, 2, 3)] + [f"broker-{b}" for b in range(101, 107)]
    outs = sorted(p.name for p in (cluster_dir / LOGS_DIR).iterdir())
    assert outs == sorted([f"{n}.log" for n in names] + [f"{n}.out" for n in names]), outs
    started = [json.loads(line) for line in (cluster_dir / LOGS_DIR / "controller-1.log").read_text().splitlines()]
    assert any(e["event"] == "node_started" for e in started), started[:5]
    assert not list(cluster_dir.glob("*.log")), list(cluster_dir.glob("*.log"))

    r = run_pykraft("cluster", "describe", "--bootstrap-server", bootstrap)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"ClusterId:    {desc['clusterId']}", lines
    assert re.fullmatch(r"ControllerId: [123]", lines[1]), lines
    assert lines[2].split() == ["BrokerId", "Rack", "State", "Epoch", "Listener"], lines
    rows = [line.split() for line in lines[3:]]
    assert [int(row[0]) for row in rows] == list(range(101, 107)), rows
    assert [row[1] for row in rows] == ["rack-1", "rack-2", "rack-3"] * 2, rows
    assert all(row[2] == "unfenced" for row in rows), rows


# -- topics --------------------------------------------------------------------------------------------------------


def test_create_then_again_then_if_not_exists(bootstrap: str) -> None:
    create = ("--create", "--topic", "orders", "--partitions", "6", "--replication-factor", "3")
    r = topics(bootstrap, *create)
    assert (r.returncode, r.stdout, r.stderr) == (0, "Created topic orders.\n", ""), r

    r = topics(bootstrap, *create)
    assert r.returncode == 1, r
    assert r.stderr == f"{ERROR}Topic 'orders' already exists.\n", r.stderr
    assert r.stdout == ""

    r = topics(bootstrap, *create, "--if-not-exists")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), r


def test_describe_text_and_json(cluster_dir: Path, bootstrap: str) -> None:
    r = run_pykraft("cluster", "describe", "--data-dir", str(cluster_dir), "--output", "json")
    assert r.returncode == 0, r.stderr
    rack_of = {b["id"]: b["rack"] for b in json.loads(r.stdout)["brokers"]}
    r = topics(bootstrap, "--create", "--topic", "described", "--partitions", "4", "--replication-factor", "3",
               "--config", "retention.ms=86400000")  # fmt: skip
    assert r.returncode == 0, r.stderr
    described = describe_json(bootstrap, "described")
    assert described["name"] == "described" and described["partitionCount"] == 4, described
    assert described["replicationFactor"] == 3 and described["configs"]["retention.ms"] == "86400000", described
    topic_id = described["topicId"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", topic_id), topic_id

    r = topics(bootstrap, "--describe", "--topic", "described")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 5, lines
    head = lines[0].split("\t")
    assert head[:4] == ["Topic: described", f"TopicId: {topic_id}", "PartitionCount: 4", "ReplicationFactor: 3"]
    assert head[4].startswith("Configs: ") and "retention.ms=86400000" in head[4], head
    for i, (line, p) in enumerate(zip(lines[1:], described["partitions"], strict=True)):
        fields = line.split("\t")
        assert fields[0] == "", line  # partition lines start with a tab, as kafka-topics.sh prints them
        assert fields[1:6] == [
            "Topic: described",
            f"Partition: {i}",
            f"Leader: {p['leader']}",
            f"Replicas: {','.join(map(str, p['replicas']))}",
            f"Isr: {','.join(map(str, p['isr']))}",
        ], line
        assert len(p["replicas"]) == 3 and len({rack_of[b] for b in p["replicas"]}) == 3, (p, rack_of)

    r = topics(bootstrap, "--describe", "--topic", "no-such-topic")
    assert r.returncode == 1, r
    assert r.stderr == f"{ERROR}Topic 'no-such-topic' does not exist as expected\n", r.stderr


def test_validate_only_creates_nothing(bootstrap: str) -> None:
    r = topics(bootstrap, "--create", "--topic", "dry-run", "--partitions", "3", "--replication-factor", "3",
               "--validate-only")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "dry-run" in r.stdout and "Created topic" not in r.stdout, r.stdout
    r = topics(bootstrap, "--describe", "--topic", "dry-run")
    assert r.returncode == 1 and "does not exist" in r.stderr, r
    r = topics(bootstrap, "--list")
    assert r.returncode == 0 and "dry-run" not in r.stdout.split(), r
    # Validation still applies: an invalid request fails the same way with --validate-only.
    r = topics(bootstrap, "--create", "--topic", "dry-run", "--partitions", "3", "--replication-factor", "9",
               "--validate-only")  # fmt: skip
    assert r.returncode == 1 and r.stderr.startswith(ERROR) and "replicat" in r.stderr, r


def test_replica_assignment(bootstrap: str) -> None:
    r = topics(bootstrap, "--create", "--topic", "manual", "--replica-assignment", "101:102,103:104")
    assert (r.returncode, r.stdout) == (0, "Created topic manual.\n"), r
    described = describe_json(bootstrap, "manual")
    assert [p["replicas"] for p in described["partitions"]] == [[101, 102], [103, 104]], described
    assert [p["leader"] for p in described["partitions"]] == [101, 103], described

    r = topics(bootstrap, "--create", "--topic", "manual-bad", "--replica-assignment", "101:999")
    assert r.returncode == 1, r
    assert r.stderr == (
        f"{ERROR}The manual partition assignment includes broker 999, but no such broker is registered.\n"
    ), r.stderr
    r = topics(bootstrap, "--create", "--topic", "manual-bad", "--replica-assignment", "101:102,103")
    assert r.returncode == 1, r
    assert r.stderr == (
        f"{ERROR}The manual partition assignment includes a partition with 1 replica(s), but this is not "
        "consistent with previous partitions, which have 2 replica(s).\n"
    ), r.stderr
    r = topics(bootstrap, "--describe", "--topic", "manual-bad")
    assert r.returncode == 1, r


def test_invalid_config_names_config_and_value(bootstrap: str) -> None:
    r = topics(bootstrap, "--create", "--topic", "bad-config", "--partitions", "1", "--replication-factor", "1",
               "--config", "retention.ms=-5")  # fmt: skip
    assert r.returncode == 1, r
    assert r.stderr == f"{ERROR}Invalid value -5 for configuration retention.ms: Value must be at least -1\n", r.stderr
    r = topics(bootstrap, "--describe", "--topic", "bad-config")
    assert r.returncode == 1, r


def test_list(bootstrap: str) -> None:
    r = topics(bootstrap, "--create", "--topic", "listed", "--partitions", "1", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    r = topics(bootstrap, "--list")
    assert r.returncode == 0, r.stderr
    names = r.stdout.split()
    assert "listed" in names and len(names) == len(set(names)), names
    assert names == sorted(names)
    r = topics(bootstrap, "--list", "--output", "json")
    assert r.returncode == 0 and json.loads(r.stdout) == names, r
    r = topics(bootstrap, "--create", "--topic", "listed-too", "--partitions", "1", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    r = topics(bootstrap, "--list", "--topic", "list.*")  # Kafka's filter: a regex the whole name matches
    assert r.returncode == 0 and r.stdout.split() == ["listed", "listed-too"], r
    r = topics(bootstrap, "--list", "--topic", "listed")
    assert r.returncode == 0 and r.stdout.split() == ["listed"], r


def test_a_dead_bootstrap_server_fails_in_about_five_seconds() -> None:
    (port,) = free_ports(1)
    started = time.monotonic()
    r = topics(f"127.0.0.1:{port}", "--list")
    took = time.monotonic() - started
    assert r.returncode == 1 and r.stdout == "", r
    assert f"no controller reachable at 127.0.0.1:{port} within 5 s" in r.stderr, r.stderr
    assert 5 <= took < 12, f"took {took:.1f} s"


def test_a_cluster_that_is_not_healthy_in_time_is_stopped(tmp_path: Path) -> None:
    data_dir = tmp_path / "late"
    r = run_pykraft(
        "cluster", "up", "--data-dir", str(data_dir), "--controllers", "1", "--brokers", "1", "--timeout", "0.3"
    )
    assert r.returncode == 1, r
    assert "was not healthy within" in r.stderr and "stopped the 2 processes it started" in r.stderr, r.stderr
    stopped = json.loads((data_dir / STOPPED_FILE).read_text())
    pids = [p["pid"] for p in stopped["controllers"] + stopped["brokers"]]
    assert len(pids) == 2 and not [p for p in pids if pid_running(p, data_dir)], pids
    assert not (data_dir / STATE_FILE).exists()


# -- down and up again -----------------------------------------------------------------------------------------------


def test_down_stops_everything_and_up_restarts_with_topics(cluster_dir: Path, bootstrap: str) -> None:
    r = topics(bootstrap, "--create", "--topic", "survivor", "--partitions", "3", "--replication-factor", "3")
    assert r.returncode == 0, r.stderr
    before = describe_json(bootstrap, "survivor")
    pids = state_pids(cluster_dir)
    assert len(pids) == 9 and all(pid_running(p, cluster_dir) for p in pids), pids
    ports_before = ports_of(cluster_dir)

    r = cluster_down(cluster_dir)
    assert r.returncode == 0, r.stderr
    assert "Stopped the cluster" in r.stdout, r.stdout
    still = [p for p in pids if pid_running(p, cluster_dir)]
    assert not still, f"processes left running after cluster down: {still}"
    r = run_pykraft("cluster", "bootstrap", "--data-dir", str(cluster_dir))
    assert r.returncode == 1, r

    out = cluster_up(cluster_dir)
    assert f"Bootstrap servers: {bootstrap}\n" in out, out  # the same ports: the voter set the data was made with
    after = describe_json(bootstrap, "survivor")
    assert after["topicId"] == before["topicId"] and after["partitionCount"] == 3, (before, after)
    r = topics(bootstrap, "--list")
    assert r.returncode == 0, r.stderr
    assert "survivor" in r.stdout.split(), r.stdout
    new_pids = state_pids(cluster_dir)
    assert all(pid_running(p, cluster_dir) for p in new_pids) and not set(new_pids) & set(pids)
    assert ports_of(cluster_dir) == ports_before, "a restart keeps every port: scrape targets stay put"
