"""The Kafka APIs a listener answers: api key → request and response specs, versions, handler.

Adding an API is one module under :mod:`pykraft.kafka.apis` that declares its two messages (Kafka's schema as
:class:`~quorum.log.message.Message` specs, with ``flexible=``) and calls :func:`register` with a handler. A handler
gets the decoded request and a :class:`RequestContext` and returns the response object; the listener encodes it at
the request's version.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from quorum.log.message import ApiMessage, Message

if TYPE_CHECKING:
    from controller.quorum_controller import QuorumController
    from pykraft.kafka.protocol import RequestHeader
    from pykraft.service import ControllerService

Handler = Callable[["RequestContext", Any, int], Awaitable[ApiMessage]]


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    request: Message
    response: Message
    handler: Handler
    mutates: bool = False  # logged at INFO (state changes) rather than DEBUG (reads), as the gRPC service does

    @property
    def min_version(self) -> int:
        return self.request.versions[0]

    @property
    def max_version(self) -> int:
        return self.request.versions[1]

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


APIS: dict[int, Api] = {}


def register(api: Api) -> Api:
    if api.key in APIS:
        raise ValueError(f"api key {api.key} is registered twice ({APIS[api.key].name}, {api.name})")
    if api.request.versions != api.response.versions or api.request.flexible != api.response.flexible:
        raise ValueError(f"{api.name}: the request's and the response's versions differ")
    APIS[api.key] = api
    return api


class CallContext:
    """What the gRPC servicer asks of its context, for a request that came over a Kafka connection: the peer (an
    ACL host), the transport's security as gRPC's auth context shows it (``auth``: the client certificate on an SSL
    listener; nothing on a plaintext one: ``User:ANONYMOUS``) and the request header's client id (KIP-599 quotas).
    An ``abort`` (a principal that cannot be named) ends the connection, as Kafka closes it."""

    kafka_request = True  # names are Kafka's: an empty one is no unset field (lifecycle_service.kafka_request)
    local_reads = False  # Metadata sets it: a standby answers from its own committed state (service.local)

    def __init__(self, peer: str, client_id: str | None, auth: dict[str, list[bytes]] | None = None) -> None:
        self._peer = peer
        self._auth = auth or {}
        self._metadata = (("client-id", client_id),) if client_id else ()
        self.code: Any = None
        self.details: str | None = None

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def set_code(self, code: Any) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    async def abort(self, code: Any, details: str = "") -> None:
        raise ConnectionAbort(f"{code}: {details}")


class ConnectionAbort(Exception):
    """The request cannot be answered: the listener closes the connection."""


@dataclass
class ListenerInfo:
    """What a node tells Kafka clients about the controllers: each one's Kafka listener (KIP-919: clients
    bootstrapping to controllers talk to the controllers; ours are listed in Metadata as its brokers)."""

    node_id: int
    cluster_id: str
    listeners: dict[int, tuple[str, int]] = field(default_factory=dict)  # node id -> (host, port)


@dataclass
class RequestContext:
    header: RequestHeader
    info: ListenerInfo
    service: ControllerService
    call: CallContext

    @property
    def controller(self) -> QuorumController:
        return self.service.controller
