"""A broker's data plane reads its metadata image as deltas (pykraft.replica.data_plane.ImageMetadata): only the
partitions whose committed value changed since the last read, everything again after a snapshot load — and a
ReplicaManager fed the deltas ends where one fed the whole image each time ends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ctl_helpers import SharedLog, active_cluster, settle, start_controller

from controller.cluster_control import HeartbeatRequest
from controller.replication_control import NewTopic
from controller.requests import DeleteTopicState
from pykraft.replica import image_metadata
from pykraft.replica.image_metadata import ImageMetadata, apply_image
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import ReplicaConfig
from quorum.log.message import Uuid

ME = 101
BROKERS = [(101, None, False), (102, None, False), (103, None, False), (104, None, False)]


def manager_state(m: ReplicaManager) -> dict[tuple[Uuid, int], tuple[object, ...]]:
    return {
        k: (p.topic, p.leader, p.leader_epoch, p.partition_epoch, p.replicas, p.isr, p.adding, p.removing)
        for k, p in m.partitions.items()
    }


async def full_read(image: ImageMetadata) -> ReplicaManager:
    """A manager given the whole image, as a broker started now would be."""
    fresh = ImageMetadata(image.image, ME)
    news = await fresh.read()
    assert news.full
    m = ReplicaManager(ME, ReplicaConfig(), clock=lambda: 0, broker_epoch=lambda: 1)
    m.apply_updates([u async for us in fresh.read_all() for u in us], [], fresh.brokers)
    return m


async def test_reads_after_the_first_carry_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ImageMetadata, "SLICE", 7)  # full reads in several slices
    log = SharedLog()
    standby, _ = await start_controller(log, 2)  # the image: fed committed batches only, as an observer's
    ctl, _, epochs = await active_cluster(log, BROKERS, topics=[NewTopic(f"t{i}", 8, 2) for i in range(5)])
    image = ImageMetadata(standby, ME)
    m = ReplicaManager(ME, ReplicaConfig(), clock=lambda: 0, broker_epoch=lambda: epochs[ME])

    async def apply() -> tuple[int, int, bool]:
        news, changed = await apply_image(image, m)
        return (changed if news.full else len(news.partitions)), len(news.removed), news.full

    partitions, removed, full = await apply()
    assert full and partitions == len(m.partitions) > 0 and removed == 0
    assert all(ME in p.replicas for p in m.partitions.values())
    # The replicas are keyed by the image's own key tuples: a million replicas add no million tuples of their own.
    image_keys = {k: k for k in standby.replication.partitions.committed()}
    assert all(image_keys[k] is k for k in m.partitions)
    assert await apply() == (0, 0, False)  # nothing changed: nothing read

    await ctl.create_topics([NewTopic("new", 12, 2)])
    await settle()
    partitions, removed, full = await apply()
    assert not full and partitions + removed == 12  # each new partition, held here or not
    assert partitions == sum(1 for k in m.partitions if k[0] == standby.replication.topics_by_name["new"])

    doomed = standby.replication.topics_by_name["t0"]
    held = sum(1 for k in m.partitions if k[0] == doomed)
    await ctl.delete_topics([DeleteTopicState(name="t0")])
    await settle()
    partitions, removed, full = await apply()
    assert not full and removed == 8 and held > 0 and not any(k[0] == doomed for k in m.partitions)

    # Broker 102 fenced: it leaves the ISRs, new leaders where it led. The partitions held here change.
    await ctl.broker_heartbeat(HeartbeatRequest(102, epochs[102], -1, want_fence=True))
    await settle()
    news = await image.read()
    assert not news.full and news.brokers is not None and news.brokers[102].fenced
    m.apply_updates(news.partitions, news.removed, news.brokers)
    assert manager_state(m) == manager_state(await full_read(image))

    # A snapshot load replaces the image's maps: everything is read again. A topic deleted before it, not read as a
    # delta, is gone from the full read: its replicas here are dropped.
    # Broker 103 fenced too, not read as a delta either: the full read applies those partitions, and passes over
    # the others, held here as the reloaded image has them (not read for them).
    doomed = standby.replication.topics_by_name["t1"]
    assert any(k[0] == doomed for k in m.partitions)
    await ctl.delete_topics([DeleteTopicState(name="t1")])
    await ctl.broker_heartbeat(HeartbeatRequest(103, epochs[103], -1, want_fence=True))
    await settle()
    snapshot_id = await ctl.force_snapshot()
    assert snapshot_id is not None
    standby.handle_load_snapshot(ctl.raft.reader(snapshot_id))  # type: ignore[attr-defined]
    now = standby.replication.partitions.committed()
    moved = {
        k
        for k, p in m.partitions.items()
        if k in now and (now[k].leader_epoch, now[k].partition_epoch) != (p.seen_leader_epoch, p.seen_partition_epoch)
    }
    built = []
    read_all = ImageMetadata.read_all

    async def recording(self: ImageMetadata, held):  # type: ignore[no-untyped-def]
        async for updates in read_all(self, held):
            built.extend(key for key, _, _ in updates)
            yield updates

    monkeypatch.setattr(ImageMetadata, "read_all", recording)
    partitions, removed, full = await apply()
    assert full and 0 < len(moved) == partitions == len(built) and set(built) == moved
    monkeypatch.undo()
    assert manager_state(m) == manager_state(await full_read(image))
    assert not any(k[0] == doomed for k in m.partitions)
    # Keyed by the reloaded image's tuples now, not the ones the load replaced (they would double every key).
    image_keys = {k: k for k in standby.replication.partitions.committed()}
    assert all(image_keys[k] is k and p.key is k for k, p in m.partitions.items())
    assert all(k is image_keys[k] for followed in m._by_leader.values() for k in followed)


async def test_a_snapshot_load_during_a_delta_read_drops_no_replica(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delta read yields to the loop between slices; a snapshot load then replaces the image's maps and empties
    the old ones. The rest of the read takes the new maps: a partition still there is not reported removed (its
    replica here would be dropped, and made again with a fresh log by the full read that follows)."""
    monkeypatch.setattr(ImageMetadata, "SLICE", 2)
    log = SharedLog()
    standby, _ = await start_controller(log, 2)
    ctl, _, epochs = await active_cluster(log, BROKERS, topics=[NewTopic("t", 8, 4)])  # every partition held here
    image = ImageMetadata(standby, ME)
    m = ReplicaManager(ME, ReplicaConfig(), clock=lambda: 0, broker_epoch=lambda: epochs[ME])
    await apply_image(image, m)
    held = set(m.partitions)
    assert len(held) == 8
    await ctl.broker_heartbeat(HeartbeatRequest(102, epochs[102], -1, want_fence=True))  # every ISR changes
    await settle()
    snapshot_id = await ctl.force_snapshot()
    assert snapshot_id is not None
    loaded = []

    async def sleep(_: float) -> None:  # the first yield of the read: the snapshot is installed then
        if not loaded:
            loaded.append(snapshot_id)
            standby.handle_load_snapshot(ctl.raft.reader(snapshot_id))  # type: ignore[attr-defined]

    monkeypatch.setattr(image_metadata, "asyncio", SimpleNamespace(sleep=sleep))
    news, _ = await apply_image(image, m)
    assert loaded and not news.full and news.removed == [] and len(news.partitions) == 8
    assert set(m.partitions) == held


async def test_a_delta_lists_partitions_in_the_order_they_were_created() -> None:
    """Every broker applies new partitions in creation order, so a leader and its followers create a partition at
    about the same point of their own progress (in hash order, a follower's copy could come seconds after the
    leader started counting its lag, and it was shrunk out of the ISR)."""
    log = SharedLog()
    standby, _ = await start_controller(log, 2)
    ctl, _, _ = await active_cluster(log, BROKERS, topics=[NewTopic("first", 1, 2)])
    image = ImageMetadata(standby, ME)
    await image.read()  # the first, full read
    names = [f"t{i:02d}" for i in range(30)]
    for name in names:
        await ctl.create_topics([NewTopic(name, 4, 4)])  # all four brokers hold every partition
    await ctl.delete_topics([DeleteTopicState(name="first")])
    await settle()
    news = await image.read()
    assert not news.full and len(news.removed) == 1
    assert [(name, key[1]) for key, name, _ in news.partitions] == [(n, i) for n in names for i in range(4)]


async def test_a_large_delta_is_applied_in_slices_that_yield_to_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker that caught up on many records reads a delta of many partitions: applied at once it would hold the
    loop (its Raft fetches, its followers' fetches) for seconds. It goes APPLY_SLICE partitions at a time, the
    broker list with the first, removals last, and ends as a full read would."""
    monkeypatch.setattr(image_metadata, "APPLY_SLICE", 3)
    log = SharedLog()
    standby, _ = await start_controller(log, 2)
    ctl, _, epochs = await active_cluster(log, BROKERS, topics=[NewTopic("old", 2, 4)])
    image = ImageMetadata(standby, ME)
    m = ReplicaManager(ME, ReplicaConfig(), clock=lambda: 0, broker_epoch=lambda: epochs[ME])
    await apply_image(image, m)
    await ctl.create_topics([NewTopic("new", 10, 4)])  # every partition held here
    await ctl.delete_topics([DeleteTopicState(name="old")])
    await ctl.broker_heartbeat(HeartbeatRequest(102, epochs[102], -1, want_fence=True))
    await settle()
    steps: list[object] = []
    apply_updates = m.apply_updates

    def recording(changed, removed, brokers=None):  # type: ignore[no-untyped-def]
        steps.append((len(list(changed)), len(list(removed)), brokers is not None))
        return apply_updates(changed, removed, brokers)

    async def sleep(_: float) -> None:
        steps.append("yield")

    monkeypatch.setattr(m, "apply_updates", recording)
    monkeypatch.setattr(image_metadata, "asyncio", SimpleNamespace(sleep=sleep))
    news, _ = await apply_image(image, m)
    assert not news.full and len(news.partitions) == 10 and len(news.removed) == 2
    sliced = [(3, 0, True), "yield", (3, 0, False), "yield", (3, 0, False), "yield", (1, 0, False), (0, 2, False)]
    assert steps == sliced
    monkeypatch.undo()
    assert manager_state(m) == manager_state(await full_read(image))
