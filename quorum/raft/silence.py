"""A silent leader: noticed by a follower's own overdue fetches, long before the fetch timeout.

The leader answers every fetch within its max wait, with nothing new if need be. A follower whose fetch is still
unanswered half-way through a grace after that wait probes the leader with a fetch it must answer at once; with the
probe unanswered too at the end of the grace, the leader is silent (a paused process, a cut link) and the follower
starts a pre-vote, which voters still hearing the leader refuse.

The grace is ``fetch_silence_ms`` minus the max wait. A leader that made a follower probe and then answered was
stalled, not gone (a long request, a collection): from then on that follower gives it twice the time it took
(the answer's lateness plus the wait the leader may take), decaying by half each minute, up to what the fetch
timeout leaves. A leader that stalls under load so teaches its followers to wait for it, while a punctual leader
that stops is noticed at the base grace.

A mixin of :class:`~quorum.raft.core.RaftCore`, kept apart so the core reads as elections and replication.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.raft.roles import Follower

if TYPE_CHECKING:
    from quorum.raft.core import RaftCore

LATE_TICK_SLACK_MS = 50  # a timer this late means the node itself was stalled (see _on_fetch_overdue)
LEARNED_HALF_LIFE_MS = 60_000  # how fast a longer grace learned from a stalling leader is forgotten

# Test-only rule breakers (see tests/simulation/test_silent_leader.py).
BUG_SILENCE_WITHOUT_PRE_VOTE = "elect-at-once-when-a-fetch-is-overdue"
BUG_SILENCE_WITHOUT_GRACE = "suspect-the-leader-at-the-fetch-max-wait"


class SilentLeader:
    def _silence_grace(self: RaftCore, f: Follower, now: int) -> int:
        """How long past its due time a fetch may go unanswered before the leader counts as silent."""
        wait = self.config.fetch_max_wait_ms
        base = self.config.fetch_silence_ms - wait
        learned = f.learned_grace_ms * 0.5 ** ((now - f.learned_at) / LEARNED_HALF_LIFE_MS)
        return int(min(max(base, learned), max(base, self.config.fetch_timeout_ms - wait)))

    def _arm_overdue(self: RaftCore, f: Follower, now: int, probe: bool, wait: int) -> None:
        """A fetch just went out (``wait``: how long the leader may hold it): when it is overdue."""
        f.probing, f.overdue_seen = probe, False
        if not probe:
            f.due_ms = now + wait
        if not self.config.fetch_silence_ms:
            f.overdue_at = 0
        elif BUG_SILENCE_WITHOUT_GRACE in self.bugs:
            f.overdue_at, f.probing = now + wait, True
        else:
            f.overdue_at = max(f.due_ms, now) + self._silence_grace(f, now) // 2

    def _note_answer_time(self: RaftCore, f: Follower, now: int) -> None:
        """A fetch (or its probe) was answered. Past the point where we probe, the leader was stalled: learn it."""
        late = now - f.due_ms
        if late > (self.config.fetch_silence_ms - self.config.fetch_max_wait_ms) // 2:
            grace = 2 * (late + self.config.fetch_max_wait_ms)
            if grace > self._silence_grace(f, now):
                f.learned_grace_ms, f.learned_at = grace, now

    def _on_fetch_overdue(self: RaftCore, f: Follower, now: int) -> None:
        if now - f.overdue_at > LATE_TICK_SLACK_MS:
            # This timer fired late: the node itself was busy (a long event, CPU starvation), and the answer may
            # be waiting in its input. Silence counts only when we were awake to hear it: look again shortly.
            f.overdue_at = now + LATE_TICK_SLACK_MS
            return
        if not f.overdue_seen:
            # Even on time, an answer may have arrived while this node was busy, unread behind the timer (libuv
            # runs due timers before it polls for input): look again once the input has been read.
            f.overdue_seen = True
            f.overdue_at = now + 1
            return
        if BUG_SILENCE_WITHOUT_PRE_VOTE in self.bugs:
            self._to_candidate(now, f"fetch to leader {f.leader_id} overdue")
            return
        if not f.probing:
            self._send_fetch(f, now, probe=True)  # a lost message, or a slow answer? Ask for one at once
            return
        self._leader_lost(
            now, f"leader {f.leader_id} silent: no answer to a fetch in {now - f.due_ms} ms past due, nor to a probe"
        )
