"""What the consensus core needs from storage, as protocols: the real log and quorum-state file implement them,
and so do the simulator's in-memory versions."""

from __future__ import annotations

from typing import Protocol

from quorum.log.quorum_state import ElectionState


class AppendResult(Protocol):
    base_offset: int
    last_offset: int


class RaftLog(Protocol):
    """The replicated log. ``append`` and ``truncate_to`` are buffered writes; durability comes from a flush the
    core asks its driver for (see ``RaftCore.poll_flush``). ``truncate_to`` is durable when it returns."""

    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...

    def read(self, offset: int, max_bytes: int) -> tuple[bytes, int]: ...

    def append(self, batch: bytes, epoch: int | None = None) -> AppendResult: ...

    def truncate_to(self, offset: int) -> int: ...


class ElectionStore(Protocol):
    """Durable election state (epoch, vote, leader): ``write`` returns only once it is on disk."""

    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...
