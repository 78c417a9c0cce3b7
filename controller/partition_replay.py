"""What keeps a partition small in memory: shared tuples and registrations.

A partition's state is a :class:`PartitionRegistration` under a ``(topic id, index)`` key. Most of it repeats: a
cluster has few brokers and many partitions, so replica and ISR lists recur, and a new partition's registration
(leader the first replica, epochs 0) recurs as a whole. :class:`Shared` hands out one object per distinct value,
so a partition costs its key and dict slot plus whatever is really its own (``benchmarks/controller_memory.py``,
resident memory at 200k partitions: a created partition 125 B instead of 447 B). The objects are immutable, so
sharing them changes nothing a reader can see.
"""

from __future__ import annotations

from typing import Any

from controller.partition_change import PartitionRegistration

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
