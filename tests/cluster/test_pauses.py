"""Paused processes (SIGSTOP: a long GC pause, a frozen VM — the sockets stay open, nothing answers): a paused
leader is replaced, and when it continues it learns the new epoch, steps down and takes the new leader's log; a
paused follower costs the quorum nothing and catches up when it continues. Each test ends by reading every
node's log from disk: nothing acknowledged lost, duplicated or reordered, the logs agree."""

from __future__ import annotations

import asyncio
import time

from cluster_helpers import (
    ELECTION_TIMEOUT_S,
    FETCH_TIMEOUT_S,
    Acked,
    append_one,
    append_sequentially,
    stop_and_check_logs,
)

from pykraft.testing import Cluster


async def test_paused_leader_is_replaced_then_steps_down_and_catches_up(cluster: Cluster) -> None:
    leader, epoch = await cluster.wait_for_leader()
    acked, unknown = Acked(), []
    await append_sequentially(cluster, "before-pause", 10, acked, unknown)

    paused_at = time.monotonic()
    cluster.nodes[leader].pause()
    try:
        new_leader, new_epoch = await append_one(cluster, "first-during-pause", acked, unknown, min_epoch=epoch + 1)
        replaced = time.monotonic() - paused_at
        assert new_leader != leader and new_epoch > epoch
        await append_sequentially(cluster, "during-pause", 10, acked, unknown, min_epoch=new_epoch)
        await asyncio.sleep(2 * ELECTION_TIMEOUT_S)  # stay paused well past the others' election timeout
    finally:
        cluster.nodes[leader].resume()
    print(f"\npaused leader {leader} (epoch {epoch}) replaced by {new_leader} (epoch {new_epoch}), "
          f"{replaced * 1000:.0f} ms after SIGSTOP")  # fmt: skip
    # Noticed by the followers' overdue fetches (pykraft.quorum.fetch.silence.ms: 0.4-1.4 s after the pause), not
    # by the fetch timeout, which alone never replaced it before 2 s.
    assert replaced < FETCH_TIMEOUT_S, f"replaced {replaced * 1000:.0f} ms after SIGSTOP"

    # Continued, the old leader must learn the new epoch from its peers and follow; everyone agrees on one leader.
    agreed, agreed_epoch = await cluster.wait_for_leader(newer_than=epoch, timeout=15)
    assert agreed_epoch >= new_epoch
    view = await cluster.describe(leader)
    assert view is not None and view.leader_epoch >= new_epoch
    assert view.role != "Leader" or agreed == leader, view
    await append_sequentially(cluster, "after-resume", 5, acked, unknown, min_epoch=new_epoch)
    await stop_and_check_logs(cluster, acked, unknown)


async def test_paused_follower_costs_nothing_and_catches_up(cluster: Cluster) -> None:
    leader, epoch = await cluster.wait_for_leader()
    acked, unknown = Acked(), []
    follower = next(n for n in cluster.nodes if n != leader)
    cluster.nodes[follower].pause()
    try:
        # The leader and one follower: a majority.
        await append_sequentially(cluster, "follower-paused", 30, acked, unknown)
        still, still_epoch = await cluster.wait_for_leader()
        assert (still, still_epoch) == (leader, epoch), "a paused follower must not cost the leader its leadership"
    finally:
        cluster.nodes[follower].resume()
    # The follower comes back without disturbing the leader (pre-vote) and catches up.
    assert await stop_and_check_logs(cluster, acked, unknown) == (leader, epoch)
