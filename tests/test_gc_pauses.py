"""The node's garbage-collector hook: survivors of a full collection are frozen (later full collections scan only
new objects), cycles made afterwards are still collected, slow pauses are logged, and the counts reach
Prometheus."""

from __future__ import annotations

import gc

import pytest
import structlog
from prometheus_client import CollectorRegistry, generate_latest

from pykraft import gc_pauses
from pykraft.metrics import GcCollector
from quorum import memory


@pytest.fixture
def pauses():
    hook = gc_pauses.GcPauses()
    gc.callbacks.append(hook)
    try:
        yield hook
    finally:
        gc.callbacks.remove(hook)
        gc.unfreeze()


class Node:
    pass


def test_full_collection_freezes_its_survivors(pauses: gc_pauses.GcPauses) -> None:
    gc.unfreeze()
    state = {i: (i, [i]) for i in range(50_000)}  # long-lived containers, as the controller's state
    gc.collect()
    assert pauses.pauses[2] >= 1
    frozen = gc.get_freeze_count()
    assert frozen >= len(state)
    assert gc.get_count()[2] == 0 and not any(id(o) == id(state) for o in gc.get_objects(2))


def test_cycles_made_after_a_freeze_are_still_collected(pauses: gc_pauses.GcPauses) -> None:
    gc.collect()  # freezes what exists now
    for _ in range(100):
        a, b = Node(), Node()
        a.other, b.other = b, a
    del a, b
    assert gc.collect() >= 200


def test_slow_pauses_are_logged(pauses: gc_pauses.GcPauses, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_pauses, "SLOW_PAUSE_S", 0.0)
    with structlog.testing.capture_logs() as logs:
        gc.collect()
    events = [e for e in logs if e["event"] == "gc_pause"]
    assert events and events[-1]["generation"] == 2 and events[-1]["pause_ms"] >= 0


def test_counts_reach_prometheus(pauses: gc_pauses.GcPauses) -> None:
    gc.collect(0)
    gc.collect()
    registry = CollectorRegistry()
    registry.register(GcCollector(pauses))
    text = generate_latest(registry).decode()
    assert 'pykraft_gc_pauses_total{generation="2"}' in text
    assert 'pykraft_gc_pause_seconds_total{generation="0"}' in text
    assert "pykraft_gc_pause_max_seconds" in text
    assert registry.get_sample_value("pykraft_gc_pauses_total", {"generation": "2"}) >= 1


def test_install_is_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_pauses, "_installed", None)
    monkeypatch.setattr(memory, "freezes_long_lived", False)
    first = gc_pauses.install()
    try:
        assert gc_pauses.install() is first
        assert gc.callbacks.count(first) == 1
        assert memory.freezes_long_lived  # snapshot loads freeze what they loaded
    finally:
        gc.callbacks.remove(first)
        gc.unfreeze()


def test_uninstall_undoes_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_pauses, "_installed", None)
    hook = gc_pauses.install()
    gc_pauses.uninstall()
    assert hook not in gc.callbacks and not memory.freezes_long_lived
    assert gc_pauses.install() is not hook  # a fresh one next time
    gc_pauses.uninstall()
    gc.unfreeze()
