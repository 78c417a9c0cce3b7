"""What each part of :class:`pykraft.service.ControllerService` relies on from the whole: the controller, ``_serve``
(runs a request: NOT_CONTROLLER hints, the request log line, error mapping) and ``_caller`` (the principal and host,
authorized). The parts (lifecycle, reassignment, ACLs, quotas) are mixins; ControllerService provides these."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

if TYPE_CHECKING:
    from controller.quorum_controller import QuorumController
    from pykraft.authorization import Caller

R = TypeVar("R")


class ServicerPart:
    controller: QuorumController

    if TYPE_CHECKING:

        async def _serve(
            self,
            name: str,
            response_type: type[R],
            call: Callable[[], Awaitable[R]],
            summarize: Callable[[R], dict[str, Any]] | None = None,
            **fields: Any,
        ) -> R: ...

        async def _caller(
            self, context: grpc.aio.ServicerContext, *, read: bool = False, controller_only: bool = True
        ) -> Caller: ...
