"""The issue's cross-check: a live three-node cluster with six ``pykraft broker`` agents over three racks gets
topics (with configs, different partition counts and replication factors) and loses a broker (kill -9, fenced by
its session timeout); its committed log is exported (online from the leader, and offline from a stopped node),
audited with Spark, and the audit's replayed state must equal DescribeTopics / DescribeCluster, field by field.

The live state and the export are taken at the same committed point: the nodes write no NoOpRecords
(metadata.max.idle.interval.ms=0), nothing else is written once the cluster is quiet, and the high watermark is
checked to be the same before the describes, after them, and in the export's manifest."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from e2e_helpers import (
    SESSION_TIMEOUT_MS,
    ProcessCluster,
    run_pykraft,
    wait_brokers,
)

from audit.job import run_audit
from audit.replay import State
from pykraft.client import AdminClient, ClusterDescription, NewTopic, TopicDescription
from quorum.log.log import METADATA_PARTITION_DIR

NODE_ARGS = [
    "--override", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}",
    "--override", "metadata.max.idle.interval.ms=0",
]  # fmt: skip
KILLED = 104
BEFORE_FENCING = [
    NewTopic("orders", 6, 3, topic_configs={"retention.ms": "86400000", "cleanup.policy": "compact"}),
    NewTopic("payments", 3, 2, topic_configs={"min.insync.replicas": "2"}),
    NewTopic("audit-log", 1, 1),
    NewTopic("pinned", replica_assignment={0: [101, 104], 1: [104, 105], 2: [106, 102]}),
]
AFTER_FENCING = [  # placed while broker 104 is fenced: it may still get replicas, outside the ISR
    NewTopic("clicks", 12, 3, topic_configs={"segment.bytes": "1048576", "retention.ms": "3600000"}),
    NewTopic("defaults"),
]


@dataclass
class Scenario:
    live_topics: list[TopicDescription]
    live_cluster: ClusterDescription
    high_watermark: int
    leader: int
    online: Path
    offline: Path
    manifest: dict[str, Any]
    offline_manifest: dict[str, Any]


async def quiet_high_watermark(pc: ProcessCluster, leader: int, settle: float = 1.5, timeout: float = 30) -> int:
    """The leader's high watermark once it has stood still for ``settle`` seconds with every voter's log ending
    there (nothing is being written, everything written is committed and replicated)."""
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        views = {n: await pc.cluster.describe(n) for n in pc.cluster.nodes}
        lead = views[leader]
        assert lead is not None and lead.role == "Leader", f"node {leader} no longer leads\n{pc.logs()}"
        hw = lead.high_watermark
        if hw != last or any(v is None or v.log_end_offset != hw for v in views.values()):
            last, since = hw, time.monotonic()
        elif time.monotonic() - since >= settle:
            return hw
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the cluster did not go quiet within {timeout} s\n{pc.logs()}")


async def drive(pc: ProcessCluster) -> tuple[list[TopicDescription], ClusterDescription, int, int]:
    leader, _ = await pc.cluster.wait_for_leader(timeout=60)
    async with AdminClient(pc.bootstrap) as admin:
        await wait_brokers(admin, pc, unfenced=set(pc.brokers))
        for result in (await admin.create_topics(BEFORE_FENCING)).values():
            result.raise_for_error()
        pc.brokers[KILLED].kill()
        await wait_brokers(admin, pc, unfenced=set(pc.brokers) - {KILLED}, fenced={KILLED})
        for result in (await admin.create_topics(AFTER_FENCING)).values():
            result.raise_for_error()
        leader, _ = await pc.cluster.wait_for_leader(timeout=30)
        hw = await quiet_high_watermark(pc, leader)
        topics = await admin.describe_topics()
        cluster = await admin.describe_cluster()
        assert cluster.controller_id == leader
        again = await quiet_high_watermark(pc, leader, settle=0.5)
        assert again == hw, f"the log moved while describing: {hw} -> {again}"
        return topics, cluster, hw, leader


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    root = tmp_path_factory.mktemp("cross-check")
    pc = ProcessCluster(root / "cluster", node_args=NODE_ARGS)
    pc.start()
    try:
        topics, cluster, hw, leader = asyncio.run(drive(pc))
        online = root / "online"
        done = run_pykraft("export", "--bootstrap-server", pc.cluster.nodes[leader].address, "--out", str(online))
        assert done.returncode == 0, done.stderr
        manifest = json.loads((online / "manifest.json").read_text())
        # still quiet: the export is of the same committed point as the describes
        assert asyncio.run(quiet_high_watermark(pc, leader, settle=0.2)) == hw == manifest["high_watermark"]
        # Stop the nodes before the brokers (a broker's controlled shutdown would write records), followers first.
        pc.cluster.stop_followers_first(leader)
        for broker in pc.brokers.values():  # nothing left to shut down gracefully with (and it would take long)
            broker.kill()
        follower = next(n for n in pc.cluster.nodes if n != leader)
        offline = root / "offline"
        done = run_pykraft("export", "--data-dir", str(pc.cluster.nodes[follower].data_dir), "--out", str(offline))
        assert done.returncode == 0, done.stderr
        offline_manifest = json.loads((offline / "manifest.json").read_text())
    except BaseException:
        print(pc.logs())
        raise
    finally:
        pc.close()
    yield Scenario(topics, cluster, hw, leader, online, offline, manifest, offline_manifest)


# -- the live state and the audit's, in one shape ----------------------------------------------------------------------


def live_state(s: Scenario) -> dict[str, dict]:
    topics, partitions, configs = {}, {}, {}
    for t in s.live_topics:
        assert t.error_code == 0, t
        topics[t.topic_id] = t.name
        configs[t.name] = dict(t.configs)
        for p in t.partitions:
            partitions[(t.topic_id, p.partition)] = {
                "replicas": p.replicas,
                "isr": p.isr,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
            }
    brokers = {
        b.broker_id: {
            "rack": b.rack,
            "fenced": b.fenced,
            "in_controlled_shutdown": b.in_controlled_shutdown,
            "broker_epoch": b.broker_epoch,
        }
        for b in s.live_cluster.brokers
    }
    return {"topics": topics, "partitions": partitions, "brokers": brokers, "configs": configs}


def audited_state(spark: Any, export: Path, as_of_offset: int | None, *, check: bool) -> dict[str, dict]:
    """The state as ``pykraft audit`` writes it (its job: the executors' tables), read back with Spark."""
    with tempfile.TemporaryDirectory(prefix="audit-") as out:
        result = run_audit(spark, export, out, as_of_offset=as_of_offset, report=False)
        if check:  # a log our cluster wrote breaks no invariant
            violations = [v.asDict() for v in spark.read.parquet(f"{out}/violations").collect()]
            assert violations == [] and result.violations == {}, violations
        state = State(*(spark.read.parquet(f"{out}/{name}") for name in ("topics", "partitions", "brokers", "configs")))
        topics = {r.topic_id: r.topic_name for r in state.topics.collect()}
        partitions = {
            (r.topic_id, r.partition_id): {
                "replicas": list(r.replicas),
                "isr": list(r.isr),
                "leader": r.leader,
                "leader_epoch": r.leader_epoch,
                "partition_epoch": r.partition_epoch,
            }
            for r in state.partitions.collect()
        }
        brokers = {
            r.broker_id: {
                "rack": r.rack,
                "fenced": r.fenced,
                "in_controlled_shutdown": r.in_controlled_shutdown,
                "broker_epoch": r.broker_epoch,
            }
            for r in state.brokers.collect()
        }
        configs: dict[str, dict[str, str]] = {name: {} for name in topics.values()}
        for r in state.configs.where("resource_type = 2").collect():
            configs.setdefault(r.resource_name, {})[r.config_name] = r.config_value
        last = result.summary["last_offset"]
        return {"topics": topics, "partitions": partitions, "brokers": brokers, "configs": configs, "last": last}


def assert_field_by_field(audit: dict[str, dict], live: dict[str, dict]) -> None:
    for table in ("topics", "partitions", "brokers", "configs"):
        a, e = audit[table], live[table]
        assert sorted(a, key=repr) == sorted(e, key=repr), (
            f"{table}: audit has {sorted(a, key=repr)}, live {sorted(e, key=repr)}"
        )
        for key, value in e.items():
            if isinstance(value, dict) and table != "configs":
                for name in value:
                    assert a[key][name] == value[name], (
                        f"{table} {key} {name}: audit {a[key][name]!r}, live {value[name]!r}"
                    )
            else:
                assert a[key] == value, f"{table} {key}: audit {a[key]!r}, live {value!r}"


# -- the tests ---------------------------------------------------------------------------------------------------------


def test_the_live_cluster_did_what_the_scenario_says(scenario: Scenario) -> None:
    live = live_state(scenario)
    names = {t.name for t in scenario.live_topics}
    assert names == {t.name for t in BEFORE_FENCING + AFTER_FENCING}
    brokers = live["brokers"]
    assert sorted(brokers) == list(range(101, 107))
    assert {b: v["fenced"] for b, v in brokers.items()} == {b: b == KILLED for b in range(101, 107)}
    assert {v["rack"] for v in brokers.values()} == {"rack-1", "rack-2", "rack-3"}
    parts = live["partitions"].values()
    for p in parts:
        assert p["leader"] != KILLED, p
        if KILLED in p["isr"]:
            # Its only in-sync replica: Kafka keeps the last one in the ISR (its data lives there), leaderless.
            # (audit-log, RF 1, lands on the killed broker one time in six.)
            assert list(p["isr"]) == [KILLED] and p["leader"] == -1, p
    pinned = next(t for t in scenario.live_topics if t.name == "pinned")
    p0, p1, p2 = ((p.leader, p.isr, p.leader_epoch, p.partition_epoch) for p in pinned.partitions)
    assert p0 == (101, [101], 0, 1)  # 104 left the ISR: a new partition epoch, the same leader epoch
    assert p1 == (105, [105], 1, 1)  # 104 led: leadership moved to 105
    assert p2 == (106, [106, 102], 0, 0)  # untouched
    assert {len(t.partitions) for t in scenario.live_topics} >= {1, 3, 6, 12}
    assert live["configs"]["orders"] == {"retention.ms": "86400000", "cleanup.policy": "compact"}


def test_online_export_manifest(scenario: Scenario) -> None:
    m = scenario.manifest
    assert m["node_id"] == scenario.leader and m["cluster_id"] == scenario.live_cluster.cluster_id
    assert m["high_watermark"] == scenario.high_watermark and m["epoch"] >= 1
    assert m["files"], m
    for name, info in m["files"].items():
        data = (scenario.online / name).read_bytes()
        assert len(data) == info["bytes"] and hashlib.sha256(data).hexdigest() == info["sha256"], name


def test_audit_of_the_online_export_equals_the_live_state(spark: Any, scenario: Scenario) -> None:
    hw = scenario.high_watermark
    audit = audited_state(spark, scenario.online, as_of_offset=hw - 1, check=True)
    assert audit["last"] == hw - 1  # the export holds exactly the committed prefix
    assert_field_by_field(audit, live_state(scenario))


def test_offline_export_of_a_stopped_node_gives_the_same_state(spark: Any, scenario: Scenario) -> None:
    m = scenario.offline_manifest
    assert m["high_watermark"] is None and "damage" not in m
    assert m["log_end_offset"] == scenario.high_watermark  # the cluster wrote nothing after the online export
    assert (scenario.offline / METADATA_PARTITION_DIR).is_dir()
    audit = audited_state(spark, scenario.offline, as_of_offset=None, check=False)
    assert audit["last"] == scenario.high_watermark - 1
    assert_field_by_field(audit, live_state(scenario))
