"""``--command-config FILE``: a client's settings in Kafka's properties form, as Kafka's admin tools take them.

```
# admin.properties
security.protocol=SSL
ssl.certificate.location=/data/tls/admin.crt
ssl.key.location=/data/tls/admin.key
ssl.ca.location=/data/tls/ca.crt
```

The file is read as ``java.util.Properties`` reads one, in the parts such files use: ``key=value``, ``key: value``
or ``key value``; ``#`` and ``!`` comment lines; a line ending in a backslash continues on the next; backslash
escapes (``\\t``, ``\\n``, ``\\uXXXX``, and ``\\x`` for any other x — so a rule's ``\\,`` is written ``\\\\,``, as
in Kafka's files); the last of a repeated key wins.
"""

from __future__ import annotations

from pathlib import Path

from pykraft.security.tls import TlsConfigError, TlsSettings

_SEPARATORS = "=:"
_WHITESPACE = " \t\f"
_SPECIAL = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class CommandConfigError(ValueError):
    """The file cannot be read or parsed, or holds bad TLS settings; the message names the file."""


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, logical line) pairs: continuations joined, comments and blank lines dropped."""
    out: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(_WHITESPACE)
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start, pending = number, ""
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd run of backslashes: the last one escapes the line break
            pending += line[:-1]
            continue
        out.append((start, pending + line))
        pending = None
    if pending is not None:
        out.append((start, pending))
    return out


def _unescape(text: str, where: str) -> str:
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"{where}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_SPECIAL.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped '=', ':' or whitespace; then whitespace and at most one separator."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in _SEPARATORS or c in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(_WHITESPACE)
    if rest[:1] and rest[0] in _SEPARATORS:
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split_key(line)
        where = f"{source}:{number}"
        props[_unescape(key, where)] = _unescape(value, where)
    return props


def read_command_config(path: Path | str) -> dict[str, str]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandConfigError(f"--command-config: {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CommandConfigError(f"--command-config: {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        return parse_properties(text, str(path))
    except ValueError as e:
        raise CommandConfigError(f"--command-config: {e}") from None


def tls_settings_from_command_config(path: Path | str) -> TlsSettings | None:
    """The TLS settings a ``--command-config`` file gives a client (None for plaintext), its files checked now."""
    props = read_command_config(path)
    try:
        settings = TlsSettings.from_properties(props)
        if settings is not None:
            settings.load(server=False)
    except TlsConfigError as e:
        raise CommandConfigError(f"--command-config {path}: {e}") from None
    return settings
