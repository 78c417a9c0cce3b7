"""Peer messages <-> protobuf. One table maps each message class to its oneof field; fields share names."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from quorum.errors import Errors
from quorum.raft import messages as m
from quorum.transport.pb import quorum_pb2 as pb

_ONEOF = {
    m.VoteRequest: "vote_request",
    m.VoteResponse: "vote_response",
    m.BeginQuorumEpochRequest: "begin_quorum_epoch_request",
    m.BeginQuorumEpochResponse: "begin_quorum_epoch_response",
    m.EndQuorumEpochRequest: "end_quorum_epoch_request",
    m.EndQuorumEpochResponse: "end_quorum_epoch_response",
    m.FetchRequest: "fetch_request",
    m.FetchResponse: "fetch_response",
    m.FetchSnapshotRequest: "fetch_snapshot_request",
    m.FetchSnapshotResponse: "fetch_snapshot_response",
}
_CLASS = {name: cls for cls, name in _ONEOF.items()}
_FIELDS = {cls: tuple(f.name for f in fields(cls)) for cls in _ONEOF}


def to_proto(source: int, message: m.Message) -> pb.PeerMessage:
    out = pb.PeerMessage(source=source)
    body = getattr(out, _ONEOF[type(message)])
    for name in _FIELDS[type(message)]:
        value = getattr(message, name)
        if name == "error":
            body.error_code = int(value)
        elif name == "preferred_successors":
            body.preferred_successors.extend(value)
        else:
            setattr(body, name, value)
    return out


def from_proto(msg: pb.PeerMessage, destination: int) -> m.Envelope:
    """Raises ValueError for a message with no body (a malformed or newer peer)."""
    kind = msg.WhichOneof("body")
    if kind is None:
        raise ValueError("peer message has no body")
    cls = _CLASS[kind]
    body = getattr(msg, kind)
    kwargs: dict[str, Any] = {}
    for name in _FIELDS[cls]:
        if name == "error":
            try:
                kwargs[name] = Errors(body.error_code)
            except ValueError:
                kwargs[name] = Errors.UNKNOWN_SERVER_ERROR
        elif name == "preferred_successors":
            kwargs[name] = tuple(body.preferred_successors)
        else:
            kwargs[name] = getattr(body, name)
    return m.Envelope(msg.source, destination, cls(**kwargs))
