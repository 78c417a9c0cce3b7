"""Incremental fetch sessions (Kafka's KIP-227): a follower's fetch names only the partitions whose fetch state
changed, and the leader answers only the partitions with something to say.

Without them every fetch carries every partition the follower reads from that leader, twice a second even when
nothing moves: at a million replicas per broker that is millions of partition entries a second to encode, answer
and decode. With them an idle partition costs nothing per fetch.

The protocol, as Kafka's:

- A full fetch with session id 0 and epoch 0 opens a session: the leader keeps every partition of the request
  (fetch offset, leader epoch, max bytes), answers all of them, and returns the session's id. Epoch -1 (final)
  fetches without a session (and closes the follower's previous one).
- Each later fetch carries the session id and the next epoch; its partitions are the ones added or changed since,
  ``forgotten`` the ones to drop. An unknown id is answered FETCH_SESSION_ID_NOT_FOUND (70), a wrong epoch
  INVALID_FETCH_SESSION_EPOCH (71); the follower then starts over with a full fetch.
- The leader answers an incremental fetch for the partitions of the request and those still *active* in the
  session; a partition is included when it carries records or an error, or its high watermark or log end moved
  since the session last said it.

Where ours differs: Kafka's leader reads every partition of a session at each fetch; ours *parks* a partition whose
follower holds the leader's whole log (fetch offset = log end = high watermark, the log not growing, the follower
in the ISR whatever the ISR change in flight comes to: a joining follower parks while its expansion waits) and
looks at it again only when it changes: new metadata or an AlterPartition answer (but not an ISR change that keeps
the leader, its epoch and that follower in the ISR), a new fetch offset from the follower. While parked the
follower counts as fetching at that offset at every fetch of the session (its caught-up time is the session's last
fetch when it is unparked). A leader keeps one session per follower broker (each follower has one fetcher per
leader): a new full fetch from a follower closes its older one.

Sessions are used while the follower's fetches are unbounded (no disk rate, no follower throttle rate): a bounded
fetch grants each partition what the quotas hold at that moment, which is fetch state that changes at every fetch.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

NO_SESSION = 0
INITIAL_EPOCH = 0  # a full fetch that opens a session
FINAL_EPOCH = -1  # a full fetch without a session

Key = tuple[Any, int]  # (topic id, partition)


_generations = itertools.count(1)
SHRINK_BYTES = 1 << 16  # sets whose tables are smaller than this are left as they are


def shrunk(keys: set[Key]) -> set[Key]:
    """``keys``, or a copy sized to it if it has shrunk to a small part of its table. A set never gives back the
    table of its largest size: a session that once held a third of a million active partitions would keep ~16 MiB
    for the few left, per follower."""
    size = sys.getsizeof(keys)
    return set(keys) if size > SHRINK_BYTES and len(keys) * 128 < size else keys


@dataclass(eq=False, slots=True)
class FollowerSession:
    """A follower's side of its session with one leader. What the leader holds of each partition is kept on the
    Partition itself (``sent_gen``, ``sent_offset``, ``sent_epoch``: a broker may follow a million): a partition is
    in this session when its ``sent_gen`` is this session's ``gen``, unique to each session incarnation, so that
    starting over forgets them all at once."""

    session_id: int = NO_SESSION
    epoch: int = INITIAL_EPOCH  # the epoch the next fetch carries
    gen: int = field(default_factory=lambda: next(_generations))
    dirty: set[Key] = field(default_factory=set)  # partitions whose state may differ from what the leader holds
    waiting: set[Key] = field(default_factory=set)  # followed here but not fetchable when last looked at

    def reset(self) -> None:
        """Start over: the next fetch is a full one."""
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self.gen = next(_generations)
        self.dirty.clear()
        self.waiting.clear()


class FollowerSessions:
    def __init__(self) -> None:
        self.by_leader: dict[int, FollowerSession] = {}

    def get(self, leader_id: int) -> FollowerSession:
        s = self.by_leader.get(leader_id)
        if s is None:
            s = self.by_leader[leader_id] = FollowerSession()
        return s

    def changed(self, leader_id: int, key: Key) -> None:
        """A partition followed from ``leader_id`` changed (came, went, or its metadata moved)."""
        s = self.by_leader.get(leader_id)
        if s is not None:  # also while a full fetch is in flight: it was built without this change
            s.dirty.add(key)

    def reset(self, leader_id: int) -> None:
        s = self.by_leader.get(leader_id)
        if s is not None:
            s.reset()


@dataclass(eq=False, slots=True)
class LeaderSession:
    """A leader's side of a follower's session. What it holds of each partition is kept on the leader's
    ReplicaState of that follower (``session`` names the session it belongs to)."""

    session_id: int
    replica_id: int
    epoch: int = INITIAL_EPOCH
    active: set[Key] = field(default_factory=set)  # partitions looked at in every fetch; the others are parked
    last_fetch_ms: int = 0
    closed: bool = False


class LeaderSessions:
    """A leader's sessions, one per follower broker."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.by_id: dict[int, LeaderSession] = {}
        self.by_replica: dict[int, LeaderSession] = {}
        self._rng = rng or random.Random()

    def open(self, replica_id: int, now_ms: int) -> LeaderSession:
        self.close(replica_id)
        session_id = NO_SESSION
        while session_id == NO_SESSION or session_id in self.by_id:
            session_id = self._rng.randrange(1, 2**31)
        s = LeaderSession(session_id, replica_id, last_fetch_ms=now_ms)
        self.by_id[session_id] = self.by_replica[replica_id] = s
        return s

    def close(self, replica_id: int) -> None:
        s = self.by_replica.pop(replica_id, None)
        if s is not None:
            del self.by_id[s.session_id]
            s.closed = True  # the replica states that name it count as in no session

    def find(self, session_id: int, replica_id: int) -> LeaderSession | None:
        s = self.by_id.get(session_id)
        return s if s is not None and s.replica_id == replica_id else None

    @staticmethod
    def unpark(p: Any, keep: Collection[int] = ()) -> None:
        """``p`` (a Partition) changes: look again at its parked followers (but those in ``keep``) at their
        sessions' next fetch, each counted as caught up as of its session's last fetch. Before the change: becoming
        a follower drops them."""
        for r in p.remotes.values():
            session = r.parked
            if session is None or r.broker_id in keep:
                continue
            r.parked = None
            if session.closed or r.session is not session:
                continue
            session.active.add(p.key)
            if session.last_fetch_ms > r.last_fetch_time_ms:
                r.last_fetch_time_ms = r.last_caught_up_time_ms = session.last_fetch_ms
