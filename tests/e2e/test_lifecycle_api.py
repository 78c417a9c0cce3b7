"""The lifecycle RPCs through the AdminClient, end to end: DeleteTopics, CreatePartitions, ElectLeaders,
AlterPartition, IncrementalAlterConfigs and DescribeConfigs against a ``pykraft node`` process, with brokers the
test drives itself (so it decides when one shuts down, comes back, or asks for an ISR change).

Each test makes its own topics with manual assignments, so the order of the tests does not matter; a test that
shuts brokers down starts them again before it ends. Request-level errors are AdminErrors whose code and message
name the field; per-topic and per-partition errors are results.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from lifecycle_helpers import LifecycleCluster, start_cluster, stop_cluster

from controller.requests import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterPartitionData,
    AlterPartitionTopic,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ElectionType,
    LeaderRecoveryState,
)
from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.client import AdminError, NewPartitions, NewTopic, PartitionInfo, TopicDescription
from quorum.errors import Errors
from quorum.log.message import Uuid

RACKS = {101: "rack-1", 102: "rack-2", 103: "rack-3", 104: "rack-1"}
TOPIC = ConfigResourceType.TOPIC


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LifecycleCluster]:
    lc = start_cluster(tmp_path_factory.mktemp("lifecycle-api"), RACKS)
    try:
        yield lc
    finally:
        stop_cluster(lc)


def create(lc: LifecycleCluster, name: str, assignment: dict[int, list[int]], **configs: str) -> str:
    results = lc.admin.create_topics([NewTopic(name, replica_assignment=assignment, topic_configs=configs)])
    results[name].raise_for_error()
    return results[name].topic_id


def describe(lc: LifecycleCluster, name: str) -> TopicDescription:
    [d] = lc.admin.describe_topics([name])
    assert d.error_code == 0, d
    return d


def partition(lc: LifecycleCluster, name: str, index: int) -> PartitionInfo:
    return describe(lc, name).partitions[index]


def admin_error(call, *args, **kwargs) -> AdminError:  # type: ignore[no-untyped-def]
    with pytest.raises(AdminError) as e:
        call(*args, **kwargs)
    return e.value


# -- DeleteTopics --------------------------------------------------------------------------------------------------


def test_delete_topics_by_name_and_by_id(lc: LifecycleCluster) -> None:
    create(lc, "del-a", {0: [101]})
    b_id = create(lc, "del-b", {0: [102]})
    create(lc, "del-c", {0: [103]})

    results = lc.admin.delete_topics(["del-a"], topic_ids=[b_id])
    assert [(r.name, r.error.code) for r in results] == [("del-a", Errors.NONE), ("del-b", Errors.NONE)], results
    assert str(results[1].topic_id) == b_id
    described = {d.name: d.error_code for d in lc.admin.describe_topics(["del-a", "del-b", "del-c"])}
    assert described == {"del-a": Errors.UNKNOWN_TOPIC_OR_PARTITION, "del-b": Errors.UNKNOWN_TOPIC_OR_PARTITION,
                         "del-c": Errors.NONE}  # fmt: skip

    unknown_id = str(Uuid.random())
    again = lc.admin.delete_topics(["del-a"], topic_ids=[unknown_id])
    assert [r.error.code for r in again] == [Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.UNKNOWN_TOPIC_ID], again
    assert "del-a" in (again[0].error.message or "") and unknown_id in (again[1].error.message or ""), again

    e = admin_error(lc.admin.delete_topics, ["del-c"], topic_ids=["not-a-topic-id"])
    assert e.code == Errors.INVALID_REQUEST and "topics[1].topic_id: 'not-a-topic-id'" in str(e), e
    e = admin_error(lc.admin.delete_topics, [""])
    assert e.code == Errors.INVALID_REQUEST and "topics[0].name" in str(e), e
    assert describe(lc, "del-c").name == "del-c"  # a refused request deletes nothing


def test_deletion_disabled_is_a_request_level_error(tmp_path_factory: pytest.TempPathFactory) -> None:
    disabled = start_cluster(
        tmp_path_factory.mktemp("no-deletes"), {101: "rack-1"}, ["--override", "delete.topic.enable=false"]
    )
    try:
        create(disabled, "kept", {0: [101]})
        e = admin_error(disabled.admin.delete_topics, ["kept"])
        assert e.code == Errors.TOPIC_DELETION_DISABLED, e
        assert describe(disabled, "kept").name == "kept"
    finally:
        stop_cluster(disabled)


# -- CreatePartitions ----------------------------------------------------------------------------------------------


def test_create_partitions(lc: LifecycleCluster) -> None:
    create(lc, "grow", {0: [101, 102], 1: [102, 103]})
    results = lc.admin.create_partitions({"grow": NewPartitions(4)})
    assert results["grow"].error.code == Errors.NONE, results
    d = describe(lc, "grow")
    assert len(d.partitions) == 4 and all(len(p.replicas) == 2 for p in d.partitions), d
    assert all(p.leader == p.replicas[0] and p.isr == p.replicas for p in d.partitions), d

    results = lc.admin.create_partitions({"grow": NewPartitions(6)}, validate_only=True)
    assert results["grow"].error.code == Errors.NONE, results
    assert len(describe(lc, "grow").partitions) == 4  # validate_only changes nothing

    results = lc.admin.create_partitions({"grow": NewPartitions(5, [[104, 103]])})
    assert results["grow"].error.code == Errors.NONE, results
    assert partition(lc, "grow", 4).replicas == [104, 103]

    results = lc.admin.create_partitions({"grow": NewPartitions(5)})
    assert results["grow"].error.code == Errors.INVALID_PARTITIONS and "5" in (results["grow"].error.message or "")
    # [] is not null: no assignment for the one new partition, rather than the controller's choice.
    results = lc.admin.create_partitions({"grow": NewPartitions(6, [])})
    error = results["grow"].error
    assert error.code == Errors.INVALID_REPLICA_ASSIGNMENT and "0 assignment(s)" in (error.message or ""), error
    results = lc.admin.create_partitions({"no-such-topic": NewPartitions(3)})
    assert results["no-such-topic"].error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION, results

    e = admin_error(lc.admin.create_partitions, {"": NewPartitions(3)})
    assert e.code == Errors.INVALID_REQUEST and "topics[0].name" in str(e), e


# -- ElectLeaders and AlterPartition -------------------------------------------------------------------------------


def isr_change(lc: LifecycleCluster, topic_id: str, index: int, new_isr: list[int], **overrides: int) -> Any:
    """An AlterPartition from the partition's leader, based on its current state (``overrides`` replace fields)."""
    p = next(p for p in describe_by_id(lc, topic_id).partitions if p.partition == index)
    data = {
        "partition_index": index,
        "leader_epoch": p.leader_epoch,
        "new_isr": tuple((b, lc.brokers.epoch(b)) for b in new_isr),
        "partition_epoch": p.partition_epoch,
    }
    broker = overrides.pop("broker", p.leader)
    broker_epoch = overrides.pop("broker_epoch", lc.brokers.epoch(broker))
    data.update(overrides)
    topic = AlterPartitionTopic(Uuid(topic_id), (AlterPartitionData(**data),))  # type: ignore[arg-type]
    return lc.admin.alter_partition(broker, broker_epoch, [topic])


def describe_by_id(lc: LifecycleCluster, topic_id: str) -> TopicDescription:
    return next(d for d in lc.admin.describe_topics() if d.topic_id == topic_id)


def test_preferred_election_after_a_broker_returns(lc: LifecycleCluster) -> None:
    topic_id = create(lc, "pref", {0: [102, 103], 1: [103, 102]})
    results = lc.admin.elect_leaders(ElectionType.PREFERRED, [("pref", 0), ("pref", 1)])
    assert {(r.partition, r.error.code) for r in results} == {(0, Errors.ELECTION_NOT_NEEDED),
                                                              (1, Errors.ELECTION_NOT_NEEDED)}  # fmt: skip

    lc.brokers.controlled_shutdown(102)
    p0 = partition(lc, "pref", 0)
    assert (p0.leader, p0.isr) == (103, [103]), p0
    lc.brokers.start(102)
    # Back and unfenced, but not in the ISR: the preferred replica cannot lead yet.
    [r] = lc.admin.elect_leaders(ElectionType.PREFERRED, [("pref", 0)])
    assert r.error.code == Errors.PREFERRED_LEADER_NOT_AVAILABLE, r

    # The leader (103) takes 102 back into the ISR, as a caught-up follower's leader would.
    response = isr_change(lc, topic_id, 0, [103, 102])
    [result] = response.partitions
    assert result.error.code == Errors.NONE, result
    assert (result.leader_id, sorted(result.isr)) == (103, [102, 103]), result
    assert result.partition_epoch == p0.partition_epoch + 1 and str(result.topic_id) == topic_id, result

    [r] = lc.admin.elect_leaders(ElectionType.PREFERRED, [("pref", 0)])
    assert r.error.code == Errors.NONE, r
    p0 = partition(lc, "pref", 0)
    assert p0.leader == 102 and p0.leader_epoch > result.leader_epoch, p0
    # Every partition (null): the answer leaves out partitions whose preferred leader already leads.
    everything = lc.admin.elect_leaders(ElectionType.PREFERRED, None)
    assert ("pref", 0) not in {(r.topic, r.partition) for r in everything}, everything


def test_alter_partition_errors(lc: LifecycleCluster) -> None:
    topic_id = create(lc, "isr", {0: [101, 102, 103]})
    p = partition(lc, "isr", 0)

    [stale] = isr_change(lc, topic_id, 0, [101, 102], partition_epoch=p.partition_epoch - 1).partitions
    assert stale.error.code == Errors.INVALID_UPDATE_VERSION, stale
    [fenced] = isr_change(lc, topic_id, 0, [101, 102], leader_epoch=p.leader_epoch - 1).partitions
    assert fenced.error.code == Errors.FENCED_LEADER_EPOCH, fenced
    # An epoch ahead of the controller's: as Kafka, the broker is told to find the newer controller.
    [ahead] = isr_change(lc, topic_id, 0, [101, 102], leader_epoch=p.leader_epoch + 1).partitions
    assert ahead.error.code == Errors.NOT_CONTROLLER, ahead
    e = admin_error(isr_change, lc, topic_id, 0, [101, 102], broker_epoch=lc.brokers.epoch(101) - 1)
    assert e.code == Errors.STALE_BROKER_EPOCH, e
    e = admin_error(isr_change, lc, topic_id, 0, [101, 102], partition_index=-1)
    assert e.code == Errors.INVALID_REQUEST and "topics[0].partitions[0].partition_index" in str(e), e

    # A topic id the controller does not know: that partition's error.
    response = lc.admin.alter_partition(
        101, lc.brokers.epoch(101), [AlterPartitionTopic(Uuid.random(), (AlterPartitionData(0, 0, ((101, -1),), 0),))]
    )
    assert [r.error.code for r in response.partitions] == [Errors.UNKNOWN_TOPIC_ID], response

    # A topic id that is not one at all never reaches the controller.
    request = pb.AlterPartitionRequest(broker_id=101, broker_epoch=lc.brokers.epoch(101))
    request.topics.add(topic_id="orders")
    with grpc.insecure_channel(lc.bootstrap) as channel:
        answer = pb_grpc.ControllerStub(channel).AlterPartition(request, timeout=10)
    assert answer.error_code == Errors.INVALID_REQUEST, answer
    assert answer.error_message == "topics[0].topic_id: 'orders' is not a base64url topic id", answer

    # Nothing above changed the partition.
    assert partition(lc, "isr", 0) == p


def test_a_large_alter_partition_is_answered_whole_and_in_request_order(lc: LifecycleCluster) -> None:
    """2,500 changes: the service reads and answers them in slices, the controller applies them 500 per event."""
    topic_id = create(lc, "large", {0: [101, 102, 103]})
    p = partition(lc, "large", 0)
    unknown = [AlterPartitionTopic(Uuid.random(), tuple(AlterPartitionData(i, 0, ((101, -1),), 0) for i in range(500)))
               for _ in range(5)]  # fmt: skip
    real = AlterPartitionData(0, p.leader_epoch, ((101, lc.brokers.epoch(101)), (102, lc.brokers.epoch(102))),
                              p.partition_epoch)  # fmt: skip
    response = lc.admin.alter_partition(
        101, lc.brokers.epoch(101), [*unknown, AlterPartitionTopic(Uuid(topic_id), (real,))]
    )
    got = [(str(r.topic_id), r.partition_index, r.error.code) for r in response.partitions]
    expected = [(str(t.topic_id), d.partition_index, Errors.UNKNOWN_TOPIC_ID) for t in unknown for d in t.partitions]
    assert got == [*expected, (topic_id, 0, Errors.NONE)]
    assert sorted(response.partitions[-1].isr) == [101, 102]


def test_unclean_election(lc: LifecycleCluster) -> None:
    create(lc, "unclean", {0: [101, 104]})
    try:
        lc.brokers.controlled_shutdown(101)
        lc.brokers.controlled_shutdown(104)  # the last ISR member: the partition has no leader, ISR [104]
        p = partition(lc, "unclean", 0)
        assert (p.leader, p.isr) == (-1, [104]), p
        lc.brokers.start(101)  # live, but not in the ISR

        [r] = lc.admin.elect_leaders(ElectionType.PREFERRED, [("unclean", 0)])
        assert r.error.code in (Errors.PREFERRED_LEADER_NOT_AVAILABLE, Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE), r
        [r] = lc.admin.elect_leaders(ElectionType.UNCLEAN, [("unclean", 0)])
        assert r.error.code == Errors.NONE, r
        p = partition(lc, "unclean", 0)
        assert (p.leader, p.isr, p.leader_recovery_state) == (101, [101], LeaderRecoveryState.RECOVERING), p
    finally:
        lc.brokers.start(101, 104)


def test_elect_leaders_request_errors(lc: LifecycleCluster) -> None:
    create(lc, "elect-errors", {0: [103]})
    e = admin_error(lc.admin.elect_leaders, 7, None)
    assert e.code == Errors.INVALID_REQUEST and "election_type: 7" in str(e), e
    e = admin_error(lc.admin.elect_leaders, ElectionType.PREFERRED, [("elect-errors", -1)])
    assert e.code == Errors.INVALID_REQUEST and "topic_partitions[0].partitions[0]" in str(e), e
    e = admin_error(lc.admin.elect_leaders, ElectionType.PREFERRED, [("", 0)])
    assert e.code == Errors.INVALID_REQUEST and "topic_partitions[0].topic" in str(e), e

    results = lc.admin.elect_leaders(ElectionType.PREFERRED, [("no-such-topic", 0), ("elect-errors", 5)])
    assert [r.error.code for r in results] == [Errors.UNKNOWN_TOPIC_OR_PARTITION] * 2, results
    assert lc.admin.elect_leaders(ElectionType.PREFERRED, []) == []  # empty is not null: no partition at all


# -- configs -------------------------------------------------------------------------------------------------------


def topic_config(lc: LifecycleCluster, topic: str, key: str):  # type: ignore[no-untyped-def]
    [result] = lc.admin.describe_configs([ConfigResource(TOPIC, topic, (key,))], include_synonyms=True)
    assert result.error.code == Errors.NONE, result
    [entry] = result.configs
    return entry


def test_incremental_alter_and_describe_topic_configs(lc: LifecycleCluster) -> None:
    create(lc, "configured", {0: [101]})
    retention = AlterableConfig("retention.ms", AlterConfigOp.SET, "3600000")
    set_retention = AlterConfigsResource(TOPIC, "configured", (retention,))
    [r] = lc.admin.incremental_alter_configs([set_retention], validate_only=True)
    assert r.error.code == Errors.NONE, r
    assert topic_config(lc, "configured", "retention.ms").source == ConfigSource.DEFAULT_CONFIG

    [r] = lc.admin.incremental_alter_configs([set_retention])
    assert (r.resource_type, r.resource_name, r.error.code) == (TOPIC, "configured", Errors.NONE), r
    entry = topic_config(lc, "configured", "retention.ms")
    assert (entry.value, entry.source) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG), entry
    first = entry.synonyms[0]
    assert (first.source, first.value) == (ConfigSource.DYNAMIC_TOPIC_CONFIG, "3600000"), entry
    assert entry.synonyms[-1].source == ConfigSource.DEFAULT_CONFIG, entry
    assert describe(lc, "configured").configs == {"retention.ms": "3600000"}

    delete = AlterConfigsResource(TOPIC, "configured", (AlterableConfig("retention.ms", AlterConfigOp.DELETE),))
    [r] = lc.admin.incremental_alter_configs([delete])
    assert r.error.code == Errors.NONE, r
    entry = topic_config(lc, "configured", "retention.ms")
    assert (entry.value, entry.source) == ("604800000", ConfigSource.DEFAULT_CONFIG), entry

    bad = AlterConfigsResource(TOPIC, "configured", (AlterableConfig("retention.ms", AlterConfigOp.SET, "-5"),))
    missing = AlterConfigsResource(TOPIC, "no-such-topic", (AlterableConfig("retention.ms", AlterConfigOp.SET, "1"),))
    results = lc.admin.incremental_alter_configs([bad, missing])
    assert [r.error.code for r in results] == [Errors.INVALID_CONFIG, Errors.UNKNOWN_TOPIC_OR_PARTITION], results
    assert results[0].error.message == "Invalid value -5 for configuration retention.ms: Value must be at least -1"


def test_describe_configs_all_or_named_keys(lc: LifecycleCluster) -> None:
    create(lc, "described-configs", {0: [102]}, **{"min.insync.replicas": "1"})
    every, two, missing = lc.admin.describe_configs(
        [
            ConfigResource(TOPIC, "described-configs"),
            ConfigResource(TOPIC, "described-configs", ("min.insync.replicas", "cleanup.policy")),
            ConfigResource(TOPIC, "no-such-topic"),
        ]
    )
    assert len(every.configs) > 20 and len({c.name for c in every.configs}) == len(every.configs), every
    assert sorted(c.name for c in two.configs) == ["cleanup.policy", "min.insync.replicas"], two
    mir = next(c for c in two.configs if c.name == "min.insync.replicas")
    assert (mir.value, mir.source, mir.config_type) == ("1", ConfigSource.DYNAMIC_TOPIC_CONFIG, "int"), mir
    assert not mir.synonyms  # only with include_synonyms
    assert missing.error.code == Errors.UNKNOWN_TOPIC_OR_PARTITION, missing


def test_config_nulls_travel_as_nulls(lc: LifecycleCluster) -> None:
    create(lc, "null-configs", {0: [103]})
    set_null = AlterConfigsResource(TOPIC, "null-configs", (AlterableConfig("retention.ms", AlterConfigOp.SET, None),))
    [r] = lc.admin.incremental_alter_configs([set_null])
    assert (r.error.code, r.error.message) == (Errors.INVALID_REQUEST, "Null value not supported for : retention.ms")

    # log.retention.ms has no default (Kafka's null): absent, not "", with its documentation when asked for.
    broker = ConfigResource(ConfigResourceType.BROKER, "101", ("log.retention.ms",))
    [result] = lc.admin.describe_configs([broker], include_documentation=True)
    [entry] = result.configs
    assert (entry.value, entry.source, entry.config_type) == (None, ConfigSource.DEFAULT_CONFIG, "long"), entry
    assert entry.documentation, entry
    [result] = lc.admin.describe_configs([broker])
    assert result.configs[0].documentation is None, result
