"""Metadata from a standby: any controller answers it from its own committed state, as Kafka's controllers answer
KIP-919 clients from their image. A client whose first Metadata goes to a standby (librdkafka picks a bootstrap
server at random) must see the cluster's topics, not an empty listing; gRPC's DescribeTopics on the same standby
still sends its caller to the controller. In process: an active controller and a standby replaying one log."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).parents[1] / "controller"))  # the controller tests' fakes, read not copied

from ctl_helpers import SharedLog, active_cluster, settle, start_controller

from controller.replication_control import NewTopic
from pykraft.api import controller_pb2 as pb
from pykraft.kafka.apis.metadata import MetadataRequest, handle
from pykraft.kafka.protocol import RequestHeader
from pykraft.kafka.registry import CallContext, ListenerInfo, RequestContext
from pykraft.service import ControllerService
from quorum.errors import Errors
from quorum.raft.config import VoterAddress

VOTERS = {i: VoterAddress(i, "127.0.0.1", 9090 + i) for i in (1, 2)}  # never dialled
LISTENERS = {1: ("127.0.0.1", 19091), 2: ("127.0.0.1", 19092)}


def context(service: ControllerService, node_id: int) -> RequestContext:
    header = RequestHeader(3, 12, 7, "standby-test", 2)
    return RequestContext(
        header, ListenerInfo(node_id, "c1", LISTENERS), service, CallContext("ipv4:127.0.0.1:1", None)
    )


async def test_a_standby_answers_metadata_from_its_committed_state() -> None:
    log = SharedLog()
    topics = [NewTopic("orders", 3, 2), NewTopic("payments", 2, 1)]
    leader, _, _ = await active_cluster(log, [(101, None, False), (102, None, False)], topics=topics)
    standby, _ = await start_controller(log, 2)
    for batch in log.batches[: log.delivered]:  # the standby replays what was committed before it started
        standby.handle_commit(batch)
    await settle()
    assert not standby.active and standby.committed_offset == leader.committed_offset

    every = MetadataRequest.cls(topics=None)
    on_leader = await handle(context(ControllerService(leader, "c1", VOTERS), 1), every, 12)
    on_standby = await handle(context(ControllerService(standby, "c1", VOTERS), 2), every, 12)
    assert sorted(t.name for t in on_standby.topics) == ["orders", "payments"]
    assert on_standby.topics == on_leader.topics  # the same committed state, field for field
    named = MetadataRequest.cls(topics=[MetadataRequest.fields[0].type.element.cls(name="orders")])
    [orders] = (await handle(context(ControllerService(standby, "c1", VOTERS), 2), named, 12)).topics
    assert (orders.name, orders.error_code, len(orders.partitions)) == ("orders", Errors.NONE, 3)

    # Any other caller of the same standby (no local_reads: gRPC's) is still sent to the controller
    other = await ControllerService(standby, "c1", VOTERS).DescribeTopics(
        pb.DescribeTopicsRequest(), CallContext("ipv4:127.0.0.1:1", None)
    )
    assert (other.error_code, list(other.topics)) == (Errors.NOT_CONTROLLER, [])
