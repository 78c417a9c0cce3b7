"""The fetch-session side of a broker's :class:`~pykraft.replica.manager.ReplicaManager`: building a follower's
session fetches and answering them as a leader (the protocol: :mod:`pykraft.replica.fetch_session`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import structlog

from pykraft.replica.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    NO_SESSION,
    FollowerSessions,
    LeaderSession,
    LeaderSessions,
    shrunk,
)
from pykraft.replica.partition import (
    MESSAGE_BYTES,
    FetchAnswer,
    FetchItem,
    Partition,
    PartitionKey,
    ReplicaConfig,
    ReplicaState,
)
from pykraft.replica.throttle import ReplicationThrottles
from quorum.errors import Errors

if TYPE_CHECKING:
    from pykraft.replica.manager import ReplicaCounters

log = structlog.get_logger("pykraft.replica")


# Partitions a leader looks at in a full fetch before it lets its loop run (see
# SessionFetching.answer_session_fetch): at ~25 us each, a slice is ~0.5 s of CPU. Not smaller, and not for
# incremental fetches: a paused answer waits a whole turn of the loop (image slices, other fetches) per slice. At
# 2,000 for every fetch, the tens of thousands of partitions a follower's fetches carry while 2M are created took
# minutes to answer; followers fell out of 160k ISRs on one broker, and its replicas lagged its image by 126 s.
FETCH_SLICE = 20_000

SessionAnswer = tuple[Errors, int, list[tuple[bytes, int, FetchAnswer]]]
T = TypeVar("T")


def drain(steps: Generator[None, None, T]) -> T:
    """Run a stepped piece of work (:meth:`SessionFetching.answer_session_fetch`) to its end, with no pause."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


async def drain_pausing(steps: Generator[None, None, T]) -> T:
    """:func:`drain`, letting the loop run at each pause."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        await asyncio.sleep(0)


class SessionFetch(NamedTuple):
    """One fetch request of a follower's session with a leader."""

    session_id: int
    session_epoch: int
    items: list[FetchItem]  # the partitions added or changed (all of them in a full fetch)
    forgotten: list[PartitionKey]


def in_sync_either_way(p: Partition, replica_id: int) -> bool:
    """Is ``replica_id`` in ``p``'s ISR whatever becomes of the change in flight? Such a follower may park: an answer
    that applies the change wakes only those it takes out, one that fails wakes them all. A joining follower parks
    while its own expansion waits for the controller: else every fetch of its session looks at it again, and a
    broker restarted at 2M partitions had ~250k of them in its peers' sessions, seconds of CPU per fetch round."""
    pending = p.pending
    return replica_id in (p.isr if pending is None else pending.members)


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
    ) -> Generator[None, None, SessionAnswer]:
        """A fetch in Kafka's fetch-session protocol (see :mod:`pykraft.replica.fetch_session`), answered in steps:
        a full fetch pauses (yields) after every :data:`FETCH_SLICE` partitions, and the data plane's server lets
        its loop run meanwhile (:func:`drain` does it all at once). It returns the request's error, the session id to
        use next and the answers; ``items`` as :meth:`answer_fetch`'s. A follower back from a restart at 2M
        partitions asks each leader for ~250k of them in one full fetch; answered at once, with an ISR expansion
        for each, it held a leader's loop for 29 s (7 s of CPU, 6 of GC, on a busy machine), and that broker's
        metadata observer fell behind. What changes during a pause is what changes between two fetches, and the
        per-partition code looks at the partition's state afresh each time."""
        sessions = self.leader_sessions
        now = self.clock()
        if session_id == NO_SESSION:
            if session_epoch == FINAL_EPOCH:
                sessions.close(replica_id)
                return Errors.NONE, NO_SESSION, self.answer_fetch(replica_id, replica_epoch, max_bytes, items)
            if session_epoch != INITIAL_EPOCH:
                return Errors.INVALID_FETCH_SESSION_EPOCH, NO_SESSION, []
            session = sessions.open(replica_id, now)
        else:
            found = sessions.find(session_id, replica_id)
            if found is None:
                return Errors.FETCH_SESSION_ID_NOT_FOUND, NO_SESSION, []
            session = found
            if session_epoch != session.epoch + 1:
                return Errors.INVALID_FETCH_SESSION_EPOCH, NO_SESSION, []
            session.epoch = session_epoch
            for key in forgotten:
                session.active.discard(key)  # type: ignore[arg-type]
                r = self._remote(key, replica_id)
                if r is not None and r.session is session:
                    r.session = r.parked = None
        full = session_epoch == INITIAL_EPOCH
        out: list[tuple[bytes, int, FetchAnswer]] = []
        budget = [max(1, max_bytes // MESSAGE_BYTES)]
        epoch = self.broker_epoch()
        self.counters.fetches_answered += 1
        session.last_fetch_ms = now
        done = 0
        for topic_id, index, fetch_offset, leader_epoch, partition_max_bytes in items:
            done += 1
            if full and done % FETCH_SLICE == 0:
                yield
            key = (topic_id, index)
            r = self._remote(key, replica_id)
            if r is None:  # not led here, or not a replica of it: answered (an error) and not kept
                a = self._answer_one(
                    topic_id, index, fetch_offset, leader_epoch, partition_max_bytes, replica_id, replica_epoch,
                    budget, now, epoch,
                )  # fmt: skip
                out.append((topic_id, index, a))
                session.active.discard(key)
                continue
            r.session, r.parked = session, None
            r.fetch_offset, r.fetch_leader_epoch, r.fetch_max_bytes = fetch_offset, leader_epoch, partition_max_bytes
            r.told_high_watermark = r.told_log_end_offset = -1  # asked again: answer it
            session.active.add(key)
        for key in list(session.active):
            done += 1
            if full and done % FETCH_SLICE == 0:
                yield
            answer = self._answer_in_session(session, key, replica_epoch, budget, now, epoch, full)
            if answer is not None:
                out.append((key[0], key[1], answer))
        session.active = shrunk(session.active)
        return Errors.NONE, session.session_id, out

    def _remote(self, key: tuple[bytes, int], replica_id: int) -> ReplicaState | None:
        p = self.partitions.get(key)  # type: ignore[arg-type]  # bytes hash as the Uuid does
        return p.remotes.get(replica_id) if p is not None else None

    def _answer_in_session(
        self,
        session: LeaderSession,
        key: tuple[bytes, int],
        replica_epoch: int,
        budget: list[int],
        now: int,
        epoch: int,
        full: bool,
    ) -> FetchAnswer | None:
        """One active partition of a session: its answer if it has news (always in a full fetch), parking it when
        its follower needs nothing until it changes."""
        replica_id = session.replica_id
        p = self.partitions.get(key)  # type: ignore[arg-type]
        r = p.remotes.get(replica_id) if p is not None else None
        if r is None or r.session is not session:  # no longer led here (or not this follower's): say so, forget it
            session.active.discard(key)
            return FetchAnswer(Errors.UNKNOWN_TOPIC_OR_PARTITION if p is None else Errors.NOT_LEADER_OR_FOLLOWER)
        fetch_offset = r.fetch_offset
        a = self._answer_one(
            key[0], key[1], fetch_offset, r.fetch_leader_epoch, r.fetch_max_bytes, replica_id, replica_epoch, budget,
            now, epoch,
        )  # fmt: skip
        if a.error != Errors.NONE:
            session.active.discard(key)  # the follower backs off and asks again (or forgets it)
            r.session = None
            return a
        news = (
            full
            or a.records_end_offset > fetch_offset
            or a.high_watermark != r.told_high_watermark
            or a.log_end_offset != r.told_log_end_offset
        )
        if news:
            r.told_high_watermark, r.told_log_end_offset = a.high_watermark, a.log_end_offset
        if (
            fetch_offset == a.log_end_offset == a.high_watermark
            and not p.growing  # type: ignore[union-attr]
            and in_sync_either_way(p, replica_id)  # type: ignore[arg-type]
        ):
            session.active.discard(key)
            r.parked = session
        return a if news else None

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
        gen = s.gen
        if s.session_id == NO_SESSION:
            s.reset()
            gen = s.gen
            items = []
            for key, p in followed.items():
                if p.fetchable(now):
                    items.append(FetchItem(p, p.log_end_offset, p.leader_epoch, max_bytes))
                    p.sent_gen, p.sent_offset, p.sent_epoch = gen, p.log_end_offset, p.leader_epoch
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
            p = self.partitions.get(key)
            if p is None:  # dropped here: the leader may hold it
                forgotten.append(key)
                s.waiting.discard(key)
                continue
            if p.followed_from != leader_id or not p.fetchable(now):
                if p.sent_gen == gen:
                    p.sent_gen = 0
                    forgotten.append(key)
                if p.followed_from == leader_id:
                    s.waiting.add(key)
                else:
                    s.waiting.discard(key)
                continue
            s.waiting.discard(key)
            if p.sent_gen != gen or p.sent_offset != p.log_end_offset or p.sent_epoch != p.leader_epoch:
                p.sent_gen, p.sent_offset, p.sent_epoch = gen, p.log_end_offset, p.leader_epoch
                items.append(FetchItem(p, p.log_end_offset, p.leader_epoch, max_bytes))
        s.waiting = shrunk(s.waiting)
        return SessionFetch(s.session_id, s.epoch, items, forgotten)

    def on_session_response(
        self,
        leader_id: int,
        fetch: SessionFetch,
        error: Errors,
        session_id: int,
        answers: dict[tuple[bytes, int], FetchAnswer],
    ) -> Generator[None, None, bool]:
        """Apply a leader's answer to :meth:`session_fetch`'s request, in steps (:func:`drain` applies it at once):
        the answer to a full fetch pauses every :data:`FETCH_SLICE` partitions. Returns True if some partition is
        still behind: fetch again at once (also after a session error: start over with a full fetch). A broker
        restarted at 2M partitions opens a session with each leader for ~170k partitions: applied at once, each
        answer is ~1 s of CPU (6 us a partition) on a loop that must keep its metadata fetch going. An incremental
        answer is applied at once, as the leader answers it (see :data:`FETCH_SLICE`)."""
        s = self.sessions.get(leader_id)
        if fetch.session_epoch == FINAL_EPOCH:
            return self.on_fetch_answers(fetch.items, answers)
        pause_every = FETCH_SLICE if fetch.session_id == NO_SESSION else 0
        if error != Errors.NONE:
            log.info("fetch_session_reset", leader=leader_id, session_id=fetch.session_id, error=error.name)
            s.reset()
            return True
        if fetch.session_id == NO_SESSION:
            s.session_id = session_id
        if session_id == NO_SESSION:
            s.reset()
        s.epoch = fetch.session_epoch + 1
        max_bytes = self.config.replica_fetch_max_bytes
        sent = []
        for i, (key, answer) in enumerate(answers.items(), 1):
            if pause_every and i % pause_every == 0:
                yield
            p = self.partitions.get(key)  # type: ignore[call-overload]  # bytes hash as the Uuid does
            s.dirty.add(key)  # type: ignore[arg-type]
            if p is not None and p.followed_from == leader_id and p.sent_gen == s.gen:
                sent.append(FetchItem(p, p.sent_offset, p.sent_epoch, max_bytes))
                if answer.error != Errors.NONE:
                    # The leader drops a partition it answers with an error from the session: ask for it anew once
                    # fetchable, even if the next fetch is built after the backoff ended and so never forgets it.
                    p.sent_gen = 0
        return (yield from self.fetch_answer_steps(sent, answers, pause_every))

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
