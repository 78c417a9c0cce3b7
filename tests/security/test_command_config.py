"""--command-config files: Kafka's properties form into TLS settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.security.ca import ensure_cluster_certificates
from pykraft.security.command_config import (
    CommandConfigError,
    parse_properties,
    read_command_config,
    tls_settings_from_command_config,
)
from pykraft.security.principal import SslPrincipalMapper
from pykraft.security.tls import ClientAuth, TlsSettings


def test_properties_syntax() -> None:
    text = "\n".join(
        [
            "# a comment",
            "   ! another comment",
            "",
            "a=1",
            "b = 2 ",  # whitespace around '=' goes; Kafka trims values when it reads settings, we keep the raw
            "c: 3",
            "d 4",
            "e",  # a key without a value
            "f=x=y:z",  # only the first separator splits
            "g=one \\",  # a continuation: the next line's leading whitespace is dropped
            "     two",
            "h=tab\\there\\u00e9\\q",  # \t, \uXXXX, and \q is just q
            "key\\ with\\=seps = v",  # escaped whitespace and separators belong to the key
            "a=again",  # the last one wins
            "i=ends with two backslashes\\\\",
            "#not=a setting",
        ]
    )
    assert parse_properties(text) == {
        "a": "again",
        "b": "2 ",
        "c": "3",
        "d": "4",
        "e": "",
        "f": "x=y:z",
        "g": "one two",
        "h": "tab\thereéq",
        "key with=seps": "v",
        "i": "ends with two backslashes\\",
    }


def test_a_mapping_rule_with_escapes_as_written_in_kafka_files() -> None:
    props = parse_properties("ssl.principal.mapping.rules=RULE:^CN=((\\\\\\\\, *|\\\\w)+)(,.*|$)/$1/,DEFAULT\n")
    rules = props["ssl.principal.mapping.rules"]
    assert rules == r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT"
    assert SslPrincipalMapper(rules).name(r"CN=Tkac\, Adam,OU=ITZ") == r"Tkac\, Adam"


def test_malformed_unicode_escape_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("a=1\nb=\\u12x4\n")
    with pytest.raises(CommandConfigError) as e:
        read_command_config(path)
    assert str(e.value) == f"--command-config: {path}:2: malformed \\uxxxx escape"


def test_tls_settings_from_a_command_config_file(tmp_path: Path) -> None:
    admin = ensure_cluster_certificates(tmp_path / "tls", ["admin"])["admin"]
    path = tmp_path / "admin.properties"
    path.write_text("# written by hand\n" + "".join(f"{k}={v}\n" for k, v in admin.properties().items()))
    assert tls_settings_from_command_config(path) == TlsSettings(admin.certificate, admin.key, admin.ca)

    path.write_text(f"security.protocol=SSL\nssl.ca.location={admin.ca}\nssl.client.auth=none\n")
    assert tls_settings_from_command_config(path) == TlsSettings(ca=admin.ca, client_auth=ClientAuth.NONE)

    path.write_text("# plaintext\nrequest.timeout.ms=3000\n")
    assert tls_settings_from_command_config(path) is None


def test_command_config_errors_name_the_file(tmp_path: Path) -> None:
    def error(path: Path) -> str:
        with pytest.raises(CommandConfigError) as e:
            tls_settings_from_command_config(path)
        return str(e.value)

    missing = tmp_path / "missing.properties"
    assert error(missing) == f"--command-config: {missing}: no such file"
    path = tmp_path / "bad.properties"
    path.write_text(f"security.protocol=SSL\nssl.ca.location={tmp_path}/nope.crt\n")
    assert error(path) == f"--command-config {path}: ssl.ca.location: {tmp_path}/nope.crt: no such file"
    path.write_text(f"ssl.ca.location={tmp_path}/ca.crt\n")
    assert error(path) == (
        f"--command-config {path}: ssl.ca.location is set but security.protocol is PLAINTEXT: "
        "set security.protocol=SSL to use TLS"
    )
