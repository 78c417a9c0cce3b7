"""What the controller's managers hand back, and the Kafka error a request or a topic fails with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from quorum.errors import Errors, KafkaError
from quorum.log.message import ApiMessage

T = TypeVar("T")

MAX_RECORDS_PER_USER_OP = 10_000  # Kafka's QuorumController.MAX_RECORDS_PER_USER_OP


@dataclass
class ControllerResult(Generic[T]):
    """Records to append (one atomic batch) and the response to give once they are committed. Generating it
    changes nothing; only replaying the records does (Kafka's ControllerResult)."""

    records: list[ApiMessage]
    response: T
    # Atomic results go to Raft as one batch. Kafka's non-atomic ones (fencing, elections, AlterPartition) may be
    # split over batches, so that moving half a million partitions off a broker never exceeds the batch size.
    atomic: bool = True


@dataclass(frozen=True)
class ApiError:
    code: Errors = Errors.NONE
    message: str | None = None

    @classmethod
    def of(cls, e: KafkaError) -> ApiError:
        return cls(e.code, str(e))

    @property
    def failed(self) -> bool:
        return self.code != Errors.NONE


NO_ERROR = ApiError()
