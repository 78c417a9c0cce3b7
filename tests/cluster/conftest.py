"""Fixtures for tests that run real ``pykraft node`` processes; the helpers are in cluster_helpers.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.testing import Cluster

# The active controller appends a NoOpRecord whenever the log was idle for metadata.max.idle.interval.ms (Kafka's
# default 500 ms). Off, an idle log stands still: tests can then expect exact offsets, lags and high watermarks.
NO_IDLE_WRITES = ["--override", "metadata.max.idle.interval.ms=0"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A started three-voter cluster with default settings, stopped (SIGTERM, then SIGKILL for stragglers)
    whatever the test does. AppendRecords is open: the tests write their own records."""
    with Cluster(root=tmp_path, size=3, raw_appends=True) as c:
        yield c


@pytest.fixture
def quiet_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Like ``cluster``, but the controller writes nothing while the log is idle."""
    with Cluster(root=tmp_path, size=3, extra_args=NO_IDLE_WRITES, raw_appends=True) as c:
        yield c
