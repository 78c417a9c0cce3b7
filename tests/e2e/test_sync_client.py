"""SyncAdminClient from plain synchronous code (no event loop in the test), against a process cluster: three
``pykraft node`` voters and three broker agents, one per rack."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from e2e_helpers import ProcessCluster

from pykraft.client import AdminError, NewTopic, SyncAdminClient
from pykraft.testing import free_ports
from quorum.errors import Errors


@pytest.fixture(scope="module")
def pc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    pc = ProcessCluster(tmp_path_factory.mktemp("sync-client"), brokers_per_rack=1)
    pc.start()
    try:
        asyncio.run(pc.wait_ready())
        yield pc
    finally:
        pc.close()


def leader_id(pc: ProcessCluster) -> int:
    leader, _ = asyncio.run(pc.cluster.wait_for_leader(timeout=60))
    return leader


def dead_address() -> str:
    return f"127.0.0.1:{free_ports(1)[0]}"  # free a moment ago: nothing listens there


def test_no_event_loop_in_this_test() -> None:
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()


def test_create_describe_list(pc: ProcessCluster) -> None:
    threads_before = threading.active_count()
    with SyncAdminClient(pc.bootstrap) as admin:
        results = admin.create_topics([NewTopic("sync-orders", num_partitions=3, replication_factor=3)])
        r = results["sync-orders"]
        r.raise_for_error()
        assert r.topic_id and (r.num_partitions, r.replication_factor) == (3, 3), r

        again = admin.create_topics([NewTopic("sync-orders", num_partitions=3, replication_factor=3)])
        assert again["sync-orders"].error_code == Errors.TOPIC_ALREADY_EXISTS, again
        with pytest.raises(AdminError) as e:
            again["sync-orders"].raise_for_error()
        assert e.value.code == Errors.TOPIC_ALREADY_EXISTS

        [d] = admin.describe_topics(["sync-orders"])
        assert d.error_code == 0 and d.topic_id == r.topic_id and len(d.partitions) == 3, d
        racks = pc.racks
        for p in d.partitions:
            assert sorted(racks[b] for b in p.replicas) == ["rack-1", "rack-2", "rack-3"], p
            assert p.leader == p.replicas[0] and p.isr == p.replicas, p
        assert "sync-orders" in admin.list_topics()

        cluster = admin.describe_cluster()
        assert cluster.controller_id in pc.cluster.nodes and cluster.cluster_id, cluster
        assert sorted(b.broker_id for b in cluster.brokers) == sorted(pc.brokers), cluster
        assert not any(b.fenced for b in cluster.brokers), cluster
    time.sleep(0.1)
    assert threading.active_count() <= threads_before, "close() left the client's thread running"


def test_dead_first_bootstrap_entry(pc: ProcessCluster) -> None:
    live = [n.address for n in pc.cluster.nodes.values()]
    with SyncAdminClient([dead_address(), *live]) as admin:
        started = time.monotonic()
        cluster = admin.describe_cluster()
        took = time.monotonic() - started
        print(f"\ndescribe_cluster with a dead first bootstrap entry: {took * 1000:.0f} ms, {admin.attempts} attempts")
        assert cluster.controller_id in pc.cluster.nodes
        results = admin.create_topics([NewTopic("sync-dead-first", num_partitions=1, replication_factor=3)])
        results["sync-dead-first"].raise_for_error()
        [d] = admin.describe_topics(["sync-dead-first"])
        assert d.topic_id == results["sync-dead-first"].topic_id


def test_follower_only_bootstrap_follows_the_not_controller_hint(pc: ProcessCluster) -> None:
    leader = leader_id(pc)
    follower = next(n for n in pc.cluster.nodes if n != leader)
    with SyncAdminClient([pc.cluster.nodes[follower].address]) as admin:
        cluster = admin.describe_cluster()
        assert cluster.controller_id == leader, (cluster.controller_id, leader)
        # One attempt at the follower (NOT_CONTROLLER, with the controller's endpoint), then straight to it.
        print(f"\nfollower {follower} only in the bootstrap list: answered by {cluster.controller_id} after "
              f"{admin.attempts} attempts")  # fmt: skip
        assert admin.attempts == 2, admin.attempts
        results = admin.create_topics([NewTopic("sync-via-hint", num_partitions=2, replication_factor=3)])
        results["sync-via-hint"].raise_for_error()
        assert admin.attempts == 3, "the client should remember the controller it was sent to"
        [d] = admin.describe_topics(["sync-via-hint"])
        assert d.topic_id == results["sync-via-hint"].topic_id


def test_nothing_reachable_times_out() -> None:
    timeout_s = 3.0
    with SyncAdminClient([dead_address(), dead_address()], default_api_timeout_ms=int(timeout_s * 1000)) as admin:
        started = time.monotonic()
        with pytest.raises(AdminError) as e:
            admin.describe_cluster()
        took = time.monotonic() - started
        print(f"\nnothing reachable: AdminError after {took:.2f} s ({admin.attempts} attempts): {e.value}")
        assert e.value.code == Errors.REQUEST_TIMED_OUT, e.value
        assert "UNAVAILABLE" in str(e.value), e.value
        assert timeout_s - 0.05 <= took, took  # it kept retrying until its deadline ...
        assert took < timeout_s + 5, took  # ... and not long after it (measured ~3.0 s)
        assert admin.attempts > 2, admin.attempts

        started = time.monotonic()
        with pytest.raises(AdminError) as e:
            admin.create_topics([NewTopic("never")], timeout_ms=1000)  # a per-call timeout wins
        took = time.monotonic() - started
        assert e.value.code == Errors.REQUEST_TIMED_OUT and 0.95 <= took < 6, (e.value, took)
