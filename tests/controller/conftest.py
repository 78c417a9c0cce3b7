from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from ctl_helpers import SharedLog


@pytest.fixture
async def log() -> AsyncIterator[SharedLog]:
    """A fresh shared metadata log; every controller registered on it is closed afterwards."""
    shared = SharedLog()
    yield shared
    for listener in shared.listeners:
        await listener.close()  # type: ignore[attr-defined]
