"""ACLs and Kafka's StandardAuthorizer semantics: pure data and decisions, no I/O.

An ACL (:class:`StandardAcl`) is a resource pattern (type, name, LITERAL or PREFIXED; a LITERAL ``*`` matches any
name) and an entry (principal ``Type:name`` or the wildcard ``User:*``, host or ``*``, operation, ALLOW or DENY),
with Kafka's numeric codes (AclOperation, AclPermissionType, ResourceType, PatternType), which are what the
metadata log's AccessControlEntryRecord holds.

:meth:`StandardAuthorizer.authorize` decides as Kafka's StandardAuthorizerData.authorize:

- a principal listed in ``super.users`` (semicolon-separated) is always allowed;
- the ACLs that apply are those of the resource's literal name, of the wildcard name ``*`` and of every PREFIXED
  name that starts the resource's name; of those, the ones whose principal is the caller's or ``User:*`` and whose
  host is the caller's or ``*``;
- any applicable DENY denies (DENY wins); else any applicable ALLOW allows;
- an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, an ALLOW of ALTER_CONFIGS also allows
  DESCRIBE_CONFIGS (a DENY implies nothing); ALL matches every operation, for ALLOW and DENY alike;
- with no applicable ACL: ``allow.everyone.if.no.acl.found`` (default false) decides, but only when no ACL at all
  (any principal, host, operation) matches the resource; otherwise the answer is DENIED.

The ACLs are indexed by (resource type, name) for literal and prefixed patterns apart, and within each by
principal, so a decision costs a few dict lookups per prefix length in use, not a scan of every ACL (Kafka keeps
them in a sorted set and walks the literal name, the wildcard and the prefixes the same way).

:class:`AclBindingFilter` is Kafka's AclBindingFilter (DescribeAcls, DeleteAcls): ANY matches every value, a None
name/principal/host matches any, and pattern type MATCH matches the literal, wildcard and prefixed patterns that
cover the name.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from quorum.log.message import Uuid

WILDCARD = "*"  # a host, or a LITERAL resource name, matching any
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one name a CLUSTER resource has
SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only: any pattern type, the name matched exactly
    MATCH = 2  # filters only: every pattern that covers the name
    LITERAL = 3
    PREFIXED = 4


class AuthorizationResult(enum.IntEnum):
    ALLOWED = 0
    DENIED = 1


E = TypeVar("E", bound=enum.IntEnum)


def from_code(kind: type[E], code: int) -> E:
    """Kafka's ``fromCode``: a code the enum does not know is UNKNOWN (every one of these enums has UNKNOWN = 0)."""
    try:
        return kind(code)
    except ValueError:
        return kind(0)


def code_name(kind: type[enum.IntEnum], code: int) -> str:
    return from_code(kind, code).name


# Operations an ALLOW ACL grants besides its own (Kafka's IMPLIES_DESCRIBE / IMPLIES_DESCRIBE_CONFIGS).
IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# kafka-acls.sh's AclEntry.supportedOperations, by resource type (ALL is valid everywhere).
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset(
        {AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT}
    ),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` split at the first colon, as Kafka's StandardAcl.kafkaPrincipal; ValueError without one."""
    kind, colon, name = text.partition(":")
    if not colon:
        raise ValueError(
            f"Could not parse principal from `{text}` (no colon is present separating the principal type from the "
            "principal name)"
        )
    return kind, name


class StandardAcl(NamedTuple):
    """One ACL, as Kafka's StandardAcl: codes as ints (a record from another writer may hold any)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int

    def pattern_text(self) -> str:
        """Kafka's ResourcePattern.toString."""
        return (
            f"ResourcePattern(resourceType={code_name(ResourceType, self.resource_type)}, "
            f"name={self.resource_name}, patternType={code_name(PatternType, self.pattern_type)})"
        )

    def entry_text(self) -> str:
        """Kafka's AccessControlEntry.toString."""
        return (
            f"(principal={self.principal}, host={self.host}, operation={code_name(AclOperation, self.operation)}, "
            f"permissionType={code_name(AclPermissionType, self.permission_type)})"
        )

    def __str__(self) -> str:  # Kafka's AclBinding.toString
        return f"(pattern={self.pattern_text()}, entry={self.entry_text()})"


@dataclass(frozen=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: a ResourcePatternFilter and an AccessControlEntryFilter. The defaults match
    every ACL (Kafka's AclBindingFilter.ANY)."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY

    def unknown(self) -> str | None:
        """Kafka's AclControlManager.validateFilter: the message for a filter with an UNKNOWN part, or None."""
        if (
            from_code(ResourceType, self.resource_type) == ResourceType.UNKNOWN
            or from_code(PatternType, self.pattern_type) == PatternType.UNKNOWN
        ):
            return "Unknown patternFilter."
        if (
            from_code(AclOperation, self.operation) == AclOperation.UNKNOWN
            or from_code(AclPermissionType, self.permission_type) == AclPermissionType.UNKNOWN
        ):
            return "Unknown entryFilter."
        return None

    def matches(self, acl: StandardAcl) -> bool:
        return self.matches_pattern(acl) and self.matches_entry(acl)

    def matches_pattern(self, acl: StandardAcl) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        kind = self.pattern_type
        if kind not in (PatternType.ANY, PatternType.MATCH) and kind != acl.pattern_type:
            return False
        name = self.resource_name
        if name is None:
            return True
        if kind == PatternType.ANY or kind == acl.pattern_type:
            return name == acl.resource_name
        # MATCH: the patterns that cover the name.
        if acl.pattern_type == PatternType.LITERAL:
            return name == acl.resource_name or acl.resource_name == WILDCARD
        if acl.pattern_type == PatternType.PREFIXED:
            return name.startswith(acl.resource_name)
        return False  # Kafka throws for an ACL of another pattern type; none is ever stored

    def matches_entry(self, acl: StandardAcl) -> bool:
        """Kafka's AccessControlEntryFilter.matches."""
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type == AclPermissionType.ANY or self.permission_type == acl.permission_type


ANY_ACL = AclBindingFilter()


def parse_super_users(value: str | Iterable[str]) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (spaces around each trimmed, empty ones skipped);
    ValueError for one that is not ``Type:name``, as Kafka refuses to start then."""
    items = value.split(";") if isinstance(value, str) else list(value)
    users = set()
    for item in items:
        principal = item.strip()
        if principal:
            try:
                parse_principal(principal)
            except ValueError:
                raise ValueError(
                    f"{SUPER_USERS_CONFIG}: expected a string in format principalType:principalName but got {principal}"
                ) from None
            users.add(principal)
    return frozenset(users)


def _applies(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    """Kafka's StandardAuthorizerData.findResult, the principal and the resource already matched: the ACL's
    verdict on this host and operation, or None when it does not apply."""
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == AclPermissionType.ALLOW:
            if operation == AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif operation == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif operation != acl.operation:
                return None
        elif operation != acl.operation:  # a DENY implies nothing
            return None
    return AuthorizationResult.ALLOWED if acl.permission_type == AclPermissionType.ALLOW else AuthorizationResult.DENIED


# (resource type, name) -> principal -> {acl id: acl}; a bucket with no ACL left is removed.
_Index = dict[tuple[int, str], dict[str, dict[Uuid, StandardAcl]]]


class StandardAuthorizer:
    """The ACLs by id, indexed for :meth:`authorize`, and the two settings that shape its answers."""

    def __init__(self, super_users: str | Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = parse_super_users(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_id: dict[Uuid, StandardAcl] = {}
        self._literal: _Index = {}
        self._prefixed: _Index = {}
        self._prefix_lengths: dict[int, Counter[int]] = {}  # resource type -> lengths of its prefixed names
        self._lengths: dict[int, tuple[int, ...]] = {}  # the same, sorted: what authorize walks

    @classmethod
    def from_configs(cls, configs: Mapping[str, str]) -> StandardAuthorizer:
        """From Kafka's settings: ``super.users``, ``allow.everyone.if.no.acl.found`` (true/false)."""
        allow = configs.get(ALLOW_EVERYONE_CONFIG, "false").strip().lower()
        if allow not in ("true", "false"):
            raise ValueError(f"{ALLOW_EVERYONE_CONFIG} must be true or false, got {configs[ALLOW_EVERYONE_CONFIG]!r}")
        return cls(configs.get(SUPER_USERS_CONFIG, ""), allow == "true")

    # -- the ACLs ------------------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._by_id)

    def __iter__(self) -> Iterator[tuple[Uuid, StandardAcl]]:
        return iter(list(self._by_id.items()))

    def get(self, acl_id: Uuid) -> StandardAcl | None:
        return self._by_id.get(acl_id)

    def add_acl(self, acl_id: Uuid, acl: StandardAcl) -> None:
        """Add (or, for an id already held, replace) one ACL."""
        if acl_id in self._by_id:
            self.remove_acl(acl_id)
        self._by_id[acl_id] = acl
        key = (acl.resource_type, acl.resource_name)
        prefixed = acl.pattern_type == PatternType.PREFIXED
        index = self._prefixed if prefixed else self._literal
        index.setdefault(key, {}).setdefault(acl.principal, {})[acl_id] = acl
        if prefixed:
            lengths = self._prefix_lengths.setdefault(acl.resource_type, Counter())
            lengths[len(acl.resource_name)] += 1
            if lengths[len(acl.resource_name)] == 1:
                self._lengths[acl.resource_type] = tuple(sorted(lengths))

    def remove_acl(self, acl_id: Uuid) -> StandardAcl | None:
        """Remove one ACL by id; the ACL removed (None if there was none)."""
        acl = self._by_id.pop(acl_id, None)
        if acl is None:
            return None
        key = (acl.resource_type, acl.resource_name)
        prefixed = acl.pattern_type == PatternType.PREFIXED
        index = self._prefixed if prefixed else self._literal
        bucket = index[key]
        entries = bucket[acl.principal]
        del entries[acl_id]
        if not entries:
            del bucket[acl.principal]
            if not bucket:
                del index[key]
        if prefixed:
            lengths = self._prefix_lengths[acl.resource_type]
            lengths[len(acl.resource_name)] -= 1
            if not lengths[len(acl.resource_name)]:
                del lengths[len(acl.resource_name)]
                self._lengths[acl.resource_type] = tuple(sorted(lengths))
        return acl

    def replace_all(self, acls: Iterable[tuple[Uuid, StandardAcl]]) -> None:
        """Hold exactly these ACLs (after a snapshot replaced the state they come from)."""
        self._by_id.clear()
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_lengths.clear()
        self._lengths.clear()
        for acl_id, acl in acls:
            self.add_acl(acl_id, acl)

    def acls(self, acl_filter: AclBindingFilter = ANY_ACL) -> list[StandardAcl]:
        """The ACLs the filter matches (DescribeAcls answered from the authorizer, as a Kafka broker does)."""
        return [acl for acl in self._by_id.values() if acl_filter.matches(acl)]

    # -- decisions -----------------------------------------------------------------------------------------------

    def _buckets(self, resource_type: int, name: str) -> Iterator[dict[str, dict[Uuid, StandardAcl]]]:
        """Every non-empty bucket of ACLs whose pattern covers the resource: its literal name, the wildcard, and
        each prefixed name that starts it."""
        literal = self._literal
        bucket = literal.get((resource_type, name))
        if bucket is not None:
            yield bucket
        if name != WILDCARD:
            bucket = literal.get((resource_type, WILDCARD))
            if bucket is not None:
                yield bucket
        prefixed = self._prefixed
        for length in self._lengths.get(resource_type, ()):
            if length > len(name):
                break
            bucket = prefixed.get((resource_type, name[:length]))
            if bucket is not None:
                yield bucket

    def authorize_all(
        self, principal: str, host: str, actions: Iterable[tuple[int, int, str]]
    ) -> list[AuthorizationResult]:
        """Kafka's Authorizer.authorize(context, actions): one result per (operation, resource type, name), in
        order — e.g. CREATE on each topic of a CreateTopics request."""
        return [self.authorize(principal, host, op, rtype, name) for op, rtype, name in actions]

    def authorize(
        self, principal: str, host: str, operation: int, resource_type: int, resource_name: str
    ) -> AuthorizationResult:
        """May ``principal`` (``Type:name``) connecting from ``host`` perform ``operation`` on the resource?"""
        if principal in self.super_users:
            return AuthorizationResult.ALLOWED
        principals = (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
        has_resource_acls = False
        allowed = False
        for bucket in self._buckets(resource_type, resource_name):
            has_resource_acls = True  # buckets are never empty
            for p in principals:
                entries = bucket.get(p)
                if entries is None:
                    continue
                for acl in entries.values():
                    verdict = _applies(acl, host, operation)
                    if verdict is AuthorizationResult.DENIED:
                        return verdict  # DENY wins: nothing else needs looking at
                    if verdict is AuthorizationResult.ALLOWED:
                        allowed = True
        if allowed:
            return AuthorizationResult.ALLOWED
        if not has_resource_acls and self.allow_everyone_if_no_acl_found:
            return AuthorizationResult.ALLOWED
        return AuthorizationResult.DENIED
