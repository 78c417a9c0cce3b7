"""``pykraft demo``: write a small but realistic metadata log with the real writer, as a KRaft controller would.

Each run appends one leader epoch to ``<data-dir>/__cluster_metadata-0``: the new leader's LeaderChangeMessage,
(on an empty log) the bootstrap records and broker registrations, then a topic with its config and partitions.
"""

from __future__ import annotations

import time
from pathlib import Path

from controller.records import (
    BeginTransactionRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    EndTransactionRecord,
    FeatureLevelRecord,
    LeaderChangeMessage,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    Uuid,
    Voter,
    ZkMigrationStateRecord,
    serialize,
)
from quorum.log.batch import build_batch
from quorum.log.control import encode_control
from quorum.log.log import MetadataLog

METADATA_VERSION_4_0_IV0 = 22
TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC
VOTERS = (1, 2, 3)
BROKERS = {101: "r1", 102: "r2", 103: "r3"}


def write_demo_log(data_dir: Path | str) -> tuple[Path, int, int]:
    """Append one epoch of demo records; returns (log directory, first offset written, end offset)."""
    with MetadataLog.open(data_dir) as log:
        first = log.end_offset
        epoch = log.last_epoch + 1
        leader = VOTERS[(epoch - 1) % len(VOTERS)]
        now = int(time.time() * 1000)

        def append(records: list, control: bool = False) -> None:
            pairs = [encode_control(r) for r in records] if control else [(None, serialize(r)) for r in records]
            log.append(build_batch(pairs, epoch=epoch, timestamp=now, control=control))

        append(
            [
                LeaderChangeMessage(
                    leader_id=leader,
                    voters=[Voter(voter_id=v) for v in VOTERS],
                    granting_voters=[Voter(voter_id=v) for v in VOTERS[:2]],
                )
            ],
            control=True,
        )
        if first == 0:
            append(
                [
                    BeginTransactionRecord(name="Bootstrap records"),
                    FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION_4_0_IV0),
                    ZkMigrationStateRecord(zk_migration_state=0),
                    EndTransactionRecord(),
                ]
            )
            for broker_id, rack in BROKERS.items():
                append([_register(broker_id, rack, epoch=first + broker_id)])
            append([BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=first + b, fenced=-1) for b in BROKERS])
        topic_id = Uuid.random()
        name = f"demo-{epoch}"
        brokers = list(BROKERS)
        partitions = [
            PartitionRecord(
                partition_id=p,
                topic_id=topic_id,
                replicas=(replicas := [brokers[(p + i) % 3] for i in range(3)]),
                isr=list(replicas),
                leader=replicas[0],
                leader_epoch=0,
                partition_epoch=0,
                directories=[Uuid.from_int(1)] * 3,
            )
            for p in range(3)
        ]
        config = ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=name, name="retention.ms", value="86400000")
        append([TopicRecord(name=name, topic_id=topic_id), config, *partitions])
        append([NoOpRecord()])
        append([PartitionChangeRecord(partition_id=0, topic_id=topic_id, isr=partitions[0].replicas[:2])])
        log.flush()
        return log.dir, first, log.end_offset


def _register(broker_id: int, rack: str, epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=Uuid.random(),
        broker_epoch=epoch,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="localhost", port=9000 + broker_id, security_protocol=0)],
        features=[BrokerFeature(name="metadata.version", min_supported_version=7, max_supported_version=22)],
        rack=rack,
        fenced=True,
        log_dirs=[Uuid.random()],
    )
