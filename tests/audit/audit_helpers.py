"""Helpers for the audit tests: building metadata logs batch by batch (offsets, epochs and damage under the test's
control), snapshots as Kafka lays them out, the controller's own replay as the reference state, and the audit's
Spark state reduced to the same plain Python shape."""

from __future__ import annotations

import random
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.cluster_control import ClusterControl
from controller.placement import PLACERS
from controller.records import (
    AccessControlEntryRecord,
    ApiMessage,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    LeaderChangeMessage,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    Uuid,
    Voter,
    serialize,
)
from controller.replication_control import ReplicationControl, ReplicationSettings
from controller.timeline import Timeline
from quorum.log.batch import HEADER_SIZE, build_batch
from quorum.log.control import encode_control
from quorum.log.log import METADATA_PARTITION_DIR, MetadataLog
from quorum.log.snapshots import SnapshotFileWriter, SnapshotId

TS = 1_700_000_000_000  # append time of the hand-built batches (ms)
FIRST_SEGMENT = "00000000000000000000.log"


def uid(n: int) -> Uuid:
    """A readable, deterministic topic id (never Kafka's reserved 0 and 1)."""
    return Uuid.from_int(0x5A5A_0000 + n)


def register(broker_id: int, epoch: int, rack: str | None = None) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=Uuid.from_int(0xB0000 + broker_id * 1000 + epoch),
        broker_epoch=epoch,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9000 + broker_id, security_protocol=0)],
        features=[BrokerFeature(name="metadata.version", min_supported_version=7, max_supported_version=22)],
        rack=rack,
        fenced=True,
        in_controlled_shutdown=False,
    )


def change(broker_id: int, epoch: int, *, fenced: int = 0, shutdown: int = 0) -> BrokerRegistrationChangeRecord:
    return BrokerRegistrationChangeRecord(
        broker_id=broker_id, broker_epoch=epoch, fenced=fenced, in_controlled_shutdown=shutdown
    )


def partition(
    topic_id: Uuid,
    index: int,
    replicas: list[int],
    isr: list[int] | None = None,
    leader: int | None = None,
    *,
    leader_epoch: int = 0,
    partition_epoch: int = 0,
) -> PartitionRecord:
    isr = list(replicas) if isr is None else isr
    return PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=replicas,
        isr=isr,
        leader=isr[0] if leader is None else leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        directories=[Uuid.from_int(1)] * len(replicas),
    )


def pchange(topic_id: Uuid, index: int, **fields: Any) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=index, topic_id=topic_id, **fields)


@dataclass
class LogBuilder:
    """Batches with offsets assigned in order (or where the test puts them), remembering each data record's
    offset for the reference replay."""

    batches: list[bytes] = field(default_factory=list)
    records: list[tuple[int, ApiMessage]] = field(default_factory=list)
    next_offset: int = 0
    epoch: int = 1

    def add(
        self,
        *records: ApiMessage,
        epoch: int | None = None,
        control: bool = False,
        base_offset: int | None = None,
        timestamp: int = TS,
    ) -> int:
        """Append one batch of ``records``; returns its base offset."""
        base = self.next_offset if base_offset is None else base_offset
        epoch = self.epoch if epoch is None else epoch
        pairs = [encode_control(r) for r in records] if control else [(None, serialize(r)) for r in records]
        self.batches.append(build_batch(pairs, base_offset=base, epoch=epoch, timestamp=timestamp, control=control))
        if not control:
            self.records.extend((base + i, r) for i, r in enumerate(records))
        self.next_offset = base + len(records)
        return base

    def add_raw(self, values: list[bytes], *, epoch: int | None = None, timestamp: int = TS) -> int:
        """A batch of record values as given (e.g. a frame naming an unknown apiKey)."""
        base = self.next_offset
        epoch = self.epoch if epoch is None else epoch
        self.batches.append(
            build_batch([(None, v) for v in values], base_offset=base, epoch=epoch, timestamp=timestamp)
        )
        self.next_offset = base + len(values)
        return base

    def data(self) -> bytes:
        return b"".join(self.batches)

    def positions(self) -> list[int]:
        """The byte position of every batch in the file :meth:`write` makes."""
        out, pos = [], 0
        for b in self.batches:
            out.append(pos)
            pos += len(b)
        return out

    def write(self, root: Path, name: str = FIRST_SEGMENT) -> Path:
        """One segment under ``root/__cluster_metadata-0``; returns its path."""
        directory = root / METADATA_PARTITION_DIR
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        path.write_bytes(self.data())
        return path


def snapshot_bytes(records: list[ApiMessage], epoch: int, *, per_batch: int = 2) -> bytes:
    """A snapshot written by SnapshotFileWriter as Kafka's RecordsSnapshotWriter lays it out (docs/snapshots.md): a
    control batch with the header, data batches, a control batch with the footer; offsets restart at 0. The writer
    packs batches by size, so ``per_batch`` sets a byte budget of about that many of the largest records."""
    values = [serialize(r) for r in records]
    budget = HEADER_SIZE + per_batch * (max(map(len, values), default=0) + 10)  # 10: a record's framing, at most
    with tempfile.TemporaryDirectory() as directory:
        writer = SnapshotFileWriter(Path(directory), SnapshotId(0, epoch), TS - 5, max_batch_bytes=budget,
                                    timestamp_ms=TS)  # fmt: skip
        writer.append(values)
        writer.freeze()
        return (Path(directory) / SnapshotId(0, epoch).file_name).read_bytes()


def snapshot_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


# -- the reference: the controller's own replay ------------------------------------------------------------------------


def controller_replay(records: list[tuple[int, ApiMessage]], upto: int | None = None) -> dict[str, dict]:
    """The state the live controller holds after replaying ``records`` (up to offset ``upto`` inclusive), through
    ClusterControl and ReplicationControl as QuorumController._replay drives them; a standby's timeline (no offset
    set: every change committed at once)."""
    timeline = Timeline()
    timeline.offset = None
    cluster = ClusterControl(timeline)
    replication = ReplicationControl(timeline, cluster, PLACERS["striped"](random.Random(0)), ReplicationSettings())
    for offset, record in records:
        if upto is not None and offset > upto:
            break
        cluster.replay(record)
        replication.replay(record, offset)
    return {
        "topics": {str(t.id): (t.name, t.created_offset) for t in replication.topics.values()},
        "partitions": {
            (str(topic_id), index): {
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "removing_replicas": list(p.removing),
                "adding_replicas": list(p.adding),
                "leader_recovery_state": p.leader_recovery_state,
            }
            for (topic_id, index), p in replication.partitions.items()
        },
        "brokers": {
            b.id: {
                "broker_epoch": b.epoch,
                "rack": b.rack,
                "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown,
            }
            for b in cluster.brokers.values()
        },
        "configs": {
            (resource_type, resource_name, name): value
            for (resource_type, resource_name), items in replication.configs.items()
            for name, value in items
        },
    }


def audit_state(state: Any) -> dict[str, dict]:
    """The audit's replayed state (audit.replay.State of Spark DataFrames), collected into the same shape."""
    topics: dict[str, tuple[str, int]] = {}
    for r in state.topics.collect():
        assert r.topic_id not in topics, f"topic id {r.topic_id} twice in the audit's topics"
        topics[r.topic_id] = (r.topic_name, r.created_offset)
    partitions: dict[tuple[str, int], dict] = {}
    for r in state.partitions.collect():
        key = (r.topic_id, r.partition_id)
        assert key not in partitions, f"partition {key} twice in the audit's partitions"
        partitions[key] = {
            "replicas": list(r.replicas),
            "isr": list(r.isr),
            "leader": r.leader,
            "leader_epoch": r.leader_epoch,
            "partition_epoch": r.partition_epoch,
            "removing_replicas": list(r.removing_replicas or []),
            "adding_replicas": list(r.adding_replicas or []),
            "leader_recovery_state": r.leader_recovery_state,
        }
    brokers: dict[int, dict] = {}
    for r in state.brokers.collect():
        assert r.broker_id not in brokers, f"broker {r.broker_id} twice in the audit's brokers"
        brokers[r.broker_id] = {
            "broker_epoch": r.broker_epoch,
            "rack": r.rack,
            "fenced": r.fenced,
            "in_controlled_shutdown": r.in_controlled_shutdown,
        }
    configs: dict[tuple[int, str, str], str] = {}
    for r in state.configs.collect():
        key = (r.resource_type, r.resource_name, r.config_name)
        assert key not in configs, f"config {key} twice in the audit's configs"
        configs[key] = r.config_value
    return {"topics": topics, "partitions": partitions, "brokers": brokers, "configs": configs}


def assert_same_state(actual: dict[str, dict], expected: dict[str, dict]) -> None:
    """Field by field, naming the first difference (pytest's dict diff is unreadable at this size)."""
    for table in ("topics", "partitions", "brokers", "configs"):
        a, e = actual[table], expected[table]
        assert sorted(a, key=repr) == sorted(e, key=repr), (
            f"{table}: keys differ: audit {sorted(a, key=repr)} vs reference {sorted(e, key=repr)}"
        )
        for key in e:
            if isinstance(e[key], dict):
                for name in e[key]:
                    assert a[key][name] == e[key][name], (
                        f"{table} {key} {name}: audit {a[key][name]!r}, reference {e[key][name]!r}"
                    )
            else:
                assert a[key] == e[key], f"{table} {key}: audit {a[key]!r}, reference {e[key]!r}"


def leader_change(leader: int) -> LeaderChangeMessage:
    return LeaderChangeMessage(
        leader_id=leader, voters=[Voter(voter_id=v) for v in (1, 2, 3)], granting_voters=[Voter(voter_id=leader)]
    )


def topic_config(topic: str, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=2, resource_name=topic, name=name, value=value)


# -- ACLs --------------------------------------------------------------------------------------------------------------

TOPIC, GROUP, CLUSTER = 2, 3, 4
LITERAL, PREFIXED = 3, 4
ALL, READ, WRITE, DESCRIBE = 2, 3, 4, 8
DENY, ALLOW = 2, 3


def acl_entry(
    n: int,
    principal: str,
    operation: int,
    resource_type: int = TOPIC,
    name: str = "orders",
    *,
    pattern: int = LITERAL,
    host: str = "*",
    permission: int = ALLOW,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=uid(100 + n), resource_type=resource_type, resource_name=name, pattern_type=pattern, principal=principal,
        host=host, operation=operation, permission_type=permission,
    )  # fmt: skip


SNAPSHOT_ACLS = [
    acl_entry(1, "User:bob", READ),  # removed later
    acl_entry(2, "User:*", DESCRIBE, GROUP, "g1"),  # everyone
]
ACL_SNAPSHOT_END = 3  # the log's offsets 0-2 (a leader change, then the snapshot's two ACLs)


def acl_log(root: Path) -> tuple[dict[str, int], list[ApiMessage]]:
    """A metadata log in Kafka's format whose ACLs are created, replaced (the same id again) and removed, each risky
    grant among them: a snapshot at offset 3 (Kafka's layout), and the log's batches after it, written by the log
    writer (each batch at its own time). Returns their offsets by name and every data record the audit reads, in
    order."""
    directory = root / METADATA_PARTITION_DIR
    batches: list[tuple[str, list[ApiMessage], bool]] = [
        ("leader", [leader_change(1)], True),
        ("before", SNAPSHOT_ACLS, False),  # what the snapshot holds (the audit reads the snapshot instead)
        ("cluster_all", [acl_entry(3, "User:alice", ALL, CLUSTER, "kafka-cluster")], False),
        (
            "more",
            [
                acl_entry(4, "User:carol", WRITE, name="*", host="10.0.0.5"),  # every topic
                acl_entry(5, "User:dave", ALL, name="*"),  # DENY: never risky
                acl_entry(6, "User:erin", READ, name="pay", pattern=PREFIXED, host="10.0.0.7"),
            ],
            False,
        ),
        ("removed", [RemoveAccessControlEntryRecord(id=uid(101)), RemoveAccessControlEntryRecord(id=uid(106))], False),
        ("frank", [acl_entry(7, "User:frank", READ, name="x")], False),
        ("replaced", [acl_entry(7, "User:*", ALL, name="x")], False),  # the same id again replaces the ACL
    ]
    batches[3][1][1].permission_type = DENY
    offsets: dict[str, int] = {}
    read = list(SNAPSHOT_ACLS)
    with MetadataLog.open(root) as log:
        for i, (name, records, control) in enumerate(batches):
            pairs = [encode_control(r) for r in records] if control else [(None, serialize(r)) for r in records]
            info = log.append(build_batch(pairs, epoch=1, timestamp=TS + 1000 * i, control=control))
            offsets[name] = info.base_offset
            if not control and name != "before":
                read.extend(records)
        log.flush()
    assert offsets["cluster_all"] == ACL_SNAPSHOT_END
    (directory / snapshot_name(ACL_SNAPSHOT_END, 1)).write_bytes(snapshot_bytes(SNAPSHOT_ACLS, epoch=1))
    return offsets, read
