"""``pykraft node`` with ``security.protocol=SSL``: the settings, and one small quorum of two node processes that
elect a leader over mutual TLS, answer a client with a certificate, refuse a plaintext one and a broker's
certificate posing as a voter, and reread their certificates on SIGHUP."""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import ssl
from pathlib import Path

import grpc
import pytest

from pykraft.node import ConfigError, add_node_arguments, settings_from_args
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.tls import TlsSettings, channel_credentials
from pykraft.testing import Cluster, free_ports
from quorum.raft.messages import VoteRequest
from quorum.transport.convert import to_proto
from quorum.transport.pb import quorum_pb2 as pb
from quorum.transport.pb import quorum_pb2_grpc as pb_grpc


def node_args(*extra: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_node_arguments(p)
    return p.parse_args(
        ["--node-id", "1", "--controller-quorum-voters", "1@127.0.0.1:1,2@127.0.0.1:2", "--data-dir", "/tmp/x", *extra]
    )


def overrides(files: CertFiles) -> list[str]:
    return [arg for k, v in files.properties().items() for arg in ("--override", f"{k}={v}")]


def test_tls_is_off_by_default_and_on_with_security_protocol_ssl(tmp_path: Path) -> None:
    assert settings_from_args(node_args()).tls is None
    files = ensure_cluster_certificates(tmp_path, ["controller-1"])["controller-1"]
    assert settings_from_args(node_args(*overrides(files))).tls == TlsSettings(files.certificate, files.key, files.ca)


def test_bad_tls_files_are_a_usage_error(tmp_path: Path) -> None:
    files = ensure_cluster_certificates(tmp_path, ["controller-1"])["controller-1"]
    with pytest.raises(ConfigError, match=f"^ssl.key.location: {tmp_path}/nope.key: no such file$"):
        settings_from_args(node_args(*overrides(files), "--override", f"ssl.key.location={tmp_path}/nope.key"))


async def describe(address: str, credentials: grpc.ChannelCredentials | None) -> pb.DescribeQuorumResponse:
    channel = (
        grpc.aio.insecure_channel(address) if credentials is None else grpc.aio.secure_channel(address, credentials)
    )
    async with channel:
        return await pb_grpc.QuorumAdminStub(channel).DescribeQuorum(pb.DescribeQuorumRequest(), timeout=2)


async def test_a_quorum_over_mutual_tls(tmp_path: Path) -> None:
    certs = ensure_cluster_certificates(tmp_path / "tls", ["controller-1", "controller-2", "broker-101", "admin"])
    admin = channel_credentials(TlsSettings.from_properties(certs["admin"].properties()))  # type: ignore[arg-type]
    cluster = Cluster(tmp_path, size=2, extra_args=["--override", "controller.quorum.election.timeout.ms=500"])
    for node_id, node in cluster.nodes.items():
        node.args += overrides(certs[f"controller-{node_id}"])
    [kafka_port] = free_ports(1)
    cluster.nodes[1].args += ["--kafka-listener", f"127.0.0.1:{kafka_port}"]  # SSL as well, the same reloads
    with cluster:
        address = cluster.nodes[1].address
        leader = None
        async with asyncio.timeout(30):
            while leader is None:
                views = []
                for node in cluster.nodes.values():
                    try:
                        views.append(await describe(node.address, admin))
                    except grpc.aio.AioRpcError:
                        break
                # Two voters agree on a leader only if each reached the other: the peer streams work over TLS.
                if len(views) == 2 and len({(v.leader_id, v.leader_epoch) for v in views}) == 1:
                    if views[0].leader_id > 0 and views[0].high_watermark > 0:
                        leader = views[0].leader_id
                if leader is None:
                    await asyncio.sleep(0.1)

        with pytest.raises(grpc.aio.AioRpcError) as plaintext:
            await describe(address, None)
        assert plaintext.value.code() == grpc.StatusCode.UNAVAILABLE

        broker = channel_credentials(TlsSettings.from_properties(certs["broker-101"].properties()))  # type: ignore[arg-type]
        async with grpc.aio.secure_channel(address, broker) as channel:
            call = pb_grpc.QuorumPeerStub(channel).Exchange()
            await call.write(to_proto(2, VoteRequest("any", 2, 99, 99, 1 << 40, pre_vote=False)))
            with pytest.raises(grpc.aio.AioRpcError) as posing:
                async with asyncio.timeout(5):
                    async for _ in call:
                        pass
            assert posing.value.code() == grpc.StatusCode.PERMISSION_DENIED
        after = await describe(address, admin)
        assert after.leader_id == leader and after.leader_epoch == views[0].leader_epoch  # nothing was disturbed

        cluster.nodes[1].proc.send_signal(signal.SIGHUP)  # type: ignore[union-attr]
        await asyncio.sleep(0.2)
        await describe(address, admin)  # a new connection: the reload happens before its handshake
        await asyncio.to_thread(kafka_handshake, kafka_port, certs["admin"])  # and on the Kafka listener
        log = cluster.nodes[1].log_path.read_text()
        assert "tls_reload_requested" in log and "tls_certificate_reloaded" in log
        assert "kafka_tls_certificate_reloaded" in log
        assert '"reason": "node 101 sent a message as node 2"' in log
        assert '"tls": true' in log


def kafka_handshake(port: int, files: CertFiles) -> None:
    context = ssl.create_default_context(cafile=str(files.ca))
    context.load_cert_chain(files.certificate, files.key)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            assert sock.version() is not None
