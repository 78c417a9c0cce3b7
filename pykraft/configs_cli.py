"""``pykraft configs``: describe and alter topic and broker configs, like ``kafka-configs.sh``.

    pykraft configs --bootstrap-server B --entity-type topics --entity-name orders --alter \\
        --add-config retention.ms=86400000,cleanup.policy=[compact,delete] --delete-config segment.ms
    pykraft configs --bootstrap-server B --entity-type brokers --entity-default --describe [--all]

Client quotas (``--entity-type users`` or ``clients``, e.g. ``--add-config controller_mutation_rate=10``) are
in :mod:`pykraft.quota_cli`. ``--describe`` prints the dynamic configs (``--all``: every config) with their
synonyms, as kafka-configs.sh does;
without ``--entity-name`` it describes every topic, or every broker and the cluster-wide default. ``--alter`` sends
one IncrementalAlterConfigs (SET for each added config, DELETE for each deleted one). Exit codes: 0 success, 1 the
cluster refused or could not be reached, 2 a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any

from controller.requests import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
)
from pykraft import quota_cli
from pykraft.cli_common import UsageError, add_bootstrap_arguments, describe_error, positive_int, usage_failed
from pykraft.client import AdminClient, AdminError
from pykraft.quota_cli import QUOTA_ENTITY_TYPES, InvalidQuotaConfigs, QuotaCommandFailed

ENTITY_TYPES = {"topics": ConfigResourceType.TOPIC, "brokers": ConfigResourceType.BROKER}
DYNAMIC_SOURCE = {  # what --describe shows without --all: the entity's own dynamic configs
    ("topics", False): ConfigSource.DYNAMIC_TOPIC_CONFIG,
    ("brokers", False): ConfigSource.DYNAMIC_BROKER_CONFIG,
    ("brokers", True): ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
}
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"  # kafka-configs.sh's: a separator not inside [...]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_bootstrap_arguments(p, required=False, help="controller nodes. REQUIRED.")
    p.add_argument("--entity-type", help="topics, brokers, users or clients")
    p.add_argument("--entity-name", help="a topic name, a broker id, a user principal's name or a client id")
    p.add_argument(
        "--entity-default", action="store_true", help="the cluster-wide broker default, or the default user / client"
    )
    p.add_argument("--user", help="a user principal's name (client quotas; with --client: the pair)")
    p.add_argument("--client", help="a client id (client quotas)")
    p.add_argument("--user-defaults", action="store_true", help="the default user (client quotas)")
    p.add_argument("--client-defaults", action="store_true", help="the default client id (client quotas)")
    p.add_argument("--describe", action="store_true", help="list the entity's configs")
    p.add_argument("--alter", action="store_true", help="change the entity's configs")
    p.add_argument("--all", action="store_true", help="--describe: every config, not only the dynamic ones")
    p.add_argument(
        "--add-config",
        metavar="K=V,K=[V1,V2]",
        help="configs to set; square brackets group a value that contains commas",
    )
    p.add_argument("--delete-config", action="append", default=[], metavar="K1,K2", help="config names to remove")
    p.add_argument("--output", choices=("text", "json"), default="text", help="for --describe")
    p.add_argument(
        "--timeout-ms", type=positive_int, default=30_000, metavar="MS", help="how long each request may take"
    )


def check_args(args: argparse.Namespace) -> None:
    """ConfigCommand's checkArgs, for the two entity types pykraft has."""
    if args.describe + args.alter != 1:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    if args.describe:
        for option in ("add_config", "delete_config"):
            if getattr(args, option):
                raise UsageError(f'Option "[describe]" can\'t be used with option "[{option.replace("_", "-")}]"')
    if args.bootstrap_server is None:
        raise UsageError("The required --bootstrap-server argument must be specified")
    if quota_cli.check_quota_args(args):  # --user / --client / --user-defaults / --client-defaults
        return
    if args.entity_type is None:
        raise UsageError("At least one entity type must be specified")
    if args.entity_type not in ENTITY_TYPES and args.entity_type not in QUOTA_ENTITY_TYPES:
        known = ", ".join([*ENTITY_TYPES, *QUOTA_ENTITY_TYPES])
        raise UsageError(
            f"Invalid entity type {args.entity_type}, the entity type must be one of {known} "
            "with a --bootstrap-server argument"
        )
    if args.entity_name is not None and args.entity_default:
        raise UsageError("--entity-name and --entity-default can't be used together")
    if args.entity_type == "brokers" and args.entity_name is not None:
        try:
            int(args.entity_name)
        except ValueError:
            raise UsageError(
                f"The entity name for brokers must be a valid integer broker id, but it is: {args.entity_name}"
            ) from None
    if args.entity_type == "topics" and args.entity_default:
        action = "describe" if args.describe else "alter"
        raise UsageError(f"--entity-default must not be specified with --{action} of topics")
    if args.alter:
        if args.entity_name is None and not args.entity_default:
            if args.entity_type != "topics":
                raise UsageError(
                    f"An entity-name or default entity must be specified with --alter of {args.entity_type}"
                )
            raise UsageError("An entity name must be specified with --alter of topics")
        if args.add_config is None and not args.delete_config:
            raise UsageError("At least one of --add-config or --delete-config must be specified with --alter")


def parse_configs_to_add(text: str | None) -> dict[str, str]:
    """kafka-configs.sh's parseConfigsToBeAdded: ``k=v`` pairs by comma, commas inside [...] kept, brackets
    removed from values; an empty value is allowed."""
    if text is None:
        return {}
    configs: dict[str, str] = {}
    for pair in re.split("," + _OUTSIDE_BRACKETS, text):
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, pair)
        if len(parts) != 2:
            raise UsageError('Invalid entity config: all configs to be added must be in the format "key=val".')
        key, value = parts[0].strip(), re.sub(r"\[?\]?", "", parts[1]).strip()
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise UsageError(f"Invalid character found for config key: {key}")
        configs[key] = value
    return configs


def parse_configs_to_delete(values: list[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


class CommandFailed(Exception):
    """A failure reported by the cluster: printed under kafka-configs.sh's first line, exit code 1."""


class InvalidConfigs(Exception):
    """kafka-configs.sh's InvalidConfigurationException of its own checks: one line, exit code 1."""


def _entity_name(args: argparse.Namespace) -> str:
    return "" if args.entity_default else args.entity_name


async def _configs(
    admin: AdminClient, entity_type: str, name: str, *, describe_all: bool, timeout_ms: int
) -> list[ConfigEntry]:
    """ConfigCommand.getResourceConfig: the entity's configs with synonyms, sorted by name; only its own dynamic
    ones unless ``describe_all``."""
    [result] = await admin.describe_configs(
        [ConfigResource(ENTITY_TYPES[entity_type], name)], include_synonyms=True, timeout_ms=timeout_ms
    )
    if result.error.failed:
        raise CommandFailed(describe_error(result.error))
    source = None if describe_all else DYNAMIC_SOURCE[(entity_type, name == "")]
    return sorted((c for c in result.configs if source is None or c.source == source), key=lambda c: c.name)


def _source_name(source: int) -> str:
    return ConfigSource(source).name if source in ConfigSource._value2member_map_ else "UNKNOWN"


def _value(value: str | None) -> str:
    return "null" if value is None else value  # a sensitive value, as Java prints it


async def _describe(admin: AdminClient, args: argparse.Namespace) -> int:
    if args.entity_type in QUOTA_ENTITY_TYPES:
        return await quota_cli.describe(admin, args)
    if args.entity_name is not None or args.entity_default:
        entities = [_entity_name(args)]
    elif args.entity_type == "topics":
        entities = await admin.list_topics(args.timeout_ms)
    else:
        cluster = await admin.describe_cluster(args.timeout_ms)
        entities = [str(b.broker_id) for b in cluster.brokers] + [""]
    described = []
    for name in entities:
        configs = await _configs(admin, args.entity_type, name, describe_all=args.all, timeout_ms=args.timeout_ms)
        described.append((name, configs))
    if args.output == "json":
        print(json.dumps([_entity_json(args.entity_type, name, configs) for name, configs in described]))
        return 0
    singular = args.entity_type[:-1]
    for name, configs in described:
        if name == "":
            print(f"Default configs for {args.entity_type} in the cluster are:")
        else:
            print(f"{'All' if args.all else 'Dynamic'} configs for {singular} {name} are:")
        for c in configs:
            synonyms = ", ".join(f"{_source_name(s.source)}:{s.name}={_value(s.value)}" for s in c.synonyms)
            print(f"  {c.name}={_value(c.value)} sensitive={str(c.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return 0


def _entity_json(entity_type: str, name: str, configs: list[ConfigEntry]) -> dict[str, Any]:
    return {
        "entityType": entity_type,
        "entityName": name,
        "default": name == "",
        "configs": [
            {
                "name": c.name,
                "value": c.value,
                "source": _source_name(c.source),
                "sensitive": c.is_sensitive,
                "readOnly": c.read_only,
                "synonyms": [{"name": s.name, "value": s.value, "source": _source_name(s.source)} for s in c.synonyms],
            }
            for c in configs
        ],
    }


async def _alter(admin: AdminClient, args: argparse.Namespace) -> int:
    to_add = parse_configs_to_add(args.add_config)
    to_delete = parse_configs_to_delete(args.delete_config)
    if args.entity_type in QUOTA_ENTITY_TYPES:
        return await quota_cli.alter(admin, args, to_add, to_delete)
    name = _entity_name(args)
    if to_delete:  # as kafka-configs.sh: only a config the entity has set can be deleted
        current = await _configs(admin, args.entity_type, name, describe_all=False, timeout_ms=args.timeout_ms)
        invalid = [k for k in to_delete if k not in {c.name for c in current}]
        if invalid:
            raise InvalidConfigs(f"Invalid config(s): {','.join(invalid)}")
    ops = [AlterableConfig(k, AlterConfigOp.SET, v) for k, v in to_add.items()]
    ops += [AlterableConfig(k, AlterConfigOp.DELETE, None) for k in to_delete]
    resource = AlterConfigsResource(ENTITY_TYPES[args.entity_type], name, tuple(ops))
    [result] = await admin.incremental_alter_configs([resource], timeout_ms=args.timeout_ms)
    if result.error.failed:
        raise CommandFailed(describe_error(result.error))
    if name:
        print(f"Completed updating config for {args.entity_type[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {args.entity_type} in the cluster.")
    return 0


async def _run(args: argparse.Namespace) -> int:
    check_args(args)
    if args.alter:
        parse_configs_to_add(args.add_config)  # a usage error before any request
    admin = AdminClient(
        args.bootstrap_server,
        default_api_timeout_ms=args.timeout_ms,
        connect_timeout_ms=args.connect_timeout_ms,
        tls=args.tls,
    )
    async with admin:
        return await (_alter if args.alter else _describe)(admin, args)


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """``argv``: the command's arguments (after ``configs``), for kafka-configs.sh's error line."""
    try:
        return asyncio.run(_run(args))
    except UsageError as e:
        return usage_failed("pykraft configs", e)
    except (InvalidConfigs, InvalidQuotaConfigs) as e:
        print(e, file=sys.stderr)
        return 1
    except (CommandFailed, QuotaCommandFailed, AdminError) as e:
        print(f"Error while executing config command with args '{' '.join(argv)}'", file=sys.stderr)
        print(e, file=sys.stderr)
        return 1
