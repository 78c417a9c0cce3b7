"""A pass over every partition, a slice per event, for the controller's periodic work (leader balancing, unclean
elections).

Kafka keeps indexes for that work (the imbalanced partitions, the partitions without a leader). Ours scanned every
partition in one event: at 2M partitions one balancing run held the active controller's loop 1.7 s, its followers
took it for gone and elected another leader. A :class:`PartitionScan` visits about ``budget`` partitions per run,
topic by topic, and the next run goes on from there; a pass over 2M partitions is ~100 runs of a few ms, with other
events between them. A visitor may stop a run (a cap on elections reached): the partition it stopped at is visited
first by the next run.

The topic ids are taken when a pass starts: a topic deleted since is passed over, one created since waits for the
next pass. Partitions are numbered 0..n-1 within a topic, so a topic's are read until the first missing index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from controller.partition_change import PartitionRegistration
from quorum.log.message import Uuid

if TYPE_CHECKING:
    from controller.replication_control import ReplicationControl

SCAN_PARTITIONS_PER_RUN = 20_000  # ~15-30 ms of a run at 2M partitions

Visit = Callable[[tuple[Uuid, int], PartitionRegistration], bool]


class PartitionScan:
    def __init__(self) -> None:
        self._topics: list[Uuid] = []
        self._next = 0  # the topic the next run starts with, and the partition index within it
        self._index = 0

    def run(self, replication: ReplicationControl, visit: Visit, budget: int = SCAN_PARTITIONS_PER_RUN) -> bool:
        """Visit about ``budget`` partitions (whole topics, unless ``visit`` returns False to stop before the
        partition it was given). True when this run ended a pass: the next run starts a new one."""
        if self._next >= len(self._topics):
            self._topics, self._next, self._index = list(replication.topics), 0, 0
        partitions = replication.partitions
        seen = 0
        while self._next < len(self._topics) and seen < budget:
            topic_id = self._topics[self._next]
            i = self._index
            while (p := partitions.get((topic_id, i))) is not None:
                if not visit((topic_id, i), p):
                    self._index = i
                    return False
                i += 1
                seen += 1
            self._next, self._index = self._next + 1, 0
        return self._next >= len(self._topics)
