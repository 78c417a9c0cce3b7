"""Brokers leaving, in bounded steps: a broker fenced because its session expired, and one in controlled shutdown.

Either way the broker leaves every ISR it is in and its leaderships move: one PartitionChangeRecord per partition,
~500k for one broker at 1M partitions (RF 3, 6 brokers). Kafka makes them in one event. Here that held the active
controller's loop for seconds (in process: 150k records in one 2.9 s event at 300k partitions), then its standbys'
and brokers' loops while they replayed them. Heartbeats went unanswered and fencing cascaded; a broker shutting
down at 1M partitions had each successive leader write half a million records, go silent to its followers and
lose office before any of it committed.

So the moves are made in steps of at most ``chunk`` partitions, each its own event; whatever was queued meanwhile
(heartbeats, requests) runs between steps. The partitions the broker leads go first (a stale broker's have no
working leader until moved), then the other ISR places; a final scan catches places it took meanwhile.

- A stale broker stays unfenced until its last step, whose BrokerRegistrationChangeRecord fences it, in one event
  with the last moves, so at every offset ISRs hold only unfenced brokers, as after Kafka's single event. A
  heartbeat before the end stops the fencing: the places it lost come back through its leaders' AlterPartition,
  as after any ISR shrink.
- A broker in controlled shutdown is marked so first (it can no longer gain places); its heartbeats are told to
  shut down once no step is left and it leads nothing, as Kafka's.

One broker at a time, stale ones first. The progress is the active controller's soft state: a new active
controller starts every session afresh, fences a silent broker again from its first step, and resumes a controlled
shutdown at the broker's next heartbeat.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from controller.results import ControllerResult
from quorum.log.message import ApiMessage, Uuid

if TYPE_CHECKING:
    from controller.cluster_control import ClusterControl
    from controller.elections import LeaderElections

DEPARTURE_CHUNK_PARTITIONS = 5_000  # partitions moved per event (~60 ms here)
MAX_ROUNDS = 3  # then whatever the final scan finds moves in the last step, however many: a departure must end


@dataclass
class _Departure:
    broker_id: int
    stale: bool  # fenced at the end; else a controlled shutdown
    keys: list[tuple[Uuid, int]] = field(default_factory=list)  # its ISR places when this round began
    next: int = 0
    rounds: int = 1


class BrokerDepartures:
    def __init__(
        self, cluster: ClusterControl, elections: LeaderElections, chunk: int = DEPARTURE_CHUNK_PARTITIONS
    ) -> None:
        self.cluster = cluster
        self.elections = elections
        self.chunk = max(1, chunk)
        self.abandoned: int | None = None  # set by the last step: the stale broker whose fencing it stopped
        self._current: _Departure | None = None
        # Brokers in controlled shutdown waiting for their turn, with their places as listed when they asked (a
        # listing scans every partition: ~0.2-0.4 s at 2M, the first step need not make it again).
        self._shutdowns: list[tuple[int, list[tuple[Uuid, int]]]] = []

    @property
    def broker_id(self) -> int | None:
        """The broker whose places are moving now."""
        return None if self._current is None else self._current.broker_id

    @property
    def in_progress(self) -> bool:
        return self._current is not None or bool(self._shutdowns)

    @property
    def progress(self) -> tuple[int, int]:
        """(places handled, places listed) in the current round."""
        d = self._current
        return (0, 0) if d is None else (min(d.next, len(d.keys)), len(d.keys))

    def reset(self) -> None:
        """Forget what is under way (this controller is no longer active)."""
        self._current, self._shutdowns = None, []

    # -- controlled shutdown (from the broker's heartbeats) ---------------------------------------------------

    def shutting_down(self, broker_id: int) -> list[ApiMessage]:
        """The broker asked to shut down (and is marked so by the caller's record): its first step, now; the rest
        follow in the stepping events. Idempotent while it is under way."""
        if self.leaving(broker_id):
            return []
        keys = self.elections.isr_places(broker_id)
        if len(keys) <= self.chunk:
            return self.elections.broker_moves(broker_id, True, keys)  # small: one event, as Kafka's
        self._shutdowns.append((broker_id, keys))
        return []

    def leaving(self, broker_id: int) -> bool:
        """Are this broker's places still being moved?"""
        return self.broker_id == broker_id or any(b == broker_id for b, _ in self._shutdowns)

    # -- the stepping event -----------------------------------------------------------------------------------

    def step(self, now_ms: int) -> ControllerResult[list[int]] | None:
        """The next step's records, and the brokers it fenced (``[id]`` in a stale broker's last step, else
        ``[]``); None if there is nothing to do. After a step, call again (at once) for the next."""
        self.abandoned = None
        d = self._current
        if d is not None and not self._still_leaving(d, now_ms):
            if d.stale:
                self.abandoned = d.broker_id  # it heartbeated, or was fenced, shut down or unregistered meanwhile
            d = self._current = None
        if d is None:
            d = self._current = self._next(now_ms)
            if d is None:
                return None
            if d.stale:  # a shutdown's were listed when it asked
                d.keys = self.elections.isr_places(d.broker_id)
            if len(d.keys) <= self.chunk:  # small: one event, as Kafka's
                return self._last_step(d, d.keys)
        if d.next < len(d.keys):
            start, d.next = d.next, d.next + self.chunk
            return ControllerResult(self.elections.broker_moves(d.broker_id, True, d.keys[start : d.next]), [], False)
        # Every place listed is handled: the ones it took meanwhile (an election, AlterPartition) are still to move.
        left = self.elections.isr_places(d.broker_id)
        if len(left) > self.chunk and d.rounds < MAX_ROUNDS:
            d.keys, d.next, d.rounds = left, 0, d.rounds + 1
            return self.step(now_ms)
        return self._last_step(d, left)

    def _last_step(self, d: _Departure, keys: list[tuple[Uuid, int]]) -> ControllerResult[list[int]]:
        self._current = None
        records = self.elections.broker_moves(d.broker_id, True, keys)
        if not d.stale:
            return ControllerResult(records, [], False)
        return ControllerResult([*records, self.cluster.fence_record(d.broker_id)], [d.broker_id], False)

    def _next(self, now_ms: int) -> _Departure | None:
        stale = self.cluster.stale_broker(now_ms)
        if stale is not None:
            return _Departure(stale, stale=True)
        while self._shutdowns:
            broker_id, keys = self._shutdowns.pop(0)
            b = self.cluster.brokers.get(broker_id)
            if b is not None and b.in_controlled_shutdown:
                return _Departure(broker_id, stale=False, keys=keys)
        return None

    def _still_leaving(self, d: _Departure, now_ms: int) -> bool:
        if d.stale:
            return self.cluster.session_expired(d.broker_id, now_ms)
        b = self.cluster.brokers.get(d.broker_id)
        return b is not None and b.in_controlled_shutdown
