"""Fail-stop: one place for the faults after which a node must not go on (Kafka's ``FaultHandler``).

A storage error (fdatasync, a segment write or roll, a truncation, the quorum-state file), an exception escaping
the Raft core, or a controller that cannot replay a committed record leaves the node's state unknown or wrong.
Carrying on risks a wedged node that answers but commits nothing, or one that serves state its peers do not have;
retrying an fsync that failed is worse (Linux may have dropped the dirty pages and report success next time). So,
as Kafka's ``ProcessTerminatingFaultHandler`` does, the process logs one line naming the cause and exits at once
with :data:`FATAL_EXIT_CODE`; a restart recovers from what is durable, and Raft makes it catch up.

Inside a process that must not exit (tests, the simulator, an embedding), :class:`LoggingFaultHandler` logs and
records the fault; the component that reported it stops itself either way (``RaftNode`` ignores every later input).
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
import traceback
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import structlog

log = structlog.get_logger("quorum.fault")

FATAL_EXIT_CODE = 70  # sysexits' EX_SOFTWARE: distinct from 1 (refused to start) and 2 (usage)
FATAL_EVENT = "fatal_fault"  # the log event `pykraft cluster describe` looks for
T = TypeVar("T")


@dataclass(frozen=True)
class Fault:
    """What went wrong (``message``), why (``cause``), and where the node stood (``context``: epoch, offsets…)."""

    message: str
    cause: BaseException | None = None
    context: dict[str, Any] = field(default_factory=dict)

    def fields(self) -> dict[str, Any]:
        """The log line's fields: the context, the error, its errno and file, and where it was raised."""
        out: dict[str, Any] = {"cause": self.message, **self.context}
        e = self.cause
        if e is None:
            return out
        out["error"] = f"{type(e).__name__}: {e}"
        if isinstance(e, OSError):
            if e.errno is not None:
                out["errno"] = errno.errorcode.get(e.errno, str(e.errno))
            if e.filename is not None:
                out["file"] = os.fsdecode(e.filename)
            if e.filename2 is not None:  # a rename's destination
                out["file2"] = os.fsdecode(e.filename2)
        origin = e
        while origin.__cause__ is not None:  # a wrapped error (ReplayError, a named OSError): where it began
            origin = origin.__cause__
        frames = traceback.extract_tb(origin.__traceback__)
        if frames:
            last = frames[-1]
            out["raised_at"] = f"{last.filename}:{last.lineno} in {last.name}"
        if not isinstance(e, OSError):  # a bug, not the disk: keep the whole stack (JSON keeps it on one line)
            out["traceback"] = "".join(traceback.format_exception(e)).rstrip()
        return out


def fault_message(doing: str, error: BaseException | None) -> str:
    """``storage fault while flushing the metadata log``: what kind of fault, and what the node was doing."""
    return f"{'storage fault' if isinstance(error, OSError) else 'fatal error'} while {doing}"


class FaultHandler(Protocol):
    def handle_fault(self, message: str, cause: BaseException | None = None, **context: Any) -> None:
        """Report a fault after which the caller cannot go on. The process handler never returns."""
        ...


class LoggingFaultHandler:
    """Logs each fault as one critical line and keeps it; the process goes on (the caller has stopped itself)."""

    def __init__(self) -> None:
        self.faults: list[Fault] = []

    def handle_fault(self, message: str, cause: BaseException | None = None, **context: Any) -> None:
        fault = Fault(message, cause, context)
        self.faults.append(fault)
        log.critical(FATAL_EVENT, **fault.fields())


class ProcessTerminatingFaultHandler(LoggingFaultHandler):
    """Logs the fault, runs ``before_exit`` (e.g. to set a metric), flushes stdout and stderr, and ends the
    process with :data:`FATAL_EXIT_CODE` without unwinding: no cleanup code may write anything more."""

    def __init__(self, before_exit: Callable[[Fault], None] | None = None) -> None:
        super().__init__()
        self.before_exit = before_exit

    def handle_fault(self, message: str, cause: BaseException | None = None, **context: Any) -> None:
        fault = Fault(message, cause, context)
        self.faults.append(fault)
        try:
            log.critical(FATAL_EVENT, exit_code=FATAL_EXIT_CODE, **fault.fields())
            if self.before_exit is not None:
                self.before_exit(fault)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:  # a full disk or a closed pipe must not keep the process alive
                    pass
            os._exit(FATAL_EXIT_CODE)


def spawn(work: Coroutine[Any, Any, T], *, name: str, on_error: Callable[[BaseException], None]) -> asyncio.Task[T]:
    """Start ``work`` as a task whose failure is never silent: an exception it ends with goes to ``on_error``
    (cancellation is not a failure). The one place the product starts tasks; a test checks that no other does."""
    task = asyncio.get_running_loop().create_task(work, name=name)

    def done(t: asyncio.Task[T]) -> None:
        if not t.cancelled() and (e := t.exception()) is not None:
            on_error(e)

    task.add_done_callback(done)
    return task


async def cancel_until_done(tasks: Iterable[asyncio.Task[Any]]) -> None:
    """Cancel ``tasks`` and wait until every one has ended, cancelling again those that swallowed it: on Python
    3.11 a wait_for whose inner wait completes as the task is cancelled can swallow the cancellation, and gRPC may
    report one as a CANCELLED status; a loop around either then runs on, and a plain cancel-and-await hangs (a
    shutdown under load did; a CI run did)."""
    while pending := [t for t in tasks if not t.done()]:
        for t in pending:
            t.cancel()
        await asyncio.wait(pending, timeout=0.1)
