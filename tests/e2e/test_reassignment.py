"""Partition reassignment end to end: AlterPartitionReassignments and ListPartitionReassignments through the
AdminClient and raw gRPC, and ``pykraft reassign-partitions``, against one ``pykraft node`` process with brokers
the test drives (see lifecycle_helpers).

The brokers here move no data, so a move that only reorders or shrinks a partition to in-sync replicas completes
at once, and one that adds a replica stays in progress until the test, as the partition's leader, takes the new
replica into the ISR (an AlterPartition) — or cancels it. Each test makes its own topics, so the order of the tests
does not matter; every test leaves no reassignment running (--execute refuses while one is).
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from lifecycle_helpers import LifecycleCluster, change_isr, start_cluster, stop_cluster

from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.client import AdminError, NewTopic, PartitionInfo, PartitionReassignment
from quorum.errors import Errors

RACKS = {101: "rack-1", 102: "rack-2", 103: "rack-3", 104: "rack-1"}
PROG = "pykraft reassign-partitions"


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LifecycleCluster]:
    lc = start_cluster(tmp_path_factory.mktemp("reassignment"), RACKS)
    try:
        yield lc
    finally:
        stop_cluster(lc)


def create(lc: LifecycleCluster, name: str, assignment: dict[int, list[int]]) -> None:
    lc.admin.create_topics([NewTopic(name, replica_assignment=assignment)])[name].raise_for_error()


def partitions(lc: LifecycleCluster, name: str) -> dict[int, PartitionInfo]:
    [d] = lc.admin.describe_topics([name])
    assert d.error_code == 0, d
    return {p.partition: p for p in d.partitions}


def codes(results: dict[tuple[str, int], object]) -> dict[tuple[str, int], int]:
    return {tp: int(e.code) for tp, e in results.items()}  # type: ignore[attr-defined]


def raw(lc: LifecycleCluster, method: str, request: object) -> object:
    with grpc.insecure_channel(lc.bootstrap) as channel:
        return getattr(pb_grpc.ControllerStub(channel), method)(request, timeout=10)


# -- the API ---------------------------------------------------------------------------------------------------------


def test_alter_list_and_cancel(lc: LifecycleCluster) -> None:
    create(lc, "ra-move", {0: [101, 102], 1: [102, 103]})
    results = lc.admin.alter_partition_reassignments({("ra-move", 0): [101, 102, 104], ("ra-move", 1): [103, 102]})
    assert codes(results) == {("ra-move", 0): 0, ("ra-move", 1): 0}, results
    moving = PartitionReassignment([101, 102, 104], [104], [])
    # Partition 1 only changed order: done at once. Partition 0 waits for 104 to join the ISR.
    assert lc.admin.list_partition_reassignments() == {("ra-move", 0): moving}
    listed = lc.admin.list_partition_reassignments([("ra-move", 0), ("ra-move", 1), ("ra-move", 9), ("nope", 0)])
    assert listed == {("ra-move", 0): moving}  # not moving, unknown: left out, as Kafka
    assert lc.admin.list_partition_reassignments([]) == {}
    p = partitions(lc, "ra-move")
    assert (p[0].replicas, p[0].adding_replicas, p[1].replicas) == ([101, 102, 104], [104], [103, 102]), p

    results = lc.admin.alter_partition_reassignments({("ra-move", 0): None})
    assert codes(results) == {("ra-move", 0): 0}, results
    assert partitions(lc, "ra-move")[0].replicas == [101, 102]
    again = lc.admin.alter_partition_reassignments({("ra-move", 0): None, ("ra-move", 1): None})
    assert codes(again) == {("ra-move", 0): 85, ("ra-move", 1): 85}, again
    assert again[("ra-move", 0)].code == Errors.NO_REASSIGNMENT_IN_PROGRESS


def test_a_move_completes_when_the_new_replica_joins_the_isr(lc: LifecycleCluster) -> None:
    create(lc, "ra-done", {0: [101, 102]})
    assert codes(lc.admin.alter_partition_reassignments({("ra-done", 0): [102, 104]})) == {("ra-done", 0): 0}
    p = partitions(lc, "ra-done")[0]
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([102, 104, 101], [104], [101]), p
    response = change_isr(lc, "ra-done", 0, [101, 102, 104])  # the leader (101) takes 104 in: the move completes
    assert [r.error.code for r in response.partitions] in ([Errors.NONE], [Errors.NEW_LEADER_ELECTED]), response
    p = partitions(lc, "ra-done")[0]
    assert (p.replicas, sorted(p.isr), p.adding_replicas, p.removing_replicas) == ([102, 104], [102, 104], [], [])
    assert p.leader == 102, p
    assert lc.admin.list_partition_reassignments([("ra-done", 0)]) == {}


def test_partition_errors(lc: LifecycleCluster) -> None:
    create(lc, "ra-err", {0: [101, 102]})
    results = lc.admin.alter_partition_reassignments(
        {
            ("ra-err-none", 0): [101],
            ("ra-err", 7): [101],
            ("ra-err", 0): [101, 101],
            ("", 0): [101],
            ("ra-err", -1): [101],
        }
    )
    assert codes(results) == {
        ("ra-err-none", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("ra-err", 7): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        ("ra-err", 0): Errors.INVALID_REPLICA_ASSIGNMENT,
        ("", 0): Errors.INVALID_TOPIC_EXCEPTION,  # Kafka's client refuses these itself; they are not sent
        ("ra-err", -1): Errors.INVALID_TOPIC_EXCEPTION,
    }, results
    assert "ra-err-none" in (results[("ra-err-none", 0)].message or ""), results
    assert results[("ra-err", -1)].message == "The given partition index -1 is not valid.", results
    for target in ([], [101, 999]):
        [e] = lc.admin.alter_partition_reassignments({("ra-err", 0): target}).values()
        assert e.code == Errors.INVALID_REPLICA_ASSIGNMENT, (target, e)
    assert partitions(lc, "ra-err")[0].replicas == [101, 102]
    with pytest.raises(AdminError) as list_error:
        lc.admin.list_partition_reassignments([("ra-err", -2)])
    assert list_error.value.code == Errors.INVALID_TOPIC_EXCEPTION


def test_request_errors_name_the_field(lc: LifecycleCluster) -> None:
    create(lc, "ra-req", {0: [101, 102]})
    Alter = pb.AlterPartitionReassignmentsRequest
    target = Alter.ReplicaList(broker_ids=[102, 101])
    cases = {
        "topics[1].partitions[0]: partition ra-req-0 is already named by topics[0].partitions[0]": Alter(
            topics=[
                Alter.ReassignableTopic(name="ra-req", partitions=[Alter.ReassignablePartition(replicas=target)]),
                Alter.ReassignableTopic(name="ra-req", partitions=[Alter.ReassignablePartition(replicas=target)]),
            ]
        ),
        "topics[0].partitions[0].partition_index: partition index -3 is negative": Alter(
            topics=[
                Alter.ReassignableTopic(name="ra-req", partitions=[Alter.ReassignablePartition(partition_index=-3)])
            ]
        ),
        "topics[0].name: the topic name is empty": Alter(topics=[Alter.ReassignableTopic(name="")]),
        "timeout_ms: -1 is negative": Alter(timeout_ms=-1),
    }
    for message, request in cases.items():
        response = raw(lc, "AlterPartitionReassignments", request)
        assert (response.error_code, response.error_message) == (Errors.INVALID_REQUEST, message), response  # type: ignore[attr-defined]
    assert partitions(lc, "ra-req")[0].replicas == [101, 102]  # nothing of a refused request is done

    List = pb.ListPartitionReassignmentsRequest
    bad = List(
        topics=List.TopicList(topics=[List.ListPartitionReassignmentsTopics(name="x", partition_indexes=[0, -1])])
    )
    response = raw(lc, "ListPartitionReassignments", bad)
    assert response.error_code == Errors.INVALID_REQUEST, response  # type: ignore[attr-defined]
    assert response.error_message == "topics[0].partition_indexes[1]: partition index -1 is negative"  # type: ignore[attr-defined]
    everything = raw(lc, "ListPartitionReassignments", List())
    assert everything.error_code == 0, everything  # type: ignore[attr-defined]
