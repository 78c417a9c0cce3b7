"""RaftCore on its own, fed message by message (no simulator): the rules behind two bugs the simulation found."""

from __future__ import annotations

import dataclasses
import random

from quorum.errors import Errors
from quorum.log.batch import build_batch, iter_batches
from quorum.raft.config import RaftConfig
from quorum.raft.core import RaftCore
from quorum.raft.messages import (
    BeginQuorumEpochRequest,
    Envelope,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.roles import Follower, Leader, Prospective, Unattached
from quorum.sim.harness import CLUSTER_ID, SIM_CONFIG
from quorum.sim.storage import SimLog, SimStore

CFG = SIM_CONFIG


def make_core(node_id: int, voters: list[int], log: SimLog | None = None, config: RaftConfig = CFG) -> RaftCore:
    return RaftCore(
        node_id=node_id, voters=voters, cluster_id=CLUSTER_ID, log=log or SimLog(), store=SimStore(), config=config,
        rng=random.Random(node_id), now_ms=0,
    )  # fmt: skip


def flush_now(core: RaftCore, now: int) -> None:
    """Carry out a flush the core asks for, completing at once."""
    if core.poll_flush():
        log = core.log
        assert isinstance(log, SimLog)
        end, batches = log.begin_flush()
        log.complete_flush(batches)
        core.flushed(end, now)


def test_lone_voter_leader_keeps_a_future_deadline() -> None:
    """Regression: a single voter never moved its check-quorum deadline (it cannot resign for lack of a quorum), so
    next_deadline() stayed in the past and its driver woke it in a busy loop, for ever."""
    core = make_core(1, [1])
    now = 0
    for _ in range(50):
        deadline = core.next_deadline()
        assert deadline >= now
        now = max(now, deadline)
        core.tick(now)
        flush_now(core, now)
        core.take_messages()
        if core.is_leader and core.high_watermark > 0:
            break
    assert core.is_leader and core.high_watermark == 1  # elected alone; its LeaderChange committed
    for _ in range(20):  # every tick must leave the next one in the future
        deadline = core.next_deadline()
        assert deadline > now, f"next deadline {deadline} is not after now={now}: the driver would spin"
        now = deadline
        core.tick(now)
        flush_now(core, now)
    assert core.is_leader and core.epoch == 1 and now >= 10 * CFG.fetch_timeout_ms


def _fetches(messages: list[Envelope]) -> list[FetchRequest]:
    return [e.message for e in messages if isinstance(e.message, FetchRequest)]


def test_follower_back_from_prospective_waits_for_its_flush() -> None:
    """Regression: a follower whose flush was running went Prospective (connection to the leader reset), lost the
    pre-vote, and followed the same leader again: it fetched at once, naming its unflushed log end as durable."""
    log = SimLog()
    core = make_core(1, [1, 2, 3], log)
    now = 10
    core.handle(Envelope(2, 1, BeginQuorumEpochRequest(CLUSTER_ID, 2, 1, 1)), now)
    assert isinstance(core.role, Follower) and core.leader_id == 2
    (fetch,) = _fetches(core.take_messages())
    assert (fetch.fetch_offset, fetch.leader_epoch) == (0, 1)
    # The leader answers with two batches: the follower appends them and starts a flush (left running).
    records = build_batch([(None, b"a")], base_offset=0, epoch=1) + build_batch([(None, b"b")], base_offset=1, epoch=1)
    core.handle(Envelope(2, 1, FetchResponse(Errors.NONE, 1, 2, 0, records, correlation_id=fetch.correlation_id)), now)
    assert log.end_offset == 2 and core.poll_flush()
    assert _fetches(core.take_messages()) == []  # it waits for the flush before fetching again
    # The connection to the leader breaks; the follower starts a pre-vote and both voters reject it.
    core.peer_unreachable(2, now)
    now = core.next_deadline()
    core.tick(now)
    assert isinstance(core.role, Prospective)
    votes = [e for e in core.take_messages() if isinstance(e.message, VoteRequest)]
    assert sorted(e.destination for e in votes) == [2, 3] and all(e.message.pre_vote for e in votes)
    for e in votes:
        reply = VoteResponse(Errors.NONE, 1, 2, False, True, e.message.correlation_id)
        core.handle(Envelope(e.destination, 1, reply), now)
    assert isinstance(core.role, Follower) and core.leader_id == 2
    # Its flush is still running: no fetch may claim offsets 0-1 are durable yet.
    assert _fetches(core.take_messages()) == []
    end, batches = log.begin_flush()
    log.complete_flush(batches)
    core.flushed(end, now)
    (fetch,) = _fetches(core.take_messages())
    assert fetch.fetch_offset == 2 == log.durable_end


def elected_leader(config: RaftConfig = CFG) -> tuple[RaftCore, int]:
    """Node 1 of three, elected (every voter grants every (pre-)vote at once); its LeaderChange batch written and
    flushed, not committed. Returns it and the time."""
    core = make_core(1, [1, 2, 3], config=config)
    now = 0
    for _ in range(10):
        now = max(now, core.next_deadline())
        core.tick(now)
        pending = core.take_messages()
        while pending:
            m = pending.pop(0).message
            if isinstance(m, VoteRequest):
                reply = VoteResponse(Errors.NONE, m.replica_epoch, -1, True, m.pre_vote, m.correlation_id)
                core.handle(Envelope(2, 1, reply), now)
                pending += core.take_messages()
        if core.is_leader:
            break
    assert isinstance(core.role, Leader)
    flush_now(core, now)
    core.take_messages()
    return core, now


def fetch_from(voter: int, core: RaftCore, offset: int, correlation: int = 7) -> FetchRequest:
    return FetchRequest(CLUSTER_ID, voter, core.epoch, offset, core.epoch, 1 << 20, 0, correlation)


def test_leader_counts_a_fetch_offset_as_durable() -> None:
    """Why the rule above matters: the leader commits on the strength of a fetch offset alone."""
    core, now = elected_leader()
    core.handle(Envelope(2, 1, fetch_from(2, core, 1)), now)  # the epoch's LeaderChange record (offset 0) commits
    assert core.high_watermark == 1
    offset = core.append(core.epoch, [b"x"], now)
    flush_now(core, now)
    assert core.high_watermark == 1
    # One follower says it holds everything (fetch offset = the leader's log end): with the leader, a majority.
    core.handle(Envelope(2, 1, fetch_from(2, core, offset + 1)), now)
    assert core.high_watermark == offset + 1


def test_appends_gather_while_a_batch_awaits_its_commit() -> None:
    """Group commit: a lone append is written at once; appends made while it is uncommitted wait (up to the
    linger) and go out as one batch, in the answer to the fetch that commits it."""
    core, now = elected_leader()
    core.handle(Envelope(2, 1, fetch_from(2, core, 1)), now)
    core.take_messages()
    first = core.append(core.epoch, [b"a"], now)
    assert core.log.end_offset == first + 1  # nothing in flight: written at once
    flush_now(core, now)
    for value in (b"b", b"c", b"d"):
        core.append(core.epoch, [value], now)
    flush_now(core, now)
    assert core.log.end_offset == first + 1  # held: the batch before them is not committed yet
    core.handle(Envelope(2, 1, fetch_from(2, core, first + 1, correlation=8)), now)
    assert core.high_watermark == first + 1
    (answer,) = [e.message for e in core.take_messages() if isinstance(e.message, FetchResponse)]
    (batch,) = iter_batches(answer.records)
    assert (batch.base_offset, batch.last_offset, core.log.end_offset) == (first + 1, first + 3, first + 4)
    # Without a commit, held appends still go out once their linger expires.
    core.append(core.epoch, [b"e"], now)
    assert core.log.end_offset == first + 4
    core.tick(now + CFG.append_linger_ms)
    assert core.log.end_offset == first + 5


def _answers(core: RaftCore) -> list[tuple[int, FetchResponse]]:
    return [(e.destination, e.message) for e in core.take_messages() if isinstance(e.message, FetchResponse)]


def test_a_higher_high_watermark_alone_waits_for_records_to_carry_it() -> None:
    """Every commit moves the high watermark. A parked fetch whose only news is that waits up to the linger: records
    appended meanwhile go out in the same answer (one answer per commit, not two); with none, the high watermark
    goes alone once the linger is up. With a linger of 0 it goes at once, as in Kafka."""
    linger = CFG.high_watermark_linger_ms
    assert 0 < linger < CFG.fetch_max_wait_ms
    core, now = elected_leader()

    def long_poll(voter: int, offset: int, correlation: int) -> Envelope:
        return Envelope(
            voter, 1, FetchRequest(CLUSTER_ID, voter, core.epoch, offset, core.epoch, 1 << 20, 500, correlation)
        )

    # Voter 2 holds the LeaderChange record: that commits it; its own fetch (and 3's, parked) learn of it later.
    core.handle(long_poll(3, 1, correlation=1), now)
    core.handle(long_poll(2, 1, correlation=2), now)
    assert core.high_watermark == 1
    assert _answers(core) == []
    assert core.next_deadline() == now + linger
    # Records within the linger: one answer each, records and high watermark together.
    offset = core.append(core.epoch, [b"x"], now + 1)
    answers = _answers(core)
    assert sorted(v for v, _ in answers) == [2, 3]
    assert all(
        a.high_watermark == 1 and [b.base_offset for b in iter_batches(a.records)] == [offset] for _, a in answers
    )
    flush_now(core, now + 1)
    # Voter 2 acknowledges the record: committed; nothing else comes, so the high watermark goes alone at the linger.
    core.handle(long_poll(2, offset + 1, correlation=3), now + 2)
    core.handle(long_poll(3, offset + 1, correlation=4), now + 2)
    assert core.high_watermark == offset + 1
    assert _answers(core) == []
    core.tick(now + 2 + linger - 1)
    assert _answers(core) == []
    core.tick(now + 2 + linger)
    answers = _answers(core)
    assert sorted((v, a.high_watermark, a.records) for v, a in answers) == [(2, offset + 1, b""), (3, offset + 1, b"")]
    # A probe (max wait 0) is answered at once, whatever it brings.
    core.handle(Envelope(2, 1, fetch_from(2, core, offset + 1, correlation=5)), now + 20)
    assert [v for v, _ in _answers(core)] == [2]

    kafka, now = elected_leader(dataclasses.replace(CFG, high_watermark_linger_ms=0))
    core = kafka
    core.handle(long_poll(3, 1, correlation=1), now)
    core.handle(long_poll(2, 1, correlation=2), now)
    assert sorted((v, a.high_watermark) for v, a in _answers(core)) == [(2, 1), (3, 1)]


def test_an_observer_is_answered_at_most_once_per_observer_linger() -> None:
    """Observers gate no commit: while records keep coming, the leader answers one at most once per observer linger,
    each answer carrying everything appended meanwhile; a voter's parked fetch is still answered at each append.
    An observer heard from after a quiet spell is answered at once; so is a probe (max wait 0). 0: at once."""
    # Longer than the simulator's 5 ms, so that several appends (4 ms apart) fall within one linger.
    config = dataclasses.replace(CFG, observer_linger_ms=25)
    linger = config.observer_linger_ms
    assert 0 < linger <= config.fetch_max_wait_ms
    core, now = elected_leader(config)
    observer = 101

    def long_poll(replica: int, offset: int, correlation: int) -> Envelope:
        return Envelope(
            replica, 1, FetchRequest(CLUSTER_ID, replica, core.epoch, offset, core.epoch, 1 << 20, 500, correlation)
        )

    core.handle(long_poll(2, 1, correlation=1), now)  # commits the LeaderChange record
    assert core.high_watermark == 1
    # The observer's first fetch, from offset 0: answered at once (it has not been answered before).
    core.handle(long_poll(observer, 0, correlation=2), now)
    assert [(v, a.high_watermark) for v, a in _answers(core)] == [(observer, 1)]
    first = now
    core.handle(long_poll(observer, 1, correlation=3), now + 1)
    offsets = []
    for t in range(2, linger, 4):  # records while the linger runs: the voter hears of each, the observer of none
        core.handle(long_poll(2, core.log.end_offset, correlation=10 + t), now + t)
        offsets.append(core.append(core.epoch, [b"x"], now + t))
        assert [v for v, _ in _answers(core)] == [2]
        flush_now(core, now + t)
    assert core.next_deadline() <= first + linger
    core.tick(first + linger - 1)
    assert _answers(core) == []
    core.tick(first + linger)
    ((v, a),) = _answers(core)
    assert v == observer and [b.base_offset for b in iter_batches(a.records)] == offsets
    # Its next fetch, with nothing new: parked; records then come after a quiet spell: answered at once.
    quiet = first + 2 * linger + 1
    core.handle(long_poll(observer, offsets[-1] + 1, correlation=4), first + linger + 1)
    assert _answers(core) == []
    core.handle(long_poll(2, core.log.end_offset, correlation=6), quiet)  # commits the last "x"
    core.append(core.epoch, [b"y"], quiet)
    assert sorted(v for v, _ in _answers(core)) == [2, observer]
    # A probe right after that answer is answered at once all the same.
    core.handle(Envelope(observer, 1, fetch_from(observer, core, offsets[-1] + 1, correlation=5)), quiet + 1)
    assert [v for v, _ in _answers(core)] == [observer]

    core, now = elected_leader(dataclasses.replace(CFG, observer_linger_ms=0))
    core.handle(long_poll(2, 1, correlation=9), now)
    core.handle(long_poll(observer, 0, correlation=1), now)
    assert [v for v, _ in _answers(core)] == [observer]
    core.handle(long_poll(observer, 1, correlation=2), now + 1)
    core.append(core.epoch, [b"x"], now + 2)
    assert sorted(v for v, _ in _answers(core)) == [2, observer]


def test_candidate_in_backoff_keeps_a_future_deadline() -> None:
    """Regression: a candidate rejected by a majority backs off without resending votes, yet next_deadline() still
    offered the resend time of a vote left unanswered: once that passed (here: the voter's connection reset), the
    deadline stayed in the past until the backoff ended — a busy loop for the runtime, a hang for the simulator
    (seed 238 of 5 voters, before the harness stopped delivering messages across restarts)."""
    core = make_core(1, [1, 2, 3, 4, 5])
    now = core.next_deadline()
    core.tick(now)
    assert isinstance(core.role, Prospective)
    for e in core.take_messages():
        m = e.message
        if e.destination in (2, 3):
            core.handle(Envelope(e.destination, 1, VoteResponse(Errors.NONE, 0, -1, True, True, m.correlation_id)), now)
    assert core.role.name == "Candidate" and core.epoch == 1
    requests = {e.destination: e.message for e in core.take_messages() if isinstance(e.message, VoteRequest)}
    assert sorted(requests) == [2, 3, 4, 5]
    for voter in (2, 3, 4):  # a majority rejects; 5 does not answer
        reply = VoteResponse(Errors.NONE, 1, -1, False, False, requests[voter].correlation_id)
        core.handle(Envelope(voter, 1, reply), now)
    backoff_until = core.role.backoff_until  # type: ignore[union-attr]
    assert backoff_until is not None
    core.peer_unreachable(5, now)  # voter 5's connection resets: its vote request is due again soon
    for _ in range(10):
        deadline = core.next_deadline()
        assert deadline > now or core.role.name != "Candidate", f"deadline {deadline} stuck at now={now}"
        now = max(now, deadline)
        core.tick(now)
        core.take_messages()
        if core.role.name != "Candidate":
            break
    assert isinstance(core.role, Prospective) and now >= backoff_until  # the backoff ran its course


def test_a_voter_silent_since_it_fetched_is_told_the_leader_again() -> None:
    """Every fetch.timeout/2 the leader sends BeginQuorumEpoch to each voter it has not heard from within that time,
    as Kafka's leader does (Kafka: to every voter), so that a voter that restarted with its data wiped learns the
    leader then, not at its election timeout through a refused pre-vote. A voter that keeps fetching is not sent
    one. (Once was: to voters that had never fetched in the epoch, which a restarted voter had.)"""
    core, now = elected_leader()
    core.handle(Envelope(3, 1, fetch_from(3, core, 1, correlation=8)), now)  # voter 3 fetched once, then fell silent
    told: list[int] = []
    end = now + 3 * CFG.fetch_timeout_ms
    correlation = 100
    while now < end:
        now += CFG.fetch_max_wait_ms  # voter 2 fetches at every max wait, as an idle follower's long poll returns
        correlation += 1
        core.handle(Envelope(2, 1, fetch_from(2, core, core.log.end_offset, correlation)), now)
        core.tick(now)
        flush_now(core, now)
        told += [e.destination for e in core.take_messages() if isinstance(e.message, BeginQuorumEpochRequest)]
    assert core.is_leader
    assert 2 not in told
    assert told.count(3) >= 5, told  # one every fetch.timeout/2 once it has been silent that long


def test_a_voter_started_empty_asks_the_other_voters_who_leads() -> None:
    """A voter whose data directory was empty at start (new, or wiped) asks every other voter once: the first
    answer naming a leader makes it that leader's follower, at once, not at the leader's next BeginQuorumEpoch
    (up to fetch.timeout/2 away) nor at its own election timeout. Kafka's voters wait: the default asks nothing."""
    assert _fetches(make_core(1, [1, 2, 3]).take_messages()) == []  # state on disk, or Kafka's way: no question
    core = RaftCore(
        node_id=1, voters=[1, 2, 3], cluster_id=CLUSTER_ID, log=SimLog(), store=SimStore(), config=CFG,
        rng=random.Random(1), now_ms=0, ask_for_leader=True,
    )  # fmt: skip
    asked = core.take_messages()
    assert sorted(e.destination for e in asked) == [2, 3]
    assert all(isinstance(e.message, FetchRequest) and e.message.max_wait_ms == 0 for e in asked)
    deadline = core.role.election_deadline  # type: ignore[union-attr]
    # Voter 3 knows no leader yet (an election is running): nothing changes, not even the election timer.
    refusal = FetchResponse(Errors.NOT_LEADER_OR_FOLLOWER, 0, -1, -1, correlation_id=asked[1].message.correlation_id)
    core.handle(Envelope(3, 1, refusal), 5)
    assert isinstance(core.role, Unattached) and core.role.election_deadline == deadline
    assert core.take_messages() == []
    # Voter 2 is the leader of epoch 4: its answer (its epoch is newer than ours) names it.
    fenced = FetchResponse(Errors.FENCED_LEADER_EPOCH, 4, 2, -1, correlation_id=asked[0].message.correlation_id)
    core.handle(Envelope(2, 1, fenced), 6)
    assert isinstance(core.role, Follower) and (core.leader_id, core.epoch) == (2, 4)
    assert core.role.voted_id == -1
    (fetch,) = _fetches(core.take_messages())  # and it fetches from it
    assert (fetch.fetch_offset, fetch.leader_epoch) == (0, 4)
