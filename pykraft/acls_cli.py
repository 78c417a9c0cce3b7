"""``pykraft acls``: add, remove and list ACLs, like ``kafka-acls.sh``.

    pykraft acls --bootstrap-server B --add --allow-principal User:alice --operation Read --operation Describe \\
        --topic orders [--resource-pattern-type prefixed]
    pykraft acls --bootstrap-server B --add --deny-principal User:mallory --deny-host 10.0.0.9 --cluster
    pykraft acls --bootstrap-server B --remove --allow-principal User:alice --operation Read --topic orders --force
    pykraft acls --bootstrap-server B --list [--topic orders --resource-pattern-type match]

As Kafka's tool: ACLs are the product of the principals, hosts (``*`` when a principal is given without hosts) and
operations (``All`` by default) on each resource named; ``--add`` refuses a pattern type other than literal or
prefixed and an operation the resource type does not have, then lists the resources' ACLs; ``--remove`` without a
principal removes every ACL of the resource (asks first unless ``--force``); ``--list`` without a resource lists
every ACL. Output lines are kafka-acls.sh's. Exit codes: 0 success, 1 the cluster refused or could not be reached,
2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from itertools import product

from controller.authorizer import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
    parse_principal,
)
from controller.results import ApiError
from pykraft.cli_common import UsageError, add_bootstrap_arguments, describe_error, positive_int, usage_failed
from pykraft.client import AdminClient, AdminError

PATTERN_TYPES = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED}
FILTER_PATTERN_TYPES = {**PATTERN_TYPES, "match": PatternType.MATCH, "any": PatternType.ANY}
# Operation names as Kafka's tool takes them (Read, DescribeConfigs, ...), case and underscores aside.
OPERATIONS = {o.name.replace("_", ""): o for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)}
ERROR = "Error while executing ACL command: "


class CommandFailed(Exception):
    """The cluster refused: one line on stderr, exit code 1."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap_arguments(p, required=False, help="controller nodes. REQUIRED.")
    actions = p.add_argument_group("actions (exactly one)")
    actions.add_argument("--add", action="store_true", help="add ACLs")
    actions.add_argument("--remove", action="store_true", help="remove ACLs")
    actions.add_argument("--list", action="store_true", help="list ACLs (of the resources named, or all)")
    entries = p.add_argument_group("entries")
    for kind in ("allow", "deny"):
        entries.add_argument(
            f"--{kind}-principal",
            action="append",
            default=[],
            metavar="TYPE:NAME",
            help=f"principal to {kind} (User:* is everyone); repeatable",
        )
        entries.add_argument(
            f"--{kind}-host",
            action="append",
            default=[],
            metavar="HOST",
            help=f"host the --{kind}-principal ACLs apply to (default * with a principal); repeatable",
        )
    entries.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, AlterConfigs, "
        "IdempotentWrite, CreateTokens, DescribeTokens, All (default All); repeatable",
    )
    resources = p.add_argument_group("resources")
    resources.add_argument("--topic", action="append", default=[], help="a topic ('*' for all); repeatable")
    resources.add_argument("--group", action="append", default=[], help="a consumer group; repeatable")
    resources.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")
    resources.add_argument("--transactional-id", action="append", default=[], help="a transactional id; repeatable")
    resources.add_argument("--delegation-token", action="append", default=[], help="a delegation token id; repeatable")
    p.add_argument(
        "--resource-pattern-type",
        default="literal",
        type=str.lower,
        choices=tuple(FILTER_PATTERN_TYPES),
        help="--add: literal or prefixed; --list/--remove also match (every pattern covering the name) or any "
        "(the exact name, any pattern type)",
    )
    p.add_argument("--force", action="store_true", help="--remove without asking")
    p.add_argument(
        "--timeout-ms", type=positive_int, default=30_000, metavar="MS", help="how long each request may take"
    )


def _operation(name: str) -> AclOperation:
    operation = OPERATIONS.get(name.strip().replace("_", "").replace("-", "").upper())
    if operation is None:
        raise UsageError(f"Unknown operation name {name.strip()}")
    return operation


def _principal(text: str) -> str:
    principal = text.strip()
    try:
        parse_principal(principal)
    except ValueError:
        raise UsageError(f"expected a string in format principalType:principalName but got {principal}") from None
    return principal


def resource_filters(args: argparse.Namespace) -> list[AclBindingFilter]:
    """AclCommand.getResourceFilter: one pattern filter per resource named, with --resource-pattern-type."""
    pattern = FILTER_PATTERN_TYPES[args.resource_pattern_type]
    named = [(ResourceType.TOPIC, t) for t in args.topic]
    named += [(ResourceType.GROUP, g) for g in args.group]
    named += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id]
    named += [(ResourceType.DELEGATION_TOKEN, t) for t in args.delegation_token]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return [AclBindingFilter(rtype, name.strip(), pattern) for rtype, name in named]


def entries(args: argparse.Namespace) -> list[tuple[str, str, AclOperation, AclPermissionType]]:
    """AclCommand.getAcl: (principal, host, operation, permission) for each allowed and denied combination."""
    operations = sorted({_operation(o) for o in args.operation} or {AclOperation.ALL})
    out = []
    for kind, permission in (("allow", AclPermissionType.ALLOW), ("deny", AclPermissionType.DENY)):
        principals = sorted({_principal(p) for p in getattr(args, f"{kind}_principal")})
        hosts = sorted({h.strip() for h in getattr(args, f"{kind}_host")}) or ["*"]
        out += [(p, h, o, permission) for p, h, o in product(principals, hosts, operations)]
    return out


def check_args(args: argparse.Namespace) -> None:
    if args.add + args.remove + args.list != 1:
        raise UsageError("Command must include exactly one action: --list, --add, --remove.")
    if args.bootstrap_server is None:
        raise UsageError("The required --bootstrap-server argument must be specified")
    if args.list:
        for option in ("allow_principal", "deny_principal", "allow_host", "deny_host"):
            if getattr(args, option):
                raise UsageError(f'Option "[list]" can\'t be used with option "[{option.replace("_", "-")}]"')
    elif not resource_filters(args):
        raise UsageError(
            "You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
            "--transactional-id <id> or --delegation-token <Delegation Token ID>"
        )
    if args.add:
        if args.resource_pattern_type not in PATTERN_TYPES:
            raise UsageError(
                f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is not valid when adding acls."
            )
        if not args.allow_principal and not args.deny_principal:
            raise UsageError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
        for f in resource_filters(args):
            valid = SUPPORTED_OPERATIONS[ResourceType(f.resource_type)] | {AclOperation.ALL}
            if any(o not in valid for _, _, o, _ in entries(args)):
                names = ",".join(o.name for o in sorted(valid))
                raise UsageError(f"ResourceType {ResourceType(f.resource_type).name} only supports operations {names}")
    if not args.list:
        entries(args)  # bad principals and operation names: usage errors before any request


def _pattern_text(f: AclBindingFilter) -> str:
    name = "<any>" if f.resource_name is None else f.resource_name
    return (
        f"ResourcePattern(resourceType={ResourceType(f.resource_type).name}, name={name}, "
        f"patternType={PatternType(f.pattern_type).name})"
    )


def _block(lines: list[str]) -> str:
    """Kafka's ``s"...: $Newline ${acls.map("\\t" + _).mkString(Newline)} $Newline"``."""
    return " \n " + "\n".join("\t" + line for line in lines) + " \n"


def _failed(error: ApiError) -> CommandFailed:
    return CommandFailed(ERROR + describe_error(error))


async def list_acls(admin: AdminClient, args: argparse.Namespace) -> None:
    """AclCommand.listAcls: each resource's ACLs (of the resources named, by pattern type; else every ACL)."""
    filters = resource_filters(args)
    acls: list[StandardAcl] = []
    if not filters:
        acls = await admin.describe_acls(AclBindingFilter(), timeout_ms=args.timeout_ms)
    for f in filters:
        acls += [a for a in await admin.describe_acls(f, timeout_ms=args.timeout_ms) if a not in acls]
    by_resource: dict[tuple[int, str, int], list[StandardAcl]] = {}
    for a in acls:
        by_resource.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(a)
    for group in by_resource.values():
        print(f"Current ACLs for resource `{group[0].pattern_text()}`:{_block([a.entry_text() for a in group])}")


async def add_acls(admin: AdminClient, args: argparse.Namespace) -> None:
    for f in resource_filters(args):
        acls = [
            StandardAcl(f.resource_type, f.resource_name or "", f.pattern_type, p, h, o, perm)
            for p, h, o, perm in entries(args)
        ]
        print(f"Adding ACLs for resource `{_pattern_text(f)}`:{_block([a.entry_text() for a in acls])}")
        results = await admin.create_acls(acls, timeout_ms=args.timeout_ms)
        failed = [r.error for r in results if r.error.failed]
        if failed:
            raise _failed(failed[0])
    await list_acls(admin, args)


def _confirm(args: argparse.Namespace, question: str) -> bool:
    if args.force:
        return True
    print(question)
    try:
        return input().strip().lower() == "y"
    except EOFError:
        return False


async def remove_acls(admin: AdminClient, args: argparse.Namespace) -> None:
    wanted = entries(args)
    for f in resource_filters(args):
        if not wanted:
            question = f"Are you sure you want to delete all ACLs for resource filter `{_pattern_text(f)}`? (y/n)"
            filters = [f]
        else:
            lines = [StandardAcl(0, "", 0, p, h, o, perm).entry_text() for p, h, o, perm in wanted]
            question = (
                f"Are you sure you want to remove ACLs:{_block(lines)} from resource filter `{_pattern_text(f)}`? (y/n)"
            )
            filters = [
                AclBindingFilter(f.resource_type, f.resource_name, f.pattern_type, p, h, o, perm)
                for p, h, o, perm in wanted
            ]
        if not _confirm(args, question):
            continue
        results = await admin.delete_acls(filters, timeout_ms=args.timeout_ms)
        failed = [r.error for r in results if r.error.failed]
        if failed:
            raise _failed(failed[0])
    await list_acls(admin, args)


async def _run(args: argparse.Namespace) -> int:
    check_args(args)
    admin = AdminClient(
        args.bootstrap_server,
        default_api_timeout_ms=args.timeout_ms,
        connect_timeout_ms=args.connect_timeout_ms,
        tls=args.tls,
    )
    async with admin:
        if args.add:
            await add_acls(admin, args)
        elif args.remove:
            await remove_acls(admin, args)
        else:
            await list_acls(admin, args)
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except UsageError as e:
        return usage_failed("pykraft acls", e)
    except CommandFailed as e:
        print(e, file=sys.stderr)
        return 1
    except AdminError as e:
        print(ERROR + str(e), file=sys.stderr)
        return 1
