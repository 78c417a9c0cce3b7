"""ssl.principal.mapping.rules with Kafka's semantics, and the RFC 2253 DN the rules see."""

from __future__ import annotations

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pykraft.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    principal_from_auth_context,
    rfc2253,
)

KAFKA_STYLE_RULES = ", ".join(
    [
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),  # first rule, lower-cased
        ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),  # second: two groups
        ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),  # third, upper-cased
        ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),  # fourth
        ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),  # DEFAULT: the DN itself
    ],
)
def test_rules_are_tried_in_order(dn: str, name: str) -> None:
    assert SslPrincipalMapper(KAFKA_STYLE_RULES).name(dn) == name


def test_no_matching_rule_is_an_error() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=broker-([0-9]+)$/broker-$1/")
    assert mapper.name("CN=broker-3") == "broker-3"
    with pytest.raises(NoMatchingRule, match=r"No rules apply to CN=admin, rules \[RULE:\^CN=broker"):
        mapper.name("CN=admin")
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper("").name("CN=admin")  # no rules at all: nothing applies


def test_a_rule_must_match_the_whole_dn() -> None:
    mapper = SslPrincipalMapper("RULE:CN=([a-z]+)/$1/")
    assert mapper.name("CN=alice") == "alice"
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=alice,O=x")


def test_default_rules_take_a_leading_cn() -> None:
    mapper = SslPrincipalMapper()  # pykraft's default
    assert mapper.name("CN=admin") == "admin"
    assert mapper.name("CN=broker-3,OU=brokers,O=pykraft") == "broker-3"
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ") == r"Tkac\, Adam"  # an escaped comma stays in the name, as Kafka's
    assert mapper.name("O=pykraft,CN=admin") == "O=pykraft,CN=admin"  # CN not first: the whole DN (DEFAULT)
    assert SslPrincipalMapper("DEFAULT").name("CN=admin") == "CN=admin"  # Kafka's own default


def test_comma_with_whitespace_in_a_pattern() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_replacement_groups_and_escapes() -> None:
    # A $N naming no group is literal text; \$ is a literal dollar; $12 is group 1 then "2" with one group.
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1@$4/").name("CN=a") == "a@$4"
    assert SslPrincipalMapper(r"RULE:^CN=(.*)$/\$1=$1/").name("CN=a") == "$1=a"
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$12/").name("CN=a") == "a2"
    # Java's replaceAll replaces every match: ".*" also matches the empty end of the DN.
    assert SslPrincipalMapper("RULE:.*/x/").name("CN=a") == "xx"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("", "[]"),
        ("DEFAULT", "[DEFAULT]"),
        ("RULE://", "[RULE:/]"),
        ("RULE:/.*/L", "[RULE:/.*/L]"),
        ("  RULE:// ,  DEFAULT  ", "[RULE:/, DEFAULT]"),
        ("  RULE:  /     /U   ,DEFAULT  ", "[RULE:  /     /U, DEFAULT]"),
        ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ", "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]"),
        (",   , , ,   ", "[]"),  # empty entries are ignored
        (",,RULE://,,,DEFAULT,,", "[RULE:/, DEFAULT]"),
        (r"RULE:\/\\\(\)\n\t/\/\//", r"[RULE:\/\\\(\)\n\t/\/\/]"),  # escaped slashes stay in pattern/replacement
        (r"RULE:\**\/+/*/L,RULE:\/*\**/**/", r"[RULE:\**\/+/*/L, RULE:\/*\**/**]"),
        # Commas inside a pattern belong to it as long as the rule's slashes follow.
        ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT", "[RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT]"),
    ],
)
def test_rules_splitting(rules: str, expected: str) -> None:
    assert str(SslPrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


@pytest.mark.parametrize(
    "rules",
    [
        "default",
        "DEFAUL",
        "DEFAULT/L",
        "RULE:CN=(.*?),OU=ServiceUsers.*/$1",  # no closing slash
        "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/LU",
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
        "RULE:^CN=([/$1/",  # not a regular expression
        "RULE:^CN=.*$/$1/",  # a group the pattern does not have
    ],
)
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper(rules)


def _cert(attributes: list[x509.NameAttribute]) -> x509.Certificate:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ca")]))
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )


def test_rfc2253_as_java_writes_it() -> None:
    cert = _cert(
        [
            x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Sun Microsystems"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "a=b+c"),
            x509.NameAttribute(NameOID.COMMON_NAME, " Tkac, Adam#"),
            x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
        ]
    )
    # Last RDN first; , = + # etc. and leading/trailing spaces escaped; attributes without an RFC 2253 keyword
    # (emailAddress) as their OID and the value's DER in hex (an IA5String: tag 0x16).
    assert rfc2253(cert.subject) == (
        r"1.2.840.113549.1.9.1=#1605614062" + "2e63" + r",CN=\ Tkac\, Adam\#,OU=a\=b\+c,O=Sun Microsystems,C=US"
    )


def test_principal_from_auth_context() -> None:
    from cryptography.hazmat.primitives.serialization import Encoding

    pem = _cert([x509.NameAttribute(NameOID.COMMON_NAME, "broker-3")]).public_bytes(Encoding.PEM)
    mapper = SslPrincipalMapper()
    assert principal_from_auth_context({}, mapper) == ANONYMOUS  # plaintext: no auth context at all
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert principal_from_auth_context({"transport_security_type": [b"ssl"]}, mapper) == ANONYMOUS  # no client cert
    ctx = {"transport_security_type": [b"ssl"], "x509_pem_cert": [pem]}
    assert principal_from_auth_context(ctx, mapper) == KafkaPrincipal("User", "broker-3")
    assert str(principal_from_auth_context(ctx, SslPrincipalMapper("RULE:^CN=(.*)$/$1/U"))) == "User:BROKER-3"


def test_the_name_cache_stays_bounded_and_correct() -> None:
    mapper = SslPrincipalMapper("RULE:^CN=(.*)$/$1/U")
    for i in range(5000):  # more distinct DNs than the cache keeps
        assert mapper.name(f"CN=user-{i}") == f"USER-{i}"
        assert mapper.name("CN=admin") == "ADMIN"
    assert len(mapper._names) <= 4096
