"""The AlterPartition channel from a broker to the controller (Kafka's ``AlterPartitionManager``): the one
asynchronous piece of the data plane's ISR handling, one request in flight per broker carrying the changes
waiting to go, at most :data:`MAX_CHANGES_PER_REQUEST` of them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from controller.requests import AlterPartitionData, AlterPartitionResponse, AlterPartitionResult, AlterPartitionTopic
from pykraft.replica.partition import PartitionKey, PendingChange
from quorum.errors import Errors, KafkaError
from quorum.log.message import Uuid

log = structlog.get_logger("pykraft.replica")

# Kafka sends every waiting change in one request. The controller applies a request in one event: a broker that
# shrank 109k ISRs at once (followers late to start fetching at 1M partitions) held the active controller's loop
# for 1.6 s, long enough for its followers to think it gone, and each next leader got the same request again.
MAX_CHANGES_PER_REQUEST = 5_000


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
        max_changes: int = MAX_CHANGES_PER_REQUEST,
    ) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.call = call
        self.on_answer = on_answer
        self.retry_ms = retry_ms
        self.retry_max_ms = retry_max_ms
        self.max_changes = max_changes
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
                batch = self._next_batch()
                if not batch:
                    break
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

    def _next_batch(self) -> list[PendingChange]:
        """The oldest changes still pending, at most ``max_changes``; those whose partition moved on are dropped on
        the way. Not a walk of all of them per request: a broker restarted at 2M partitions queued ~250k."""
        batch: list[PendingChange] = []
        moved_on: list[PartitionKey] = []
        for key, change in self.unsent.items():
            if change.partition.pending is not change:
                moved_on.append(key)
            elif len(batch) < self.max_changes:
                batch.append(change)
            else:
                break
        for key in moved_on:
            del self.unsent[key]
        return batch


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
