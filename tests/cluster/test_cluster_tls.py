"""``pykraft cluster up --tls``: three controller and two broker processes on mutual TLS, each with its own
certificate from the cluster CA under ``<data-dir>/tls``, and the admin tools through ``--command-config``.

One cluster for the module, stopped by ``cluster down`` whatever happens. The brokers being unfenced says their
registration and heartbeats went over TLS and their observers caught up (the controllers unfence a broker only once
its image reached its registration); the follower replica growing says the brokers' fetchers reach each other. The
CLI's default ports 9091-9093 are held while ``up`` picks its ports, so the test takes only ports free at run time.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from pykraft.api import broker_pb2, broker_pb2_grpc, controller_pb2, controller_pb2_grpc
from pykraft.client import AdminClient
from pykraft.cluster import ADMIN_PROPERTIES, LOGS_DIR, STATE_FILE, TLS_DIR
from pykraft.replica.data_plane import describe_replicas
from pykraft.security.ca import ensure_cluster_certificates
from pykraft.security.channels import ClientTls, aio_channel
from pykraft.security.command_config import tls_settings_from_command_config
from pykraft.security.tls import TlsSettings
from pykraft.testing import default_ports_held
from quorum.errors import Errors


def pykraft(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "pykraft", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)


def logs(data_dir: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in sorted((data_dir / LOGS_DIR).glob("*.*")))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    data = tmp_path_factory.mktemp("tls-cluster") / "data"
    try:
        with default_ports_held():
            up = pykraft(
                "cluster", "up", "--tls", "--data-dir", str(data), "--brokers", "2", "--produce-rate", "20",
                "--timeout", "60",
            )  # fmt: skip
        assert up.returncode == 0, f"{up.stdout}\n{up.stderr}\n{logs(data)}"
        assert f"--command-config {data / TLS_DIR / ADMIN_PROPERTIES}" in up.stdout, up.stdout
        assert f"ssl.key.location as in {data / TLS_DIR / ADMIN_PROPERTIES})" in up.stdout, up.stdout
        yield data
    finally:
        down = pykraft("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0, down.stderr


@pytest.fixture(scope="module")
def bootstrap(data_dir: Path) -> str:
    return pykraft("cluster", "bootstrap", "--data-dir", str(data_dir)).stdout.strip()


def test_every_process_has_its_own_certificate_and_the_brokers_are_unfenced(data_dir: Path) -> None:
    tls = data_dir / TLS_DIR
    names = {p.stem for p in tls.glob("*.key")}
    assert names == {"ca", "controller-1", "controller-2", "controller-3", "broker-101", "broker-102", "admin"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in tls.glob("*.key"))
    # describe of the data directory takes the cluster's admin settings by itself.
    described = pykraft("cluster", "describe", "--data-dir", str(data_dir), "--output", "json")
    assert described.returncode == 0, described.stderr
    brokers = json.loads(described.stdout)["brokers"]
    assert [(b["id"], b["fenced"]) for b in brokers] == [(101, False), (102, False)], brokers
    for name in ("controller-1", "broker-101"):
        started = (data_dir / LOGS_DIR / f"{name}.log").read_text()
        assert '"tls": true' in started, f"{name} did not start on TLS"
    # The cluster's own principals are super users on every controller (ACLs are for everyone else).
    state = json.loads((data_dir / STATE_FILE).read_text())
    supers = "super.users=" + ";".join(f"User:{n}" for n in sorted(names - {"ca"}))
    for c in state["controllers"]:
        assert supers in Path(f"/proc/{c['pid']}/cmdline").read_bytes().decode().split("\0")


def test_topics_with_the_command_config_and_refusals_without(data_dir: Path, bootstrap: str) -> None:
    config = str(data_dir / TLS_DIR / ADMIN_PROPERTIES)
    create = pykraft(
        "topics", "--bootstrap-server", bootstrap, "--command-config", config,
        "--create", "--topic", "orders", "--partitions", "2", "--replication-factor", "2",
    )  # fmt: skip
    assert (create.returncode, create.stdout.strip()) == (0, "Created topic orders."), create.stderr
    describe = pykraft("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--describe")
    assert describe.returncode == 0 and "PartitionCount: 2\tReplicationFactor: 2" in describe.stdout, describe

    plain = pykraft("topics", "--bootstrap-server", bootstrap, "--describe", "--connect-timeout-ms", "1500")
    err = plain.stderr.strip()
    assert plain.returncode == 1 and "\n" not in err, err
    assert "no controller reachable" in err and "use security.protocol=SSL" in err, err

    # A certificate named like ours from another CA (which trusts our servers): the controllers refuse it.
    other = ensure_cluster_certificates(data_dir.parent / "other-ca", ["admin"])["admin"]
    stranger = data_dir.parent / "stranger.properties"
    props = {**other.properties(), "ssl.ca.location": str(data_dir / TLS_DIR / "ca.crt")}
    stranger.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    refused = pykraft(
        "topics", "--bootstrap-server", bootstrap, "--command-config", str(stranger), "--describe",
        "--connect-timeout-ms", "1500",
    )  # fmt: skip
    err = refused.stderr.strip()
    assert refused.returncode == 1 and "client certificate is missing or untrusted" in err, err


async def test_the_brokers_replicate_to_each_other_over_tls(data_dir: Path, bootstrap: str) -> None:
    """Every replica of ``orders`` (created above) grows on both brokers: the followers fetch from the leaders."""
    tls = tls_settings_from_command_config(data_dir / TLS_DIR / ADMIN_PROPERTIES)
    async with AdminClient(bootstrap, tls=tls) as admin:
        cluster = await admin.describe_cluster()
        [topic] = await admin.describe_topics(["orders"])
    endpoints = {b.broker_id: b.endpoint() for b in cluster.brokers}
    followers = {(p.partition, r) for p in topic.partitions for r in p.replicas if r != p.leader}
    assert len(followers) == 2
    deadline = time.monotonic() + 20
    while True:
        grown = set()
        for broker_id, endpoint in endpoints.items():
            assert endpoint is not None
            for r in await describe_replicas(endpoint, tls=ClientTls.of(tls)):
                if not r.is_leader and r.log_end_offset > 0:
                    grown.add((r.partition, broker_id))
        if grown >= followers or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert grown >= followers, f"followers that fetched nothing: {followers - grown}\n{logs(data_dir)}"


@pytest.mark.parametrize("who", ["admin", "broker-102"])
async def test_a_fetch_must_come_with_its_replicas_certificate(data_dir: Path, bootstrap: str, who: str) -> None:
    """Broker 101's listener: a fetch as replica 101 from the admin's or broker 102's certificate is refused
    (both are the cluster CA's: the handshake passes, the request does not)."""
    tls_dir = data_dir / TLS_DIR
    admin_tls = tls_settings_from_command_config(tls_dir / ADMIN_PROPERTIES)
    async with AdminClient(bootstrap, tls=admin_tls) as admin:
        endpoint = next(b.endpoint() for b in (await admin.describe_cluster()).brokers if b.broker_id == 101)
    assert endpoint is not None
    caller = TlsSettings(certificate=tls_dir / f"{who}.crt", key=tls_dir / f"{who}.key", ca=tls_dir / "ca.crt")
    async with aio_channel(f"{endpoint[0]}:{endpoint[1]}", ClientTls.of(caller)) as channel:
        stub = broker_pb2_grpc.ReplicaFetchStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.Fetch(broker_pb2.FetchRequest(replica_id=101, broker_epoch=-1), timeout=5)
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert f"User:{who} may not fetch as broker 101" in (refused.value.details() or "")
        # DescribeReplicas stays open to any certificate of the cluster's (reassign-partitions --verify asks it).
        described = await stub.DescribeReplicas(broker_pb2.DescribeReplicasRequest(), timeout=5)
        assert described.broker_id == 101


def test_other_principals_need_acls(data_dir: Path, bootstrap: str) -> None:
    """The controllers authorize requests: a certificate for alice from the cluster's CA is refused until an ACL
    lets her create the topic (admin, a super user, adds it)."""
    tls_dir = data_dir / TLS_DIR
    alice = ensure_cluster_certificates(tls_dir, ["alice"])["alice"]  # the same CA: the others are kept as they are
    config = data_dir.parent / "alice.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in alice.properties().items()))
    create = ["topics", "--bootstrap-server", bootstrap, "--command-config", str(config), "--create", "--topic", "pay"]
    refused = pykraft(*create)
    assert refused.returncode == 1 and "Topic authorization failed: principal User:alice" in refused.stderr, refused
    added = pykraft(
        "acls", "--bootstrap-server", bootstrap, "--command-config", str(tls_dir / ADMIN_PROPERTIES),
        "--add", "--allow-principal", "User:alice", "--operation", "Create", "--topic", "pay",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    allowed = pykraft(*create)
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "Created topic pay."), allowed.stderr


async def test_the_brokers_authorize_the_reads_they_answer_from_their_images(data_dir: Path, bootstrap: str) -> None:
    """Broker 101's Controller service over its image: alice (no ACL on the cluster) is refused DescribeCluster,
    admin (a super user) is answered."""
    tls_dir = data_dir / TLS_DIR
    ensure_cluster_certificates(tls_dir, ["alice"])  # (kept if the test above made it)
    admin_tls = tls_settings_from_command_config(tls_dir / ADMIN_PROPERTIES)
    async with AdminClient(bootstrap, tls=admin_tls) as admin:
        endpoint = next(b.endpoint() for b in (await admin.describe_cluster()).brokers if b.broker_id == 101)
    assert endpoint is not None
    codes = {}
    for who in ("alice", "admin"):
        caller = TlsSettings(certificate=tls_dir / f"{who}.crt", key=tls_dir / f"{who}.key", ca=tls_dir / "ca.crt")
        async with aio_channel(f"{endpoint[0]}:{endpoint[1]}", ClientTls.of(caller)) as channel:
            stub = controller_pb2_grpc.ControllerStub(channel)
            answer = await stub.DescribeCluster(controller_pb2.DescribeClusterRequest(), timeout=5)
            codes[who] = (answer.error_code, answer.error_message)
    assert codes["alice"][0] == Errors.CLUSTER_AUTHORIZATION_FAILED, codes
    assert "principal User:alice" in codes["alice"][1], codes
    assert codes["admin"] == (0, ""), codes


def test_metrics_are_served_over_https_with_each_process_certificate(data_dir: Path) -> None:
    """metrics.tls is on by default under SSL: a scraper checks the process's certificate against the cluster CA
    (and needs none of its own); plain HTTP gets no metrics."""
    import ssl
    import urllib.error
    import urllib.request

    state = json.loads((data_dir / STATE_FILE).read_text())
    context = ssl.create_default_context(cafile=str(data_dir / TLS_DIR / "ca.crt"))
    for process in (state["controllers"][0], state["brokers"][0]):
        url = f"127.0.0.1:{process['metrics_port']}/metrics"
        with urllib.request.urlopen(f"https://{url}", timeout=10, context=context) as response:
            assert "process_cpu_seconds_total" in response.read().decode(), process
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://{url}", timeout=10).read()


def test_kafka_admin_clients_use_the_ssl_kafka_listeners_with_admin_properties(data_dir: Path) -> None:
    """admin.properties as librdkafka's own configuration: confluent-kafka reaches the controllers' SSL Kafka
    listeners with it and sees ``orders`` (created above through gRPC); without a certificate it is refused."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient as CkAdmin

    state = json.loads((data_dir / STATE_FILE).read_text())
    servers = ",".join(f"127.0.0.1:{c['kafka_port']}" for c in state["controllers"])
    lines = (data_dir / TLS_DIR / ADMIN_PROPERTIES).read_text().splitlines()
    props = dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))
    assert "orders" in CkAdmin({"bootstrap.servers": servers, **props}).list_topics(timeout=10).topics
    anonymous = {k: v for k, v in props.items() if k not in ("ssl.certificate.location", "ssl.key.location")}
    with pytest.raises(KafkaException):
        CkAdmin({"bootstrap.servers": servers, "log_level": 0, **anonymous}).list_topics(timeout=1)
