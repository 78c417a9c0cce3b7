"""``pykraft configs`` for client quotas: entity types ``users`` and ``clients``, as kafka-configs.sh manages them.

    pykraft configs --bootstrap-server B --alter --add-config controller_mutation_rate=10 \\
        --entity-type users --entity-name alice          # or --entity-default: every user without their own
    pykraft configs --bootstrap-server B --alter --delete-config controller_mutation_rate --entity-type users ...
    pykraft configs --bootstrap-server B --describe --entity-type users [--entity-name alice | --entity-default]
    pykraft configs --bootstrap-server B --alter --add-config controller_mutation_rate=5 --user alice --client app
    pykraft configs --bootstrap-server B --describe --user-defaults [--client app | --client-defaults]

``--alter`` sends one AlterClientQuotas entry (a set for each added key, a removal for each deleted one; only a key
the entity has can be deleted, as kafka-configs.sh checks). ``--describe`` sends DescribeClientQuotas with a strict
filter (entities of those types alone): the named entity, the default one, or every one of the type, and prints
``Quota configs for user-principal 'alice' are controller_mutation_rate=10.0`` lines. kafka-configs.sh's
shorthands ``--user``, ``--client``, ``--user-defaults`` and ``--client-defaults`` name a user, a client or both
(a user and client-id pair). :mod:`pykraft.configs_cli`
parses the arguments and calls here.
"""

from __future__ import annotations

import argparse
import json
import math
from decimal import Decimal

from controller.quota_control import CLIENT_ID, USER, Entity, FilterComponent, MatchType, QuotaAlteration, QuotaOp
from pykraft.cli_common import UsageError, describe_error
from pykraft.client import AdminClient

QUOTA_ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
_DESCRIBED = {USER: "user-principal", CLIENT_ID: "client-id"}


class QuotaCommandFailed(Exception):
    """The cluster refused: printed under kafka-configs.sh's first line, exit code 1."""


class InvalidQuotaConfigs(Exception):
    """kafka-configs.sh's own checks: one line, exit code 1."""


def entity_description(entity: Entity) -> str:
    """ConfigCommand's: ``user-principal 'alice', client-id 'app'`` / ``the default user-principal`` (user first)."""
    names = dict(entity)
    return ", ".join(
        f"the default {_DESCRIBED[t]}" if names[t] is None else f"{_DESCRIBED[t]} '{names[t]}'"
        for t in (USER, CLIENT_ID, "ip")
        if t in names
    )


def java_double(value: float) -> str:
    """Java's Double.toString, as kafka-configs.sh prints a quota: 10 -> 10.0, 1e7 -> 1.0E7, 0.0005 -> 5.0E-4."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))
    sign, digits, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = exponent + len(text) - 1  # type: ignore[operator]
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


Component = tuple[str, str | None, bool]  # (entity type, name or None for the default, True: any name of the type)


def check_quota_args(args: argparse.Namespace) -> bool:
    """Sets ``args.quota_components`` for the quota forms; True when the shorthands named the entity (the caller's
    topic and broker checks are then skipped)."""
    args.quota_components = None
    shorthand = args.user is not None or args.client is not None or args.user_defaults or args.client_defaults
    if not shorthand:
        if args.entity_type in QUOTA_ENTITY_TYPES:
            entity_type = QUOTA_ENTITY_TYPES[args.entity_type]
            any_name = args.entity_name is None and not args.entity_default
            args.quota_components = [(entity_type, None if args.entity_default else args.entity_name, any_name)]
        return False
    if args.entity_type is not None or args.entity_name is not None or args.entity_default:
        raise UsageError("--entity-type, --entity-name and --entity-default can't be used with --user or --client")
    if args.user is not None and args.user_defaults:
        raise UsageError("--user and --user-defaults can't be used together")
    if args.client is not None and args.client_defaults:
        raise UsageError("--client and --client-defaults can't be used together")
    components: list[Component] = []
    if args.user is not None or args.user_defaults:
        components.append((USER, args.user, False))
    if args.client is not None or args.client_defaults:
        components.append((CLIENT_ID, args.client, False))
    args.quota_components = components
    args.entity_type = "users" if components[0][0] == USER else "clients"  # the head, for the alter message
    args.entity_name, args.entity_default = components[0][1], components[0][1] is None
    if args.alter and args.add_config is None and not args.delete_config:
        raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")
    return True


def _filter(components: list[Component]) -> list[FilterComponent]:
    out = []
    for entity_type, name, any_name in components:
        if any_name:
            out.append(FilterComponent(entity_type, MatchType.SPECIFIED))
        elif name is None:
            out.append(FilterComponent(entity_type, MatchType.DEFAULT))
        else:
            out.append(FilterComponent(entity_type, MatchType.EXACT, name))
    return out


def parse_values(to_add: dict[str, str]) -> dict[str, float]:
    values = {}
    for key, text in to_add.items():
        try:
            value = float(text)
        except ValueError:
            raise InvalidQuotaConfigs(f"Cannot parse quota configuration value for {key}: {text}") from None
        if math.isnan(value):
            raise InvalidQuotaConfigs(f"Cannot parse quota configuration value for {key}: {text}")
        values[key] = value
    return values


async def describe(admin: AdminClient, args: argparse.Namespace) -> int:
    components = _filter(args.quota_components)
    quotas = await admin.describe_client_quotas(components, strict=True, timeout_ms=args.timeout_ms)
    if args.output == "json":
        print(
            json.dumps(
                [
                    {"entity": [{"entityType": t, "entityName": n} for t, n in entity], "quotas": values}
                    for entity, values in quotas.items()
                ]
            )
        )
        return 0
    for entity, values in quotas.items():
        text = ", ".join(f"{k}={java_double(v)}" for k, v in values.items())
        print(f"Quota configs for {entity_description(entity)} are {text}")
    return 0


async def alter(admin: AdminClient, args: argparse.Namespace, to_add: dict[str, str], to_delete: list[str]) -> int:
    values = parse_values(to_add)
    entity = [(t, n) for t, n, _ in args.quota_components]
    if to_delete:  # as kafka-configs.sh: only a key the entity has can be deleted
        current = await admin.describe_client_quotas(
            _filter(args.quota_components), strict=True, timeout_ms=args.timeout_ms
        )
        held = {k for v in current.values() for k in v}
        invalid = [k for k in to_delete if k not in held]
        if invalid:
            raise InvalidQuotaConfigs(f"Invalid config(s): {','.join(invalid)}")
    ops = [QuotaOp(k, v) for k, v in values.items()] + [QuotaOp(k, 0.0, remove=True) for k in to_delete]
    [result] = await admin.alter_client_quotas([QuotaAlteration(entity, ops)], timeout_ms=args.timeout_ms)
    if result.error.failed:
        raise QuotaCommandFailed(describe_error(result.error))
    if args.entity_default:
        print(f"Completed updating default config for {args.entity_type} in the cluster.")
    else:
        print(f"Completed updating config for {args.entity_type[:-1]} {args.entity_name}.")
    return 0
