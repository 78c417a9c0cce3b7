"""A broker's view of its partitions and of every broker, read in place from its metadata image (the
QuorumController its Raft observer feeds, see :mod:`broker.observer`): committed state only, no RPC."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, NamedTuple

from controller.quorum_controller import QuorumController
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import BrokerState, PartitionUpdate
from quorum.log.message import Uuid
from quorum.memory import release_freed_memory

# Partitions applied to the replica manager between two yields to the loop: ~10 ms of CPU (a new replica costs
# ~5 us here). After a catch-up a delta holds hundreds of thousands; applied at once they held a broker's loop, and
# so its Raft fetches and its followers' fetches, for seconds (at nice 10 on a loaded machine, 4-10 s of wall time).
APPLY_SLICE = 2_000


class ImageChanges(NamedTuple):
    """What :meth:`ImageMetadata.read` found changed since the last read."""

    full: bool  # everything must be read again: :meth:`ImageMetadata.read_all`, then :meth:`ImageMetadata.gone`
    partitions: list[PartitionUpdate]  # this broker's partitions that came or changed (none when full)
    removed: list[tuple[Uuid, int]]  # partitions gone, or without a replica here now (none when full)
    brokers: dict[int, BrokerState] | None  # every broker, if they changed
    configs: bool  # the dynamic configs changed

    @property
    def metadata(self) -> bool:
        return self.full or bool(self.partitions or self.removed) or self.brokers is not None


class ImageMetadata:
    """This broker's partitions and every broker, read in place from a metadata image (committed state only).

    The first :meth:`read`, and the first after a snapshot load replaced or reloaded the maps, says ``full``: the
    caller walks every partition with :meth:`read_all`, in slices it applies as they come (yielding to the loop
    between them, so a million partitions never hold up Raft for long, and never all exist twice: as image entries
    and as updates), then drops what :meth:`gone` names. Every other read takes only the partitions whose
    committed value changed since, as the image's map noted them
    (:meth:`~controller.timeline.TimelineDict.take_committed_changes`): Kafka's MetadataDelta, so that a broker's
    cost follows what changes, not what exists. A value that changes while a full walk is under way is read
    again by the next delta."""

    SLICE = 10_000  # partitions walked between two yields to the loop (half held here at RF 3 of 6: ~25 ms)

    def __init__(self, image: QuorumController, broker_id: int, listener_name: str = "PLAINTEXT") -> None:
        self.image = image
        self.broker_id = broker_id
        self.listener_name = listener_name
        self.brokers: dict[int, BrokerState] = {}
        self._maps_seen: tuple[object, ...] = ()
        self._brokers_seen: tuple[object, ...] = ()
        self._configs_seen: tuple[object, ...] = ()

    def ready(self, broker_epoch: int) -> bool:
        """Does the image hold this broker's registration in ``broker_epoch`` (the offset of its record)? Then it
        holds everything committed before the broker registered."""
        b = self.image.cluster.brokers.committed().get(self.broker_id)
        return b is not None and b.epoch >= broker_epoch >= 0

    async def read(self) -> ImageChanges:
        image = self.image
        r = image.replication
        maps = (r.partitions, r.topics)
        seen = (*maps, r.partitions.loads, r.topics.loads)
        if not _same(seen, self._maps_seen):
            self._maps_seen = seen
            r.partitions.take_committed_changes()  # from now on, note what changes while everything is read
            full, partitions, removed = True, [], []
        else:
            full = False
            partitions, removed = await self._read_changes(r.partitions.take_committed_changes())
        brokers_map = image.cluster.brokers
        seen = (brokers_map, brokers_map.version)
        brokers = None
        if not _same(seen, self._brokers_seen):
            self._brokers_seen = seen
            now = self._brokers()
            if now != self.brokers:
                self.brokers = brokers = now
        configs = image.configs.configs
        seen = (configs, configs.version)
        configs_changed = not _same(seen, self._configs_seen)
        self._configs_seen = seen
        return ImageChanges(full, partitions, removed, brokers, configs_changed)

    async def read_all(self, held: Callable[[Any, Any], bool] | None = None) -> AsyncIterator[list[PartitionUpdate]]:
        """Every partition with a replica here, a slice at a time, yielding to the loop between slices. Each value
        is the committed one when its slice is read: what commits meanwhile was noted for the next delta. Those
        ``held(key, registration)`` says are held already as they are are passed over (after a snapshot install
        that is nearly all of them: nothing applied for each). Each update is ``(key, topic name, registration)``:
        the image's own objects, nothing built per partition (building a PartitionMetadata each was 4% of a
        broker's CPU samples while 600,000 partitions were created)."""
        keys = list(self.image.replication.partitions.committed())  # this instant's keys: 8 bytes each
        me = self.broker_id
        for start in range(0, len(keys), self.SLICE):
            if start:
                await asyncio.sleep(0)
            partitions, topics = self._maps()  # a snapshot load meanwhile replaced (and emptied) the old ones
            out = []
            for key in keys[start : start + self.SLICE]:
                p = partitions.get(key)
                if p is None or me not in p.replicas or (held is not None and held(key, p)):
                    continue
                if (t := topics.get(key[0])) is not None:
                    out.append((key, t.name, p))
            yield out

    def gone(self, held: Iterable[tuple[Uuid, int]]) -> list[tuple[Uuid, int]]:
        """Of the partitions ``held``, those the image no longer gives this broker: after :meth:`read_all`."""
        partitions, topics = self._maps()
        me = self.broker_id
        return [k for k in held if (p := partitions.get(k)) is None or me not in p.replicas or k[0] not in topics]

    async def _read_changes(
        self, keys: dict[tuple[Uuid, int], None]
    ) -> tuple[list[PartitionUpdate], list[tuple[Uuid, int]]]:
        partitions, topics = self._maps()
        me = self.broker_id
        changed, removed = [], []
        for n, key in enumerate(keys):
            if n and n % self.SLICE == 0:
                await asyncio.sleep(0)  # what changes meanwhile is noted for the next read
                partitions, topics = self._maps()  # after a snapshot load: the new state (the next read is full)
            p = partitions.get(key)
            t = topics.get(key[0]) if p is not None else None
            if t is None or me not in p.replicas:
                removed.append(key)
            else:
                changed.append((key, t.name, p))
        return changed, removed

    def _maps(self) -> tuple[dict[tuple[Uuid, int], Any], dict[Uuid, Any]]:
        """The committed partitions and topics of the image's current state (a snapshot load replaces them)."""
        r = self.image.replication
        return r.partitions.committed(), r.topics.committed()

    def _brokers(self) -> dict[int, BrokerState]:
        out = {}
        for b in self.image.cluster.brokers.committed().values():
            endpoint = next(((e.host, e.port) for e in b.endpoints if e.name == self.listener_name), None)
            out[b.id] = BrokerState(b.epoch, b.fenced, b.in_controlled_shutdown, endpoint)
        return out


async def apply_image(image: ImageMetadata, manager: ReplicaManager) -> tuple[ImageChanges, int]:
    """Read what changed in the image and apply it to ``manager``: everything, a slice at a time, when the read says
    ``full``; else the delta. Returns the read and how many partitions changed state."""
    news = await image.read()
    if not news.full:
        if not news.metadata:
            return news, 0
        brokers_now, changed = news.brokers, 0
        updates = news.partitions
        for start in range(0, len(updates), APPLY_SLICE):
            if start:
                await asyncio.sleep(0)
            changed += manager.apply_updates(updates[start : start + APPLY_SLICE], [], brokers_now)
            brokers_now = None
        changed += manager.apply_updates([], news.removed, brokers_now)
        return news, changed
    brokers: dict[int, BrokerState] | None = image.brokers
    changed = 0
    async for partitions in image.read_all(manager.holds):
        changed += manager.apply_updates(partitions, [], brokers)
        brokers = None
    changed += manager.apply_updates([], image.gone(list(manager.partitions)), brokers)
    manager.rekey()
    release_freed_memory()  # after a snapshot load, the old image's keys were freed only now (re-keyed)
    return news, changed


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Equal map by map (by identity: a snapshot load makes new ones) and count by count."""
    if len(a) != len(b):
        return False
    half = len(a) // 2
    return all(x is y for x, y in zip(a[:half], b[:half], strict=True)) and a[half:] == b[half:]
