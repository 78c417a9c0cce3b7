"""The fetch-session side of a broker's :class:`~pykraft.replica.manager.ReplicaManager`: building a follower's
session fetches and answering them as a leader (the protocol: :mod:`pykraft.replica.fetch_session`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

import structlog

from pykraft.replica.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    CachedPartition,
    FollowerSessions,
    LeaderSession,
    LeaderSessions,
)
from pykraft.replica.partition import MESSAGE_BYTES, FetchAnswer, FetchItem, Partition, PartitionKey, ReplicaConfig
from pykraft.replica.throttle import ReplicationThrottles
from quorum.errors import Errors

if TYPE_CHECKING:
    from pykraft.replica.manager import ReplicaCounters

log = structlog.get_logger("pykraft.replica")


class SessionFetch(NamedTuple):
    """One fetch request of a follower's session with a leader."""

    session_id: int
    session_epoch: int
    items: list[FetchItem]  # the partitions added or changed (all of them in a full fetch)
    forgotten: list[PartitionKey]


class SessionFetching:
    """Mixed into ReplicaManager, whose state it reads."""

    config: ReplicaConfig
    clock: Callable[[], int]
    broker_epoch: Callable[[], int]
    throttles: ReplicationThrottles
    counters: ReplicaCounters
    sessions: FollowerSessions
    leader_sessions: LeaderSessions
    partitions: dict[PartitionKey, Partition]
    _by_leader: dict[int, dict[PartitionKey, Partition]]

    def answer_session_fetch(
        self,
        replica_id: int,
        replica_epoch: int,
        max_bytes: int,
        session_id: int,
        session_epoch: int,
        items: Iterable[tuple[bytes, int, int, int, int]],
        forgotten: Iterable[tuple[bytes, int]] = (),
    ) -> tuple[Errors, int, list[tuple[bytes, int, FetchAnswer]]]:
        """A fetch in Kafka's fetch-session protocol (see :mod:`pykraft.replica.fetch_session`): (the request's
        error, the session id to use next, the answers). ``items`` as :meth:`answer_fetch`'s."""
        sessions = self.leader_sessions
        now = self.clock()
        if session_id == NO_SESSION:
            if session_epoch == FINAL_EPOCH:
                sessions.close(replica_id)
                return Errors.NONE, NO_SESSION, self.answer_fetch(replica_id, replica_epoch, max_bytes, items)
            if session_epoch != INITIAL_EPOCH:
                return Errors.INVALID_FETCH_SESSION_EPOCH, NO_SESSION, []
            session = sessions.open(replica_id, now)
            order = []
            for topic_id, index, fetch_offset, leader_epoch, partition_max_bytes in items:
                key = (topic_id, index)
                session.partitions[key] = CachedPartition(fetch_offset, leader_epoch, partition_max_bytes)
                order.append(key)
            session.active.update(order)
            return Errors.NONE, session.session_id, self._answer_session(session, replica_epoch, max_bytes, order, now)
        found = sessions.find(session_id, replica_id)
        if found is None:
            return Errors.FETCH_SESSION_ID_NOT_FOUND, NO_SESSION, []
        session = found
        if session_epoch != session.epoch + 1:
            return Errors.INVALID_FETCH_SESSION_EPOCH, NO_SESSION, []
        session.epoch = session_epoch
        sessions.incremental_fetches += 1
        cached = session.partitions
        for key in forgotten:
            cached.pop(key, None)
            session.active.discard(key)
            p = self.partitions.get(key)  # type: ignore[arg-type]
            if p is not None and p.parked and p.parked.get(replica_id) is session:
                del p.parked[replica_id]
        asked = []
        for topic_id, index, fetch_offset, leader_epoch, partition_max_bytes in items:
            key = (topic_id, index)
            cached[key] = CachedPartition(fetch_offset, leader_epoch, partition_max_bytes)
            asked.append(key)
            p = self.partitions.get(key)  # type: ignore[arg-type]
            if p is not None and p.parked and p.parked.get(replica_id) is session:
                del p.parked[replica_id]
        session.active.update(asked)
        return Errors.NONE, session.session_id, self._answer_session(session, replica_epoch, max_bytes, None, now)

    def _answer_session(
        self, session: LeaderSession, replica_epoch: int, max_bytes: int, full: list | None, now: int
    ) -> list[tuple[bytes, int, FetchAnswer]]:
        """Answer the session's active partitions (all of ``full``'s, in order, for a full fetch; else only those
        with news), parking those that need nothing until they change."""
        epoch = self.broker_epoch()
        budget = [max(1, max_bytes // MESSAGE_BYTES)]
        replica_id = session.replica_id
        self.counters.fetches_answered += 1
        session.last_fetch_ms = now
        out = []
        park = []
        for key in full if full is not None else list(session.active):
            c = session.partitions.get(key)
            if c is None:
                session.active.discard(key)
                continue
            topic_id, index = key
            a = self._answer_one(
                topic_id,
                index,
                c.fetch_offset,
                c.leader_epoch,
                c.max_bytes,
                replica_id,
                replica_epoch,
                budget,
                now,
                epoch,
            )
            if (
                full is not None
                or a.error != Errors.NONE
                or a.records_end_offset > c.fetch_offset
                or a.high_watermark != c.high_watermark
                or a.log_end_offset != c.log_end_offset
            ):
                out.append((topic_id, index, a))
                c.high_watermark, c.log_end_offset = a.high_watermark, a.log_end_offset
            if a.error == Errors.NONE and c.fetch_offset == a.log_end_offset == a.high_watermark:
                park.append(key)
        for key in park:
            p = self.partitions.get(key)
            if p is not None and not p.growing and p.pending is None and replica_id in p.isr:
                self.leader_sessions.park(p, key, session)
        return out

    @property
    def unbounded(self) -> bool:
        """No disk rate and no follower quota: a fetch's partitions may each take replica.fetch.max.bytes."""
        return self.throttles.disk.unlimited and self.throttles.follower.unlimited

    def session_fetch(self, leader_id: int) -> SessionFetch | None:
        """The next fetch to ``leader_id`` in its fetch session (:mod:`pykraft.replica.fetch_session`): a full one
        when the session is new or was reset, else the partitions whose fetch state changed and those to forget.
        Bounded fetches (a disk rate or a follower quota) go without a session: :meth:`fetch_batch`'s grants. None:
        nothing to ask (a bounded fetcher whose replicas all wait for quota)."""
        s = self.sessions.get(leader_id)
        if not self.unbounded:
            s.reset()
            batch = self.fetch_batch(leader_id)
            return SessionFetch(NO_SESSION, FINAL_EPOCH, batch, []) if batch else None
        now = self.clock()
        followed = self._by_leader.get(leader_id, {})
        max_bytes = self.config.replica_fetch_max_bytes
        if s.session_id == NO_SESSION:
            s.reset()
            items = []
            for key, p in followed.items():
                if p.fetchable(now):
                    items.append(FetchItem(p, p.log_end_offset, p.leader_epoch, max_bytes))
                    s.sent[key] = (p.log_end_offset, p.leader_epoch, max_bytes)
                else:
                    s.waiting.add(key)
            if not items:
                s.reset()
                return None
            return SessionFetch(NO_SESSION, INITIAL_EPOCH, items, [])
        look = s.dirty
        s.dirty = set()
        if s.waiting:
            look |= s.waiting
        items, forgotten = [], []
        for key in look:
            p = followed.get(key)
            if p is None or not p.fetchable(now):
                if s.sent.pop(key, None) is not None:
                    forgotten.append(key)
                if p is not None:
                    s.waiting.add(key)
                else:
                    s.waiting.discard(key)
                continue
            s.waiting.discard(key)
            state = (p.log_end_offset, p.leader_epoch, max_bytes)
            if s.sent.get(key) != state:
                s.sent[key] = state
                items.append(FetchItem(p, *state))
        return SessionFetch(s.session_id, s.epoch, items, forgotten)

    def on_session_response(
        self,
        leader_id: int,
        fetch: SessionFetch,
        error: Errors,
        session_id: int,
        answers: dict[tuple[bytes, int], FetchAnswer],
    ) -> bool:
        """Apply a leader's answer to :meth:`session_fetch`'s request. Returns True if some partition is still
        behind: fetch again at once (also after a session error: start over with a full fetch)."""
        s = self.sessions.get(leader_id)
        if fetch.session_epoch == FINAL_EPOCH:
            return self.on_fetch_answers(fetch.items, answers)
        if error != Errors.NONE:
            log.info("fetch_session_reset", leader=leader_id, session_id=fetch.session_id, error=error.name)
            s.reset()
            return True
        if fetch.session_id == NO_SESSION:
            s.session_id = session_id
        if session_id == NO_SESSION:
            s.reset()
        s.epoch = fetch.session_epoch + 1
        followed = self._by_leader.get(leader_id, {})
        sent = []
        for key in answers:
            p = followed.get(key)  # type: ignore[call-overload]  # bytes hash as the Uuid does
            state = s.sent.get(key)  # type: ignore[call-overload]
            s.dirty.add(key)  # type: ignore[arg-type]
            if p is not None and state is not None:
                sent.append(FetchItem(p, state[0], state[1], state[2]))
        return self.on_fetch_answers(sent, answers)

    def session_failed(self, leader_id: int, fetch: SessionFetch) -> None:
        """A session fetch could not be sent or answered: back off every partition followed from that leader (a
        full fetch would have carried them all) and start the session over."""
        self.sessions.reset(leader_id)
        if fetch.session_epoch == FINAL_EPOCH:
            self.fetch_failed(fetch.items)
            return
        now = self.clock()
        until = now + self.config.replica_fetch_backoff_ms
        for p in self._by_leader.get(leader_id, {}).values():
            p.fetch_backoff_until_ms = until
