"""Loaded before any test module: ``pykraft`` turns gRPC's fork support off before grpc is first imported, as in a
node (a snapshot is written by a forked child: quorum/log/snapshot_fork.py)."""

from collections.abc import Iterator

import pytest

import pykraft  # noqa: F401
from pykraft import gc_pauses
from quorum import memory


@pytest.fixture(autouse=True)
def _no_gc_hook_left_behind() -> Iterator[None]:
    """A node or broker run in process installs pykraft.gc_pauses for the whole process (through its metrics). Left
    there, the hook logged a later test's slow collection into the output that test compares (a CLI's stdout) and
    kept the freezing policy on for it: each test starts without it."""
    yield
    gc_pauses.uninstall()
    memory.freezes_long_lived = False  # a test may have set it without the hook
