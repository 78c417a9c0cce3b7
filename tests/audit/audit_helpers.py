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
    ApiMessage,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    LeaderChangeMessage,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    Uuid,
    Voter,
    serialize,
)
from controller.replication_control import ReplicationControl, ReplicationSettings
from controller.timeline import Timeline
from quorum.log.batch import HEADER_SIZE, build_batch
from quorum.log.control import encode_control
from quorum.log.log import METADATA_PARTITION_DIR
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
