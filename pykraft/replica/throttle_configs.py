"""The replication-throttle configs a broker needs, read in place from its metadata image's committed config state,
at a cost that follows what changed.

DescribeConfigs through the image (every config of the resource, its synonyms at every level, the event queue) is
built for an admin asking once. A broker asks for four values, for every watched topic (a replica out of its ISR or
moving), each time its metadata changes: during an ISR-shrink wave thousands of topics are watched and the metadata
changes at every poll, and describing them all again and again took 40% of a broker's CPU (issue 14). Here:

- the values are resolved as DescribeConfigs resolves these keys, and rendered as it renders them: a topic's
  ``*.replication.throttled.replicas`` is its own value if it parses, else the default (these keys have no broker
  synonyms); a broker's ``*.replication.throttled.rate`` is its own dynamic value, else the cluster-wide default
  broker entity's (resource name ""), else the static config, else the default, each level passed over when its
  value does not parse. A topic that does not exist, or a broker neither registered nor the image's own node, is
  not read (the caller keeps what it knew), as DescribeConfigs' errors are.
- only what may have changed is read: when the config map changed (another map, or its version or load count
  moved: a snapshot load replaces or reloads it) the rates and every topic asked for; else only the topics that
  became watched since the last read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.config_control import ConfigControl
from controller.configs import (
    BROKER_CONFIGS,
    BROKER_RESOURCE,
    TOPIC_CONFIGS,
    TOPIC_RESOURCE,
    InvalidConfigError,
    render_value,
)
from controller.quorum_controller import QuorumController
from controller.topic_names import validate_topic_name
from pykraft.replica.throttle import BROKER_KEYS, TOPIC_KEYS, parse_rate
from quorum.errors import KafkaError

_MISSING: Any = object()


@dataclass
class ThrottleReads:
    """What one :meth:`ThrottleConfigReader.read` read."""

    full: bool  # the configs changed: the rates and every topic asked for were read
    rates: tuple[int, int] | None = None  # (leader, follower) effective rates; None: not read
    topics: list[tuple[str, str, str]] = field(default_factory=list)  # (topic, leader replicas, follower replicas)


class ThrottleConfigReader:
    """A broker's throttle configs from its image (a QuorumController fed committed records only)."""

    SLICE = 2_000  # topics read between two yields to the loop

    def __init__(self, image: QuorumController, broker_id: int) -> None:
        self.image = image
        self.broker_id = broker_id
        self._seen: tuple[object, ...] = ()
        self._read: set[str] = set()  # watched topics read since the configs last changed
        self._rates_pending = True  # the rates could not be read (broker unknown): try again at the next read
        self.topics_read = 0  # topic configs read, all reads together (what the reads cost)

    async def read(self, watched: set[str], known: Iterable[str] = ()) -> ThrottleReads:
        """The throttle values that may have changed since the last read, for the topics ``watched`` now. When the
        configs changed, the topics ``known`` (those the caller holds values of, watched or not) are read too, so
        that none it keeps goes stale."""
        configs = self.image.configs.configs
        seen = (configs, configs.version, configs.loads)
        full = not (self._seen and self._seen[0] is configs and self._seen[1:] == seen[1:])
        # The image replays committed records only, so the version moves with the committed state. Noted before
        # reading: a change while the read yields is read again next time.
        self._seen = seen
        if full:
            self._read = set()
            wanted = watched.union(known)
        else:
            self._read &= watched  # one unwatched and watched again is read again
            wanted = watched - self._read
        out = ThrottleReads(full)
        if full or self._rates_pending:
            out.rates = self.rates()
            self._rates_pending = out.rates is None
        for n, topic in enumerate(sorted(wanted)):
            if n and n % self.SLICE == 0:
                await asyncio.sleep(0)
            values = self.topic(topic)
            if values is None:
                continue  # unknown now: asked again at the next read
            out.topics.append((topic, *values))
            if topic in watched:
                self._read.add(topic)
        self.topics_read += len(wanted)
        return out

    def rates(self) -> tuple[int, int] | None:
        """This broker's effective (leader, follower) throttle rates; None if DescribeConfigs would refuse the
        resource (a broker neither registered nor the image's own node)."""
        control: ConfigControl = self.image.configs
        broker = self.broker_id
        if broker != control.node_id and not control.broker_registered(broker):
            return None
        view = control.configs.committed()
        levels = (
            dict(view.get((BROKER_RESOURCE, str(broker)), ())),
            dict(view.get((BROKER_RESOURCE, ""), ())),  # the cluster-wide default broker entity
            control.static,
        )
        leader, follower = (parse_rate(render_value(_broker_value(name, levels))) for name in BROKER_KEYS)
        return leader, follower

    def topic(self, topic: str) -> tuple[str, str] | None:
        """The topic's (leader, follower) throttled-replicas values as DescribeConfigs renders them; None if it
        would refuse the resource (no such topic)."""
        control: ConfigControl = self.image.configs
        try:
            validate_topic_name(topic)
        except KafkaError:
            return None
        if not control.topic_exists(topic):
            return None
        items = control.configs.committed().get((TOPIC_RESOURCE, topic))
        if not items:
            return _DEFAULTS
        values = dict(items)
        leader, follower = (_topic_value(name, values) for name in TOPIC_KEYS)
        return leader, follower


def _topic_value(name: str, values: Mapping[str, str]) -> str:
    definition = TOPIC_CONFIGS[name]
    raw = values.get(name)
    if raw is not None:
        try:
            return render_value(definition.parse(raw))
        except InvalidConfigError:
            pass  # passed over, as brokers ignore it: the default
    return render_value(definition.default)


def _broker_value(name: str, levels: tuple[Mapping[str, str], ...]) -> Any:
    definition = BROKER_CONFIGS[name]
    for level in levels:
        raw = level.get(name, _MISSING)
        if raw is _MISSING:
            continue
        try:
            return definition.parse(raw)
        except InvalidConfigError:
            continue
    return definition.default


_DEFAULTS = (render_value(TOPIC_CONFIGS[TOPIC_KEYS[0]].default), render_value(TOPIC_CONFIGS[TOPIC_KEYS[1]].default))
