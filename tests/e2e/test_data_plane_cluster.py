"""The brokers' data plane end to end: three ``pykraft node`` voters and six ``pykraft broker`` agents producing,
fetching and changing ISRs through AlterPartition, all real processes on loopback.

One cluster serves the module (starting one costs seconds); the tests run in file order. Small timeouts:
broker.session.timeout.ms 3 s, replica.lag.time.max.ms 2 s, metadata polled every second.

1. A follower that stops fetching (SIGUSR1) leaves the ISRs of the partitions it follows through its leaders'
   AlterPartition — not by being fenced: it keeps heartbeating — and comes back when it fetches again.
2. The issue's acceptance scenario: kill -9 one broker agent → within broker.session.timeout.ms + 2 s no partition
   has it as leader or in its ISR, and every partition with another live ISR member has a leader; restart it → it
   rejoins every ISR through the data plane and AlterPartition; a preferred election gives each partition its first
   replica back; and every controller's committed log folds to the state the active controller describes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from e2e_helpers import SESSION_TIMEOUT_MS, BrokerProcess, ProcessCluster, pykraft_cmd, wait_brokers

from controller.partition_change import PartitionRegistration, merge
from controller.records import PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, decode_batch
from controller.requests import ElectionType
from pykraft.client import AdminClient, NewTopic, TopicDescription
from pykraft.export import export_online
from quorum.errors import Errors
from quorum.log.log import METADATA_PARTITION_DIR
from quorum.log.message import Uuid
from quorum.log.reader import Damage, scan_file

LAG_MS = 2000  # replica.lag.time.max.ms of the brokers
HEARTBEAT_MS = 1000  # the brokers' heartbeat and metadata poll interval
PRODUCE_RATE = 20  # messages per second per led partition
FETCH_WAIT_MS = 500  # replica.fetch.wait.max.ms, the brokers' default
TOPIC = "replicated"
PARTITIONS = 6


@dataclass
class DataPlaneBroker(BrokerProcess):
    """A broker agent with the data plane's options."""

    extra: list[str] = field(default_factory=list)

    def start(self) -> None:
        args = pykraft_cmd(
            "broker", "--broker-id", str(self.broker_id), "--rack", self.rack, "--bootstrap-server", self.bootstrap,
            "--listener", f"127.0.0.1:{self.listener_port}", *self.extra,
        )  # fmt: skip
        with self.log_path.open("ab") as out:
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)

    def events(self, name: str) -> list[dict]:
        out = []
        for line in self.log_path.read_text().splitlines():
            if f'"{name}"' in line:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == name:
                    out.append(event)
        return out


@pytest.fixture(scope="module")
def pc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    pc = ProcessCluster(
        tmp_path_factory.mktemp("data-plane"),
        node_args=["--override", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}"],
    )
    extra = [
        "--produce-rate", str(PRODUCE_RATE), "--replica-lag-time-max-ms", str(LAG_MS),
        "--heartbeat-interval-ms", str(HEARTBEAT_MS),
    ]  # fmt: skip
    for b in list(pc.brokers.values()):
        pc.brokers[b.broker_id] = DataPlaneBroker(
            b.broker_id, b.rack, b.bootstrap, b.log_path, b.listener_port, extra=extra
        )
    pc.start()
    try:
        asyncio.run(pc.wait_ready())
        yield pc
    finally:
        pc.close()


def broker(pc: ProcessCluster, broker_id: int) -> DataPlaneBroker:
    b = pc.brokers[broker_id]
    assert isinstance(b, DataPlaneBroker)
    return b


async def describe(admin: AdminClient) -> TopicDescription:
    [t] = await admin.describe_topics([TOPIC], timeout_ms=5000)
    assert not t.error_code, t
    return t


async def wait_topic(admin: AdminClient, pc: ProcessCluster, what: str, check, timeout: float) -> TopicDescription:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = await describe(admin)
        if check(last):
            return last
        await asyncio.sleep(0.1)
    raise TimeoutError(f"{what} not within {timeout} s; last: {last}\n{pc.logs()}")


def full_isrs(t: TopicDescription) -> bool:
    return all(sorted(p.isr) == sorted(p.replicas) for p in t.partitions)


async def test_a_paused_follower_is_shrunk_out_of_its_isrs_and_expands_back(pc: ProcessCluster) -> None:
    async with AdminClient(pc.bootstrap) as admin:
        result = (await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]))[TOPIC]
        result.raise_for_error()
        await wait_topic(admin, pc, "full ISRs", full_isrs, 10)
        await asyncio.sleep(LAG_MS * 1.5 / 1000)
        steady = await describe(admin)
        assert full_isrs(steady), "an ISR shrank while every broker fetched"

        paused = broker(pc, 102)
        followed = {p.partition for p in steady.partitions if 102 in p.replicas and p.leader != 102}
        assert followed
        assert paused.proc is not None
        paused.proc.send_signal(signal.SIGUSR1)
        started = time.monotonic()
        t = await wait_topic(
            admin, pc, "102 out of the ISRs it follows",
            lambda t: all(102 not in p.isr for p in t.partitions if p.partition in followed), 15,
        )  # fmt: skip
        took = time.monotonic() - started
        print(f"102 out of the ISRs it follows {took:.1f} s after its pause")
        # Its last fetch may have been caught up only as of the one before (Kafka's rule), two fetch waits back.
        assert took >= (LAG_MS - 2 * FETCH_WAIT_MS) / 1000, f"shrunk {took:.1f} s after the pause: too early"
        assert all(102 in p.isr for p in t.partitions if p.leader == 102)  # the partitions it leads keep it
        cluster = await admin.describe_cluster()
        assert not next(b for b in cluster.brokers if b.broker_id == 102).fenced  # shrunk by its leaders, not fenced
        shrinks = [e for b in pc.brokers.values() for e in broker(pc, b.broker_id).events("isr_shrink")]
        assert {e["partition"] for e in shrinks} == followed
        assert all(102 in e["old_isr"] and 102 not in e["new_isr"] for e in shrinks)
        assert all(e["partition_epoch"] == e["previous_partition_epoch"] + 1 for e in shrinks)

        paused.proc.send_signal(signal.SIGUSR1)
        await wait_topic(admin, pc, "102 back in every ISR", full_isrs, 15)

        def expanded() -> set[int]:
            expands = [e for b in pc.brokers.values() for e in broker(pc, b.broker_id).events("isr_expand")]
            return {e["partition"] for e in expands if e["joining"] == 102}

        # The controller's ISR can be seen before the leader's log line is written: give the lines a moment.
        deadline = time.monotonic() + 5
        while expanded() != followed and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert expanded() == followed


async def test_kill_restart_rejoin_and_preferred_leaders(pc: ProcessCluster, tmp_path: Path) -> None:
    victim = broker(pc, 104)
    async with AdminClient(pc.bootstrap) as admin:
        before = await wait_topic(admin, pc, "full ISRs", full_isrs, 15)
        assert any(p.leader == 104 for p in before.partitions), "104 leads nothing: the scenario would be weaker"
        victim.kill()
        killed = time.monotonic()

        def gone(t: TopicDescription) -> bool:
            for p in t.partitions:
                if p.leader == 104 or 104 in p.isr:
                    return False
                if any(b != 104 for b in p.isr) and p.leader < 0:
                    return False
            return True

        await wait_topic(admin, pc, "104 gone from leaders and ISRs", gone, SESSION_TIMEOUT_MS / 1000 + 2)
        took = time.monotonic() - killed
        print(f"104 out of every ISR and leadership {took:.1f} s after kill -9")

        victim.start()  # a new incarnation: new broker epoch, empty logs
        restarted = time.monotonic()
        await wait_brokers(admin, pc, unfenced={104}, timeout=30)
        after = await wait_topic(admin, pc, "104 back in every ISR", full_isrs, 30)
        print(f"104 back in every ISR {time.monotonic() - restarted:.1f} s after its restart")

        def joined() -> set[int]:
            return {
                e["partition"]
                for b in pc.brokers.values()
                if b.broker_id != 104
                for e in broker(pc, b.broker_id).events("isr_expand")
                if e["joining"] == 104 and e["timestamp"] > victim_start_stamp(victim)
            }

        # Through AlterPartition. A leader logs isr_expand when the controller's answer reaches it, which may be
        # a moment after the committed ISR is visible to us: give the line that moment.
        expected = {p.partition for p in after.partitions if 104 in p.replicas}
        deadline = time.monotonic() + 5
        while joined() != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert joined() == expected

        results = await admin.elect_leaders(ElectionType.PREFERRED, None)
        bad = [r for r in results if r.error.code not in (Errors.NONE, Errors.ELECTION_NOT_NEEDED)]
        assert not bad, bad
        final = await wait_topic(
            admin, pc, "preferred leaders",
            lambda t: full_isrs(t) and all(p.leader == p.replicas[0] for p in t.partitions), 15,
        )  # fmt: skip
        # Stable: the same state a second later (no ISR change is still under way).
        await asyncio.sleep(1.0)
        assert state_of(await describe(admin)) == state_of(final)

    for node_id, node in pc.cluster.nodes.items():
        out = tmp_path / f"export-{node_id}"
        await export_online(node.address, out)
        assert folded(out, Uuid(final.topic_id)) == state_of(final), f"controller {node_id} disagrees"


def victim_start_stamp(b: DataPlaneBroker) -> str:
    """The timestamp of the broker's last start (its last data_plane_started line)."""
    return b.events("data_plane_started")[-1]["timestamp"]


def state_of(t: TopicDescription) -> dict[int, tuple]:
    return {p.partition: (p.leader, p.leader_epoch, p.partition_epoch, tuple(p.isr)) for p in t.partitions}


def folded(export_dir: Path, topic_id: Uuid) -> dict[int, tuple]:
    """The topic's partitions as a node's exported committed log leaves them."""
    parts: dict[int, PartitionRegistration] = {}
    for path in sorted((export_dir / METADATA_PARTITION_DIR).glob("*.log")):
        for batch in scan_file(path):
            assert not isinstance(batch, Damage), batch
            if batch.is_control:
                continue
            for rec in decode_batch(batch, str(path)):
                m = rec.message
                if isinstance(m, PartitionRecord) and m.topic_id == topic_id:
                    parts[m.partition_id] = PartitionRegistration(
                        tuple(m.replicas), tuple(m.isr), m.leader, m.leader_epoch, m.partition_epoch
                    )
                elif isinstance(m, PartitionChangeRecord) and m.topic_id == topic_id:
                    parts[m.partition_id] = merge(parts[m.partition_id], m)
                elif isinstance(m, RemoveTopicRecord) and m.topic_id == topic_id:
                    parts.clear()
    return {i: (p.leader, p.leader_epoch, p.partition_epoch, tuple(p.isr)) for i, p in parts.items()}
