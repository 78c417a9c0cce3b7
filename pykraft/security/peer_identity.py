"""Which node a peer's certificate proves: ``controller-<id>`` for a voter, ``broker-<id>`` for a broker's observer.

These are the principal names (after ``ssl.principal.mapping.rules``) the cluster CA (:mod:`.ca`) issues; the peer
transport (:meth:`quorum.transport.peer.PeerTransport.secure`) then holds every message on the stream to that id,
on a gRPC stream or a frame connection alike.
A ``broker-<id>`` certificate never proves a voter's id, so a process with a broker's certificate cannot take part in
elections, whatever it claims; an ``admin`` certificate, or none, cannot use the peer protocol at all.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

import grpc
from cryptography import x509

from pykraft.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    NoMatchingRule,
    SslPrincipalMapper,
    principal_from_certificate,
    principal_of,
)
from quorum.transport.peer import PeerRefused

CONTROLLER_PREFIX = "controller-"
BROKER_PREFIX = "broker-"
_NODE = re.compile(r"(controller|broker)-([0-9]{1,9})")


def controller_name(node_id: int) -> str:
    """The principal name, and the DNS name in its certificate, of controller ``node_id``."""
    return f"{CONTROLLER_PREFIX}{node_id}"


def broker_name(node_id: int) -> str:
    """The principal name, and the DNS name in its certificate, of broker ``node_id``."""
    return f"{BROKER_PREFIX}{node_id}"


# Why the caller of a request may not act as ``replica_id`` (None: it may).
ReplicaCheck = Callable[[grpc.aio.ServicerContext, int], str | None]


def replica_authenticator(mapper: SslPrincipalMapper) -> ReplicaCheck:
    """For a broker's listener: a follower's fetch for ``replica_id`` must come with ``broker-<replica_id>``'s
    certificate, so one broker (or an admin client) cannot fetch, and move the ISR, as another."""

    def check(context: grpc.aio.ServicerContext, replica_id: int) -> str | None:
        try:
            principal = principal_of(context, mapper)
        except NoMatchingRule as e:
            return str(e)
        if principal.name != broker_name(replica_id):  # ANONYMOUS too
            return f"{principal} may not fetch as broker {replica_id}"
        return None

    return check


def peer_authenticator(
    mapper: SslPrincipalMapper, voters: Collection[int]
) -> Callable[[grpc.aio.ServicerContext], int]:
    """For a gRPC peer stream: the node id the caller's certificate proves; raises PeerRefused."""
    node_of = _node_of(voters)

    def authenticate(context: grpc.aio.ServicerContext) -> int:
        try:
            return node_of(principal_of(context, mapper))
        except NoMatchingRule as e:
            raise PeerRefused(str(e)) from None

    return authenticate


def certificate_authenticator(mapper: SslPrincipalMapper, voters: Collection[int]) -> Callable[[bytes | None], int]:
    """For a peer frame connection: the node id its DER certificate (None: none) proves; raises PeerRefused."""
    node_of = _node_of(voters)

    def authenticate(der: bytes | None) -> int:
        if not der:
            raise PeerRefused("no client certificate")
        try:
            return node_of(principal_from_certificate(x509.load_der_x509_certificate(der), mapper))
        except NoMatchingRule as e:
            raise PeerRefused(str(e)) from None

    return authenticate


def _node_of(voters: Collection[int]) -> Callable[[KafkaPrincipal], int]:
    voter_ids = frozenset(voters)

    def node_of(principal: KafkaPrincipal) -> int:
        if principal == ANONYMOUS:
            raise PeerRefused("no client certificate")
        m = _NODE.fullmatch(principal.name)
        if m is None:
            raise PeerRefused(f"{principal} is not a controller or broker principal")
        kind, node_id = m.group(1), int(m.group(2))
        if kind == "controller" and node_id not in voter_ids:
            raise PeerRefused(f"{principal} is not a voter of this quorum ({', '.join(map(str, sorted(voter_ids)))})")
        if kind == "broker" and node_id in voter_ids:
            raise PeerRefused(f"{principal} has a voter's id")
        return node_id

    return node_of
