"""TLS settings (Kafka's names, PEM files) and the gRPC credentials built from them.

``security.protocol`` = ``PLAINTEXT`` (the default) | ``SSL``; with SSL:

- ``ssl.certificate.location``: this process's certificate chain (PEM), leaf first;
- ``ssl.key.location``: its unencrypted private key (PEM; keep it 0600);
- ``ssl.ca.location``: the CA certificate(s) (PEM) that peers' certificates must chain to;
- ``ssl.client.auth``: ``required`` (the default) — a server refuses, during the handshake, any client without a
  certificate from that CA — or ``none`` — it asks for none and every client is ``User:ANONYMOUS``. Kafka's
  ``requested`` (ask, but accept a client without one) is refused with an error: gRPC's Python API can only require a
  client certificate or not ask for one;
- ``ssl.principal.mapping.rules``: see :mod:`pykraft.security.principal`.

Every file is checked when the settings are loaded, with errors naming the setting and the path. A server built with
:class:`ReloadingServerCredentials` picks up renewed files without a restart: gRPC asks it before every TLS handshake,
it compares the files' stat stamps (cheap) and reads them again only when they changed or after
:meth:`~ReloadingServerCredentials.request_reload` (a SIGHUP handler's call). New connections get the new certificate;
established ones keep theirs. Files caught mid-renewal (a new key beside the old certificate) are not taken: the
server keeps what it has and tries again when the files next change.
"""

from __future__ import annotations

import datetime as dt
import enum
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

import grpc
import structlog
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from pykraft.security.principal import SslPrincipalMapper

log = structlog.get_logger("pykraft.security.tls")

SECURITY_PROTOCOL = "security.protocol"
CERTIFICATE_LOCATION = "ssl.certificate.location"
KEY_LOCATION = "ssl.key.location"
CA_LOCATION = "ssl.ca.location"
CLIENT_AUTH = "ssl.client.auth"
PRINCIPAL_MAPPING_RULES = "ssl.principal.mapping.rules"
TLS_SETTINGS = (
    SECURITY_PROTOCOL,
    CERTIFICATE_LOCATION,
    KEY_LOCATION,
    CA_LOCATION,
    CLIENT_AUTH,
    PRINCIPAL_MAPPING_RULES,
)


class TlsConfigError(ValueError):
    """A TLS setting is missing, malformed, or names a file that is not what it should be."""


class ClientAuth(enum.StrEnum):
    REQUIRED = "required"
    REQUESTED = "requested"
    NONE = "none"


@dataclass(frozen=True)
class PemMaterial:
    """The bytes gRPC takes, read and checked together."""

    certificate_chain: bytes | None
    private_key: bytes | None
    ca: bytes | None


@dataclass(frozen=True)
class TlsSettings:
    certificate: Path | None = None
    key: Path | None = None
    ca: Path | None = None
    client_auth: ClientAuth = ClientAuth.REQUIRED
    principal_mapping_rules: str | None = None  # None: pykraft's default (the CN), see principal.py

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> TlsSettings | None:
        """The TLS settings among Kafka-style properties; None when ``security.protocol`` is PLAINTEXT."""
        protocol = props.get(SECURITY_PROTOCOL, "PLAINTEXT").strip().upper()
        locations = [n for n in (CERTIFICATE_LOCATION, KEY_LOCATION, CA_LOCATION) if props.get(n, "").strip()]
        if protocol == "PLAINTEXT":
            if locations:
                # Kafka would ignore them; a forgotten security.protocol=SSL is likelier than a wish for plaintext.
                raise TlsConfigError(
                    f"{locations[0]} is set but {SECURITY_PROTOCOL} is PLAINTEXT: "
                    f"set {SECURITY_PROTOCOL}=SSL to use TLS"
                )
            return None
        if protocol != "SSL":
            raise TlsConfigError(f"{SECURITY_PROTOCOL} must be PLAINTEXT or SSL, got {props[SECURITY_PROTOCOL]!r}")

        def path(name: str) -> Path | None:
            value = props.get(name, "").strip()
            return Path(value).expanduser() if value else None

        raw_auth = props.get(CLIENT_AUTH, ClientAuth.REQUIRED.value).strip().lower()
        try:
            client_auth = ClientAuth(raw_auth)
        except ValueError:
            choices = ", ".join(a.value for a in ClientAuth)
            raise TlsConfigError(f"{CLIENT_AUTH} must be one of {choices}, got {props[CLIENT_AUTH]!r}") from None
        settings = cls(
            certificate=path(CERTIFICATE_LOCATION),
            key=path(KEY_LOCATION),
            ca=path(CA_LOCATION),
            client_auth=client_auth,
            principal_mapping_rules=props.get(PRINCIPAL_MAPPING_RULES),
        )
        settings.mapper()  # refuse bad rules now, not at the first connection
        return settings

    def mapper(self) -> SslPrincipalMapper:
        try:
            return SslPrincipalMapper(self.principal_mapping_rules)
        except ValueError as e:
            raise TlsConfigError(f"{PRINCIPAL_MAPPING_RULES}: {e}") from None

    def load(self, *, server: bool) -> PemMaterial:
        """Read and check the files a server (certificate, key, and the CA when clients must present
        certificates) or a client (the CA; certificate and key together, if any) needs."""
        if server:
            if self.client_auth is ClientAuth.REQUESTED:
                raise TlsConfigError(
                    f"{CLIENT_AUTH}=requested is not supported (gRPC can require a client certificate or not ask for "
                    "one): use required or none"
                )
            for name, value in ((CERTIFICATE_LOCATION, self.certificate), (KEY_LOCATION, self.key)):
                if value is None:
                    raise TlsConfigError(f"{name} must be set for a TLS server ({SECURITY_PROTOCOL}=SSL)")
            if self.ca is None and self.client_auth is ClientAuth.REQUIRED:
                raise TlsConfigError(f"{CA_LOCATION} must be set when {CLIENT_AUTH}=required")
        elif (self.certificate is None) != (self.key is None):
            have, missing = (
                (CERTIFICATE_LOCATION, KEY_LOCATION) if self.key is None else (KEY_LOCATION, CERTIFICATE_LOCATION)
            )
            raise TlsConfigError(f"{have} is set without {missing}: a client certificate needs both")
        chain = key = ca = None
        if self.certificate is not None and self.key is not None:
            chain = _read(CERTIFICATE_LOCATION, self.certificate)
            certs = _certificates(CERTIFICATE_LOCATION, self.certificate, chain)
            key = _read(KEY_LOCATION, self.key)
            _check_key(key, certs[0], self.key, self.certificate)
            expires = certs[0].not_valid_after_utc
            if expires <= dt.datetime.now(dt.UTC):
                raise TlsConfigError(
                    f"{CERTIFICATE_LOCATION}: {self.certificate}: the certificate expired at {expires}"
                )
        if self.ca is not None:
            ca = _read(CA_LOCATION, self.ca)
            _certificates(CA_LOCATION, self.ca, ca)
        return PemMaterial(chain, key, ca)

    def stamp(self) -> tuple[tuple[int, int, int] | None, ...]:
        """The files' (inode, size, mtime): changes when any of them is rewritten or replaced."""
        out = []
        for p in (self.certificate, self.key, self.ca):
            try:
                st = os.stat(p) if p is not None else None
            except OSError:
                st = None
            out.append((st.st_ino, st.st_size, st.st_mtime_ns) if st is not None else None)
        return tuple(out)


def _read(setting: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise TlsConfigError(f"{setting}: {path}: no such file") from None
    except IsADirectoryError:
        raise TlsConfigError(f"{setting}: {path} is a directory, not a PEM file") from None
    except OSError as e:
        raise TlsConfigError(f"{setting}: {path}: {e.strerror}") from None


def _certificates(setting: str, path: Path, data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsConfigError(f"{setting}: {path} holds no PEM certificate") from None


def _check_key(data: bytes, cert: x509.Certificate, key_path: Path, cert_path: Path) -> None:
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise TlsConfigError(
            f"{KEY_LOCATION}: {key_path}: the key is encrypted; an unencrypted PEM key is needed"
        ) from None
    except (ValueError, UnsupportedAlgorithm):
        raise TlsConfigError(f"{KEY_LOCATION}: {key_path} holds no PEM private key") from None
    if key.public_key() != cert.public_key():
        raise TlsConfigError(
            f"{KEY_LOCATION}: {key_path} is not the key of the certificate in {CERTIFICATE_LOCATION} ({cert_path})"
        )


def server_credentials(settings: TlsSettings) -> grpc.ServerCredentials:
    """Fixed credentials from the files as they are now (see :class:`ReloadingServerCredentials` for renewals)."""
    m = settings.load(server=True)
    assert m.private_key is not None and m.certificate_chain is not None
    return grpc.ssl_server_credentials(
        [(m.private_key, m.certificate_chain)],
        root_certificates=m.ca,
        require_client_auth=settings.client_auth is ClientAuth.REQUIRED,
    )


def channel_credentials(settings: TlsSettings) -> grpc.ChannelCredentials:
    """A client's: verifies the server against ``ssl.ca.location`` (the system's roots when unset) and presents this
    process's certificate when one is set."""
    m = settings.load(server=False)
    return grpc.ssl_channel_credentials(m.ca, m.private_key, m.certificate_chain)


def client_ssl_context(settings: TlsSettings) -> ssl.SSLContext:
    """:func:`channel_credentials` as a Python SSL context, for connections that are not gRPC's (the peer frame
    connections): the same CA to verify the server, the same certificate to present. The caller names the server
    (``server_hostname``), and its certificate must carry that name."""
    m = settings.load(server=False)  # the same checks and errors
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=m.ca.decode() if m.ca else None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if settings.certificate is not None and settings.key is not None:
        context.load_cert_chain(settings.certificate, settings.key)
    return context


def _certificate_configuration(m: PemMaterial) -> grpc.ServerCertificateConfiguration:
    assert m.private_key is not None and m.certificate_chain is not None
    return grpc.ssl_server_certificate_configuration([(m.private_key, m.certificate_chain)], root_certificates=m.ca)


class ReloadingServerCredentials:
    """Server credentials that follow the files: see the module docstring."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()  # gRPC calls the fetcher from its own threads
        self._stamp = settings.stamp()
        self._initial = settings.load(server=True)  # a bad file at start is an error, not a log line
        self._forced = False
        self.reloads = 0

    def credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            _certificate_configuration(self._initial),
            self._fetch,
            require_client_authentication=self.settings.client_auth is ClientAuth.REQUIRED,
        )

    def request_reload(self) -> None:
        """Read the files again before the next handshake even if their stat stamps did not change (SIGHUP)."""
        self._forced = True

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        # Called by gRPC before each handshake; must not raise (gRPC would fail the handshake).
        try:
            with self._lock:
                stamp = self.settings.stamp()
                if stamp == self._stamp and not self._forced:
                    return None
                self._stamp, self._forced = stamp, False
                try:
                    material = self.settings.load(server=True)
                except TlsConfigError as e:
                    # Half-renewed files, typically: keep serving the old ones; the next change retries.
                    log.warning("tls_reload_failed", error=str(e))
                    return None
                self.reloads += 1
                log.info("tls_certificate_reloaded", certificate=str(self.settings.certificate), reloads=self.reloads)
                return _certificate_configuration(material)
        except Exception as e:  # anything else also leaves the current certificate in place
            log.error("tls_reload_failed", error=repr(e))
            return None
