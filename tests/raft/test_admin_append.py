"""QuorumAdminService.AppendRecords on the leader's side, against a stand-in node: answered once committed, or
REQUEST_TIMED_OUT naming the timeout when the commit does not come (the waiter dropped, not left behind)."""

from __future__ import annotations

import asyncio
from typing import Any

from quorum.errors import Errors
from quorum.raft.client import LeaderAndEpoch
from quorum.transport.admin import QuorumAdminService
from quorum.transport.pb import quorum_pb2 as pb


class Node:
    """As much of a leading RaftNode as AppendRecords uses: appends get offsets, commits come when told."""

    node_id = 1

    def __init__(self) -> None:
        self.voters: dict[int, Any] = {}
        self.leader_and_epoch = LeaderAndEpoch(1, 3)
        self.end = 10
        self.waiters: list[tuple[int, asyncio.Future[int]]] = []

    def append(self, epoch: int, records: list[bytes]) -> int:
        self.end += len(records)
        return self.end - 1

    def wait_committed(self, offset: int, epoch: int) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.waiters.append((offset, fut))
        return fut

    def commit(self) -> None:
        for offset, fut in self.waiters:
            if not fut.done():
                fut.set_result(offset)


async def test_an_append_is_answered_once_committed() -> None:
    node = Node()
    service = QuorumAdminService(node, raw_appends=True)  # type: ignore[arg-type]
    call = asyncio.ensure_future(service.AppendRecords(pb.AppendRecordsRequest(records=[b"a", b"b"]), None))  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert not call.done()
    node.commit()
    answer = await asyncio.wait_for(call, 1)
    assert (answer.error_code, answer.base_offset, answer.last_offset, answer.epoch) == (0, 10, 11, 3)


async def test_an_append_not_committed_in_time_is_answered_request_timed_out() -> None:
    node = Node()
    service = QuorumAdminService(node, raw_appends=True)  # type: ignore[arg-type]
    request = pb.AppendRecordsRequest(records=[b"a"], timeout_ms=30)
    answer = await asyncio.wait_for(service.AppendRecords(request, None), 1)  # type: ignore[arg-type]
    assert answer.error_code == Errors.REQUEST_TIMED_OUT
    assert answer.error_message == "not committed within 30 ms"
    [(_, waiter)] = node.waiters
    assert waiter.cancelled()  # the node's waiter list drops it rather than settling it later
