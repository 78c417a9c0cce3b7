"""The simulator runs thousands of elections: keep structlog at ERROR while these tests run, and restore the
previous configuration afterwards (other test modules capture warnings with ``structlog.testing``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import structlog

from quorum.sim.harness import quiet_logs


@pytest.fixture(autouse=True, scope="module")
def _quiet_structlog() -> Iterator[None]:
    saved = structlog.get_config()
    quiet_logs()
    yield
    structlog.configure(**saved)
