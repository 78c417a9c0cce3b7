"""The peer protocol: KRaft's RPCs (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) as plain
values.

The consensus core consumes and produces these; the gRPC transport maps them to protobuf, the simulator passes
them as they are. Every request carries the sender's id and a correlation id that its response echoes.
"""

from __future__ import annotations

from dataclasses import dataclass

from quorum.errors import Errors

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    cluster_id: str
    replica_id: int  # the prospective / candidate
    replica_epoch: int  # the candidate's new epoch; the prospective's current epoch for a pre-vote
    last_offset_epoch: int
    last_offset: int  # the log end offset
    pre_vote: bool
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error: Errors
    epoch: int
    leader_id: int
    vote_granted: bool
    pre_vote: bool
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error: Errors
    epoch: int
    leader_id: int
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    cluster_id: str
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error: Errors
    epoch: int
    leader_id: int
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class FetchRequest:
    cluster_id: str
    replica_id: int
    leader_epoch: int  # the epoch the fetcher believes current
    fetch_offset: int  # the fetcher's log end offset: everything below it is durable on the fetcher
    last_fetched_epoch: int  # the epoch of the fetcher's last batch
    max_bytes: int
    max_wait_ms: int
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: Errors
    epoch: int
    leader_id: int
    high_watermark: int  # -1 while the leader does not know it yet
    records: bytes = b""
    diverging_epoch: int = -1  # set when the fetcher's log diverges: truncate to diverging_end_offset
    diverging_end_offset: int = -1
    correlation_id: int = 0
    # Set when the fetch offset is below the leader's log start: fetch this snapshot (FetchSnapshot) instead.
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    cluster_id: str
    replica_id: int
    leader_epoch: int
    snapshot_end_offset: int
    snapshot_epoch: int
    position: int  # the byte the fetcher wants next
    max_bytes: int
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    error: Errors
    epoch: int
    leader_id: int
    snapshot_end_offset: int = -1
    snapshot_epoch: int = -1
    size: int = -1  # the whole snapshot's size in bytes
    position: int = -1  # where ``data`` starts
    data: bytes = b""
    correlation_id: int = 0


Request = VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
Response = VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
Message = Request | Response

REQUEST_TYPES = (VoteRequest, BeginQuorumEpochRequest, EndQuorumEpochRequest, FetchRequest, FetchSnapshotRequest)


@dataclass(frozen=True, slots=True)
class Envelope:
    """A message in flight from one node to another."""

    source: int
    destination: int
    message: Message
