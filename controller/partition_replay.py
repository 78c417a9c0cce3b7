"""What keeps a partition small in memory: shared tuples and registrations, and PartitionRecords replayed straight
from their bytes.

A partition's state is a :class:`PartitionRegistration` under a ``(topic id, index)`` key. Most of it repeats: a
cluster has few brokers and many partitions, so replica and ISR lists recur, and a new partition's registration
(leader the first replica, epochs 0) recurs as a whole. :class:`Shared` hands out one object per distinct value,
so a partition costs its key and dict slot plus whatever is really its own (``benchmarks/controller_memory.py``,
resident memory at 200k partitions: a created partition 125 B instead of 447 B). The objects are immutable, so
sharing them changes nothing a reader can see.

:class:`PartitionRecordReplay` applies a PartitionRecord v0/v1 from its bytes (what our controllers write: nearly
every record of a large log or snapshot) without building the message, its lists and a Uuid per directory: the
snapshot loader and a standby's ``handle_commit`` share it (a standby's partition: 172 B instead of 815 B, at 3.7x
the records/s). It takes only records it understands completely, and only into committed state (nothing pending: a
standby, or a fresh load); anything else — another version, unknown tags, an unknown topic, a malformed record — is
left to the generic decode and replay, which apply it or explain why not. For what it takes, it does exactly what
the generic replay does.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from controller.partition_change import NO_LEADER_CHANGE, PartitionRegistration
from controller.records import PartitionChangeRecord, PartitionRecord
from quorum.log.message import Uuid

if TYPE_CHECKING:
    from controller.replication_control import ReplicationControl

# Bounds on the tables of shared values. A table that fills up is emptied and starts over: in a cluster too large
# for its distinct values to fit, the ones seen lately are shared, and the tables never hold more than this.
MAX_SHARED_TUPLES = 1 << 14
MAX_SHARED_REGISTRATIONS = 1 << 14

_new = tuple.__new__


class Shared:
    """One object per distinct tuple of ints (or directory ids) and per distinct registration."""

    __slots__ = ("registrations", "tuples")

    def __init__(self) -> None:
        self.tuples: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.registrations: dict[PartitionRegistration, PartitionRegistration] = {}

    def clear(self) -> None:
        self.tuples.clear()
        self.registrations.clear()

    def tuple_of(self, values: Any) -> tuple[Any, ...]:
        t = tuple(values)
        shared = self.tuples.get(t)
        if shared is not None:
            return shared
        if len(self.tuples) >= MAX_SHARED_TUPLES:
            self.tuples.clear()
        self.tuples[t] = t
        return t

    def registration(self, p: PartitionRegistration) -> PartitionRegistration:
        shared = self.registrations.get(p)
        if shared is not None:
            return shared
        tup = self.tuple_of
        p = _new(
            PartitionRegistration,
            (tup(p[0]), tup(p[1]), p[2], p[3], p[4], tup(p[5]), tup(p[6]), p[7], tup(p[8])),
        )
        if len(self.registrations) >= MAX_SHARED_REGISTRATIONS:
            self.registrations.clear()
        self.registrations[p] = p
        return p


# -- PartitionRecord v0/v1 from bytes --------------------------------------------------------------------------
# The frame (version 1, api key, record version) and then the body: partition id (int32), topic id (16 bytes),
# replicas, ISR, removing and adding (compact int32 arrays), leader, leader epoch, partition epoch (int32s), in v1
# directories (a compact array of Uuids), then the tagged fields (only tag 0, LeaderRecoveryState, exists in v0-1).

_PARTITION_V0 = bytes((1, PartitionRecord.SPEC.api_key, 0))  # type: ignore[attr-defined]
_PARTITION_V1 = bytes((1, PartitionRecord.SPEC.api_key, 1))  # type: ignore[attr-defined]
_I32 = struct.Struct(">i").unpack_from
_I8 = struct.Struct(">b").unpack_from
_3I32 = struct.Struct(">iii").unpack_from
_BODY = 23  # the offset of the replicas array: 3 bytes of frame, the partition id, the topic id


def _null(buf: bytes, pos: int) -> tuple[int, ...]:
    raise ValueError("a null array")


# Indexed by the compact array's length byte (count + 1; a longer array takes a multi-byte varint and the generic
# path): the unpacker of that many int32s.
_INT_ARRAYS: list[Callable[[bytes, int], tuple[int, ...]]] = [_null] + [
    struct.Struct(f">{n}i").unpack_from for n in range(127)
]
_NO_TAGS = b"\x00"
_RECOVERY_STATE_TAGS = {b"\x01\x00\x01\x00": 0, b"\x01\x00\x01\x01": 1}  # tag 0 (LeaderRecoveryState), 1 byte


# -- PartitionChangeRecord v0-2 from bytes ----------------------------------------------------------------------
# The frame, partition id, topic id, then only tagged fields. Taken here: ISR (tag 0, a compact int32 array), leader
# (tag 1, int32) and leader recovery state (tag 5, int8) — what fencing, elections and AlterPartition write — on a
# partition that is not being reassigned. Any other tag (replicas, directories, ELR ...) takes the generic path.

_CHANGE_HEADERS = {bytes((1, PartitionChangeRecord.SPEC.api_key, v)) for v in range(3)}  # type: ignore[attr-defined]
_ISR, _LEADER, _RECOVERY = 0, 1, 5
_NO_CHANGE = (None, NO_LEADER_CHANGE, -1)
_UNSEEN = object()  # a change body not decoded yet (None: decoded, not ours to take)


def _decode_change(body: bytes) -> tuple[tuple[int, ...] | None, int, int] | None:
    """(ISR or None, leader or -2, recovery state or -1) from a change's tagged fields; None if it holds anything
    else (or a length that takes a multi-byte varint: the generic path then)."""
    count = body[0]
    if count > 3:
        return None
    isr, leader, recovery = _NO_CHANGE
    pos = 1
    for _ in range(count):
        tag, size = body[pos], body[pos + 1]
        pos += 2
        if size >= 0x80:
            return None
        if tag == _ISR:
            n = body[pos]
            if n == 0 or size != 1 + 4 * (n - 1):
                return None  # null (not ours to write), or a count that takes a multi-byte varint
            isr = _INT_ARRAYS[n](body, pos + 1)
        elif tag == _LEADER and size == 4:
            leader = _I32(body, pos)[0]
        elif tag == _RECOVERY and size == 1:
            recovery = _I8(body, pos)[0]
        else:
            return None
        pos += size
    return (isr, leader, recovery) if pos == len(body) else None


class PartitionRecordReplay:
    """Applies PartitionRecords v0/v1 and the common PartitionChangeRecords from their bytes into a
    ReplicationControl's committed state. Only while nothing is pending (the caller's check): it writes the
    committed maps directly, as a standby's replay does."""

    def __init__(self, replication: ReplicationControl) -> None:
        self._topics = replication.topics.committed()
        self._partitions = replication.partitions
        self._parts = replication.partitions.committed()
        self._put = self._partitions.__setitem__  # through the map: its version and watchers see each change
        self._loading = False
        self._track = replication.reassignments.track
        self._shared = replication.shared
        # The registration each record body (all but partition and topic id) decodes to, by record version (the
        # same bytes read otherwise in another): most bodies repeat.
        self._bodies: tuple[dict[bytes, PartitionRegistration], ...] = ({}, {})
        self._changes: dict[bytes, tuple[tuple[int, ...] | None, int, int] | None] = {}  # change body -> decoded
        # (id(registration), id(change)) -> (registration, change, the registration after it): see _apply_change.
        self._steps: dict[tuple[int, int], tuple[Any, Any, PartitionRegistration]] = {}

    def bulk(self, loading: bool) -> None:
        """While a snapshot loads into fresh state (TimelineDict.bulk_load: the map's version is bumped once and
        its readers read everything again), write the committed dict itself: ~0.5 µs a partition less."""
        self._loading = loading
        self._put = self._parts.__setitem__ if loading else self._partitions.__setitem__

    def release(self) -> None:
        """Forget the decoded bodies: the state this replays into is being thrown away."""
        for bodies in self._bodies:
            bodies.clear()
        self._changes.clear()
        self._steps.clear()

    def apply(self, value: bytes) -> bool:
        """Replay ``value`` if it is a PartitionRecord or PartitionChangeRecord this path reads; False (nothing
        done) if not: the caller then takes the generic path."""
        return self.apply_run((value,)) == 1

    def apply_run(self, values: Sequence[bytes], start: int = 0) -> int:
        """:meth:`apply` each of ``values`` from ``start`` on, up to the first it does not take; returns that
        record's index (``len(values)`` if it took them all). One call per run of records, not per record: a
        snapshot is nearly all PartitionRecords, and the call, the topic lookup (the run's records come topic by
        topic) and, while loading, the lookup of a previous value (there is none) are what this loop saves
        (measured: 12% of the replay CPU of a 2M-partition snapshot, best of 3 each)."""
        topics, parts, put = self._topics, self._parts, self._put
        loading = self._loading  # a bulk load into fresh state: a key is nearly always new
        setdefault = parts.setdefault
        partitions = self._partitions
        notes = None if loading else partitions.change_notes()
        bodies_by_version, decode, track = self._bodies, self._decode, self._track
        raw_id: bytes = b""  # the topic id of the previous record, as its bytes, and its topic's own id object
        topic_id: Uuid | None = None
        for i in range(start, len(values)):
            value = values[i]
            if value.startswith(_PARTITION_V1):  # startswith: no slice made per record
                v1 = True
            elif value.startswith(_PARTITION_V0):
                v1 = False
            else:
                if value[:3] in _CHANGE_HEADERS and self._apply_change(value, notes):
                    continue
                return i
            if topic_id is None or not value.startswith(raw_id, 7):
                topic = topics.get(value[7:_BODY])
                if topic is None:
                    return i  # the generic path names the unknown topic
                raw_id, topic_id = value[7:_BODY], topic.id  # keys share the topic's id rather than hold a copy
            bodies = bodies_by_version[v1]
            body = value[_BODY:]
            p = bodies.get(body)
            if p is None:
                try:
                    p = decode(value, v1)
                except (IndexError, ValueError, struct.error):
                    return i  # the generic path explains what is wrong with it
                if p is None:
                    return i
                if len(bodies) >= MAX_SHARED_REGISTRATIONS:
                    bodies.clear()
                bodies[body] = p
            index = _I32(value, 3)[0]
            key = (topic_id, index)
            # One lookup: a new key (a created partition: nearly every one while loading, most in a standby's
            # replay) goes in at once; an old one is written below. The committed value is the latest: nothing is
            # pending. A standby's new key is noted as the map's own write would note it (2M PartitionRecords
            # replayed into a watched map, as a broker's image: 3.37-4.30 -> 3.25-3.84 s, three runs each).
            held = len(parts)
            before = setdefault(key, p)
            if len(parts) == held:
                put(key, p)
            else:
                before = None
                if not loading:
                    partitions.version += 1
                    if notes is not None:
                        notes[key] = None
            if p[5] or p[6] or (before is not None and (before[5] or before[6])):  # moving (removing, adding)
                track(topic_id, index, before, p)
        return len(values)

    def _apply_change(self, value: bytes, notes: dict[Any, None] | None) -> bool:
        """As the generic replay's ``merge``: a named leader bumps the leader epoch, every change the partition
        epoch. Only on a partition not being reassigned (its change then cannot start or end a reassignment).

        Registrations and decoded changes are shared objects, so a change applied to a registration gives the same
        registration every time: a controlled shutdown writes one change per partition the broker was in, from a
        few registrations and a few changes. That result is kept by the two objects' ids, with the objects
        themselves (they stay alive, so their ids are not reused while kept): a broker's restart replays up to 20
        MiB of such changes after its snapshot (~570k at 2M partitions)."""
        topic = self._topics.get(value[7:_BODY])
        if topic is None:
            return False
        key = (topic.id, _I32(value, 3)[0])
        parts = self._parts
        p = parts.get(key)
        if p is None or p[5] or p[6]:  # unknown (the generic path says so), or moving
            return False
        body = value[_BODY:]
        changes = self._changes
        change = changes.get(body, _UNSEEN)
        if change is _UNSEEN:
            try:
                change = _decode_change(body)
            except (IndexError, struct.error):
                change = None
            if len(changes) >= MAX_SHARED_REGISTRATIONS:
                changes.clear()
            changes[body] = change
        if change is None:
            return False
        step = (id(p), id(change))
        known = self._steps.get(step)
        if known is not None and known[0] is p and known[1] is change:
            after = known[2]
        else:
            after = self._changed(p, change)
            if len(self._steps) >= MAX_SHARED_REGISTRATIONS:
                self._steps.clear()
            self._steps[step] = (p, change, after)
        # The committed dict itself, as TimelineDict's own write with no offset set does (the caller's check).
        parts[key] = after
        if not self._loading:
            self._partitions.version += 1
            if notes is not None:
                notes[key] = None
        return True

    def _changed(
        self, p: PartitionRegistration, change: tuple[tuple[int, ...] | None, int, int]
    ) -> PartitionRegistration:
        isr, leader, recovery = change
        replicas, old_isr, old_leader, leader_epoch, partition_epoch, removing, adding, old_recovery, dirs = p
        if leader != NO_LEADER_CHANGE:
            old_leader, leader_epoch = leader, leader_epoch + 1
        after = _new(
            PartitionRegistration,
            (
                replicas,
                old_isr if isr is None else self._shared.tuple_of(isr),
                old_leader,
                leader_epoch,
                partition_epoch + 1,
                removing,
                adding,
                old_recovery if recovery == -1 else recovery,
                dirs,
            ),
        )
        return self._shared.registration(after)

    def _decode(self, value: bytes, v1: bool) -> PartitionRegistration | None:
        arrays = _INT_ARRAYS
        tup = self._shared.tuple_of
        pos = _BODY
        lists = []
        for _ in range(4):  # replicas, isr, removing, adding
            n = value[pos]
            lists.append(tup(arrays[n](value, pos + 1)))
            pos += 4 * n - 3
        leader, leader_epoch, partition_epoch = _3I32(value, pos)
        pos += 12
        directories: tuple[Uuid, ...] = ()
        if v1:
            n = value[pos] - 1
            if not 0 <= n < 0x7F:
                return None  # null, or a count that takes a multi-byte varint
            pos += 1
            end = pos + 16 * n
            if end > len(value):
                return None
            directories = tup(Uuid(value[i : i + 16]) for i in range(pos, end, 16))
            pos = end
        tags = value[pos:]
        recovery = 0 if tags == _NO_TAGS else _RECOVERY_STATE_TAGS.get(tags)
        if recovery is None:
            return None
        replicas, isr, removing, adding = lists
        return self._shared.registration(
            _new(
                PartitionRegistration,
                (replicas, isr, leader, leader_epoch, partition_epoch, removing, adding, recovery, directories),
            )
        )
