"""The violations grouped by root cause, for the report: each finding that has a cause already listed goes under it
as a consequence, so a reader sees first what went wrong and then, folded, what it led to.

What links findings (``audit.invariants`` and ``audit.record_checks`` name what they are about in their
explanations):

- damage to the log (``readable``, ``crc_valid``, ``offsets_contiguous``, ``epochs_non_decreasing``) loses or
  reorders records; a later finding that a lost record explains (a partition or topic that does not exist, a broker
  not registered, partitions numbered out of order, ...) is its consequence — the nearest damage before it;
- a finding about the same partition (its topic id and index, or its topic's name and index in the final state) as
  an earlier one is that one's consequence: a record that leaves the ISR wrong shows again in the final state;
- likewise for the same topic (a topic's partition records outside its lifetime) and the same broker (named before
  it registered: every record naming it).

Roots come first (damage, then the records' findings by offset, then the final state's); the rest follow each root.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

DAMAGE = ("readable", "crc_valid", "offsets_contiguous", "epochs_non_decreasing")
# What a lost (or misplaced) record shows up as further on.
LOST_RECORD = (
    "partition_exists",
    "partition_of_existing_topic",
    "brokers_registered",
    "partitions_added_in_order",
    "partition_ids_contiguous",
    "remove_of_existing_topic",
    "config_of_existing_topic",
    "remove_of_existing_acl",
    "partition_epochs_increase",
    "reassignment_ends_at_target_or_original",
)  # (not a leader outside the ISR: a record can say that on its own, and hiding it under damage would mislead)
TOPIC_LEVEL = ("partition_of_existing_topic", "partitions_added_in_order", "partition_ids_contiguous")

_PARTITION = re.compile(r"partition (\d+) of topic id ([A-Za-z0-9_-]+)")
_FINAL_PARTITION = re.compile(r"final state: partition (.+)-(\d+) has ")
_TOPIC_NAME = re.compile(r"topic '(.+?)' has ")
_TOPIC_ID = re.compile(r"topic id ([A-Za-z0-9_-]+)")
_BROKER = re.compile(r"names broker (\d+)")


@dataclass
class Group:
    root: dict[str, Any]
    consequences: list[dict[str, Any]] = field(default_factory=list)


def _keys(finding: dict[str, Any], topic_ids: dict[str, str]) -> tuple[tuple | None, tuple | None]:
    """(the partition it is about, the topic or broker it is about), each a key or None."""
    text = finding.get("explanation") or ""
    partition = topic = None
    if m := _PARTITION.search(text):
        partition, topic = ("partition", m[2], int(m[1])), ("topic", m[2])
    elif m := _FINAL_PARTITION.search(text):
        tid = topic_ids.get(m[1], "name:" + m[1])
        partition, topic = ("partition", tid, int(m[2])), ("topic", tid)
    elif m := _TOPIC_NAME.search(text):
        topic = ("topic", topic_ids.get(m[1], "name:" + m[1]))
    elif m := _TOPIC_ID.search(text):
        topic = ("topic", m[1])
    if m := _BROKER.search(text):
        topic = ("broker", int(m[1]))
    return partition, topic


def _rank(finding: dict[str, Any]) -> tuple:
    offset = finding.get("offset")
    return (
        0 if finding["check"] in DAMAGE else (1 if offset is not None else 2),
        offset if offset is not None else 0,
    )


def group(findings: list[dict[str, Any]], topic_ids: dict[str, str] | None = None) -> list[Group]:
    """The ``findings`` (rows of the violations table: check, offset, file, position, explanation) as groups, roots
    first. ``topic_ids``: topic name -> id, to match the final state's findings (by name) with the records' (by
    id)."""
    topic_ids = topic_ids or {}
    ordered = sorted(enumerate(findings), key=lambda item: (*_rank(item[1]), item[0]))
    groups: list[Group] = []
    about: dict[tuple, Group] = {}
    damage: list[tuple[int, Group]] = []  # (offset, its group), by offset
    for _, finding in ordered:
        check = finding["check"]
        partition, topic = _keys(finding, topic_ids)
        owner = about.get(partition) if partition else None
        if owner is None and topic is not None and (check in TOPIC_LEVEL or topic[0] == "broker"):
            owner = about.get(topic)
        if owner is None and check in LOST_RECORD and damage:
            offset = finding.get("offset")
            before = [g for at, g in damage if offset is None or at is None or at <= offset]
            owner = before[-1] if before else None
        if owner is None:
            owner = Group(finding)
            groups.append(owner)
            if check in DAMAGE:
                damage.append((finding.get("offset"), owner))
        else:
            owner.consequences.append(finding)
        if partition is not None:
            about.setdefault(partition, owner)
        if topic is not None and (partition is None or check in TOPIC_LEVEL or topic[0] == "broker"):
            about.setdefault(topic, owner)
    return groups
