"""The authorization switch (``authorizer.class.name``) as a node setting and as ``pykraft node`` wires it into its
services, and the client host an ACL's host is held to, from gRPC's peer strings."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from authz_helpers import FAST, Clients, Node, wait_for_leader

from controller.quorum_controller import QuorumController
from pykraft.api import controller_pb2 as pb
from pykraft.authorization import STANDARD_AUTHORIZER, authorizer_enabled, client_host
from pykraft.cli import build_parser
from pykraft.node import ConfigError, NodeSettings, add_client_services, settings_from_args
from pykraft.security.ca import ensure_cluster_certificates
from pykraft.security.tls import server_credentials
from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.quorum_state import QuorumStateStore
from quorum.raft.runtime import RaftNode
from quorum.transport.pb import quorum_pb2 as qpb

VOTERS = "1@127.0.0.1:19091"


def node_settings(tmp_path: Path, *overrides: str) -> NodeSettings:
    argv = ["node", "--node-id", "1", "--controller-quorum-voters", VOTERS, "--data-dir", str(tmp_path)]
    for o in overrides:
        argv += ["--override", o]
    return settings_from_args(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    ("value", "enabled"), [("", False), ("  ", False), (STANDARD_AUTHORIZER, True), ("StandardAuthorizer", True)]
)
def test_kafkas_standard_authorizer_turns_it_on(tmp_path: Path, value: str, enabled: bool) -> None:
    assert authorizer_enabled(value) is enabled
    settings = node_settings(tmp_path, f"authorizer.class.name={value}")
    assert authorizer_enabled(settings.controller.authorizer_class_name) is enabled


def test_off_by_default(tmp_path: Path) -> None:
    assert node_settings(tmp_path).controller.authorizer_class_name == ""


@pytest.mark.parametrize("value", ["kafka.security.authorizer.AclAuthorizer", "standardauthorizer", "x.Standard"])
def test_any_other_class_is_refused_at_start(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"authorizer\.class\.name: '{value}' is not an authorizer pykraft has"):
        node_settings(tmp_path, f"authorizer.class.name={value}")


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:127.0.0.1:50123", "127.0.0.1"),
        ("ipv4:10.1.2.3:1", "10.1.2.3"),
        ("ipv6:[::1]:50123", "::1"),
        ("ipv6:%5B::1%5D:50123", "::1"),  # gRPC percent-encodes the brackets in some versions
        ("ipv6:[2001:db8:0:0:0:0:0:7]:9", "2001:db8::7"),  # one spelling per address: the short form
        ("ipv6:[::ffff:192.168.0.4]:9", "192.168.0.4"),  # an IPv4 client on a dual-stack listener
        ("unix:/tmp/sock", "unix:/tmp/sock"),
    ],
)
def test_client_host_from_grpc_peer(peer: str, host: str) -> None:
    assert client_host(peer) == host


async def test_a_node_hands_the_switch_and_its_mapping_rules_to_its_services(tmp_path: Path) -> None:
    """``pykraft node``'s wiring (add_client_services): with the settings as flags give them, the Controller and
    quorum admin services authorize, naming callers by the node's ``ssl.principal.mapping.rules``."""
    certs = ensure_cluster_certificates(tmp_path / "ca", ["controller-1", "alice", "Admin"])
    [port] = free_ports(1)
    files = certs["controller-1"]
    argv = ["node", "--node-id", "1", "--controller-quorum-voters", f"1@127.0.0.1:{port}", "--data-dir", str(tmp_path)]
    for o in (
        "security.protocol=SSL",
        f"ssl.certificate.location={files.certificate}",
        f"ssl.key.location={files.key}",
        f"ssl.ca.location={files.ca}",
        "ssl.principal.mapping.rules=RULE:^CN=([^,]*)$/$1/L",  # CN=Admin -> User:admin
        "authorizer.class.name=StandardAuthorizer",
        "super.users=User:admin",
        "metadata.max.idle.interval.ms=0",
    ):
        argv += ["--override", o]
    settings = settings_from_args(build_parser().parse_args(argv))
    assert settings.tls is not None
    metadata_log = MetadataLog.open(settings.data_dir)
    faults = LoggingFaultHandler()
    raft = RaftNode(
        node_id=1,
        voters=settings.voters,
        cluster_id="switch",
        log=metadata_log,
        store=QuorumStateStore(metadata_log.dir),
        config=FAST,
        faults=faults,
    )
    controller = QuorumController(1, raft, settings.controller, faults)
    server = grpc.aio.server()
    raft.transport.add_to_server(server)
    add_client_services(server, settings, raft, controller, settings.voters)
    server.add_secure_port(f"127.0.0.1:{port}", server_credentials(settings.tls))
    await server.start()
    controller.start()
    raft.start()
    clients = Clients(certs, port)
    try:
        await wait_for_leader({1: Node(1, raft, controller, port)})
        request = pb.DescribeClusterRequest()
        assert (await clients.stub("alice").DescribeCluster(request, timeout=10)).error_code == 31
        assert (await clients.stub("Admin").DescribeCluster(request, timeout=10)).error_code == 0
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            async for _ in clients.admin_stub("alice").ExportLog(qpb.ExportLogRequest(), timeout=10):
                pass
        assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        await clients.close()
        await controller.close()
        await raft.shutdown(graceful=False)
        await server.stop(grace=0)
