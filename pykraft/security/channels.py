"""Client channels, plaintext or TLS, for every pykraft client (admin client, CLIs, broker agents).

A client holds :class:`ClientTls` (its channel credentials, built once from :class:`~.tls.TlsSettings`, and the name
it expects in servers' certificates) or None for plaintext, and opens each channel with :func:`aio_channel` or
:func:`blocking_channel`. By default gRPC checks the dialled host against the server certificate's subject
alternative names: the cluster CA's certificates carry ``localhost`` and ``127.0.0.1``, so dialling either verifies.
``server_name`` replaces the dialled host in that check (gRPC's ``ssl_target_name_override``), for a server reached
at an address its certificate does not name, or to insist on one principal (``controller-2``).

:func:`unavailable_cause` turns gRPC's UNAVAILABLE details into one line that says what a failed handshake means
(plaintext against TLS, TLS against plaintext, another CA, a certificate that does not name the host).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from pykraft.security.tls import TlsSettings, channel_credentials

Options = Sequence[tuple[str, Any]]


@dataclass(frozen=True)
class ClientTls:
    credentials: grpc.ChannelCredentials
    server_name: str | None = None  # None: the dialled host must be in the server's certificate

    @classmethod
    def of(
        cls, tls: TlsSettings | grpc.ChannelCredentials | ClientTls | None, server_name: str | None = None
    ) -> ClientTls | None:
        """From settings (their files read and checked now: :class:`~.tls.TlsConfigError`), ready credentials,
        or a ClientTls; None stays None (plaintext)."""
        if tls is None or isinstance(tls, ClientTls):
            return tls
        credentials = channel_credentials(tls) if isinstance(tls, TlsSettings) else tls
        return cls(credentials, server_name)

    def options(self, options: Options = ()) -> list[tuple[str, Any]]:
        extra = [("grpc.ssl_target_name_override", self.server_name)] if self.server_name else []
        return [*options, *extra]


def aio_channel(target: str, tls: ClientTls | None, options: Options = ()) -> grpc.aio.Channel:
    if tls is None:
        return grpc.aio.insecure_channel(target, options=list(options))
    return grpc.aio.secure_channel(target, tls.credentials, options=tls.options(options))


def blocking_channel(target: str, tls: ClientTls | None, options: Options = ()) -> grpc.Channel:
    if tls is None:
        return grpc.insecure_channel(target, options=list(options))
    return grpc.secure_channel(target, tls.credentials, options=tls.options(options))


def unavailable_cause(details: str | None, tls: bool) -> str:
    """The cause in an UNAVAILABLE error's details, in words; the last part of gRPC's own text otherwise."""
    text = (details or "").splitlines()[0] if details else ""
    if "WRONG_VERSION_NUMBER" in text:
        return "TLS handshake failed: the server does not speak TLS (a PLAINTEXT listener?)"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "TLS handshake failed: the server's certificate is not signed by the CA in ssl.ca.location"
    if "Hostname Verification" in text:
        return "TLS handshake failed: the server's certificate does not name the host dialled (or server_name)"
    if text.endswith("Socket closed"):
        if tls:
            # A server that requires client certificates closes the connection when ours is missing or untrusted.
            return "Socket closed; a TLS server closes connections whose client certificate is missing or untrusted"
        return "Socket closed; a TLS server closes plaintext connections: use security.protocol=SSL"
    return text.rsplit(": ", 1)[-1][:100]
