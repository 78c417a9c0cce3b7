"""DescribeConfigs (key 32), v0-4: topic and broker configs, with synonyms (v1+) and documentation (v3+) when
asked; answered by the gRPC service's DescribeConfigs (the same values, sources, types, authorization). v0 has no
sources: ``IsDefault`` says whether the value is the default."""

from __future__ import annotations

from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.log.message import BOOL, INT8, INT16, INT32, STRING, Field, Message, Struct, array

DEFAULT_CONFIG = 5  # Kafka's ConfigSource.DEFAULT_CONFIG

_Resource = Struct(
    "DescribeConfigsResource",
    [
        Field("ResourceType", INT8),
        Field("ResourceName", STRING),
        Field("ConfigurationKeys", array(STRING), nullable="0+"),
    ],
)
DescribeConfigsRequest = Message(
    "DescribeConfigsRequest",
    [
        Field("Resources", array(_Resource)),
        Field("IncludeSynonyms", BOOL, "1+"),
        Field("IncludeDocumentation", BOOL, "3+"),
    ],
    api_key=32,
    versions="0-4",
    flexible="4+",
)
_Synonym = Struct(
    "DescribeConfigsSynonym",
    [Field("Name", STRING, "1+"), Field("Value", STRING, "1+", nullable="0+"), Field("Source", INT8, "1+")],
)
_Config = Struct(
    "DescribeConfigsResourceResult",
    [
        Field("Name", STRING),
        Field("Value", STRING, nullable="0+"),
        Field("ReadOnly", BOOL),
        Field("IsDefault", BOOL, "0", ignorable=True),
        Field("ConfigSource", INT8, "1+", default=-1, ignorable=True),
        Field("IsSensitive", BOOL),
        Field("Synonyms", array(_Synonym), "1+", ignorable=True),
        Field("ConfigType", INT8, "3+", default=0, ignorable=True),
        Field("Documentation", STRING, "3+", nullable="0+", ignorable=True),
    ],
)
_Result = Struct(
    "DescribeConfigsResult",
    [
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("ResourceType", INT8),
        Field("ResourceName", STRING),
        Field("Configs", array(_Config)),
    ],
)
DescribeConfigsResponse = Message(
    "DescribeConfigsResponse",
    [Field("ThrottleTimeMs", INT32), Field("Results", array(_Result))],
    api_key=32,
    versions="0-4",
    flexible="4+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    req = request
    grpc_request = pb.DescribeConfigsRequest(
        include_synonyms=req.include_synonyms,  # type: ignore[attr-defined]
        include_documentation=req.include_documentation,  # type: ignore[attr-defined]
    )
    for r in req.resources:  # type: ignore[attr-defined]
        resource = grpc_request.resources.add(resource_type=r.resource_type, resource_name=r.resource_name)
        if r.configuration_keys is not None:
            resource.configuration_keys.keys.extend(r.configuration_keys)
    answer = await ctx.service.DescribeConfigs(grpc_request, ctx.call)
    if answer.error_code:
        return DescribeConfigsResponse.cls(
            results=[
                _Result.cls(
                    error_code=answer.error_code,
                    error_message=answer.error_message or None,
                    resource_type=r.resource_type,
                    resource_name=r.resource_name,
                )
                for r in req.resources  # type: ignore[attr-defined]
            ]
        )
    return DescribeConfigsResponse.cls(
        results=[
            _Result.cls(
                error_code=r.error_code,
                error_message=r.error_message or None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[_config(c) for c in r.configs],
            )
            for r in answer.results
        ]
    )


def _config(c: pb.DescribeConfigsResponse.DescribeConfigsResourceResult) -> object:
    return _Config.cls(
        name=c.name,
        value=c.value if c.HasField("value") else None,
        read_only=c.read_only,
        is_default=c.config_source == DEFAULT_CONFIG,
        config_source=c.config_source,
        is_sensitive=c.is_sensitive,
        synonyms=[
            _Synonym.cls(name=s.name, value=s.value if s.HasField("value") else None, source=s.source)
            for s in c.synonyms
        ],
        config_type=c.config_type,
        documentation=c.documentation if c.HasField("documentation") else None,
    )


register(Api(32, "DescribeConfigs", DescribeConfigsRequest, DescribeConfigsResponse, handle))
