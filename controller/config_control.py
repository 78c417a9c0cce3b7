"""ConfigControl: the dynamic configs of topics and brokers (Kafka's ConfigurationControlManager).

- :meth:`ConfigControl.incremental_alter_configs` is IncrementalAlterConfigs with Kafka's checks, codes and messages:
  ControllerApis' (unknown resource type, duplicate resource), the forwarding broker's (duplicate keys, null values,
  unknown operations, broker configs that cannot change at run time, broker values: KAFKA-13609 answers these with
  INVALID_REQUEST), the manager's own (APPEND/SUBTRACT on a key that is not a LIST) and the controller's validator
  (resource names, topic configs, then existence). Clients reach the controller directly here, so the forwarding
  broker's checks run here too. It reads state and returns records plus a response; :meth:`replay` is the only code
  that changes state.
- :meth:`ConfigControl.legacy_alter_configs` is the old AlterConfigs: a resource's whole set of dynamic configs
  replaced by the request's, checked as incremental SETs are.
- :meth:`ConfigControl.describe_configs` is DescribeConfigs as Kafka's ConfigHelper answers it: every config with
  its value, source and, on request, its synonyms.
- :meth:`ConfigControl.topic_config` and :meth:`ConfigControl.broker_config` give the effective value the
  controller acts on: topic -> this node's dynamic config -> the cluster-wide dynamic default -> the static config ->
  the default, through the broker synonyms of a topic config (KafkaConfigSchema.resolveEffectiveTopicConfig).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from controller.configs import (
    BROKER_CONFIGS,
    BROKER_RESOURCE,
    CONFIG_DOCS,
    TOPIC_CONFIG_SYNONYMS,
    TOPIC_CONFIGS,
    TOPIC_RESOURCE,
    ConfigDef,
    InvalidConfigError,
    broker_config_synonyms,
    check_remote_storage,
    parse_topic_configs,
    render_value,
)
from controller.records import ConfigRecord
from controller.requests import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigEntry,
    ConfigResource,
    ConfigResourceResult,
    ConfigSource,
    ConfigSynonym,
    DescribeConfigsResult,
)
from controller.results import MAX_RECORDS_PER_USER_OP, NO_ERROR, ApiError, ControllerResult
from controller.timeline import Timeline, TimelineDict
from controller.topic_names import shown, validate_topic_name
from quorum.errors import Errors, KafkaError
from quorum.log.message import ApiMessage

# ConfigResource.Type ids Kafka knows beyond TOPIC and BROKER; this product stores none of them.
_OTHER_TYPES = {8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}
_OPS = frozenset(AlterConfigOp)
_INVALID: Any = object()

Levels = tuple[Mapping[str, str], ...]


def _always(_: Any) -> bool:
    return True


def _java_split(value: str) -> list[str]:
    """Java's ``String.split(",")``: trailing empty strings dropped, other empty strings kept."""
    parts = value.split(",")
    if len(parts) == 1:
        return parts
    while parts and not parts[-1]:
        parts.pop()
    return parts


def _parse(definition: ConfigDef, raw: str) -> Any:
    try:
        return definition.parse(raw)
    except InvalidConfigError:
        return _INVALID


def _broker_id(name: str) -> int | None:
    """A broker resource name as a broker id; None unless it is a decimal int as Kafka writes one ("5", not "05")."""
    try:
        value = int(name)
    except ValueError:
        return None
    return value if str(value) == name and -(2**31) <= value < 2**31 else None


class ConfigControl:
    def __init__(
        self,
        timeline: Timeline,
        static_broker_configs: dict[str, str] | None = None,
        topic_exists: Callable[[str], bool] = _always,
        broker_registered: Callable[[int], bool] = _always,
        node_id: int = -1,
    ) -> None:
        self.static: dict[str, str] = dict(static_broker_configs or {})
        self.topic_exists = topic_exists
        self.broker_registered = broker_registered
        self.node_id = node_id
        # (resource type, resource name) -> sorted ((name, value), ...); a resource with no key left is removed.
        self.configs: TimelineDict[tuple[int, str], tuple[tuple[str, str], ...]] = TimelineDict(timeline)
        self._cache: dict[tuple[str, str, Any], Any] = {}  # effective values, valid while configs.version holds
        self._cache_version = -1

    # -- replay ------------------------------------------------------------------------------------------------

    def replay(self, record: ConfigRecord) -> None:
        key = (record.resource_type, record.resource_name)
        current = dict(self.configs.get(key, ()))
        if record.value is None:
            current.pop(record.name, None)
        else:
            current[record.name] = record.value
        if current:
            self.configs[key] = tuple(sorted(current.items()))
        elif key in self.configs:
            del self.configs[key]

    def delete_topic_configs(self, topic_name: str) -> None:
        """A RemoveTopicRecord was replayed: the topic's configs go with it."""
        key = (TOPIC_RESOURCE, topic_name)
        if key in self.configs:
            del self.configs[key]

    # -- IncrementalAlterConfigs -------------------------------------------------------------------------------

    def incremental_alter_configs(
        self, resources: list[AlterConfigsResource], validate_only: bool
    ) -> ControllerResult[list[ConfigResourceResult]]:
        """One result per resource, in the order resources first appear. A resource that fails writes nothing; the
        records of all that succeed form one atomic batch (none when ``validate_only``)."""
        return self._alter_resources(resources, validate_only, self._alter)

    def legacy_alter_configs(
        self, resources: list[AlterConfigsResource], validate_only: bool
    ) -> ControllerResult[list[ConfigResourceResult]]:
        """Kafka's legacy AlterConfigs (ConfigurationControlManager.legacyAlterConfigs): each resource's dynamic
        configs become exactly the request's — a key set now and not named is removed — with the checks, codes and
        records of an incremental SET of every key named (configs' ``op`` is ignored: the legacy request has none;
        a null value is refused, as the forwarding broker refuses it). Results and atomicity as
        :meth:`incremental_alter_configs`."""
        return self._alter_resources(resources, validate_only, self._replace)

    def _replace(self, r: AlterConfigsResource) -> list[ConfigRecord]:
        named = {c.name for c in r.configs}
        current = self.configs.get((r.resource_type, r.resource_name), ())
        configs = tuple(AlterableConfig(c.name, AlterConfigOp.SET, c.value) for c in r.configs) + tuple(
            AlterableConfig(name, AlterConfigOp.DELETE) for name, _ in current if name not in named
        )
        return self._alter(AlterConfigsResource(r.resource_type, r.resource_name, configs))

    def _alter_resources(
        self,
        resources: list[AlterConfigsResource],
        validate_only: bool,
        alter: Callable[[AlterConfigsResource], list[ConfigRecord]],
    ) -> ControllerResult[list[ConfigResourceResult]]:
        counts = Counter(
            (r.resource_type, r.resource_name)
            for r in resources
            if r.resource_type in (TOPIC_RESOURCE, BROKER_RESOURCE)
        )
        answered: set[tuple[int, str]] = set()
        response: list[ConfigResourceResult] = []
        records: list[ApiMessage] = []
        for r in resources:
            key = (r.resource_type, r.resource_name)
            if r.resource_type not in (TOPIC_RESOURCE, BROKER_RESOURCE, *_OTHER_TYPES):
                # ControllerApis: ConfigResource.Type.forId gives UNKNOWN; every such entry is answered.
                error = ApiError(Errors.UNSUPPORTED_VERSION, f"Unknown resource type {r.resource_type}.")
            elif key in answered:
                continue
            elif counts[key] > 1:
                error = ApiError(Errors.INVALID_REQUEST, "Duplicate resource.")
            else:
                try:
                    records.extend(alter(r))
                    error = NO_ERROR
                except KafkaError as e:
                    error = ApiError.of(e)
            answered.add(key)
            response.append(ConfigResourceResult(r.resource_type, r.resource_name, error))
        if len(records) > MAX_RECORDS_PER_USER_OP:
            # Kafka's BoundedListTooLongException fails the whole request (validate_only too) as POLICY_VIOLATION.
            excessive = ApiError(Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
            return ControllerResult(
                [], [ConfigResourceResult(r.resource_type, r.resource_name, excessive) for r in response]
            )
        return ControllerResult([] if validate_only else records, response)

    def _alter(self, r: AlterConfigsResource) -> list[ConfigRecord]:
        """The records for one resource, or a KafkaError saying why it cannot change."""
        if r.resource_type in _OTHER_TYPES:
            raise KafkaError(f"Unknown resource type {_OTHER_TYPES[r.resource_type]}", Errors.INVALID_REQUEST)
        names = Counter(c.name for c in r.configs)
        duplicates = sorted(name for name, n in names.items() if n > 1)
        if duplicates:
            raise KafkaError(f"Error due to duplicate config keys: {', '.join(duplicates)}", Errors.INVALID_REQUEST)
        nulls = [c.name for c in r.configs if c.op != AlterConfigOp.DELETE and c.value is None]
        if nulls:
            raise KafkaError(f"Null value not supported for : {', '.join(nulls)}", Errors.INVALID_REQUEST)
        for c in r.configs:
            if c.op not in _OPS:
                raise KafkaError(f"Unknown operations type {c.op} for config {c.name}", Errors.INVALID_REQUEST)
        is_broker = r.resource_type == BROKER_RESOURCE
        current = dict(self.configs.get((r.resource_type, r.resource_name), ()))
        changes: dict[str, str | None] = {}
        records: list[ConfigRecord] = []
        for c in r.configs:
            value = self._new_value(c, current.get(c.name), BROKER_CONFIGS if is_broker else TOPIC_CONFIGS)
            changes[c.name] = value
            if value != current.get(c.name) or is_broker:  # KAFKA-14136: brokers reload on every broker record
                records.append(
                    ConfigRecord(resource_type=r.resource_type, resource_name=r.resource_name, name=c.name, value=value)
                )
        if is_broker:
            self._validate_broker(r.resource_name, {n: v for n, v in changes.items() if v is not None})
        else:
            merged = {n: v for n, v in {**current, **changes}.items() if v is not None}
            self._validate_topic(r.resource_name, merged)
        return records

    @staticmethod
    def _new_value(c: AlterableConfig, current: str | None, schema: dict[str, ConfigDef]) -> str | None:
        op = AlterConfigOp(c.op)
        if op == AlterConfigOp.SET:
            return c.value
        if op == AlterConfigOp.DELETE:
            return None
        definition = schema.get(c.name)
        if definition is None or definition.type != "list":
            raise InvalidConfigError(f"Can't {op.name} to key {c.name} because its type is not LIST.")
        base = current if current is not None else render_value(definition.default)
        items = [part for part in base.split(",") if part]
        for part in _java_split(c.value or ""):  # null values were refused above
            if op == AlterConfigOp.APPEND and part not in items:
                items.append(part)
            elif op == AlterConfigOp.SUBTRACT and part in items:
                items.remove(part)
        return ",".join(items)

    def _validate_topic(self, name: str, merged: dict[str, str]) -> None:
        if not name:
            raise KafkaError("Default topic resources are not allowed.", Errors.INVALID_REQUEST)
        validate_topic_name(name)
        check_remote_storage(parse_topic_configs(merged))  # Kafka does not compare min.insync.replicas to the RF
        if not self.topic_exists(name):
            raise KafkaError(f"The topic '{shown(name)}' does not exist.", Errors.UNKNOWN_TOPIC_OR_PARTITION)

    def _validate_broker(self, name: str, updates: dict[str, str]) -> None:
        broker_id = None
        if name:
            broker_id = _broker_id(name)
            if broker_id is None:
                raise KafkaError("Unable to parse broker name as a base 10 number.", Errors.INVALID_REQUEST)
            if broker_id < 0:
                raise KafkaError("Invalid negative broker ID.", Errors.INVALID_REQUEST)
        # The forwarding broker's DynamicBrokerConfig.validateConfigs; names outside the table are custom configs,
        # which Kafka accepts.
        static = sorted(n for n in updates if n in BROKER_CONFIGS and not BROKER_CONFIGS[n].dynamic)
        if static:
            raise KafkaError(
                f"Cannot update these configs dynamically: Set({', '.join(static)})", Errors.INVALID_REQUEST
            )
        for n, raw in updates.items():
            if n in BROKER_CONFIGS:
                try:
                    BROKER_CONFIGS[n].parse(raw)
                except InvalidConfigError as e:
                    raise KafkaError(str(e), Errors.INVALID_REQUEST) from None
        if broker_id is not None and broker_id != self.node_id and not self.broker_registered(broker_id):
            raise KafkaError(f"No node with id {broker_id} found.", Errors.BROKER_ID_NOT_REGISTERED)

    # -- effective values ----------------------------------------------------------------------------------------

    def _levels(self, view: Mapping[tuple[int, str], tuple[tuple[str, str], ...]], broker: int | None) -> Levels:
        """The broker-side levels, highest precedence first: per-broker dynamic, cluster-wide dynamic, static."""
        per_broker = dict(view.get((BROKER_RESOURCE, str(broker)), ())) if broker is not None else {}
        return per_broker, dict(view.get((BROKER_RESOURCE, ""), ())), self.static

    def release(self) -> None:
        """Forget the cached effective values: this state is being replaced (QuorumController._release_state)."""
        self._cache.clear()

    def _cached(self, key: tuple[str, str, Any]) -> Any:
        if self._cache_version != self.configs.version:
            self._cache.clear()
            self._cache_version = self.configs.version
        return self._cache.get(key, _INVALID)

    def topic_config(self, topic_name: str, name: str) -> Any:
        """The parsed value of topic config ``name`` for ``topic_name`` as this node applies it (latest state)."""
        cached = self._cached(("topic", name, topic_name))
        if cached is not _INVALID:
            return cached
        if name not in TOPIC_CONFIGS:
            raise KeyError(f"Unknown topic config name: {shown(name)}")
        topic = dict(self.configs.get((TOPIC_RESOURCE, topic_name), ()))
        value, _ = _resolve_topic(name, topic, self._levels(self.configs, self.node_id))
        self._cache[("topic", name, topic_name)] = value
        return value

    def broker_config(self, name: str, broker_id: int | None = None) -> Any:
        """The parsed value of broker config ``name`` for ``broker_id`` (None: this node): per-broker dynamic ->
        cluster-wide dynamic -> static -> default. Only ``name`` itself is read, not its synonyms (log.retention.ms
        is None unless set, whatever log.retention.hours says)."""
        broker = self.node_id if broker_id is None else broker_id
        cached = self._cached(("broker", name, broker))
        if cached is not _INVALID:
            return cached
        definition = BROKER_CONFIGS.get(name)
        if definition is None:
            raise KeyError(f"Unknown broker config name: {shown(name)}")
        value, _ = _resolve_broker(definition, self._levels(self.configs, broker))
        self._cache[("broker", name, broker)] = value
        return value

    # -- DescribeConfigs -----------------------------------------------------------------------------------------

    def describe_configs(
        self,
        resources: list[ConfigResource],
        include_synonyms: bool = False,
        include_documentation: bool = False,
        committed: bool = True,
    ) -> list[DescribeConfigsResult]:
        """One result per resource, in request order. ``committed``: read only what the high watermark has passed."""
        view = self.configs.committed() if committed else self.configs
        results = []
        for resource in resources:
            try:
                entries = self._describe(resource, view, include_synonyms, include_documentation)
                results.append(DescribeConfigsResult(resource.resource_type, resource.resource_name, configs=entries))
            except KafkaError as e:
                results.append(DescribeConfigsResult(resource.resource_type, resource.resource_name, ApiError.of(e)))
        return results

    def _describe(
        self,
        resource: ConfigResource,
        view: Mapping[tuple[int, str], tuple[tuple[str, str], ...]],
        synonyms: bool,
        documentation: bool,
    ) -> tuple[ConfigEntry, ...]:
        name = resource.resource_name
        if resource.resource_type == TOPIC_RESOURCE:
            validate_topic_name(name)
            if not self.topic_exists(name):
                raise KafkaError(f"The topic '{shown(name)}' does not exist.", Errors.UNKNOWN_TOPIC_OR_PARTITION)
            topic = dict(view.get((TOPIC_RESOURCE, name), ()))
            levels = self._levels(view, self.node_id)
            entries = [_topic_entry(n, topic, levels) for n in sorted(TOPIC_CONFIGS)]
        elif resource.resource_type == BROKER_RESOURCE:
            if not name:  # as Kafka: only what is set cluster-wide
                cluster = dict(view.get((BROKER_RESOURCE, ""), ()))
                levels = ({}, cluster, self.static)
                entries = [_broker_entry(n, levels, cluster_default=True) for n in sorted(cluster)]
            else:
                broker_id = _broker_id(name)
                if broker_id is None:
                    raise KafkaError(f"Broker id must be an integer, but it is: {shown(name)}", Errors.INVALID_REQUEST)
                if broker_id != self.node_id and not self.broker_registered(broker_id):
                    raise KafkaError(f"No node with id {broker_id} found.", Errors.BROKER_ID_NOT_REGISTERED)
                levels = self._levels(view, broker_id)
                custom = {n for level in levels[:2] for n in level if n not in BROKER_CONFIGS}
                entries = [_broker_entry(n, levels) for n in sorted(BROKER_CONFIGS.keys() | custom)]
        else:
            kind = _OTHER_TYPES.get(resource.resource_type, "UNKNOWN")
            raise KafkaError(f"Unsupported resource type: {kind}", Errors.INVALID_REQUEST)
        if resource.keys:  # None or empty: every config
            entries = [e for e in entries if e.name in resource.keys]
        return tuple(
            ConfigEntry(
                e.name,
                e.value,
                e.source,
                e.read_only,
                e.is_sensitive,
                e.synonyms if synonyms else (),
                e.config_type,
                CONFIG_DOCS.get(e.name) if documentation else None,
            )
            for e in entries
        )


# -- resolution ----------------------------------------------------------------------------------------------------

_BROKER_SOURCES = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)


def _resolve_topic(name: str, topic: Mapping[str, str], levels: Levels) -> tuple[Any, int]:
    """(parsed value, source) of a topic config; a value that does not parse is passed over, as brokers ignore it."""
    if name in topic and (value := _parse(TOPIC_CONFIGS[name], topic[name])) is not _INVALID:
        return value, ConfigSource.DYNAMIC_TOPIC_CONFIG
    for level, source in zip(levels, _BROKER_SOURCES, strict=True):
        for synonym, factor in TOPIC_CONFIG_SYNONYMS.get(name, ()):
            if synonym in level:
                value = _parse(BROKER_CONFIGS[synonym], level[synonym])
                if value is not _INVALID and value is not None:
                    return (value * factor if factor != 1 else value), source
    return TOPIC_CONFIGS[name].default, ConfigSource.DEFAULT_CONFIG


def _resolve_broker(definition: ConfigDef, levels: Levels) -> tuple[Any, int]:
    for level, source in zip(levels, _BROKER_SOURCES, strict=True):
        if definition.name in level and (value := _parse(definition, level[definition.name])) is not _INVALID:
            return value, source
    return definition.default, ConfigSource.DEFAULT_CONFIG


def _render(value: Any) -> str | None:
    return None if value is None else render_value(value)


def _level_synonyms(names: tuple[str, ...], levels: Levels) -> list[ConfigSynonym]:
    """Kafka's ConfigHelper.configSynonyms: level by level (per-broker, cluster, static, default), each name set
    there, in precedence order."""
    found = [
        ConfigSynonym(n, level[n], source)
        for level, source in zip(levels, _BROKER_SOURCES, strict=True)
        for n in names
        if n in level
    ]
    found.extend(
        ConfigSynonym(n, render_value(BROKER_CONFIGS[n].default), ConfigSource.DEFAULT_CONFIG)
        for n in names
        if n in BROKER_CONFIGS and BROKER_CONFIGS[n].default is not None
    )
    return found


def _topic_entry(name: str, topic: Mapping[str, str], levels: Levels) -> ConfigEntry:
    value, source = _resolve_topic(name, topic, levels)
    synonyms = _level_synonyms(tuple(s for s, _ in TOPIC_CONFIG_SYNONYMS.get(name, ())), levels)
    if name in topic:
        synonyms.insert(0, ConfigSynonym(name, topic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
    definition = TOPIC_CONFIGS[name]
    return ConfigEntry(name, _render(value), source, False, False, tuple(synonyms), definition.type)


def _broker_entry(name: str, levels: Levels, cluster_default: bool = False) -> ConfigEntry:
    definition = BROKER_CONFIGS.get(name)
    synonyms = _level_synonyms(broker_config_synonyms(name), levels)
    while synonyms and synonyms[0].name != name:  # Kafka drops the higher-precedence synonyms of other names
        synonyms.pop(0)
    if cluster_default:
        synonyms = [s for s in synonyms if s.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    if definition is None:  # a custom config: unknown type, so treated as sensitive, as Kafka does
        hidden = tuple(ConfigSynonym(s.name, None, s.source) for s in synonyms)
        return ConfigEntry(name, None, source, True, True, hidden, "unknown")
    value, _ = _resolve_broker(definition, levels)
    return ConfigEntry(name, _render(value), source, not definition.dynamic, False, tuple(synonyms), definition.type)
