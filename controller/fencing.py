"""Fencing a broker whose session expired, in bounded steps.

Fencing takes a broker out of every ISR it is in and moves its leaderships away: one PartitionChangeRecord per
partition, ~1M of them for one broker at 2M partitions (RF 3, 6 brokers). Kafka makes them in one event. Here that
held the active controller's loop for seconds (measured in process: 150k records in one 2.9 s event at 300k
partitions), then its standbys' and brokers' loops while they replayed them: heartbeats went unanswered, more
sessions expired, and one fencing became a cascade.

So the moves are made in steps of at most ``chunk`` partitions, each its own event; whatever was queued meanwhile
(heartbeats, requests) runs between steps. The partitions the broker leads go first: they have no leader until
moved. The BrokerRegistrationChangeRecord that fences it comes last, in one event with the moves of any partition
that took it in meanwhile (a final scan finds them). Until then the broker is unfenced but losing its places, so at
every offset ISRs hold only unfenced brokers and leaders are unfenced, as after Kafka's single event.

A broker that heartbeats before the end is no longer stale: the fencing stops, and the ISR places it lost come back
through its leaders' AlterPartition, as after any ISR shrink. The progress is the active controller's soft state: a
new active controller starts every session afresh, and fences the broker again (from its first step) if it stays
silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from controller.results import ControllerResult
from quorum.log.message import Uuid

if TYPE_CHECKING:
    from controller.cluster_control import ClusterControl
    from controller.elections import LeaderElections

FENCE_CHUNK_PARTITIONS = 5_000  # partitions moved per event (~60 ms here)
MAX_ROUNDS = 3  # then whatever the final scan finds moves with the fence, however many: the fencing must end


class StaleBrokerFencing:
    def __init__(self, cluster: ClusterControl, elections: LeaderElections, chunk: int = FENCE_CHUNK_PARTITIONS):
        self.cluster = cluster
        self.elections = elections
        self.chunk = max(1, chunk)
        self.broker_id: int | None = None  # the broker being fenced
        self.abandoned: int | None = None  # set by the last step: the broker whose fencing it stopped
        self._keys: list[tuple[Uuid, int]] = []  # its ISR places when the fencing (or its last round) began
        self._next = 0
        self._rounds = 0  # rounds of steps so far: a final scan that finds many places starts another

    @property
    def in_progress(self) -> bool:
        return self.broker_id is not None

    def reset(self) -> None:
        """Forget a fencing under way (this controller is no longer active)."""
        self.broker_id, self._keys, self._next, self._rounds = None, [], 0, 0

    def step(self, now_ms: int) -> ControllerResult[list[int]] | None:
        """The next step's records, and the brokers it fences (``[id]`` in the last step, ``[]`` before); None if
        there is nothing to do. After a step that did not fence, call again (at once) for the next."""
        self.abandoned = None
        broker_id = self.broker_id
        if broker_id is not None and not self.cluster.session_expired(broker_id, now_ms):
            self.abandoned = broker_id  # it heartbeated, or was fenced, shut down or unregistered meanwhile
            self.reset()
            broker_id = None
        if broker_id is None:
            broker_id = self.cluster.stale_broker(now_ms)
            if broker_id is None:
                return None
            self.broker_id = broker_id
            self._keys, self._next, self._rounds = self.elections.isr_places(broker_id), 0, 1
        keys, start = self._keys, self._next
        if start == 0 and self._rounds == 1 and len(keys) <= self.chunk:
            return self._fence(broker_id, keys)  # small: one event, as Kafka's
        if start < len(keys):
            self._next = start + self.chunk
            return ControllerResult(self.elections.broker_moves(broker_id, True, keys[start : self._next]), [], False)
        # Every place listed is gone: the ones it took meanwhile (an election or AlterPartition) are still to move.
        left = self.elections.isr_places(broker_id)
        if len(left) > self.chunk and self._rounds < MAX_ROUNDS:
            self._keys, self._next, self._rounds = left, 0, self._rounds + 1
            return self.step(now_ms)
        return self._fence(broker_id, left)

    @property
    def progress(self) -> tuple[int, int]:
        """(places handled, places listed) of the current round."""
        return min(self._next, len(self._keys)), len(self._keys)

    def _fence(self, broker_id: int, keys: list[tuple[Uuid, int]]) -> ControllerResult[list[int]]:
        records = [*self.elections.broker_moves(broker_id, True, keys), self.cluster.fence_record(broker_id)]
        self.reset()
        return ControllerResult(records, [broker_id], atomic=False)
