"""ApiVersions (key 18), v0-3: the APIs and versions this listener answers.

A request at a version we do not know is answered by the listener at v0 with UNSUPPORTED_VERSION and these ranges
(KIP-511), so the client retries at a version both sides have.
"""

from __future__ import annotations

from pykraft.kafka.registry import APIS, Api, RequestContext, register
from quorum.log.message import INT16, INT32, INT64, STRING, Field, Message, Struct, array

ApiVersionsRequest = Message(
    "ApiVersionsRequest",
    [
        Field("ClientSoftwareName", STRING, "3+"),
        Field("ClientSoftwareVersion", STRING, "3+"),
    ],
    api_key=18,
    versions="0-3",
    flexible="3+",
)

_ApiVersion = Struct("ApiVersion", [Field("ApiKey", INT16), Field("MinVersion", INT16), Field("MaxVersion", INT16)])
_Feature = Struct(
    "SupportedFeatureKey", [Field("Name", STRING), Field("MinVersion", INT16), Field("MaxVersion", INT16)]
)
_Finalized = Struct(
    "FinalizedFeatureKey", [Field("Name", STRING), Field("MaxVersionLevel", INT16), Field("MinVersionLevel", INT16)]
)

ApiVersionsResponse = Message(
    "ApiVersionsResponse",
    [
        Field("ErrorCode", INT16),
        Field("ApiKeys", array(_ApiVersion)),
        Field("ThrottleTimeMs", INT32, "1+", ignorable=True),
        Field("SupportedFeatures", array(_Feature), "3+", tag=0, ignorable=True),
        Field("FinalizedFeaturesEpoch", INT64, "3+", tag=1, default=-1, ignorable=True),
        Field("FinalizedFeatures", array(_Finalized), "3+", tag=2, ignorable=True),
    ],
    api_key=18,
    versions="0-3",
    flexible="3+",
)


def supported_versions(error_code: int = 0) -> object:
    """Our answer: every registered API's range, by api key."""
    return ApiVersionsResponse.cls(
        error_code=error_code,
        api_keys=[
            _ApiVersion.cls(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
            for a in sorted(APIS.values(), key=lambda a: a.key)
        ],
    )


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    return supported_versions()


register(Api(18, "ApiVersions", ApiVersionsRequest, ApiVersionsResponse, handle))
