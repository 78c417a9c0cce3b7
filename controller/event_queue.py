"""The controller's event queue (Kafka's KafkaEventQueue): one consumer runs events one at a time.

Events are appended (FIFO), prepended (to run next: activation after winning an election), or deferred to a
time (periodic work, keyed by a tag so a reschedule replaces the previous one). Bulk work (a broker's thousands of
ISR changes, applied a slice per event) is appended to a lane of its own, and the two lanes take turns: while both
have events, one bulk event runs between two others. A request then waits behind at most one slice of bulk work per
event ahead of it, not behind every broker's slices (at 2M partitions, six brokers' AlterPartition slices kept a
client's CreateTopics waiting 450 ms in FIFO order). An event carries a deadline: one
still queued when it passes is failed with REQUEST_TIMED_OUT instead of run. Queue time (the stats) counts from when
an event is ready: when it was queued, or a deferred event's time (the delay it asked for is no wait). ``close``
fails everything pending with the reason given. Appended events (requests) are bounded: at ``max_size`` an append is
refused at once with REQUEST_TIMED_OUT (see :data:`MAX_QUEUED_EVENTS`). Events are plain functions: they run to
completion without yielding, so an event sees no other event's half-done work.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from quorum.errors import Errors, KafkaError
from quorum.fault import spawn
from quorum.histogram import Histogram

log = structlog.get_logger("controller.event_queue")

BURST_S = 0.001  # how long ready events may run back to back before I/O gets a turn
# Requests waiting for the controller at once. A flood beyond it is refused at once, nothing done, instead of holding
# memory and making every request behind it later still. Far above what a cluster queues legitimately: one heartbeat
# per broker (thousands at most), the brokers' registrations and ISR changes, a few admin requests (the scale
# benchmark keeps 4 CreateTopics in flight). Activation (prepend) and deferred periodic work are internal, bounded
# by their tags, and never refused.
MAX_QUEUED_EVENTS = 10_000
# How a full queue's refusal starts its message: clients (pykraft/client.py) tell by it that the request was never
# queued, so resending it is safe even for a write — unlike a REQUEST_TIMED_OUT of a request that may have run.
QUEUE_FULL_MESSAGE = "the controller's event queue is full"
SLOW_EVENT_S = 1.0  # an event that held the loop this long is logged: Raft's fetch answers waited behind it


@dataclass
class Event:
    name: str
    run: Callable[[], Any]  # returns a result, or a future of one (a write waiting for its commit)
    deadline: float | None = None  # time.monotonic()
    future: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    enqueued: float = field(default_factory=time.monotonic)
    ready: float | None = None  # a deferred event's time (it waits only from then on); None: ``enqueued``
    started: float | None = None  # when it ran, and until when (time.monotonic()); None: not run (yet)
    finished: float | None = None


@dataclass
class QueueStats:
    processed: int = 0
    timed_out: int = 0
    rejected: int = 0  # appends refused because the queue was full
    queue_time_total_s: float = 0.0
    process_time_total_s: float = 0.0
    queue_time: Histogram = field(default_factory=Histogram)  # ready to started, per event run or timed out
    process_time: Histogram = field(default_factory=Histogram)


class EventQueue:
    def __init__(
        self,
        name: str = "controller",
        on_error: Callable[[BaseException], None] | None = None,
        max_size: int = MAX_QUEUED_EVENTS,
    ) -> None:
        """``on_error`` hears of the consumer dying (a bug): nothing would run any more, so it must not be silent.
        ``max_size``: appended events waiting at most (an attribute: it may be changed while running)."""
        self.name = name
        self.max_size = max_size
        self.on_error = on_error or (lambda e: log.critical("event_queue_failed", queue=name, error=repr(e)))
        self._events: deque[Event] = deque()
        self._bulk: deque[Event] = deque()
        self._bulk_turn = False  # the bulk lane goes next, if it has anything
        self._deferred: list[tuple[float, int, str, Event]] = []
        self._deferred_tags: dict[str, Event] = {}
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._closed: KafkaError | None = None
        self._task: asyncio.Task[None] | None = None
        self.stats = QueueStats()
        self.running: str | None = None  # the name of the event running now

    def start(self) -> None:
        self._task = spawn(self._consume(), name=f"{self.name}-events", on_error=self.on_error)

    @property
    def size(self) -> int:
        return len(self._events) + len(self._bulk) + len(self._deferred_tags)

    def append(self, event: Event, bulk: bool = False) -> asyncio.Future[Any]:
        """Queue ``event`` last; its future fails at once with REQUEST_TIMED_OUT when ``max_size`` events wait.

        Kafka has no code for a full controller queue. REQUEST_TIMED_OUT is the closest retriable one: Kafka's
        clients retry it (TimeoutException is a RetriableException), and it is what an event that waited past its
        deadline in this same queue gets. THROTTLING_QUOTA_EXCEEDED would blame the caller's quota, NOT_CONTROLLER
        would send it to another node. The message says that nothing was done, so a retry is safe.

        ``bulk``: the event goes to the bulk lane (see the module's text)."""
        if self._closed is None and len(self._events) + len(self._bulk) >= self.max_size:
            self.stats.rejected += 1
            if self.stats.rejected == 1 or self.stats.rejected % 1000 == 0:  # a flood logs a line per 1000
                log.warning("event_queue_full", queue=self.name, max_size=self.max_size, rejected=self.stats.rejected)
            event.future.set_exception(
                KafkaError(
                    f"{QUEUE_FULL_MESSAGE} ({self.max_size} requests waiting); {event.name} was not run: retry "
                    "after a backoff",
                    Errors.REQUEST_TIMED_OUT,
                )
            )
            return event.future
        if bulk and self._closed is None:
            self._bulk.append(event)
            self._wakeup.set()
            return event.future
        return self._enqueue(event, front=False)

    def prepend(self, event: Event) -> asyncio.Future[Any]:
        return self._enqueue(event, front=True)

    def schedule(self, tag: str, at: float, event: Event) -> None:
        """Run ``event`` at ``at`` (time.monotonic()), replacing a pending event of the same ``tag``."""
        if self._closed is not None:
            return
        old = self._deferred_tags.pop(tag, None)
        if old is not None:
            old.future.cancel()
        self._deferred_tags[tag] = event
        event.ready = max(at, event.enqueued)  # a time already past: ready now
        heapq.heappush(self._deferred, (at, next(self._seq), tag, event))
        self._wakeup.set()

    def cancel(self, tag: str) -> None:
        old = self._deferred_tags.pop(tag, None)
        if old is not None:
            old.future.cancel()

    def _enqueue(self, event: Event, front: bool) -> asyncio.Future[Any]:
        if self._closed is not None:
            event.future.set_exception(self._closed)
            return event.future
        if front:
            self._events.appendleft(event)
        else:
            self._events.append(event)
        self._wakeup.set()
        return event.future

    async def close(self, reason: KafkaError) -> None:
        """Stop; fail every event still queued with ``reason``."""
        self._closed = reason
        for lane in (self._events, self._bulk):
            while lane:
                ev = lane.popleft()
                if not ev.future.done():
                    ev.future.set_exception(reason)
        for tag in list(self._deferred_tags):
            self.cancel(tag)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):  # a failure went to on_error already
                await self._task

    async def _consume(self) -> None:
        while True:
            ev = self._next_ready()
            if ev is None:
                self._wakeup.clear()
                timeout = None
                if self._deferred:
                    timeout = max(0.0, self._deferred[0][0] - time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                continue
            # A burst of ready events (up to ~1 ms) runs back to back, then I/O gets its turn: a yield per event
            # cost as much as a small event, and 128 waiting requests would take 128 loop turns.
            burst_end = time.monotonic() + BURST_S
            while True:
                self._run(ev)
                if time.monotonic() >= burst_end or (ev := self._next_ready()) is None:
                    break
            await asyncio.sleep(0)

    def _next_ready(self) -> Event | None:
        if self._bulk and self._bulk_turn:
            self._bulk_turn = False
            return self._bulk.popleft()
        ev = self._next_other()
        if ev is not None:
            self._bulk_turn = True
            return ev
        return self._bulk.popleft() if self._bulk else None

    def _next_other(self) -> Event | None:
        if self._events:
            return self._events.popleft()
        now = time.monotonic()
        while self._deferred and self._deferred[0][0] <= now:
            _, _, tag, ev = heapq.heappop(self._deferred)
            if self._deferred_tags.get(tag) is ev:
                del self._deferred_tags[tag]
                return ev
        return None

    def _run(self, ev: Event) -> None:
        if ev.future.done():
            return  # cancelled while it waited
        started = time.monotonic()
        queued = started - (ev.enqueued if ev.ready is None else ev.ready)
        self.stats.queue_time_total_s += queued
        self.stats.queue_time.observe(queued)
        if ev.deadline is not None and started > ev.deadline:
            self.stats.timed_out += 1
            waited = (started - ev.enqueued) * 1000
            ev.future.set_exception(
                KafkaError(f"{ev.name} timed out after waiting {waited:.0f} ms in the queue", Errors.REQUEST_TIMED_OUT)
            )
            return
        self.running = ev.name
        ev.started = started
        try:
            result = ev.run()
        except Exception as e:  # the event's own error travels to its caller
            ev.future.set_exception(e)
        else:
            if isinstance(result, asyncio.Future):
                result.add_done_callback(lambda f, target=ev.future: relay(f, target))
            else:
                ev.future.set_result(result)
        finally:
            self.running = None
            ev.finished = time.monotonic()
            took = ev.finished - started
            if took >= SLOW_EVENT_S:
                log.warning("slow_event", queue=self.name, name=ev.name, ms=round(took * 1000))
            self.stats.processed += 1
            self.stats.process_time_total_s += took
            self.stats.process_time.observe(took)


def relay(source: asyncio.Future[Any], target: asyncio.Future[Any]) -> None:
    """A done callback: ``source``'s outcome becomes ``target``'s, unless ``target`` is already settled (its
    caller timed out or went away) — then the outcome is retrieved here, not left unobserved."""
    if target.done():
        if not source.cancelled():
            source.exception()
        return
    if source.cancelled():
        target.cancel()
    elif (error := source.exception()) is not None:
        target.set_exception(error)
    else:
        target.set_result(source.result())
