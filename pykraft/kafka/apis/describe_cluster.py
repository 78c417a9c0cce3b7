"""DescribeCluster (key 60), v0-1. EndpointType 1 (brokers, the default): the registered brokers with their first
listener, from the gRPC service's DescribeCluster (the same answer, DESCRIBE on the CLUSTER when authorization is
on; NOT_CONTROLLER from a standby). EndpointType 2 (controllers, KIP-919): every controller's Kafka listener and the
active controller's id, which any controller answers, as Kafka's do."""

from __future__ import annotations

from controller.authorizer import AclOperation as Op
from pykraft.api import controller_pb2 as pb
from pykraft.kafka.registry import Api, RequestContext, register
from quorum.errors import Errors, KafkaError
from quorum.log.message import BOOL, INT8, INT16, INT32, STRING, Field, Message, Struct, array

BROKERS, CONTROLLERS = 1, 2

DescribeClusterRequest = Message(
    "DescribeClusterRequest",
    [Field("IncludeClusterAuthorizedOperations", BOOL), Field("EndpointType", INT8, "1+", default=BROKERS)],
    api_key=60,
    versions="0-1",
    flexible="0+",
)
_Broker = Struct(
    "DescribeClusterBroker",
    [
        Field("BrokerId", INT32),
        Field("Host", STRING),
        Field("Port", INT32),
        Field("Rack", STRING, nullable="0+", default=None),
    ],
)
DescribeClusterResponse = Message(
    "DescribeClusterResponse",
    [
        Field("ThrottleTimeMs", INT32),
        Field("ErrorCode", INT16),
        Field("ErrorMessage", STRING, nullable="0+", default=None),
        Field("EndpointType", INT8, "1+", default=BROKERS),
        Field("ClusterId", STRING),
        Field("ControllerId", INT32, default=-1),
        Field("Brokers", array(_Broker)),
        Field("ClusterAuthorizedOperations", INT32, default=-(2**31)),
    ],
    api_key=60,
    versions="0-1",
    flexible="0+",
)


async def handle(ctx: RequestContext, request: object, version: int) -> object:
    endpoint_type = request.endpoint_type  # type: ignore[attr-defined]
    out = DescribeClusterResponse.cls(endpoint_type=endpoint_type, cluster_id=ctx.info.cluster_id)
    if endpoint_type == CONTROLLERS:
        authorization = ctx.service.authorization
        if authorization.enabled:
            try:
                (await authorization.caller(ctx.call)).require_cluster(Op.DESCRIBE)
            except KafkaError as e:
                out.error_code, out.error_message = int(e.code), str(e)
                return out
        controller = ctx.controller
        leader = controller.node_id if controller.active else controller.leader.leader_id
        out.controller_id = leader if leader in ctx.info.listeners else -1
        out.brokers = [
            _Broker.cls(broker_id=node_id, host=host, port=port)
            for node_id, (host, port) in sorted(ctx.info.listeners.items())
        ]
        return out
    if endpoint_type != BROKERS:
        out.error_code = Errors.INVALID_REQUEST
        out.error_message = f"EndpointType {endpoint_type} is neither 1 (brokers) nor 2 (controllers)"
        return out
    answer = await ctx.service.DescribeCluster(pb.DescribeClusterRequest(), ctx.call)
    if answer.error_code:
        out.error_code, out.error_message = answer.error_code, answer.error_message or None
        return out
    out.controller_id = answer.controller_id
    out.brokers = [
        _Broker.cls(
            broker_id=b.broker_id,
            host=b.listeners[0].host if b.listeners else "",
            port=b.listeners[0].port if b.listeners else -1,
            rack=b.rack or None,
        )
        for b in answer.brokers
    ]
    return out


register(Api(60, "DescribeCluster", DescribeClusterRequest, DescribeClusterResponse, handle))
