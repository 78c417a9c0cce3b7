"""The leader-epoch cache: which Raft epoch started at which offset (Kafka's LeaderEpochFileCache).

Raft uses it to answer "where does my log end for epoch E?" when a follower's log may have diverged. It is
persisted as Kafka's ``leader-epoch-checkpoint`` text file (version line, count line, ``epoch startOffset`` lines),
but the log itself is the source of truth: on open the cache is rebuilt from the batches' epochs.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from quorum.log.files import atomic_write

CHECKPOINT_NAME = "leader-epoch-checkpoint"
UNDEFINED = -1


class EpochCache:
    def __init__(self, entries: list[tuple[int, int]] | None = None) -> None:
        # One list of (epoch, start offset) tuples, replaced or appended to whole, so a reader on another thread
        # (the flusher writing the checkpoint) never sees a half-made entry.
        self._entries: list[tuple[int, int]] = []
        for epoch, start in entries or []:
            self.assign(epoch, start)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if that is news. Epochs only grow."""
        if self._entries:
            last_epoch, last_start = self._entries[-1]
            if epoch == last_epoch:
                return False
            if epoch < last_epoch or start_offset < last_start:
                raise ValueError(
                    f"epoch {epoch} at offset {start_offset} goes backwards: the cache ends with epoch "
                    f"{last_epoch} at offset {last_start}"
                )
        self._entries.append((epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Forget epochs that start at or after ``end_offset`` (the log was truncated there)."""
        cut = bisect.bisect_left(self._entries, end_offset, key=lambda e: e[1])
        if cut == len(self._entries):
            return False
        self._entries = self._entries[:cut]
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: drop epochs that ended before it, and move the start of the
        one holding it there (Kafka's ``truncateFromStart``)."""
        entries = self._entries
        i = bisect.bisect_right(entries, start_offset, key=lambda e: e[1])  # entries[:i] start at or before it
        if i == 0 or (i == 1 and entries[0][1] == start_offset):
            return False
        self._entries = [(entries[i - 1][0], start_offset), *entries[i:]]
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``: ``(largest known epoch <= epoch, the offset where it ended)``.

        The end of an epoch is the start of the next one, or the log end for the latest epoch; an epoch older
        than every known one gives ``(-1, -1)``.
        """
        entries = self._entries
        i = bisect.bisect_right(entries, epoch, key=lambda e: e[0])
        if i == 0:
            return UNDEFINED, UNDEFINED
        if i == len(entries):
            return entries[-1][0], log_end_offset
        return entries[i - 1][0], entries[i][1]

    def write(self, path: Path) -> None:
        entries = self.entries
        lines = ["0", str(len(entries))] + [f"{e} {s}" for e, s in entries]
        atomic_write(path, ("\n".join(lines) + "\n").encode())

    @classmethod
    def read(cls, path: Path) -> EpochCache:
        """Parse a checkpoint file; a missing one is an empty cache, a malformed one an error naming it."""
        if not path.exists():
            return cls()
        lines = path.read_text().splitlines()
        try:
            if lines[0].strip() != "0":
                raise ValueError(f"unknown version {lines[0]!r}")
            count = int(lines[1])
            entries = [tuple(map(int, line.split())) for line in lines[2 : 2 + count]]
            if len(entries) != count or any(len(e) != 2 for e in entries):
                raise ValueError(f"expected {count} 'epoch offset' lines")
            return cls([(e[0], e[1]) for e in entries])
        except (IndexError, ValueError) as e:
            raise ValueError(f"{path}: malformed leader-epoch checkpoint: {e}") from None
