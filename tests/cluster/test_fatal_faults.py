"""Fail-stop with real processes: each fault is injected into one node of a running three-voter cluster (with a
broker agent, so topics are real acknowledged controller writes) at the OS call, or at the controller's replay
(tests/cluster/faulty_node.py). Each must end that process with exit code 70 and one ``fatal_fault`` log line
naming the cause; the others go on committing; restarted with the fault gone, the node catches up. The module
ends by reading every node's log from disk: every acknowledged topic is on every node, and the logs agree.

The nodes are started normally (no ``unsafe.raw.append.enable``): AppendRecords is refused, with a clear error.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cluster_helpers import read_log, record, wait_caught_up

from controller.records import TopicRecord, deserialize
from pykraft.client import AdminClient, AdminError, NewTopic
from pykraft.cluster import STATE_FILE, controller_states, last_fatal_fault
from pykraft.testing import Cluster, NodeProcess, free_ports
from quorum.errors import Errors
from quorum.fault import FATAL_EXIT_CODE

FAULTY_NODE = Path(__file__).with_name("faulty_node.py")


@dataclass
class FaultyCluster:
    cluster: Cluster
    broker: subprocess.Popen[bytes]
    faults: dict[int, Path]
    acked: list[str] = field(default_factory=list)  # topics whose CreateTopics was answered NONE

    @property
    def bootstrap(self) -> str:
        return ",".join(n.address for n in self.cluster.nodes.values())

    def arm(self, node_id: int, fault: str) -> None:
        (self.faults[node_id] / fault).touch()

    def disarm_all(self) -> None:
        for directory in self.faults.values():
            for armed in directory.iterdir():
                armed.unlink()

    async def create(self, name: str) -> bool:
        """Create a topic (1 partition, RF 1) through whichever controller is active; True once acknowledged."""
        async with AdminClient(self.bootstrap, request_timeout_ms=5000, default_api_timeout_ms=30_000) as admin:
            try:
                result = (await admin.create_topics([NewTopic(name, 1, 1)]))[name]
            except AdminError:
                return False
        if result.error_code == Errors.NONE:
            self.acked.append(name)
            return True
        return False

    async def leader(self, other_than: int | None = None) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            leader, _ = await self.cluster.wait_for_leader(timeout=30)
            if leader != other_than:
                return leader
            await asyncio.sleep(0.05)
        raise TimeoutError(f"no leader other than {other_than}\n{self.cluster.logs()}")


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultyCluster]:
    root = tmp_path_factory.mktemp("fatal-faults")
    cluster = Cluster(root=root, size=3)
    faults = {}
    for node_id, node in cluster.nodes.items():
        faults[node_id] = root / f"faults-node{node_id}"
        faults[node_id].mkdir()
        assert node.args[1:4] == ["-m", "pykraft", "node"], node.args
        node.args[1:3] = [str(FAULTY_NODE), "--faults-dir", str(faults[node_id])]
    bootstrap = ",".join(n.address for n in cluster.nodes.values())
    [listener] = free_ports(1)
    with (root / "broker-101.log").open("ab") as out:
        broker = subprocess.Popen(
            [sys.executable, "-m", "pykraft", "broker", "--broker-id", "101", "--bootstrap-server", bootstrap,
             "--listener", f"127.0.0.1:{listener}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    try:
        with cluster:
            asyncio.run(wait_unfenced(bootstrap, 101))
            yield FaultyCluster(cluster, broker, faults)
    finally:
        broker.kill()
        broker.wait()


async def wait_unfenced(bootstrap: str, broker_id: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    async with AdminClient(bootstrap, request_timeout_ms=2000, default_api_timeout_ms=5000) as admin:
        while time.monotonic() < deadline:
            try:
                if any(b.broker_id == broker_id and not b.fenced for b in (await admin.describe_cluster()).brokers):
                    return
            except AdminError:
                pass
            await asyncio.sleep(0.1)
    raise TimeoutError(f"broker {broker_id} not unfenced within {timeout} s")


def fatal_lines(node: NodeProcess) -> list[dict]:
    out = []
    for line in node.log_path.read_text().splitlines():
        if '"fatal_fault"' in line:
            event = json.loads(line)  # one line, whole: JSON with the cause, errno, file, epoch and offsets
            if event["event"] == "fatal_fault":
                out.append(event)
    return out


async def expect_fatal_exit(faulty: FaultyCluster, node_id: int, before: int) -> dict:
    """Wait for ``node_id`` to exit; it must exit with the fatal code, after exactly one new fatal_fault line
    which is the last line it wrote."""
    node = faulty.cluster.nodes[node_id]
    assert node.proc is not None
    code = await asyncio.to_thread(node.proc.wait, 30)
    assert code == FATAL_EXIT_CODE, f"node {node_id} exited with {code}\n{faulty.cluster.logs()}"
    lines = fatal_lines(node)
    assert len(lines) == before + 1, lines
    last_line = node.log_path.read_text().rstrip("\n").rsplit("\n", 1)[-1]
    assert json.loads(last_line)["event"] == "fatal_fault", last_line
    fault = lines[-1]
    assert fault["level"] == "critical" and fault["exit_code"] == FATAL_EXIT_CODE and fault["node_id"] == node_id
    return fault


async def restart_and_catch_up(faulty: FaultyCluster, node_id: int) -> None:
    faulty.disarm_all()
    faulty.cluster.nodes[node_id].start()
    await wait_caught_up(faulty.cluster, timeout=60)
    assert await faulty.create(f"after-restart-of-{node_id}-{len(faulty.acked)}")


async def test_append_records_is_refused_on_a_node_started_normally(faulty: FaultyCluster) -> None:
    leader = await faulty.leader()
    resp = await faulty.cluster.append(leader, [record("raw")])
    assert resp.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED, resp
    assert "AppendRecords is disabled" in resp.error_message and "unsafe.raw.append.enable=true" in resp.error_message
    assert await faulty.create("first")  # the controller's own writes go on


async def test_eio_on_fdatasync_ends_the_leader(faulty: FaultyCluster) -> None:
    leader = await faulty.leader()
    before = len(fatal_lines(faulty.cluster.nodes[leader]))
    faulty.arm(leader, "fdatasync-eio")
    fault = await expect_fatal_exit(faulty, leader, before)  # the controller's NoOps need flushing within 0.5 s
    assert fault["cause"] == "storage fault while flushing the metadata log", fault
    assert fault["errno"] == "EIO" and fault["file"].endswith(".log") and "fdatasync" in fault["error"], fault
    assert fault["raised_at"].endswith(" in fdatasync"), fault  # the OS call itself (here, the injector's)
    assert fault["role"] == "Leader" and fault["log_end_offset"] > fault["high_watermark"] > 0, fault
    assert await faulty.create("after-eio")  # a new leader
    await describe_shows_the_fatal_exit(faulty, leader, fault)
    await restart_and_catch_up(faulty, leader)
    assert last_fatal_fault(faulty.cluster.nodes[leader].log_path) is None  # started again since


async def describe_shows_the_fatal_exit(faulty: FaultyCluster, node_id: int, fault: dict) -> None:
    """``pykraft cluster describe --data-dir`` reads its cluster.json: a controller whose process is gone and
    whose log ends with a fatal_fault line is reported with the cause."""
    root = faulty.cluster.root
    state = {
        "bootstrap": faulty.bootstrap,
        "controllers": [
            {"id": n, "port": node.port, "pid": node.proc.pid, "log": str(node.log_path)}  # type: ignore[union-attr]
            for n, node in faulty.cluster.nodes.items()
        ],
        "brokers": [],
    }
    (root / STATE_FILE).write_text(json.dumps(state))
    [dead] = [c for c in controller_states(state, root) if c["id"] == node_id]
    assert dead["state"] == "fatal" and dead["fatalFault"]["cause"] == fault["cause"], dead
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "pykraft", "cluster", "describe", "--data-dir", str(root)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result
    [line] = [line for line in result.stdout.splitlines() if line.startswith(f"{node_id} ")]
    assert f"exited after a fatal fault (code {FATAL_EXIT_CODE}): {fault['cause']}: OSError: [Errno 5]" in line, line
    (root / STATE_FILE).unlink()


async def test_enospc_on_append_ends_a_follower(faulty: FaultyCluster) -> None:
    leader = await faulty.leader()
    follower = next(n for n in faulty.cluster.nodes if n != leader)
    before = len(fatal_lines(faulty.cluster.nodes[follower]))
    faulty.arm(follower, "append-enospc")
    assert await faulty.create("during-enospc")  # the leader and the other follower: a majority
    fault = await expect_fatal_exit(faulty, follower, before)
    assert fault["cause"] == f"storage fault while handling FetchResponse from node {leader}", fault
    assert fault["errno"] == "ENOSPC" and fault["file"].endswith(".log") and "write" in fault["error"], fault
    assert fault["role"] == "Follower", fault
    assert await faulty.create("after-enospc")
    await restart_and_catch_up(faulty, follower)


async def test_a_failed_rename_of_quorum_state_ends_a_voter(faulty: FaultyCluster) -> None:
    """A new epoch must be stored before a voter acts on it: when the leader hands over, the armed voter must
    write quorum-state (a vote, or the new leader), fails, and exits rather than act on an epoch it did not
    store."""
    leader = await faulty.leader()
    voter = next(n for n in faulty.cluster.nodes if n != leader)
    before = len(fatal_lines(faulty.cluster.nodes[voter]))
    faulty.arm(voter, "quorum-state-rename")
    assert faulty.cluster.nodes[leader].terminate() == 0  # a graceful handover: a new epoch
    fault = await expect_fatal_exit(faulty, voter, before)
    assert fault["cause"].startswith("storage fault while "), fault
    assert fault["errno"] == "EIO" and fault["file"].endswith("quorum-state.tmp"), fault
    assert fault["file2"].endswith("quorum-state"), fault
    faulty.cluster.nodes[leader].start()  # two voters again: a quorum
    assert await faulty.create("after-quorum-state")
    await restart_and_catch_up(faulty, voter)


async def test_a_record_a_standby_cannot_apply_ends_the_standby(faulty: FaultyCluster) -> None:
    leader = await faulty.leader()
    standby = next(n for n in faulty.cluster.nodes if n != leader)
    before = len(fatal_lines(faulty.cluster.nodes[standby]))
    faulty.arm(standby, "replay")
    assert await faulty.create("poison-standby")  # committed by the leader and the other standby
    fault = await expect_fatal_exit(faulty, standby, before)
    assert fault["cause"].startswith("fatal error while applying the committed batch at offsets "), fault
    assert "ReplayError: cannot apply the TopicRecord at offset " in fault["error"], fault
    assert "on the standby controller" in fault["error"], fault
    assert "injected replay fault for topic poison-standby" in fault["traceback"], fault
    assert " in replay" in fault["raised_at"], fault  # where the wrapped error began
    await restart_and_catch_up(faulty, standby)  # replays poison-standby without the fault


async def test_a_record_the_active_controller_cannot_apply_ends_it_before_it_reaches_the_log(
    faulty: FaultyCluster,
) -> None:
    leader = await faulty.leader()
    before = len(fatal_lines(faulty.cluster.nodes[leader]))
    faulty.arm(leader, "replay")
    created = asyncio.create_task(faulty.create("poison-active"))  # the client retries on the next controller
    fault = await expect_fatal_exit(faulty, leader, before)
    assert fault["cause"].startswith("fatal error while applying the TopicRecord at offset "), fault
    assert "faulty_node.py" in fault["raised_at"] and " in replay" in fault["raised_at"], fault
    assert "on the active controller" in fault["cause"], fault
    assert await created
    await restart_and_catch_up(faulty, leader)


async def test_every_acknowledged_topic_is_on_every_node_and_the_logs_agree(faulty: FaultyCluster) -> None:
    leader, _, _ = await wait_caught_up(faulty.cluster, timeout=60)
    faulty.broker.terminate()
    faulty.broker.wait(30)
    faulty.cluster.stop_followers_first(leader)
    logs = {n: read_log(node.data_dir) for n, node in faulty.cluster.nodes.items()}
    common_end = min(batches[-1].next_offset for batches in logs.values())
    prefixes = {n: [b.buffer for b in batches if b.next_offset <= common_end] for n, batches in logs.items()}
    assert all(p == prefixes[leader] for p in prefixes.values()), "the logs differ below their common end"
    assert len(faulty.acked) >= 11, faulty.acked
    for node_id, batches in logs.items():
        names = [
            message.name
            for b in batches
            if not b.is_control
            for r in b.records()
            if isinstance(message := deserialize(r.value or b"")[0], TopicRecord)
        ]
        assert len(names) == len(set(names)), f"node {node_id}: a topic created twice"
        missing = set(faulty.acked) - set(names)
        assert not missing, f"node {node_id} lost acknowledged topics {sorted(missing)}"
