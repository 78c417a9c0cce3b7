"""The counts of led replicas that a broker's /metrics serves (under-replicated, reassigning) come from indexes the
replica manager keeps as replicas change, not from a walk at each scrape. After any sequence of metadata (leaders
moving, ISRs shrinking and growing, reassignments starting and ending, partitions going, an image reloaded) and of
AlterPartition answers, they equal a walk. The data-plane simulation checks the same at every step. The periodic
passes over every replica (ISR expiry, the status line) give the same in slices as in one go."""

from __future__ import annotations

import random

import pytest
from test_data_plane import assert_led_counts

from controller.requests import AlterPartitionResult
from pykraft.broker_metrics import BrokerCollector
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import NO_LEADER, BrokerState, PartitionMetadata, PendingChange, ReplicaConfig
from pykraft.replica.session_fetching import drain
from quorum.errors import Errors
from quorum.log.message import Uuid

BROKERS = (1, 2, 3, 4)
LAG_MS = 1000
TOPIC = Uuid.random()


class Metadata:
    """The controller's view of a few partitions of one topic, changed at random the ways a controller changes it."""

    def __init__(self, rng: random.Random, partitions: int) -> None:
        self.rng = rng
        self.parts: dict[int, PartitionMetadata] = {}
        for i in range(partitions):
            replicas = tuple(rng.sample(BROKERS, 3))
            self.parts[i] = PartitionMetadata(TOPIC, "t", i, replicas[0], 0, 0, replicas, replicas)

    def change(self, i: int) -> None:
        rng, old = self.rng, self.parts.get(i)
        if old is None:  # created (again, after a deletion the manager was told of)
            replicas = tuple(rng.sample(BROKERS, 3))
            self.parts[i] = PartitionMetadata(TOPIC, "t", i, replicas[0], 0, 0, replicas, replicas)
            return
        replicas, adding, removing = old.replicas, old.adding, old.removing
        kind = rng.randrange(4)
        if kind == 0 and not adding:  # a reassignment starts: one replica in, one out
            target = rng.choice([b for b in BROKERS if b not in replicas])
            out = rng.choice(replicas)
            replicas, adding, removing = (*replicas, target), (target,), (out,)
        elif kind == 1 and adding:  # it ends
            replicas = tuple(b for b in replicas if b not in removing)
            adding = removing = ()
        leader = old.leader
        if kind == 2 or leader not in replicas:
            leader = rng.choice([*replicas, NO_LEADER])
        isr = tuple(b for b in replicas if b == leader or rng.random() < 0.6) or (replicas[0],)
        leader_epoch = old.leader_epoch + (leader != old.leader)
        self.parts[i] = PartitionMetadata(
            TOPIC, "t", i, leader, leader_epoch, old.partition_epoch + 1, replicas, isr, 0, adding, removing
        )

    def alter(self, change: PendingChange) -> AlterPartitionResult | None:
        """The controller's answer to an ISR change: applied (the ISR and a new partition epoch) if its epochs are
        the partition's, else None (refused as stale)."""
        p = self.parts.get(change.partition.index)
        asked = (1, change.leader_epoch, change.partition_epoch)
        if p is None or (p.leader, p.leader_epoch, p.partition_epoch) != asked:
            return None
        isr = tuple(b for b, _ in change.new_isr)
        self.parts[p.index] = p = p._replace(isr=isr, partition_epoch=p.partition_epoch + 1)
        return AlterPartitionResult(TOPIC, p.index, leader_id=1, leader_epoch=p.leader_epoch, isr=isr,
                                    partition_epoch=p.partition_epoch)  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_the_led_counts_kept_as_replicas_change_equal_a_walk(seed: int) -> None:
    rng = random.Random(seed)
    now = [0]
    config = ReplicaConfig(replica_lag_time_max_ms=LAG_MS)
    m = ReplicaManager(1, config, clock=lambda: now[0], broker_epoch=lambda: 11)
    sent: list = []
    m.submit = sent.append
    brokers = {b: BrokerState(10 + b, False, False, None) for b in BROKERS}
    meta = Metadata(rng, 12)
    m.apply_metadata(list(meta.parts.values()), brokers)
    assert_led_counts(m)
    shrinks = answered = 0
    for _ in range(60):
        op = rng.randrange(5)
        if op == 0:  # a delta: a few partitions changed, maybe one deleted
            changed = rng.sample(sorted(meta.parts), 3)
            for i in changed:
                meta.change(i)
            removed = []
            if rng.random() < 0.3:
                gone = rng.choice(sorted(meta.parts))
                del meta.parts[gone]
                removed.append((TOPIC, gone))
                changed = [i for i in changed if i != gone]
            m.apply_delta([meta.parts[i] for i in changed], removed)
        elif op == 1:  # the whole view again, some partitions changed or created
            for i in rng.sample(range(14), 4):
                meta.change(i)
            m.apply_metadata(list(meta.parts.values()), brokers)
        elif op == 2:  # followers silent past the lag: the leader proposes shrinks
            now[0] += LAG_MS + 1
            shrinks += m.maybe_shrink_isr()
        elif op == 3 and sent:  # the controller applies some proposed ISR changes, refuses or has lost others
            rng.shuffle(sent)
            for change in sent[: rng.randint(1, len(sent))]:
                result = meta.alter(change)
                if result is not None:
                    m.on_alter_answer(change, result, Errors.NONE)
                    answered += 1
                else:
                    m.on_alter_answer(change, None, Errors.INVALID_UPDATE_VERSION)
            sent.clear()
        elif op == 4:  # an image reloaded: equal key tuples, then the maps rekeyed
            m.apply_updates((((TOPIC, i), "t", p) for i, p in meta.parts.items()), (), brokers)
            m.rekey()
        assert_led_counts(m)
    assert shrinks and answered, (shrinks, answered)  # the AlterPartition path was taken


def test_a_scrape_does_not_walk_the_replicas_led() -> None:
    """With no quota in force, a scrape's led counts cost what the indexes cost, whatever the replicas led."""
    m = ReplicaManager(1, ReplicaConfig(), clock=lambda: 0, broker_epoch=lambda: 11)
    brokers = {b: BrokerState(10 + b, False, False, None) for b in BROKERS}
    m.apply_metadata(
        [PartitionMetadata(TOPIC, "t", i, 1, 0, 0, (1, 2, 3), (1, 2) if i % 2 else (1, 2, 3)) for i in range(10)],
        brokers,
    )
    walked: list[int] = []
    original = m.led_replicas

    def counting() -> list:  # type: ignore[type-arg]
        walked.append(1)
        return original()

    m.led_replicas = counting  # type: ignore[method-assign]
    families = {f.name: f for f in BrokerCollector(m, replica_series_max=0).collect()}
    assert families["kafka_server_replicamanager_under_replicated_partitions"].samples[0].value == 5
    assert families["kafka_server_replicamanager_leader_count"].samples[0].value == 10
    assert not walked
    assert m.led_counts().pending_isr_changes == 0 and walked  # the status line's count still walks


def _leader_of_many(seed: int) -> tuple[Metadata, ReplicaManager, list]:
    """Broker 1 leading some of 60 partitions, its followers silent past the lag: its next pass shrinks ISRs."""
    rng = random.Random(seed)
    meta = Metadata(rng, 60)
    for i, part in list(meta.parts.items()):
        if i % 2 == 0 and 1 in part.replicas:  # broker 1 leads half of those it holds
            meta.parts[i] = part._replace(leader=1, leader_epoch=1, partition_epoch=1)
    now = [0]
    m = ReplicaManager(1, ReplicaConfig(replica_lag_time_max_ms=LAG_MS), clock=lambda: now[0], broker_epoch=lambda: 11)
    sent: list = []
    m.submit = sent.append
    m.apply_metadata(list(meta.parts.values()), {b: BrokerState(10 + b, False, False, None) for b in BROKERS})
    now[0] += LAG_MS + 1
    return meta, m, sent


def test_the_periodic_passes_in_steps_equal_one_pass_and_pass_over_what_changed_meanwhile() -> None:
    """The isr-expiration pass and the status line's summary run a slice at a time on a broker's loop (at 2M
    partitions one pass held it ~100 ms): the same result as one pass, and a replica no longer led when its turn
    comes (deleted meanwhile) is left alone."""
    _, whole, whole_sent = _leader_of_many(7)
    shrunk = whole.maybe_shrink_isr()
    assert shrunk >= 3  # the case the pauses must not change
    _, stepped, stepped_sent = _leader_of_many(7)
    steps = stepped.shrink_isr_steps(pause_every=4)
    pauses = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            assert done.value == shrunk
            break
        pauses += 1
    assert pauses == len(stepped.led_replicas()) // 4
    assert [(c.partition.index, c.new_isr) for c in stepped_sent] == [
        (c.partition.index, c.new_isr) for c in whole_sent
    ]
    assert drain(stepped.summary_steps(pause_every=7)) == stepped.summary()

    meta, moved, moved_sent = _leader_of_many(7)
    order = [p.index for p in moved.led_replicas()]
    late = [c.partition.index for c in whole_sent if order.index(c.partition.index) >= 2][-1]
    steps = moved.shrink_isr_steps(pause_every=2)
    next(steps)  # paused after the first two: now a later one is deleted
    del meta.parts[late]
    moved.apply_delta([], [(TOPIC, late)])
    assert drain(steps) == shrunk - 1
    assert late not in {c.partition.index for c in moved_sent}
