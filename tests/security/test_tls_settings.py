"""TLS settings (Kafka's names) and their checks, and the cluster CA's files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.tls import (
    ClientAuth,
    TlsConfigError,
    TlsSettings,
    channel_credentials,
    server_credentials,
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), ["controller-1", "admin"])


def props(files: CertFiles, **extra: str) -> dict[str, str]:
    return {**files.properties(), **extra}


def test_plaintext_is_no_tls() -> None:
    assert TlsSettings.from_properties({}) is None
    assert TlsSettings.from_properties({"security.protocol": "plaintext"}) is None


def test_ssl_settings_from_properties(cluster: dict[str, CertFiles]) -> None:
    files = cluster["controller-1"]
    settings = TlsSettings.from_properties(props(files))
    assert settings == TlsSettings(files.certificate, files.key, files.ca, ClientAuth.REQUIRED, None)
    settings.load(server=True)  # the CA's files pass every check
    server_credentials(settings)
    channel_credentials(settings)
    assert TlsSettings.from_properties(props(files, **{"ssl.client.auth": "NONE"})).client_auth is ClientAuth.NONE


@pytest.mark.parametrize(
    ("properties", "error"),
    [
        ({"ssl.ca.location": "/x/ca.crt"}, "ssl.ca.location is set but security.protocol is PLAINTEXT"),
        ({"security.protocol": "SASL_SSL"}, "security.protocol must be PLAINTEXT or SSL, got 'SASL_SSL'"),
        ({"security.protocol": "SSL", "ssl.client.auth": "maybe"}, "ssl.client.auth must be one of required, req"),
        ({"security.protocol": "SSL", "ssl.principal.mapping.rules": "RULE:x"}, "ssl.principal.mapping.rules: Inva"),
    ],
)
def test_bad_properties(properties: dict[str, str], error: str) -> None:
    with pytest.raises(TlsConfigError, match=f"^{error}"):
        TlsSettings.from_properties(properties)


def test_file_errors_name_the_setting_and_the_path(cluster: dict[str, CertFiles], tmp_path: Path) -> None:
    files = cluster["controller-1"]
    missing = tmp_path / "nope.pem"
    junk = tmp_path / "junk.pem"
    junk.write_text("not a pem\n")

    def error(*, server: bool = True, **kwargs: object) -> str:
        fields = {"certificate": files.certificate, "key": files.key, "ca": files.ca, **kwargs}
        with pytest.raises(TlsConfigError) as e:
            TlsSettings(**fields).load(server=server)  # type: ignore[arg-type]
        return str(e.value)

    assert error(certificate=missing) == f"ssl.certificate.location: {missing}: no such file"
    assert error(key=missing) == f"ssl.key.location: {missing}: no such file"
    assert error(ca=missing) == f"ssl.ca.location: {missing}: no such file"
    assert error(certificate=junk) == f"ssl.certificate.location: {junk} holds no PEM certificate"
    assert error(ca=junk) == f"ssl.ca.location: {junk} holds no PEM certificate"
    assert error(key=junk) == f"ssl.key.location: {junk} holds no PEM private key"
    assert error(certificate=tmp_path) == f"ssl.certificate.location: {tmp_path} is a directory, not a PEM file"
    assert error(key=cluster["admin"].key) == (
        f"ssl.key.location: {cluster['admin'].key} is not the key of the certificate in ssl.certificate.location "
        f"({files.certificate})"
    )
    assert error(certificate=None) == "ssl.certificate.location must be set for a TLS server (security.protocol=SSL)"
    assert error(ca=None) == "ssl.ca.location must be set when ssl.client.auth=required"
    assert "ssl.client.auth=requested is not supported" in error(client_auth=ClientAuth.REQUESTED)
    assert error(server=False, key=None) == (
        "ssl.certificate.location is set without ssl.key.location: a client certificate needs both"
    )
    # A server without client auth needs no CA; a client without a certificate needs only the CA.
    TlsSettings(files.certificate, files.key, None, ClientAuth.NONE).load(server=True)
    TlsSettings(ca=files.ca).load(server=False)


def test_certificates_name_the_principal_and_the_hosts(cluster: dict[str, CertFiles]) -> None:
    ca = x509.load_pem_x509_certificate(cluster["admin"].ca.read_bytes())
    for name, files in cluster.items():
        cert = x509.load_pem_x509_certificate(files.certificate.read_bytes())
        assert cert.subject.rfc4514_string() == f"CN={name}"
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == [name, "localhost"]
        assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert set(usages) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
        days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
        assert 360 <= days <= 366
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value.startswith("pykraft-ca-")


def test_ensure_is_idempotent_and_repairs(tmp_path: Path) -> None:
    names = ["controller-1", "broker-3", "admin"]
    files = ensure_cluster_certificates(tmp_path, names)
    listing = sorted(p.name for p in tmp_path.iterdir())
    assert listing == sorted([f"{n}.{ext}" for n in [*names, "ca"] for ext in ("crt", "key")])
    assert os.stat(tmp_path).st_mode & 0o777 == 0o700
    for p in tmp_path.iterdir():
        assert p.stat().st_mode & 0o777 == (0o600 if p.suffix == ".key" else 0o644), p
    before = {p.name: (p.read_bytes(), p.stat().st_ino) for p in tmp_path.iterdir()}

    # Again: every file kept as it was (a key widened by hand is narrowed back).
    os.chmod(files["admin"].key, 0o644)
    assert ensure_cluster_certificates(tmp_path, names) == files
    assert {p.name: (p.read_bytes(), p.stat().st_ino) for p in tmp_path.iterdir()} == before
    assert os.stat(files["admin"].key).st_mode & 0o777 == 0o600

    # A damaged leaf is re-issued alone; a new name gets a certificate from the same CA.
    files["broker-3"].certificate.write_text("garbage")
    ensure_cluster_certificates(tmp_path, [*names, "broker-4"])
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after["broker-3.crt"] != before["broker-3.crt"][0] and after["broker-3.key"] != before["broker-3.key"][0]
    for name in ("ca.crt", "ca.key", "controller-1.crt", "admin.key"):
        assert after[name] == before[name][0]
    assert "broker-4.crt" in after

    # A lost CA key means a new CA, and every leaf re-issued under it.
    (tmp_path / "ca.key").unlink()
    ensure_cluster_certificates(tmp_path, names)
    new_ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    assert (tmp_path / "ca.crt").read_bytes() != before["ca.crt"][0]
    for name in names:
        x509.load_pem_x509_certificate(files[name].certificate.read_bytes()).verify_directly_issued_by(new_ca)


@pytest.mark.parametrize("name", ["", "ca", "../x", "a/b", ".hidden", "a b"])
def test_unsafe_principal_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="invalid principal name"):
        ensure_cluster_certificates(tmp_path, [name])
