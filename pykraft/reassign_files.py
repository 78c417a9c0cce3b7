"""The files and text of ``pykraft reassign-partitions``: Kafka's reassignment and topics-to-move JSON (parsed and
checked as its ReassignPartitionsCommand does, one clear error each) and what the command prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pykraft.cli_common import UsageError, load_versioned_json
from pykraft.client import PartitionReassignment

TopicPartition = tuple[str, int]
ANY_LOG_DIR = "any"


# -- files -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Move:
    """One partition of a reassignment file: where it should be."""

    topic: str
    partition: int
    replicas: tuple[int, ...]

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)


def tp_name(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"


def ids_text(ids: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)


def _java_list(items: list[Any]) -> str:
    return "[" + ", ".join(str(i) for i in items) + "]"


def plural(n: int, word: str) -> str:
    return word if n == 1 else f"{word}s"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _entries(data: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    items = data.get(key, [])  # absent: none, as Kafka
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise UsageError(f'{where}: "{key}" must be a list of objects')
    return items


def parse_reassignment(text: str, where: str = "--reassignment-json-file") -> list[Move]:
    """Kafka's parsePartitionReassignmentData, each field's type checked; log_dirs may only say "any"."""
    moves = []
    for i, item in enumerate(_entries(load_versioned_json(text, where), "partitions", where)):
        at = f"{where}: partitions[{i}]"
        topic, partition, replicas = item.get("topic"), item.get("partition"), item.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise UsageError(f'{at}: "topic" must be a topic name, got {json.dumps(topic)}')
        if not _is_int(partition) or partition < 0:
            raise UsageError(f'{at}: "partition" must be a partition index (0 or more), got {json.dumps(partition)}')
        if not isinstance(replicas, list) or not all(_is_int(r) for r in replicas):
            raise UsageError(f'{at}: "replicas" must be a list of broker ids, got {json.dumps(replicas)}')
        log_dirs = item.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or not all(isinstance(d, str) for d in log_dirs):
            raise UsageError(f'{at}: "log_dirs" must be a list of strings, got {json.dumps(log_dirs)}')
        if len(log_dirs) != len(replicas):
            raise UsageError(
                f"{where}: Size of replicas list {_java_list(replicas)} is different from size of log dirs list "
                f"{_java_list(log_dirs)} for partition {topic}-{partition}"
            )
        for d in log_dirs:
            if d != ANY_LOG_DIR:
                raise UsageError(
                    f'{at}: log dir "{d}" for partition {topic}-{partition}: pykraft brokers have no log '
                    f'directories, so "log_dirs" can only say "{ANY_LOG_DIR}"'
                )
        moves.append(Move(topic, partition, tuple(replicas)))
    return moves


def check_no_duplicate_partitions(moves: list[Move]) -> None:
    tps = [m.tp for m in moves]
    duplicates = sorted({tp for tp in tps if tps.count(tp) > 1})
    if duplicates:
        listed = ",".join(tp_name(tp) for tp in duplicates)
        raise UsageError(f"Partition reassignment contains duplicate topic partitions: {listed}")


def check_for_execute(moves: list[Move]) -> None:
    """Kafka's parseExecuteAssignmentArgs."""
    if not moves:
        raise UsageError("Partition reassignment list cannot be empty")
    empty = [tp_name(m.tp) for m in moves if not m.replicas]
    if empty:
        raise UsageError(f"Partition replica list cannot be empty: {','.join(empty)}")
    check_no_duplicate_partitions(moves)
    repeated = []
    for m in moves:
        twice = sorted({r for r in m.replicas if m.replicas.count(r) > 1})
        if twice:
            repeated.append(f"{tp_name(m.tp)} contains multiple entries for {ids_text(twice)}")
    if repeated:
        raise UsageError(f"Partition replica lists may not contain duplicate entries: {'. '.join(repeated)}")


def parse_topics_to_move(text: str, where: str = "--topics-to-move-json-file") -> list[str]:
    topics = []
    for i, item in enumerate(_entries(load_versioned_json(text, where), "topics", where)):
        topic = item.get("topic")
        if not isinstance(topic, str) or not topic:
            raise UsageError(f'{where}: topics[{i}]: "topic" must be a topic name, got {json.dumps(topic)}')
        topics.append(topic)
    if not topics:
        raise UsageError(f'{where}: no topics to move (the format: {{"version":1,"topics":[{{"topic":"foo"}}]}})')
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise UsageError(f"List of topics to reassign contains duplicate entries: {_java_list(duplicates)}")
    return topics


def parse_broker_list(text: str) -> list[int]:
    brokers = []
    for part in text.split(","):
        try:
            brokers.append(int(part.strip()))
        except ValueError:
            raise UsageError(f"--broker-list: {part.strip()!r} is not a broker id") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise UsageError(f"Broker list contains duplicate entries: {_java_list(duplicates)}")
    return brokers


# -- output ------------------------------------------------------------------------------------------------------


def reassignment_json(assignment: dict[TopicPartition, list[int]]) -> str:
    """Kafka's formatAsReassignmentJson: compact, partitions sorted by topic then index."""
    partitions = [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": [ANY_LOG_DIR] * len(r)}
        for (t, p), r in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def list_text(reassignments: dict[TopicPartition, PartitionReassignment]) -> str:
    lines = []
    for tp, r in sorted(reassignments.items()):
        line = f"{tp_name(tp)}: replicas: {ids_text(r.replicas)}."
        line += f" adding: {ids_text(r.adding_replicas)}." if r.adding_replicas else ""
        line += f" removing: {ids_text(r.removing_replicas)}." if r.removing_replicas else ""
        lines.append(line)
    return "Current partition reassignments:\n" + "\n".join(lines) if lines else "No partition reassignments found."


@dataclass(frozen=True)
class Progress:
    """How far a replica being added has got: its size beside the leader's, or why that is not known."""

    broker: int
    size: int | None = None
    leader_size: int | None = None
    why: str = ""

    def text(self) -> str:
        if self.size is None or self.leader_size is None:
            return f"  adding replica {self.broker}: progress unknown ({self.why})"
        pct = 100.0 if self.leader_size <= 0 else min(100.0, 100.0 * self.size / self.leader_size)
        return f"  adding replica {self.broker}: {self.size} of {self.leader_size} bytes ({pct:.0f}%)"


@dataclass(frozen=True)
class PartitionState:
    """Kafka's PartitionReassignmentState, with the progress of the replicas being added."""

    tp: TopicPartition
    current: tuple[int, ...]
    target: tuple[int, ...]
    done: bool
    progress: tuple[Progress, ...] = ()


def status_text(states: list[PartitionState]) -> str:
    lines = ["Status of partition reassignment:"]
    for s in sorted(states, key=lambda s: s.tp):
        if not s.done:
            lines.append(f"Reassignment of partition {tp_name(s.tp)} is still in progress.")
            lines.extend(p.text() for p in s.progress)
        elif s.current == s.target:
            lines.append(f"Reassignment of partition {tp_name(s.tp)} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp_name(s.tp)}, but replica set is "
                f"{ids_text(s.current)} rather than {ids_text(s.target)}."
            )
    return "\n".join(lines)


def wait_text(states: list[PartitionState], width: int = 30) -> str:
    """--wait's line: a bar, the partitions done, and the bytes copied (when every size is known)."""
    done, n = sum(1 for s in states if s.done), len(states)
    progress = [p for s in states if not s.done for p in s.progress]
    known = all(p.size is not None and p.leader_size is not None for p in progress)
    copied = sum(min(p.size or 0, p.leader_size or 0) for p in progress)
    total = sum(p.leader_size or 0 for p in progress)
    fraction = (done + (copied / total if known and total else 0) * (n - done)) / n if n else 1.0
    line = f"[{'#' * int(fraction * width):-<{width}}] {fraction * 100:3.0f}%  {done}/{n} partitions done"
    if progress:
        line += f", {copied} of {total} bytes copied" if known else ", bytes copied unknown"
    return line
