"""The leader tracks every replica id that fetches (Leader.observers, forgotten after OBSERVER_SESSION_TIMEOUT_MS = 5
min): a plaintext client sending fetches under made-up replica ids must not grow that map — and DescribeQuorum's
observer list, which brokers poll — past MAX_OBSERVERS (the one heard from longest ago is dropped), as the
transport's OBSERVER_STREAM_LIMIT bounds streams."""

from __future__ import annotations

from pathlib import Path

import grpc
from hostile_helpers import CLUSTER_ID, live_node

from quorum.raft.roles import MAX_OBSERVERS, Leader
from quorum.transport.pb import quorum_pb2 as qpb
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc
from quorum.transport.peer import OBSERVER_STREAM_LIMIT

IDS = 3 * OBSERVER_STREAM_LIMIT  # over MAX_OBSERVERS too (asserted)


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
        assert IDS > MAX_OBSERVERS and len(role.observers) == MAX_OBSERVERS, len(role.observers)
        assert max(role.observers) == 1000 + IDS - 1  # the newest kept, the oldest dropped
