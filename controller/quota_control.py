"""QuotaControl: client quotas stored in the metadata log (Kafka's ClientQuotaControlManager and ClientQuotasImage).

- State: each entity's quota values, in a timeline map like the other managers', so the active controller's
  uncommitted quotas are dropped with the rest on a lost leadership. An entity is a sorted tuple of
  ``(entity type, name)`` pairs (``user``, ``client-id``, ``ip``); a name of ``None`` is the default entity.
  Every node replays the same ClientQuotaRecords; snapshots carry them after the configs (Kafka's
  MetadataImage.write: configs, client quotas, producer ids, ACLs).
- :meth:`QuotaControl.alter_client_quotas`: AlterClientQuotas with Kafka's validation, codes and messages;
  :meth:`QuotaControl.describe_client_quotas`: DescribeClientQuotas' filter (EXACT / DEFAULT / SPECIFIED, strict).
  Like every manager here they read state and return records plus a response; :meth:`replay` alone changes state.
- :meth:`QuotaControl.lookup` gives the enforcement side (``controller/mutation_quota.py``) the committed values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import IntEnum
from ipaddress import ip_address

import structlog

from controller.records import ClientQuotaRecord, EntityData
from controller.results import NO_ERROR, ApiError, ControllerResult
from controller.timeline import Timeline, TimelineDict
from quorum.errors import Errors
from quorum.log.message import ApiMessage

log = structlog.get_logger("controller")

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"

# Kafka's QuotaConfig keys and their ConfigDef types: what a user / client-id entity, or an ip, may set.
CLIENT_KEYS: dict[str, str] = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    CONTROLLER_MUTATION_RATE: "DOUBLE",
}
IP_KEYS: dict[str, str] = {"connection_creation_rate": "INT"}
_INTEGRAL_MAX = {"SHORT": (2**15 - 1, "a SHORT"), "INT": (2**31 - 1, "an INT"), "LONG": (2**63 - 1, "a LONG")}

Entity = tuple[tuple[str, str | None], ...]  # sorted (type, name) pairs; name None = the default entity


class MatchType(IntEnum):
    """DescribeClientQuotas' component match types (Kafka's ClientQuotaFilterComponent)."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


def entity_of(pairs: Mapping[str, str | None] | list[tuple[str, str | None]]) -> Entity:
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple(sorted(items, key=lambda p: p[0]))


def entity_text(entity: Entity) -> str:
    """``user=alice,client-id=<default>``, for logs and messages."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


@dataclass(frozen=True)
class QuotaOp:
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True)
class QuotaAlteration:
    entity: list[tuple[str, str | None]]  # as the request gave it (duplicates possible: refused)
    ops: list[QuotaOp]


@dataclass(frozen=True)
class AlterQuotaResult:
    entity: list[tuple[str, str | None]]
    error: ApiError = NO_ERROR


@dataclass(frozen=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


@dataclass(frozen=True)
class DescribeQuotasResult:
    error: ApiError = NO_ERROR
    entries: tuple[tuple[Entity, tuple[tuple[str, float], ...]], ...] = ()


def java_entity(entity: Entity) -> str:
    """An entity as Kafka's ClientQuotaEntity.toString writes it: ``ClientQuotaEntity(entries={user=a})``."""
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={'null' if n is None else n}" for t, n in entity) + "})"


def validate_entity(pairs: list[tuple[str, str | None]]) -> ApiError | None:
    """Kafka's ClientQuotaControlManager.validateEntity."""
    if not pairs:
        return ApiError(Errors.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: set[str] = set()
    for entity_type, name in pairs:
        if entity_type in seen:
            return ApiError(
                Errors.INVALID_REQUEST, f"Invalid client quota entity, duplicate entity entry {entity_type}"
            )
        seen.add(entity_type)
        if entity_type not in (USER, CLIENT_ID, IP):
            return ApiError(Errors.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}")
        if name is not None and not name:
            return ApiError(Errors.INVALID_REQUEST, f"Empty {entity_type} not supported")
        if entity_type == IP and name is not None:
            try:
                ip_address(name)
            except ValueError:
                return ApiError(Errors.INVALID_REQUEST, f"{name} is not a valid IP or resolvable host.")
    if IP in seen and len(seen) > 1:
        return ApiError(
            Errors.INVALID_REQUEST,
            "Invalid quota entity combination, IP entity should not be combined with User or ClientId",
        )
    return None


def validate_key_value(keys: Mapping[str, str], key: str, value: float) -> ApiError | None:
    """Kafka's ClientQuotaControlManager.validateQuotaKeyValue."""
    kind = keys.get(key)
    if kind is None:
        return ApiError(Errors.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not value > 0.0:  # NaN too
        return ApiError(Errors.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if kind == "DOUBLE":
        if value == float("inf"):
            return ApiError(Errors.INVALID_REQUEST, f"Quota {key} must be finite")  # ours: Kafka takes Infinity
        return None
    limit, name = _INTEGRAL_MAX[kind]
    if value > limit:
        return ApiError(Errors.INVALID_REQUEST, f"Proposed value for {key} is too large for {name}.")
    if abs(value % 1.0) > 1e-6:
        return ApiError(Errors.INVALID_REQUEST, f"{key} cannot be a fractional value.")
    return None


def quota_records(entity: Entity, values: tuple[tuple[str, float], ...]) -> Iterator[ClientQuotaRecord]:
    """An entity's values as records (a snapshot's, Kafka's ClientQuotaImage.write)."""
    for key, value in values:
        yield ClientQuotaRecord(
            entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity], key=key, value=value, remove=False
        )


class QuotaControl:
    def __init__(self, timeline: Timeline) -> None:
        self.quotas: TimelineDict[Entity, tuple[tuple[str, float], ...]] = TimelineDict(timeline)

    # -- replay --------------------------------------------------------------------------------------------------

    def replay(self, record: ApiMessage) -> None:
        if not isinstance(record, ClientQuotaRecord):
            return
        entity = entity_of([(e.entity_type, e.entity_name) for e in record.entity])
        values = dict(self.quotas.get(entity, ()))
        if record.remove:
            values.pop(record.key, None)
        else:
            values[record.key] = record.value
        if values:
            self.quotas[entity] = tuple(values.items())
        elif entity in self.quotas:
            del self.quotas[entity]
        log.debug("quota_replayed", entity=entity_text(entity), key=record.key, remove=record.remove)

    # -- AlterClientQuotas ---------------------------------------------------------------------------------------

    def alter_client_quotas(self, alterations: list[QuotaAlteration]) -> ControllerResult[list[AlterQuotaResult]]:
        """One result per entry, in order; an entry fails whole (no record) at its first bad entity or op, as
        Kafka's ClientQuotaControlManager.alterClientQuotas: a key twice in an entry, then an entity an earlier entry
        named, then the entity's and each op's checks. A value equal to the current one and the removal of an absent
        key write nothing."""
        results: list[AlterQuotaResult] = []
        records: list[ApiMessage] = []
        seen_entities: set[Entity] = set()
        for alteration in alterations:
            entity = entity_of(alteration.entity)
            keys = [op.key for op in alteration.ops]
            duplicated = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
            error: ApiError | None = None
            if duplicated is not None:
                error = ApiError(
                    Errors.INVALID_REQUEST,
                    f"Duplicate quota key {duplicated} not updating quota for this entity {java_entity(entity)}",
                )
            elif entity in seen_entities:
                error = ApiError(Errors.INVALID_REQUEST, f"Ignoring duplicate entity {java_entity(entity)}")
            else:
                error = validate_entity(alteration.entity)
            seen_entities.add(entity)
            mine: list[ApiMessage] = []
            if error is None:
                allowed = IP_KEYS if any(t == IP for t, _ in entity) else CLIENT_KEYS
                current = dict(self.quotas.get(entity, ()))
                for op in alteration.ops:
                    if op.remove:
                        if op.key in current:
                            mine.append(self._record(entity, op.key, 0.0, remove=True))
                        continue
                    error = validate_key_value(allowed, op.key, op.value)
                    if error is not None:
                        break
                    if current.get(op.key) != op.value:
                        mine.append(self._record(entity, op.key, op.value, remove=False))
            if error is None:
                records.extend(mine)
            results.append(AlterQuotaResult(alteration.entity, error or NO_ERROR))
        return ControllerResult(records, results)

    @staticmethod
    def _record(entity: Entity, key: str, value: float, *, remove: bool) -> ClientQuotaRecord:
        data = [EntityData(entity_type=t, entity_name=n) for t, n in entity]
        return ClientQuotaRecord(entity=data, key=key, value=value, remove=remove)

    # -- DescribeClientQuotas ------------------------------------------------------------------------------------

    def describe_client_quotas(
        self, components: list[FilterComponent], strict: bool, committed: bool = True
    ) -> DescribeQuotasResult:
        """Kafka's ClientQuotasImage.describe: the entities matching every component (strict: and nothing else),
        sorted by entity."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for c in components:
            if not c.entity_type:
                return _invalid("Invalid empty entity type.")
            if c.entity_type in exact or c.entity_type in specified:
                return _invalid(f"Entity type {c.entity_type} cannot appear more than once in the filter.")
            if c.entity_type not in (USER, CLIENT_ID, IP):
                return DescribeQuotasResult(
                    ApiError(Errors.UNSUPPORTED_VERSION, f"Unsupported entity type {c.entity_type}")
                )
            if c.match_type == MatchType.EXACT:
                if c.match is None:
                    return _invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[c.entity_type] = c.match
            elif c.match_type == MatchType.DEFAULT:
                if c.match is not None:
                    return _invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[c.entity_type] = None
            elif c.match_type == MatchType.SPECIFIED:
                if c.match is not None:
                    return _invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                specified.add(c.entity_type)
            else:
                return DescribeQuotasResult(ApiError(Errors.UNSUPPORTED_VERSION, f"Unknown match type {c.match_type}"))
        if (IP in exact or IP in specified) and (len(exact) + len(specified) > 1):
            return _invalid(
                "Invalid entity filter component combination, IP filter component should not be used with "
                "user or clientId filter component."
            )
        view = self.quotas.committed() if committed else dict(self.quotas.items())
        entries = []
        for entity, values in view.items():
            names = dict(entity)
            if strict and len(names) != len(exact) + len(specified):
                continue
            if all(t in names and names[t] == m for t, m in exact.items()) and all(t in names for t in specified):
                entries.append((entity, values))
        entries.sort(key=lambda e: [(t, n is not None, n or "") for t, n in e[0]])
        return DescribeQuotasResult(NO_ERROR, tuple(entries))

    # -- enforcement ---------------------------------------------------------------------------------------------

    def lookup(self, entity: Entity, key: str) -> float | None:
        """The committed value of ``key`` for exactly this entity, or None."""
        values = self.quotas.committed().get(entity)
        if values is None:
            return None
        return dict(values).get(key)


def _invalid(message: str) -> DescribeQuotasResult:
    return DescribeQuotasResult(ApiError(Errors.INVALID_REQUEST, message))
