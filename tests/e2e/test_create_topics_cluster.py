"""CreateTopics end to end: three ``pykraft node`` processes (each a Raft voter running a QuorumController and the
public Controller service) and six ``pykraft broker`` agents over three racks, driven through the AdminClient.

One cluster serves the whole module (starting one costs seconds on this machine); the tests run in file order and
build on each other: every topic acknowledged by any test is remembered in ``acked`` and checked again after the
leader failovers, and the last test stops the cluster and reads every node's log from disk.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from e2e_helpers import (
    FENCE_CHECK_INTERVAL_MS,
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    ProcessCluster,
    ids_by_name,
    leader_high_watermark,
    topic_records,
    wait_brokers,
    wait_logs_reach,
)

from pykraft.client import AdminClient, AdminError, CreateTopicResult, NewTopic, TopicDescription
from quorum.errors import Errors


@pytest.fixture(scope="module")
def pc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    pc = ProcessCluster(
        tmp_path_factory.mktemp("create-topics"),
        node_args=["--override", f"broker.session.timeout.ms={SESSION_TIMEOUT_MS}"],
    )
    pc.start()
    try:
        asyncio.run(pc.wait_ready())
        yield pc
    finally:
        pc.close()


@pytest.fixture(scope="module")
def acked() -> dict[str, str]:
    """name -> topic id of every topic whose creation was acknowledged with success, across the module."""
    return {}


def by_name(described: list[TopicDescription]) -> dict[str, TopicDescription]:
    names = [d.name for d in described]
    assert len(names) == len(set(names)), f"a topic described twice: {Counter(names).most_common(3)}"
    return {d.name: d for d in described}


async def leader_node(pc: ProcessCluster) -> int:
    leader, _ = await pc.cluster.wait_for_leader(timeout=60)
    return leader


async def check_all_described(admin: AdminClient, acked: dict[str, str]) -> None:
    described = by_name(await admin.describe_topics())
    missing = sorted(set(acked) - set(described))
    assert not missing, f"{len(missing)} acknowledged topics not described, e.g. {missing[:5]}"
    wrong = {n: (acked[n], described[n].topic_id) for n in acked if described[n].topic_id != acked[n]}
    assert not wrong, f"topic ids changed: {dict(list(wrong.items())[:5])}"


# -- creating and describing ---------------------------------------------------------------------------------------


async def test_create_and_describe_racks_distinct_leaders_spread(pc: ProcessCluster, acked: dict[str, str]) -> None:
    racks = pc.racks
    async with AdminClient(pc.bootstrap) as admin:
        results = await admin.create_topics(
            [
                NewTopic("orders", num_partitions=12, replication_factor=3),
                NewTopic("payments", num_partitions=6, replication_factor=3, topic_configs={"retention.ms": "3600000"}),
                NewTopic("audit-log", num_partitions=1, replication_factor=1),
            ]
        )
        assert set(results) == {"orders", "payments", "audit-log"}
        for r in results.values():
            r.raise_for_error()
            assert r.topic_id, r
        assert (results["orders"].num_partitions, results["orders"].replication_factor) == (12, 3)
        assert (results["payments"].num_partitions, results["payments"].replication_factor) == (6, 3)
        assert (results["audit-log"].num_partitions, results["audit-log"].replication_factor) == (1, 1)
        assert results["payments"].configs.get("retention.ms") == "3600000", results["payments"].configs
        acked.update({name: r.topic_id for name, r in results.items()})

        described = by_name(await admin.describe_topics(["orders", "payments", "audit-log", "no-such-topic"]))
        missing = described["no-such-topic"]
        assert missing.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION and not missing.topic_id, missing
        assert described["payments"].configs.get("retention.ms") == "3600000", described["payments"].configs
        for name in ("orders", "payments", "audit-log"):
            d = described[name]
            assert d.error_code == 0 and d.topic_id == results[name].topic_id, d
            assert [p.partition for p in d.partitions] == list(range(results[name].num_partitions)), d
            for p in d.partitions:
                rf = results[name].replication_factor
                assert len(p.replicas) == len(set(p.replicas)) == rf, p
                assert set(p.replicas) <= set(racks), p
                # One replica per rack (three racks, replication factor at most three).
                assert len({racks[b] for b in p.replicas}) == rf, f"{name}-{p.partition}: racks repeat in {p}"
                # Every broker is unfenced: the ISR is the whole replica set, led by the first replica.
                assert p.isr == p.replicas and p.leader == p.replicas[0], p
                assert p.leader_epoch == 0 and p.partition_epoch == 0 and not p.offline_replicas, p

        leaders = Counter(p.leader for p in described["orders"].partitions)
        print(f"\norders: leaders per broker {dict(sorted(leaders.items()))}")
        # 12 partitions over 6 unfenced brokers: every broker leads two.
        assert set(leaders) == set(racks) and max(leaders.values()) - min(leaders.values()) <= 1, leaders
        leaders6 = Counter(p.leader for p in described["payments"].partitions)
        assert sorted(leaders6) == sorted(racks), f"payments: 6 partitions, 6 brokers, leaders {leaders6}"
        replicas = Counter(b for p in described["orders"].partitions for b in p.replicas)
        print(f"orders: replicas per broker {dict(sorted(replicas.items()))}")
        assert set(replicas) == set(racks), replicas

        listed = await admin.list_topics()
        assert {"orders", "payments", "audit-log"} <= set(listed) and len(listed) == len(set(listed)), listed


async def test_many_concurrent_clients_each_topic_created_exactly_once(
    pc: ProcessCluster, acked: dict[str, str]
) -> None:
    n_clients = 20
    shared = [f"conc-shared-{s}" for s in range(10)]

    def names_for(c: int) -> list[str]:
        # Seven topics of its own and three of the shared ones; each shared name is asked for by six clients.
        return [f"conc-{c:02d}-{k}" for k in range(7)] + [shared[(c + k) % 10] for k in range(3)]

    async def client(c: int) -> list[CreateTopicResult]:
        async with AdminClient(pc.bootstrap) as admin:
            topics = [NewTopic(n, num_partitions=3, replication_factor=3) for n in names_for(c)]
            if c % 2 == 0:  # one request holding all ten topics
                return list((await admin.create_topics(topics)).values())
            # ten concurrent single-topic requests
            answers = await asyncio.gather(*(admin.create_topics([t]) for t in topics))
            return [r for a in answers for r in a.values()]

    started = time.monotonic()
    all_results = await asyncio.gather(*(client(c) for c in range(n_clients)))
    elapsed = time.monotonic() - started
    outcomes: dict[str, list[CreateTopicResult]] = {}
    for results in all_results:
        assert len(results) == 10
        for r in results:
            outcomes.setdefault(r.name, []).append(r)
    print(f"\n{n_clients} clients x 10 topics: {sum(map(len, outcomes.values()))} results for {len(outcomes)} names "
          f"in {elapsed:.2f} s")  # fmt: skip
    assert len(outcomes) == n_clients * 7 + len(shared)
    for name, rs in outcomes.items():
        assert len(rs) == (6 if name in shared else 1), (name, rs)
        wins = [r for r in rs if r.error_code == Errors.NONE]
        others = [r for r in rs if r.error_code != Errors.NONE]
        assert len(wins) == 1, f"{name}: {len(wins)} successes: {rs}"
        assert wins[0].topic_id, wins[0]
        for r in others:
            assert r.error_code == Errors.TOPIC_ALREADY_EXISTS, r
            assert r.error_message == f"Topic '{name}' already exists.", r
            assert not r.topic_id, r
    created = {name: next(r.topic_id for r in rs if r.error_code == 0) for name, rs in outcomes.items()}

    async with AdminClient(pc.bootstrap) as admin:
        described = by_name(await admin.describe_topics(sorted(created)))
        for name, topic_id in created.items():
            d = described[name]
            assert d.error_code == 0 and d.topic_id == topic_id, (name, topic_id, d)
            assert len(d.partitions) == 3 and all(len(p.replicas) == 3 for p in d.partitions), d
        listed = await admin.list_topics()
        assert len(listed) == len(set(listed))
        assert set(created) <= set(listed)
    acked.update(created)


async def test_response_only_after_commit_survives_leader_kill(pc: ProcessCluster, acked: dict[str, str]) -> None:
    """A success is sent only once the TopicRecord is committed (on a majority): the leader is killed -9 the
    moment each answer arrives, and the new leader still describes the topic with the same id."""
    for round_ in range(2):
        leader = await leader_node(pc)
        leader_address = pc.cluster.nodes[leader].address
        async with AdminClient([leader_address]) as admin:
            names = [f"commit-{round_}-{i}" for i in range(4)]
            results = await admin.create_topics([NewTopic(n, num_partitions=2, replication_factor=3) for n in names])
            pc.cluster.nodes[leader].kill()  # at once: no time for anything to reach the followers afterwards
        for r in results.values():
            r.raise_for_error()
        created = {n: r.topic_id for n, r in results.items()}
        acked.update(created)

        new_leader = await leader_node(pc)
        assert new_leader != leader
        async with AdminClient([pc.cluster.nodes[new_leader].address]) as admin:
            assert (await admin.describe_cluster()).controller_id == new_leader
            described = by_name(await admin.describe_topics(names))
            for name, topic_id in created.items():
                assert described[name].error_code == 0 and described[name].topic_id == topic_id, described[name]
            await check_all_described(admin, acked)
        pc.cluster.nodes[leader].start()
    await pc.cluster.wait_for_leader(timeout=60)


async def test_kill_leader_while_creates_in_flight(pc: ProcessCluster, acked: dict[str, str]) -> None:
    """Creators keep going through a kill -9 of the active controller. Whatever happened to an attempt that was in
    flight, retrying the same name ends in success or TOPIC_ALREADY_EXISTS, and no name gets two topic ids."""
    workers, per_worker = 8, 6
    outcomes: dict[str, CreateTopicResult] = {}
    attempts: Counter[str] = Counter()
    request_errors: list[tuple[str, str]] = []
    successes = asyncio.Event()

    async def creator(w: int) -> None:
        async with AdminClient(pc.bootstrap) as admin:
            for k in range(per_worker):
                name = f"inflight-{w}-{k}"
                deadline = time.monotonic() + 90
                while True:
                    attempts[name] += 1
                    try:
                        r = (await admin.create_topics([NewTopic(name, num_partitions=3, replication_factor=3)]))[name]
                    except AdminError as e:
                        # The request as a whole did not complete in time: it may or may not have been applied.
                        assert e.code == Errors.REQUEST_TIMED_OUT, f"{name}: {e!r}"
                        request_errors.append((name, str(e)))
                        assert time.monotonic() < deadline, f"{name}: no answer within 90 s\n{pc.logs()}"
                        continue
                    outcomes[name] = r
                    if sum(1 for o in outcomes.values() if o.error_code == 0) >= 10:
                        successes.set()
                    break

    tasks = [asyncio.create_task(creator(w)) for w in range(workers)]
    try:
        await asyncio.wait_for(successes.wait(), 60)
        leader = await leader_node(pc)
        killed_at = time.monotonic()
        pc.cluster.nodes[leader].kill()
        done_before = len(outcomes)
        await asyncio.wait_for(asyncio.gather(*tasks), 180)
    finally:
        for t in tasks:
            t.cancel()
    took = time.monotonic() - killed_at
    retried = {n: c for n, c in attempts.items() if c > 1}
    already = sorted(n for n, r in outcomes.items() if r.error_code == Errors.TOPIC_ALREADY_EXISTS)
    print(f"\nkilled node {leader} with {done_before}/{workers * per_worker} creates answered; the rest finished "
          f"{took:.2f} s later; app-level retries {retried}; request errors {len(request_errors)}; "
          f"TOPIC_ALREADY_EXISTS after a retry: {already}")  # fmt: skip

    assert len(outcomes) == workers * per_worker
    for name, r in outcomes.items():
        assert r.error_code in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS), r
        if r.error_code == Errors.TOPIC_ALREADY_EXISTS:
            # Only this creator ever asked for this name: an earlier attempt of its own was committed.
            assert r.error_message == f"Topic '{name}' already exists.", r

    new_leader = await leader_node(pc)
    assert new_leader != leader
    async with AdminClient([pc.cluster.nodes[new_leader].address]) as admin:
        assert (await admin.describe_cluster()).controller_id == new_leader
        described = by_name(await admin.describe_topics(sorted(outcomes)))
        for name, r in outcomes.items():
            d = described[name]
            assert d.error_code == 0 and d.topic_id, (name, d)
            if r.error_code == Errors.NONE:
                assert d.topic_id == r.topic_id, (name, r, d)
        acked.update({name: described[name].topic_id for name in outcomes})
        # The new leader describes every topic acknowledged so far, in this test and the earlier ones.
        await check_all_described(admin, acked)
    pc.cluster.nodes[leader].start()
    await pc.cluster.wait_for_leader(timeout=60)


# -- brokers leaving ---------------------------------------------------------------------------------------------


@pytest.fixture
def restore_brokers(pc: ProcessCluster) -> Iterator[None]:
    """Before the test, every replica back in its ISR: the test reads the ISRs, then kills, and an ISR expansion
    between the two (a broker the previous test restarted, rejoining) made it check a stale ISR. After the test,
    whatever it did: every broker agent running again (a new incarnation) and unfenced."""

    async def full_isrs() -> None:
        async with AdminClient(pc.bootstrap) as admin:
            deadline = time.monotonic() + 60
            while True:
                described = await admin.describe_topics()
                short = [(d.name, p) for d in described for p in d.partitions if set(p.isr) != set(p.replicas)]
                if not short:
                    return
                assert time.monotonic() < deadline, f"ISRs not full 60 s on: {short[:5]}"
                await asyncio.sleep(0.1)

    asyncio.run(full_isrs())
    yield
    for b in pc.brokers.values():
        if not b.running:
            b.start()

    async def wait() -> None:
        async with AdminClient(pc.bootstrap) as admin:
            await wait_brokers(admin, pc, unfenced=set(pc.brokers))

    asyncio.run(wait())


async def partitions_led_by(admin: AdminClient, broker: int) -> dict[tuple[str, int], object]:
    return {(d.name, p.partition): p for d in await admin.describe_topics() for p in d.partitions if p.leader == broker}


def check_moved_away(before: dict, after: dict[str, TopicDescription], gone: set[int]) -> None:
    """Partitions led by a broker in ``gone`` have a new leader taken from their ISR, with a new leader epoch; one
    whose ISR held nobody else (replication factor 1, say) is left without a leader, its ISR kept."""
    assert before, "the brokers led no partition: nothing to check"
    for (name, index), p_before in before.items():
        p = after[name].partitions[index]
        assert p.leader_epoch > p_before.leader_epoch, (p_before, p)
        if not set(p_before.isr) - gone:
            assert p.leader == -1 and p.isr == p_before.isr, f"{name}-{index}: no live ISR member, yet {p}"
            continue
        assert p.leader not in gone and p.leader >= 0, f"{name}-{index}: leader {p.leader} after {gone} left: {p}"
        assert p.leader in p_before.isr, f"{name}-{index}: new leader {p.leader} was not in the ISR {p_before.isr}"
        assert p.leader in p.isr, f"{name}-{index}: leader {p.leader} not in its ISR {p.isr}"


def check_partitions_consistent(described: dict[str, TopicDescription], fenced: set[int]) -> None:
    """Every partition: a leader that is in its ISR and not fenced; fenced brokers only in an ISR they would
    otherwise leave empty (an ISR is never emptied)."""
    bad = []
    for d in described.values():
        for p in d.partitions:
            live_isr = [b for b in p.isr if b not in fenced]
            if p.leader >= 0 and (p.leader in fenced or p.leader not in p.isr):
                bad.append((d.name, p))
            elif live_isr and len(live_isr) != len(p.isr):
                bad.append((d.name, p))
            elif p.leader < 0 and live_isr:
                bad.append((d.name, p))
            if sorted(p.offline_replicas) != sorted(b for b in p.replicas if b in fenced):
                bad.append((d.name, p))
    assert not bad, f"{len(bad)} inconsistent partitions (fenced {sorted(fenced)}), e.g. {bad[:3]}"


async def test_kill9_two_brokers_at_once_leaders_from_isr(pc: ProcessCluster, restore_brokers: None) -> None:
    """Two brokers of different racks (so they share partitions) die together, their last heartbeats close in
    time: their sessions expire together, often in the same check, and every partition they led moves to a live
    member of its ISR; neither stays in an ISR or leads. (The first broker test, while every broker is in the ISR
    of each of its partitions: a broker that comes back is not added to ISRs again, there is no data plane.)"""
    async with AdminClient(pc.bootstrap) as admin:
        racks = pc.racks
        described_before = by_name(await admin.describe_topics())  # leaderships do not move while all are healthy
        deadline = time.monotonic() + 30
        while True:  # wait for two brokers that have just heartbeated within 250 ms of each other
            ages = {b.broker_id: b.last_heartbeat_age_ms for b in (await admin.describe_cluster()).brokers}
            pairs = [(abs(ages[a] - ages[b]), a, b) for a in ages for b in ages if a < b and racks[a] != racks[b]]
            diff, a, b = min(pairs)
            if diff < 250 and max(ages[a], ages[b]) < 1000:
                break
            assert time.monotonic() < deadline, f"no two brokers heartbeat within 250 ms of each other: {ages}"
            await asyncio.sleep(0.05)
        gone = {a, b}
        pc.brokers[a].kill()
        pc.brokers[b].kill()
        before: dict = {}
        for d in described_before.values():
            for p in d.partitions:
                if p.leader in gone:
                    before[(d.name, p.partition)] = p
        shared = sum(1 for d in described_before.values() for p in d.partitions if gone <= set(p.isr))
        assert shared > 0, "the two brokers share no ISR"
        await wait_brokers(admin, pc, unfenced=set(pc.brokers) - gone, fenced=gone, timeout=30)
        described = by_name(await admin.describe_topics())
        fencings = [line for line in pc.cluster.logs().splitlines() if "brokers_fenced" in line]
        print(f"\nkilled brokers {sorted(gone)} (heartbeats {diff} ms apart; {shared} partitions hold both in their "
              f"ISR, {len(before)} led by them); controller fencing events: {fencings[-2:]}")  # fmt: skip
        check_moved_away(before, described, gone)
        check_partitions_consistent(described, gone)


async def test_sigterm_broker_goes_through_controlled_shutdown(pc: ProcessCluster, restore_brokers: None) -> None:
    async with AdminClient(pc.bootstrap) as admin:
        led = {b: await partitions_led_by(admin, b) for b in pc.brokers}
        broker = max(led, key=lambda b: len(led[b]))
        before = led[broker]
        sent = time.monotonic()
        code = pc.brokers[broker].terminate(timeout=60)
        took = time.monotonic() - sent
        print(f"\nbroker {broker} (leading {len(before)} partitions) stopped {took:.2f} s after SIGTERM")
        assert code == 0, pc.brokers[broker].log()
        assert "broker_controlled_shutdown" in pc.brokers[broker].log_path.read_text()  # log(): only the tail
        # The agent exits only once the controller told it to, which it does after committing the fencing.
        cluster = await admin.describe_cluster()
        state = {b.broker_id: b for b in cluster.brokers}
        assert state[broker].fenced, state[broker]
        assert all(not b.fenced for b in cluster.brokers if b.broker_id != broker), cluster.brokers
        described = by_name(await admin.describe_topics())
        assert not await partitions_led_by(admin, broker)
        check_moved_away(before, described, {broker})
        check_partitions_consistent(described, {broker})

        pc.brokers[broker].start()  # a new incarnation registers and is unfenced again
        await wait_brokers(admin, pc, unfenced=set(pc.brokers))


async def test_kill9_broker_fenced_after_session_timeout(pc: ProcessCluster, restore_brokers: None) -> None:
    async with AdminClient(pc.bootstrap) as admin:
        led = {b: await partitions_led_by(admin, b) for b in pc.brokers}
        broker = max(led, key=lambda b: len(led[b]))
        before = led[broker]
        cluster = await admin.describe_cluster()
        age_ms = next(b.last_heartbeat_age_ms for b in cluster.brokers if b.broker_id == broker)
        assert 0 <= age_ms <= HEARTBEAT_INTERVAL_MS + 5000, age_ms
        last_heartbeat = time.monotonic() - age_ms / 1000  # no later heartbeat can come before the kill
        pc.brokers[broker].kill()
        killed = time.monotonic()
        while True:
            cluster = await admin.describe_cluster()
            state = {b.broker_id: b for b in cluster.brokers}
            if state[broker].fenced:
                fenced_seen = time.monotonic()
                break
            assert time.monotonic() - killed < 30, f"broker {broker} not fenced 30 s after kill -9\n{pc.logs()}"
            await asyncio.sleep(0.05)
        since_heartbeat = fenced_seen - last_heartbeat
        print(f"\nbroker {broker} (leading {len(before)} partitions): fenced seen {fenced_seen - killed:.2f} s after "
              f"kill -9, {since_heartbeat:.2f} s after its last heartbeat (session timeout "
              f"{SESSION_TIMEOUT_MS / 1000:.1f} s, checked every {FENCE_CHECK_INTERVAL_MS / 1000:.1f} s)")  # fmt: skip
        # Not before the session expired (measured from the last heartbeat the controller had when asked).
        assert since_heartbeat >= SESSION_TIMEOUT_MS / 1000, since_heartbeat
        assert all(not b.fenced for b in cluster.brokers if b.broker_id != broker), cluster.brokers
        described = by_name(await admin.describe_topics())
        check_moved_away(before, described, {broker})
        check_partitions_consistent(described, {broker})
        for (name, index), _ in before.items():
            assert broker in described[name].partitions[index].offline_replicas


# -- the logs --------------------------------------------------------------------------------------------------------


async def test_every_node_log_holds_each_topic_once(pc: ProcessCluster, acked: dict[str, str]) -> None:
    """Stop the cluster and read every node's log segments: each acknowledged topic's TopicRecord is on every node,
    with the acknowledged id, and no name has two ids anywhere (the nodes that were killed -9 included)."""
    assert len(acked) > 150
    for node in pc.cluster.nodes.values():
        if not node.running:
            node.start()
    leader, high_watermark = await leader_high_watermark(pc.cluster, timeout=60)
    await wait_logs_reach(pc.cluster, high_watermark)
    for b in pc.brokers.values():
        if b.running:
            b.kill()  # their state is not under test here; no heartbeats while the voters stop
    pc.cluster.stop_followers_first(leader)
    per_node = {n: topic_records(node.data_dir) for n, node in pc.cluster.nodes.items()}
    reference = None
    for n, records in per_node.items():
        ids = ids_by_name(records)
        twice = {name: sorted(i) for name, i in ids.items() if len(i) > 1}
        assert not twice, f"node {n}: names with more than one topic id: {twice}"
        names = Counter(name for _, name, _ in records)
        assert all(c == 1 for c in names.values()), f"node {n}: {names.most_common(3)}"
        missing = {name: topic_id for name, topic_id in acked.items() if ids.get(name) != {topic_id}}
        assert not missing, f"node {n}: {len(missing)} acknowledged topics missing or with another id: {missing}"
        mine = {name: next(iter(i)) for name, i in ids.items()}
        if reference is None:
            reference = mine
        assert mine == reference, f"node {n} disagrees on topics with node {next(iter(per_node))}"
    print(f"\n{len(reference or {})} topics, one TopicRecord each, on all {len(per_node)} nodes")
