"""``pykraft node --external-port --advertised-endpoints``: a second listener for clients outside the voters'
network (the host of a docker compose cluster) whose NOT_CONTROLLER hints and quorum descriptions name the
controllers as those clients reach them, while the voter port keeps naming the voter addresses (for brokers
inside the network) — Kafka's listeners / advertised.listeners split.

On loopback every address resolves, so the tests check the endpoints named exactly, and that a client given only
the external listeners, one of them a follower, creates a topic by following the hint to the leader's external
port. The last test names unresolvable advertised hosts (``*.invalid``), as the compose cluster's host sees the
voter names: the client still gets there through its other bootstrap servers."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from pykraft.api import controller_pb2 as cpb
from pykraft.api import controller_pb2_grpc as cpb_grpc
from pykraft.client import AdminClient
from pykraft.node import ConfigError, add_node_arguments, settings_from_args
from pykraft.testing import Cluster, free_ports
from quorum.errors import Errors
from quorum.log.message import Uuid
from quorum.transport.pb import quorum_pb2 as qpb
from quorum.transport.pb import quorum_pb2_grpc as qpb_grpc

LONG_SESSION = ["--override", "broker.session.timeout.ms=60000"]  # the test's one broker never heartbeats again


def external_cluster(root: Path, host: str = "127.0.0.1") -> tuple[Cluster, dict[int, int]]:
    """Three voters on 127.0.0.1, each also listening on an external port, advertised as ``host:port``."""
    external = dict(enumerate(free_ports(3), start=1))
    advertised = ",".join(f"{i}@{host.format(i=i)}:{p}" for i, p in external.items())
    cluster = Cluster(root=root, size=3, extra_args=["--advertised-endpoints", advertised, *LONG_SESSION])
    for node_id, port in external.items():
        cluster.nodes[node_id].args += ["--external-port", str(port)]
    return cluster, external


async def describe_quorum(target: str) -> qpb.DescribeQuorumResponse:
    async with grpc.aio.insecure_channel(target) as ch:
        return await qpb_grpc.QuorumAdminStub(ch).DescribeQuorum(qpb.DescribeQuorumRequest(), timeout=5)


async def create_topic_hint(target: str) -> cpb.ControllerHint:
    async with grpc.aio.insecure_channel(target) as ch:
        request = cpb.CreateTopicsRequest(timeout_ms=5000)
        request.topics.add(name="probe", num_partitions=1, replication_factor=1)
        r = await cpb_grpc.ControllerStub(ch).CreateTopics(request, timeout=5)
    assert r.error_code == Errors.NOT_CONTROLLER, r
    return r.controller


async def register_one_broker(bootstrap: str) -> None:
    async with AdminClient(bootstrap, default_api_timeout_ms=20_000) as admin:
        epoch = await admin.register_broker(101, str(Uuid.random()), None, [("PLAINTEXT", "127.0.0.1", 1)])
        for _ in range(100):  # fenced until it has caught up with the log (any offset past its registration)
            if not (await admin.heartbeat(101, epoch, 1 << 40)).is_fenced:
                return
            await asyncio.sleep(0.1)
    raise AssertionError("broker 101 stayed fenced")


def pykraft(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_settings_check_the_advertised_endpoints() -> None:
    p = argparse.ArgumentParser()
    add_node_arguments(p)
    base = ["--node-id", "1", "--controller-quorum-voters", "1@c1:9093,2@c2:9093", "--data-dir", "/tmp/x"]
    s = settings_from_args(p.parse_args([*base, "--advertised-endpoints", "1@127.0.0.1:9091,2@127.0.0.1:9092"]))
    assert s.advertised is not None and str(s.advertised[2]) == "2@127.0.0.1:9092" and s.external_port is None
    s = settings_from_args(p.parse_args([*base, "--advertised-endpoints", "1@h:1,2@h:2", "--external-port", "9094"]))
    assert s.external_port == 9094
    assert settings_from_args(p.parse_args(base)).advertised is None
    for bad, message in [
        (["--advertised-endpoints", "1@127.0.0.1:9091"], "names nodes [1], controller.quorum.voters [1, 2]"),
        (["--advertised-endpoints", "1@h:1,2@h:2,3@h:3"], "names nodes [1, 2, 3]"),
        (["--advertised-endpoints", "1@h:1,2@h"], "--advertised-endpoints: '2@h' is not of the form"),
        (["--external-port", "9094"], "--external-port needs --advertised-endpoints"),
        (["--advertised-endpoints", "1@h:1,2@h:2", "--external-port", "70000"], "--external-port 70000 is not"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            settings_from_args(p.parse_args([*base, *bad]))


def test_external_listener_names_advertised_endpoints_and_clients_follow_them(tmp_path: Path) -> None:
    cluster, external = external_cluster(tmp_path)
    with cluster:
        leader, _ = asyncio.run(cluster.wait_for_leader())
        follower = next(n for n in cluster.nodes if n != leader)
        outside = f"127.0.0.1:{external[follower]}"
        inside = cluster.nodes[follower].address
        # The external listener names the leader's external port; the voter port its voter address.
        assert asyncio.run(describe_quorum(outside)).leader_endpoint == f"127.0.0.1:{external[leader]}"
        assert asyncio.run(describe_quorum(inside)).leader_endpoint == cluster.nodes[leader].address
        hint = asyncio.run(create_topic_hint(outside))
        assert (hint.controller_id, hint.controller_endpoint) == (leader, f"127.0.0.1:{external[leader]}")
        hint = asyncio.run(create_topic_hint(inside))
        assert hint.controller_endpoint == cluster.nodes[leader].address

        asyncio.run(register_one_broker(outside))
        # A follower's external port alone: the topic is created only by following the hint to the leader.
        r = pykraft("topics", "--bootstrap-server", outside, "--create", "--topic", "t1", "--partitions", "1",
                    "--replication-factor", "1")  # fmt: skip
        assert r.returncode == 0 and "Created topic t1." in r.stdout, (r.stdout, r.stderr, cluster.logs())
        r = pykraft("quorum", "describe", "--bootstrap-server", outside, "--output", "json")
        assert r.returncode == 0 and f'"answeredBy": {leader}' in r.stdout, (r.stdout, r.stderr)


def test_unresolvable_hints_fall_back_to_the_other_bootstrap_servers(tmp_path: Path) -> None:
    cluster, external = external_cluster(tmp_path, host="controller-{i}.invalid")
    with cluster:
        leader, _ = asyncio.run(cluster.wait_for_leader())
        asyncio.run(register_one_broker(cluster.nodes[leader].address))
        servers = [f"127.0.0.1:{external[n]}" for n in sorted(external)]
        for start in range(3):  # each node first once: two of the three orders begin at a follower
            bootstrap = ",".join(servers[start:] + servers[:start])
            began = time.monotonic()
            r = pykraft("topics", "--bootstrap-server", bootstrap, "--create", "--topic", f"u{start}",
                        "--partitions", "1", "--replication-factor", "1")  # fmt: skip
            assert r.returncode == 0, (bootstrap, r.stdout, r.stderr)
            assert time.monotonic() - began < 10, f"{bootstrap}: {time.monotonic() - began:.1f} s"
