"""Durable file operations shared by the log's small state files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def naming(operation: str, path: Path) -> Iterator[None]:
    """Name the file and the call in an OSError raised by a call on a descriptor (``os.fdatasync(fd)`` raises
    ``[Errno 5] Input/output error`` with no file): ``[Errno 5] fdatasync: Input/output error: '…/0….log'``."""
    try:
        yield
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, f"{operation}: {e.strerror}", os.fspath(path)) from e


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a created, renamed or deleted file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with naming("fsync of the directory", path):
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file, whole.

    Write a temp file, fsync it, rename it over the target, fsync the directory (Kafka's
    ``Utils.atomicMoveWithFallback`` with the fsyncs KRaft relies on).
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with naming("write", tmp):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
