"""The HTTP(S) server of ``/metrics`` (controller nodes and broker agents), and its TLS settings.

With the process on TLS (``security.protocol=SSL``) the metrics are served over HTTPS with the process's own
certificate (``ssl.certificate.location`` / ``ssl.key.location``) by default: an operator who turned TLS on expects
no plaintext port left. Two settings (``--override`` or the ``--config`` file, as the others):

- ``metrics.tls``: ``true`` (the default under SSL) or ``false`` (plain HTTP, e.g. for a scraper that cannot
  speak TLS); ``true`` under PLAINTEXT is refused: there is no certificate to serve.
- ``metrics.ssl.client.auth``: ``none`` (the default: a scraper checks the server against ``ssl.ca.location`` and
  needs no certificate of its own) or ``required`` (only clients with a certificate from ``ssl.ca.location``; a
  scraper given one gets a principal on the admin API as well, which is why it is not the default).

The certificate follows its files as the gRPC listeners' do (:class:`pykraft.security.tls.ReloadingServerCredentials`):
before each new connection the files' stat stamps are compared and, when they changed (or after
:meth:`ReloadingSslContext.request_reload`, on SIGHUP), the files are read again; a half-renewed pair keeps the old
certificate in use. Handshakes run in the connection's own thread with a deadline, so a client that connects and
sends nothing holds one thread for HANDSHAKE_TIMEOUT_S, never the accept loop.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from prometheus_client.exposition import ThreadingWSGIServer

from pykraft.security.ssl_context import ReloadingSslContext as _ReloadingSslContext
from pykraft.security.tls import CA_LOCATION, SECURITY_PROTOCOL, TlsSettings

log = structlog.get_logger("pykraft.metrics")

METRICS_TLS = "metrics.tls"
METRICS_CLIENT_AUTH = "metrics.ssl.client.auth"
METRICS_SETTINGS = (METRICS_TLS, METRICS_CLIENT_AUTH)
HANDSHAKE_TIMEOUT_S = 10.0  # and each read or write of a request after it

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


@dataclass(frozen=True)
class MetricsTls:
    tls: TlsSettings  # the process's own files
    client_auth_required: bool = False


def metrics_tls_settings(props: dict[str, str], tls: TlsSettings | None) -> MetricsTls | None:
    """The metrics endpoint's TLS (None: plain HTTP) from the process's properties and TLS settings. Raises
    ValueError naming the setting."""
    raw = props.get(METRICS_TLS)
    enabled = tls is not None
    if raw is not None:
        value = raw.strip().lower()
        if value not in ("true", "false"):
            raise ValueError(f"{METRICS_TLS} must be true or false, got {raw!r}")
        enabled = value == "true"
    raw_auth = props.get(METRICS_CLIENT_AUTH)
    if not enabled:
        if raw_auth is not None:
            raise ValueError(f"{METRICS_CLIENT_AUTH} is set but the metrics are served over plain HTTP")
        return None
    if tls is None:
        raise ValueError(
            f"{METRICS_TLS}=true needs {SECURITY_PROTOCOL}=SSL: the metrics are served with the process's certificate"
        )
    auth = (raw_auth or "none").strip().lower()
    if auth not in ("none", "required"):
        raise ValueError(f"{METRICS_CLIENT_AUTH} must be none or required, got {raw_auth!r}")
    if auth == "required" and tls.ca is None:
        raise ValueError(f"{METRICS_CLIENT_AUTH}=required needs {CA_LOCATION}: the clients' certificates' CA")
    return MetricsTls(tls, auth == "required")


class ReloadingSslContext(_ReloadingSslContext):
    """The metrics endpoint's SSL context for new connections, following the certificate files (see the module
    docstring and :mod:`pykraft.security.ssl_context`)."""

    def __init__(self, settings: MetricsTls) -> None:
        super().__init__(settings.tls, client_auth_required=settings.client_auth_required, name="metrics")
        self.settings = settings


class _QuietHandler(WSGIRequestHandler):
    timeout = HANDSHAKE_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        """A scrape every few seconds is not worth a stderr line."""


def serve_wsgi(app: WsgiApp, host: str, port: int, tls: ReloadingSslContext | None, name: str) -> WSGIServer:
    """Serve ``app`` on ``host:port`` from a daemon thread, a thread per request (as prometheus_client's
    ``start_http_server``), over HTTPS when ``tls`` is given. Raises OSError when the port cannot be bound.
    ``shutdown()`` stops the server, ``server_close()`` frees the port."""
    # The address family of what host resolves to (an IPv6 host needs AF_INET6), set on a class of this server's
    # own because socketserver reads it from the class before binding.
    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(ThreadingWSGIServer):
        address_family = family

        def get_request(self) -> tuple[Any, Any]:
            sock, address = super().get_request()
            if tls is None:
                return sock, address
            # The handshake waits for the request's own thread (finish_request): a silent client must not hold
            # the accept loop.
            return tls.context().wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

        def finish_request(self, request: Any, client_address: Any) -> None:
            if tls is not None:
                request.settimeout(HANDSHAKE_TIMEOUT_S)
                try:
                    request.do_handshake()
                except (OSError, ssl.SSLError) as e:  # no certificate, another CA's, plaintext, too slow
                    log.debug("metrics_handshake_failed", peer=str(client_address[0]), error=str(e))
                    return
            super().finish_request(request, client_address)

        def handle_error(self, request: Any, client_address: Any) -> None:
            """A client that went away mid-answer: one DEBUG line, not socketserver's traceback on stderr."""
            log.debug("metrics_request_failed", peer=str(client_address[0]))

    server = make_server(sockaddr[0], port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server


def metrics_url(host: str, port: int, tls: object | None, path: str = "/metrics") -> str:
    where = f"[{host}]" if ":" in host else host
    return f"{'https' if tls is not None else 'http'}://{where}:{port}{path}"
