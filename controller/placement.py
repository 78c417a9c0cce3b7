"""Replica placement: which brokers hold each new partition, the first of them its leader.

Two placers, chosen by the controller's ``replica.placer`` setting:

- :class:`StripedReplicaPlacer` (default; Kafka's KRaft placer): racks in a ring, each with its unfenced brokers
  before its fenced ones; every partition takes its leader from the next rack that has an unfenced broker, then
  one broker per rack round the ring. After each partition the ring turns one rack and each rack's list one
  broker, which stripes the assignments (A0,B0,C0 / B1,C1,A1 / C2,A2,B2); after as many partitions as there are
  unfenced brokers everything is reshuffled. Rack spread beats broker balance; a fenced broker never leads.
  One deliberate difference from Kafka: within its rack the leader is taken by turns, not from the striped list,
  so leaders spread within +-1 over the unfenced brokers whenever racks are the same size (Kafka's list can hand
  a 3-broker rack's lead to the same broker every time; cf. apache/kafka#12529).
- :class:`RackUnawarePlacer`: the ZooKeeper-era ``assignReplicasToBrokersRackUnaware`` — a random start broker,
  then round-robin with a shift for the followers that grows every time the partitions wrap the broker list.
"""

from __future__ import annotations

import random
from typing import NamedTuple, Protocol

from quorum.errors import Errors, KafkaError


class PlacementError(KafkaError):
    code = Errors.INVALID_REPLICATION_FACTOR


class UsableBroker(NamedTuple):  # a tuple: the placer compares the broker list on every call, at C speed
    id: int
    rack: str | None
    fenced: bool


class ReplicaPlacer(Protocol):
    def place(self, partitions: int, replication_factor: int, brokers: list[UsableBroker]) -> list[list[int]]: ...


def _check(replication_factor: int, brokers: list[UsableBroker]) -> None:
    if replication_factor <= 0:
        raise PlacementError(
            f"Invalid replication factor {replication_factor}: the replication factor must be positive."
        )
    if not any(not b.fenced for b in brokers):
        raise PlacementError("All brokers are currently fenced." if brokers else "No brokers are registered.")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered."
        )


class _BrokerList:
    """A rack's brokers of one kind (fenced or unfenced), read in a rotating order. (Plain slots: a placement
    builds two per rack per topic.)"""

    __slots__ = ("brokers", "epoch", "index", "offset")

    def __init__(self, brokers: list[int], offset: int = 0) -> None:
        self.brokers = brokers
        self.index = 0  # brokers handed out in the current iteration epoch
        self.offset = offset
        self.epoch = 0

    def next(self, epoch: int) -> int:
        n = len(self.brokers)
        if n == 0:
            return -1
        if self.epoch != epoch:  # a new iteration epoch: start again, one further along
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % n
        if self.index >= n:
            return -1
        broker = self.brokers[(self.index + self.offset) % n]
        self.index += 1
        return broker


class _Rack:
    __slots__ = ("fenced", "unfenced")

    def __init__(self, unfenced: _BrokerList, fenced: _BrokerList) -> None:
        self.unfenced = unfenced
        self.fenced = fenced

    def next(self, epoch: int) -> int:
        broker = self.unfenced.next(epoch)
        return broker if broker >= 0 else self.fenced.next(epoch)


class StripedReplicaPlacer:
    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self._layout: tuple[list[UsableBroker], list[str | None], dict[str | None, tuple[list[int], list[int]]]] | None
        self._layout = None

    def _group(
        self, brokers: list[UsableBroker]
    ) -> tuple[list[str | None], dict[str | None, tuple[list[int], list[int]]]]:
        """Brokers by rack (unfenced, fenced; sorted), racks sorted: the same for every topic until the broker set
        changes, so it is kept for the next call."""
        if self._layout is not None and self._layout[0] == brokers:
            return self._layout[1], self._layout[2]
        groups: dict[str | None, tuple[list[int], list[int]]] = {}
        for b in brokers:
            unfenced, fenced = groups.setdefault(b.rack, ([], []))
            (fenced if b.fenced else unfenced).append(b.id)
        for unfenced, fenced in groups.values():
            unfenced.sort()
            fenced.sort()
        names = sorted(groups, key=lambda r: (r is not None, r or ""))  # brokers without a rack form one group
        self._layout = (list(brokers), names, groups)
        return names, groups

    def place(self, partitions: int, replication_factor: int, brokers: list[UsableBroker]) -> list[list[int]]:
        _check(replication_factor, brokers)
        names, groups = self._group(brokers)
        names = list(names)
        rng = self.rng
        racks: dict[str | None, _Rack] = {}
        leaders: dict[str | None, list[int]] = {}  # each rack's unfenced brokers, in the order they take the lead
        turn: dict[str | None, int] = {}  # whose turn it is to lead, per rack (set when the rack first leads)
        for name, (unfenced_ids, fenced_ids) in groups.items():
            racks[name] = _Rack(
                _BrokerList(list(unfenced_ids), rng.randrange(len(unfenced_ids)) if unfenced_ids else 0),
                _BrokerList(list(fenced_ids), rng.randrange(len(fenced_ids)) if fenced_ids else 0),
            )
            if unfenced_ids:
                leaders[name] = unfenced_ids  # read only
        unfenced = sum(len(u) for u, _ in groups.values())
        offset = rng.randrange(len(names))
        epoch = 0
        since_shuffle = 0
        out = []
        for _ in range(partitions):
            if since_shuffle == unfenced and unfenced > 1:
                # As many partitions as unfenced brokers: reshuffle so the same assignments do not repeat.
                rng.shuffle(names)
                for rack in racks.values():
                    rng.shuffle(rack.unfenced.brokers)
                    rng.shuffle(rack.fenced.brokers)
                since_shuffle = 0
            offset %= len(names)
            # The leader: the next rack round the ring with an unfenced broker. Its striped list yields Kafka's
            # choice, which is the leader the first time the rack leads; after that the rack's brokers lead by
            # turns. (Kafka keeps taking the striped list's choice, which concentrates leaders: a rack of 3,
            # read once per partition, hands the lead to the same broker every 3rd partition.) Turns spread
            # leaders within +-1 whenever racks are the same size.
            first = offset
            while (striped := racks[names[first]].unfenced.next(epoch)) < 0:
                first = (first + 1) % len(names)
            rack_name = names[first]
            candidates = leaders[rack_name]
            if rack_name not in turn:
                turn[rack_name] = candidates.index(striped)
            leader = candidates[turn[rack_name] % len(candidates)]
            turn[rack_name] += 1
            replicas = [leader]
            i = offset
            skip = first  # the leader's rack is skipped on the first pass round the ring
            while len(replicas) < replication_factor:
                broker = -1
                if i == skip:
                    skip = -1
                else:
                    broker = racks[names[i]].next(epoch)
                i = (i + 1) % len(names)
                if broker == leader:
                    # The list hands out the leader once; it stands for the striped choice the leader displaced.
                    broker = striped if striped != leader else -1
                if broker >= 0:
                    replicas.append(broker)
            epoch += 1
            since_shuffle += 1
            offset += 1
            out.append(replicas)
        return out


class RackUnawarePlacer:
    """Kafka's ``AdminUtils.assignReplicasToBrokersRackUnaware``, with the leader moved off fenced brokers."""

    def __init__(self, rng: random.Random | None = None, fixed_start: int = -1) -> None:
        self.rng = rng or random.Random()
        self.fixed_start = fixed_start

    def place(self, partitions: int, replication_factor: int, brokers: list[UsableBroker]) -> list[list[int]]:
        _check(replication_factor, brokers)
        ids = sorted(b.id for b in brokers)
        fenced = {b.id for b in brokers if b.fenced}
        n = len(ids)
        start = self.fixed_start if self.fixed_start >= 0 else self.rng.randrange(n)
        shift = self.fixed_start if self.fixed_start >= 0 else self.rng.randrange(n)
        out = []
        for p in range(partitions):
            if p > 0 and p % n == 0:
                shift += 1  # so that large topics do not repeat the same (leader, follower) pairs
            first = (p + start) % n
            replicas = [ids[first]]
            for j in range(replication_factor - 1):
                replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
            if replicas[0] in fenced:
                # KRaft never lets a fenced broker lead: promote the first unfenced replica, if any.
                live = next((i for i, r in enumerate(replicas) if r not in fenced), None)
                if live is None:
                    raise PlacementError(f"partition {p}: every chosen replica {replicas} is fenced")
                replicas.insert(0, replicas.pop(live))
            out.append(replicas)
        return out


PLACERS = {"striped": StripedReplicaPlacer, "rack-unaware": RackUnawarePlacer}
