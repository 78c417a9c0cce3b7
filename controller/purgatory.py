"""The purgatory (Kafka's DeferredEventQueue): responses that wait for the high watermark to pass an offset."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any


class Purgatory:
    def __init__(self) -> None:
        self._waiting: deque[tuple[int, asyncio.Future[Any], Callable[[], Any]]] = deque()

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def highest_pending_offset(self) -> int | None:
        return self._waiting[-1][0] if self._waiting else None

    def add(self, offset: int, respond: Callable[[], Any]) -> asyncio.Future[Any]:
        """A future completed with ``respond()`` once ``offset`` is committed. Offsets never go backwards."""
        if self._waiting and offset < self._waiting[-1][0]:
            raise ValueError(f"purgatory offset {offset} is below {self._waiting[-1][0]}")
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting.append((offset, fut, respond))
        return fut

    def complete_up_to(self, committed_offset: int) -> None:
        while self._waiting and self._waiting[0][0] <= committed_offset:
            _, fut, respond = self._waiting.popleft()
            if fut.done():
                continue
            try:
                fut.set_result(respond())
            except Exception as e:
                fut.set_exception(e)

    def fail_all(self, error: BaseException) -> None:
        while self._waiting:
            _, fut, _ = self._waiting.popleft()
            if not fut.done():
                fut.set_exception(error)
