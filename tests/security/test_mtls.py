"""Mutual TLS over real gRPC connections (an in-process grpc.aio server on 127.0.0.1): who gets in, who they are,
and a renewed certificate served without a restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.principal import principal_of
from pykraft.security.tls import ClientAuth, ReloadingServerCredentials, TlsSettings, channel_credentials

METHOD = "/pykraft.test.Echo/Whoami"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), ["controller-1", "broker-3", "admin"])


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    """A certificate with a principal name the cluster knows, from another CA."""
    return ensure_cluster_certificates(tmp_path_factory.mktemp("other-ca"), ["admin"])["admin"]


def server_settings(files: CertFiles, **kwargs: object) -> TlsSettings:
    return TlsSettings(certificate=files.certificate, key=files.key, ca=files.ca, **kwargs)  # type: ignore[arg-type]


def client_settings(files: CertFiles | None, ca: Path) -> TlsSettings:
    if files is None:
        return TlsSettings(ca=ca)
    return TlsSettings(certificate=files.certificate, key=files.key, ca=ca)


class Server:
    def __init__(self) -> None:
        self.seen: list[str] = []  # the principal of every request the handler ran for
        self.port = 0

    async def whoami(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        principal = str(principal_of(context, self.mapper))
        self.seen.append(principal)
        return principal.encode()

    @contextlib.asynccontextmanager
    async def run(self, credentials: grpc.ServerCredentials | None, settings: TlsSettings) -> AsyncIterator[Server]:
        self.mapper = settings.mapper()
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            "pykraft.test.Echo", {"Whoami": grpc.unary_unary_rpc_method_handler(self.whoami)}
        )
        server.add_generic_rpc_handlers((handler,))
        if credentials is None:
            self.port = server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = server.add_secure_port("127.0.0.1:0", credentials)
        await server.start()
        try:
            yield self
        finally:
            await server.stop(None)


async def whoami(port: int, credentials: grpc.ChannelCredentials | None) -> str:
    target = f"127.0.0.1:{port}"
    channel = grpc.aio.insecure_channel(target) if credentials is None else grpc.aio.secure_channel(target, credentials)
    async with channel:
        reply = await channel.unary_unary(METHOD)(b"", timeout=5)
    return reply.decode()


def served_certificate(port: int, client: CertFiles) -> x509.Certificate:
    """The certificate the server presents to a new connection (a plain TLS handshake, ALPN h2 as gRPC's)."""
    ctx = ssl.create_default_context(cafile=str(client.ca))
    ctx.load_cert_chain(client.certificate, client.key)
    ctx.set_alpn_protocols(["h2"])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
        ctx.wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


async def test_a_client_certificate_from_the_cluster_ca_is_its_principal(cluster: dict[str, CertFiles]) -> None:
    settings = server_settings(cluster["controller-1"])
    srv = Server()
    async with srv.run(ReloadingServerCredentials(settings).credentials(), settings):
        ca = cluster["controller-1"].ca
        assert await whoami(srv.port, channel_credentials(client_settings(cluster["admin"], ca))) == "User:admin"
        assert await whoami(srv.port, channel_credentials(client_settings(cluster["broker-3"], ca))) == "User:broker-3"
    assert srv.seen == ["User:admin", "User:broker-3"]


@pytest.mark.parametrize("client", ["no certificate", "another CA", "plaintext"])
async def test_other_clients_are_refused_before_any_handler_runs(
    cluster: dict[str, CertFiles], stranger: CertFiles, client: str
) -> None:
    settings = server_settings(cluster["controller-1"])
    ca = cluster["controller-1"].ca
    credentials = {
        "no certificate": channel_credentials(client_settings(None, ca)),
        "another CA": channel_credentials(client_settings(stranger, ca)),  # trusts our server, but is not trusted
        "plaintext": None,
    }[client]
    srv = Server()
    async with srv.run(ReloadingServerCredentials(settings).credentials(), settings):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await whoami(srv.port, credentials)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # The same server lets a good client in, so the refusal was about the client, not a dead server.
        assert await whoami(srv.port, channel_credentials(client_settings(cluster["admin"], ca))) == "User:admin"
    assert srv.seen == ["User:admin"]


async def test_a_client_refuses_a_server_from_another_ca(cluster: dict[str, CertFiles], stranger: CertFiles) -> None:
    settings = TlsSettings(certificate=stranger.certificate, key=stranger.key, ca=cluster["admin"].ca)
    srv = Server()
    async with srv.run(ReloadingServerCredentials(settings).credentials(), settings):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await whoami(srv.port, channel_credentials(client_settings(cluster["admin"], cluster["admin"].ca)))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert srv.seen == []


async def test_anonymous_without_client_auth_and_on_plaintext(cluster: dict[str, CertFiles]) -> None:
    settings = server_settings(cluster["controller-1"], client_auth=ClientAuth.NONE)
    client = channel_credentials(client_settings(cluster["admin"], cluster["admin"].ca))
    srv = Server()
    async with srv.run(ReloadingServerCredentials(settings).credentials(), settings):
        # ssl.client.auth=none: the server asks for no certificate, so even a client that has one is anonymous.
        assert await whoami(srv.port, client) == "User:ANONYMOUS"
    async with srv.run(None, settings):
        assert await whoami(srv.port, None) == "User:ANONYMOUS"


async def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    files = ensure_cluster_certificates(tmp_path, ["controller-1", "admin"])
    settings = server_settings(files["controller-1"])
    reloading = ReloadingServerCredentials(settings)
    admin = files["admin"]
    srv = Server()
    async with srv.run(reloading.credentials(), settings):
        first = await asyncio.to_thread(served_certificate, srv.port, admin)
        assert await asyncio.to_thread(served_certificate, srv.port, admin) == first  # unchanged files: same cert
        assert reloading.reloads == 0

        # Half a renewal: a new key beside the old certificate is not taken; the old pair goes on being served.
        old_key = files["controller-1"].key.read_bytes()
        files["controller-1"].key.write_bytes(admin.key.read_bytes())
        assert await asyncio.to_thread(served_certificate, srv.port, admin) == first
        files["controller-1"].key.write_bytes(old_key)

        # A real renewal (a new SAN re-issues every leaf): the next connection gets the new certificate.
        ensure_cluster_certificates(tmp_path, ["controller-1", "admin"], dns=["localhost", "controller-1.example"])
        second = await asyncio.to_thread(served_certificate, srv.port, admin)
        assert second.serial_number != first.serial_number
        assert second.public_bytes(Encoding.PEM) == files["controller-1"].certificate.read_bytes()
        assert reloading.reloads == 1
        assert await whoami(srv.port, channel_credentials(client_settings(admin, admin.ca))) == "User:admin"

        # SIGHUP-style: read again although nothing changed.
        reloading.request_reload()
        assert await asyncio.to_thread(served_certificate, srv.port, admin) == second
        assert reloading.reloads == 2


def test_key_files_are_private(cluster: dict[str, CertFiles]) -> None:
    for files in cluster.values():
        assert os.stat(files.key).st_mode & 0o777 == 0o600
        assert os.stat(files.certificate).st_mode & 0o077 == 0o044  # certificates are public
    assert os.stat(cluster["admin"].ca.with_suffix(".key")).st_mode & 0o777 == 0o600
