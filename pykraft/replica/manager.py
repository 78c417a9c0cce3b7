"""The replicas of one broker (Kafka's ``ReplicaManager``, minus the storage) and the AlterPartition channel to the
controller (Kafka's ``AlterPartitionManager``).

:class:`ReplicaManager` is synchronous and reads time only through the clock it is given, so tests drive it with a
virtual one. It answers fetches as a leader, applies fetch answers as a follower, applies the controller's
metadata, and hands every ISR change to ``submit``. :class:`AlterPartitionSender` is the one asynchronous piece:
one AlterPartition in flight per broker carrying every change waiting to go, as Kafka's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import structlog

from controller.requests import AlterPartitionData, AlterPartitionResponse, AlterPartitionResult, AlterPartitionTopic
from pykraft.replica.partition import (
    MESSAGE_BYTES,
    BrokerState,
    BrokerView,
    ChangeKind,
    FetchAnswer,
    Partition,
    PartitionMetadata,
    PendingChange,
    ReplicaConfig,
)
from quorum.errors import Errors, KafkaError
from quorum.log.message import Uuid

log = structlog.get_logger("pykraft.replica")

PartitionKey = tuple[Uuid, int]


@dataclass
class ReplicaCounters:
    fetches_answered: int = 0  # fetch requests answered as a leader
    messages_sent: int = 0  # messages those answers carried
    fetches_sent: int = 0  # fetch requests sent as a follower
    messages_fetched: int = 0
    isr_shrinks: int = 0
    isr_expands: int = 0
    alter_partition_errors: dict[str, int] = field(default_factory=dict)


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        config: ReplicaConfig,
        clock: Callable[[], int],
        broker_epoch: Callable[[], int],
    ) -> None:
        self.broker_id = broker_id
        self.config = config
        self.clock = clock
        self.broker_epoch = broker_epoch
        self.partitions: dict[PartitionKey, Partition] = {}
        self.brokers = BrokerView()
        self.submit: Callable[[PendingChange], None] = lambda change: None
        self.request_refresh: Callable[[], None] = lambda: None
        self.counters = ReplicaCounters()

    # -- metadata -----------------------------------------------------------------------------------------------

    def apply_metadata(self, partitions: Iterable[PartitionMetadata], brokers: dict[int, BrokerState]) -> int:
        """The controller's current view: every partition (those without a replica here are skipped) and every
        registered broker. Partitions that no longer have a replica here are dropped. Returns how many partitions
        changed state."""
        now = self.clock()
        epoch = self.broker_epoch()
        self.brokers = BrokerView(brokers)
        seen: set[PartitionKey] = set()
        changed = 0
        for m in partitions:
            if self.broker_id not in m.replicas:
                continue
            key = (m.topic_id, m.index)
            seen.add(key)
            p = self.partitions.get(key)
            if p is None:
                p = self.partitions[key] = Partition(m.topic_id, m.topic, m.index, self.broker_id, self.config)
            before = p.metadata_seen
            change = p.apply_metadata(m, now, epoch)
            if p.metadata_seen != before:
                changed += 1
            if change is not None:
                self.submit(change)
        for key in [k for k in self.partitions if k not in seen]:
            p = self.partitions.pop(key)
            log.info("replica_removed", topic=p.topic, partition=p.index, topic_id=str(p.topic_id))
        return changed

    # -- leader -------------------------------------------------------------------------------------------------

    def answer_fetch(
        self, replica_id: int, replica_epoch: int, max_bytes: int, items: Iterable[tuple[bytes, int, int, int, int]]
    ) -> list[tuple[bytes, int, FetchAnswer]]:
        """A follower's fetch for its partitions led here: ``(topic id, partition, fetch offset, current leader
        epoch, partition max bytes)`` each; answers in request order. The whole answer carries at
        most ``max_bytes`` (replica.fetch.response.max.bytes) and each partition at most its own max bytes."""
        now = self.clock()
        epoch = self.broker_epoch()
        budget = max(1, max_bytes // MESSAGE_BYTES)
        out = []
        self.counters.fetches_answered += 1
        for topic_id, index, fetch_offset, leader_epoch, partition_max_bytes in items:
            p = self.partitions.get((topic_id, index))  # type: ignore[arg-type]  # bytes hash as the Uuid does
            if p is None:
                out.append((topic_id, index, FetchAnswer(Errors.UNKNOWN_TOPIC_OR_PARTITION)))
                continue
            per_partition = min(max(1, partition_max_bytes // MESSAGE_BYTES), budget)
            answer, change = p.answer_fetch(
                replica_id, replica_epoch, fetch_offset, leader_epoch, per_partition, now, self.brokers, epoch
            )
            if answer.error == Errors.NONE:
                sent = answer.records_end_offset - fetch_offset
                budget = max(0, budget - sent)
                self.counters.messages_sent += sent
            out.append((topic_id, index, answer))
            if change is not None:
                self.submit(change)
        return out

    def maybe_shrink_isr(self) -> int:
        """Kafka's isr-expiration task, run every replica.lag.time.max.ms / 2. Returns the changes started."""
        now = self.clock()
        epoch = self.broker_epoch()
        started = 0
        for p in self.partitions.values():
            if p.is_leader:
                p.high_watermark_now(now, self.brokers)
                change = p.maybe_shrink(now, epoch)
                if change is not None:
                    self.submit(change)
                    started += 1
        return started

    def on_alter_answer(self, change: PendingChange, result: AlterPartitionResult | None, error: Errors) -> bool:
        """One partition's AlterPartition answer. Returns True if it should be sent again."""
        p = change.partition
        if self.partitions.get((p.topic_id, p.index)) is not p:
            return False  # the replica was dropped meanwhile
        if error == Errors.NONE and result is not None:
            old_epoch = p.partition_epoch
            applied = p.on_alter_result(
                change,
                result.leader_epoch,
                result.isr,
                result.leader_recovery_state,
                result.partition_epoch,
                self.clock(),
                self.brokers,
            )
            if applied:
                self._log_change(change, result, old_epoch)
            elif p.metadata_stale:
                self.request_refresh()
            return False
        retry = p.on_alter_error(change, error)
        name = error.name if isinstance(error, Errors) else str(error)
        self.counters.alter_partition_errors[name] = self.counters.alter_partition_errors.get(name, 0) + 1
        (log.debug if retry else log.info)(
            "alter_partition_failed",
            topic=p.topic,
            partition=p.index,
            change=change.kind.value,
            proposed_isr=list(change.members),
            leader_epoch=change.leader_epoch,
            partition_epoch=change.partition_epoch,
            error=name,
            message=result.error.message if result is not None else None,
            then="retry" if retry else "refresh metadata" if p.metadata_stale else "back to the committed ISR",
        )
        if p.metadata_stale:
            self.request_refresh()
        return retry

    def _log_change(self, change: PendingChange, result: AlterPartitionResult, old_partition_epoch: int) -> None:
        if change.kind == ChangeKind.SHRINK:
            self.counters.isr_shrinks += 1
        elif change.kind == ChangeKind.EXPAND:
            self.counters.isr_expands += 1
        p = change.partition
        log.info(
            change.kind.value,
            topic=p.topic,
            partition=p.index,
            topic_id=str(p.topic_id),
            old_isr=list(change.old_isr),
            new_isr=list(result.isr),
            leader_epoch=result.leader_epoch,
            partition_epoch=result.partition_epoch,
            previous_partition_epoch=old_partition_epoch,
            leader_recovery_state=result.leader_recovery_state,
            **change.detail,
        )

    # -- follower -----------------------------------------------------------------------------------------------

    def followed_leaders(self) -> set[int]:
        """The brokers this one fetches from (leaders of its follower replicas)."""
        return {p.leader for p in self.partitions.values() if not p.is_leader and p.leader >= 0}

    def fetch_batch(self, leader_id: int) -> list[tuple[Partition, int, int]]:
        """``(partition, fetch offset, leader epoch)`` of each replica to fetch from ``leader_id`` now."""
        now = self.clock()
        return [
            (p, p.log_end_offset, p.leader_epoch)
            for p in self.partitions.values()
            if p.leader == leader_id and p.fetchable(now)
        ]

    def on_fetch_answers(
        self, sent: list[tuple[Partition, int, int]], answers: dict[tuple[bytes, int], FetchAnswer]
    ) -> bool:
        """Apply a leader's answers to what was sent. Returns True if some partition is still behind (the
        leader had more than it carried): fetch again at once."""
        now = self.clock()
        behind = refresh = False
        for p, _, leader_epoch in sent:
            answer = answers.get((p.topic_id, p.index))
            if answer is None:
                continue
            outcome = p.on_fetch_answer(leader_epoch, answer, now)
            self.counters.messages_fetched += outcome.messages
            behind = behind or outcome.behind
            refresh = refresh or outcome.refresh
        self.counters.fetches_sent += 1
        if refresh:
            self.request_refresh()
        return behind

    def fetch_failed(self, sent: list[tuple[Partition, int, int]]) -> None:
        """The leader could not be reached: back off these partitions (replica.fetch.backoff.ms)."""
        until = self.clock() + self.config.replica_fetch_backoff_ms
        for p, _, _ in sent:
            p.fetch_backoff_until_ms = until

    # -- what a test or a status line wants -------------------------------------------------------------------

    def summary(self) -> dict[str, int]:
        now = self.clock()
        led = [p for p in self.partitions.values() if p.is_leader]
        return {
            "partitions": len(self.partitions),
            "leaders": len(led),
            "under_replicated": sum(1 for p in led if len(p.isr) < len(p.replicas)),
            "pending_isr_changes": sum(1 for p in led if p.pending is not None),
            "log_end_offset_sum": sum(p.leo(now) for p in self.partitions.values()),
        }


class AlterPartitionSender:
    """Kafka's DefaultAlterPartitionManager: changes wait in ``unsent`` (one per partition); one request at a time
    carries all of them; each partition's answer goes to ``on_answer``, which says whether to send it again.
    A request-level failure (STALE_BROKER_EPOCH while the agent re-registers, the controller unreachable) sends
    the same changes again after ``retry_ms``. Changes whose partition moved on before they were sent are dropped."""

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        call: Callable[[int, int, list[AlterPartitionTopic]], Awaitable[AlterPartitionResponse]],
        on_answer: Callable[[PendingChange, AlterPartitionResult | None, Errors], bool],
        retry_ms: int = 50,
        retry_max_ms: int = 1000,
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.call = call
        self.on_answer = on_answer
        self.retry_ms = retry_ms
        self.retry_max_ms = retry_max_ms
        self.unsent: dict[PartitionKey, PendingChange] = {}
        self.requests = 0
        self._wake = asyncio.Event()

    def submit(self, change: PendingChange) -> None:
        key = (change.partition.topic_id, change.partition.index)
        if key in self.unsent and self.unsent[key] is not change:
            # Kafka: one change per partition at a time; a second is refused (OPERATION_NOT_ATTEMPTED), which puts
            # the partition back to its committed state.
            self.on_answer(change, None, Errors.OPERATION_NOT_ATTEMPTED)
            return
        self.unsent[key] = change
        self._wake.set()

    async def run(self) -> None:
        backoff = self.retry_ms
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.unsent:
                for key in [k for k, c in self.unsent.items() if c.partition.pending is not c]:
                    del self.unsent[key]
                if not self.unsent:
                    break
                batch = list(self.unsent.values())
                try:
                    response = await self.call(self.broker_id, self.broker_epoch(), _request(batch))
                    if response.error.failed:
                        raise KafkaError(response.error.message or "", response.error.code)
                except KafkaError as e:
                    log.warning("alter_partition_request_failed", error=str(e), code=e.code.name, changes=len(batch))
                    await asyncio.sleep(backoff / 1000)
                    backoff = min(backoff * 2, self.retry_max_ms)
                    continue
                backoff = self.retry_ms
                self.requests += 1
                results = {(r.topic_id, r.partition_index): r for r in response.partitions}
                again = False
                for change in batch:
                    key = (change.partition.topic_id, change.partition.index)
                    result = results.get(key)
                    if result is None:
                        again = True  # not in the answer: stays unsent (Kafka's rule)
                        continue
                    del self.unsent[key]
                    if self.on_answer(change, result, Errors(result.error.code)):
                        self.unsent.setdefault(key, change)
                        again = True
                if again:
                    await asyncio.sleep(self.retry_ms / 1000)


def _request(batch: list[PendingChange]) -> list[AlterPartitionTopic]:
    by_topic: dict[Uuid, list[AlterPartitionData]] = {}
    for c in batch:
        by_topic.setdefault(c.partition.topic_id, []).append(
            AlterPartitionData(
                partition_index=c.partition.index,
                leader_epoch=c.leader_epoch,
                new_isr=c.new_isr,
                partition_epoch=c.partition_epoch,
                leader_recovery_state=c.leader_recovery_state,
            )
        )
    return [AlterPartitionTopic(topic_id, tuple(parts)) for topic_id, parts in by_topic.items()]
