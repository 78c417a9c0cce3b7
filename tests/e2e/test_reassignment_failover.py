"""The reassignment acceptance scenario on ``pykraft cluster up``, every step a real process on loopback: a topic
with data (``--initial-partition-bytes``), a plan from ``reassign-partitions --generate`` moving it to other brokers,
``--execute --throttle``, progress read from the brokers at about the throttle's rate, kill -9 of the active
controller halfway, the move finishing under the new controller, the final replicas, ISRs and leaders as planned,
and the throttle configs gone once ``--verify`` reports completion.

The figures are chosen so the move takes ~6 s at the throttle (plus the brokers' 2 s metadata poll): two partitions
of 6 MiB each move from brokers 101/102 to 103/104; each destination fetches 12 MiB and each source leader sends
12 MiB, both throttled at 2 MiB/s.
The rate check is a bound (the throttle is a correctness property: never much faster) with a generous floor.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import run_pykraft
from test_cli import cluster_down, cluster_up, logs

from controller.requests import ConfigResource, ConfigResourceType, ConfigSource
from pykraft.client import AdminClient, NewTopic
from pykraft.cluster import STATE_FILE
from pykraft.replica.data_plane import describe_replicas

MIB = 1 << 20
SIZE = 6 * MIB
THROTTLE = 2 * MIB
TOPIC = "moving"
SOURCES = {0: [101, 102], 1: [102, 101]}
THROTTLE_CONFIGS = {
    "leader.replication.throttled.rate",
    "follower.replication.throttled.rate",
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    d = tmp_path_factory.mktemp("reassign")
    try:
        cluster_up(d, "--brokers", "4", "--racks", "2", "--initial-partition-bytes", str(SIZE))
        yield d
    finally:
        cluster_down(d)


def state(data_dir: Path) -> dict:
    return json.loads((data_dir / STATE_FILE).read_text())


async def replica_sizes(admin: AdminClient) -> dict[tuple[int, int], int]:
    """(broker, partition) -> bytes, for the topic's replicas on every broker."""
    cluster = await admin.describe_cluster()
    out = {}
    for b in cluster.brokers:
        endpoint = b.endpoint()
        assert endpoint is not None, b
        for r in await describe_replicas(endpoint):
            if r.topic == TOPIC:
                out[(b.broker_id, r.partition)] = r.size_bytes
    return out


def reassign(*args: str, timeout: float = 120) -> str:
    r = run_pykraft("reassign-partitions", *args, timeout=timeout)
    assert r.returncode == 0, f"reassign-partitions {args} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def test_a_throttled_move_survives_a_controller_kill_and_leaves_no_throttles(data_dir: Path) -> None:
    bootstrap = state(data_dir)["bootstrap"]
    asyncio.run(_scenario(data_dir, bootstrap))


async def _scenario(data_dir: Path, bootstrap: str) -> None:
    async with AdminClient(bootstrap, default_api_timeout_ms=30_000) as admin:
        created = await admin.create_topics([NewTopic(TOPIC, replica_assignment=SOURCES)])
        created[TOPIC].raise_for_error()
        deadline = time.monotonic() + 30  # every original replica holds the data, in sync
        while (sizes := await replica_sizes(admin)) != {(b, p): SIZE for p, bs in SOURCES.items() for b in bs}:
            assert time.monotonic() < deadline, sizes
            await asyncio.sleep(0.2)

        # --generate over the other two brokers proposes the plan; we run it as proposed
        (data_dir / "topics.json").write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
        out = reassign(
            "--bootstrap-server", bootstrap, "--generate", "--topics-to-move-json-file", str(data_dir / "topics.json"),
            "--broker-list", "103,104",
        )  # fmt: skip
        proposed = json.loads(out.split("Proposed partition reassignment configuration")[1].strip())
        plan = {p["partition"]: p["replicas"] for p in proposed["partitions"]}
        assert {frozenset(r) for r in plan.values()} == {frozenset({103, 104})}, out
        (data_dir / "plan.json").write_text(json.dumps(proposed))
        plan_file = str(data_dir / "plan.json")

        started = time.monotonic()
        out = reassign("--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file", plan_file,
                       "--throttle", str(THROTTLE))  # fmt: skip
        assert "Successfully started partition reassignment" in out, out
        listed = await admin.list_partition_reassignments()
        assert set(listed) <= {(TOPIC, 0), (TOPIC, 1)} and listed, listed

        # Progress at about the throttle's rate: what the two new replicas on 103 hold, sampled over ~2 s.
        def copied(sizes: dict[tuple[int, int], int], broker: int) -> int:
            return sum(n for (b, _), n in sizes.items() if b == broker)

        # brokers learn of the move and of the throttles at their next metadata poll (every 2 s): measure once
        # both new replicas on 103 copy
        while sum(1 for (b, _), n in (await replica_sizes(admin)).items() if b == 103 and n > 0) < 2:
            assert time.monotonic() - started < 30, "the new replicas did not start copying"
            await asyncio.sleep(0.1)
        first, t0 = copied(await replica_sizes(admin), 103), time.monotonic()
        await asyncio.sleep(2.0)
        second, t1 = copied(await replica_sizes(admin), 103), time.monotonic()
        rate = (second - first) / (t1 - t0)
        print(f"copy rate into broker 103: {rate / MIB:.2f} MiB/s (throttle {THROTTLE / MIB:.0f} MiB/s)")
        assert rate <= 1.5 * THROTTLE, f"copied at {rate / MIB:.2f} MiB/s under a {THROTTLE / MIB} MiB/s throttle"
        assert rate >= 0.25 * THROTTLE, f"copied at only {rate / MIB:.2f} MiB/s"
        out = reassign("--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file", plan_file)
        assert "is still in progress" in out and "bytes" in out, out

        # Halfway: kill -9 the active controller.
        while copied(await replica_sizes(admin), 103) < SIZE:  # 2 partitions × SIZE to copy: half is SIZE
            assert time.monotonic() - started < 60, "the move made no progress"
            await asyncio.sleep(0.2)
        active = (await admin.describe_cluster()).controller_id
        pid = next(c["pid"] for c in state(data_dir)["controllers"] if c["id"] == active)
        os.kill(pid, signal.SIGKILL)
        print(f"killed active controller {active} (pid {pid}) {time.monotonic() - started:.1f} s into the move")

        out = reassign("--bootstrap-server", bootstrap, "--verify", "--wait", "--reassignment-json-file", plan_file)
        assert all(f"Reassignment of partition {TOPIC}-{p} is completed." in out for p in plan), out
        assert "Clearing broker-level throttles" in out and "Clearing topic-level throttles" in out, out
        print(f"move complete {time.monotonic() - started:.1f} s after --execute")
        cluster = await admin.describe_cluster()
        assert cluster.controller_id != active

        [topic] = await admin.describe_topics([TOPIC])
        for p in topic.partitions:
            assert p.replicas == plan[p.partition], (p, plan)
            assert sorted(p.isr) == sorted(plan[p.partition]), p
            assert p.leader == plan[p.partition][0], p  # the old leader was removed: the first target replica leads
            assert not p.adding_replicas and not p.removing_replicas, p
        assert await admin.list_partition_reassignments() == {}
        deadline = time.monotonic() + 15  # 101 and 102 drop their replicas at their next metadata poll
        while (sizes := await replica_sizes(admin)) != {(b, p): SIZE for p, bs in plan.items() for b in bs}:
            assert time.monotonic() < deadline, sizes
            await asyncio.sleep(0.2)

        # --verify reported completion and removed every throttle it had set
        resources = [ConfigResource(ConfigResourceType.TOPIC, TOPIC)] + [
            ConfigResource(ConfigResourceType.BROKER, str(b)) for b in (101, 102, 103, 104)
        ]
        for result in await admin.describe_configs(resources):
            dynamic = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG)
            set_here = {c.name for c in result.configs if c.name in THROTTLE_CONFIGS and c.source in dynamic}
            assert not set_here, (result.resource_name, set_here, logs(data_dir)[-3000:])


def test_a_move_waits_for_a_killed_destination_and_completes_when_it_returns(data_dir: Path) -> None:
    """kill -9 of the broker a partition is moving to: the move waits (still listed, the new replica outside the
    ISR), and completes once the broker is back — its replica starts empty again and copies the leader's log."""
    bootstrap = state(data_dir)["bootstrap"]
    broker = next(b for b in state(data_dir)["brokers"] if b["id"] == 103)
    argv = Path(f"/proc/{broker['pid']}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    restarted: subprocess.Popen[bytes] | None = None
    try:
        os.kill(broker["pid"], signal.SIGKILL)
        asyncio.run(_destination_waits(bootstrap))
        with Path(broker["out"]).open("ab") as out:  # (its argv logs to broker["log"] itself)
            restarted = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        asyncio.run(_destination_returns(bootstrap))
    finally:
        if restarted is not None:
            restarted.send_signal(signal.SIGTERM)
            try:
                restarted.wait(30)
            except subprocess.TimeoutExpired:
                restarted.kill()
                restarted.wait()


async def _destination_waits(bootstrap: str) -> None:
    async with AdminClient(bootstrap, default_api_timeout_ms=30_000) as admin:
        created = await admin.create_topics([NewTopic("to-103", replica_assignment={0: [101, 102]})])
        created["to-103"].raise_for_error()
        errors = await admin.alter_partition_reassignments({("to-103", 0): [101, 103]})
        assert not errors[("to-103", 0)].failed, errors
        await asyncio.sleep(3)
        assert ("to-103", 0) in await admin.list_partition_reassignments()
        [topic] = await admin.describe_topics(["to-103"])
        [p] = topic.partitions
        assert 103 not in p.isr and p.adding_replicas == [103] and p.removing_replicas == [102], p


async def _destination_returns(bootstrap: str) -> None:
    async with AdminClient(bootstrap, default_api_timeout_ms=30_000) as admin:
        deadline = time.monotonic() + 60
        while ("to-103", 0) in await admin.list_partition_reassignments():
            assert time.monotonic() < deadline, "the move did not complete after broker 103 came back"
            await asyncio.sleep(0.3)
        [topic] = await admin.describe_topics(["to-103"])
        [p] = topic.partitions
        assert (p.replicas, sorted(p.isr), p.leader) == ([101, 103], [101, 103], 101), p
