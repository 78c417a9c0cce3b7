"""Random and mutated protobuf payloads, from a seeded generator (the seed is printed, so a failure replays).

``random_message`` fills any message type from its descriptor: each field set or not, integers at the edges of
their range as often as small ones, strings of every kind (empty, long, unicode, a valid topic name), repeated
fields of a few items, one branch of each oneof. ``mutate`` flips, inserts, deletes, duplicates and truncates bytes
of a serialized message (what a buggy or hostile encoder sends)."""

from __future__ import annotations

import os
import random

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

FD = FieldDescriptor
INT_RANGES = {
    FD.TYPE_INT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FD.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FD.TYPE_ENUM: (-(2**31), 2**31 - 1),
    FD.TYPE_INT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SINT64: (-(2**63), 2**63 - 1),
    FD.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FD.TYPE_UINT32: (0, 2**32 - 1),
    FD.TYPE_FIXED32: (0, 2**32 - 1),
    FD.TYPE_UINT64: (0, 2**64 - 1),
    FD.TYPE_FIXED64: (0, 2**64 - 1),
}
STRINGS = [
    "",
    "orders",
    "a" * 249,
    "a" * 250,
    "x" * 5000,
    "..",
    ".",
    "__cluster_metadata",
    "*",
    "User:*",
    "\u00e9\u4e2d",
    "\0",
]


def fuzz_count(default: int) -> int:
    """Payloads per method: PYKRAFT_FUZZ_COUNT (``make fuzz`` sets 100,000), else the short budget ``default``."""
    return int(os.environ.get("PYKRAFT_FUZZ_COUNT", default))


def fuzz_seed() -> int:
    """PYKRAFT_FUZZ_SEED replays a run; otherwise a fresh seed each run."""
    return int(os.environ.get("PYKRAFT_FUZZ_SEED") or random.SystemRandom().randrange(2**32))


def random_int(rng: random.Random, lo: int, hi: int) -> int:
    choice = rng.random()
    if choice < 0.3:
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 0, 1])
    if choice < 0.7:
        return max(lo, min(hi, rng.randint(-3, 1000)))
    return rng.randint(lo, hi)


def random_string(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(STRINGS)
    return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0, 0xD7FF)])) for _ in range(rng.randint(0, 40)))


def random_scalar(rng: random.Random, field: FieldDescriptor) -> object:
    t = field.type
    if t in INT_RANGES:
        if t == FD.TYPE_ENUM and field.enum_type is not None and rng.random() < 0.7:
            return rng.choice(field.enum_type.values).number
        return random_int(rng, *INT_RANGES[t])
    if t == FD.TYPE_BOOL:
        return rng.random() < 0.5
    if t in (FD.TYPE_FLOAT, FD.TYPE_DOUBLE):
        return rng.choice([0.0, -1.0, 1e300, float("inf"), float("nan"), rng.random()])
    if t == FD.TYPE_STRING:
        return random_string(rng)
    if t == FD.TYPE_BYTES:
        return rng.randbytes(rng.choice([0, 1, 16, rng.randint(0, 300)]))
    raise AssertionError(f"no generator for field type {t}")


def fill(rng: random.Random, message: Message, depth: int = 0) -> Message:
    descriptor: Descriptor = message.DESCRIPTOR
    chosen = {o.name: rng.choice(o.fields) for o in descriptor.oneofs if rng.random() < 0.8}
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and chosen.get(oneof.name) is not field:
            continue
        if oneof is None and rng.random() < 0.3:
            continue  # left unset
        repeated = field.is_repeated
        if field.type == FD.TYPE_MESSAGE:
            if depth > 4:
                continue
            if repeated:
                if field.message_type.GetOptions().map_entry:
                    continue
                for _ in range(rng.choice([0, 1, 2, 3, rng.randint(0, 20)])):
                    fill(rng, getattr(message, field.name).add(), depth + 1)
            else:
                fill(rng, getattr(message, field.name), depth + 1)
                if oneof is not None:
                    getattr(message, field.name).SetInParent()
        elif repeated:
            getattr(message, field.name).extend(
                random_scalar(rng, field) for _ in range(rng.choice([0, 1, 2, rng.randint(0, 30)]))
            )
        else:
            setattr(message, field.name, random_scalar(rng, field))
    return message


def random_message(rng: random.Random, cls: type[Message]) -> Message:
    return fill(rng, cls())


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        at = rng.randint(0, len(out))
        if op == 0 and out:  # flip a byte
            at = min(at, len(out) - 1)
            out[at] ^= 1 << rng.randrange(8) if rng.random() < 0.5 else rng.randint(1, 255)
        elif op == 1:  # insert bytes
            out[at:at] = rng.randbytes(rng.randint(1, 8))
        elif op == 2 and out:  # delete bytes
            del out[at : at + rng.randint(1, 8)]
        elif op == 3 and out:  # duplicate a slice
            end = min(len(out), at + rng.randint(1, 32))
            out[at:at] = out[at:end]
        else:  # truncate
            del out[at:]
    return bytes(out)


def payload(rng: random.Random, cls: type[Message]) -> bytes:
    """One request body: random bytes, a random message, or a mutated one — a third each."""
    kind = rng.randrange(3)
    if kind == 0:
        return rng.randbytes(rng.choice([0, 1, 2, rng.randint(0, 200)]))
    data = random_message(rng, cls).SerializeToString()
    return data if kind == 1 else mutate(rng, data)
