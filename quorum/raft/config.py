"""Raft configuration, under Kafka's names and with Kafka's defaults (QuorumConfig, KRaftConfigs)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class VoterAddress:
    node_id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.node_id}@{self.host}:{self.port}"


def parse_voters(spec: str) -> dict[int, VoterAddress]:
    """``controller.quorum.voters``: ``1@host:9091,2@host:9092,...``."""
    voters: dict[int, VoterAddress] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        node, at, address = part.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not colon or not node.isdigit() or not port.isdigit() or not host:
            raise ValueError(f"controller.quorum.voters: {part!r} is not of the form id@host:port")
        node_id = int(node)
        if node_id in voters:
            raise ValueError(f"controller.quorum.voters: node id {node_id} is listed twice")
        if not 0 < int(port) < 65536:
            raise ValueError(f"controller.quorum.voters: port {port} of node {node_id} is out of range")
        voters[node_id] = VoterAddress(node_id, host.strip("[]"), int(port))
    if not voters:
        raise ValueError("controller.quorum.voters is empty")
    return voters


@dataclass(frozen=True)
class RaftConfig:
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    append_linger_ms: int = 25  # controller.quorum.append.linger.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    fetch_max_wait_ms: int = 500  # KafkaRaftClient.MAX_FETCH_WAIT_MS
    fetch_max_bytes: int = 8 * 1024 * 1024  # KafkaRaftClient.MAX_FETCH_SIZE_BYTES
    max_batch_bytes: int = 8 * 1024 * 1024  # KafkaRaftClient.MAX_BATCH_SIZE_BYTES
    max_pending_bytes: int = 5 * 8 * 1024 * 1024  # the accumulator's memory pool: 5 x 8 MiB
    # pykraft.quorum.fetch.silence.ms — how a follower notices a *silent* leader (a paused process, a cut link: no
    # connection reset) before the fetch timeout. The leader answers every fetch within fetch_max_wait_ms, with
    # nothing new if need be, so a fetch unanswered past that wait is suspect. Half-way through the grace left
    # (silence - max wait) the follower probes with a fetch the leader must answer at once; with the probe
    # unanswered too, at the silence mark, it starts a pre-vote, which voters still hearing the leader refuse.
    # So a healthy leader is never deposed while messages take under a quarter of the grace each way and no
    # fetch loses both its answer and its probe's. 0 turns it off (Kafka: the fetch timeout alone).
    fetch_silence_ms: int = 900
    # A voter that granted a pre-vote does not stand for election itself for this long: the one it granted is
    # about to ask for real votes, and two candidates would split them. Winning its own pre-vote meanwhile, it
    # asks again once the time is up.
    pre_vote_yield_ms: int = 100
    # pykraft.quorum.high.watermark.linger.ms — a parked fetch whose only news is a higher high watermark waits up
    # to this long for records to carry it. Every commit moves the high watermark, so answering at once (Kafka
    # since KAFKA-14145) sends each follower and observer two answers per commit, each answer and the fetch after it
    # a gRPC message both ends pay for; under steady writes the next records come within the linger and one answer
    # carries both. The cost: a follower learns of a commit up to this much later (it only delays what its listener
    # applies; the leader's commit and its answers to clients do not wait). 0: answered at once.
    high_watermark_linger_ms: int = 10
    # pykraft.quorum.observer.linger.ms — the leader answers an observer (a broker) at most once per this long while
    # it has news for it: what comes meanwhile waits for the next answer. Observers gate no commit, yet each answer
    # and the fetch after it cost both ends a message; with a batch written per request (the group commit drains at
    # once when idle), six brokers answered after every commit: spaced out, 3 controllers and 6 brokers took ~30%
    # less CPU at 100 requests/s (README). 25 ms is Kafka's append linger, the batching Kafka's own brokers see. The
    # cost: a broker learns of a commit up to this much later. An answer still carries everything up to the fetch
    # max bytes. 0: answered at once.
    observer_linger_ms: int = 25

    KAFKA_NAMES: ClassVar[dict[str, str]] = {
        "controller.quorum.election.timeout.ms": "election_timeout_ms",
        "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
        "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
        "controller.quorum.append.linger.ms": "append_linger_ms",
        "controller.quorum.request.timeout.ms": "request_timeout_ms",
        "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
        "pykraft.quorum.fetch.silence.ms": "fetch_silence_ms",  # ours: Kafka has no such setting
        "pykraft.quorum.high.watermark.linger.ms": "high_watermark_linger_ms",  # ours
        "pykraft.quorum.observer.linger.ms": "observer_linger_ms",  # ours
    }

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, int) and value < 0:
                raise ValueError(f"{self.kafka_name(f.name)} must not be negative, got {value}")
        if self.election_timeout_ms <= 0 or self.fetch_timeout_ms <= 0 or self.request_timeout_ms <= 0:
            raise ValueError("election, fetch and request timeouts must be positive")
        if 0 < self.fetch_silence_ms <= self.fetch_max_wait_ms:
            raise ValueError(
                f"pykraft.quorum.fetch.silence.ms must be 0 (off) or above the fetch max wait "
                f"({self.fetch_max_wait_ms} ms), got {self.fetch_silence_ms}"
            )
        for attr in ("high_watermark_linger_ms", "observer_linger_ms"):
            if getattr(self, attr) > self.fetch_max_wait_ms:
                raise ValueError(
                    f"{self.kafka_name(attr)} must be at most the fetch max wait "
                    f"({self.fetch_max_wait_ms} ms), got {getattr(self, attr)}"
                )

    @classmethod
    def kafka_name(cls, attr: str) -> str:
        return next((k for k, v in cls.KAFKA_NAMES.items() if v == attr), attr)

    @classmethod
    def from_properties(cls, props: dict[str, Any]) -> RaftConfig:
        """Take the ``controller.quorum.*`` settings out of a Kafka-style properties mapping."""
        kwargs = {}
        for name, attr in cls.KAFKA_NAMES.items():
            if name in props:
                try:
                    kwargs[attr] = int(props[name])
                except (TypeError, ValueError):
                    raise ValueError(f"{name} must be an integer, got {props[name]!r}") from None
        return cls(**kwargs)
