"""Kafka's generated-message encoding, driven by small declarative specs.

A record type is described once — a :class:`Message` holding :class:`Field`\\ s — in the shape of Kafka's JSON
schemas (names, types, version ranges, nullable versions, tags, defaults). From that spec this module makes a Python
class with ``__slots__`` and, per version, a decoder and an encoder. The codecs are compiled into plain Python
functions (as ``dataclasses`` does for ``__init__``) because per-record interpretation of the spec would cost
several times more per field, and the log must decode hundreds of thousands of records a second.

Every record in the metadata log uses Kafka's *flexible* encoding (``flexibleVersions: 0+``, the default here):
compact strings, bytes and arrays (length + 1 as an unsigned varint, 0 for null), and a tagged-field section after
every struct. Kafka's API messages also have older, non-flexible versions (``Message(flexible="9+")``): int16-length
strings, int32-length bytes and arrays (-1 for null), no tagged fields (a tagged field is absent there). The
flexibility of a version is fixed when its codec is compiled, so the record codecs are the same code as before.
"""

from __future__ import annotations

import base64
import math
import os
import re
import struct
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from quorum.log.varint import read_uvarint, uvarint

MAX_VERSION = 0x7FFF


class DecodeError(ValueError):
    """Bytes that do not decode as the message they claim to be."""


class EncodeError(ValueError):
    """A message that cannot be written at the requested version (Kafka's UnsupportedVersionException)."""


class Uuid(bytes):
    """Kafka's 128-bit UUID, printed base64url without padding like Kafka's ``Uuid.toString``."""

    __slots__ = ()

    def __new__(cls, value: bytes | str = bytes(16)) -> Uuid:
        if isinstance(value, str):
            value = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
        if len(value) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(value)}")
        return super().__new__(cls, value)

    @classmethod
    def random(cls) -> Uuid:
        # Kafka's Uuid.randomUuid: a version-4 UUID, never one of the two reserved ids, never one whose string
        # starts with '-' (base64url's 62 in the first 6 bits).
        while True:
            raw = bytearray(os.urandom(16))
            raw[6] = (raw[6] & 0x0F) | 0x40
            raw[8] = (raw[8] & 0x3F) | 0x80
            if raw[0] >> 2 != 62:
                candidate = bytes.__new__(cls, raw)
                if candidate != ZERO_UUID and candidate != METADATA_TOPIC_ID:
                    return candidate

    @classmethod
    def from_int(cls, value: int) -> Uuid:
        return cls(value.to_bytes(16, "big"))

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self).rstrip(b"=").decode()

    def __repr__(self) -> str:
        return f"Uuid({str(self)!r})"


ZERO_UUID = Uuid()
METADATA_TOPIC_ID = Uuid.from_int(1)  # Kafka's Uuid.METADATA_TOPIC_ID, also "UNASSIGNED" for directories


# ---------------------------------------------------------------------------------------------------------------
# Types


class Primitive:
    """A scalar type: fixed width (struct format) or variable (string, bytes)."""

    def __init__(self, name: str, fmt: str | None, default: Any) -> None:
        self.name = name
        self.fmt = fmt
        self.size = struct.calcsize(">" + fmt) if fmt else None
        self.default = default

    def __repr__(self) -> str:
        return self.name


INT8 = Primitive("int8", "b", 0)
INT16 = Primitive("int16", "h", 0)
INT32 = Primitive("int32", "i", 0)
INT64 = Primitive("int64", "q", 0)
UINT16 = Primitive("uint16", "H", 0)
FLOAT64 = Primitive("float64", "d", 0.0)
BOOL = Primitive("bool", "?", False)
UUID = Primitive("uuid", None, ZERO_UUID)
STRING = Primitive("string", None, "")
BYTES = Primitive("bytes", None, b"")


class Array:
    def __init__(self, element: Primitive | Struct) -> None:
        self.element = element

    def __repr__(self) -> str:
        return f"[]{self.element.name}"


def array(element: Primitive | Struct) -> Array:
    return Array(element)


class _Unset:
    def __repr__(self) -> str:
        return "<type default>"


UNSET: Any = _Unset()


def _versions(spec: str | None) -> tuple[int, int]:
    """Kafka's version range syntax: "0+", "1-3", "2"; None or "none" for no versions."""
    if spec is None or spec == "none":
        return (1, 0)
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX_VERSION)
    lo, _, hi = spec.partition("-")
    return (int(lo), int(hi or lo))


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


class Field:
    """One field of a struct, as Kafka's schema states it."""

    def __init__(
        self,
        name: str,
        type: Primitive | Array | Struct,
        versions: str = "0+",
        *,
        nullable: str | None = None,
        tag: int | None = None,
        default: Any = UNSET,
        ignorable: bool = False,
        attr: str | None = None,
    ) -> None:
        self.name = name
        self.type = type
        self.versions = _versions(versions)
        self.nullable_versions = _versions(nullable)
        self.tag = tag  # tagged in every version it exists in: true of every schema in the metadata log
        self.ignorable = ignorable
        self.attr = attr or _snake(name)
        self.json_name = name[0].lower() + name[1:]
        if default is UNSET:
            default = _type_default(type)
        elif default is None and self.nullable_versions[0] > self.nullable_versions[1]:
            raise ValueError(f"field {name}: a null default needs nullable versions")
        self.default = default

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def nullable(self, version: int) -> bool:
        return self.nullable_versions[0] <= version <= self.nullable_versions[1]

    def default_value(self) -> Any:
        """A fresh default (lists and structs are mutable, so never shared)."""
        if isinstance(self.default, list):
            return list(self.default)
        if isinstance(self.default, Struct):
            return self.default.cls()
        return self.default


def _type_default(type: Primitive | Array | Struct) -> Any:
    if isinstance(type, Primitive):
        return type.default
    if isinstance(type, Array):
        return []
    return type  # a struct field defaults to a fresh struct with its own defaults


# ---------------------------------------------------------------------------------------------------------------
# Structs and messages


class ApiMessage:
    """Base of every generated message and struct class."""

    __slots__ = ("unknown_tags",)
    SPEC: ClassVar[Struct]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.unknown_tags == other.unknown_tags and all(
            getattr(self, f.attr) == getattr(other, f.attr) for f in self.SPEC.fields
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        parts = [f"{f.attr}={getattr(self, f.attr)!r}" for f in self.SPEC.fields]
        if self.unknown_tags:
            parts.append(f"unknown_tags={self.unknown_tags!r}")
        return f"{type(self).__name__}({', '.join(parts)})"

    @classmethod
    def decode(cls, buf: bytes, version: int) -> ApiMessage:
        """Decode a whole message body of this type (top-level messages only)."""
        return cls.SPEC.decode(buf, version)  # type: ignore[attr-defined]

    def encode(self, version: int | None = None) -> bytes:
        """This message's body at ``version`` (default: the version Kafka 4.0 writes)."""
        return self.SPEC.encode(self, version)  # type: ignore[attr-defined]

    def to_json(self, version: int | None = None) -> dict[str, Any]:
        """Kafka's JSON shape: camelCase names, UUIDs base64url, bytes base64. Given the version the message was
        read or will be written at, fields absent from it and tagged fields at their default are left out, as
        Kafka's JSON converters do."""
        out: dict[str, Any] = {}
        for f in self.SPEC.fields:
            value = getattr(self, f.attr)
            if version is not None and (not f.present(version) or (f.tag is not None and value == f.default_value())):
                continue
            out[f.json_name] = _to_json(value, version)
        if self.unknown_tags:
            out["unknownTaggedFields"] = [{"tag": t, "data": d.hex()} for t, d in self.unknown_tags]
        return out


def _to_json(value: Any, version: int | None = None) -> Any:
    if isinstance(value, ApiMessage):
        return value.to_json(version)
    if isinstance(value, list):
        return [_to_json(v, version) for v in value]
    if isinstance(value, Uuid):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


class Struct:
    """A named group of fields: a nested struct, or (as :class:`Message`) a whole record."""

    def __init__(self, name: str, fields: Sequence[Field], versions: str = "0+") -> None:
        self.name = name
        self.fields = list(fields)
        self.versions = _versions(versions)
        tags = [f.tag for f in self.fields if f.tag is not None]
        if len(tags) != len(set(tags)):
            raise ValueError(f"{name}: duplicate tags")
        self.cls: type[ApiMessage] = _make_class(self)
        self.flexible = (0, MAX_VERSION)  # set from the enclosing Message's flexibleVersions
        self._flexible_set = False
        self._decoders: dict[int, Callable[[bytes, int], tuple[Any, int]]] = {}
        self._encoders: dict[int, Callable[[Any, bytearray], None]] = {}

    def __repr__(self) -> str:
        return self.name

    def is_flexible(self, version: int) -> bool:
        return self.flexible[0] <= version <= self.flexible[1]

    def _set_flexible(self, flexible: tuple[int, int]) -> None:
        # A struct's codecs are compiled for one message's flexible versions: two messages that disagree cannot
        # share it (the second would silently re-encode the first's versions).
        if self._flexible_set and self.flexible != flexible:
            raise ValueError(f"{self.name} is already in a message with other flexible versions: give each its own")
        self._flexible_set = True
        self.flexible = flexible
        for f in self.fields:
            t = f.type.element if isinstance(f.type, Array) else f.type
            if isinstance(t, Struct):
                t._set_flexible(flexible)

    def decoder(self, version: int) -> Callable[[bytes, int], tuple[Any, int]]:
        fn = self._decoders.get(version)
        if fn is None:
            fn = self._decoders[version] = _compile_decoder(self, version)
        return fn

    def encoder(self, version: int) -> Callable[[Any, bytearray], None]:
        fn = self._encoders.get(version)
        if fn is None:
            fn = self._encoders[version] = _compile_encoder(self, version)
        return fn


class Message(Struct):
    """A top-level record type: an apiKey (for data records) and the versions it may be written at."""

    def __init__(
        self,
        name: str,
        fields: Sequence[Field],
        *,
        api_key: int | None = None,
        versions: str = "0",
        write_version: int | None = None,
        flexible: str = "0+",
    ) -> None:
        super().__init__(name, fields, versions)
        self.api_key = api_key
        self._set_flexible(_versions(flexible))
        self.write_version = self.versions[1] if write_version is None else write_version

    def check_version(self, version: int) -> None:
        lo, hi = self.versions
        if not lo <= version <= hi:
            raise DecodeError(f"{self.name} has no version {version} (known versions {lo}-{hi})")

    def decode(self, buf: bytes, version: int) -> ApiMessage:
        """Decode a whole message body; trailing bytes are an error, as in Kafka."""
        return self.body_decoder(version)(buf, 0)

    def body_decoder(self, version: int) -> Callable[[bytes, int], ApiMessage]:
        """A decoder of ``buf[pos:]`` as the whole body at ``version``, for hot loops: no version check (done
        here, once), errors as :class:`DecodeError`."""
        self.check_version(version)
        raw = self.decoder(version)
        name = self.name

        def decode_body(buf: bytes, pos: int) -> ApiMessage:
            try:
                obj, end = raw(buf, pos)
            except (IndexError, struct.error, UnicodeDecodeError, ValueError) as e:
                raise DecodeError(f"{name} v{version}: malformed body ({e or type(e).__name__})") from None
            if end != len(buf):
                raise DecodeError(f"{name} v{version}: {len(buf) - end} bytes of garbage after the message")
            return obj

        return decode_body

    def encode(self, obj: ApiMessage, version: int | None = None) -> bytes:
        version = self.write_version if version is None else version
        if not self.versions[0] <= version <= self.versions[1]:
            raise EncodeError(f"{self.name} has no version {version}")
        if type(obj) is not self.cls:
            raise EncodeError(f"expected a {self.name}, got {type(obj).__name__}")
        out = bytearray()
        try:
            self.encoder(version)(obj, out)
        except EncodeError:
            raise
        except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as e:
            from quorum.log.message_errors import explain  # the slow path: loaded when an encode fails

            raise EncodeError(explain(self, obj, version) or f"{self.name} v{version}: {e}") from None
        return bytes(out)


def _default_source(default: Any, i: int) -> str:
    """The expression for field ``i``'s fresh default in a generated ``__init__``, as :meth:`Field.default_value`
    gives it but without the call: the value itself when immutable, a new list or struct otherwise (a record built
    with most fields at their default, as the controller builds PartitionRecords, paid ~0.2 us a field)."""
    if isinstance(default, list):
        return "[]" if not default else f"list(_d{i})"
    if isinstance(default, Struct):
        return f"_d{i}.cls()"
    return f"_d{i}"


def _make_class(spec: Struct) -> type[ApiMessage]:
    attrs = [f.attr for f in spec.fields]
    args = ", ".join(f"{a}=_D" for a in attrs)
    lines = [f"def __init__(self, *, {args}{', ' if args else ''}unknown_tags=None):"]
    for i, (f, a) in enumerate(zip(spec.fields, attrs, strict=True)):
        lines.append(f"    self.{a} = {_default_source(f.default, i)} if {a} is _D else {a}")
    lines.append("    self.unknown_tags = unknown_tags")
    namespace: dict[str, Any] = {"_D": UNSET, **{f"_d{i}": f.default for i, f in enumerate(spec.fields)}}
    exec("\n".join(lines), namespace)
    return type(spec.name, (ApiMessage,), {"__slots__": tuple(attrs), "__init__": namespace["__init__"], "SPEC": spec})


# ---------------------------------------------------------------------------------------------------------------
# Codec compilation. Each function below emits Python source for one field; the result is exec'd once per
# (struct, version) and cached.

_FIXED = {p.fmt: struct.Struct(">" + p.fmt) for p in (INT8, INT16, INT32, INT64, UINT16, FLOAT64, BOOL) if p.fmt}
# Prebuilt codecs for short arrays of fixed-width values, by length: a format string built per array costs more
# than decoding the array (replica lists are short).
_SHORT = 32


def _array_codecs(fmt: str) -> tuple[list[Any], list[Any]]:
    structs = [struct.Struct(f">{n}{fmt}") for n in range(_SHORT)]
    return [s.pack for s in structs], [s.unpack_from for s in structs]


def _read_len(target: str, indent: str) -> list[str]:
    # An unsigned varint (compact length, tag, size), with the one-byte case inlined: nearly all are < 128.
    return [
        f"{indent}{target} = buf[pos]",
        f"{indent}if {target} < 0x80: pos += 1",
        f"{indent}else: {target}, pos = _ruv(buf, pos)",
    ]


class _Gen:
    """Accumulates generated source lines and the constants they refer to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "_ruv": read_uvarint,
            "_uv": uvarint,
            "_Uuid": Uuid,
            "_new_bytes": bytes.__new__,
            "_unpack": struct.unpack_from,
            "_pack": struct.pack,
            "DecodeError": DecodeError,
            "EncodeError": EncodeError,
        }
        self.n = 0

    def const(self, value: Any, hint: str = "c") -> str:
        self.n += 1
        name = f"_{hint}{self.n}"
        self.env[name] = value
        return name

    def compile(self, fn: str) -> Any:
        exec("\n".join(self.lines), self.env)
        return self.env[fn]


def _read_classic_len(g: _Gen, typ: Any, indent: str) -> None:
    # Non-flexible: int16 length for strings, int32 for bytes and arrays; -1 is null.
    s = g.const(_FIXED["h" if typ is STRING else "i"], "s")
    g.lines.append(f"{indent}n = {s}.unpack_from(buf, pos)[0]; pos += {2 if typ is STRING else 4}")


def _decode_value(
    g: _Gen, typ: Any, target: str, indent: str, nullable: bool, what: str, version: int, flex: bool = True
) -> None:
    """Emit code reading one value of ``typ`` at ``pos`` into ``target``."""
    L = g.lines.append
    if isinstance(typ, Primitive) and typ.fmt:
        s = g.const(_FIXED[typ.fmt], "s")
        L(f"{indent}{target} = {s}.unpack_from(buf, pos)[0]; pos += {typ.size}")
    elif typ is UUID:
        L(f"{indent}if pos + 16 > len(buf): raise DecodeError('field {what} runs past the end')")
        L(f"{indent}{target} = _new_bytes(_Uuid, buf[pos:pos + 16]); pos += 16")
    elif (typ is STRING or typ is BYTES) and not flex:
        _read_classic_len(g, typ, indent)
        L(f"{indent}if n < 0:")
        if nullable:
            L(f"{indent}    {target} = None")
        else:
            L(f"{indent}    raise DecodeError('non-nullable field {what} was null')")
        L(f"{indent}else:")
        L(f"{indent}    end = pos + n")
        L(f"{indent}    if end > len(buf): raise DecodeError('field {what} runs past the end')")
        conv = "str(buf[pos:end], 'utf-8')" if typ is STRING else "bytes(buf[pos:end])"
        L(f"{indent}    {target} = {conv}; pos = end")
    elif typ is STRING or typ is BYTES:
        g.lines.extend(_read_len("n", indent))
        L(f"{indent}if n == 0:")
        if nullable:
            L(f"{indent}    {target} = None")
        else:
            L(f"{indent}    raise DecodeError('non-nullable field {what} was null')")
        L(f"{indent}else:")
        L(f"{indent}    end = pos + n - 1")
        L(f"{indent}    if end > len(buf): raise DecodeError('field {what} runs past the end')")
        conv = "str(buf[pos:end], 'utf-8')" if typ is STRING else "bytes(buf[pos:end])"
        L(f"{indent}    {target} = {conv}; pos = end")
    elif isinstance(typ, Array):
        if flex:
            g.lines.extend(_read_len("n", indent))
            L(f"{indent}if n == 0:")
        else:
            _read_classic_len(g, typ, indent)
            L(f"{indent}if n < 0:")
        if nullable:
            L(f"{indent}    {target} = None")
        else:
            L(f"{indent}    raise DecodeError('non-nullable field {what} was null')")
        L(f"{indent}else:")
        el = typ.element
        inner = indent + "    "
        if not flex:
            # A hostile count must not allocate (or loop) before the bytes run out: every element takes a byte at
            # least (Kafka's "Tried to allocate a collection of size N" check). Flexible counts are length + 1.
            L(f"{inner}if n > len(buf) - pos: raise DecodeError('field {what} claims %d elements' % n)")
            L(f"{inner}n += 1")
        if isinstance(el, Primitive) and el.fmt:
            unpackers = g.const(_array_codecs(el.fmt)[1], "upk")
            L(f"{inner}n -= 1")
            L(f"{inner}if n == 0: {target} = []")
            L(f"{inner}elif n < {_SHORT}: {target} = list({unpackers}[n](buf, pos)); pos += n * {el.size}")
            L(f"{inner}else: {target} = list(_unpack('>%d{el.fmt}' % n, buf, pos)); pos += n * {el.size}")
        else:
            L(f"{inner}items = []")
            L(f"{inner}for _ in range(n - 1):")
            if isinstance(el, Struct):
                d = g.const(el.decoder(version), "d")
                L(f"{inner}    item, pos = {d}(buf, pos)")
            else:
                _decode_value(g, el, "item", inner + "    ", False, what + "[]", version, flex)
            L(f"{inner}    items.append(item)")
            L(f"{inner}{target} = items")
    elif isinstance(typ, Struct):
        d = g.const(typ.decoder(version), "d")
        if nullable:
            L(f"{indent}if buf[pos] == 0xFF: {target} = None; pos += 1")
            L(f"{indent}else: {target}, pos = {d}(buf, pos + 1)")
        else:
            L(f"{indent}{target}, pos = {d}(buf, pos)")
    else:  # pragma: no cover - specs are static
        raise TypeError(typ)


def _default_expr(g: _Gen, f: Field) -> str:
    if isinstance(f.default, list):
        return "[]" if not f.default else f"list({g.const(f.default, 'dflt')})"
    if isinstance(f.default, Struct):
        return f"{g.const(f, 'f')}.default_value()"
    return g.const(f.default, "dflt")  # immutable: int, float, bool, str, bytes, Uuid, None


def _compile_decoder(spec: Struct, version: int) -> Callable[[bytes, int], tuple[Any, int]]:
    g = _Gen()
    cls = g.const(spec.cls, "cls")
    L = g.lines.append
    L("def decode(buf, pos):")
    L(f"    o = {cls}.__new__({cls})")
    flex = spec.is_flexible(version)
    for f in spec.fields:
        what = f"{spec.name}.{f.name}"
        if f.present(version) and f.tag is None:
            _decode_value(g, f.type, f"o.{f.attr}", "    ", f.nullable(version), what, version, flex)
        else:
            L(f"    o.{f.attr} = {_default_expr(g, f)}")
    if not flex:  # no tagged fields in a non-flexible version
        L("    o.unknown_tags = None")
        L("    return o, pos")
        return g.compile("decode")
    tagged = [f for f in spec.fields if f.tag is not None and f.present(version)]
    L("    unknown = None")
    g.lines.extend(_read_len("count", "    "))
    L("    for _ in range(count):")
    g.lines.extend(_read_len("tag", "        "))
    g.lines.extend(_read_len("size", "        "))
    L("        end = pos + size")
    L("        if end > len(buf): raise DecodeError('tagged field %d runs past the end' % tag)")
    keyword = "if"
    for f in tagged:
        L(f"        {keyword} tag == {f.tag}:")
        _decode_value(g, f.type, f"o.{f.attr}", "            ", f.nullable(version), f"{spec.name}.{f.name}", version)
        L("            if pos != end: raise DecodeError('tagged field %d has a bad size' % tag)")
        keyword = "elif"
    L(f"        {'else' if tagged else 'if True'}:")
    L("            if unknown is None: unknown = []")
    L("            unknown.append((tag, bytes(buf[pos:end]))); pos = end")
    L("    o.unknown_tags = unknown")
    L("    return o, pos")
    return g.compile("decode")


def _encode_value(
    g: _Gen, typ: Any, value: str, indent: str, nullable: bool, what: str, version: int, flex: bool = True
) -> None:
    """Emit code appending ``value`` (an expression already bound to a local) to ``out``."""
    L = g.lines.append
    if isinstance(typ, Primitive) and typ.fmt:
        s = g.const(_FIXED[typ.fmt], "s")
        L(f"{indent}out += {s}.pack({value})")
        return
    if typ is UUID:
        L(f"{indent}if type({value}) is not _Uuid and len({value}) != 16:")
        L(f"{indent}    raise EncodeError('field {what} must be a 16-byte UUID')")
        L(f"{indent}out += {value}")
        return
    # Non-flexible lengths: int16 for strings, int32 for bytes and arrays, -1 for null.
    wide = g.const(_FIXED["h" if typ is STRING else "i"], "s") if not flex else ""
    null = "out.append(0)" if flex else f"out += {wide}.pack(-1)"
    null_check = [
        f"{indent}if {value} is None:",
        f"{indent}    {null}" if nullable else f"{indent}    raise EncodeError('field {what} is not nullable here')",
        f"{indent}else:",
    ]
    inner = indent + "    "
    if typ is STRING or typ is BYTES:
        g.lines.extend(null_check)
        if typ is STRING:
            L(f"{inner}data = {value}.encode('utf-8')")
            L(f"{inner}if len(data) > 0x7FFF: raise EncodeError('field {what} is longer than 32767 bytes')")
        else:
            L(f"{inner}data = bytes({value})")
        if flex:
            L(f"{inner}out += _uv(len(data) + 1); out += data")
        else:
            L(f"{inner}out += {wide}.pack(len(data)); out += data")
    elif isinstance(typ, Array):
        g.lines.extend(null_check)
        L(f"{inner}n = len({value})")
        if flex:
            L(f"{inner}if n < 0x7F: out.append(n + 1)")
            L(f"{inner}else: out += _uv(n + 1)")
        else:
            L(f"{inner}out += {wide}.pack(n)")
        el = typ.element
        if isinstance(el, Primitive) and el.fmt:
            packers = g.const(_array_codecs(el.fmt)[0], "pk")
            L(f"{inner}if n == 0: pass")
            L(f"{inner}elif n < {_SHORT}: out += {packers}[n](*{value})")
            L(f"{inner}else: out += _pack('>%d{el.fmt}' % n, *{value})")
        else:
            L(f"{inner}for item in {value}:")
            if isinstance(el, Struct):
                e = g.const(el.encoder(version), "e")
                L(f"{inner}    {e}(item, out)")
            else:
                _encode_value(g, el, "item", inner + "    ", False, what + "[]", version, flex)
    elif isinstance(typ, Struct):
        e = g.const(typ.encoder(version), "e")
        if nullable:
            L(f"{indent}if {value} is None: out.append(0xFF)")
            L(f"{indent}else: out.append(1); {e}({value}, out)")
        else:
            L(f"{indent}{e}({value}, out)")
    else:  # pragma: no cover
        raise TypeError(typ)


def _compile_encoder(spec: Struct, version: int) -> Callable[[Any, bytearray], None]:
    g = _Gen()
    L = g.lines.append
    L("def encode(o, out):")
    flex = spec.is_flexible(version)
    for f in spec.fields:
        what = f"{spec.name}.{f.name}"
        if not f.present(version) or (f.tag is not None and not flex):
            if not f.ignorable:
                d = g.const(f.default_value(), "dflt")
                L(f"    if o.{f.attr} != {d}:")
                L(f"        raise EncodeError('{what} cannot be written at version {version} (it has a value)')")
        elif f.tag is None:
            L(f"    v = o.{f.attr}")
            _encode_value(g, f.type, "v", "    ", f.nullable(version), what, version, flex)
    if not flex:
        L("    pass")
        return g.compile("encode")
    tagged = sorted((f for f in spec.fields if f.tag is not None and f.present(version)), key=lambda f: f.tag)
    L("    tagged = []")
    for f in tagged:
        d = g.const(f.default_value(), "dflt")
        L(f"    v = o.{f.attr}")
        L(f"    if v != {d}:")
        L("        outer, out = out, bytearray()")
        _encode_value(g, f.type, "v", "        ", f.nullable(version), f"{spec.name}.{f.name}", version)
        L(f"        tagged.append(({f.tag}, bytes(out))); out = outer")
    L("    if o.unknown_tags:")
    L("        tagged.extend(o.unknown_tags); tagged.sort(key=lambda t: t[0])")
    L("    out += _uv(len(tagged))")
    L("    for tag, data in tagged:")
    L("        out += _uv(tag); out += _uv(len(data)); out += data")
    return g.compile("encode")
