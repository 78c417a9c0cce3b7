"""``pykraft configs`` for client quotas: entity types ``users`` and ``clients``, as kafka-configs.sh manages them.

    pykraft configs --bootstrap-server B --alter --add-config controller_mutation_rate=10 \\
        --entity-type users --entity-name alice          # or --entity-default: every user without their own
    pykraft configs --bootstrap-server B --alter --delete-config controller_mutation_rate --entity-type users ...
    pykraft configs --bootstrap-server B --describe --entity-type users [--entity-name alice | --entity-default]

``--alter`` sends one AlterClientQuotas entry (a set for each added key, a removal for each deleted one; only a key
the entity has can be deleted, as kafka-configs.sh checks). ``--describe`` sends DescribeClientQuotas with a strict
filter (entities of that type alone): the named entity, the default one, or every one of the type, and prints
``Quota configs for user-principal 'alice' are controller_mutation_rate=10.0`` lines. :mod:`pykraft.configs_cli`
parses the arguments and calls here.
"""

from __future__ import annotations

import argparse
import json
import math

from controller.quota_control import CLIENT_ID, USER, Entity, FilterComponent, MatchType, QuotaAlteration, QuotaOp
from pykraft.cli_common import describe_error
from pykraft.client import AdminClient

QUOTA_ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}
_DESCRIBED = {USER: "user-principal", CLIENT_ID: "client-id"}


class QuotaCommandFailed(Exception):
    """The cluster refused: printed under kafka-configs.sh's first line, exit code 1."""


class InvalidQuotaConfigs(Exception):
    """kafka-configs.sh's own checks: one line, exit code 1."""


def _float_text(value: float) -> str:
    """As Java's Double.toString prints a quota (10 -> 10.0)."""
    return repr(float(value))


def entity_description(entity: Entity) -> str:
    """ConfigCommand's: ``user-principal 'alice', client-id 'app'`` / ``the default user-principal``."""
    return ", ".join(
        f"the default {_DESCRIBED.get(t, t)}" if n is None else f"{_DESCRIBED.get(t, t)} '{n}'" for t, n in entity
    )


def _entity(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    return [(QUOTA_ENTITY_TYPES[args.entity_type], None if args.entity_default else args.entity_name)]


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
    entity_type = QUOTA_ENTITY_TYPES[args.entity_type]
    if args.entity_default:
        component = FilterComponent(entity_type, MatchType.DEFAULT)
    elif args.entity_name is not None:
        component = FilterComponent(entity_type, MatchType.EXACT, args.entity_name)
    else:
        component = FilterComponent(entity_type, MatchType.SPECIFIED)
    quotas = await admin.describe_client_quotas([component], strict=True, timeout_ms=args.timeout_ms)
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
        text = ",".join(f"{k}={_float_text(v)}" for k, v in values.items())
        print(f"Quota configs for {entity_description(entity)} are {text}")
    return 0


async def alter(admin: AdminClient, args: argparse.Namespace, to_add: dict[str, str], to_delete: list[str]) -> int:
    values = parse_values(to_add)
    entity = _entity(args)
    if to_delete:  # as kafka-configs.sh: only a key the entity has can be deleted
        component = (
            FilterComponent(entity[0][0], MatchType.DEFAULT)
            if entity[0][1] is None
            else FilterComponent(entity[0][0], MatchType.EXACT, entity[0][1])
        )
        current = await admin.describe_client_quotas([component], strict=True, timeout_ms=args.timeout_ms)
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
