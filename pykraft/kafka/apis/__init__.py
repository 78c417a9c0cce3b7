"""One module per Kafka API; importing this package registers them all (:mod:`pykraft.kafka.registry`)."""

from pykraft.kafka.apis import api_versions, metadata

__all__ = ["api_versions", "metadata"]
