"""What the consensus core needs from storage, as protocols: the real log and quorum-state file implement them,
and so do the simulator's in-memory versions."""

from __future__ import annotations

from typing import Protocol

from quorum.log.quorum_state import ElectionState
from quorum.log.snapshots import SnapshotId


class AppendResult(Protocol):
    base_offset: int
    last_offset: int


class SnapshotInstall(Protocol):
    """A snapshot arriving from the leader in chunks (FetchSnapshot), not yet visible as a snapshot."""

    @property
    def size(self) -> int: ...

    def write(self, position: int, data: bytes) -> None: ...

    def abort(self) -> None: ...


class RaftLog(Protocol):
    """The replicated log. ``append`` and ``truncate_to`` are buffered writes; durability comes from a flush the
    core asks its driver for (see ``RaftCore.poll_flush``). ``truncate_to`` and ``install_snapshot`` are durable
    when they return.

    Offsets below ``start_offset`` exist only in the latest snapshot (retention deleted them)."""

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

    def latest_snapshot(self) -> SnapshotId | None: ...

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        """``(bytes from position, snapshot size)``; None if the snapshot is gone; ValueError past its end."""
        ...

    def begin_snapshot(self, snapshot_id: SnapshotId) -> SnapshotInstall: ...

    def install_snapshot(self, install: SnapshotInstall) -> int:
        """Validate and freeze the fetched snapshot (raises if it is damaged, leaving no trace), then empty the log
        to start at its end offset, forgetting older snapshots. Returns the new log end offset."""
        ...


class ElectionStore(Protocol):
    """Durable election state (epoch, vote, leader): ``write`` returns only once it is on disk."""

    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...
