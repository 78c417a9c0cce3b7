"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), v0-1 (KIP-546): answered by the gRPC service's calls
of the same names (the same rules, codes and messages per entry; DESCRIBE_CONFIGS, resp. ALTER_CONFIGS, on the
CLUSTER when authorization is on). DescribeClientQuotas' errors are the request's, with no entries (null), as
Kafka answers them; AlterClientQuotas has no request-level error field, so a request-level refusal
(NOT_CONTROLLER, CLUSTER_AUTHORIZATION_FAILED) is every entry's error, as Kafka's error response gives it. Two
APIs in one module: they are one feature, and each message is small."""

from __future__ import annotations

from collections.abc import Iterable

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import BOOL, FLOAT64, INT8, INT16, INT32, STRING, Field, Message, Struct, array

_Entity = Struct("EntityData", [Field("EntityType", STRING), Field("EntityName", STRING, nullable="0+")])

_Component = Struct(
    "ComponentData",
    [Field("EntityType", STRING), Field("MatchType", INT8), Field("Match", STRING, nullable="0+")],
)
DescribeClientQuotasRequest = Message(
    "DescribeClientQuotasRequest",
    [Field("Components", array(_Component)), Field("Strict", BOOL)],
    api_key=48,
    versions="0-1",
    flexible="1+",
)
_Value = Struct("ValueData", [Field("Key", STRING), Field("Value", FLOAT64)])
_DescribedEntry = Struct("EntryData", [Field("Entity", array(_Entity)), Field("Values", array(_Value))])
DescribeClientQuotasResponse = Message(
    "DescribeClientQuotasResponse",
    [
        Field("ThrottleTimeMs", INT32),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("Entries", array(_DescribedEntry), nullable="0+", default=None),
    ],
    api_key=48,
    versions="0-1",
    flexible="1+",
)

_Op = Struct("OpData", [Field("Key", STRING), Field("Value", FLOAT64), Field("Remove", BOOL)])
_AlterEntry = Struct("EntryData", [Field("Entity", array(_Entity)), Field("Ops", array(_Op))])
AlterClientQuotasRequest = Message(
    "AlterClientQuotasRequest",
    [Field("Entries", array(_AlterEntry)), Field("ValidateOnly", BOOL)],
    api_key=49,
    versions="0-1",
    flexible="1+",
)
_AlteredEntry = Struct(
    "EntryData",
    [
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("Entity", array(_Entity)),
    ],
)
AlterClientQuotasResponse = Message(
    "AlterClientQuotasResponse",
    [Field("ThrottleTimeMs", INT32), Field("Entries", array(_AlteredEntry))],
    api_key=49,
    versions="0-1",
    flexible="1+",
)


def _entity(pairs: Iterable[object]) -> list[object]:
    return [
        _Entity.cls(
            entity_type=e.entity_type,  # type: ignore[attr-defined]
            entity_name=e.entity_name if _named(e) else None,  # type: ignore[attr-defined]
        )
        for e in pairs
    ]


def _named(e: object) -> bool:
    """A gRPC entity's name is optional (absent: the default entity); a Kafka one's is a nullable string."""
    return e.HasField("entity_name") if isinstance(e, pb.ClientQuotaEntityData) else e.entity_name is not None  # type: ignore[attr-defined]


def _entity_pb(pairs: Iterable[object], out: object) -> None:
    for e in pairs:
        item = out.add(entity_type=e.entity_type)  # type: ignore[attr-defined]
        if e.entity_name is not None:  # type: ignore[attr-defined]
            item.entity_name = e.entity_name  # type: ignore[attr-defined]


async def describe(ctx: RequestContext, request: object, version: int) -> object:
    grpc_request = pb.DescribeClientQuotasRequest(strict=request.strict)  # type: ignore[attr-defined]
    for c in request.components:  # type: ignore[attr-defined]
        component = grpc_request.components.add(entity_type=c.entity_type, match_type=c.match_type)
        if c.match is not None:
            component.match = c.match
    answer = await ctx.service.DescribeClientQuotas(grpc_request, ctx.call)
    if answer.error_code:
        message = answer.error_message or None
        return DescribeClientQuotasResponse.cls(error_code=answer.error_code, error_message=message)
    return DescribeClientQuotasResponse.cls(
        entries=[
            _DescribedEntry.cls(
                entity=_entity(e.entity), values=[_Value.cls(key=v.key, value=v.value) for v in e.values]
            )
            for e in answer.entries
        ]
    )


async def alter(ctx: RequestContext, request: object, version: int) -> object:
    entries = request.entries  # type: ignore[attr-defined]
    grpc_request = pb.AlterClientQuotasRequest(validate_only=request.validate_only)  # type: ignore[attr-defined]
    for e in entries:
        entry = grpc_request.entries.add()
        _entity_pb(e.entity, entry.entity)
        for op in e.ops:
            entry.ops.add(key=op.key, value=op.value, remove=op.remove)
    answer = await ctx.service.AlterClientQuotas(grpc_request, ctx.call)
    if answer.error_code:  # the whole request refused: each entry says so
        message = answer.error_message or None
        return AlterClientQuotasResponse.cls(
            entries=[
                _AlteredEntry.cls(error_code=answer.error_code, error_message=message, entity=_entity(e.entity))
                for e in entries
            ]
        )
    return AlterClientQuotasResponse.cls(
        entries=[
            _AlteredEntry.cls(error_code=e.error_code, error_message=e.error_message or None, entity=_entity(e.entity))
            for e in answer.entries
        ]
    )


register(Api(48, "DescribeClientQuotas", DescribeClientQuotasRequest, DescribeClientQuotasResponse, describe))
register(Api(49, "AlterClientQuotas", AlterClientQuotasRequest, AlterClientQuotasResponse, alter, mutates=True))
