"""Partition sizes, Kafka's replication throttles and the disk rate in the brokers' simulated data plane, on a virtual
clock through ReplicaManager and Partition; the throttle configs as the metadata poll reads them; DescribeReplicas
over gRPC on loopback; the brokers' Prometheus metrics."""

from __future__ import annotations

import argparse
import urllib.request
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry
from structlog.testing import capture_logs

from controller.requests import ConfigEntry, ConfigResourceType, DescribeConfigsResult
from controller.results import ApiError
from pykraft.broker import add_arguments, replica_config
from pykraft.broker_metrics import broker_registry, serve_broker_metrics
from pykraft.replica.data_plane import DataPlane, describe_replicas
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import MESSAGE_BYTES, BrokerState, FetchItem, PartitionMetadata, ReplicaConfig
from pykraft.replica.throttle import UNLIMITED, ThrottledReplicas, TokenBucket
from pykraft.testing import free_ports
from quorum.errors import Errors
from quorum.fault import LoggingFaultHandler
from quorum.log.message import Uuid

MIB = 1 << 20
T = Uuid.random()  # topic "t"
U = Uuid.random()  # topic "u"
BROKERS = (1, 2, 3, 4)
EPOCHS = {b: 10 + b for b in BROKERS}


def moving(
    topic_id: Uuid = T, topic: str = "t", index: int = 0, isr: tuple[int, ...] = (1, 2, 3), epoch: int = 1
) -> PartitionMetadata:
    """[1, 2, 3] -> [2, 3, 4], as the controller shows it mid-reassignment: the target replicas then those being
    removed; 4 being added, 1 being removed; 1 still leads."""
    return PartitionMetadata(topic_id, topic, index, 1, 0, epoch, (2, 3, 4, 1), isr, 0, (4,), (1,))


def still(topic_id: Uuid = U, topic: str = "u", index: int = 0, isr: tuple[int, ...] = (1, 2, 3)) -> PartitionMetadata:
    return PartitionMetadata(topic_id, topic, index, 1, 0, 0, (1, 2, 3), isr)


class Net:
    """Four brokers' ReplicaManagers on one virtual clock. Each follower fetches from each leader again at once while
    behind, else after the manager's fetch delay; ISR changes are recorded, not sent."""

    STEP = 10

    def __init__(self, partitions: list[PartitionMetadata], **configs: ReplicaConfig) -> None:
        self.now = 0
        self.changes: list = []
        self.managers: dict[int, ReplicaManager] = {}
        default = configs.get("default", ReplicaConfig(initial_partition_bytes=8 * MIB))
        for b in BROKERS:
            m = ReplicaManager(
                b, configs.get(f"b{b}", default), clock=lambda: self.now, broker_epoch=lambda b=b: EPOCHS[b]
            )
            m.submit = self.changes.append
            self.managers[b] = m
        self.apply(partitions)
        self.next_fetch: dict[tuple[int, int], int] = {}

    def apply(self, partitions: list[PartitionMetadata]) -> None:
        brokers = {b: BrokerState(e, False, False, None) for b, e in EPOCHS.items()}
        for m in self.managers.values():
            m.apply_metadata(partitions, brokers)

    def step(self) -> None:
        self.now += self.STEP
        for b, m in self.managers.items():
            for leader in sorted(m.followed_leaders()):
                if self.now < self.next_fetch.get((b, leader), 0):
                    continue
                batch = m.fetch_batch(leader)
                behind = False
                if batch:
                    items = [
                        (i.partition.topic_id, i.partition.index, i.fetch_offset, i.leader_epoch, i.max_bytes)
                        for i in batch
                    ]
                    answers = self.managers[leader].answer_fetch(b, EPOCHS[b], 10 * MIB, items)
                    behind = m.on_fetch_answers(batch, {(t, i): a for t, i, a in answers})
                self.next_fetch[(b, leader)] = self.now if behind else self.now + m.fetch_delay_ms(leader)

    def run_until(self, condition: Callable[[], bool], limit_ms: int) -> int:
        start = self.now
        while not condition():
            assert self.now - start < limit_ms, f"not within {limit_ms} ms"
            self.step()
        return self.now - start

    def leo(self, broker: int, topic_id: Uuid = T, index: int = 0) -> int:
        return self.managers[broker].partitions[(topic_id, index)].log_end_offset

    def copied(self, broker: int = 4, topic_id: Uuid = T, index: int = 0) -> Callable[[], bool]:
        return lambda: self.leo(broker, topic_id, index) >= self.leo(1, topic_id, index)


def throttle(m: ReplicaManager, leader: int = UNLIMITED, follower: int = UNLIMITED, **topics: tuple) -> None:
    """Set the rates and, per topic, (leader replicas, follower replicas), as the config poll would."""
    m.throttles.set_rates(leader, follower, m.clock())
    for topic, (lead, follow) in topics.items():
        m.throttles.set_topic(topic, lead, follow)


# -- partition sizes ------------------------------------------------------------------------------------------------


def test_an_adding_replica_starts_empty_and_copies_the_leaders_log() -> None:
    net = Net([moving()])
    assert [net.leo(b) for b in BROKERS] == [8 * MIB // MESSAGE_BYTES] * 3 + [0]
    leader = net.managers[1].partitions[(T, 0)]
    assert leader.high_watermark == 8192 and leader.adding == (4,) and leader.removing == (1,)
    assert leader.is_reassigning and net.managers[4].partitions[(T, 0)].is_adding_local
    net.run_until(net.copied(), 10_000)
    assert net.leo(4) == 8192
    # It joins the ISR at its next fetch (from the high watermark), through AlterPartition.
    net.run_until(lambda: bool(net.changes), 1000)
    assert [c.members for c in net.changes] == [(1, 2, 3, 4)]
    c1, c4 = net.managers[1].counters, net.managers[4].counters
    assert c4.reassignment_bytes_in == c4.replication_bytes_in == 8 * MIB
    assert c1.reassignment_bytes_out == c1.replication_bytes_out == 8 * MIB
    assert net.managers[2].counters.replication_bytes_in == 0  # the original followers had it all already
    # Seen again (a later poll), the replica keeps what it copied; a replica the broker already holds is not reset.
    net.apply([moving(isr=(1, 2, 3, 4), epoch=2)])
    assert net.leo(4) == 8192


def test_a_partition_seen_first_outside_a_reassignment_starts_full_everywhere() -> None:
    net = Net([still()])
    assert {net.leo(b, U) for b in (1, 2, 3)} == {8192}
    assert (U, 0) not in net.managers[4].partitions


# -- follower throttle ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "rate"),
    [(8 * MIB, MIB), (2 * MIB, 100 * 1024)],  # the second below replica.fetch.max.bytes per second
    ids=["1MiB/s", "100KiB/s"],
)
def test_a_follower_throttle_makes_the_copy_take_size_over_rate(size: int, rate: int) -> None:
    net = Net([moving()], default=ReplicaConfig(initial_partition_bytes=size))
    throttle(net.managers[4], follower=rate, t=("", "0:4"))
    took = net.run_until(net.copied(), 10 * size // rate * 1000)
    assert took == pytest.approx(size / rate * 1000, rel=0.15)
    t = net.managers[4].throttles
    assert t.counters.follower_throttled_bytes == size and t.counters.follower_skips > 0
    # Once in the ISR the replica is no longer throttled (Kafka throttles only replicas out of it).
    net.apply([moving(isr=(1, 2, 3, 4), epoch=2)])
    assert not net.managers[4].follower_throttled(net.managers[4].partitions[(T, 0)])


def test_a_follower_throttle_listing_another_broker_or_partition_does_not_apply() -> None:
    net = Net([moving()])
    throttle(net.managers[4], follower=MIB, t=("", "0:3,1:4"))
    took = net.run_until(net.copied(), 10_000)
    assert took < 1000  # unthrottled: 8 fetches of 1 MiB back to back


# -- leader throttle ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("listing", ["0:1", "*", " 0:1 , 0:2"])
def test_a_leader_throttle_makes_the_copy_take_size_over_rate(listing: str) -> None:
    net = Net([moving()])
    rate = 512 * 1024
    throttle(net.managers[1], leader=rate, t=(listing, ""))
    took = net.run_until(net.copied(), 60_000)
    assert took == pytest.approx(8 * MIB / rate * 1000, rel=0.15)
    t = net.managers[1].throttles
    assert t.counters.leader_throttled_bytes == 8 * MIB and t.counters.leader_holds > 0


def test_a_spent_leader_quota_answers_with_no_records_and_no_error() -> None:
    net = Net([moving(), still()])
    throttle(net.managers[1], leader=MIB, t=("*", ""), u=("*", ""))
    net.now = 1000  # a second's worth in the bucket
    items = [(T, 0, 0, 0, MIB), (U, 0, 8192, 0, MIB)]
    [(_, _, first), _] = net.managers[1].answer_fetch(4, EPOCHS[4], 10 * MIB, items)
    assert (first.error, first.records_end_offset) == (Errors.NONE, 1024)
    [(_, _, held)] = net.managers[1].answer_fetch(4, EPOCHS[4], 10 * MIB, items[:1])
    assert (held.error, held.records_end_offset, held.log_end_offset) == (Errors.NONE, 0, 8192)
    assert net.managers[1].throttles.counters.leader_holds == 1
    # A follower given nothing waits replica.fetch.wait.max.ms rather than asking again at once.
    follower = net.managers[4]
    [item] = follower.fetch_batch(1)
    assert not follower.on_fetch_answers([item], {(T, 0): held})


def test_throttled_replicas_parse_kafkas_lists() -> None:
    assert ThrottledReplicas.parse("*").covers(7, 123)
    r = ThrottledReplicas.parse(" 0:101, 1:102 ,2:101,bad,3:x")
    assert r.covers(0, 101) and r.covers(1, 102) and r.covers(2, 101)
    assert not r.covers(0, 102) and not r.covers(3, 101)
    assert r.partitions_of(101) == [0, 2]
    assert not ThrottledReplicas.parse("") and not ThrottledReplicas.parse(None)
    assert ThrottledReplicas.parse("0:1,*") == ThrottledReplicas(entries=frozenset({(0, 1)}))  # "*" only alone


def test_token_bucket_rate_burst_debt_and_wait() -> None:
    b = TokenBucket(1000, now_ms=0, min_burst=0)
    assert b.available(0) == 0  # a bucket that becomes limited starts empty
    assert b.available(500) == 500 and b.available(5000) == 1000  # one second of burst
    b.take(1500, 5000)
    assert b.available(5000) == 0 and b.wait_ms(100, 5000) == 601
    b.give_back(200)
    assert b.available(5000) == 0 and b.tokens == -300
    b.set_rate(UNLIMITED, 5000)
    assert b.unlimited and b.available(5000) == UNLIMITED and b.wait_ms(10**9, 5000) == 0


# -- what throttles never touch -------------------------------------------------------------------------------------


def test_an_in_sync_replica_is_never_throttled() -> None:
    """A follower in the ISR fetches at full size even when listed on both sides and both quotas are spent."""
    fast = ReplicaConfig(produce_rate=5000, initial_partition_bytes=MIB)
    net = Net([still()], default=fast)
    throttle(net.managers[1], leader=10 * 1024, u=("*", "*"))
    throttle(net.managers[2], follower=10 * 1024, u=("*", "*"))
    net.run_until(lambda: net.now >= 10_000, 20_000)
    p1 = net.managers[1].partitions[(U, 0)]
    assert p1.leo(net.now) == 1024 + 50_000
    assert p1.leo(net.now) - net.leo(2, U) <= 5000 * 0.5 + 1  # at most a fetch wait's production behind
    assert not net.managers[2].follower_throttled(net.managers[2].partitions[(U, 0)])
    assert not net.managers[1].throttled(p1)
    [item] = net.managers[2].fetch_batch(1)
    assert item.max_bytes == ReplicaConfig().replica_fetch_max_bytes
    # Their bytes still count against the quotas (Kafka records a listed partition's traffic, in the ISR or not).
    assert net.managers[2].throttles.follower.available(net.now) == 0
    assert net.managers[1].throttles.leader.available(net.now) == 0
    assert net.managers[1].throttles.counters.leader_holds == 0


def test_unthrottled_partitions_move_at_full_speed_beside_a_throttled_one() -> None:
    """Two partitions move to broker 4 from broker 1: t-0 is throttled at 1 MiB/s, u-0 is not listed."""
    u_moving = moving(U, "u")
    net = Net([moving(), u_moving])
    throttle(net.managers[4], follower=MIB, t=("", "0:4"))
    fast = net.run_until(net.copied(4, U), 10_000)
    assert fast < 1000
    slow = fast + net.run_until(net.copied(4, T), 20_000)
    assert slow == pytest.approx(8000, rel=0.15)
    assert net.managers[4].throttles.counters.follower_throttled_bytes == 8 * MIB


def test_the_disk_rate_bounds_all_follower_appends() -> None:
    """No throttles, a 2 MiB/s disk on broker 4: two partitions of 8 MiB take 8 s together."""
    net = Net([moving(), moving(U, "u")], b4=ReplicaConfig(initial_partition_bytes=8 * MIB, disk_rate=2 * MIB))
    took = net.run_until(lambda: net.copied(4, T)() and net.copied(4, U)(), 30_000)
    assert took == pytest.approx(8000, rel=0.15)
    # Both moved together, neither starved: halfway through each had about half.
    assert net.managers[4].counters.replication_bytes_in == 16 * MIB
    assert net.managers[4].throttles.counters.disk_holds > 0


def test_the_disk_rate_shares_fairly_between_partitions() -> None:
    net = Net([moving(), moving(U, "u")], b4=ReplicaConfig(initial_partition_bytes=8 * MIB, disk_rate=2 * MIB))
    net.run_until(lambda: net.now >= 4000, 5000)
    assert net.leo(4, T) == pytest.approx(4096, rel=0.25) and net.leo(4, U) == pytest.approx(4096, rel=0.25)


def test_a_reservation_is_given_back_when_the_fetch_fails() -> None:
    net = Net([moving()], b4=ReplicaConfig(disk_rate=MIB, initial_partition_bytes=8 * MIB))
    throttle(net.managers[4], follower=MIB, t=("", "*"))
    net.now = 1000
    m = net.managers[4]
    [item] = m.fetch_batch(1)
    assert isinstance(item, FetchItem) and item.max_bytes == MIB == item.disk_reserved == item.follower_reserved
    assert m.fetch_batch(1) == [] and m.fetch_delay_ms(1) > 0  # spent: left out, wait for the refill
    m.fetch_failed([item])
    assert m.throttles.follower.available(1000) == MIB and m.throttles.disk.available(1000) == MIB


def test_broker_options_make_the_replica_config() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        "--broker-id 4 --bootstrap-server x:1 --initial-partition-bytes 5000 --disk-rate 2000000".split()
    )
    config = replica_config(args)
    assert (config.initial_partition_bytes, config.initial_messages, config.disk_rate) == (5000, 4, 2_000_000)
    assert args.metrics_port == 0
    defaults = replica_config(parser.parse_args("--broker-id 4 --bootstrap-server x:1".split()))
    assert (defaults.initial_partition_bytes, defaults.disk_rate) == (0, None)
    with pytest.raises(ValueError, match="disk rate"):
        ReplicaConfig(disk_rate=0)
    with pytest.raises(ValueError, match="initial partition bytes"):
        ReplicaConfig(initial_partition_bytes=-1)


# -- the configs, as the metadata poll reads them -------------------------------------------------------------------


class ConfigAdmin:
    """describe_configs answering from dicts, remembering what was asked."""

    def __init__(self) -> None:
        self.broker: dict[str, str] = {}
        self.topics: dict[str, dict[str, str]] = {}
        self.asked: list[list[tuple[int, str]]] = []

    async def describe_configs(self, resources, *, timeout_ms=None):  # type: ignore[no-untyped-def]
        self.asked.append([(r.resource_type, r.resource_name) for r in resources])
        out = []
        for r in resources:
            if r.resource_type == ConfigResourceType.BROKER:
                values = {k: self.broker.get(k, str(UNLIMITED)) for k in r.keys}
            elif r.resource_name in self.topics:
                values = {k: self.topics[r.resource_name].get(k, "") for k in r.keys}
            else:
                out.append(
                    DescribeConfigsResult(r.resource_type, r.resource_name, ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION))
                )
                continue
            out.append(
                DescribeConfigsResult(
                    r.resource_type, r.resource_name, configs=tuple(ConfigEntry(k, v, 5) for k, v in values.items())
                )
            )
        return out


async def test_the_poll_reads_the_broker_rates_and_only_the_topics_that_move() -> None:
    admin = ConfigAdmin()
    plane = DataPlane(4, ("127.0.0.1", 0), admin, lambda: EPOCHS[4], ReplicaConfig(), LoggingFaultHandler())  # type: ignore[arg-type]
    quiet = [still(), PartitionMetadata(T, "t", 0, 4, 0, 0, (4, 1, 2), (4, 1, 2))]
    plane.manager.apply_metadata(quiet, {})
    await plane.poll_configs()
    assert admin.asked == [[(ConfigResourceType.BROKER, "4")]]  # nothing moves: the broker's rates only
    admin.broker = {"follower.replication.throttled.rate": "1048576"}
    admin.topics = {
        "t": {"follower.replication.throttled.replicas": "0:4,0:5", "leader.replication.throttled.replicas": "0:1"}
    }
    plane.manager.apply_metadata([*quiet, moving()], {})
    with capture_logs() as logs:
        await plane.poll_configs()
    assert admin.asked[-1] == [(ConfigResourceType.BROKER, "4"), (ConfigResourceType.TOPIC, "t")]
    t = plane.manager.throttles
    assert t.follower.rate == MIB and t.leader.unlimited
    assert t.follower_listed("t", 0) and not t.leader_listed("t", 0)  # "0:1" names another broker
    events = {(e["event"], e["config"]) for e in logs}
    assert events == {
        ("replication_throttle_rate_changed", "follower.replication.throttled.rate"),
        ("replication_throttled_replicas_changed", "follower.replication.throttled.replicas"),
    }
    with capture_logs() as logs:
        await plane.poll_configs()  # the same again: nothing logged
    assert logs == []
    admin.topics = {}  # a topic deleted meanwhile: its error keeps what was known
    await plane.poll_configs()
    assert t.follower_listed("t", 0)


# -- DescribeReplicas -------------------------------------------------------------------------------------------


async def test_describe_replicas_over_grpc() -> None:
    [port] = free_ports(1)
    config = ReplicaConfig(initial_partition_bytes=MIB)
    plane = DataPlane(1, ("127.0.0.1", port), None, lambda: EPOCHS[1], config, LoggingFaultHandler())  # type: ignore[arg-type]
    plane.manager.apply_metadata(
        [moving(), still()], {b: BrokerState(e, False, False, None) for b, e in EPOCHS.items()}
    )
    throttle(plane.manager, leader=MIB, t=("*", ""))
    try:
        assert await plane.start_server()
        replicas = await describe_replicas(("127.0.0.1", port))
        assert [(r.topic, r.partition) for r in replicas] == [("t", 0), ("u", 0)]
        t0, u0 = replicas
        assert (t0.broker_id, t0.topic_id, t0.size_bytes, t0.log_end_offset, t0.high_watermark) == (
            1,
            T,
            MIB,
            1024,
            1024,
        )
        assert t0.is_leader and t0.in_isr and t0.throttled  # 4 is out of the ISR and listed for the leader
        assert not u0.throttled
        [only] = await describe_replicas(("127.0.0.1", port), partitions=[(U, 0), (U, 9)])
        assert only.topic_id == U
    finally:
        await plane.stop()
    with pytest.raises(Exception, match="did not answer DescribeReplicas") as e:
        await describe_replicas(("127.0.0.1", port), timeout_s=0.5)
    assert e.value.code in (Errors.BROKER_NOT_AVAILABLE, Errors.REQUEST_TIMED_OUT)  # type: ignore[attr-defined]


# -- metrics --------------------------------------------------------------------------------------------------------


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_broker_metrics_during_a_throttled_move() -> None:
    net = Net([moving(), still()])
    throttle(net.managers[1], leader=MIB, t=("0:1", ""))
    throttle(net.managers[4], follower=MIB, t=("", "0:4"))
    leader, adder = broker_registry(net.managers[1]), broker_registry(net.managers[4])
    net.run_until(lambda: net.now >= 2000, 3000)
    b1, b4 = {"broker_id": "1"}, {"broker_id": "4"}
    assert sample(leader, "kafka_server_replicamanager_reassigning_partitions", **b1) == 1
    assert sample(leader, "kafka_server_replicamanager_leader_count", **b1) == 2
    assert sample(leader, "kafka_server_replicamanager_partition_count", **b1) == 2
    assert sample(leader, "kafka_server_replicamanager_under_replicated_partitions", **b1) == 0
    assert sample(adder, "kafka_server_replication_throttled_partitions", side="follower", **b4) == 1
    assert sample(leader, "kafka_server_replication_throttled_partitions", side="leader", **b1) == 1
    assert sample(adder, "kafka_server_replication_throttle_rate_bytes", side="follower", **b4) == MIB
    assert sample(adder, "kafka_server_replication_throttle_rate_bytes", side="disk", **b4) == float("inf")
    moved = sample(adder, "kafka_server_brokertopicmetrics_reassignment_bytes_in_total", **b4)
    assert moved == sample(leader, "kafka_server_brokertopicmetrics_reassignment_bytes_out_total", **b1)
    assert moved == pytest.approx(2 * MIB, rel=0.15)
    size = sample(adder, "kafka_log_log_size", topic="t", partition="0", **b4)
    assert size == moved


def test_broker_metrics_are_served_over_http() -> None:
    net = Net([still()])
    [port] = free_ports(1)
    server = serve_broker_metrics(net.managers[1], "127.0.0.1", port)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    assert 'kafka_server_replicamanager_leader_count{broker_id="1"} 1.0' in text
    assert "kafka_server_brokertopicmetrics_replication_bytes_in_total" in text
