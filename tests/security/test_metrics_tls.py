"""TLS for the metrics endpoints (pykraft/metrics_http.py): on by default when the process runs on TLS, served with
its certificate, optionally requiring a client certificate from its CA, following renewed files; and the settings
(``metrics.tls``, ``metrics.ssl.client.auth``) as ``pykraft node`` and ``pykraft broker`` read them."""

from __future__ import annotations

import asyncio
import shutil
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from wsgiref.simple_server import WSGIServer

import pytest
from prometheus_client import CollectorRegistry, Gauge, make_wsgi_app
from test_acls_api import live_node

from pykraft.broker import run as run_broker
from pykraft.cli import build_parser
from pykraft.metrics import serve_metrics
from pykraft.metrics_http import MetricsTls, ReloadingSslContext, metrics_tls_settings, serve_wsgi
from pykraft.node import ConfigError, settings_from_args
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.tls import TlsSettings
from pykraft.testing import free_ports
from quorum.fault import LoggingFaultHandler


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), ["controller-1", "broker-101", "prometheus"])


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("other-ca"), ["prometheus"])["prometheus"]


def tls_of(files: CertFiles) -> TlsSettings:
    return TlsSettings(certificate=files.certificate, key=files.key, ca=files.ca)


def client_context(ca: Path, cert: CertFiles | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(cert.certificate, cert.key)
    return context


def get(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        return response.read().decode()


def served(tls: ReloadingSslContext | None) -> tuple[str, WSGIServer]:
    registry = CollectorRegistry()
    Gauge("probe_value", "a value to find", registry=registry).set(7)
    [port] = free_ports(1)
    server = serve_wsgi(make_wsgi_app(registry), "127.0.0.1", port, tls, "test-metrics")
    return f"127.0.0.1:{port}", server


def test_the_settings_default_to_tls_with_the_process_and_refuse_what_cannot_work(certs: dict[str, CertFiles]) -> None:
    tls = tls_of(certs["controller-1"])
    assert metrics_tls_settings({}, None) is None  # plaintext process: plain HTTP
    assert metrics_tls_settings({}, tls) == MetricsTls(tls, client_auth_required=False)  # TLS process: HTTPS
    assert metrics_tls_settings({"metrics.tls": "false"}, tls) is None
    assert metrics_tls_settings({"metrics.ssl.client.auth": "required"}, tls) == MetricsTls(tls, True)
    for props, words in (
        ({"metrics.tls": "true"}, "metrics.tls=true needs security.protocol=SSL"),
        ({"metrics.tls": "yes"}, "metrics.tls must be true or false"),
        ({"metrics.ssl.client.auth": "requested"}, "metrics.ssl.client.auth must be none or required"),
    ):
        with pytest.raises(ValueError, match=words):
            metrics_tls_settings(props, None if props.get("metrics.tls") == "true" else tls)
    with pytest.raises(ValueError, match="is set but the metrics are served over plain HTTP"):
        metrics_tls_settings({"metrics.tls": "false", "metrics.ssl.client.auth": "none"}, tls)
    with pytest.raises(ValueError, match=r"needs ssl\.ca\.location"):
        metrics_tls_settings({"metrics.ssl.client.auth": "required"}, TlsSettings(tls.certificate, tls.key, None))


def test_node_and_broker_read_the_settings(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    node = ["node", "--node-id", "1", "--controller-quorum-voters", "1@127.0.0.1:19091", "--data-dir", str(tmp_path)]
    ssl_overrides = [a for k, v in certs["controller-1"].properties().items() for a in ("--override", f"{k}={v}")]
    parser = build_parser()
    assert settings_from_args(parser.parse_args(node)).metrics_tls is None
    on = settings_from_args(parser.parse_args([*node, *ssl_overrides])).metrics_tls
    assert on is not None and on.tls.certificate == certs["controller-1"].certificate and not on.client_auth_required
    off = [*node, *ssl_overrides, "--override", "metrics.tls=false"]
    assert settings_from_args(parser.parse_args(off)).metrics_tls is None
    with pytest.raises(ConfigError, match=r"metrics\.tls=true needs security\.protocol=SSL"):
        settings_from_args(parser.parse_args([*node, "--override", "metrics.tls=true"]))
    broker = ["broker", "--broker-id", "101", "--bootstrap-server", "127.0.0.1:19091", "--metrics-port", "0"]
    assert run_broker(parser.parse_args([*broker, "--override", "metrics.tls=true"])) == 2  # refused before start


async def test_https_with_the_process_certificate_and_plain_http_refused(certs: dict[str, CertFiles]) -> None:
    address, server = served(ReloadingSslContext(MetricsTls(tls_of(certs["controller-1"]))))
    try:
        body = await asyncio.to_thread(get, f"https://{address}/metrics", client_context(certs["controller-1"].ca))
        assert "probe_value 7.0" in body
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            await asyncio.to_thread(get, f"http://{address}/metrics")
        # A client that connects and says nothing holds its own thread, not the server: others are answered.
        with socket.create_connection(address.split(":")) as silent:  # type: ignore[arg-type]
            body = await asyncio.to_thread(get, f"https://{address}/", client_context(certs["controller-1"].ca))
            assert "probe_value" in body
            silent.settimeout(0)
    finally:
        server.shutdown()
        server.server_close()


async def test_client_certificates_required_and_renewed_files_served(
    tmp_path: Path, certs: dict[str, CertFiles], stranger: CertFiles
) -> None:
    # The server's files in a directory of their own, to be renewed in place.
    own = CertFiles(tmp_path / "server.crt", tmp_path / "server.key", certs["controller-1"].ca)
    shutil.copy(certs["controller-1"].certificate, own.certificate)
    shutil.copy(certs["controller-1"].key, own.key)
    reloading = ReloadingSslContext(MetricsTls(tls_of(own), client_auth_required=True))
    address, server = served(reloading)
    url = f"https://{address}/metrics"
    ca = certs["controller-1"].ca
    try:
        assert "probe_value" in await asyncio.to_thread(get, url, client_context(ca, certs["prometheus"]))
        for refused in (client_context(ca), client_context(ca, stranger)):  # none, or another CA's
            with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError, OSError)):
                await asyncio.to_thread(get, url, refused)

        def served_name() -> str:
            context = client_context(ca, certs["prometheus"])
            with socket.create_connection(address.split(":")) as raw:  # type: ignore[arg-type]
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    subject = dict(item[0] for item in tls.getpeercert()["subject"])  # type: ignore[index]
                    return str(subject["commonName"])

        assert await asyncio.to_thread(served_name) == "controller-1"
        shutil.copy(certs["broker-101"].certificate, own.certificate)  # renewed: a new pair in place
        shutil.copy(certs["broker-101"].key, own.key)
        assert await asyncio.to_thread(served_name) == "broker-101" and reloading.reloads == 1
    finally:
        server.shutdown()
        server.server_close()


async def test_a_node_serves_its_metrics_over_https(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    [port] = free_ports(1)
    async with live_node(tmp_path) as live:
        async with asyncio.timeout(10):
            while not live.controller.active:
                await asyncio.sleep(0.01)
        tls = ReloadingSslContext(MetricsTls(tls_of(certs["controller-1"])))
        serve_metrics(live.controller.raft, live.controller, "127.0.0.1", port, LoggingFaultHandler(), tls)  # type: ignore[arg-type]
        context = client_context(certs["controller-1"].ca)
        body = await asyncio.to_thread(get, f"https://127.0.0.1:{port}/metrics", context)
        assert "kafka_controller_active_controller_count 1.0" in body
