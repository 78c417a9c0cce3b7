"""Kafka's rules for topic names (``Topic.validate``), shared by every request that names a topic."""

from __future__ import annotations

import re

from quorum.errors import Errors, KafkaError

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``, with its messages."""
    if not name:
        raise KafkaError("Topic name is illegal, it can't be empty", Errors.INVALID_TOPIC_EXCEPTION)
    if name in (".", ".."):
        raise KafkaError('Topic name cannot be "." or ".."', Errors.INVALID_TOPIC_EXCEPTION)
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
            Errors.INVALID_TOPIC_EXCEPTION,
        )
    if not _LEGAL.fullmatch(name):
        raise KafkaError(
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'",
            Errors.INVALID_TOPIC_EXCEPTION,
        )
