"""The controller's building blocks: timeline maps (latest vs committed, commit, revert), the event queue (Kafka's
KafkaEventQueue semantics) and the purgatory (responses waiting for the high watermark)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator

import pytest
import structlog

from controller import event_queue
from controller.event_queue import Event, EventQueue
from controller.purgatory import Purgatory
from controller.timeline import Timeline, TimelineDict
from quorum.errors import Errors, KafkaError

# -- Timeline / TimelineDict -------------------------------------------------------------------------------------


def at(timeline: Timeline, offset: int | None, fn) -> None:
    """Run ``fn`` as the replay of the record at ``offset`` (None: a committed record on a standby)."""
    timeline.offset = offset
    try:
        fn()
    finally:
        timeline.offset = None


def view(d: TimelineDict) -> dict:
    return dict(d.items())


def test_standby_writes_are_committed_at_once() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    d["a"] = 1
    d["b"] = 2
    del d["b"]
    assert view(d) == d.committed() == {"a": 1}
    assert not tl.pending


def test_uncommitted_changes_are_visible_latest_but_not_committed() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    d["old"] = 0
    at(tl, 5, lambda: d.__setitem__("new", 1))
    assert d["new"] == 1 and "new" in d and d.get("new") == 1
    assert view(d) == {"old": 0, "new": 1} and len(d) == 2 and sorted(d) == ["new", "old"]
    assert d.committed() == {"old": 0}
    assert tl.pending
    tl.commit_through(4)
    assert d.committed() == {"old": 0}
    tl.commit_through(5)
    assert d.committed() == {"old": 0, "new": 1}
    assert not tl.pending


@pytest.mark.parametrize("seed", range(20))
def test_latest_items_are_the_items_made_as_they_are_read(seed: int) -> None:
    """latest_items() is the latest state, in order, with nothing listed first (items() and values() list it):
    pending writes update, delete and add keys, some of them twice."""
    rng = random.Random(seed)
    tl = Timeline()
    d: TimelineDict[int, int] = TimelineDict(tl)
    for k in range(200):
        d[k] = rng.randrange(10)
    for offset in range(rng.choice((0, 1, 30))):
        k = rng.randrange(260)  # 200.. are new keys
        if rng.random() < 0.2 and k in d:
            at(tl, offset, lambda k=k: d.__delitem__(k))
        else:
            at(tl, offset, lambda k=k: d.__setitem__(k, rng.randrange(10)))
    latest = d.latest_items()
    assert not isinstance(latest, list)
    by_key = [(k, d[k]) for k in d]  # through __iter__ and __getitem__: another path to the latest state
    assert list(latest) == d.items() == by_key
    assert d.values() == [v for _, v in by_key]


def test_commit_through_commits_a_prefix_of_the_offsets() -> None:
    tl = Timeline()
    d: TimelineDict[str, str] = TimelineDict(tl)
    e: TimelineDict[str, str] = TimelineDict(tl)
    at(tl, 5, lambda: d.__setitem__("k", "v5"))
    at(tl, 6, lambda: e.__setitem__("x", "e6"))
    at(tl, 7, lambda: d.__setitem__("k", "v7"))
    at(tl, 8, lambda: d.__setitem__("j", "v8"))
    tl.commit_through(6)
    assert d.committed() == {"k": "v5"} and e.committed() == {"x": "e6"}
    assert view(d) == {"k": "v7", "j": "v8"}
    tl.commit_through(7)
    assert d.committed() == {"k": "v7"}
    tl.commit_through(100)
    assert d.committed() == {"k": "v7", "j": "v8"} == view(d)
    assert not tl.pending


def test_revert_drops_every_uncommitted_change_and_keeps_committed_ones() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    d["base"] = 0
    at(tl, 1, lambda: d.__setitem__("a", 1))
    at(tl, 2, lambda: d.__setitem__("base", 2))
    at(tl, 3, lambda: d.__setitem__("a", 3))
    at(tl, 4, lambda: d.__delitem__("base"))
    tl.commit_through(2)
    tl.revert()
    assert view(d) == d.committed() == {"base": 2, "a": 1}
    assert not tl.pending
    # committing later offsets after a revert changes nothing
    tl.commit_through(10)
    assert d.committed() == {"base": 2, "a": 1}


def test_deletes_are_uncommitted_until_committed() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    d["a"] = 1
    d["b"] = 2
    at(tl, 9, lambda: d.__delitem__("a"))
    assert "a" not in d and d.get("a") is None and d.get("a", -1) == -1
    with pytest.raises(KeyError):
        d["a"]
    assert view(d) == {"b": 2} and len(d) == 1 and list(d) == ["b"] and d.values() == [2]
    assert d.committed() == {"a": 1, "b": 2}
    with pytest.raises(KeyError):
        at(tl, 10, lambda: d.__delitem__("a"))  # already deleted (uncommitted)
    with pytest.raises(KeyError):
        at(tl, 10, lambda: d.__delitem__("never"))
    assert d.pop("missing", "default") == "default"
    tl.commit_through(9)
    assert d.committed() == {"b": 2}


def test_delete_then_revert_brings_the_key_back() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    d["a"] = 1
    at(tl, 3, lambda: d.__delitem__("a"))
    at(tl, 4, lambda: d.__setitem__("a", 4))  # recreated
    assert d["a"] == 4
    tl.revert()
    assert d["a"] == 1 and view(d) == {"a": 1}


def test_same_offset_overwrite_keeps_the_last_value() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)

    def replay() -> None:  # one record changing the same key twice
        d["k"] = 1
        d["k"] = 2

    at(tl, 7, replay)
    assert d["k"] == 2
    tl.commit_through(7)
    assert d.committed() == {"k": 2}
    assert not tl.pending

    def set_then_delete() -> None:
        d["gone"] = 1
        del d["gone"]

    at(tl, 8, set_then_delete)
    assert "gone" not in d
    tl.commit_through(8)
    assert "gone" not in d.committed() and not tl.pending


def test_version_changes_on_every_latest_state_change_and_on_revert() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    v0 = d.version
    at(tl, 1, lambda: d.__setitem__("a", 1))
    v1 = d.version
    assert v1 != v0
    tl.commit_through(1)
    assert d.version == v1  # committing does not change the latest state
    at(tl, 2, lambda: d.__setitem__("b", 2))
    v2 = d.version
    tl.revert()
    assert d.version != v2  # caches derived from the reverted state must be rebuilt


def test_revert_from_an_offset_keeps_what_came_before_it() -> None:
    """What the active controller applied for a batch Raft then refused is undone, and only that."""
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    at(tl, 1, lambda: d.__setitem__("a", 1))
    tl.commit_through(1)
    at(tl, 2, lambda: d.__setitem__("a", 2))
    at(tl, 3, lambda: d.__setitem__("b", 3))
    at(tl, 4, lambda: d.__setitem__("a", 4))
    at(tl, 5, lambda: d.__delitem__("b"))
    v = d.version
    tl.revert(4)
    assert view(d) == {"a": 2, "b": 3} and d.version != v
    tl.commit_through(3)
    assert d.committed() == {"a": 2, "b": 3} and not tl.pending
    at(tl, 6, lambda: d.__setitem__("c", 6))
    tl.revert(7)  # nothing at 7 or later: nothing changes
    assert view(d) == {"a": 2, "b": 3, "c": 6}
    tl.revert()
    assert view(d) == {"a": 2, "b": 3} and not tl.pending


def test_items_and_values_follow_iteration_with_pending_changes() -> None:
    tl = Timeline()
    d: TimelineDict[str, int] = TimelineDict(tl)
    for i, k in enumerate("abcdef"):
        d[k] = i
    tl.offset = 10
    d["b"] = 20  # a committed key changed
    del d["d"]  # a committed key removed
    d["x"] = 30  # a new key
    d["y"] = 31
    del d["y"]  # a new key removed again
    tl.offset = None
    expected = [(k, d[k]) for k in d]
    assert expected == [("a", 0), ("b", 20), ("c", 2), ("e", 4), ("f", 5), ("x", 30)]
    assert d.items() == expected
    assert d.values() == [v for _, v in expected]
    tl.commit_through(10)
    assert d.items() == expected and d.committed() == dict(expected)


# -- EventQueue --------------------------------------------------------------------------------------------------


@pytest.fixture
async def queue() -> AsyncIterator[EventQueue]:
    q = EventQueue("test")
    q.start()
    yield q
    await q.close(KafkaError("test over", Errors.NOT_CONTROLLER))


async def test_events_run_in_fifo_order_and_return_their_results(queue: EventQueue) -> None:
    ran: list[int] = []

    def make(i: int):
        def run() -> int:
            ran.append(i)
            return i * 10

        return run

    futures = [queue.append(Event(f"e{i}", make(i))) for i in range(5)]
    assert await asyncio.gather(*futures) == [0, 10, 20, 30, 40]
    assert ran == [0, 1, 2, 3, 4]
    assert queue.stats.processed == 5


async def test_prepend_runs_next(queue: EventQueue) -> None:
    ran: list[str] = []
    futures = [queue.append(Event(n, lambda n=n: ran.append(n))) for n in ("a", "b")]
    futures.append(queue.prepend(Event("first", lambda: ran.append("first"))))
    await asyncio.gather(*futures)
    assert ran == ["first", "a", "b"]


async def test_the_bulk_lane_takes_turns_with_the_other_events(queue: EventQueue) -> None:
    ran: list[str] = []
    futures = [queue.append(Event(n, lambda n=n: ran.append(n)), bulk=True) for n in ("B1", "B2", "B3", "B4")]
    futures += [queue.append(Event(n, lambda n=n: ran.append(n))) for n in ("a", "b")]
    await asyncio.gather(*futures)
    assert ran == ["a", "B1", "b", "B2", "B3", "B4"]  # alone, the bulk lane runs back to back
    ran.clear()
    # A deferred event that is due counts as one of the others: bulk work never holds periodic work for long.
    due = Event("due", lambda: ran.append("due"))
    queue.schedule("due", time.monotonic(), due)
    futures = [queue.append(Event(n, lambda n=n: ran.append(n)), bulk=True) for n in ("B5", "B6")]
    await asyncio.gather(due.future, *futures)
    assert ran.index("due") <= 1


async def closed_failing(q: EventQueue, pending: list[asyncio.Future[object]]) -> KafkaError:
    """Close ``q``; every one of ``pending`` fails with the reason given. Returns that reason."""
    reason = KafkaError("shutting down", Errors.NOT_CONTROLLER)
    await q.close(reason)
    for f in pending:
        with pytest.raises(KafkaError) as e:
            await f
        assert e.value is reason
    return reason


async def test_bulk_events_count_toward_the_bound_and_close_fails_them() -> None:
    q = EventQueue("bulk", max_size=2)
    held = [q.append(Event("b", lambda: None), bulk=True), q.append(Event("o", lambda: None))]
    refused = q.append(Event("c", lambda: None), bulk=True)
    with pytest.raises(KafkaError) as e:
        await refused
    assert e.value.code == Errors.REQUEST_TIMED_OUT
    await closed_failing(q, held)


async def test_deferred_events_run_at_their_time_in_time_order(queue: EventQueue) -> None:
    ran: list[tuple[str, float]] = []
    start = time.monotonic()
    late = Event("late", lambda: ran.append(("late", time.monotonic())))
    early = Event("early", lambda: ran.append(("early", time.monotonic())))
    queue.schedule("t-late", start + 0.08, late)
    queue.schedule("t-early", start + 0.04, early)
    queue.append(Event("now", lambda: ran.append(("now", time.monotonic()))))
    await asyncio.wait_for(asyncio.gather(early.future, late.future), 5)
    assert [name for name, _ in ran] == ["now", "early", "late"]
    assert ran[1][1] - start >= 0.04 and ran[2][1] - start >= 0.08


async def test_a_reschedule_with_the_same_tag_replaces_the_pending_one(queue: EventQueue) -> None:
    ran: list[str] = []
    first = Event("first", lambda: ran.append("first"))
    second = Event("second", lambda: ran.append("second"))
    queue.schedule("tag", time.monotonic() + 0.02, first)
    queue.schedule("tag", time.monotonic() + 0.03, second)
    assert first.future.cancelled()
    await asyncio.wait_for(second.future, 5)
    await asyncio.sleep(0.03)
    assert ran == ["second"]
    cancelled = Event("cancelled", lambda: ran.append("cancelled"))
    queue.schedule("other", time.monotonic() + 0.01, cancelled)
    queue.cancel("other")
    await asyncio.sleep(0.05)
    assert ran == ["second"] and cancelled.future.cancelled()


async def test_an_event_past_its_deadline_fails_with_request_timed_out(queue: EventQueue) -> None:
    ran: list[str] = []
    blocker = queue.append(Event("blocker", lambda: time.sleep(0.05)))  # holds the single consumer
    late = queue.append(Event("late", lambda: ran.append("late"), deadline=time.monotonic() + 0.01))
    fine = queue.append(Event("fine", lambda: ran.append("fine"), deadline=time.monotonic() + 60))
    await blocker
    with pytest.raises(KafkaError) as e:
        await late
    assert e.value.code == Errors.REQUEST_TIMED_OUT and "late" in str(e.value)
    await fine
    assert ran == ["fine"]  # the late one never ran
    assert queue.stats.timed_out == 1


async def test_an_event_error_goes_to_its_caller_and_the_queue_goes_on(queue: EventQueue) -> None:
    def boom() -> None:
        raise KafkaError("no", Errors.INVALID_REQUEST)

    failed = queue.append(Event("boom", boom))
    after = queue.append(Event("after", lambda: "ok"))
    with pytest.raises(KafkaError) as e:
        await failed
    assert e.value.code == Errors.INVALID_REQUEST
    assert await after == "ok"


async def test_an_event_returning_an_awaitable_completes_when_it_does(queue: EventQueue) -> None:
    inner: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    failing: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    chained = queue.append(Event("waits", lambda: inner))
    chained_error = queue.append(Event("waits-error", lambda: failing))
    other = queue.append(Event("other", lambda: "done"))
    assert await other == "done"  # the queue is not held up by the waiting event
    assert not chained.done()
    inner.set_result("committed")
    assert await chained == "committed"
    failing.set_exception(KafkaError("lost", Errors.NOT_CONTROLLER))
    with pytest.raises(KafkaError) as e:
        await chained_error
    assert e.value.code == Errors.NOT_CONTROLLER


async def test_a_cancelled_event_is_skipped(queue: EventQueue) -> None:
    ran: list[str] = []
    ev = Event("cancelled", lambda: ran.append("cancelled"))
    queue.append(ev).cancel()
    assert await queue.append(Event("next", lambda: "next")) == "next"
    assert ran == []


async def test_close_fails_pending_events_and_refuses_new_ones() -> None:
    q = EventQueue("closing")
    ran: list[str] = []
    pending = [q.append(Event(f"e{i}", lambda i=i: ran.append(f"e{i}"))) for i in range(3)]  # never started
    deferred = Event("deferred", lambda: ran.append("deferred"))
    q.schedule("d", time.monotonic() + 0.01, deferred)
    reason = await closed_failing(q, pending)
    assert deferred.future.cancelled()
    late = q.append(Event("late", lambda: ran.append("late")))
    with pytest.raises(KafkaError) as e:
        await late
    assert e.value is reason
    q.schedule("d2", time.monotonic(), Event("late-deferred", lambda: ran.append("late-deferred")))
    await asyncio.sleep(0.02)
    assert ran == []


# -- Purgatory -----------------------------------------------------------------------------------------------------


async def test_purgatory_completes_in_offset_order_up_to_the_committed_offset() -> None:
    p = Purgatory()
    answered: list[int] = []

    def respond(tag: int):
        def r() -> int:
            answered.append(tag)
            return tag

        return r

    futures = {off: p.add(off, respond(off)) for off in (5, 7)}
    again = p.add(7, respond(70))
    last = p.add(9, respond(9))
    assert p.highest_pending_offset == 9 and len(p) == 4
    p.complete_up_to(4)
    assert answered == [] and not futures[5].done()
    p.complete_up_to(7)
    assert answered == [5, 7, 70]
    assert futures[5].result() == 5 and futures[7].result() == 7 and again.result() == 70
    assert not last.done() and p.highest_pending_offset == 9 and len(p) == 1
    p.complete_up_to(100)
    assert last.result() == 9 and p.highest_pending_offset is None and len(p) == 0


async def test_purgatory_offsets_must_not_go_backwards() -> None:
    p = Purgatory()
    p.add(10, lambda: None)
    p.add(10, lambda: None)  # equal is fine (a read waiting for the last write)
    with pytest.raises(ValueError, match="9"):
        p.add(9, lambda: None)


async def test_purgatory_fail_all_fails_every_waiter() -> None:
    p = Purgatory()
    futures = [p.add(off, lambda: "never") for off in (1, 2, 3)]
    error = KafkaError("lost leadership", Errors.NOT_CONTROLLER)
    p.fail_all(error)
    for f in futures:
        with pytest.raises(KafkaError) as e:
            await f
        assert e.value is error
    assert len(p) == 0 and p.highest_pending_offset is None
    p.add(0, lambda: "fresh")  # it starts over: a lower offset is fine after fail_all


async def test_purgatory_response_error_goes_to_that_waiter_only() -> None:
    p = Purgatory()

    def broken() -> None:
        raise KafkaError("bad", Errors.UNKNOWN_SERVER_ERROR)

    bad = p.add(1, broken)
    good = p.add(2, lambda: "ok")
    p.complete_up_to(2)
    with pytest.raises(KafkaError):
        await bad
    assert await good == "ok"


async def test_a_consumer_that_dies_is_reported_not_silent(monkeypatch: pytest.MonkeyPatch) -> None:
    errors: list[BaseException] = []
    q = EventQueue("dying", on_error=errors.append)

    def broken() -> Event | None:
        raise RuntimeError("consumer bug")

    monkeypatch.setattr(q, "_next_ready", broken)
    q.start()
    async with asyncio.timeout(5):
        while not errors:
            await asyncio.sleep(0.01)
    assert [str(e) for e in errors] == ["consumer bug"]
    await q.close(KafkaError("test over", Errors.NOT_CONTROLLER))


async def test_an_event_that_holds_the_loop_long_is_logged(queue: EventQueue, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_queue, "SLOW_EVENT_S", 0.05)
    with structlog.testing.capture_logs() as logs:
        await queue.append(Event("quick", lambda: None))
        await queue.append(Event("slowOne", lambda: time.sleep(0.06)))
    slow = [e for e in logs if e["event"] == "slow_event"]
    assert [(e["name"], e["queue"]) for e in slow] == [("slowOne", "test")] and slow[0]["ms"] >= 60, logs
