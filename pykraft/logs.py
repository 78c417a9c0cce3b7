"""Structured logging for every pykraft process: one event per line, on stderr (JSON when stderr is not a terminal,
key=value when it is) or, with ``--log-file``, as JSON lines in a size-rotated file.

``--log-level`` (or ``PYKRAFT_LOG_LEVEL``; the flag wins) picks the threshold: INFO, the default, keeps state changes
(elections, fencing, topics created, snapshots, faults); DEBUG adds the per-request chatter (heartbeats, polls).
Every event carrying an int ``error_code`` also gets Kafka's ``error_name`` for it."""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import sys
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from pykraft.cli_common import at_least
from quorum.errors import Errors

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LEVEL_ENV = "PYKRAFT_LOG_LEVEL"
DEFAULT_MAX_BYTES = 100 * 1024 * 1024  # the scale of Kafka's log4j defaults for its server log
DEFAULT_BACKUPS = 5


def add_error_name(_logger: object, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: ``error_name`` (Kafka's, from :class:`Errors`) beside an int ``error_code``."""
    code = event.get("error_code")
    if isinstance(code, int) and not isinstance(code, bool) and "error_name" not in event:
        try:
            event["error_name"] = Errors(code).name
        except ValueError:
            event["error_name"] = f"UNKNOWN_CODE_{code}"  # a code this build has no name for: say so, keep the number
    return event


class RotatingLineWriter:
    """A file object for structlog's ``WriteLogger``: each line goes through a stdlib ``RotatingFileHandler`` (size
    checked before each line, so a line is never split across files; flushed per line so a crash loses nothing)."""

    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handler = logging.handlers.RotatingFileHandler(
            path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8"
        )
        self.handler.setFormatter(logging.Formatter("%(message)s"))

    def write(self, text: str) -> int:
        self.handler.handle(logging.makeLogRecord({"msg": text.rstrip("\n"), "levelno": logging.INFO}))
        return len(text)

    def flush(self) -> None:
        self.handler.flush()

    def close(self) -> None:
        self.handler.close()

    def isatty(self) -> bool:
        return False


_open_writer: RotatingLineWriter | None = None


def configure_logging(
    *,
    json: bool | None = None,
    level: str = "INFO",
    file: str | Path | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    backups: int = DEFAULT_BACKUPS,
    **context: object,
) -> None:
    """Configure structlog; ``context`` (node_id, ...) is bound into every event of the process. With ``file``
    the events go there, always as JSON (tools read a node's file for its ``fatal_fault`` line), rotated at
    ``max_bytes`` (0: never) keeping ``backups`` old files (``PATH.1`` the newest)."""
    global _open_writer
    if _open_writer is not None:
        _open_writer.close()
        _open_writer = None
    out: Any = sys.stderr
    if file is not None:
        out = _open_writer = RotatingLineWriter(Path(file), max_bytes, backups)
        json = True
    if json is None:
        json = not sys.stderr.isatty()
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            add_error_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        # WriteLogger writes an event and its newline in one call (print() makes two): on an unbuffered stderr a
        # kill -9 between them would leave the line open, and the next process's first event would join it.
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=True,  # a node logs per request: resolve each logger's chain once
    )
    structlog.contextvars.clear_contextvars()
    if context:
        structlog.contextvars.bind_contextvars(**context)


# -- command line ----------------------------------------------------------------------------------------------


def log_level(raw: str) -> str:
    """A level name, any case (argparse names the flag in the error)."""
    level = raw.strip().upper()
    if level not in LEVELS:
        raise argparse.ArgumentTypeError(f"invalid level {raw!r} (one of {', '.join(LEVELS)})")
    return level


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    """``--log-level``, ``--log-file``, ``--log-file-max-bytes`` and ``--log-file-backups`` for a long-running
    command (``pykraft node``, ``pykraft broker``)."""
    group = parser.add_argument_group("logging")
    group.add_argument(
        "--log-level",
        type=log_level,
        default=None,
        metavar="LEVEL",
        help=f"{', '.join(LEVELS)} (default: ${LEVEL_ENV}, else INFO); DEBUG adds every heartbeat and request",
    )
    group.add_argument(
        "--log-file",
        default=None,
        metavar="PATH",
        help="write the structured logs (JSON lines) to PATH, rotated by size, instead of stderr",
    )
    group.add_argument(
        "--log-file-max-bytes",
        type=at_least(0),
        default=DEFAULT_MAX_BYTES,
        metavar="BYTES",
        help=f"rotate --log-file when it would grow past this; 0: never (default: {DEFAULT_MAX_BYTES})",
    )
    group.add_argument(
        "--log-file-backups",
        type=at_least(1),
        default=DEFAULT_BACKUPS,
        metavar="N",
        help=f"rotated files kept: PATH.1 (newest) .. PATH.N (default: {DEFAULT_BACKUPS})",
    )


@dataclass(frozen=True)
class LogSettings:
    level: str
    file: str | None
    max_bytes: int
    backups: int


def settings_from(args: argparse.Namespace, environ: MutableMapping[str, str] | None = None) -> LogSettings:
    """The logging settings of a parsed command line: the flag, else ``PYKRAFT_LOG_LEVEL``, else INFO. Raises
    ValueError (a one-line message naming the variable) for an invalid ``PYKRAFT_LOG_LEVEL``."""
    environ = os.environ if environ is None else environ
    level = args.log_level
    if level is None:
        raw = environ.get(LEVEL_ENV, "").strip()
        if raw:
            try:
                level = log_level(raw)
            except argparse.ArgumentTypeError as e:
                raise ValueError(f"environment variable {LEVEL_ENV}: {e}") from None
    return LogSettings(level or "INFO", args.log_file, args.log_file_max_bytes, args.log_file_backups)


def configure_from(settings: LogSettings) -> None:
    configure_logging(level=settings.level, file=settings.file, max_bytes=settings.max_bytes, backups=settings.backups)
