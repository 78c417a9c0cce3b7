"""Why a message could not be encoded: the field and value to blame, found after the compiled encoder failed (the
slow path of :meth:`quorum.log.message.Message.encode`, kept apart from the codec)."""

from __future__ import annotations

from typing import Any

from quorum.log.message import BOOL, BYTES, FLOAT64, STRING, UNSET, UUID, Array, Primitive, Struct


def explain(spec: Struct, obj: Any, version: int, path: str = "") -> str | None:
    """After an encoder failed, find the field and value to blame (slow path, errors only)."""
    for f in spec.fields:
        if not f.present(version):
            continue
        where = f"{path}{spec.name}.{f.name}"
        value = getattr(obj, f.attr, UNSET)
        if value is UNSET:
            return f"{where} is missing"
        problem = _check_value(f.type, value, f.nullable(version), where, version)
        if problem:
            return problem
    return None


_RANGES = {
    "b": (-(2**7), 2**7 - 1),
    "h": (-(2**15), 2**15 - 1),
    "i": (-(2**31), 2**31 - 1),
    "q": (-(2**63), 2**63 - 1),
    "H": (0, 2**16 - 1),
}


def _check_value(typ: Any, value: Any, nullable: bool, where: str, version: int) -> str | None:
    if value is None:
        return None if nullable else f"{where} is null but not nullable at version {version}"
    if isinstance(typ, Primitive):
        if typ.fmt in _RANGES:
            lo, hi = _RANGES[typ.fmt]
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                return f"{where} = {value!r} is not a valid {typ.name}"
        elif typ is BOOL and not isinstance(value, bool):
            return f"{where} = {value!r} is not a bool"
        elif typ is FLOAT64 and not isinstance(value, int | float):
            return f"{where} = {value!r} is not a float64"
        elif typ is UUID and (not isinstance(value, bytes) or len(value) != 16):
            return f"{where} = {value!r} is not a UUID"
        elif typ is STRING and not isinstance(value, str):
            return f"{where} = {value!r} is not a string"
        elif typ is BYTES and not isinstance(value, bytes | bytearray | memoryview):
            return f"{where} = {value!r} is not bytes"
        return None
    if isinstance(typ, Array):
        if not isinstance(value, list | tuple):
            return f"{where} = {value!r} is not a list"
        for i, item in enumerate(value):
            problem = _check_value(typ.element, item, False, f"{where}[{i}]", version)
            if problem:
                return problem
        return None
    if not isinstance(value, typ.cls):
        return f"{where} = {value!r} is not a {typ.name}"
    return explain(typ, value, version, f"{where}.")
