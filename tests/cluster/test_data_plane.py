"""The broker agents' simulated data plane, in process: Kafka's caught-up, ISR shrink and expand decisions with a
virtual clock, the answers to AlterPartition, the batching AlterPartition sender, brokers replicating through a
fake controller, and one fetch over gRPC on loopback.

The process-level scenarios (a paused broker shrunk out of the ISRs and back, kill -9 and restart) are in
tests/e2e/test_data_plane_cluster.py.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from controller.requests import (
    AlterPartitionResponse,
    AlterPartitionResult,
    AlterPartitionTopic,
    DescribeConfigsResult,
    LeaderRecoveryState,
)
from controller.results import NO_ERROR, ApiError
from pykraft.client import AdminError, BrokerInfo, ClusterDescription, PartitionInfo, TopicDescription
from pykraft.replica import data_plane, session_fetching
from pykraft.replica.alter_partition import AlterPartitionSender
from pykraft.replica.data_plane import DataPlane
from pykraft.replica.manager import ReplicaManager, under_replicated
from pykraft.replica.partition import (
    MESSAGE_BYTES,
    BrokerState,
    BrokerView,
    ChangeKind,
    FetchAnswer,
    Partition,
    PartitionMetadata,
    ReplicaConfig,
    ReplicaState,
)
from pykraft.replica.session_fetching import SessionFetch, drain
from pykraft.testing import free_ports
from quorum.errors import Errors
from quorum.fault import LoggingFaultHandler
from quorum.log.message import Uuid

LAG_MS = 2000
TOPIC = Uuid.random()
EPOCHS = {1: 11, 2: 12, 3: 13}  # broker epochs
CONFIG = ReplicaConfig(produce_rate=10.0, replica_lag_time_max_ms=LAG_MS)


def view(**fenced: bool) -> BrokerView:
    return BrokerView({b: BrokerState(e, fenced.get(f"b{b}", False), False, None) for b, e in EPOCHS.items()})


def meta(leader: int = 1, leader_epoch: int = 0, partition_epoch: int = 0, isr=(1, 2, 3), **kw) -> PartitionMetadata:
    return PartitionMetadata(TOPIC, "t", 0, leader, leader_epoch, partition_epoch, (1, 2, 3), tuple(isr), **kw)


def leader_partition(now: int = 0, isr=(1, 2, 3), config: ReplicaConfig = CONFIG) -> Partition:
    p = Partition(TOPIC, "t", 0, 1, config)
    assert p.apply_metadata(meta(isr=isr), now, EPOCHS[1]) is None
    return p


def fetch(p: Partition, replica: int, offset: int, now: int, brokers: BrokerView | None = None, epoch: int = 0):
    return p.answer_fetch(replica, EPOCHS[replica], offset, epoch, 1 << 20, now, brokers or view(), EPOCHS[1])


# -- Kafka's Replica.updateFetchState --------------------------------------------------------------------------


def test_caught_up_time_follows_kafkas_rules() -> None:
    r = ReplicaState(2)
    r.update_fetch_state(fetch_offset=10, now_ms=1000, leader_leo=10, broker_epoch=12)
    assert r.last_caught_up_time_ms == 1000  # read up to the leader's LEO now
    r.update_fetch_state(fetch_offset=10, now_ms=1500, leader_leo=15, broker_epoch=12)
    # Not at the current LEO (15), but at the LEO of the previous fetch (10): caught up as of that fetch.
    assert r.last_caught_up_time_ms == 1000
    r.update_fetch_state(fetch_offset=15, now_ms=2000, leader_leo=20, broker_epoch=12)
    assert r.last_caught_up_time_ms == 1500
    r.update_fetch_state(fetch_offset=16, now_ms=2500, leader_leo=25, broker_epoch=12)
    assert r.last_caught_up_time_ms == 1500  # below both: unchanged
    assert r.log_end_offset == 16 and r.last_fetch_leader_leo == 25
    assert r.is_caught_up(leader_leo=25, now_ms=1500 + LAG_MS, max_lag_ms=LAG_MS)
    assert not r.is_caught_up(leader_leo=25, now_ms=1501 + LAG_MS, max_lag_ms=LAG_MS)
    assert r.is_caught_up(leader_leo=16, now_ms=10**9, max_lag_ms=LAG_MS)  # same LEO as the leader: always


def test_a_steadily_fetching_follower_stays_caught_up_although_always_behind() -> None:
    """At a steady produce rate a follower's fetch offset is always below the leader's LEO, yet it reads up to the
    LEO of the previous fetch: it stays in the ISR (the reason for Kafka's second rule)."""
    p = leader_partition()
    offset = 0
    for t in range(0, 60_000, 500):
        answer, _ = fetch(p, 2, offset, t)
        assert answer.error == Errors.NONE
        offset = answer.records_end_offset
        _, _ = fetch(p, 3, offset, t)
        assert p.out_of_sync(t) == []
    assert offset == 595 and p.leo(60_000) == 600  # the LEO of the last fetch, at 59 500 ms


# -- shrink ------------------------------------------------------------------------------------------------------


def test_a_follower_that_stops_fetching_is_shrunk_after_the_lag_time() -> None:
    p = leader_partition()
    for t in range(0, 5000, 500):  # both followers fetch every 500 ms
        fetch(p, 2, fetch(p, 3, p.leo(t - 500) if t else 0, t)[0].records_end_offset, t)
    # Broker 3 fetched last at 4500 reading up to the LEO of 4000: caught up as of 4000.
    assert p.out_of_sync(4000 + LAG_MS) == []
    offset2 = p.leo(4500)
    for t in range(5000, 7000, 500):  # broker 2 goes on, 3 is silent
        offset2 = fetch(p, 2, offset2, t)[0].records_end_offset
    assert p.out_of_sync(4000 + LAG_MS) == []
    assert p.out_of_sync(4001 + LAG_MS) == [3]
    change = p.maybe_shrink(6001, EPOCHS[1])
    assert change is not None and change.kind == ChangeKind.SHRINK
    assert change.new_isr == ((1, EPOCHS[1]), (2, EPOCHS[2]))  # members with the epochs of their fetches
    assert (change.leader_epoch, change.partition_epoch, change.leader_recovery_state) == (0, 0, 0)
    assert change.detail["out_of_sync"][0]["broker"] == 3
    assert p.maybe_shrink(6500, EPOCHS[1]) is None  # one change in flight per partition
    # While it is in flight the high watermark still waits for broker 3 (the maximal ISR).
    assert p.high_watermark_now(6500, view()) == p.remotes.get(3).log_end_offset
    assert p.on_alter_result(change, 0, (1, 2), 0, 1, 6600, view())
    assert p.isr == (1, 2) and p.partition_epoch == 1 and p.pending is None
    fetch(p, 2, p.leo(6600), 6600)
    assert p.high_watermark_now(6600, view()) == p.leo(6600)  # no longer held back by 3


def test_an_idle_partition_keeps_a_silent_follower_that_has_everything() -> None:
    """Kafka: a follower whose LEO equals the leader's is caught up however long ago it fetched."""
    p = leader_partition(config=ReplicaConfig(produce_rate=0, replica_lag_time_max_ms=LAG_MS))
    fetch(p, 2, 0, 100)
    fetch(p, 3, 0, 100)
    assert p.out_of_sync(10 * LAG_MS) == []


def test_a_new_leader_shrinks_a_follower_that_never_fetches() -> None:
    p = leader_partition(now=1000)
    fetch(p, 2, 0, 1500)  # reads up to the LEO at leadership's start: caught up as of then (1000)
    fetch(p, 2, 5, 2500)  # reads up to the LEO of its previous fetch: caught up as of 1500
    assert p.out_of_sync(1000 + LAG_MS) == []  # an ISR member counts as caught up when leadership begins
    assert p.out_of_sync(1001 + LAG_MS) == [3]


# -- expand ------------------------------------------------------------------------------------------------------


def test_expand_needs_the_high_watermark_the_epoch_start_and_an_eligible_broker() -> None:
    p = Partition(TOPIC, "t", 0, 1, CONFIG)
    p.log_end_offset = 50  # the log this broker had before it became leader at epoch 3
    p.apply_metadata(meta(leader_epoch=3, isr=(1, 2)), 0, EPOCHS[1])
    assert p.epoch_start_offset == 50
    fetch(p, 2, 50, 100, epoch=3)
    assert p.high_watermark_now(100, view()) == 50
    # Broker 3 is fenced: not eligible, so it neither joins nor holds the high watermark back.
    answer, change = fetch(p, 3, 40, 200, view(b3=True), epoch=3)
    assert answer.error == Errors.NONE and change is None
    assert answer.records_end_offset == p.leo(200) == 52
    # Unfenced, but its fetch carries an old broker epoch: stale fetches are refused.
    answer, _ = p.answer_fetch(3, EPOCHS[3] - 5, 52, 3, 1 << 20, 300, view(), EPOCHS[1])
    assert answer.error == Errors.NOT_LEADER_OR_FOLLOWER
    # Below the epoch start offset: not yet.
    p.high_watermark = 30
    _, change = fetch(p, 3, 45, 300, epoch=3)
    assert change is None
    _, change = fetch(p, 3, 52, 400, epoch=3)
    assert change is not None and change.kind == ChangeKind.EXPAND
    assert change.new_isr == ((1, EPOCHS[1]), (2, EPOCHS[2]), (3, EPOCHS[3]))
    assert set(p.maximal_isr()) == {1, 2, 3}
    assert p.on_alter_result(change, 3, (1, 2, 3), 0, 1, 500, view())
    assert p.isr == (1, 2, 3)


def test_a_caught_up_follower_holds_the_high_watermark_so_it_can_join_at_a_steady_rate() -> None:
    """Kafka's maybeIncrementLeaderHW waits for caught-up eligible followers outside the ISR too; otherwise at a
    steady produce rate the high watermark (the leader's LEO) would stay ahead of any follower, which never joins."""
    p = leader_partition(isr=(1, 2))
    fetch(p, 2, 0, 0)
    offset, change, t = 0, None, 0
    while change is None:
        assert t < 5000, "broker 3 never joined the ISR"
        answer, change = fetch(p, 3, offset, t)
        offset = answer.records_end_offset
        fetch(p, 2, p.leo(t), t)
        t += 500
    assert change.kind == ChangeKind.EXPAND and change.members == (1, 2, 3)


def test_a_far_behind_follower_needs_several_bounded_fetches() -> None:
    config = ReplicaConfig(
        produce_rate=1000, replica_lag_time_max_ms=LAG_MS, replica_fetch_max_bytes=100 * MESSAGE_BYTES
    )
    manager = ReplicaManager(1, config, clock=lambda: 1000, broker_epoch=lambda: EPOCHS[1])
    manager.apply_metadata([meta(isr=(1, 2))], view().brokers)
    manager.clock = lambda: 2000  # a second later the leader has produced 1000 messages
    offset, fetches = 0, 0
    while offset < 1000:
        [(_, _, answer)] = manager.answer_fetch(3, EPOCHS[3], 10 << 20, [(TOPIC, 0, offset, 0, 100 * MESSAGE_BYTES)])
        assert answer.records_end_offset - offset <= 100
        offset, fetches = answer.records_end_offset, fetches + 1
    assert fetches == 10
    # The whole answer is bounded too: two partitions share max_bytes.
    [(_, _, answer)] = manager.answer_fetch(3, EPOCHS[3], 30 * MESSAGE_BYTES, [(TOPIC, 0, 0, 0, 100 * MESSAGE_BYTES)])
    assert answer.records_end_offset == 30


# -- fetch errors ------------------------------------------------------------------------------------------------


def test_fetch_errors_are_kafkas() -> None:
    p = leader_partition()
    p.apply_metadata(meta(leader_epoch=2, partition_epoch=2), 0, EPOCHS[1])
    assert fetch(p, 2, 0, 10, epoch=1)[0].error == Errors.FENCED_LEADER_EPOCH
    assert fetch(p, 2, 0, 10, epoch=3)[0].error == Errors.UNKNOWN_LEADER_EPOCH
    assert fetch(p, 2, 0, 10, epoch=-1)[0].error == Errors.NONE  # -1: not checked
    answer, _ = fetch(p, 2, 500, 1000, epoch=2)  # past the leader's LEO (10)
    assert answer == FetchAnswer(Errors.OFFSET_OUT_OF_RANGE, p.high_watermark, 10, 10)
    p.apply_metadata(meta(leader=2, leader_epoch=3, partition_epoch=3), 1000, EPOCHS[1])
    assert fetch(p, 2, 0, 1000, epoch=3)[0].error == Errors.NOT_LEADER_OR_FOLLOWER


def test_follower_applies_answers_truncates_and_backs_off() -> None:
    p = Partition(TOPIC, "t", 0, 2, CONFIG)
    p.apply_metadata(meta(leader_epoch=4, partition_epoch=4), 0, EPOCHS[2])
    assert p.fetchable(0)
    outcome = p.on_fetch_answer(4, FetchAnswer(Errors.NONE, 5, 30, 20), 0)
    assert (p.log_end_offset, p.high_watermark, outcome.messages, outcome.behind) == (20, 5, 20, True)
    assert p.on_fetch_answer(3, FetchAnswer(Errors.NONE, 5, 40, 40), 0).messages == 0  # an older epoch's answer
    p.on_fetch_answer(4, FetchAnswer(Errors.OFFSET_OUT_OF_RANGE, 5, 12, 12), 0)
    assert p.log_end_offset == 12  # ahead of the new leader: truncated to its end
    outcome = p.on_fetch_answer(4, FetchAnswer(Errors.NOT_LEADER_OR_FOLLOWER), 100)
    assert outcome.refresh and not p.fetchable(100 + CONFIG.replica_fetch_backoff_ms - 1)
    assert p.fetchable(100 + CONFIG.replica_fetch_backoff_ms)
    outcome = p.on_fetch_answer(4, FetchAnswer(Errors.FENCED_LEADER_EPOCH), 5000)
    assert outcome.refresh and not p.fetchable(10**9)  # waits for metadata with a newer leader epoch
    p.apply_metadata(meta(leader_epoch=4, partition_epoch=4), 6000, EPOCHS[2])
    assert not p.fetchable(10**9)  # the same metadata again changes nothing
    p.apply_metadata(meta(leader=3, leader_epoch=5, partition_epoch=5), 6000, EPOCHS[2])
    assert p.fetchable(6000) and p.leader == 3


# -- AlterPartition answers and metadata -------------------------------------------------------------------------


def test_alter_partition_answers_follow_kafkas_handling() -> None:
    p = leader_partition(isr=(1, 2))
    _, change = fetch(p, 3, 0, 0)
    assert change is not None and change.kind == ChangeKind.EXPAND
    # INELIGIBLE_REPLICA: not applied and our epochs are right -> back to the committed ISR, free to try again.
    assert not p.on_alter_error(change, Errors.INELIGIBLE_REPLICA)
    assert p.pending is None and p.isr == (1, 2)
    change = p.maybe_expand(p.remotes.get(3), view(), EPOCHS[1])
    assert change is not None
    assert p.on_alter_error(change, Errors.NOT_CONTROLLER)  # the controller is behind our epochs: send again
    assert p.pending is change
    # FENCED_LEADER_EPOCH: stale; act on nothing until metadata replaces the state.
    assert not p.on_alter_error(change, Errors.FENCED_LEADER_EPOCH)
    assert p.pending is change and p.metadata_stale and p.maybe_shrink(10**9, EPOCHS[1]) is None
    p.apply_metadata(meta(leader=2, leader_epoch=1, partition_epoch=1), 100, EPOCHS[1])
    assert p.pending is None and not p.is_leader
    # An answer to a change that metadata replaced is ignored.
    assert not p.on_alter_result(change, 0, (1, 2, 3), 0, 1, 200, view())
    assert p.isr == (1, 2, 3) and p.leader == 2


def test_an_answer_with_another_leader_epoch_is_ignored_and_stays_pending() -> None:
    p = leader_partition()
    change = p.maybe_shrink(10 * LAG_MS, EPOCHS[1])
    assert change is not None and change.members == (1,)
    assert not p.on_alter_result(change, 5, (1,), 0, 6, 10 * LAG_MS, view())
    assert p.pending is change and p.metadata_stale


def test_polled_metadata_is_applied_as_a_delta() -> None:
    """The same partition state polled again must not reset an AlterPartition in flight; an older partition epoch
    than the one an AlterPartition answer gave is skipped (Kafka's partition-epoch check)."""
    p = leader_partition()
    change = p.maybe_shrink(10 * LAG_MS, EPOCHS[1])
    assert change is not None
    p.apply_metadata(meta(), 10 * LAG_MS, EPOCHS[1])
    assert p.pending is change
    assert p.on_alter_result(change, 0, (1,), 0, 1, 10 * LAG_MS, view())
    p.apply_metadata(meta(), 10 * LAG_MS, EPOCHS[1])  # a poll answered before the change committed
    assert p.isr == (1,) and p.partition_epoch == 1
    p.apply_metadata(meta(partition_epoch=2, isr=(1, 2)), 10 * LAG_MS, EPOCHS[1])
    assert p.isr == (1, 2) and p.partition_epoch == 2


def test_a_replica_holds_the_metadata_tuple_it_was_given_not_a_copy() -> None:
    """A broker holds up to a million replicas: each keeps the assignment it was given (the image's shared tuple)
    rather than eight fields of its own, until an AlterPartition answer makes it differ from every other."""
    m = meta(leader_epoch=4, partition_epoch=6, isr=(1, 2, 3))
    led, followed = Partition(TOPIC, "t", 0, 1, CONFIG), Partition(TOPIC, "t", 0, 2, CONFIG)
    led.apply_metadata(m, 0, EPOCHS[1])
    followed.apply_metadata(m, 0, EPOCHS[2])
    assert led.state is m and followed.state is m
    assert (led.leader, led.leader_epoch, led.partition_epoch, led.isr) == (1, 4, 6, (1, 2, 3))
    assert (followed.leader, followed.replicas, followed.adding, followed.removing) == (1, (1, 2, 3), (), ())
    # Confirmed by the controller: a copy with the new ISR and partition epoch; the given tuple is untouched.
    led.remotes.get(3).last_caught_up_time_ms = -10 * LAG_MS  # type: ignore[union-attr]
    change = led.maybe_shrink(0, EPOCHS[1])
    assert change is not None and led.on_alter_result(change, 4, (1, 2), 0, 7, 0, view())
    assert led.state is not m and (led.isr, led.partition_epoch, led.leader_epoch) == ((1, 2), 7, 4)
    assert m.isr == (1, 2, 3) and led.metadata_seen == (4, 6)
    # The metadata that commits the change is taken as given again.
    committed = meta(leader_epoch=4, partition_epoch=7, isr=(1, 2))
    led.apply_metadata(committed, 0, EPOCHS[1])
    assert led.state is committed and led.metadata_seen == (4, 7)
    # A leader's epoch never goes back, even if metadata says so (an older leader epoch, a newer partition epoch).
    led.apply_metadata(meta(leader_epoch=3, partition_epoch=8, isr=(1, 2)), 0, EPOCHS[1])
    assert (led.leader_epoch, led.partition_epoch) == (4, 8)


def test_a_recovering_leader_tells_the_controller_it_recovered() -> None:
    p = Partition(TOPIC, "t", 0, 1, CONFIG)
    change = p.apply_metadata(meta(leader_epoch=7, partition_epoch=9, isr=(1,), leader_recovery_state=1), 0, 11)
    assert change is not None and change.kind == ChangeKind.RECOVER
    assert change.new_isr == ((1, 11),) and change.leader_recovery_state == LeaderRecoveryState.RECOVERED
    assert p.on_alter_result(change, 7, (1,), 0, 10, 0, view())
    assert p.leader_recovery_state == LeaderRecoveryState.RECOVERED and p.partition_epoch == 10


# -- the sender ------------------------------------------------------------------------------------------------


async def test_the_sender_batches_retries_and_drops_stale_changes() -> None:
    partitions = [leader_partition() for _ in range(3)]
    for i, p in enumerate(partitions):
        p.key = (p.topic_id, i)
    calls: list[list[AlterPartitionTopic]] = []
    answers: list[tuple[int, Errors]] = []
    fail_first = [True]

    async def call(broker_id: int, epoch: int, topics: list[AlterPartitionTopic]) -> AlterPartitionResponse:
        calls.append(topics)
        if fail_first[0]:
            fail_first[0] = False
            raise AdminError("stale", Errors.STALE_BROKER_EPOCH)
        results = []
        for t in topics:
            for d in t.partitions:
                if d.partition_index == 1 and len(calls) == 2:
                    continue  # left out of the answer: must be sent again
                results.append(AlterPartitionResult(t.topic_id, d.partition_index, NO_ERROR, 1, 0, (1,), 0, 1))
        return AlterPartitionResponse(NO_ERROR, tuple(results))

    def on_answer(change, result, error) -> bool:  # type: ignore[no-untyped-def]
        answers.append((change.partition.index, error))
        return False

    sender = AlterPartitionSender(1, lambda: 11, call, on_answer, retry_ms=1)
    task = asyncio.create_task(sender.run())
    changes = [p.maybe_shrink(10 * LAG_MS, 11) for p in partitions]
    partitions[2].pending = None  # metadata replaced it before it was sent
    for c in changes:
        assert c is not None
        sender.submit(c)
    for _ in range(200):
        if len(answers) == 2:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    assert sorted(answers) == [(0, Errors.NONE), (1, Errors.NONE)]
    assert [sorted(d.partition_index for t in c for d in t.partitions) for c in calls] == [[0, 1], [0, 1], [1]]


async def test_the_sender_splits_many_changes_over_requests_oldest_first_dropping_stale_ones() -> None:
    partitions = [leader_partition() for _ in range(12)]
    for i, p in enumerate(partitions):
        p.key = (p.topic_id, i)
    calls: list[list[int]] = []
    answered: list[int] = []

    async def call(broker_id: int, epoch: int, topics: list[AlterPartitionTopic]) -> AlterPartitionResponse:
        calls.append([d.partition_index for t in topics for d in t.partitions])
        return AlterPartitionResponse(
            NO_ERROR,
            tuple(
                AlterPartitionResult(t.topic_id, d.partition_index, NO_ERROR, 1, 0, (1,), 0, 1)
                for t in topics
                for d in t.partitions
            ),
        )

    def on_answer(change, result, error) -> bool:  # type: ignore[no-untyped-def]
        answered.append(change.partition.index)
        return False

    sender = AlterPartitionSender(1, lambda: 11, call, on_answer, retry_ms=1, max_changes=5)
    for p in partitions:
        change = p.maybe_shrink(10 * LAG_MS, 11)
        assert change is not None
        sender.submit(change)
    partitions[7].pending = None  # metadata replaced it before it was sent: dropped when its turn comes
    task = asyncio.create_task(sender.run())
    for _ in range(200):
        if len(answered) == 11:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    assert calls == [[0, 1, 2, 3, 4], [5, 6, 8, 9, 10], [11]]
    assert answered == [i for i in range(12) if i != 7]
    assert not sender.unsent


# -- brokers replicating through a fake controller, on a virtual clock ---------------------------------------


@dataclass
class FakeController:
    """AlterPartition's checks in Kafka's order (enough of them), brokers that can be fenced."""

    brokers: dict[int, BrokerState]
    partitions: dict[int, dict] = field(default_factory=dict)
    requests: int = 0

    def metadata(self) -> list[PartitionMetadata]:
        return [
            PartitionMetadata(TOPIC, "t", i, s["leader"], s["le"], s["pe"], s["replicas"], s["isr"])
            for i, s in self.partitions.items()
        ]

    def alter(self, broker_id: int, broker_epoch: int, topics: list[AlterPartitionTopic]) -> AlterPartitionResponse:
        self.requests += 1
        if self.brokers[broker_id].epoch != broker_epoch:
            return AlterPartitionResponse(ApiError(Errors.STALE_BROKER_EPOCH))
        out = []
        for t in topics:
            for d in t.partitions:
                s = self.partitions[d.partition_index]

                def fail(code: Errors, t=t, d=d) -> AlterPartitionResult:  # type: ignore[no-untyped-def]
                    return AlterPartitionResult(t.topic_id, d.partition_index, ApiError(code))

                if d.leader_epoch > s["le"] or d.partition_epoch > s["pe"]:
                    out.append(fail(Errors.NOT_CONTROLLER))
                elif d.leader_epoch < s["le"]:
                    out.append(fail(Errors.FENCED_LEADER_EPOCH))
                elif d.partition_epoch < s["pe"]:
                    out.append(fail(Errors.INVALID_UPDATE_VERSION))
                elif any(self.brokers[b].fenced or (e != -1 and e != self.brokers[b].epoch) for b, e in d.new_isr):
                    out.append(fail(Errors.INELIGIBLE_REPLICA))
                else:
                    s["isr"] = tuple(b for b, _ in d.new_isr)
                    s["pe"] += 1
                    state = (s["leader"], s["le"], s["isr"], 0, s["pe"])
                    out.append(AlterPartitionResult(t.topic_id, d.partition_index, NO_ERROR, *state))
        return AlterPartitionResponse(NO_ERROR, tuple(out))

    def fence(self, broker_id: int) -> None:
        """What the controller does when a broker's session expires: out of every ISR, a new leader where it led."""
        b = self.brokers[broker_id]
        self.brokers[broker_id] = b._replace(fenced=True)
        for s in self.partitions.values():
            if broker_id in s["isr"] and len(s["isr"]) > 1:
                s["isr"] = tuple(x for x in s["isr"] if x != broker_id)
                s["pe"] += 1
                if s["leader"] == broker_id:
                    s["leader"] = s["isr"][0]
                    s["le"] += 1


def assert_led_counts(m: ReplicaManager) -> None:
    """The counts the metrics thread reads from the manager's indexes are what a walk of the replicas gives."""
    led = [p for p in m.partitions.values() if p.is_leader]
    counts = m.led_counts(walk=False)
    walked = (len(led), sum(map(under_replicated, led)), sum(bool(p.adding) for p in led))
    assert (counts.leaders, counts.under_replicated, counts.reassigning) == walked, m.broker_id


class Sim:
    """Three brokers' ReplicaManagers on one virtual clock: fetches every replica.fetch.wait.max.ms (at once while
    behind), ISR expiration every lag/2, metadata every 2 s, AlterPartition answered at the next 100 ms step."""

    STEP = 100

    def __init__(self, partitions: int = 6, config: ReplicaConfig = CONFIG, sessions: bool = False) -> None:
        self.now = 0
        self.config = config
        self.sessions = sessions  # fetch in incremental fetch sessions, as the data plane does
        self.entries_sent = 0  # partition entries in fetch requests
        self.entries_answered = 0  # and in their answers
        self.ctrl = FakeController({b: BrokerState(e, False, False, None) for b, e in EPOCHS.items()})
        for i in range(partitions):
            replicas = tuple((i + k) % 3 + 1 for k in range(3))
            self.ctrl.partitions[i] = {"leader": replicas[0], "le": 0, "pe": 0, "replicas": replicas, "isr": replicas}
        self.managers: dict[int, ReplicaManager] = {}
        self.queued: list = []
        self.paused: set[int] = set()
        self.dead: set[int] = set()
        self.next_fetch = dict.fromkeys(EPOCHS, 0)
        for b in EPOCHS:
            m = ReplicaManager(b, config, clock=lambda: self.now, broker_epoch=lambda b=b: self.ctrl.brokers[b].epoch)
            m.submit = self.submit
            self.managers[b] = m
        self.poll()

    def submit(self, change) -> None:  # type: ignore[no-untyped-def]
        self.queued.append(change)

    def poll(self) -> None:
        for b, m in self.managers.items():
            if b not in self.dead:
                m.apply_metadata(self.ctrl.metadata(), self.ctrl.brokers)
                # The index the ISR expiration and the status walk: exactly the replicas led here.
                assert {p.key for p in m.led_replicas()} == {k for k, p in m.partitions.items() if p.is_leader}
                assert_led_counts(m)

    def step(self) -> None:
        self.now += self.STEP
        self.answer_alters()
        for b, m in self.managers.items():
            if b in self.paused or b in self.dead or self.now < self.next_fetch[b]:
                continue
            behind = False
            for leader in m.followed_leaders():
                if self.sessions:
                    behind |= self._session_fetch(b, m, leader)
                    continue
                batch = m.fetch_batch(leader)
                if not batch:
                    continue
                if leader in self.dead:
                    m.fetch_failed(batch)
                    continue
                items = [
                    (i.partition.topic_id, i.partition.index, i.fetch_offset, i.leader_epoch, i.max_bytes)
                    for i in batch
                ]
                answers = self.managers[leader].answer_fetch(b, self.ctrl.brokers[b].epoch, 10 << 20, items)
                behind |= m.on_fetch_answers(batch, {(t, i): a for t, i, a in answers})
            self.next_fetch[b] = self.now if behind else self.now + self.config.replica_fetch_wait_max_ms
        if self.now % (self.config.replica_lag_time_max_ms // 2) == 0:
            for b, m in self.managers.items():
                if b not in self.dead:
                    m.maybe_shrink_isr()
        if self.now % 2000 == 0:
            self.poll()
        for b, m in self.managers.items():
            if b not in self.dead:
                assert_led_counts(m)

    def answer_alters(self) -> None:
        """The AlterPartition changes queued, answered by the controller (those to send again: queued again)."""
        queued, self.queued = self.queued, []
        for change in queued:
            leader = change.partition.local_id
            topics = [AlterPartitionTopic(TOPIC, (_data(change),))]
            response = self.ctrl.alter(leader, self.ctrl.brokers[leader].epoch, topics)
            [result] = response.partitions
            if self.managers[leader].on_alter_answer(change, result, Errors(result.error.code)):
                self.queued.append(change)

    def _session_fetch(self, b: int, m: ReplicaManager, leader: int) -> bool:
        fetch = m.session_fetch(leader)
        if fetch is None:
            return False
        if leader in self.dead:
            m.session_failed(leader, fetch)
            return False
        return self.deliver(b, leader, fetch)[0]

    def deliver(self, b: int, leader: int, fetch: SessionFetch) -> tuple[bool, list[tuple[bytes, int, FetchAnswer]]]:
        """``fetch`` from broker ``b`` answered by ``leader`` and the answer applied: (fetch again at once, the
        answers)."""
        error, session_id, answers = self.answer(b, leader, fetch)
        m = self.managers[b]
        behind = drain(m.on_session_response(leader, fetch, error, session_id, {(t, i): a for t, i, a in answers}))
        return behind, answers

    def answer(
        self, b: int, leader: int, fetch: SessionFetch
    ) -> tuple[Errors, int, list[tuple[bytes, int, FetchAnswer]]]:
        """``leader``'s answer to ``fetch`` from broker ``b``: (error, session id, answers)."""
        items = [
            (bytes(i.partition.topic_id), i.partition.index, i.fetch_offset, i.leader_epoch, i.max_bytes)
            for i in fetch.items
        ]
        forgotten = [(bytes(t), i) for t, i in fetch.forgotten]
        error, session_id, answers = drain(
            self.managers[leader].answer_session_fetch(
                b, self.ctrl.brokers[b].epoch, 10 << 20, fetch.session_id, fetch.session_epoch, items, forgotten
            )
        )
        self.entries_sent += len(items)
        self.entries_answered += len(answers)
        return error, session_id, answers

    def run_until(self, condition, limit_ms: int) -> int:  # type: ignore[no-untyped-def]
        start = self.now
        while not condition():
            assert self.now - start < limit_ms, f"not within {limit_ms} ms: {self.ctrl.partitions}"
            self.step()
        return self.now - start

    def isrs(self) -> dict[int, tuple[int, ...]]:
        return {i: s["isr"] for i, s in self.ctrl.partitions.items()}


def _data(change):  # type: ignore[no-untyped-def]
    from pykraft.replica.alter_partition import _request

    [topic] = _request([change])
    return topic.partitions[0]


@pytest.mark.parametrize("sessions", [False, True], ids=["full-fetches", "fetch-sessions"])
def test_a_paused_follower_leaves_every_isr_and_comes_back(sessions: bool) -> None:
    sim = Sim(sessions=sessions)
    sim.run_until(lambda: False if sim.now < 10_000 else True, 11_000)
    assert all(len(isr) == 3 for isr in sim.isrs().values())  # steady state: nobody shrunk
    sim.paused.add(3)
    followed = [i for i, s in sim.ctrl.partitions.items() if s["leader"] != 3]
    took = sim.run_until(lambda: all(3 not in sim.isrs()[i] for i in followed), 4 * LAG_MS)
    # Out of sync after the lag time; noticed by the next expiration check (every lag / 2).
    assert LAG_MS <= took <= LAG_MS * 3 // 2 + sim.config.replica_fetch_wait_max_ms + 2 * Sim.STEP
    assert sim.managers[3].counters.messages_fetched > 0
    for i, p in sim.managers[1].partitions.items():
        if p.is_leader:
            assert p.isr == sim.ctrl.partitions[i[1]]["isr"]  # the leader applied the answers
    sim.paused.discard(3)
    took = sim.run_until(lambda: all(3 in isr for isr in sim.isrs().values()), 10_000)
    assert took <= 2000
    leos = {b: m.summary()["log_end_offset_sum"] for b, m in sim.managers.items()}
    assert max(leos.values()) - min(leos.values()) < 6 * 10  # within a second's production of each other
    assert sum(m.counters.isr_shrinks for m in sim.managers.values()) == 4  # broker 3 followed 4 of the 6
    assert sum(m.counters.isr_expands for m in sim.managers.values()) == 4


@pytest.mark.parametrize("sessions", [False, True], ids=["full-fetches", "fetch-sessions"])
def test_a_restarted_broker_catches_up_from_nothing_and_rejoins(sessions: bool) -> None:
    config = ReplicaConfig(
        produce_rate=2000, replica_lag_time_max_ms=LAG_MS, replica_fetch_max_bytes=2000 * MESSAGE_BYTES
    )
    sim = Sim(config=config, sessions=sessions)
    sim.run_until(lambda: sim.now >= 4000, 5000)
    sim.dead.add(2)
    sim.ctrl.fence(2)
    sim.run_until(lambda: sim.now >= 20_000, 17_000)
    assert all(2 not in isr for isr in sim.isrs().values())
    # Restart: a new incarnation (new broker epoch), empty logs, unfenced by the controller.
    sim.ctrl.brokers[2] = BrokerState(99, False, False, None)
    sim.managers[2] = ReplicaManager(2, config, clock=lambda: sim.now, broker_epoch=lambda: 99)
    sim.managers[2].submit = sim.submit
    sim.dead.discard(2)
    sim.poll()
    took = sim.run_until(lambda: all(2 in isr for isr in sim.isrs().values()), 20_000)
    assert took < 5000
    # ~40 000 messages per partition at most 2000 per fetch: it took many fetches, not one.
    assert sim.managers[2].counters.fetches_sent > 20


# -- over gRPC on loopback --------------------------------------------------------------------------------------


class FakeAdmin:
    """describe_cluster / describe_topics / alter_partition of a FakeController, as the AdminClient answers."""

    def __init__(self, ctrl: FakeController, endpoints: dict[int, tuple[str, int]]) -> None:
        self.ctrl = ctrl
        self.endpoints = endpoints

    async def describe_cluster(self, timeout_ms: int | None = None) -> ClusterDescription:
        brokers = [
            BrokerInfo(b, None, s.fenced, s.in_controlled_shutdown, s.epoch, [("PLAINTEXT", *self.endpoints[b])], 0)
            for b, s in self.ctrl.brokers.items()
        ]
        return ClusterDescription("c", 1, brokers)

    async def describe_topics(self, names=None, timeout_ms: int | None = None) -> list[TopicDescription]:  # type: ignore[no-untyped-def]
        parts = [
            PartitionInfo(i, s["leader"], s["le"], s["pe"], list(s["replicas"]), list(s["isr"]), [])
            for i, s in self.ctrl.partitions.items()
        ]
        return [TopicDescription("t", str(TOPIC), 0, "", parts, {})]

    async def describe_configs(self, resources, *, timeout_ms=None):  # type: ignore[no-untyped-def]
        return [DescribeConfigsResult(r.resource_type, r.resource_name) for r in resources]

    async def alter_partition(self, broker_id, broker_epoch, topics, *, timeout_ms=None):  # type: ignore[no-untyped-def]
        response = self.ctrl.alter(broker_id, broker_epoch, topics)
        if response.error.failed:
            raise AdminError("request failed", response.error.code)
        return response


@pytest.mark.parametrize("slice_", [None, 1], ids=["whole", "a partition at a time"])
async def test_brokers_replicate_over_grpc_and_a_paused_one_is_shrunk_and_expands_back(monkeypatch, slice_) -> None:  # type: ignore[no-untyped-def]
    """With ``slice_`` 1 every fetch is encoded, answered and decoded a partition at a time, the loop running in
    between (as a fetch of hundreds of thousands of partitions is)."""
    if slice_ is not None:
        monkeypatch.setattr(session_fetching, "FETCH_SLICE", slice_)
        monkeypatch.setattr(data_plane, "ENCODE_SLICE", slice_)
    config = ReplicaConfig(produce_rate=50, replica_lag_time_max_ms=600, replica_fetch_wait_max_ms=100)
    ctrl = FakeController({b: BrokerState(e, False, False, None) for b, e in EPOCHS.items()})
    for i in range(3):
        replicas = tuple((i + k) % 3 + 1 for k in range(3))
        ctrl.partitions[i] = {"leader": replicas[0], "le": 0, "pe": 0, "replicas": replicas, "isr": replicas}
    ports = dict(zip(EPOCHS, free_ports(3), strict=True))
    admin = FakeAdmin(ctrl, {b: ("127.0.0.1", port) for b, port in ports.items()})
    faults = LoggingFaultHandler()
    planes = {
        b: DataPlane(
            b,
            ("127.0.0.1", ports[b]),
            admin,  # type: ignore[arg-type]
            lambda b=b: EPOCHS[b],
            config,
            faults,
            metadata_interval_ms=200,
        )
        for b in EPOCHS
    }

    async def until(condition, timeout: float) -> None:  # type: ignore[no-untyped-def]
        for _ in range(int(timeout / 0.05)):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"not within {timeout} s: {ctrl.partitions}")

    try:
        for plane in planes.values():
            assert await plane.start_server()
            plane.start()
        await until(lambda: all(p.manager.counters.messages_fetched > 20 for p in planes.values()), 10)
        planes[2].set_paused(True)
        await until(lambda: all(2 not in s["isr"] for s in ctrl.partitions.values() if s["leader"] != 2), 10)
        assert ctrl.partitions[1]["isr"] == (2, 3, 1)  # broker 2 leads partition 1 and stays
        planes[2].set_paused(False)
        await until(lambda: all(len(s["isr"]) == 3 for s in ctrl.partitions.values()), 10)
        assert not faults.faults
    finally:
        for plane in planes.values():
            await plane.stop()


@pytest.mark.parametrize("rate", [-1.0])
def test_config_refuses_a_negative_rate(rate: float) -> None:
    with pytest.raises(ValueError, match="negative"):
        ReplicaConfig(produce_rate=rate)
