"""Known gap, kept as a strict xfail so that the fix is noticed: the leader tracks every replica id that fetches
(LeaderState.observers, forgotten after OBSERVER_SESSION_TIMEOUT_MS = 5 min), so a plaintext client sending fetches
under made-up replica ids grows that map — and DescribeQuorum's observer list, which brokers poll — without bound
for 5 minutes (20,000 ids: 20,000 entries, ~4 MB). The fix belongs in quorum/raft (a cap on observers, the one
silent longest dropped), like the transport's OBSERVER_STREAM_LIMIT on streams."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from hostile_helpers import CLUSTER_ID, live_node

from quorum.raft.roles import Leader
from quorum.transport.pb import quorum_pb2 as qpb
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc
from quorum.transport.peer import OBSERVER_STREAM_LIMIT

IDS = 3 * OBSERVER_STREAM_LIMIT


@pytest.mark.xfail(strict=True, reason="the Raft leader keeps every fetching replica id for 5 minutes (no cap)")
async def test_fetches_under_made_up_replica_ids_do_not_grow_the_leaders_observers(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live, grpc.aio.insecure_channel(live.address) as channel:
        call = qpb_grpc.QuorumPeerStub(channel).Exchange()
        for replica in range(1000, 1000 + IDS):
            request = qpb.FetchRequest(cluster_id=CLUSTER_ID, replica_id=replica, leader_epoch=1, max_bytes=100)
            await call.write(qpb.PeerMessage(source=replica, fetch_request=request))
        await call.done_writing()
        answers = [m async for m in call]  # the stream ends once the node has read (and handled) every fetch
        assert answers[0].fetch_response.error_code == 0  # answers to the other ids have no stream to go to
        role = live.node.core.role if live.node.core is not None else None
        assert isinstance(role, Leader)
        assert len(role.observers) <= OBSERVER_STREAM_LIMIT, len(role.observers)
