"""StageTrace: one item at a time followed through its stages, each stage's time since the start summed."""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_fail_stop import make_node

from quorum.raft.hops import StageTrace


def test_one_item_at_a_time_is_followed_through_every_stage() -> None:
    now = [0]
    trace = StageTrace(("written", "committed"), lambda: now[0])
    trace.start(10)
    trace.start(11)  # already following 10: ignored
    now[0] = 1_000_000
    trace.passed("written", 10)  # offsets below 10 only: 10 has not been written yet
    trace.passed("written", 11)
    now[0] = 3_000_000
    trace.passed("written", 12)  # a stage counts once
    assert trace.samples == 0  # not committed yet
    trace.passed("committed", 11)
    assert trace.samples == 1
    assert trace.seconds == {"written": 0.001, "committed": 0.003}
    assert trace.histograms["committed"].count == 1 and trace.histograms["committed"].sum == 0.003
    assert trace.histograms["committed"].counts[5] == 1  # 3 ms: the (2.5 ms, 5 ms] bucket
    trace.passed("committed", 20)  # nothing followed now
    assert trace.samples == 1
    trace.start(20)  # the next one
    now[0] = 4_000_000
    trace.abandon()  # a new leader: that one never finishes and counts nowhere
    trace.passed("written", 21)
    trace.passed("committed", 21)
    assert trace.samples == 1 and trace.seconds == {"written": 0.001, "committed": 0.003}


async def test_a_leader_traces_its_appends_through_the_log_the_disk_and_the_commit(tmp_path: Path) -> None:
    node = make_node(tmp_path)  # a lone voter: no follower acknowledges, so a trace stops short of "replicated"
    node.start()
    try:
        async with asyncio.timeout(10):
            while not (node.core is not None and node.core.is_leader and node.high_watermark > 0):
                await asyncio.sleep(0.01)
        epoch = node.leader_and_epoch.epoch
        offset = node.append(epoch, [b"traced"])
        await asyncio.wait_for(node.wait_committed(offset, epoch), 5)
        trace = node.leader_trace
        assert trace._offset == offset
        reached = trace._reached
        assert set(reached) == {"written", "flushed", "committed"}, reached
        assert 0 <= reached["written"] <= reached["flushed"] <= reached["committed"]
    finally:
        await node.shutdown(graceful=False)
