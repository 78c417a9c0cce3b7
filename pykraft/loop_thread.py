"""A private event loop in its own thread, for work whose timing must not depend on the main loop's.

A broker's main loop replays metadata: loading a snapshot of a million partitions holds it for seconds. Kafka's
broker heartbeats from its own thread (BrokerLifecycleManager's event queue), so metadata work never delays a
heartbeat past ``broker.session.timeout.ms``; ours run here for the same reason. A thread waiting on a socket gets
the GIL back within the interpreter's switch interval (5 ms) however busy the main thread is, where a task on the
main loop waits for whatever callback is running to end. grpc.aio serves one event loop per process: gRPC calls made
here go over blocking channels (:class:`~pykraft.client.AdminClient`'s ``blocking_transport``).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        # The caller's context (structlog's bound fields: the node's id) goes with every task run here.
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self.loop.run_forever,), name=name, daemon=True)
        self._thread.start()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this thread's loop; await it from another loop (cancelling this cancels it there)."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on this thread's loop and wait for it, blocking (from code without a running loop)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def close(self) -> None:
        """Stop the loop once what is scheduled on it has run, and wait for the thread to end."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, 5)
        if not self._thread.is_alive():
            self.loop.close()
