"""Python ``ssl`` server contexts that follow the certificate files, for listeners that are not gRPC's: the metrics
endpoint (:mod:`pykraft.metrics_http`) and the Kafka listener (:mod:`pykraft.kafka.listener`).

Each new connection asks :meth:`ReloadingSslContext.context` for the context to handshake with: the files' stat
stamps are compared (cheap) and, when they changed (or after :meth:`~ReloadingSslContext.request_reload`, a SIGHUP
handler's call), the files are read and checked again, as :class:`pykraft.security.tls.ReloadingServerCredentials`
does for gRPC. A half-renewed pair (a new key beside the old certificate) is not taken: the old context stays in use
until the files next change. Established connections keep the context they were made with.
"""

from __future__ import annotations

import ssl
import threading

import structlog

from pykraft.security.tls import TlsConfigError, TlsSettings

log = structlog.get_logger("pykraft.security.ssl_context")


def server_ssl_context(tls: TlsSettings, *, client_auth_required: bool) -> ssl.SSLContext:
    """A TLS server context from the process's files; ``client_auth_required``: only clients with a certificate from
    ``ssl.ca.location`` (CERT_REQUIRED). Raises :class:`TlsConfigError` naming the setting for a bad file."""
    tls.load(server=True)  # Kafka-named errors; refuses a key that is not the certificate's
    assert tls.certificate is not None and tls.key is not None  # load(server=True) checked
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(tls.certificate, tls.key)
    if client_auth_required:
        if tls.ca is None:
            raise TlsConfigError("ssl.ca.location must be set when client certificates are required")
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=tls.ca)
    return context


class ReloadingSslContext:
    """An SSL context for new connections that follows the certificate files (see the module docstring).
    ``name`` prefixes its log events (``<name>_tls_certificate_reloaded``, ``<name>_tls_reload_failed``)."""

    def __init__(self, tls: TlsSettings, *, client_auth_required: bool, name: str) -> None:
        self.tls = tls
        self.client_auth_required = client_auth_required
        self.name = name
        self._lock = threading.Lock()  # connections may be accepted on one thread and reloads asked from another
        self._stamp = tls.stamp()
        self._context = self._build()  # a bad file at start is an error, not a log line
        self._forced = False
        self.reloads = 0

    def request_reload(self) -> None:
        """Read the files again before the next connection even if their stat stamps did not change (SIGHUP)."""
        self._forced = True

    def context(self) -> ssl.SSLContext:
        with self._lock:
            stamp = self.tls.stamp()
            if stamp != self._stamp or self._forced:
                self._stamp, self._forced = stamp, False
                try:
                    self._context = self._build()
                except (TlsConfigError, ssl.SSLError, OSError) as e:  # half-renewed files: keep the old ones
                    log.warning(f"{self.name}_tls_reload_failed", error=str(e))
                else:
                    self.reloads += 1
                    log.info(f"{self.name}_tls_certificate_reloaded", reloads=self.reloads)
            return self._context

    def _build(self) -> ssl.SSLContext:
        return server_ssl_context(self.tls, client_auth_required=self.client_auth_required)
