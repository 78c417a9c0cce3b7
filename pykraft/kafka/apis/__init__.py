"""One module per Kafka API; importing this package registers them all (:mod:`pykraft.kafka.registry`)."""

from pykraft.kafka.apis import (
    alter_configs,
    api_versions,
    client_quotas,
    create_acls,
    create_partitions,
    create_topics,
    delete_acls,
    delete_topics,
    describe_acls,
    describe_cluster,
    describe_configs,
    describe_quorum,
    elect_leaders,
    incremental_alter_configs,
    metadata,
    partition_reassignments,
)

__all__ = [
    "alter_configs",
    "api_versions",
    "client_quotas",
    "create_acls",
    "create_partitions",
    "create_topics",
    "delete_acls",
    "delete_topics",
    "describe_acls",
    "describe_cluster",
    "describe_configs",
    "describe_quorum",
    "elect_leaders",
    "incremental_alter_configs",
    "metadata",
    "partition_reassignments",
]
