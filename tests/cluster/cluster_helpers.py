"""Helpers for the tests that run real ``pykraft node`` processes (pykraft.testing.Cluster) on loopback.

Kafka's default timeouts throughout (election 1000 ms, fetch 2000 ms): this machine has 2 cores and other work, and
shorter timeouts cause spurious elections under load (docs/measured.md).

Every node runs a QuorumController that replays each committed record as a metadata record, so the records these
tests append are real ones: a NoOpRecord carrying the test's label in an unknown tagged field (which every reader
skips). Each value is unique, so the tests can find each acknowledged append in every log. The active controller
also writes records of its own (a NoOpRecord every metadata.max.idle.interval.ms = 500 ms when idle): logs hold
more than the tests wrote, and keep growing while a leader is up.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from controller.records.metadata import NoOpRecord
from controller.records.serde import serialize
from pykraft.testing import Cluster
from quorum.errors import Errors
from quorum.log.batch import RecordBatch
from quorum.log.log import METADATA_PARTITION_DIR
from quorum.log.reader import Damage, scan_file

ELECTION_TIMEOUT_S = 1.0  # Kafka's controller.quorum.election.timeout.ms default
FETCH_TIMEOUT_S = 2.0  # Kafka's controller.quorum.fetch.timeout.ms default
LABEL_TAG = 1000  # the unknown tagged field of a test record


def record(label: str) -> bytes:
    """A test record: a NoOpRecord (apiKey 20) framed as Kafka frames metadata records, carrying ``label``."""
    return serialize(NoOpRecord(unknown_tags=[(LABEL_TAG, label.encode())]))


# -- waiting -------------------------------------------------------------------------------------------------------


async def wait_caught_up(cluster: Cluster, timeout: float = 30.0) -> tuple[int, int, int]:
    """Wait until one leader is agreed on and every running voter holds the leader's whole log, with the high
    watermark at its end (nothing in flight); returns ``(leader, epoch, end offset)``. Everything below that end
    offset is committed (the controller goes on writing after it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        views = await asyncio.gather(*(cluster.describe(n) for n in cluster.nodes if cluster.nodes[n].running))
        if views and None not in views:
            leaders = {(v.leader_id, v.leader_epoch) for v in views}
            lead = [v for v in views if v.role == "Leader"]
            if len(leaders) == 1 and len(lead) == 1:
                end = lead[0].log_end_offset
                if all(v.log_end_offset == end and v.high_watermark == end for v in views):
                    return lead[0].leader_id, lead[0].leader_epoch, end
        await asyncio.sleep(0.05)
    raise TimeoutError(f"the running voters did not catch up within {timeout} s\n{cluster.logs()}")


# -- appending -----------------------------------------------------------------------------------------------------

RETRIABLE = frozenset({Errors.NOT_LEADER_OR_FOLLOWER, Errors.REQUEST_TIMED_OUT})


async def find_leader(cluster: Cluster, min_epoch: int = 0) -> tuple[int, int] | None:
    """A running node that says it leads, in an epoch >= ``min_epoch`` (the highest such epoch), or None."""
    best: tuple[int, int] | None = None
    for node_id, node in cluster.nodes.items():
        if not node.running:
            continue
        view = await cluster.describe(node_id, timeout=1.0)
        if view is not None and view.role == "Leader" and view.leader_epoch >= min_epoch:
            if best is None or view.leader_epoch > best[1]:
                best = (node_id, view.leader_epoch)
    return best


async def append_one(
    cluster: Cluster, label: str, acked: Acked, unknown: list[bytes], *, min_epoch: int = 0, timeout: float = 20.0
) -> tuple[int, int]:
    """Append one test record through the leader (in an epoch >= ``min_epoch``) until it is acknowledged; returns
    ``(leader, epoch)`` of the acknowledgement. An attempt answered NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT or
    UNAVAILABLE may or may not be in the log: it goes to ``unknown`` and the next attempt uses a new label, so no
    value can be committed twice. Any other error fails the test."""
    deadline = time.monotonic() + timeout
    attempt = 0
    while time.monotonic() < deadline:
        found = await find_leader(cluster, min_epoch)
        if found is None:
            await asyncio.sleep(0.01)
            continue
        node_id, _ = found
        this = record(label if attempt == 0 else f"{label}/retry-{attempt}")
        attempt += 1
        try:
            resp = await cluster.append(node_id, [this])
        except grpc.aio.AioRpcError as e:
            assert e.code() == grpc.StatusCode.UNAVAILABLE, f"append {this!r} to node {node_id}: {e}"
            unknown.append(this)
            continue
        if resp.error_code == 0:
            assert resp.base_offset == resp.last_offset, resp
            acked.add(this, resp.last_offset)
            return node_id, resp.epoch
        assert resp.error_code in RETRIABLE, f"append {this!r} to node {node_id}: {resp}"
        unknown.append(this)
    raise TimeoutError(f"{label!r} not acknowledged within {timeout} s\n{cluster.logs()}")


# -- reading the logs from disk ------------------------------------------------------------------------------------


async def append_sequentially(
    cluster: Cluster, prefix: str, n: int, acked: Acked, unknown: list[bytes], *, min_epoch: int = 0
) -> None:
    for i in range(n):
        await append_one(cluster, f"{prefix}-{i:03d}", acked, unknown, min_epoch=min_epoch)


async def stop_and_check_logs(cluster: Cluster, acked: Acked, unknown: list[bytes]) -> tuple[int, int]:
    """Let the cluster catch up, stop it (followers first), and :func:`check_logs`; everything committed must be
    in the common prefix. Returns the ``(leader, epoch)`` it agreed on before stopping."""
    leader, epoch, committed = await wait_caught_up(cluster)
    cluster.stop_followers_first(leader)
    _, common_end = check_logs(cluster, acked, unknown)
    assert common_end >= committed
    return leader, epoch


def read_log(data_dir: Path) -> list[RecordBatch]:
    """Every batch of a stopped node's ``__cluster_metadata-0/*.log`` segments, checked: valid CRCs, no damage,
    contiguous offsets from 0."""
    batches: list[RecordBatch] = []
    segments = sorted((data_dir / METADATA_PARTITION_DIR).glob("*.log"))
    assert segments, f"no log segments in {data_dir}"
    for path in segments:
        for item in scan_file(path):
            assert not isinstance(item, Damage), f"damaged log: {item}"
            assert item.crc_valid(), f"{path}: bad CRC in {item!r}"
            batches.append(item)
    expected = 0
    for b in batches:
        assert b.base_offset == expected, f"{data_dir}: batch {b!r} found where offset {expected} was expected"
        expected = b.next_offset
    return batches


def data_records(batches: list[RecordBatch]) -> list[tuple[int, bytes]]:
    """``(offset, value)`` of every data (non-control) record, in log order."""
    return [(r.offset, r.value or b"") for b in batches if not b.is_control for r in b.records()]


@dataclass
class Acked:
    """Appends answered with error_code 0, in the order they were acknowledged."""

    values: list[bytes] = field(default_factory=list)
    offsets: dict[bytes, int] = field(default_factory=dict)

    def add(self, value: bytes, offset: int) -> None:
        assert value not in self.offsets, f"value {value!r} appended twice by the test"
        self.values.append(value)
        self.offsets[value] = offset


def check_logs(
    cluster: Cluster, acked: Acked, unknown: list[bytes] | tuple[bytes, ...] = (), *, ordered: bool = True
) -> tuple[dict[int, list[RecordBatch]], int]:
    """Read every (stopped) node's log and check: identical batch bytes up to the minimum common end (returned with
    the batches); every acknowledged value on every node exactly once, at the offset its acknowledgement gave, in
    acknowledgement order (``ordered``); no value the test sent (acknowledged or ``unknown``) present twice."""
    logs = {n: read_log(node.data_dir) for n, node in cluster.nodes.items()}
    common_end = min(batches[-1].next_offset for batches in logs.values())
    reference = next(iter(logs))
    for n, batches in logs.items():
        mine = [b.buffer for b in batches if b.next_offset <= common_end]
        theirs = [b.buffer for b in logs[reference] if b.next_offset <= common_end]
        assert len(mine) == len(theirs) and mine == theirs, (
            f"node {n} and node {reference} differ below offset {common_end}"
        )
    sent = set(acked.values) | set(unknown)
    for n, batches in logs.items():
        records = data_records(batches)
        by_offset = dict(records)
        duplicated = {v for v, count in Counter(v for _, v in records if v in sent).items() if count > 1}
        assert not duplicated, f"node {n}: values present more than once: {sorted(duplicated)[:5]}"
        missing = [v for v in acked.values if by_offset.get(acked.offsets[v]) != v]
        assert not missing, f"node {n}: {len(missing)} acknowledged records missing or misplaced, e.g. {missing[:5]}"
        if ordered:
            position = {v: i for i, (_, v) in enumerate(records)}
            in_log_order = sorted(acked.values, key=position.__getitem__)
            assert in_log_order == acked.values, f"node {n}: acknowledged records not in acknowledgement order"
    return logs, common_end
