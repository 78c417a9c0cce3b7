"""Incremental fetch sessions between the brokers' simulated replicas (pykraft.replica.fetch_session), in process on
a virtual clock: an idle partition costs nothing per fetch, yet every change still reaches the follower and the ISR
rules still hold; session errors start the session over.

The scenarios with producing partitions run with and without sessions in test_data_plane.py; the data plane's
fetchers use sessions over gRPC there too."""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from test_data_plane import EPOCHS, LAG_MS, TOPIC, Sim

from pykraft.api import broker_pb2
from pykraft.replica import data_plane, session_fetching
from pykraft.replica.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, NO_SESSION, SHRINK_BYTES, shrunk
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import MESSAGE_BYTES, BrokerState, Partition, ReplicaConfig
from pykraft.replica.session_fetching import SessionFetch, drain
from quorum.errors import Errors

T = TypeVar("T")
IDLE = ReplicaConfig(produce_rate=0.0, replica_lag_time_max_ms=LAG_MS, initial_partition_bytes=10 * MESSAGE_BYTES)


def parked(sim: Sim) -> int:
    """Follower replicas parked in a leader's session, over all leaders."""
    return sum(
        1
        for m in sim.managers.values()
        for p in m.partitions.values()
        if p.is_leader
        for r in p.remotes.values()
        if r.parked is not None
    )


def test_idle_partitions_cost_nothing_per_fetch_once_parked() -> None:
    sim = Sim(partitions=30, config=IDLE, sessions=True)
    sim.run_until(lambda: sim.now >= 3000, 4000)
    assert parked(sim) == 30 * 2  # every follower of every partition
    sent, answered = sim.entries_sent, sim.entries_answered
    fetches = sum(m.counters.fetches_sent for m in sim.managers.values())
    sim.run_until(lambda: sim.now >= 3 * LAG_MS + 3000, 10 * LAG_MS)
    assert sum(m.counters.fetches_sent for m in sim.managers.values()) - fetches >= 6 * 2 * 3  # they kept fetching
    assert (sim.entries_sent, sim.entries_answered) == (sent, answered)  # with nothing in them
    assert all(len(isr) == 3 for isr in sim.isrs().values())  # and nobody fell out of an ISR
    for m in sim.managers.values():
        assert {p.high_watermark for p in m.partitions.values()} == {10}


def test_a_session_that_parked_its_partitions_gives_back_their_table() -> None:
    """Sets keep the table of their largest size; a leader's session that once held every partition active (a
    broker at millions of partitions: megabytes per follower) is copied small once they are parked."""
    sim = Sim(partitions=4000, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 4000 * 2, 4000)
    sessions = [s for m in sim.managers.values() for s in m.leader_sessions.by_id.values()]
    assert sessions and all(not s.active for s in sessions)
    assert all(sys.getsizeof(s.active) < SHRINK_BYTES for s in sessions)  # not the ~100 KiB of 2,000 keys
    assert shrunk(big := set(range(2000))) is big  # a set at its size is left alone


def test_a_leader_change_wakes_parked_partitions_and_the_followers_move_on() -> None:
    sim = Sim(partitions=12, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 24, 4000)
    sim.dead.add(3)
    sim.ctrl.fence(3)  # broker 3 leaves every ISR; the partitions it led get new leaders
    sim.poll()
    moved = [i for i, s in sim.ctrl.partitions.items() if s["le"] > 0]
    assert moved
    sim.run_until(lambda: sim.now >= 8000, 10_000)
    for i in moved:  # the new leaders' followers fetch from them, in sessions, and are parked there again
        s = sim.ctrl.partitions[i]
        leader = sim.managers[s["leader"]].partitions[(TOPIC, i)]
        assert leader.is_leader
        assert {b for b, r in leader.remotes.items() if r.parked} == set(s["isr"]) - {s["leader"]}
        for b in s["isr"]:
            assert sim.managers[b].partitions[(TOPIC, i)].high_watermark == 10
    assert all(3 not in isr for isr in sim.isrs().values())


def test_an_isr_change_wakes_only_the_followers_it_takes_out() -> None:
    """A third broker leaving every ISR (its controlled shutdown, its fencing) changes every partition it held: a
    leader that stays leader wakes the follower it loses, not the one still in sync with the whole idle log."""
    sim = Sim(partitions=12, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 24, 4000)
    stays = [i for i, s in sim.ctrl.partitions.items() if s["leader"] != 3]
    sim.ctrl.fence(3)
    sim.poll()
    for i in stays:
        leader = sim.managers[sim.ctrl.partitions[i]["leader"]].partitions[(TOPIC, i)]
        assert leader.remotes.get(3).parked is None  # type: ignore[union-attr]
        (other,) = set(leader.replicas) - {leader.local_id, 3}
        assert leader.remotes.get(other).parked is not None, i  # type: ignore[union-attr]
    answered = sim.entries_answered
    sim.run_until(lambda: sim.now >= 8000, 10_000)
    assert parked(sim) == 12  # the new leaders' followers too, once they fetched from them
    # Answered since: the moved partitions (to their followers, anew) and broker 3's errors; nothing for the others.
    assert sim.entries_answered - answered <= 2 * (12 - len(stays)), (sim.entries_answered, answered)
    sim.ctrl.brokers[3] = sim.ctrl.brokers[3]._replace(fenced=False)
    sim.poll()
    took = sim.run_until(lambda: all(3 in isr for isr in sim.isrs().values()), 4 * LAG_MS)
    assert took <= sim.config.replica_fetch_wait_max_ms + 2 * Sim.STEP
    sim.run_until(lambda: parked(sim) == 24, 4000)


def test_a_follower_that_stops_fetching_an_idle_partition_stays_in_sync_as_in_kafka() -> None:
    """Kafka's isCaughtUp: a follower whose log end is the leader's is caught up, fetching or not — parked or not,
    an idle partition does not shrink a silent follower that has everything (the controller fences a dead broker)."""
    sim = Sim(partitions=6, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 12, 4000)
    sim.paused.add(2)
    sim.run_until(lambda: sim.now >= 4 * LAG_MS, 5 * LAG_MS)
    assert all(len(isr) == 3 for isr in sim.isrs().values())


def test_a_new_replica_copies_the_log_then_parks_and_joins_the_isr() -> None:
    sim = Sim(partitions=3, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 6, 4000)
    # Broker 3 restarts empty (a new incarnation): its replicas are not original ones... here they are (no adding),
    # so make one partition's broker-3 replica lag: drop it from the ISR and empty its log.
    s = sim.ctrl.partitions[0]
    follower = next(b for b in s["replicas"] if b != s["leader"])
    s["isr"] = tuple(b for b in s["isr"] if b != follower)
    s["pe"] += 1
    sim.ctrl.brokers[follower] = BrokerState(77, False, False, None)
    m = sim.managers[follower] = ReplicaManager(follower, IDLE, clock=lambda: sim.now, broker_epoch=lambda: 77)
    m.submit = sim.submit
    sim.poll()
    m.partitions[(TOPIC, 0)].log_end_offset = m.partitions[(TOPIC, 0)].high_watermark = 0
    took = sim.run_until(lambda: follower in sim.ctrl.partitions[0]["isr"], 5000)
    assert took < 2000
    assert m.partitions[(TOPIC, 0)].log_end_offset == 10


def test_session_errors_start_the_session_over() -> None:
    sim = Sim(partitions=6, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 12, 4000)
    leader = sim.managers[1]
    follower = sim.managers[2]
    session = follower.sessions.get(1)
    assert session.session_id != NO_SESSION
    epoch = sim.ctrl.brokers[2].epoch
    # A wrong epoch, then an unknown id: refused as Kafka's, nothing answered.
    assert drain(leader.answer_session_fetch(2, epoch, 1 << 20, session.session_id, session.epoch + 5, [])) == (
        Errors.INVALID_FETCH_SESSION_EPOCH,
        NO_SESSION,
        [],
    )
    assert drain(leader.answer_session_fetch(2, epoch, 1 << 20, 12345, 1, []))[0] == Errors.FETCH_SESSION_ID_NOT_FOUND
    assert drain(leader.answer_session_fetch(3, epoch, 1 << 20, session.session_id, session.epoch, []))[0] == (
        Errors.FETCH_SESSION_ID_NOT_FOUND  # another broker's session
    )
    # The leader restarts: its sessions are gone. The follower's next fetch is refused, the one after is full.
    sim.managers[1] = ReplicaManager(1, IDLE, clock=lambda: sim.now, broker_epoch=lambda: EPOCHS[1])
    sim.managers[1].submit = sim.submit
    sim.poll()
    fetch = follower.session_fetch(1)
    assert fetch is not None and fetch.session_id == session.session_id and fetch.items == []
    error, _, _ = drain(
        sim.managers[1].answer_session_fetch(2, epoch, 1 << 20, fetch.session_id, fetch.session_epoch, [])
    )
    assert error == Errors.FETCH_SESSION_ID_NOT_FOUND
    assert drain(follower.on_session_response(1, fetch, error, NO_SESSION, {}))  # fetch again at once
    full = follower.session_fetch(1)
    assert full is not None and (full.session_id, full.session_epoch) == (NO_SESSION, INITIAL_EPOCH)
    assert len(full.items) == len(follower._by_leader[1])
    assert sim.managers[1].leader_sessions.by_replica == {}  # not opened yet: the full fetch was not sent
    sim.run_until(lambda: sim.now >= 8000, 10_000)
    assert all(len(isr) == 3 for isr in sim.isrs().values())
    assert sim.managers[1].leader_sessions.by_replica[2].session_id == follower.sessions.get(1).session_id


def test_a_bounded_follower_fetches_without_a_session() -> None:
    config = ReplicaConfig(produce_rate=0.0, replica_lag_time_max_ms=LAG_MS, disk_rate=100 * MESSAGE_BYTES)
    sim = Sim(partitions=3, config=config, sessions=True)
    sim.run_until(lambda: sim.now >= 2000, 3000)
    m = sim.managers[2]
    for leader in m.followed_leaders():
        fetch = m.session_fetch(leader)
        assert fetch is not None and (fetch.session_id, fetch.session_epoch) == (NO_SESSION, FINAL_EPOCH)
    assert not sim.managers[1].leader_sessions.by_replica  # a final-epoch fetch holds no session


def test_a_follower_fenced_while_parked_rejoins_the_isr_when_unfenced() -> None:
    """Its fetch state does not change (same offset, same leader epoch: it sends nothing new), so only the leader
    seeing the ISR change in its metadata can wake the partition, look at the follower again and expand."""
    sim = Sim(partitions=6, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 12, 4000)
    sim.ctrl.fence(3)
    sim.poll()
    assert all(3 not in isr for isr in sim.isrs().values())
    sim.ctrl.brokers[3] = sim.ctrl.brokers[3]._replace(fenced=False)
    sim.poll()
    took = sim.run_until(lambda: all(3 in isr for isr in sim.isrs().values()), 4 * LAG_MS)
    assert took <= sim.config.replica_fetch_wait_max_ms + 2 * Sim.STEP


def test_a_joining_follower_parks_while_its_expansion_waits_for_the_controller(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A broker back from a fence rejoins every ISR it was in; with the controller slow to answer (a broker restarted
    at 2M partitions sent ~250k expansions), its partitions must not stay active in its leaders' sessions, each
    answered at every fetch. Applied, the expansion leaves them parked; refused, it wakes them to be tried again."""
    sim = Sim(partitions=6, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 12, 4000)
    sim.ctrl.fence(3)
    sim.poll()
    held: list = []
    for m in sim.managers.values():
        m.submit = held.append  # the controller is busy: expansions wait
    sim.ctrl.brokers[3] = sim.ctrl.brokers[3]._replace(fenced=False)
    sim.poll()
    joining = [i for i, s in sim.ctrl.partitions.items() if 3 not in s["isr"]]
    assert joining
    sim.run_until(lambda: len(held) == len(joining), 2000)

    def remote(i: int):  # type: ignore[no-untyped-def]  # broker 3's replica state on the partition's leader
        return sim.managers[sim.ctrl.partitions[i]["leader"]].partitions[(TOPIC, i)].remotes.get(3)

    assert all(remote(i).parked is not None for i in joining)
    answered = sim.entries_answered
    sim.run_until(lambda: sim.now >= 4 * LAG_MS, 5 * LAG_MS)  # fetch after fetch, the expansions still waiting
    assert sim.entries_answered == answered  # nothing answered for them
    assert all(3 not in sim.ctrl.partitions[i]["isr"] for i in joining)
    looked: list[int] = []
    with monkeypatch.context() as m:
        m.setattr(Partition, "high_watermark_now", lambda p, *_: looked.append(p.index) or p.high_watermark)
        assert sum(sim.managers[b].maybe_shrink_isr() for b in (1, 2)) == 0
    assert looked == []  # the ISR expiration walks past a change in flight, as Kafka's
    refused = joining[0]
    first = list(held)
    held.clear()
    sim.ctrl.brokers[3] = sim.ctrl.brokers[3]._replace(fenced=True)  # fenced again for a moment...
    sim.queued = [c for c in first if c.partition.index == refused]  # ...as this one reaches the controller
    sim.answer_alters()
    sim.ctrl.brokers[3] = sim.ctrl.brokers[3]._replace(fenced=False)
    sim.run_until(lambda: len(held) == 1, 2000)  # INELIGIBLE_REPLICA woke it: looked at again, a new expansion
    assert held[0].partition.index == refused and held[0] is not first[0]
    sim.queued = [c for c in first if c.partition.index != refused] + held
    for m in sim.managers.values():
        m.submit = sim.submit
    sim.step()
    assert all(3 in sim.ctrl.partitions[i]["isr"] for i in joining)
    assert all(remote(i).parked is not None for i in joining)  # joined, and still parked
    sim.run_until(lambda: parked(sim) == 12, 4000)


def _request(sim: Sim, follower_id: int, fetch: SessionFetch) -> broker_pb2.FetchRequest:
    return broker_pb2.FetchRequest(
        replica_id=follower_id,
        broker_epoch=sim.ctrl.brokers[follower_id].epoch,
        max_bytes=10 << 20,
        session_id=fetch.session_id,
        session_epoch=fetch.session_epoch,
        partitions=[
            broker_pb2.FetchRequest.Partition(
                topic_id=bytes(i.partition.topic_id),
                partition=i.partition.index,
                fetch_offset=i.fetch_offset,
                current_leader_epoch=i.leader_epoch,
                partition_max_bytes=i.max_bytes,
            )
            for i in fetch.items
        ],
    )


async def test_a_leader_answers_a_large_full_fetch_a_slice_at_a_time_and_the_loop_runs_between(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A follower restarted at 2M partitions asks each leader for ~250k in one full fetch: answered in one go, it
    held a leader's loop for 29 s. The server answers a full fetch a slice at a time; what the loop does meanwhile
    (here: the partition last in the request is deleted) is seen by the slices after it, and the answer is
    otherwise the one answered at once. An incremental fetch is answered in one go: paused, each slice waited a
    turn of a busy loop, and the fetches of a cluster creating 2M partitions took minutes to answer."""
    monkeypatch.setattr(session_fetching, "FETCH_SLICE", 5)
    monkeypatch.setattr(data_plane, "ENCODE_SLICE", 5)
    paused, at_once = (Sim(partitions=90, config=IDLE, sessions=True) for _ in range(2))
    fetches = [sim.managers[2].session_fetch(1) for sim in (paused, at_once)]
    assert fetches[0] is not None and fetches[1] is not None and fetches[0].session_id == NO_SESSION
    requested = [i.partition.index for i in fetches[0].items]
    assert len(requested) == 30
    deleted = requested[-1]

    def delete() -> None:
        del paused.ctrl.partitions[deleted]
        paused.poll()

    service = data_plane.FetchService(paused.managers[1])
    response, ticks = await turns_while(service.Fetch(_request(paused, 2, fetches[0]), None), delete)
    assert ticks == 6 + 5 + 6 - 1  # slices: 30 partitions registered, 29 answered, 30 encoded; its first run ticks 0
    del at_once.ctrl.partitions[deleted]
    at_once.poll()
    _, answers = at_once.deliver(2, 1, fetches[1])
    got = [(p.partition, Errors(p.error_code), p.high_watermark, p.log_end_offset) for p in response.partitions]
    assert sorted(got) == sorted((i, a.error, a.high_watermark, a.log_end_offset) for _, i, a in answers)
    assert (deleted, Errors.UNKNOWN_TOPIC_OR_PARTITION, -1, -1) in got
    session = paused.managers[1].leader_sessions.by_id[response.session_id]
    assert (TOPIC, deleted) not in session.active

    incremental = _request(paused, 2, fetches[0])  # the same partitions asked again, in the session
    incremental.session_id, incremental.session_epoch = response.session_id, 1
    monkeypatch.setattr(data_plane, "ENCODE_SLICE", 1000)
    response, ticks = await turns_while(service.Fetch(incremental, None))
    assert len(response.partitions) == 30 and response.session_id == session.session_id
    assert ticks == 0


async def test_a_follower_applies_a_large_full_answer_a_slice_at_a_time_and_the_loop_runs_between(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A broker restarted at 2M partitions opens a session with each leader for ~170k partitions: applying one
    answer at once holds its loop for ~1 s of CPU (6 us a partition), while its metadata fetch must go on. The
    answer to a full fetch is applied a slice at a time; what the loop does meanwhile (here:
    the partition last in the answer moves its leadership to this follower) is seen by the slices after it, and the
    outcome is otherwise the one applied at once. An incremental answer is applied in one go."""
    monkeypatch.setattr(session_fetching, "FETCH_SLICE", 5)
    paused, at_once = (Sim(partitions=90, sessions=True) for _ in range(2))
    for sim in (paused, at_once):
        sim.now += 5000  # the leaders produced meanwhile: the answers carry records
    fetches = [sim.managers[2].session_fetch(1) for sim in (paused, at_once)]
    assert fetches[0] is not None and fetches[1] is not None and fetches[0].session_id == NO_SESSION
    answered = [_answer(sim, 1, 2, fetch) for sim, fetch in zip((paused, at_once), fetches, strict=True)]
    assert len(answered[0][2]) == 30 and any(a.log_end_offset > 0 for a in answered[0][2].values())
    moved = list(answered[0][2])[-1][1]

    def move(sim: Sim) -> None:  # the controller makes the follower this partition's leader
        s = sim.ctrl.partitions[moved]
        s.update(leader=2, le=s["le"] + 1, pe=s["pe"] + 1)
        sim.poll()

    steps = paused.managers[2].on_session_response(1, fetches[0], *answered[0])
    behind, ticks = await turns_while(session_fetching.drain_pausing(steps), lambda: move(paused))
    assert ticks == 6 + 5 - 1  # slices: 30 answers read, 29 applied (one is led here now); its first run ticks 0
    move(at_once)
    assert drain(at_once.managers[2].on_session_response(1, fetches[1], *answered[1])) == behind

    def state(sim: Sim) -> list[tuple[int, bool, int, int]]:
        m = sim.managers[2]
        return sorted((k[1], p.is_leader, p.log_end_offset, p.high_watermark) for k, p in m.partitions.items())

    assert state(paused) == state(at_once)
    assert paused.managers[2].partitions[(TOPIC, moved)].is_leader
    assert paused.managers[2].counters.fetches_sent == at_once.managers[2].counters.fetches_sent == 1

    incremental = paused.managers[2].session_fetch(1)  # in the session now: applied in one go
    assert incremental is not None and incremental.session_id != NO_SESSION and incremental.items
    steps = paused.managers[2].on_session_response(1, incremental, *_answer(paused, 1, 2, incremental))
    _, ticks = await turns_while(session_fetching.drain_pausing(steps))
    assert ticks == 0


async def turns_while(work: Awaitable[T], first: Callable[[], None] = lambda: None) -> tuple[T, int]:
    """``work``'s result and the turns the loop took while it ran (its first turn, which starts the counter, counts
    none); ``first`` runs at the first turn counted."""
    ticks = 0

    async def meanwhile() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1
            if ticks == 1:
                first()

    ticker = asyncio.create_task(meanwhile())
    try:
        result = await work
    finally:
        ticker.cancel()
    return result, ticks


def _answer(sim: Sim, leader_id: int, follower_id: int, fetch: SessionFetch) -> tuple[Errors, int, dict]:  # type: ignore[type-arg]
    """The leader's answer to ``fetch``, as the follower's data plane hands it on: (error, session id, answers)."""
    error, session_id, answers = sim.answer(follower_id, leader_id, fetch)
    return error, session_id, {(t, i): a for t, i, a in answers}


def test_a_partition_that_comes_while_the_full_fetch_is_in_flight_is_fetched_next() -> None:
    """The full fetch that opens a session was built before the partition came: the next fetch must carry it (a
    follower that left it out was shrunk from its ISR after replica.lag.time.max.ms, seen in the scale run)."""
    sim = Sim(partitions=3, config=IDLE, sessions=True)
    follower = sim.managers[2]
    leader = next(iter(follower.followed_leaders()))
    full = follower.session_fetch(leader)
    assert full is not None and full.session_id == NO_SESSION
    new = max(sim.ctrl.partitions) + 1
    sim.ctrl.partitions[new] = {"leader": leader, "le": 0, "pe": 0, "replicas": (leader, 2), "isr": (leader, 2)}
    sim.poll()  # metadata applied while the full fetch is in flight
    sim.deliver(2, leader, full)
    session_id = sim.managers[leader].leader_sessions.by_replica[2].session_id  # the one the leader opened
    fetch = follower.session_fetch(leader)
    assert fetch is not None and fetch.session_id == session_id
    assert [(i.partition.index) for i in fetch.items] == [new]


def _exchange(sim: Sim, follower_id: int, leader_id: int) -> list[tuple[int, Errors]]:
    """One session fetch from ``follower_id`` to ``leader_id``, answered and applied: (partition, error) per answer."""
    fetch = sim.managers[follower_id].session_fetch(leader_id)
    assert fetch is not None
    return [(i, a.error) for _, i, a in sim.deliver(follower_id, leader_id, fetch)[1]]


def test_a_partition_answered_with_an_error_is_asked_again_however_late_the_next_fetch() -> None:
    """A leader drops from the session a partition it answers with an error (here: it has not learnt of the
    partition yet). The follower must ask for it again once its backoff ends, even when its next fetch is built
    only after the backoff has run out (a busy broker): it once kept counting the partition as held by the
    leader's session and never fetched it again, and the leader shrank it out of the ISR after
    replica.lag.time.max.ms (thousands of shrinks per broker in the scale run)."""
    sim = Sim(partitions=3, config=IDLE, sessions=True)
    sim.run_until(lambda: parked(sim) == 6, 4000)
    leader_id, follower_id = 1, 2
    new = max(sim.ctrl.partitions) + 1
    sim.ctrl.partitions[new] = {
        "leader": leader_id, "le": 0, "pe": 0, "replicas": (leader_id, follower_id), "isr": (leader_id, follower_id),
    }  # fmt: skip
    follower = sim.managers[follower_id]
    follower.apply_metadata(sim.ctrl.metadata(), sim.ctrl.brokers)  # the follower learns of it first
    assert _exchange(sim, follower_id, leader_id) == [(new, Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    sim.now += IDLE.replica_fetch_backoff_ms + 1  # the next fetch is built after the backoff ended
    sim.managers[leader_id].apply_metadata(sim.ctrl.metadata(), sim.ctrl.brokers)  # the leader learns of it
    assert _exchange(sim, follower_id, leader_id) == [(new, Errors.NONE)]
    leader = sim.managers[leader_id].partitions[(TOPIC, new)]
    assert leader.remotes.get(follower_id).log_end_offset == 10  # the leader saw the follower's fetch
    sim.run_until(lambda: sim.now >= 4 * LAG_MS, 5 * LAG_MS)
    assert sim.ctrl.partitions[new]["isr"] == (leader_id, follower_id)  # and it never left the ISR


class BusySim(Sim):
    """Brokers that apply each metadata change at their own moment (so a follower often learns of a partition before
    its leader does) and build their fetches late, as brokers on a loaded machine do. Seeded."""

    def __init__(self, seed: int, config: ReplicaConfig) -> None:
        self.rng = random.Random(seed)
        self.staggered = False
        super().__init__(partitions=3, config=config, sessions=True)
        self.staggered = True
        self.next_poll = dict.fromkeys(EPOCHS, 0)

    def poll(self) -> None:
        if not self.staggered:
            super().poll()

    def step(self) -> None:
        planned = dict(self.next_fetch)
        super().step()
        for b, m in self.managers.items():
            if self.next_fetch[b] != planned[b]:  # it fetched: its next fetch is built up to 1.5 s late
                self.next_fetch[b] += self.rng.randrange(0, 1600, Sim.STEP)
            if self.now >= self.next_poll[b]:
                m.apply_metadata(self.ctrl.metadata(), self.ctrl.brokers)
                self.next_poll[b] = self.now + self.rng.randrange(Sim.STEP, 2100, Sim.STEP)


@pytest.mark.parametrize("seed", range(4))
def test_no_live_follower_leaves_an_isr_when_metadata_and_fetches_come_late(seed: int) -> None:
    """Liveness under load: partitions created one after another, brokers applying them up to 2 s apart and
    building fetches up to 1.5 s late. Every follower must still fetch every partition well within
    replica.lag.time.max.ms (10 s here), so no ISR ever shrinks."""
    config = ReplicaConfig(produce_rate=0.0, replica_lag_time_max_ms=10_000, initial_partition_bytes=10 * MESSAGE_BYTES)
    sim = BusySim(seed, config)
    created = 0
    while sim.now < 20_000:
        if sim.now % 200 == 0:
            new = max(sim.ctrl.partitions) + 1
            replicas = tuple(sim.rng.sample(sorted(EPOCHS), 3))
            sim.ctrl.partitions[new] = {"leader": replicas[0], "le": 0, "pe": 0, "replicas": replicas, "isr": replicas}
            created += 1
        sim.step()
    sim.run_until(lambda: sim.now >= 45_000, 30_000)
    assert created == 100
    assert {isr for isr in sim.isrs().values() if len(isr) < 3} == set(), f"seed {seed}: a live follower was shrunk"
    for i, s in sim.ctrl.partitions.items():
        leader = sim.managers[s["leader"]].partitions[(TOPIC, i)]
        assert {b: r.log_end_offset for b, r in leader.remotes.items()} == dict.fromkeys(s["replicas"][1:], 10), (
            f"seed {seed}: partition {i}"
        )
