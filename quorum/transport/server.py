"""The gRPC server every listener uses (a node's voter and external ports, a broker's listener): SERVER_OPTIONS'
limits, and requests that are not the message their method takes refused with INVALID_ARGUMENT.

Left to gRPC, such a request (garbage, or a mutated message: the fuzz tests send both) fails in gRPC's own decoding
before the handler: the caller hears UNKNOWN ("Unexpected DecodeError"), and the node logs a full traceback at ERROR
through the standard library for every one — a flood of garbage became a flood of tracebacks. Here the handlers of
unary-request methods take the raw bytes and decode them themselves. Streaming requests (the peer stream) decode in
their own reader, which ends the stream on bytes that are no message (quorum/transport/peer.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import structlog
from google.protobuf import descriptor_pool
from google.protobuf.message import DecodeError, Message
from google.protobuf.message_factory import GetMessageClass

from quorum.transport.limits import SERVER_OPTIONS

log = structlog.get_logger("quorum.transport")


def new_server() -> grpc.aio.Server:
    return grpc.aio.server(options=SERVER_OPTIONS, interceptors=[DecodeGuard()])


class DecodeGuard(grpc.aio.ServerInterceptor):
    """Decodes unary requests itself: one that is not its method's message is refused with INVALID_ARGUMENT."""

    def __init__(self) -> None:
        self.refused = 0
        # method -> (its handler, the handler wrapped): wrapped once, not per call (that cost ~45 us a call here)
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        method = details.method
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = self._wrap(handler, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        decode = handler.request_deserializer

        def request(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            """The decoded request, or None with the call's status set. Not context.abort(): in grpcio 1.78 an
            aborted call keeps its HTTP/2 stream counted as open, and MAX_STREAMS_PER_CONNECTION of them would leave
            the connection refusing every new call."""
            try:
                return decode(raw)
            except DecodeError as e:
                self.refused += 1
                log.debug("request_undecodable", method=method, peer=context.peer(), bytes=len(raw))
                context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
                context.set_details(f"the request is not a valid message: {e}")
                return None

        if handler.unary_unary is not None:
            behaviour = handler.unary_unary
            empty = _response_class(method)

            async def unary_unary(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
                decoded = request(raw, context)
                if decoded is None:
                    return empty()  # not sent: the status is an error
                return await behaviour(decoded, context)

            return grpc.unary_unary_rpc_method_handler(unary_unary, response_serializer=handler.response_serializer)
        streaming = handler.unary_stream

        async def unary_stream(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            decoded = request(raw, context)
            if decoded is None:
                return
            result = streaming(decoded, context)
            if hasattr(result, "__aiter__"):
                async for item in result:
                    yield item
            else:  # a handler that writes through context.write
                await result

        return grpc.unary_stream_rpc_method_handler(unary_stream, response_serializer=handler.response_serializer)


def _response_class(method: str) -> type[Message]:
    """The response message class of ``/package.Service/Method`` (its module is loaded: it is being served)."""
    service, name = method.strip("/").split("/")
    output = descriptor_pool.Default().FindServiceByName(service).FindMethodByName(name).output_type
    return GetMessageClass(output)
