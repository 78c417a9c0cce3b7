"""Authorizing the requests a node serves, as Kafka's ControllerApis does: one helper for every service.

Off unless the node setting ``authorizer.class.name`` names Kafka's StandardAuthorizer
(``org.apache.kafka.metadata.authorizer.StandardAuthorizer``, or ``StandardAuthorizer`` for short); empty, the
default, authorizes nothing (every caller may do everything, as before). Anything else is refused at start.

A request's :class:`Caller` is its connection's principal (:func:`pykraft.security.principal.principal_of`:
``User:<mapped CN>`` from the client certificate, ``User:ANONYMOUS`` on plaintext) and the client's address from
``context.peer()``; its decisions come from the node's :class:`controller.authorizer.StandardAuthorizer`, which holds
the committed ACLs on every node, so a standby decides as the leader did once it takes over. The services keep their
order: a node that is not the active controller answers NOT_CONTROLLER before anything is authorized (the client
then asks the controller, which authorizes).

Denials carry Kafka's codes — CLUSTER_AUTHORIZATION_FAILED (31) for the whole request when a CLUSTER operation is
refused, TOPIC_AUTHORIZATION_FAILED (29) per topic — with a message naming the principal, host, operation and
resource; each denial is logged once (``authorization_denied``), except where Kafka stays quiet (topics withheld from
a listing, configs withheld from a CreateTopics answer).
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

import grpc
import structlog

from controller.authorizer import CLUSTER_NAME, AclOperation, AuthorizationResult, ResourceType, StandardAuthorizer
from controller.topic_names import shown
from pykraft.security.principal import NoMatchingRule, SslPrincipalMapper, principal_of
from quorum.errors import Errors, KafkaError
from quorum.log.message import Uuid

if TYPE_CHECKING:
    from controller.quorum_controller import QuorumController

log = structlog.get_logger("pykraft.authorization")

AUTHORIZER_CLASS_CONFIG = "authorizer.class.name"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_STANDARD_NAMES = frozenset({STANDARD_AUTHORIZER, "StandardAuthorizer"})

Op, Res = AclOperation, ResourceType


def authorizer_enabled(value: str) -> bool:
    """``authorizer.class.name``: False when empty (no authorization), True for Kafka's StandardAuthorizer; a
    ValueError naming the setting for any other class (Kafka would fail to load it)."""
    name = value.strip()
    if not name:
        return False
    if name in _STANDARD_NAMES:
        return True
    raise ValueError(
        f"{AUTHORIZER_CLASS_CONFIG}: {name!r} is not an authorizer pykraft has: use {STANDARD_AUTHORIZER} "
        "(or StandardAuthorizer), or leave it empty for no authorization"
    )


def client_host(peer: str) -> str:
    """The client's address from gRPC's ``context.peer()`` (``ipv4:10.0.0.5:50123``, ``ipv6:[::1]:50123``, possibly
    percent-encoded), as ACL hosts name it: IPv4 dotted, IPv6 in its short form (``::1``), an IPv4-mapped IPv6
    address as the IPv4 one (Java does the same). Anything else (a unix socket) is returned as gRPC gave it."""
    kind, colon, rest = unquote(peer).partition(":")
    if not colon or kind not in ("ipv4", "ipv6"):
        return peer
    host = rest.rpartition(":")[0] or rest  # drop the port
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(address)


def denied_message(principal: str, host: str, operation: int, resource_type: int, name: str) -> str:
    what = "Cluster" if resource_type == Res.CLUSTER else Res(resource_type).name.title().replace("_", "")
    return (
        f"{what} authorization failed: principal {principal} from host {host} may not "
        f"{Op(operation).name} {Res(resource_type).name} {shown(name)}"
    )


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent one request, and the authorizer deciding for them (None: authorization is off, all allowed)."""

    principal: str
    host: str
    authorizer: StandardAuthorizer | None

    @property
    def enforced(self) -> bool:
        return self.authorizer is not None

    def allowed(self, operation: int, resource_type: int, name: str, *, log_denied: bool = True) -> bool:
        authorizer = self.authorizer
        if authorizer is None:
            return True
        decision = authorizer.authorize(self.principal, self.host, operation, resource_type, name)
        if decision is AuthorizationResult.ALLOWED:
            return True
        if log_denied:  # Kafka's authorizer logs every denial it was asked to (logIfDenied)
            log.info(
                "authorization_denied",
                principal=self.principal,
                host=self.host,
                operation=Op(operation).name,
                resource_type=Res(resource_type).name,
                resource_name=shown(name),
            )
        return False

    def allowed_names(
        self, operation: int, resource_type: int, names: Iterable[str], *, log_denied: bool = True
    ) -> set[str]:
        """Kafka's AuthHelper.filterByAuthorized: the names (each decided once) the caller may ``operation``."""
        return {n for n in set(names) if self.allowed(operation, resource_type, n, log_denied=log_denied)}

    def cluster_allowed(self, operation: int, *, log_denied: bool = True) -> bool:
        return self.allowed(operation, Res.CLUSTER, CLUSTER_NAME, log_denied=log_denied)

    def require_cluster(self, operation: int) -> None:
        """Kafka's authorizeClusterOperation: CLUSTER_AUTHORIZATION_FAILED for the whole request unless allowed."""
        if not self.cluster_allowed(operation):
            raise KafkaError(self.denied(operation, Res.CLUSTER, CLUSTER_NAME), Errors.CLUSTER_AUTHORIZATION_FAILED)

    def denied(self, operation: int, resource_type: int, name: str) -> str:
        return denied_message(self.principal, self.host, operation, resource_type, name)


OPEN = Caller("User:ANONYMOUS", "", None)  # authorization off


class Unauthenticated(Exception):
    """The call was refused before any authorization (a certificate no ``ssl.principal.mapping.rules`` rule takes):
    its status (UNAUTHENTICATED) is set; the handler returns without an answer."""


class Authorization:
    """A node's authorization switch and what it needs to name callers: the authorizer (through a getter, as the
    controller owns it), and the TLS listener's principal mapping rules."""

    def __init__(
        self,
        authorizer: Callable[[], StandardAuthorizer] | None,
        mapper: SslPrincipalMapper | None = None,
    ) -> None:
        self._authorizer = authorizer
        self._mapper = mapper or SslPrincipalMapper()

    @property
    def enabled(self) -> bool:
        return self._authorizer is not None

    async def caller(self, context: grpc.aio.ServicerContext) -> Caller:
        """The request's caller; :data:`OPEN` when authorization is off. A client certificate whose DN no mapping
        rule takes ends the call (UNAUTHENTICATED), as Kafka closes such a connection: the status is set and
        :class:`Unauthenticated` raised, for the handler to return without an answer. Not context.abort(): in
        grpcio 1.78 an aborted call may keep its HTTP/2 stream counted as open, and enough of them leave the
        connection refusing every call (quorum/transport/server.py)."""
        if self._authorizer is None:
            return OPEN
        try:
            principal = str(principal_of(context, self._mapper))
        except NoMatchingRule as e:
            message = f"no principal for the client certificate: {e}"
            log.info("principal_refused", host=client_host(context.peer()), reason=str(e))
            context.set_code(grpc.StatusCode.UNAUTHENTICATED)
            context.set_details(message)
            raise Unauthenticated(message) from None
        return Caller(principal, client_host(context.peer()), self._authorizer())

    async def cluster_refusal(self, context: grpc.aio.ServicerContext, operation: int) -> str | None:
        """For services whose answers carry no error code — a broker's DescribeReplicas (Kafka's DescribeLogDirs:
        DESCRIBE on the CLUSTER) —: None when authorization is off or the caller may ``operation`` on the CLUSTER,
        else the denial's message, for the service to end the call with (PERMISSION_DENIED; a certificate no
        mapping rule takes is refused the same way, its message saying so)."""
        if self._authorizer is None:
            return None
        try:
            caller = await self.caller(context)
        except Unauthenticated as e:
            return str(e)
        return None if caller.cluster_allowed(operation) else caller.denied(operation, Res.CLUSTER, CLUSTER_NAME)

    async def quorum_admin_check(self, context: grpc.aio.ServicerContext, api: str) -> str | None:
        """For the quorum admin service (which knows no ACLs): None when the caller may call ``api``, else the
        denial's message. DescribeQuorum is not checked (brokers' observers ask the leader's high watermark)."""
        operation = QUORUM_ADMIN_OPERATIONS.get(api)
        if operation is None:
            return None
        try:
            caller = await self.caller(context)
        except Unauthenticated as e:
            return str(e)
        return None if caller.cluster_allowed(operation) else caller.denied(operation, Res.CLUSTER, CLUSTER_NAME)


# What the quorum admin's APIs need on the CLUSTER. Kafka has no such RPCs; the closest are the metadata log's own:
# a controller's Fetch / FetchSnapshot of __cluster_metadata need CLUSTER_ACTION (ExportLog reads that log), and
# writing into it is what only brokers and controllers do (AppendRecords, open only in tests and benchmarks).
QUORUM_ADMIN_OPERATIONS = {"AppendRecords": Op.CLUSTER_ACTION, "ExportLog": Op.CLUSTER_ACTION}


# -- the per-resource checks of the requests that name several topics or config resources ----------------------


def creation_checks(caller: Caller, names: list[str], reserved: str) -> tuple[list[str], set[str]]:
    """Kafka's ControllerApis.createTopics: the names refused (in request order) — each name that is neither
    duplicated nor ``reserved`` (the controller answers those) unless the caller may CREATE on the CLUSTER or on
    the TOPIC — and the names whose configs the caller may see (DESCRIBE_CONFIGS on the TOPIC; CREATE does not
    imply it)."""
    counts = Counter(names)
    candidates = [n for n, c in counts.items() if c == 1 and n != reserved]
    if caller.cluster_allowed(Op.CREATE, log_denied=False):
        creatable = set(candidates)
    else:
        creatable = caller.allowed_names(Op.CREATE, Res.TOPIC, candidates)
    describable = caller.allowed_names(Op.DESCRIBE_CONFIGS, Res.TOPIC, candidates, log_denied=False)
    return [n for n in candidates if n not in creatable], describable


def deletion_refusals(
    caller: Caller,
    topics: list[tuple[str | None, Uuid | None]],
    exists: Callable[[str], bool],
    name_of: Callable[[Uuid], str | None],
) -> dict[int, tuple[str | None, Uuid | None]]:
    """Kafka's ControllerApis.deleteTopics without DELETE on the CLUSTER: by request index, the (name, id) to
    answer TOPIC_AUTHORIZATION_FAILED with. A name the caller may not DESCRIBE is refused whether or not it exists
    (an existing one they may DESCRIBE but not DELETE too; an unknown one they may DESCRIBE is the controller's
    UNKNOWN_TOPIC_OR_PARTITION); a known id they may not DELETE is refused, with its name only if they may DESCRIBE
    it. Duplicates, both-or-neither and unknown ids are left to the controller, which refuses them before anything
    is authorized (Kafka's order)."""
    names = Counter(n for n, i in topics if n is not None and i is None)
    ids = Counter(i for n, i in topics if i is not None and n is None)
    refused: dict[int, tuple[str | None, Uuid | None]] = {}
    for index, (name, topic_id) in enumerate(topics):
        if name is not None and topic_id is None and names[name] == 1:
            if not caller.allowed(Op.DESCRIBE, Res.TOPIC, name) or (
                exists(name) and not caller.allowed(Op.DELETE, Res.TOPIC, name)
            ):
                refused[index] = (name, None)
        elif topic_id is not None and name is None and ids[topic_id] == 1:
            known = name_of(topic_id)
            if known is not None and not caller.allowed(Op.DELETE, Res.TOPIC, known):
                visible = caller.allowed(Op.DESCRIBE, Res.TOPIC, known, log_denied=False)
                refused[index] = (known if visible else None, topic_id)
    return refused


# Config resource type (Kafka's ConfigResource.Type ids) -> (operation, ACL resource type, error) for
# IncrementalAlterConfigs and DescribeConfigs, as Kafka's ControllerApis and ConfigHelper. A CLUSTER resource is
# named kafka-cluster; TOPIC and GROUP ones by the config resource's name. Unknown types are not authorized: the
# controller refuses them.
_CAF = Errors.CLUSTER_AUTHORIZATION_FAILED
_TAF = Errors.TOPIC_AUTHORIZATION_FAILED
_GAF = Errors.GROUP_AUTHORIZATION_FAILED
ALTER_CONFIGS_CHECKS = {
    4: (Op.ALTER_CONFIGS, Res.CLUSTER, _CAF),  # BROKER
    16: (Op.ALTER_CONFIGS, Res.CLUSTER, _CAF),  # CLIENT_METRICS
    8: (Op.CLUSTER_ACTION, Res.CLUSTER, _CAF),  # BROKER_LOGGER
    2: (Op.ALTER_CONFIGS, Res.TOPIC, _TAF),
    32: (Op.ALTER_CONFIGS, Res.GROUP, _GAF),
}
DESCRIBE_CONFIGS_CHECKS = {
    4: (Op.DESCRIBE_CONFIGS, Res.CLUSTER, _CAF),
    16: (Op.DESCRIBE_CONFIGS, Res.CLUSTER, _CAF),
    8: (Op.DESCRIBE_CONFIGS, Res.CLUSTER, _CAF),
    2: (Op.DESCRIBE_CONFIGS, Res.TOPIC, _TAF),
    32: (Op.DESCRIBE_CONFIGS, Res.GROUP, _GAF),
}


def config_refusals(
    caller: Caller, resources: list[tuple[int, str]], checks: dict[int, tuple[AclOperation, ResourceType, Errors]]
) -> dict[int, tuple[Errors, str]]:
    """By request index, the (code, message) refusing each config resource the caller may not alter or describe.
    For alterations, pass only resources named once: Kafka answers a duplicate before authorizing it."""
    refused: dict[int, tuple[Errors, str]] = {}
    for index, (resource_type, resource_name) in enumerate(resources):
        check = checks.get(resource_type)
        if check is None:
            continue
        operation, acl_type, error = check
        name = CLUSTER_NAME if acl_type == Res.CLUSTER else resource_name
        if not caller.allowed(operation, acl_type, name):
            refused[index] = (error, caller.denied(operation, acl_type, name))
    return refused


def controller_authorization(
    controller: QuorumController | None, mapper: SslPrincipalMapper | None = None
) -> Authorization:
    """The switch as the controller's settings hold it (``authorizer.class.name``), deciding with its authorizer."""
    if controller is None or not authorizer_enabled(controller.settings.authorizer_class_name):
        return Authorization(None, mapper)
    return Authorization(lambda: controller.authorizer, mapper)
