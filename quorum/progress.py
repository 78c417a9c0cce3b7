"""Progress lines for long replays (a big snapshot loaded, a long log replayed at start): a node that takes minutes
to come up says how far it is, how fast it goes and when it expects to be done, rather than nothing."""

from __future__ import annotations

import time
from typing import Any

import structlog

log = structlog.get_logger("quorum.progress")

INTERVAL_S = 2.0  # between two replay_progress lines (tests make it small); a replay shorter than this logs none


class ReplayProgress:
    """Counts a replay's records and its position (bytes or offsets) towards ``total``; logs ``replay_progress``
    (records, records/s, percent, ETA) at most every :data:`INTERVAL_S`, so only a replay that long logs any."""

    __slots__ = ("_fields", "_next_at", "done", "interval_s", "progress_lines", "records", "started", "total", "what")

    def __init__(self, what: str, total: int, *, interval_s: float | None = None, **fields: Any) -> None:
        self.what = what
        self.total = max(total, 0)
        self.interval_s = INTERVAL_S if interval_s is None else interval_s
        self.started = time.monotonic()
        self._next_at = self.started + self.interval_s
        self._fields = fields
        self.records = 0
        self.done = 0  # how far along ``total``, in its unit
        self.progress_lines = 0

    def advance(self, records: int, done: int) -> None:
        """``records`` more replayed; ``done`` of ``total`` now behind (called once a batch: a clock read each)."""
        self.records += records
        self.done = done
        now = time.monotonic()
        if now >= self._next_at:
            self._next_at = now + self.interval_s
            self.progress_lines += 1
            elapsed = now - self.started
            fraction = min(self.done / self.total, 1.0) if self.total else None
            eta = elapsed * (1 - fraction) / fraction if fraction else None
            log.info(
                "replay_progress",
                replay=self.what,
                records=self.records,
                records_per_s=round(self.records / elapsed) if elapsed > 0 else None,
                percent=round(100 * fraction, 1) if fraction is not None else None,
                elapsed_s=round(elapsed, 1),
                eta_s=round(eta, 1) if eta is not None else None,
                **self._fields,
            )

    def summary(self) -> dict[str, Any]:
        """The fields of a final line: records, seconds and records/s."""
        seconds = time.monotonic() - self.started
        return {
            "records": self.records,
            "seconds": round(seconds, 3),
            "records_per_s": round(self.records / seconds) if seconds > 0 else None,
        }
