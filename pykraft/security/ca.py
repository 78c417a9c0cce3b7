"""A private cluster CA and one certificate per principal (``controller-1``, ``broker-101``, ``admin``), as PEM files.

Layout under the directory: ``ca.crt`` / ``ca.key`` and ``<name>.crt`` / ``<name>.key`` for each name. Keys are
written with mode 0600 (created so, never widened afterwards). The call is idempotent: files that are still good —
they load, the key matches, the certificate was signed by the current CA, names the same principal and hosts, and
has more than :data:`RENEW_BEFORE` left — are kept byte for byte; anything else is (re)issued. A new CA re-issues
every leaf, since the old ones would no longer verify.

Keys are ECDSA P-256: fast to generate (a cluster of 10 gets its files in well under a second) and what gRPC's TLS
stack negotiates by default. Each leaf is both a server and a client certificate (controllers dial each other).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "ca"
CA_VALIDITY = dt.timedelta(days=3650)
LEAF_VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=30)  # a leaf (or the CA) closer than this to its end is re-issued
CLOCK_SKEW = dt.timedelta(minutes=5)  # notBefore is backdated so peers with a slightly slow clock accept it
DEFAULT_DNS = ("localhost",)
DEFAULT_IPS = ("127.0.0.1",)


@dataclass(frozen=True)
class CertFiles:
    certificate: Path
    key: Path
    ca: Path  # the cluster CA certificate, the trust anchor for this principal's peers

    def properties(self) -> dict[str, str]:
        """The TLS settings (Kafka's names) that use these files, e.g. for a ``--command-config`` file."""
        return {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(self.certificate),
            "ssl.key.location": str(self.key),
            "ssl.ca.location": str(self.ca),
        }


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _write(path: Path, data: bytes, *, private: bool) -> None:
    """Write via a temporary file and rename, so a reader (a server reloading its certificate) never sees half a file;
    a key's temporary file is created 0600, so the key is never readable by others, not even for a moment."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _load(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.public_key() != cert.public_key():
        return None
    return cert, key


def _fresh(cert: x509.Certificate) -> bool:
    now = _now()
    return cert.not_valid_before_utc <= now + CLOCK_SKEW and cert.not_valid_after_utc - now > RENEW_BEFORE


def _create_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"pykraft-ca-{os.urandom(4).hex()}")])
    now = _now()
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(directory / f"{CA_NAME}.key", _key_pem(key), private=True)
    _write(directory / f"{CA_NAME}.crt", cert.public_bytes(serialization.Encoding.PEM), private=False)
    return cert, key


def _sans(name: str, dns: Iterable[str], ips: Iterable[str]) -> list[x509.GeneralName]:
    # The principal name is a DNS name too: a peer dialling controller-2 checks that the server it reached is
    # controller-2 (gRPC's target name), whatever address it dialled.
    names: list[x509.GeneralName] = [x509.DNSName(h) for h in dict.fromkeys([name, *dns])]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    return names


def _leaf_ok(cert: x509.Certificate, ca: x509.Certificate, name: str, sans: list[x509.GeneralName]) -> bool:
    if not _fresh(cert) or cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if [a.value for a in cns] != [name]:
        return False
    try:
        have = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(have) == set(sans)


def _issue(
    directory: Path,
    name: str,
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    sans: list[x509.GeneralName],
) -> None:
    key = _new_key()
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW)
        .not_valid_after(min(now + LEAF_VALIDITY, ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    # The key first: a reader that sees the new certificate must find its key already in place.
    _write(directory / f"{name}.key", _key_pem(key), private=True)
    _write(directory / f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM), private=False)


def _check_name(name: str) -> None:
    # The name is both the CN and a file name: keep it to what is safe as both.
    if not name or name == CA_NAME or not all(c.isalnum() or c in "-_." for c in name) or name.startswith("."):
        raise ValueError(f"invalid principal name for a certificate: {name!r} (letters, digits, '-', '_', '.')")


def ensure_cluster_certificates(
    directory: Path | str,
    names: Sequence[str],
    *,
    dns: Sequence[str] = DEFAULT_DNS,
    ips: Sequence[str] = DEFAULT_IPS,
) -> dict[str, CertFiles]:
    """Create (or keep) the cluster CA under ``directory`` and a certificate for each name (its CN).

    Each certificate's subject alternative names are its own name (as a DNS name), ``dns`` and ``ips``: TLS clients
    check the host they dialled (or the name they expect, for peers) against them.
    """
    for name in names:
        _check_name(name)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)  # the keys are 0600 anyway; the directory need not be listable by others either
    loaded = _load(directory / f"{CA_NAME}.crt", directory / f"{CA_NAME}.key")
    if loaded is None or not _fresh(loaded[0]):
        loaded = _create_ca(directory)
    ca, ca_key = loaded
    out: dict[str, CertFiles] = {}
    for name in names:
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        have = _load(cert_path, key_path)
        sans = _sans(name, dns, ips)
        if have is None or not _leaf_ok(have[0], ca, name, sans):
            _issue(directory, name, ca, ca_key, sans)
        else:
            os.chmod(key_path, 0o600)  # a kept key too: narrowing what someone widened by hand is always safe
        out[name] = CertFiles(cert_path, key_path, directory / f"{CA_NAME}.crt")
    return out
