"""No task of the product is started without someone watching its outcome.

A task that dies with an exception nobody retrieves leaves its work undone in silence (a flush that never
completes, a stream that is never reopened). The product starts tasks only through ``quorum.fault.spawn``, which
hands any failure to a callback; this test finds every other ``create_task`` / ``ensure_future`` in the product's
packages. (Tests and benchmarks gather their own tasks and are not scanned.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("quorum", "controller", "pykraft", "audit")
ALLOWED = {Path("quorum/fault.py")}  # spawn itself
STARTERS = {"create_task", "ensure_future", "run_coroutine_threadsafe"}


def unwatched_starts(source: str) -> list[int]:
    """Line numbers of calls that start a task or future by hand, unless its outcome is taken on the spot
    (``run_coroutine_threadsafe(coro, loop).result()``, or awaited: ``await wrap_future(run_coroutine_threadsafe(
    coro, loop))``)."""
    tree = ast.parse(source)
    taken = {
        id(node.func.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "result"
    }
    taken |= {
        id(node.value.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Await)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute | ast.Name)
        and (node.value.func.attr if isinstance(node.value.func, ast.Attribute) else node.value.func.id)
        == "wrap_future"
        and node.value.args
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and id(node) not in taken:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
            if name in STARTERS:
                found.append(node.lineno)
    return found


def test_the_scan_finds_task_starts() -> None:
    sample = "import asyncio\nasyncio.create_task(f())\nloop.create_task(g())\nx = asyncio.ensure_future(h())\n"
    assert unwatched_starts(sample) == [2, 3, 4]
    assert unwatched_starts("spawn(f(), name='x', on_error=report)\n") == []
    assert unwatched_starts("asyncio.run_coroutine_threadsafe(f(), loop).result()\n") == []
    awaited = "async def g():\n    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(f(), loop))\n"
    assert unwatched_starts(awaited) == []
    assert unwatched_starts("fut = asyncio.wrap_future(asyncio.run_coroutine_threadsafe(f(), loop))\n") == [1]


@pytest.mark.parametrize("package", PACKAGES)
def test_tasks_are_started_only_through_spawn(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative in ALLOWED or "_pb2" in path.name:
            continue
        offenders += [f"{relative}:{line}" for line in unwatched_starts(path.read_text())]
    assert not offenders, (
        "tasks started without a watcher (use quorum.fault.spawn, which hands a failure to on_error): "
        + ", ".join(offenders)
    )
