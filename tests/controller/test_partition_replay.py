"""The PartitionRecord fast path (controller/partition_replay.py) against the generic decode and replay: the same
committed state for every record it takes, the generic path's errors for every record it leaves, and values
shared rather than copied."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from ctl_helpers import FakeRaft, SharedLog, quiet_settings
from test_snapshot_image import image_state

from controller.quorum_controller import QuorumController, ReplayError
from controller.records import (
    ApiMessage,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    Uuid,
    serialize,
)
from quorum.log.message import METADATA_TOPIC_ID
from quorum.raft.client import CommittedBatch

UNASSIGNED = METADATA_TOPIC_ID


def standby(fast: bool = True) -> QuorumController:
    ctl = QuorumController(7, FakeRaft(7, SharedLog()), quiet_settings())
    if not fast:  # the fast path takes nothing: every record goes the generic way
        records = ctl.replication.partition_records
        records.apply = lambda value: False  # type: ignore[method-assign]
        records.apply_run = lambda values, start=0: start  # type: ignore[method-assign]
    return ctl


def counting(ctl: QuorumController) -> list[int]:
    """Counts the records the fast path took (``apply`` takes one through ``apply_run``): [taken]."""
    taken = [0]
    records = ctl.replication.partition_records
    apply_run = records.apply_run

    def counted_run(values: Sequence[bytes], start: int = 0) -> int:
        stopped = apply_run(values, start)
        taken[0] += stopped - start
        return stopped

    records.apply_run = counted_run  # type: ignore[method-assign]
    return taken


def replay(ctl: QuorumController, values: Sequence[bytes], size: int, base: int = 0) -> None:
    for i in range(0, len(values), size):
        ctl.handle_commit(CommittedBatch.of(list(values[i : i + size]), base_offset=base + i))


def record_mix() -> list[bytes]:
    a, b, c = Uuid.random(), Uuid.random(), Uuid.random()
    dirs = [Uuid.random(), Uuid.random(), Uuid.random()]
    common = {"leader_epoch": 0, "partition_epoch": 0}
    records: list[ApiMessage | bytes] = [
        FeatureLevelRecord(name="metadata.version", feature_level=22),
        TopicRecord(name="a", topic_id=a),
        TopicRecord(name="b.c", topic_id=b),
    ]
    for i in range(20):  # as CreateTopics writes them: most share replicas, ISR, the whole registration
        replicas = [i % 4, (i + 1) % 4, (i + 2) % 4]
        records.append(
            PartitionRecord(
                partition_id=i,
                topic_id=a,
                replicas=replicas,
                isr=replicas,
                leader=replicas[0],
                directories=[UNASSIGNED] * 3,
                **common,
            )
        )
    records += [
        PartitionRecord(partition_id=0, topic_id=b, replicas=[0, 1], isr=[0], leader=0, leader_recovery_state=1),
        PartitionRecord(partition_id=1, topic_id=b, replicas=[0, 1, 2], isr=[1], leader=1, directories=dirs),
        PartitionRecord(  # moving: 2 and 3 join, 0 leaves
            partition_id=2,
            topic_id=b,
            replicas=[2, 3, 0],
            isr=[0],
            leader=0,
            adding_replicas=[2, 3],
            removing_replicas=[0],
            leader_epoch=3,
            partition_epoch=7,
        ),
        PartitionRecord(partition_id=3, topic_id=b, replicas=[1], isr=[1], leader=1, leader_epoch=-1),
        serialize(PartitionRecord(partition_id=4, topic_id=b, replicas=[3], isr=[3], leader=3), version=0),
        PartitionRecord(  # 130 replicas: a length that takes two bytes, left to the generic path
            partition_id=5, topic_id=b, replicas=list(range(130)), isr=[0], leader=0
        ),
        PartitionChangeRecord(partition_id=0, topic_id=a, isr=[0, 1], leader=1),
        PartitionChangeRecord(partition_id=2, topic_id=b, isr=[0, 2, 3]),
        PartitionChangeRecord(  # the move completes
            partition_id=2, topic_id=b, replicas=[2, 3], isr=[2, 3], leader=2, removing_replicas=[], adding_replicas=[]
        ),
        PartitionRecord(  # a partition written again (a log may hold it twice): it starts moving this time
            partition_id=3, topic_id=b, replicas=[1, 2], isr=[1], leader=1, adding_replicas=[2], partition_epoch=2
        ),
        TopicRecord(name="gone", topic_id=c),
        PartitionRecord(partition_id=0, topic_id=c, replicas=[1, 2], isr=[1, 2], leader=1, adding_replicas=[2]),
        RemoveTopicRecord(topic_id=c),
        TopicRecord(name="gone", topic_id=(c2 := Uuid.random())),  # the name again, another id
        PartitionRecord(partition_id=0, topic_id=c2, replicas=[0], isr=[0], leader=0),
    ]
    return [r if isinstance(r, bytes) else serialize(r) for r in records]


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_fast_replay_gives_the_generic_replays_state(size: int) -> None:
    values = record_mix()
    fast, generic = standby(), standby(fast=False)
    taken = counting(fast)
    replay(fast, values, size)
    replay(generic, values, size)
    assert image_state(fast) == image_state(generic)
    # Every PartitionRecord but the one with 130 replicas, and the ISR/leader change of a's partition 0 (b's
    # partition 2 is moving, and its last change names replicas: the generic path).
    assert taken[0] == 29
    r = fast.replication
    assert r.reassignments.moving.committed() == generic.replication.reassignments.moving.committed()
    assert len(r.reassignments.moving.committed()) == 1  # b's partition 3; c's went with its topic
    for (topic_id, _), p in r.partitions.committed().items():
        assert topic_id is r.topics.committed()[topic_id].id  # keys hold the topic's own id object
        assert all(type(v) is tuple for v in (p.replicas, p.isr, p.removing, p.adding, p.directories))


def test_values_are_shared_not_copied() -> None:
    ctl = standby()
    replay(ctl, record_mix(), 1000)
    parts = ctl.replication.partitions.committed()
    topic = next(t.id for t in ctl.replication.topics.committed().values() if t.name == "a")
    p4, p8 = parts[(topic, 4)], parts[(topic, 8)]  # same replicas, leader, epochs
    assert p4 is p8
    p1, p5 = parts[(topic, 1)], parts[(topic, 5)]
    assert p1.replicas is p5.replicas and p1.isr is p1.replicas
    assert parts[(topic, 0)].replicas is parts[(topic, 4)].replicas  # changed by a PartitionChangeRecord: still
    assert parts[(topic, 2)].directories is p4.directories


def mutate_and_compare(rng: random.Random, setup: list[bytes], seeds: list[bytes], rounds: int = 1500) -> None:
    """Random damage to the bytes of ``seeds`` (the frame header kept: else it is not the record type any more),
    each result committed on a fast and a generic standby: both apply it alike or refuse it alike."""
    fast_ctl, generic_ctl = standby(), standby(fast=False)
    replay(fast_ctl, setup, 10)
    replay(generic_ctl, setup, 10)
    offset = len(setup)
    for _ in range(rounds):
        value = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            action = rng.random()
            pos = rng.randrange(3, len(value) + 1)
            if action < 0.6 and pos < len(value):
                value[pos] = rng.randrange(256)
            elif action < 0.8:
                del value[pos:]
            else:
                value[pos:pos] = bytes([rng.randrange(256)])
        outcomes = []
        for ctl in (fast_ctl, generic_ctl):
            try:
                ctl.handle_commit(CommittedBatch.of([bytes(value)], base_offset=offset))
                outcomes.append("applied")
            except ReplayError as e:
                outcomes.append(str(e))
                ctl.failed = False  # a test's liberty: go on with the next mutation
        assert outcomes[0] == outcomes[1], bytes(value).hex()
        assert image_state(fast_ctl) == image_state(generic_ctl), bytes(value).hex()
        offset += 1


def test_mutated_records_fast_or_generic_agree() -> None:
    """Random damage to a PartitionRecord's bytes: whatever the fast path takes, it reads as the generic path
    does; what it leaves, the generic path applies or refuses."""
    rng = random.Random(7)
    topic = Uuid.random()
    setup = [serialize(FeatureLevelRecord(name="metadata.version", feature_level=22))]
    setup.append(serialize(TopicRecord(name="t", topic_id=topic)))
    seeds = [
        serialize(PartitionRecord(partition_id=3, topic_id=topic, replicas=[1, 2, 3], isr=[1, 2], leader=1)),
        serialize(
            PartitionRecord(
                partition_id=0,
                topic_id=topic,
                replicas=[1, 2],
                isr=[1],
                leader=1,
                adding_replicas=[2],
                leader_recovery_state=1,
                directories=[Uuid.random(), UNASSIGNED],
            )
        ),
        serialize(PartitionRecord(partition_id=1, topic_id=topic, replicas=[4], isr=[4], leader=4), version=0),
    ]
    mutate_and_compare(rng, setup, seeds)


def test_the_same_body_in_another_version_is_read_as_that_version() -> None:
    topic = Uuid.random()
    setup = [serialize(TopicRecord(name="t", topic_id=topic))]
    v1 = serialize(PartitionRecord(partition_id=0, topic_id=topic, replicas=[1], isr=[1], leader=1))
    as_v0 = v1[:2] + b"\x00" + v1[3:]  # v0 has no directories: the empty array's byte reads as a tag count
    outcomes = []
    for ctl in (standby(), standby(fast=False)):
        replay(ctl, [*setup, v1], 10)
        with pytest.raises(ReplayError, match="cannot decode the record at offset 2") as e:
            ctl.handle_commit(CommittedBatch.of([as_v0], base_offset=2))
        outcomes.append(str(e.value))
    assert outcomes[0] == outcomes[1]


def test_a_corrupt_or_unknown_partition_record_is_a_replay_error_naming_its_offset() -> None:
    ctl = standby()
    topic = Uuid.random()
    good = [
        serialize(FeatureLevelRecord(name="metadata.version", feature_level=22)),
        serialize(TopicRecord(name="t", topic_id=topic)),
    ]
    record = serialize(PartitionRecord(partition_id=0, topic_id=topic, replicas=[1, 2], isr=[1], leader=1))
    replay(ctl, good, 10)
    with pytest.raises(ReplayError, match="cannot decode the record at offset 12: "):
        ctl.handle_commit(CommittedBatch.of([record, record[:-6]], base_offset=11))
    unknown = serialize(PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=[1], isr=[1], leader=1))
    with pytest.raises(ReplayError, match=r"PartitionRecord at offset 20 on the standby .*unknown topic id"):
        standby().handle_commit(CommittedBatch.of([*good, unknown], base_offset=18))


def change_mix(rng: random.Random, topic: Uuid, count: int) -> list[bytes]:
    """Changes as fencing, elections and AlterPartition write them (ISR, leader, recovery state in any mix, in
    every record version), with a few the fast path leaves alone (replicas, directories, a reassignment)."""
    out = []
    for _ in range(count):
        index = rng.randrange(8)
        fields: dict = {}
        if rng.random() < 0.7:
            fields["isr"] = rng.sample(range(5), rng.randint(1, 3))
        if rng.random() < 0.5:
            fields["leader"] = rng.choice([-1, 0, 1, 2, 3, 4])
        if rng.random() < 0.2:
            fields["leader_recovery_state"] = rng.choice([0, 1])
        if rng.random() < 0.05:
            fields["replicas"], fields["directories"] = [0, 1, 2], [UNASSIGNED] * 3
        if rng.random() < 0.03:
            fields["adding_replicas"] = [3]
        if rng.random() < 0.03:
            fields["adding_replicas"] = []
        version = 2 if "directories" in fields else rng.choice([0, 1, 2])
        record = PartitionChangeRecord(partition_id=index, topic_id=topic, **fields)
        out.append(serialize(record, version=version))
    return out


def eight_partitions(topic: Uuid) -> list[bytes]:
    """The metadata.version, topic ``t`` and its 8 partitions (RF 3 over brokers 0-4), as bytes."""
    setup = [
        serialize(FeatureLevelRecord(name="metadata.version", feature_level=22)),
        serialize(TopicRecord(name="t", topic_id=topic)),
    ]
    for i in range(8):
        replicas = [i % 5, (i + 1) % 5, (i + 2) % 5]
        record = PartitionRecord(partition_id=i, topic_id=topic, replicas=replicas, isr=replicas, leader=replicas[0])
        setup.append(serialize(record))
    return setup


def test_change_records_fast_or_generic_agree() -> None:
    """ISR, leader and recovery-state changes taken from their bytes give the generic replay's state: epochs
    bumped alike, moving partitions and other fields left to the generic path."""
    rng = random.Random(11)
    topic = Uuid.random()
    values = eight_partitions(topic) + change_mix(rng, topic, 600)
    for size in (1, 7):
        fast, generic = standby(), standby(fast=False)
        taken = counting(fast)
        replay(fast, values, size)
        replay(generic, values, size)
        assert image_state(fast) == image_state(generic)
        assert taken[0] > 150  # many changes took the fast path (partitions being moved take the generic one)
    p = next(iter(fast.replication.partitions.committed().values()))
    assert p.partition_epoch > 0 and all(type(v) is tuple for v in (p.replicas, p.isr))


def test_mutated_change_records_fast_or_generic_agree() -> None:
    """Random damage to a PartitionChangeRecord's bytes: what the fast path takes it reads as the generic path
    does; what it leaves, the generic path applies or refuses."""
    rng = random.Random(13)
    topic = Uuid.random()
    mutate_and_compare(rng, eight_partitions(topic), change_mix(rng, topic, 40))


def test_the_fast_path_notes_new_and_changed_partitions_as_the_maps_own_writes_do() -> None:
    """A broker's data plane reads what the image's partition map says changed; a new partition (or an ISR change)
    the fast path puts straight into the committed dict must be noted, and the map's version bumped, as a write
    through it would."""
    topic = Uuid.random()
    values = eight_partitions(topic)
    watched = {}
    for fast in (True, False):
        ctl = standby(fast)
        partitions = ctl.replication.partitions
        assert partitions.take_committed_changes() == {}  # from now on, changes are noted
        replay(ctl, values[:6], 6)  # metadata.version, the topic, partitions 0-3
        version = partitions.version
        replay(ctl, values[6:], 2, base=6)  # partitions 4-7
        bumped = partitions.version > version  # a reader caching what it derived sees the map changed
        changed = list(partitions.take_committed_changes())
        again = PartitionRecord(partition_id=1, topic_id=topic, replicas=[1, 2, 3], isr=[1, 2], leader=2)
        replay(ctl, [serialize(again)], 1, base=10)  # partition 1 changed
        renewed = list(partitions.take_committed_changes())
        version = partitions.version
        shrunk = PartitionChangeRecord(partition_id=2, topic_id=topic, isr=[2, 3])
        replay(ctl, [serialize(shrunk)], 1, base=11)  # partition 2's ISR changed
        noted = (list(partitions.take_committed_changes()), partitions.version > version)
        watched[fast] = (changed, renewed, bumped, noted)
    assert watched[True] == watched[False]
    assert watched[True][0][:4] == [(topic, i) for i in range(4)] and len(watched[True][0]) == 8
    assert watched[True][1] == [(topic, 1)] and watched[True][2]
    assert watched[True][3] == ([(topic, 2)], True)
