"""A broker reads its throttle configs from its image in place (pykraft.replica.throttle_configs), and only what may
have changed (issue 14): the same throttles as DescribeConfigs gives, at a cost that follows change — no topic read
when only the metadata changed, the newly watched topics only when some became watched, all again when the configs
changed or a snapshot load replaced them."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

sys.path.append(str(Path(__file__).parent / "controller"))  # the controller tests' fakes, read not copied

from ctl_helpers import SharedLog, active_cluster, quiet_settings, settle, start_controller

from controller.cluster_control import HeartbeatRequest
from controller.config_control import ConfigControl
from controller.configs import BROKER_RESOURCE, TOPIC_CONFIG_SYNONYMS, TOPIC_RESOURCE
from controller.records import ConfigRecord
from controller.replication_control import NewTopic
from controller.requests import AlterableConfig, AlterConfigOp, AlterConfigsResource
from controller.timeline import Timeline
from pykraft.replica.data_plane import DataPlane
from pykraft.replica.partition import PartitionMetadata, ReplicaConfig
from pykraft.replica.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    TOPIC_KEYS,
)
from quorum.fault import LoggingFaultHandler
from quorum.log.message import Uuid

ME = 4


class DescribingAdmin:
    """The old path: describe_configs of the same config state, as the image answered it."""

    def __init__(self, control: ConfigControl) -> None:
        self.control = control

    async def describe_configs(self, resources: Any, *, timeout_ms: Any = None) -> Any:
        return self.control.describe_configs(list(resources), committed=True)


def fake_image(control: ConfigControl) -> Any:
    return SimpleNamespace(configs=control)  # what the reader and the plane's poll_configs read of an image


def plane(admin: Any = None, image: Any = None) -> DataPlane:
    return DataPlane(ME, ("127.0.0.1", 0), admin, lambda: 1, ReplicaConfig(), LoggingFaultHandler(), image=image)


def topic_id(name: str) -> Uuid:
    return Uuid(name.encode().ljust(16, b"\0")[:16])


def partitions(watched: set[str], quiet: set[str]) -> list[PartitionMetadata]:
    """One partition per topic, held here: out of its ISR in ``watched`` topics, in it in ``quiet`` ones."""
    out = []
    for name in sorted(watched | quiet):
        isr = (1, 2) if name in watched else (1, 2, ME)
        out.append(PartitionMetadata(topic_id(name), name, 0, 1, 0, 0, (1, 2, ME), isr))
    return out


def throttle_state(p: DataPlane, topics: set[str]) -> tuple[object, ...]:
    t = p.manager.throttles
    return (
        t.leader.rate,
        t.follower.rate,
        {n: v for n, v in t.leader_replicas.items() if n in topics},
        {n: v for n, v in t.follower_replicas.items() if n in topics},
    )


def record(resource_type: int, resource_name: str, name: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name, value=value)


REPLICAS_VALUES = ["*", "0:4", "0:4,0:5", " 0 : 4 ", "1:4,0:1", "0:5", "", "bogus", "0:x", "0:4,0:x", "*,0:4"]
RATE_VALUES = ["0", "1048576", "5000", "-5", "abc", str((1 << 63) - 1), " 77 "]


def test_the_throttle_replicas_have_no_broker_synonyms() -> None:
    """The reader resolves a topic's throttled replicas as its own value, else the default: true only while they
    have no broker-level synonym."""
    assert not any(k in TOPIC_CONFIG_SYNONYMS for k in TOPIC_KEYS)


@pytest.mark.parametrize("seed", range(8))
async def test_the_reads_give_what_describe_configs_gives(seed: int) -> None:
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(30)]
    existing = set(names) - set(rng.sample(names, 3))  # a few watched topics do not exist (deleted meanwhile)
    registered = {1, 2, 3, 5} | ({ME} if rng.random() < 0.8 else set())
    static = {LEADER_RATE: rng.choice(RATE_VALUES)} if rng.random() < 0.5 else {}
    timeline = Timeline()
    control = ConfigControl(
        timeline, static, topic_exists=existing.__contains__, broker_registered=registered.__contains__, node_id=99
    )
    old, new = plane(admin=DescribingAdmin(control)), plane(image=fake_image(control))
    assert old.throttle_reader is None and new.throttle_reader is not None
    watched = set(rng.sample(names, 10))
    for step in range(40):
        roll = rng.random()
        if roll < 0.35:  # a topic config set or deleted
            name = rng.choice(names)
            value = rng.choice([*REPLICAS_VALUES, None])
            control.replay(record(TOPIC_RESOURCE, name, rng.choice(TOPIC_KEYS), value))
        elif roll < 0.6:  # a broker rate, this broker's, another's or the cluster default
            broker = rng.choice([str(ME), "", "", "1"])
            value = rng.choice([*RATE_VALUES, None, None])
            control.replay(record(BROKER_RESOURCE, broker, rng.choice([LEADER_RATE, FOLLOWER_RATE]), value))
        elif roll < 0.65:
            control.delete_topic_configs(rng.choice(names))
        else:  # the metadata only: the watched topics change
            watched ^= set(rng.sample(names, rng.randint(1, 4)))
        meta = partitions(watched, set(names) - watched)
        for p in (old, new):
            p.manager.apply_metadata(meta, {})
            await p.poll_configs()
        assert throttle_state(new, watched) == throttle_state(old, watched), (seed, step)
    # Every value of the topics held stays what DescribeConfigs gives, watched or not (nothing stale).
    fresh = plane(admin=DescribingAdmin(control))
    fresh.manager.apply_metadata(partitions(set(names), set()), {})
    await fresh.poll_configs()
    kept, now = new.manager.throttles, fresh.manager.throttles
    for got, want in ((kept.leader_replicas, now.leader_replicas), (kept.follower_replicas, now.follower_replicas)):
        assert all(want.get(name) == value for name, value in got.items()), seed


async def test_the_cost_follows_what_changed() -> None:
    n = 5_000
    names = {f"topic-{i}" for i in range(n)}
    exists = set(names) | {"late", "quiet"}
    control = ConfigControl(Timeline(), topic_exists=exists.__contains__, node_id=ME)
    for name in sorted(names)[::7]:
        control.replay(record(TOPIC_RESOURCE, name, FOLLOWER_REPLICAS, "0:4"))
    p = plane(image=fake_image(control))
    reader = p.throttle_reader
    assert reader is not None

    def described(*_: Any, **__: Any) -> Any:
        raise AssertionError("the image's DescribeConfigs is not the broker's way to read its throttles")

    control.describe_configs = described  # type: ignore[method-assign]

    async def poll(watched: set[str], quiet: set[str] = frozenset()) -> int:  # type: ignore[assignment]
        before = reader.topics_read
        p.manager.apply_metadata(partitions(watched, quiet), {})
        await p.poll_configs()
        return reader.topics_read - before

    assert await poll(names) == n  # the first read: every watched topic
    assert len(p.manager.throttles.follower_replicas) == len(sorted(names)[::7])
    assert await poll(names, {"quiet"}) == 0  # the metadata changed, no topic newly watched: none read
    assert await poll(names | {"late"}) == 1  # one newly watched: that one only
    control.replay(record(TOPIC_RESOURCE, "late", LEADER_REPLICAS, "*"))
    assert await poll(names | {"late"}) == n + 1  # the configs changed: every watched topic again
    assert p.manager.throttles.leader_listed("late", 0)
    assert await poll(names) == 0  # "late" no longer watched: nothing to read
    assert await poll(names | {"late"}) == 1  # watched again: read again
    control.replay(record(TOPIC_RESOURCE, "late", LEADER_REPLICAS, None))
    assert await poll(names, {"late"}) == n + 1  # held, unwatched, its value known: read too, so it goes not stale
    assert not p.manager.throttles.leader_listed("late", 0)
    control.replay(record(BROKER_RESOURCE, "", FOLLOWER_RATE, "1000"))  # the cluster default rate
    assert await poll(names | {"late"}) == n + 1
    assert p.manager.throttles.follower.rate == 1000


# Broker 1 fenced leaves the ISRs of t0, t2, t3, t5, ...; broker 2 fenced then those of t1, t4, ... too.
TOPICS = [NewTopic(f"t{i}", assignments=((0, (ME, 1 + i % 3 % 2, 3)),)) for i in range(40)]


async def test_an_image_broker_reads_only_what_changed() -> None:
    """On a real image (a standby fed committed batches): the same throttles as its DescribeConfigs, read again only
    when the configs changed or a snapshot load replaced them. Through the old code (DescribeConfigs at every
    metadata change) the metadata-only step reads every watched topic: this test fails on it."""
    brokers = [(ME, None, False), (1, None, False), (2, None, False), (3, None, False)]
    log = SharedLog()
    standby, _ = await start_controller(log, 7, quiet_settings(serve_local_reads=True))  # as an observer
    ctl, _, epochs = await active_cluster(log, brokers, topics=TOPICS)
    await ctl.incremental_alter_configs(
        [
            AlterConfigsResource(TOPIC_RESOURCE, "t1", (AlterableConfig(FOLLOWER_REPLICAS, AlterConfigOp.SET, "*"),)),
            AlterConfigsResource(BROKER_RESOURCE, "", (AlterableConfig(LEADER_RATE, AlterConfigOp.SET, "2048"),)),
        ]
    )
    await settle()
    p = DataPlane(ME, ("127.0.0.1", 0), None, lambda: epochs[ME], ReplicaConfig(), LoggingFaultHandler(), image=standby)  # type: ignore[arg-type]
    p._sync_fetchers = lambda: None  # type: ignore[method-assign]  # no fetcher tasks: nothing is fetched here
    reads = []
    exists = standby.configs.topic_exists

    def counted(name: str) -> bool:  # one call per topic resource read, old path (describe) or new
        reads.append(name)
        return exists(name)

    standby.configs.topic_exists = counted

    async def apply() -> int:
        reads.clear()
        await p._apply_image()
        return len(reads)

    async def same_as_describe() -> None:
        old = plane(admin=SimpleNamespace(describe_configs=standby.describe_configs))
        watched = p.manager.topics_to_watch()
        old.manager.apply_metadata([_metadata(q) for q in p.manager.partitions.values()], {})
        assert old.manager.topics_to_watch() == watched
        await old.poll_configs()
        assert throttle_state(p, watched) == throttle_state(old, watched)

    await apply()
    assert p.manager.partitions and not p.manager.topics_to_watch()  # every ISR whole: nothing watched
    await ctl.broker_heartbeat(HeartbeatRequest(1, epochs[1], -1, want_fence=True))  # broker 1 leaves the ISRs
    await settle()
    watched = p.manager.topics_to_watch()
    assert await apply() == len(p.manager.topics_to_watch()) > len(watched) == 0
    watched = p.manager.topics_to_watch()
    assert p.manager.throttles.leader.rate == 2048
    await same_as_describe()

    await ctl.create_topics([NewTopic("quiet", 1, 3)])  # held here, its ISR whole: the metadata only
    await settle()
    assert await apply() == 0 and p.manager.topics_to_watch() == watched and "quiet" in _topics(p)

    await ctl.broker_heartbeat(HeartbeatRequest(2, epochs[2], -1, want_fence=True))  # more topics watched
    await settle()
    newly = await apply()
    assert newly == len(p.manager.topics_to_watch() - watched) > 0
    watched = p.manager.topics_to_watch()

    await ctl.incremental_alter_configs(
        [AlterConfigsResource(TOPIC_RESOURCE, "t2", (AlterableConfig(LEADER_REPLICAS, AlterConfigOp.SET, "*"),))]
    )
    await settle()
    assert await apply() == len(watched)  # the configs changed: every watched topic read again
    await same_as_describe()

    snapshot_id = await ctl.force_snapshot()
    assert snapshot_id is not None
    standby.handle_load_snapshot(ctl.raft.reader(snapshot_id))  # type: ignore[attr-defined]
    exists = standby.configs.topic_exists  # a new ConfigControl: count its reads too
    standby.configs.topic_exists = counted
    assert await apply() == len(p.manager.topics_to_watch())  # another config map: all read again
    await same_as_describe()
    assert await apply() == 0
    await standby.close()
    await ctl.close()


def _topics(p: DataPlane) -> set[str]:
    return {q.topic for q in p.manager.partitions.values()}


def _metadata(q: Any) -> PartitionMetadata:
    return PartitionMetadata(
        q.key[0],
        q.topic,
        q.key[1],
        q.leader,
        q.leader_epoch,
        q.partition_epoch,
        tuple(q.replicas),
        tuple(q.isr),
        q.leader_recovery_state,
        tuple(q.adding),
        tuple(q.removing),
    )
