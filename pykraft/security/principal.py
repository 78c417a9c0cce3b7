"""Principals from TLS client certificates: Kafka's ``ssl.principal.mapping.rules`` and default principal builder.

A connection's principal is ``User:<name>``, where ``<name>`` is the client certificate's subject distinguished name
in RFC 2253 form (``CN=broker-3,OU=...,O=...``, as Java's ``X500Principal.getName()`` writes it) run through the
mapping rules; a plaintext connection, or a TLS one without a client certificate, is ``User:ANONYMOUS``.

The rules are Kafka's: a comma-separated list of ``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` for
lower or upper case) and ``DEFAULT``, tried in order. A rule applies when its pattern matches the whole DN; the name
is then the DN with the pattern replaced by the replacement (``$1`` for a group, ``\\`` escapes, as in Java). A
comma or slash inside a pattern is kept when escaped with a backslash, or when the pattern still ends at the rule's
next ``/``; empty entries are ignored. ``DEFAULT`` maps the DN to itself. A DN no rule applies to is refused
(:class:`NoMatchingRule`), as Kafka refuses the connection. Patterns are Python regular expressions, which agree with
Java's for everything these rules normally use.

pykraft's default rules (:data:`DEFAULT_PRINCIPAL_MAPPING_RULES`) take the CN when it is the DN's first attribute —
the usual RFC 2253 rendering of a certificate made for a user or service — so a certificate for ``CN=admin`` is
``User:admin``; any other DN maps to itself (Kafka's own default is ``DEFAULT`` alone: ``User:CN=admin``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import grpc
from cryptography import x509

# The CN when it leads the DN (its value may hold escaped characters, e.g. "Tkac\, Adam"), else the whole DN.
DEFAULT_PRINCIPAL_MAPPING_RULES = r"RULE:^CN=((\\.|[^,\\])*)(,.*)?$/$1/,DEFAULT"
USER_TYPE = "User"
ANONYMOUS_NAME = "ANONYMOUS"

# One rule: DEFAULT, or RULE: pattern / replacement / optional L|U — pattern and replacement may hold any character
# but an unescaped backslash or slash. The lazy tail lets the splitter swallow trailing garbage ("/L/U") so the
# parser can refuse it instead of it becoming a rule of its own. The last alternative catches anything else.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE, re.ASCII)


_CACHE_SIZE = 4096  # distinct client certificates remembered (parsed DN, mapped name)


class NoMatchingRule(ValueError):
    """No mapping rule applies to a certificate's DN: the connection gets no principal (Kafka's NoMatchingRule)."""


@dataclass(frozen=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, ANONYMOUS_NAME)


def _java_replacement(replacement: str, groups: int) -> list[str | int]:
    """Parse a Java replacement string into literal pieces and group numbers, with Kafka's leniency: a ``$N`` whose
    group does not exist (with at least one group) is literal text, as in Kafka's escapeLiteralBackReferences."""
    out: list[str | int] = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\":
            if i + 1 >= len(replacement):
                raise ValueError("character to be escaped is missing")
            out.append(replacement[i + 1])
            i += 2
        elif c == "$":
            j = i + 1
            if j >= len(replacement) or not replacement[j].isdigit():
                raise ValueError("illegal group reference")
            digits = re.match(r"\d+", replacement[j:]).group()  # type: ignore[union-attr]
            if groups > 0 and not digits.startswith("0") and int(digits[0]) > groups:
                out.append("$" + digits)  # not a group: literal
                i = j + len(digits)
                continue
            # Java reads the first digit, then more while the number still names a group.
            ref, k = int(digits[0]), 1
            while k < len(digits) and ref * 10 + int(digits[k]) <= groups:
                ref, k = ref * 10 + int(digits[k]), k + 1
            if ref > groups:
                raise ValueError(f"no group {ref}")
            out.append(ref)
            i = j + k
        else:
            out.append(c)
            i += 1
    return out


class Rule:
    def __init__(self, pattern: str | None = None, replacement: str | None = None, case: str = "") -> None:
        self.is_default = pattern is None
        self.pattern_text = pattern
        self.replacement_text = replacement
        self.case = case
        if pattern is not None:
            self.pattern = re.compile(pattern)
            self.replacement = _java_replacement(replacement or "", self.pattern.groups)

    def apply(self, dn: str) -> str | None:
        if self.is_default:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None

        def expand(m: re.Match[str]) -> str:
            return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in self.replacement)

        # Java's replaceAll: every match in the DN is replaced (e.g. ".*" also matches the empty end).
        result = self.pattern.sub(expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        text = f"RULE:{self.pattern_text}"
        if self.replacement_text is not None:
            text += f"/{self.replacement_text}"
        if self.case:
            text += f"/{self.case}"
        return text


def _split(rules: str) -> list[str]:
    return [m.group(1) for m in _SPLITTER.finditer(rules.strip())]


def _parse(rule: str) -> Rule | None:
    m = _PARSER.match(rule)
    if m is None:
        raise ValueError(f"Invalid rule: {rule}")
    if m.end() != len(rule):
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end() :]}`")
    if m.group(1) is not None:
        return Rule()
    if m.group(2) is not None:
        try:
            return Rule(m.group(2), m.group(4), m.group(6) or "")
        except (re.error, ValueError) as e:
            raise ValueError(f"Invalid rule: `{rule}`: {e}") from None
    return None  # an empty entry


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: a DN to a principal name. Raises ValueError for rules Kafka refuses."""

    def __init__(self, rules: str | None = None) -> None:
        text = DEFAULT_PRINCIPAL_MAPPING_RULES if rules is None else rules
        self.rules = [r for r in (_parse(s) for s in _split(text)) if r is not None]
        self._names: dict[str, str] = {}  # every request maps its connection's DN: the same few DNs again and again

    def name(self, dn: str) -> str:
        if (cached := self._names.get(dn)) is not None:
            return cached
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                if len(self._names) >= _CACHE_SIZE:
                    self._names.clear()
                self._names[dn] = mapped
                return mapped
        raise NoMatchingRule(f"No rules apply to {dn}, rules [{', '.join(map(str, self.rules))}]")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(map(str, self.rules))}])"


# --- the DN as Java's X500Principal.getName() (RFC 2253) writes it ---------------------------------------------

_KEYWORDS = {  # the only keywords Java's RFC 2253 form uses; other attributes are dotted OIDs with #hex DER values
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_ESCAPED = set(',=+<>#;"\\')


def _escape(value: str) -> str:
    body = "".join("\\00" if c == "\0" else ("\\" + c if c in _ESCAPED else c) for c in value)
    stripped = body.strip(" ")
    if not stripped:
        return "\\ " * len(body)
    # Leading and trailing spaces are escaped one by one.
    lead, trail = len(body) - len(body.lstrip(" ")), len(body) - len(body.rstrip(" "))
    return "\\ " * lead + stripped + "\\ " * trail


def _der_hex(attr: x509.NameAttribute) -> str:
    value = attr.value
    tag = getattr(getattr(attr, "_type", None), "value", 12)  # the string type as encoded; UTF8String if unknown
    if isinstance(value, bytes):
        body = value
    elif tag == 30:  # BMPString
        body = value.encode("utf-16-be")
    elif tag == 28:  # UniversalString
        body = value.encode("utf-32-be")
    else:
        body = value.encode("utf-8")
    n = len(body)
    width = (n.bit_length() + 7) // 8
    length = bytes([n]) if n < 0x80 else bytes([0x80 | width]) + n.to_bytes(width)
    return "#" + (bytes([tag]) + length + body).hex()


def rfc2253(name: x509.Name) -> str:
    """The DN as Kafka's principal builder sees it: last RDN first, ``+`` inside a multi-valued RDN."""
    rdns = []
    for rdn in reversed(list(name.rdns)):
        avas = []
        for attr in rdn:
            oid = attr.oid.dotted_string
            keyword = _KEYWORDS.get(oid)
            if keyword is None or isinstance(attr.value, bytes):
                avas.append(f"{oid}={_der_hex(attr)}")
            else:
                avas.append(f"{keyword}={_escape(attr.value)}")
        rdns.append("+".join(avas))
    return ",".join(rdns)


def principal_from_certificate(cert: x509.Certificate, mapper: SslPrincipalMapper) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, mapper.name(rfc2253(cert.subject)))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _subject_of_pem(pem: bytes) -> str:
    # Parsing a certificate costs ~0.1 ms; gRPC hands every request of a connection the same PEM bytes.
    return rfc2253(x509.load_pem_x509_certificate(pem).subject)


def principal_from_auth_context(auth: dict[str, list[bytes]], mapper: SslPrincipalMapper) -> KafkaPrincipal:
    """gRPC's auth context (``transport_security_type``, ``x509_pem_cert``, ...) to the connection's principal."""
    if auth.get("transport_security_type") != [b"ssl"]:
        return ANONYMOUS
    pems = auth.get("x509_pem_cert")
    if not pems:
        return ANONYMOUS  # TLS without a client certificate (ssl.client.auth=none)
    return KafkaPrincipal(USER_TYPE, mapper.name(_subject_of_pem(pems[0])))


def principal_of(
    context: grpc.aio.ServicerContext | grpc.ServicerContext, mapper: SslPrincipalMapper
) -> KafkaPrincipal:
    """The principal of the connection a request came in on. Raises :class:`NoMatchingRule` when the certificate's
    DN matches no rule: the caller refuses the request (Kafka closes the connection)."""
    return principal_from_auth_context(context.auth_context(), mapper)
