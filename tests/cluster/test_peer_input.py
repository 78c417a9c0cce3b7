"""Bad input on the peer protocol (QuorumPeer.Exchange), sent by hand to a running cluster: a message with no body,
a request for another cluster, one from a non-voter, stale epochs, a negative fetch offset. Each request gets the
Kafka error code KRaft answers with, and the cluster goes on as if nothing happened: same leader, same epoch,
appends commit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
from cluster_helpers import record, wait_caught_up

from pykraft.node import default_cluster_id
from pykraft.testing import Cluster
from quorum.errors import Errors
from quorum.raft.config import parse_voters
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc

RESPONSE_FIELDS = ("vote_response", "begin_quorum_epoch_response", "end_quorum_epoch_response", "fetch_response")


@asynccontextmanager
async def exchange(address: str) -> AsyncIterator[grpc.aio.StreamStreamCall]:
    async with grpc.aio.insecure_channel(address) as channel:
        call = pb_grpc.QuorumPeerStub(channel).Exchange()
        try:
            yield call
        finally:
            call.cancel()


async def read_all(call: grpc.aio.StreamStreamCall, timeout: float = 10.0) -> list[pb.PeerMessage]:
    """Everything the node sends until it ends the stream (after we are done writing)."""
    await call.done_writing()
    out = []
    async with asyncio.timeout(timeout):
        while (msg := await call.read()) is not grpc.aio.EOF:
            out.append(msg)
    return out


async def read_replies(
    call: grpc.aio.StreamStreamCall, correlations: set[int], timeout: float = 10.0
) -> dict[int, pb.PeerMessage]:
    """The responses with these correlation ids; other traffic is skipped (when we speak as a voter, the node may
    also send us what it meant for that voter)."""
    found: dict[int, pb.PeerMessage] = {}
    async with asyncio.timeout(timeout):
        while len(found) < len(correlations):
            msg = await call.read()
            assert msg is not grpc.aio.EOF, f"stream ended; replies so far: {found}"
            kind = msg.WhichOneof("body")
            assert kind in RESPONSE_FIELDS, msg
            correlation = getattr(msg, kind).correlation_id
            if correlation in correlations:
                found[correlation] = msg
    return found


def fetch(source: int, cluster_id: str, epoch: int, correlation: int, **overrides: int) -> pb.PeerMessage:
    request = pb.FetchRequest(
        cluster_id=cluster_id, replica_id=source, leader_epoch=epoch, fetch_offset=0, last_fetched_epoch=0,
        max_bytes=64 * 1024, max_wait_ms=0, correlation_id=correlation,
    )  # fmt: skip
    for name, value in overrides.items():
        setattr(request, name, value)
    return pb.PeerMessage(source=source, fetch_request=request)


def vote(source: int, cluster_id: str, epoch: int, correlation: int, *, pre_vote: bool) -> pb.PeerMessage:
    request = pb.VoteRequest(
        cluster_id=cluster_id, replica_id=source, replica_epoch=epoch, last_offset_epoch=0, last_offset=0,
        pre_vote=pre_vote, correlation_id=correlation,
    )  # fmt: skip
    return pb.PeerMessage(source=source, vote_request=request)


async def test_bad_peer_input_gets_kafka_errors_and_cluster_keeps_working(cluster: Cluster) -> None:
    leader, epoch = await cluster.wait_for_leader()
    cluster_id = default_cluster_id(parse_voters(cluster.voters))
    follower, other_follower = (n for n in cluster.nodes if n != leader)
    leader_address = cluster.nodes[leader].address

    # A stranger (node 99, no voter): a message with no body is dropped without a reply and without closing the
    # stream; the requests after it are answered, each with the error for its first fault. A fetch is an
    # observer's (a broker's): answered with records, never counted for the quorum; a vote is refused.
    async with exchange(leader_address) as call:
        await call.write(pb.PeerMessage(source=99))
        await call.write(fetch(99, "another-cluster", epoch, 1))
        await call.write(fetch(99, cluster_id, epoch, 2))
        await call.write(vote(99, cluster_id, epoch + 1, 3, pre_vote=False))
        await call.write(pb.PeerMessage(source=99, fetch_request=pb.FetchRequest()))  # every field zero/empty
        replies = await read_all(call)
    kinds = [m.WhichOneof("body") for m in replies]
    assert kinds == ["fetch_response", "fetch_response", "vote_response", "fetch_response"], replies
    wrong_cluster, observer, non_voter_vote, empty = replies
    assert wrong_cluster.fetch_response.correlation_id == 1
    assert wrong_cluster.fetch_response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert observer.fetch_response.correlation_id == 2
    assert observer.fetch_response.error_code == Errors.NONE and observer.fetch_response.records
    assert non_voter_vote.vote_response.correlation_id == 3
    assert non_voter_vote.vote_response.error_code == Errors.INCONSISTENT_VOTER_SET
    assert not non_voter_vote.vote_response.vote_granted
    assert empty.fetch_response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    for m in replies:
        body = getattr(m, m.WhichOneof("body"))
        assert (m.source, body.epoch, body.leader_id) == (leader, epoch, leader), m
    # A no-body message alone: no reply, and the node closes the stream normally when we are done.
    async with exchange(leader_address) as call:
        await call.write(pb.PeerMessage(source=98))
        assert await read_all(call) == []
        assert await call.code() == grpc.StatusCode.OK

    # Speaking as a voter: stale epochs are fenced. To a follower, as the other follower (which sends that follower
    # nothing while a leader is up, so taking over its stream disturbs nobody).
    async with exchange(cluster.nodes[follower].address) as call:
        await call.write(vote(other_follower, cluster_id, epoch - 1, 11, pre_vote=True))
        # A real vote request must carry a last epoch below its epoch: epoch 0 with last epoch 0 is malformed.
        await call.write(vote(other_follower, cluster_id, 0, 12, pre_vote=False))
        stale_begin = pb.BeginQuorumEpochRequest(
            cluster_id=cluster_id, leader_id=other_follower, leader_epoch=epoch - 1, correlation_id=13
        )
        await call.write(pb.PeerMessage(source=other_follower, begin_quorum_epoch_request=stale_begin))
        replies_by_id = await read_replies(call, {11, 12, 13})
    stale_pre_vote = replies_by_id[11].vote_response
    assert stale_pre_vote.error_code == Errors.FENCED_LEADER_EPOCH and not stale_pre_vote.vote_granted
    assert (stale_pre_vote.epoch, stale_pre_vote.leader_id) == (epoch, leader)
    assert replies_by_id[12].vote_response.error_code == Errors.INVALID_REQUEST
    assert replies_by_id[13].begin_quorum_epoch_response.error_code == Errors.FENCED_LEADER_EPOCH

    # To the leader, as a follower: a negative fetch offset is an invalid request; a fetch of an old epoch is
    # fenced. Both go out at once: the real follower reconnects (and takes its stream back) within ~50 ms.
    async with exchange(leader_address) as call:
        await call.write(fetch(follower, cluster_id, epoch, 21, fetch_offset=-1))
        await call.write(fetch(follower, cluster_id, epoch - 1, 22))
        replies_by_id = await read_replies(call, {21, 22})
    assert replies_by_id[21].fetch_response.error_code == Errors.INVALID_REQUEST
    assert replies_by_id[22].fetch_response.error_code == Errors.FENCED_LEADER_EPOCH
    assert replies_by_id[22].fetch_response.epoch == epoch

    # The cluster did not notice: every process alive, same leader and epoch, appends commit everywhere.
    assert all(node.running for node in cluster.nodes.values()), cluster.logs()
    for n in cluster.nodes:
        view = await cluster.describe(n)
        assert view is not None and (view.leader_id, view.leader_epoch) == (leader, epoch), (n, view)
    for i in range(5):
        resp = await cluster.append(leader, [record(f"after-bad-input-{i}")])
        assert resp.error_code == 0 and resp.epoch == epoch, resp
    assert (await wait_caught_up(cluster))[:2] == (leader, epoch)
    leader_log = cluster.nodes[leader].log_path.read_text()
    assert '"peer_message_rejected"' in leader_log and "peer message has no body" in leader_log
    assert "Traceback" not in cluster.logs()


async def test_append_of_bytes_that_are_not_a_metadata_record(cluster: Cluster) -> None:
    """AppendRecords refuses bytes that are not a metadata record (naming which), and the nodes go on delivering
    commits and stop cleanly."""
    leader, epoch = await cluster.wait_for_leader()
    resp = await cluster.append(leader, [record("fine"), b"not a metadata record"])
    assert resp.error_code == Errors.INVALID_REQUEST, resp
    assert "records[1]" in resp.error_message, resp
    resp = await cluster.append(leader, [record("after-raw-bytes")])
    assert resp.error_code == 0 and resp.epoch == epoch, resp
    await wait_caught_up(cluster)
    await asyncio.sleep(0.5)  # commit delivery to the controllers is asynchronous
    assert '"listener_failed"' not in cluster.logs()
    for node_id in [n for n in cluster.nodes if n != leader] + [leader]:
        assert cluster.nodes[node_id].terminate() == 0, cluster.logs()
