"""One module per Kafka API; importing this package registers them all (:mod:`pykraft.kafka.registry`)."""

from pykraft.kafka.apis import api_versions, create_topics, delete_topics, describe_acls, describe_cluster, metadata

__all__ = ["api_versions", "create_topics", "delete_topics", "describe_acls", "describe_cluster", "metadata"]
