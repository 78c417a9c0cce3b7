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
in the ISR, no ISR change in flight) and looks at it again only when it changes: new metadata, an ISR change, a new
fetch offset from the follower. While parked the follower counts as fetching at that offset at every fetch of the
session (its caught-up time is the session's last fetch when it is unparked). A leader keeps one session per
follower broker (each follower has one fetcher per leader): a new full fetch from a follower closes its older one.

Sessions are used while the follower's fetches are unbounded (no disk rate, no follower throttle rate): a bounded
fetch grants each partition what the quotas hold at that moment, which is fetch state that changes at every fetch.
"""

from __future__ import annotations

import random
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

NO_SESSION = 0
INITIAL_EPOCH = 0  # a full fetch that opens a session
FINAL_EPOCH = -1  # a full fetch without a session

Key = tuple[Any, int]  # (topic id, partition)


@dataclass(eq=False, slots=True)
class FollowerSession:
    """A follower's side of its session with one leader."""

    session_id: int = NO_SESSION
    epoch: int = INITIAL_EPOCH  # the epoch the next fetch carries
    sent: dict[Key, tuple[int, int, int]] = field(default_factory=dict)  # what the leader holds: offset, epoch, max
    dirty: set[Key] = field(default_factory=set)  # partitions whose state may differ from ``sent``
    waiting: set[Key] = field(default_factory=set)  # followed here but not fetchable when last looked at

    def reset(self) -> None:
        """Start over: the next fetch is a full one."""
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH
        self.sent.clear()
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
        if s is not None and s.session_id != NO_SESSION:
            s.dirty.add(key)

    def reset(self, leader_id: int) -> None:
        s = self.by_leader.get(leader_id)
        if s is not None:
            s.reset()


@dataclass(eq=False, slots=True)
class CachedPartition:
    """A partition of a leader's session: what the follower last asked, what the leader last answered."""

    fetch_offset: int
    leader_epoch: int
    max_bytes: int
    high_watermark: int = -1
    log_end_offset: int = -1


@dataclass(eq=False, slots=True)
class LeaderSession:
    session_id: int
    replica_id: int
    epoch: int = INITIAL_EPOCH
    partitions: dict[Key, CachedPartition] = field(default_factory=dict)
    active: set[Key] = field(default_factory=set)  # partitions looked at in every fetch; the rest are parked
    last_fetch_ms: int = 0
    closed: bool = False


class LeaderSessions:
    """A leader's sessions, one per follower broker."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.by_id: dict[int, LeaderSession] = {}
        self.by_replica: dict[int, LeaderSession] = {}
        self._rng = rng or random.Random()
        self.opened = 0
        self.incremental_fetches = 0

    def open(self, replica_id: int, now_ms: int) -> LeaderSession:
        self.close(replica_id)
        session_id = NO_SESSION
        while session_id == NO_SESSION or session_id in self.by_id:
            session_id = self._rng.randrange(1, 2**31)
        s = LeaderSession(session_id, replica_id, last_fetch_ms=now_ms)
        self.by_id[session_id] = self.by_replica[replica_id] = s
        self.opened += 1
        return s

    def close(self, replica_id: int) -> None:
        s = self.by_replica.pop(replica_id, None)
        if s is not None:
            del self.by_id[s.session_id]
            s.closed = True  # the partitions it parked forget it when they are next unparked

    def find(self, session_id: int, replica_id: int) -> LeaderSession | None:
        s = self.by_id.get(session_id)
        return s if s is not None and s.replica_id == replica_id else None

    @staticmethod
    def park(p: Any, key: Hashable, session: LeaderSession) -> None:
        """``p`` (a led Partition) needs nothing from this follower until it changes."""
        session.active.discard(key)  # type: ignore[arg-type]
        if p.parked is None:
            p.parked = {}
        p.parked[session.replica_id] = session

    @staticmethod
    def unpark(p: Any, only: int | None = None) -> None:
        """``p`` changed (or ``only`` that follower asked again): look at it in the sessions that parked it at
        their next fetch, counting the follower as caught up as of the session's last fetch."""
        parked = p.parked
        if not parked:
            return
        key = (p.topic_id, p.index)
        for replica_id in [only] if only is not None else list(parked):
            session = parked.pop(replica_id, None)
            if session is None or session.closed:
                continue
            session.active.add(key)
            r = p.remotes.get(replica_id)
            if r is not None and session.last_fetch_ms > r.last_fetch_time_ms:
                r.last_fetch_time_ms = r.last_caught_up_time_ms = session.last_fetch_ms
