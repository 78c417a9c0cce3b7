"""Kafka's rules for topic names (``Topic.validate``), shared by every request that names a topic, and
:func:`shown`, how messages and log lines echo a name a client sent."""

from __future__ import annotations

import re

from quorum.errors import Errors, KafkaError

MAX_NAME_LENGTH = 249
# Names up to this long are echoed whole: every legal name, and one a little too long gets Kafka's message as is.
SHOWN_WHOLE_CHARS = 512
SHOWN_PREFIX_CHARS = 100


def shown(name: str) -> str:
    """``name`` as a message or log line echoes it: whole up to SHOWN_WHOLE_CHARS, else its first
    SHOWN_PREFIX_CHARS characters and its length. A request may name a topic (or a config) of up to ~16 MiB:
    echoed whole, an answer that also carries the name would pass the 16 MiB send limit (the client got a transport
    error instead of INVALID_TOPIC_EXCEPTION), and every log line naming it would be megabytes."""
    if len(name) <= SHOWN_WHOLE_CHARS:
        return name
    return f"{name[:SHOWN_PREFIX_CHARS]}…({len(name)} chars)"


_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(name: str) -> None:
    """Kafka's ``Topic.validate``, with its messages."""
    if not name:
        raise KafkaError("Topic name is illegal, it can't be empty", Errors.INVALID_TOPIC_EXCEPTION)
    if name in (".", ".."):
        raise KafkaError('Topic name cannot be "." or ".."', Errors.INVALID_TOPIC_EXCEPTION)
    if len(name) > MAX_NAME_LENGTH:
        raise KafkaError(
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {shown(name)}",
            Errors.INVALID_TOPIC_EXCEPTION,
        )
    if not _LEGAL.fullmatch(name):
        raise KafkaError(
            f'Topic name "{shown(name)}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'",
            Errors.INVALID_TOPIC_EXCEPTION,
        )
