"""controller/authorizer.py: Kafka's StandardAuthorizer decisions, table-driven; the index against a scan of every
ACL (hypothesis); Kafka's AclBindingFilter matching; and a guard that each rule's cases fail when the rule is
broken (the authorizer run with that rule mutated)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import controller.authorizer as authz
from controller.authorizer import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AuthorizationResult,
    PatternType,
    ResourceType,
    StandardAcl,
    StandardAuthorizer,
    from_code,
    parse_super_users,
)
from quorum.log.message import Uuid

Op, Perm, Res, Pat = AclOperation, AclPermissionType, ResourceType, PatternType
ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED


def acl(
    name: str = "orders",
    op: Op = Op.READ,
    perm: Perm = Perm.ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: Pat = Pat.LITERAL,
    rtype: Res = Res.TOPIC,
) -> StandardAcl:
    return StandardAcl(rtype, name, pattern, principal, host, op, perm)


@dataclass(frozen=True)
class Case:
    rule: str  # the rule the case checks: the mutation guard below breaks each rule in turn
    why: str
    acls: tuple[StandardAcl, ...]
    expected: AuthorizationResult
    op: Op = Op.READ
    name: str = "orders"
    principal: str = "User:alice"
    host: str = "10.0.0.1"
    rtype: Res = Res.TOPIC
    super_users: str = ""
    allow_everyone: bool = False


CASES = [
    # -- defaults and super users
    Case("default", "no ACL at all: denied by default", (), DENIED),
    Case("allow_everyone", "no ACL at all, allow.everyone.if.no.acl.found", (), ALLOWED, allow_everyone=True),
    Case("super_users", "a super user needs no ACL", (), ALLOWED, super_users="User:alice"),
    Case(
        "super_users",
        "a super user is allowed even against a DENY",
        (acl(perm=Perm.DENY, op=Op.ALL),),
        ALLOWED,
        super_users="User:admin; User:alice ;",
    ),
    Case("super_users", "super.users names whole principals", (), DENIED, super_users="User:alic;Group:alice"),
    # -- literal matching
    Case("literal", "an ALLOW for the principal, operation and topic", (acl(),), ALLOWED),
    Case("literal", "another principal", (acl(principal="User:bob"),), DENIED),
    Case("literal", "the same name as another principal type", (acl(principal="Group:alice"),), DENIED),
    Case("literal", "another operation", (acl(op=Op.WRITE),), DENIED),
    Case("literal", "another topic", (acl(name="payments"),), DENIED),
    Case("literal", "a literal name that only starts the topic's", (acl(name="ord"),), DENIED),
    Case("literal", "the same name, another resource type", (acl(rtype=Res.GROUP),), DENIED),
    Case(
        "literal",
        "the cluster resource",
        (acl(name="kafka-cluster", rtype=Res.CLUSTER, op=Op.CLUSTER_ACTION),),
        ALLOWED,
        op=Op.CLUSTER_ACTION,
        name="kafka-cluster",
        rtype=Res.CLUSTER,
    ),
    # -- DENY wins
    Case("deny_wins", "ALLOW and DENY of the same operation", (acl(), acl(perm=Perm.DENY)), DENIED),
    Case("deny_wins", "DENY listed first", (acl(perm=Perm.DENY), acl()), DENIED),
    Case("deny_wins", "a wildcard-principal DENY", (acl(), acl(perm=Perm.DENY, principal="User:*")), DENIED),
    Case("deny_wins", "a DENY for the wildcard resource", (acl(), acl(name="*", perm=Perm.DENY)), DENIED),
    Case(
        "deny_wins",
        "a prefixed DENY over a literal ALLOW",
        (acl(), acl(name="ord", pattern=Pat.PREFIXED, perm=Perm.DENY)),
        DENIED,
    ),
    Case(
        "deny_wins", "a DENY from another host does not apply", (acl(), acl(perm=Perm.DENY, host="10.9.9.9")), ALLOWED
    ),
    Case("deny_wins", "a DENY of another operation does not apply", (acl(), acl(perm=Perm.DENY, op=Op.WRITE)), ALLOWED),
    # -- implied operations
    *(
        Case("implied_describe", f"ALLOW {o.name} implies DESCRIBE", (acl(op=o),), ALLOWED, op=Op.DESCRIBE)
        for o in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)
    ),
    *(
        Case("implied_strict", f"ALLOW {o.name} does not imply DESCRIBE", (acl(op=o),), DENIED, op=Op.DESCRIBE)
        for o in (Op.CREATE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION)
    ),
    Case(
        "implied_describe_configs",
        "ALLOW ALTER_CONFIGS implies DESCRIBE_CONFIGS",
        (acl(op=Op.ALTER_CONFIGS),),
        ALLOWED,
        op=Op.DESCRIBE_CONFIGS,
    ),
    Case(
        "implied_strict",
        "ALLOW ALTER does not imply DESCRIBE_CONFIGS",
        (acl(op=Op.ALTER),),
        DENIED,
        op=Op.DESCRIBE_CONFIGS,
    ),
    Case("implied_strict", "ALLOW DESCRIBE does not imply READ", (acl(op=Op.DESCRIBE),), DENIED),
    Case(
        "implied_strict", "ALLOW ALTER_CONFIGS does not imply ALTER", (acl(op=Op.ALTER_CONFIGS),), DENIED, op=Op.ALTER
    ),
    Case(
        "deny_implies_nothing",
        "DENY READ does not deny DESCRIBE",
        (acl(op=Op.DESCRIBE), acl(perm=Perm.DENY)),
        ALLOWED,
        op=Op.DESCRIBE,
    ),
    Case(
        "deny_implies_nothing",
        "DENY ALTER_CONFIGS does not deny DESCRIBE_CONFIGS",
        (acl(op=Op.DESCRIBE_CONFIGS), acl(op=Op.ALTER_CONFIGS, perm=Perm.DENY)),
        ALLOWED,
        op=Op.DESCRIBE_CONFIGS,
    ),
    # -- ALL
    *(
        Case("all", f"ALLOW ALL allows {o.name}", (acl(op=Op.ALL),), ALLOWED, op=o)
        for o in (Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.CLUSTER_ACTION)
    ),
    Case("all", "DENY ALL denies READ over an ALLOW READ", (acl(), acl(op=Op.ALL, perm=Perm.DENY)), DENIED),
    Case("all", "DENY ALL denies DESCRIBE", (acl(op=Op.WRITE), acl(op=Op.ALL, perm=Perm.DENY)), DENIED, op=Op.DESCRIBE),
    Case("all", "DENY READ leaves ALLOW ALL's WRITE", (acl(op=Op.ALL), acl(perm=Perm.DENY)), ALLOWED, op=Op.WRITE),
    # -- allow.everyone.if.no.acl.found
    Case(
        "allow_everyone",
        "an ACL for someone else on the resource: no longer 'no ACL found'",
        (acl(principal="User:bob"),),
        DENIED,
        allow_everyone=True,
    ),
    Case(
        "allow_everyone",
        "an ACL for another operation on the resource",
        (acl(op=Op.WRITE),),
        DENIED,
        allow_everyone=True,
    ),
    Case(
        "allow_everyone",
        "an ACL for another host on the resource",
        (acl(host="10.9.9.9"),),
        DENIED,
        allow_everyone=True,
    ),
    Case(
        "allow_everyone",
        "a prefixed ACL covering the resource, for someone else",
        (acl(name="ord", pattern=Pat.PREFIXED, principal="User:bob"),),
        DENIED,
        allow_everyone=True,
    ),
    Case(
        "allow_everyone",
        "a wildcard-resource ACL for someone else",
        (acl(name="*", principal="User:bob"),),
        DENIED,
        allow_everyone=True,
    ),
    Case("allow_everyone", "ACLs only on other topics", (acl(name="payments"),), ALLOWED, allow_everyone=True),
    Case(
        "allow_everyone",
        "a prefix that does not cover the name",
        (acl(name="pay", pattern=Pat.PREFIXED, principal="User:bob"),),
        ALLOWED,
        allow_everyone=True,
    ),
    Case(
        "allow_everyone",
        "the same name under another resource type",
        (acl(rtype=Res.GROUP, principal="User:bob"),),
        ALLOWED,
        allow_everyone=True,
    ),
    Case("allow_everyone", "the matching DENY still denies", (acl(perm=Perm.DENY),), DENIED, allow_everyone=True),
    # -- prefixed patterns
    Case("prefixed", "a prefix of the name", (acl(name="ord", pattern=Pat.PREFIXED),), ALLOWED),
    Case("prefixed", "a one-character prefix", (acl(name="o", pattern=Pat.PREFIXED),), ALLOWED),
    Case("prefixed", "the whole name as a prefix", (acl(name="orders", pattern=Pat.PREFIXED),), ALLOWED),
    Case("prefixed", "longer than the name", (acl(name="orders.eu", pattern=Pat.PREFIXED),), DENIED),
    Case("prefixed", "inside the name, not at its start", (acl(name="rder", pattern=Pat.PREFIXED),), DENIED),
    Case(
        "prefixed",
        "a prefix under another resource type",
        (acl(name="ord", pattern=Pat.PREFIXED, rtype=Res.GROUP),),
        DENIED,
    ),
    Case(
        "prefixed",
        "among prefixes of several lengths, the one that fits",
        (
            acl(name="x", pattern=Pat.PREFIXED),
            acl(name="orz", pattern=Pat.PREFIXED),
            acl(name="orde", pattern=Pat.PREFIXED, op=Op.WRITE),
            acl(name="order", pattern=Pat.PREFIXED),
        ),
        ALLOWED,
    ),
    Case("prefixed", "'*' prefixed is a prefix, not a wildcard", (acl(name="*", pattern=Pat.PREFIXED),), DENIED),
    # -- wildcards
    Case("wildcard_resource", "a literal '*' name matches any topic", (acl(name="*"),), ALLOWED),
    Case("wildcard_resource", "a literal '*' group does not match topics", (acl(name="*", rtype=Res.GROUP),), DENIED),
    Case(
        "wildcard_principal", "User:* matches any principal", (acl(principal="User:*"),), ALLOWED, principal="User:bob"
    ),
    Case(
        "wildcard_principal",
        "User:* matches principals of any type",
        (acl(principal="User:*"),),
        ALLOWED,
        principal="Group:devs",
    ),
    Case("wildcard_principal", "Group:* is no wildcard", (acl(principal="Group:*"),), DENIED, principal="Group:devs"),
    Case("wildcard_host", "host '*' matches any host", (acl(host="*"),), ALLOWED, host="192.168.1.5"),
    Case("host", "the ACL's own host", (acl(host="10.0.0.1"),), ALLOWED),
    Case("host", "another host", (acl(host="10.0.0.2"),), DENIED),
]


def decide(case: Case) -> AuthorizationResult:
    authorizer = StandardAuthorizer(case.super_users, case.allow_everyone)
    for i, a in enumerate(case.acls):
        authorizer.add_acl(Uuid.from_int(i + 1), a)
    return authorizer.authorize(case.principal, case.host, case.op, case.rtype, case.name)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rule}: {c.why}" for c in CASES])
def test_authorize(case: Case) -> None:
    assert decide(case) == case.expected


# -- each rule's cases fail when the rule is broken -----------------------------------------------------------------

_applies = authz._applies


def _deny_loses(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    verdict = _applies(acl, host, operation)
    return None if verdict is DENIED else verdict


def _no_all(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    return None if acl.operation == Op.ALL and operation != Op.ALL else _applies(acl, host, operation)


def _deny_implies(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    if acl.permission_type == Perm.DENY and operation == Op.DESCRIBE and acl.operation in authz.IMPLIES_DESCRIBE:
        return DENIED
    if acl.permission_type == Perm.DENY and operation == Op.DESCRIBE_CONFIGS and acl.operation == Op.ALTER_CONFIGS:
        return DENIED
    return _applies(acl, host, operation)


def _no_wildcard_host(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    return None if acl.host != host else _applies(acl, host, operation)


def _any_host(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    return _applies(acl._replace(host="*"), host, operation)


def _exact_op(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    if acl.operation not in (operation, Op.ALL):
        return None
    return _applies(acl, host, operation)


def _implies_everything(acl: StandardAcl, host: str, operation: int) -> AuthorizationResult | None:
    if acl.permission_type == Perm.ALLOW and operation in (Op.DESCRIBE, Op.DESCRIBE_CONFIGS):
        return ALLOWED if acl.host in ("*", host) else None
    return _applies(acl, host, operation)


def _only_literal_buckets(self: StandardAuthorizer, resource_type: int, name: str) -> Iterator[dict]:  # type: ignore[type-arg]
    if (bucket := self._literal.get((resource_type, name))) is not None:
        yield bucket
    if (bucket := self._literal.get((resource_type, "*"))) is not None:
        yield bucket


def _no_wildcard_resource(self: StandardAuthorizer, resource_type: int, name: str) -> Iterator[dict]:  # type: ignore[type-arg]
    for bucket in _BUCKETS(self, resource_type, name):
        if bucket is not self._literal.get((resource_type, "*")) or name == "*":
            yield bucket


def _prefix_anywhere(self: StandardAuthorizer, resource_type: int, name: str) -> Iterator[dict]:  # type: ignore[type-arg]
    yield from _BUCKETS(self, resource_type, name)
    for (rtype, prefix), bucket in self._prefixed.items():
        if rtype == resource_type and prefix in name and not name.startswith(prefix):
            yield bucket


def _prefix_longer(self: StandardAuthorizer, resource_type: int, name: str) -> Iterator[dict]:  # type: ignore[type-arg]
    yield from _BUCKETS(self, resource_type, name)
    for (rtype, prefix), bucket in self._prefixed.items():
        if rtype == resource_type and prefix.startswith(name) and prefix != name:
            yield bucket


_BUCKETS = StandardAuthorizer._buckets


@dataclass
class Mutation:
    rule: str  # the cases of this rule (at least one) must fail under the mutation
    apply: Callable[[pytest.MonkeyPatch], None]


def _authorize_ignoring(what: str) -> Callable[[pytest.MonkeyPatch], None]:
    original = StandardAuthorizer.authorize

    def patch(mp: pytest.MonkeyPatch) -> None:
        def authorize(self: StandardAuthorizer, principal: str, *rest: object) -> AuthorizationResult:
            if what == "super_users":
                self.super_users = frozenset()
            elif what == "wildcard_principal" and principal != "User:*":
                saved = self._literal, self._prefixed
                try:
                    self._literal, self._prefixed = (
                        {k: {p: e for p, e in b.items() if p != "User:*"} for k, b in idx.items()} for idx in saved
                    )
                    self._literal = {k: b for k, b in self._literal.items() if b}
                    self._prefixed = {k: b for k, b in self._prefixed.items() if b}
                    return original(self, principal, *rest)  # type: ignore[arg-type]
                finally:
                    self._literal, self._prefixed = saved
            elif what == "allow_everyone":
                # Broken: the setting decides whenever no ACL *applies* (not only when none is on the resource).
                result = original(self, principal, *rest)  # type: ignore[arg-type]
                if self.allow_everyone_if_no_acl_found and result is DENIED and not _any_deny(self, principal, *rest):
                    return ALLOWED
                return result
            return original(self, principal, *rest)  # type: ignore[arg-type]

        mp.setattr(StandardAuthorizer, "authorize", authorize)

    return patch


def _any_deny(self: StandardAuthorizer, principal: str, host: object, op: object, rtype: object, name: object) -> bool:
    return any(
        _applies(a, host, op) is DENIED  # type: ignore[arg-type]
        for b in _BUCKETS(self, rtype, name)  # type: ignore[arg-type]
        for p in (principal, "User:*")
        for a in b.get(p, {}).values()
    )


def _set(name: str, value: object, target: object = authz) -> Callable[[pytest.MonkeyPatch], None]:
    return lambda mp: mp.setattr(target, name, value)


MUTATIONS = [
    Mutation("super_users", _authorize_ignoring("super_users")),
    Mutation("deny_wins", _set("_applies", _deny_loses)),
    Mutation("implied_describe", _set("IMPLIES_DESCRIBE", frozenset({Op.DESCRIBE}))),
    Mutation("implied_describe_configs", _set("IMPLIES_DESCRIBE_CONFIGS", frozenset({Op.DESCRIBE_CONFIGS}))),
    Mutation("implied_describe", _set("_applies", _exact_op)),
    Mutation("implied_strict", _set("_applies", _implies_everything)),
    Mutation("deny_implies_nothing", _set("_applies", _deny_implies)),
    Mutation("all", _set("_applies", _no_all)),
    Mutation("allow_everyone", _authorize_ignoring("allow_everyone")),
    Mutation("prefixed", _set("_buckets", _only_literal_buckets, StandardAuthorizer)),
    Mutation("prefixed", _set("_buckets", _prefix_anywhere, StandardAuthorizer)),
    Mutation("prefixed", _set("_buckets", _prefix_longer, StandardAuthorizer)),
    Mutation("wildcard_resource", _set("_buckets", _no_wildcard_resource, StandardAuthorizer)),
    Mutation("wildcard_principal", _authorize_ignoring("wildcard_principal")),
    Mutation("wildcard_host", _set("_applies", _no_wildcard_host)),
    Mutation("host", _set("_applies", _any_host)),
]


@contextmanager
def mutated(mutation: Mutation) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mutation.apply(mp)
        yield


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[f"{m.rule}-{i}" for i, m in enumerate(MUTATIONS)])
def test_each_rule_fails_when_broken(mutation: Mutation) -> None:
    cases = [c for c in CASES if c.rule == mutation.rule]
    assert cases
    with mutated(mutation):
        failing = [c.why for c in cases if decide(c) != c.expected]
    assert failing, f"no {mutation.rule} case notices the rule broken"


# -- the index against a scan of every ACL ------------------------------------------------------------------------


def reference(
    acls: list[StandardAcl], allow_everyone: bool, principal: str, host: str, op: int, rtype: int, name: str
) -> AuthorizationResult:
    """Kafka's semantics written as a scan of every ACL, to hold the index to."""

    def covers(a: StandardAcl) -> bool:
        if a.resource_type != rtype:
            return False
        if a.pattern_type == Pat.LITERAL:
            return a.resource_name in (name, "*")
        return name.startswith(a.resource_name)

    def operation_matches(a: StandardAcl) -> bool:
        if a.operation in (op, Op.ALL):
            return True
        if a.permission_type != Perm.ALLOW:
            return False
        return (op == Op.DESCRIBE and a.operation in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER)) or (
            op == Op.DESCRIBE_CONFIGS and a.operation == Op.ALTER_CONFIGS
        )

    on_resource = [a for a in acls if covers(a)]
    applicable = [
        a
        for a in on_resource
        if a.principal in (principal, "User:*") and a.host in (host, "*") and operation_matches(a)
    ]
    if any(a.permission_type == Perm.DENY for a in applicable):
        return DENIED
    if applicable:
        return ALLOWED
    return ALLOWED if allow_everyone and not on_resource else DENIED


NAMES = st.sampled_from(["", "o", "or", "ord", "orders", "orders.eu", "pay", "*"])
ACLS = st.builds(
    StandardAcl,
    st.sampled_from([Res.TOPIC, Res.GROUP]),
    NAMES.filter(bool),
    st.sampled_from([Pat.LITERAL, Pat.PREFIXED]),
    st.sampled_from(["User:alice", "User:bob", "User:*", "Group:alice"]),
    st.sampled_from(["*", "h1", "h2"]),
    st.sampled_from([Op.ALL, Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, Op.CREATE]),
    st.sampled_from([Perm.ALLOW, Perm.DENY]),
)


@settings(max_examples=300, deadline=None)
@given(
    acls=st.lists(ACLS, max_size=12),
    removed=st.sets(st.integers(0, 11), max_size=4),
    allow_everyone=st.booleans(),
    principal=st.sampled_from(["User:alice", "User:bob", "Group:alice"]),
    host=st.sampled_from(["h1", "h2"]),
    op=st.sampled_from([Op.READ, Op.WRITE, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.CREATE]),
    rtype=st.sampled_from([Res.TOPIC, Res.GROUP]),
    name=NAMES.filter(bool),
)
def test_index_decides_as_a_scan_of_every_acl(
    acls: list[StandardAcl],
    removed: set[int],
    allow_everyone: bool,
    principal: str,
    host: str,
    op: Op,
    rtype: Res,
    name: str,
) -> None:
    authorizer = StandardAuthorizer((), allow_everyone)
    for i, a in enumerate(acls):
        authorizer.add_acl(Uuid.from_int(i + 1), a)
    for i in removed:
        authorizer.remove_acl(Uuid.from_int(i + 1))  # ids never added are ignored
    kept = [a for i, a in enumerate(acls) if i not in removed]
    assert len(authorizer) == len(kept)
    expected = reference(kept, allow_everyone, principal, host, op, rtype, name)
    assert authorizer.authorize(principal, host, op, rtype, name) == expected


def test_removing_every_acl_empties_the_index() -> None:
    authorizer = StandardAuthorizer()
    acls = [acl(), acl(name="ord", pattern=Pat.PREFIXED), acl(name="o", pattern=Pat.PREFIXED, principal="User:*")]
    for i, a in enumerate(acls):
        authorizer.add_acl(Uuid.from_int(i + 1), a)
    authorizer.add_acl(Uuid.from_int(2), acl(name="pay", pattern=Pat.PREFIXED))  # replaces id 2
    assert authorizer.get(Uuid.from_int(2)) == acl(name="pay", pattern=Pat.PREFIXED)
    assert authorizer._lengths[Res.TOPIC] == (1, 3)
    for i in range(3):
        assert authorizer.remove_acl(Uuid.from_int(i + 1)) is not None
    assert authorizer.remove_acl(Uuid.from_int(1)) is None
    assert (len(authorizer), authorizer._literal, authorizer._prefixed, authorizer._lengths[Res.TOPIC]) == (
        0,
        {},
        {},
        (),
    )


def test_a_decision_looks_only_at_the_prefix_lengths_in_use() -> None:
    """No scan: 10,000 ACLs on other names cost nothing to a decision (counted: dict lookups of the index)."""
    authorizer = StandardAuthorizer()
    for i in range(10_000):
        authorizer.add_acl(Uuid.from_int(i + 1), acl(name=f"topic-{i}", pattern=Pat.LITERAL if i % 2 else Pat.PREFIXED))
    authorizer.add_acl(Uuid.from_int(99_999), acl(name="ord", pattern=Pat.PREFIXED))
    looked: list[tuple[int, str]] = []

    class Counting(dict):  # type: ignore[type-arg]
        def get(self, key, default=None):  # type: ignore[no-untyped-def]
            looked.append(key)
            return super().get(key, default)

    authorizer._literal = Counting(authorizer._literal)
    authorizer._prefixed = Counting(authorizer._prefixed)
    assert authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == ALLOWED
    # The literal name, the wildcard, and one prefixed lookup per length in use up to len("orders"): 3.
    assert looked == [(Res.TOPIC, "orders"), (Res.TOPIC, "*"), (Res.TOPIC, "ord")]


# -- settings --------------------------------------------------------------------------------------------------------


def test_super_users_and_allow_everyone_from_kafka_settings() -> None:
    a = StandardAuthorizer.from_configs(
        {"super.users": " User:admin ;;User:ops", "allow.everyone.if.no.acl.found": "TRUE"}
    )
    assert a.super_users == {"User:admin", "User:ops"} and a.allow_everyone_if_no_acl_found
    assert not StandardAuthorizer.from_configs({}).allow_everyone_if_no_acl_found
    with pytest.raises(ValueError, match="principalType:principalName but got admin"):
        parse_super_users("User:ops;admin")
    with pytest.raises(ValueError, match=r"allow\.everyone\.if\.no\.acl\.found must be true or false"):
        StandardAuthorizer.from_configs({"allow.everyone.if.no.acl.found": "yes"})


def test_codes_are_kafkas() -> None:
    assert [(o.name, int(o)) for o in Op][:15] == [
        ("UNKNOWN", 0),
        ("ANY", 1),
        ("ALL", 2),
        ("READ", 3),
        ("WRITE", 4),
        ("CREATE", 5),
        ("DELETE", 6),
        ("ALTER", 7),
        ("DESCRIBE", 8),
        ("CLUSTER_ACTION", 9),
        ("DESCRIBE_CONFIGS", 10),
        ("ALTER_CONFIGS", 11),
        ("IDEMPOTENT_WRITE", 12),
        ("CREATE_TOKENS", 13),
        ("DESCRIBE_TOKENS", 14),
    ]
    assert {r.name: int(r) for r in Res} == {
        "UNKNOWN": 0,
        "ANY": 1,
        "TOPIC": 2,
        "GROUP": 3,
        "CLUSTER": 4,
        "TRANSACTIONAL_ID": 5,
        "DELEGATION_TOKEN": 6,
        "USER": 7,
    }
    assert {p.name: int(p) for p in Pat} == {"UNKNOWN": 0, "ANY": 1, "MATCH": 2, "LITERAL": 3, "PREFIXED": 4}
    assert {p.name: int(p) for p in Perm} == {"UNKNOWN": 0, "ANY": 1, "DENY": 2, "ALLOW": 3}
    assert from_code(Op, 99) == Op.UNKNOWN and from_code(Res, -1) == Res.UNKNOWN


# -- AclBindingFilter ------------------------------------------------------------------------------------------------

LITERAL_ORDERS = acl()
WILDCARD_TOPIC = acl(name="*")
PREFIX_ORD = acl(name="ord", pattern=Pat.PREFIXED)
PREFIX_PAY = acl(name="pay", pattern=Pat.PREFIXED)
GROUP_ORDERS = acl(rtype=Res.GROUP)
ALL_ACLS = [LITERAL_ORDERS, WILDCARD_TOPIC, PREFIX_ORD, PREFIX_PAY, GROUP_ORDERS]

FILTER_CASES = [
    (AclBindingFilter(), ALL_ACLS),
    (AclBindingFilter(Res.TOPIC), [LITERAL_ORDERS, WILDCARD_TOPIC, PREFIX_ORD, PREFIX_PAY]),
    (AclBindingFilter(Res.TOPIC, "orders", Pat.LITERAL), [LITERAL_ORDERS]),
    (AclBindingFilter(Res.TOPIC, "orders", Pat.ANY), [LITERAL_ORDERS]),  # ANY: any pattern type, the exact name
    (AclBindingFilter(Res.ANY, "orders", Pat.ANY), [LITERAL_ORDERS, GROUP_ORDERS]),
    (AclBindingFilter(Res.TOPIC, "ord", Pat.ANY), [PREFIX_ORD]),
    (AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH), [LITERAL_ORDERS, WILDCARD_TOPIC, PREFIX_ORD]),
    (AclBindingFilter(Res.TOPIC, "payments", Pat.MATCH), [WILDCARD_TOPIC, PREFIX_PAY]),
    (AclBindingFilter(Res.TOPIC, None, Pat.MATCH), [LITERAL_ORDERS, WILDCARD_TOPIC, PREFIX_ORD, PREFIX_PAY]),
    (AclBindingFilter(Res.TOPIC, "ord", Pat.PREFIXED), [PREFIX_ORD]),
    (AclBindingFilter(Res.TOPIC, "orders", Pat.PREFIXED), []),
    (AclBindingFilter(Res.TOPIC, "*", Pat.LITERAL), [WILDCARD_TOPIC]),
]


@pytest.mark.parametrize("f, expected", FILTER_CASES, ids=[repr(f) for f, _ in FILTER_CASES])
def test_pattern_filter(f: AclBindingFilter, expected: list[StandardAcl]) -> None:
    assert [a for a in ALL_ACLS if f.matches(a)] == expected


def test_entry_filter() -> None:
    a = acl(principal="User:alice", host="h1", op=Op.READ, perm=Perm.ALLOW)
    assert AclBindingFilter(principal="User:alice", host="h1", operation=Op.READ, permission_type=Perm.ALLOW).matches(a)
    assert not AclBindingFilter(principal="User:*").matches(a)  # the filter compares principals exactly
    assert not AclBindingFilter(host="*").matches(a)
    assert not AclBindingFilter(operation=Op.ALL).matches(a)
    assert not AclBindingFilter(permission_type=Perm.DENY).matches(a)
    assert AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH, "User:alice").matches(a)


def test_unknown_filters() -> None:
    assert AclBindingFilter().unknown() is None
    assert AclBindingFilter(resource_type=Res.UNKNOWN).unknown() == "Unknown patternFilter."
    assert AclBindingFilter(pattern_type=0).unknown() == "Unknown patternFilter."
    assert AclBindingFilter(resource_type=42).unknown() == "Unknown patternFilter."  # not a code Kafka knows
    assert AclBindingFilter(operation=Op.UNKNOWN).unknown() == "Unknown entryFilter."
    assert AclBindingFilter(permission_type=9).unknown() == "Unknown entryFilter."


def test_kafkas_text_forms() -> None:
    assert str(acl(name="ord", pattern=Pat.PREFIXED)) == (
        "(pattern=ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED), "
        "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW))"
    )


def test_authorize_all_answers_each_action_in_order() -> None:
    authorizer = StandardAuthorizer()
    authorizer.add_acl(Uuid.from_int(1), acl(name="ord", pattern=Pat.PREFIXED, op=Op.CREATE))
    actions = [(Op.CREATE, Res.TOPIC, "orders"), (Op.CREATE, Res.TOPIC, "payments"), (Op.CREATE, Res.CLUSTER, "c")]
    assert authorizer.authorize_all("User:alice", "h", actions) == [ALLOWED, DENIED, DENIED]
