"""Every data record of the ``__cluster_metadata`` log (apiKeys 0-27), one declarative spec each.

Written from Kafka's metadata schemas (``metadata/src/main/resources/common/metadata/*.json`` in Kafka's source):
the same field names, types, version ranges, nullability, tags and defaults. ``write_version`` is the version
Kafka 4.0 (metadata.version 4.0-IV0) writes. Python attribute names are the snake_case of Kafka's field names.
"""

from __future__ import annotations

from quorum.log.message import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UINT16,
    UUID,
    Field,
    Message,
    Struct,
)
from quorum.log.message import array as A

# -- brokers and controllers -------------------------------------------------------------------------------------

_BrokerEndpoint = Struct(
    "BrokerEndpoint",
    [Field("Name", STRING), Field("Host", STRING), Field("Port", UINT16), Field("SecurityProtocol", INT16)],
)
_BrokerFeature = Struct(
    "BrokerFeature", [Field("Name", STRING), Field("MinSupportedVersion", INT16), Field("MaxSupportedVersion", INT16)]
)

RegisterBrokerRecord = Message(
    "RegisterBrokerRecord",
    [
        Field("BrokerId", INT32),
        Field("IsMigratingZkBroker", BOOL, "2+", default=False),
        Field("IncarnationId", UUID),
        Field("BrokerEpoch", INT64),
        Field("EndPoints", A(_BrokerEndpoint)),
        Field("Features", A(_BrokerFeature)),
        Field("Rack", STRING, nullable="0+"),
        Field("Fenced", BOOL, default=True),
        Field("InControlledShutdown", BOOL, "1+", default=False),
        Field("LogDirs", A(UUID), "3+", tag=0),
    ],
    api_key=0,
    versions="0-3",
    write_version=3,
).cls

UnregisterBrokerRecord = Message(
    "UnregisterBrokerRecord", [Field("BrokerId", INT32), Field("BrokerEpoch", INT64)], api_key=1
).cls

FenceBrokerRecord = Message("FenceBrokerRecord", [Field("Id", INT32), Field("Epoch", INT64)], api_key=7).cls
UnfenceBrokerRecord = Message("UnfenceBrokerRecord", [Field("Id", INT32), Field("Epoch", INT64)], api_key=8).cls

BrokerRegistrationChangeRecord = Message(
    "BrokerRegistrationChangeRecord",
    [
        Field("BrokerId", INT32),
        Field("BrokerEpoch", INT64),
        # -1 unfenced, 0 no change, 1 fenced (BrokerRegistrationFencingChange)
        Field("Fenced", INT8, tag=0),
        Field("InControlledShutdown", INT8, "1+", tag=1),
        Field("LogDirs", A(UUID), "2+", tag=2),
    ],
    api_key=17,
    versions="0-2",
    write_version=0,  # 1 when it carries a controlled shutdown, 2 when it carries log dirs
).cls

_ControllerEndpoint = Struct(
    "ControllerEndpoint",
    [Field("Name", STRING), Field("Host", STRING), Field("Port", UINT16), Field("SecurityProtocol", INT16)],
)
_ControllerFeature = Struct(
    "ControllerFeature",
    [Field("Name", STRING), Field("MinSupportedVersion", INT16), Field("MaxSupportedVersion", INT16)],
)

RegisterControllerRecord = Message(
    "RegisterControllerRecord",
    [
        Field("ControllerId", INT32),
        Field("IncarnationId", UUID),
        Field("ZkMigrationReady", BOOL),
        Field("EndPoints", A(_ControllerEndpoint)),
        Field("Features", A(_ControllerFeature)),
    ],
    api_key=27,
).cls

# -- topics and partitions ---------------------------------------------------------------------------------------

TopicRecord = Message("TopicRecord", [Field("Name", STRING), Field("TopicId", UUID)], api_key=2).cls

PartitionRecord = Message(
    "PartitionRecord",
    [
        Field("PartitionId", INT32, default=-1),
        Field("TopicId", UUID),
        Field("Replicas", A(INT32)),
        Field("Isr", A(INT32)),
        Field("RemovingReplicas", A(INT32)),
        Field("AddingReplicas", A(INT32)),
        Field("Leader", INT32, default=-1),
        Field("LeaderRecoveryState", INT8, tag=0, default=0),
        Field("LeaderEpoch", INT32, default=-1),
        Field("PartitionEpoch", INT32, default=-1),
        Field("Directories", A(UUID), "1+"),
        Field("EligibleLeaderReplicas", A(INT32), "2+", nullable="2+", tag=1, default=None),
        Field("LastKnownElr", A(INT32), "2+", nullable="2+", tag=2, default=None),
    ],
    api_key=3,
    versions="0-2",
    write_version=1,
).cls

PartitionChangeRecord = Message(
    "PartitionChangeRecord",
    [
        Field("PartitionId", INT32, default=-1),
        Field("TopicId", UUID),
        Field("Isr", A(INT32), nullable="0+", tag=0, default=None),
        Field("Leader", INT32, tag=1, default=-2),  # -1 no leader, -2 unchanged
        Field("Replicas", A(INT32), nullable="0+", tag=2, default=None),
        Field("RemovingReplicas", A(INT32), nullable="0+", tag=3, default=None),
        Field("AddingReplicas", A(INT32), nullable="0+", tag=4, default=None),
        Field("LeaderRecoveryState", INT8, tag=5, default=-1),
        Field("Directories", A(UUID), "1+", nullable="1+", tag=8, default=None),
        Field("EligibleLeaderReplicas", A(INT32), "2+", nullable="2+", tag=6, default=None),
        Field("LastKnownElr", A(INT32), "2+", nullable="2+", tag=7, default=None),
    ],
    api_key=5,
    versions="0-2",
    write_version=1,
).cls

RemoveTopicRecord = Message("RemoveTopicRecord", [Field("TopicId", UUID)], api_key=9).cls

ConfigRecord = Message(
    "ConfigRecord",
    [
        Field("ResourceType", INT8),  # ConfigResource.Type: 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER, 16 CLIENT_METRICS
        Field("ResourceName", STRING),
        Field("Name", STRING),
        Field("Value", STRING, nullable="0+"),
    ],
    api_key=4,
).cls

# -- features, no-ops, producer ids, transactions, migration -------------------------------------------------------

FeatureLevelRecord = Message(
    "FeatureLevelRecord", [Field("Name", STRING), Field("FeatureLevel", INT16)], api_key=12
).cls

NoOpRecord = Message("NoOpRecord", [], api_key=20).cls

ProducerIdsRecord = Message(
    "ProducerIdsRecord",
    [Field("BrokerId", INT32), Field("BrokerEpoch", INT64, default=-1), Field("NextProducerId", INT64)],
    api_key=15,
).cls

BeginTransactionRecord = Message(
    "BeginTransactionRecord", [Field("Name", STRING, nullable="0+", tag=0, default=None)], api_key=23
).cls
EndTransactionRecord = Message("EndTransactionRecord", [], api_key=24).cls
AbortTransactionRecord = Message(
    "AbortTransactionRecord", [Field("Reason", STRING, nullable="0+", tag=0, default=None)], api_key=25
).cls

ZkMigrationStateRecord = Message(
    "ZkMigrationStateRecord",
    [Field("ZkMigrationState", INT8)],
    api_key=21,  # 0 None, 1 Migration, 2 Pre, 3 Post
).cls

# -- quotas, ACLs, SCRAM, delegation tokens ------------------------------------------------------------------------

_EntityData = Struct("EntityData", [Field("EntityType", STRING), Field("EntityName", STRING, nullable="0+")])

ClientQuotaRecord = Message(
    "ClientQuotaRecord",
    [Field("Entity", A(_EntityData)), Field("Key", STRING), Field("Value", FLOAT64), Field("Remove", BOOL)],
    api_key=14,
).cls

AccessControlEntryRecord = Message(
    "AccessControlEntryRecord",
    [
        Field("Id", UUID),
        Field("ResourceType", INT8),
        Field("ResourceName", STRING),
        Field("PatternType", INT8),
        Field("Principal", STRING),
        Field("Host", STRING),
        Field("Operation", INT8),
        Field("PermissionType", INT8),
    ],
    api_key=18,
).cls

RemoveAccessControlEntryRecord = Message("RemoveAccessControlEntryRecord", [Field("Id", UUID)], api_key=19).cls

UserScramCredentialRecord = Message(
    "UserScramCredentialRecord",
    [
        Field("Name", STRING),
        Field("Mechanism", INT8),
        Field("Salt", BYTES),
        Field("StoredKey", BYTES),
        Field("ServerKey", BYTES),
        Field("Iterations", INT32),
    ],
    api_key=11,
).cls

RemoveUserScramCredentialRecord = Message(
    "RemoveUserScramCredentialRecord", [Field("Name", STRING), Field("Mechanism", INT8)], api_key=22
).cls

DelegationTokenRecord = Message(
    "DelegationTokenRecord",
    [
        Field("Owner", STRING),
        Field("Requester", STRING),
        Field("Renewers", A(STRING)),
        Field("IssueTimestamp", INT64),
        Field("MaxTimestamp", INT64),
        Field("ExpirationTimestamp", INT64),
        Field("TokenId", STRING),
    ],
    api_key=10,
).cls

RemoveDelegationTokenRecord = Message("RemoveDelegationTokenRecord", [Field("TokenId", STRING)], api_key=26).cls

# Nested struct classes, for building records.
BrokerEndpoint = _BrokerEndpoint.cls
BrokerFeature = _BrokerFeature.cls
ControllerEndpoint = _ControllerEndpoint.cls
ControllerFeature = _ControllerFeature.cls
EntityData = _EntityData.cls

DATA_RECORDS = (
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    TopicRecord,
    PartitionRecord,
    ConfigRecord,
    PartitionChangeRecord,
    FenceBrokerRecord,
    UnfenceBrokerRecord,
    RemoveTopicRecord,
    DelegationTokenRecord,
    UserScramCredentialRecord,
    FeatureLevelRecord,
    ClientQuotaRecord,
    ProducerIdsRecord,
    BrokerRegistrationChangeRecord,
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    NoOpRecord,
    ZkMigrationStateRecord,
    RemoveUserScramCredentialRecord,
    BeginTransactionRecord,
    EndTransactionRecord,
    AbortTransactionRecord,
    RemoveDelegationTokenRecord,
    RegisterControllerRecord,
)
