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


# On a filesystem that trims freed blocks at once (ext4 mounted with ``discard``, as this machine's virtual disk
# is), the blocks of a file are trimmed as it is removed, and the device serves nothing else meanwhile: unlinking a
# 247 MiB snapshot (~73 ms) held the fdatasyncs of three processes beside it up to 35-53 ms. Cut from its end 8 MiB
# at a time (1.13x as long), up to 5-9 ms; 1-5 ms with nothing removed (benchmarks/file_removal.py).
REMOVE_CHUNK_BYTES = 8 << 20


def remove_gradually(path: Path, chunk_bytes: int = REMOVE_CHUNK_BYTES) -> bool:
    """Unlink ``path`` once it is cut down ``chunk_bytes`` at a time from its end, so that the blocks it frees are
    trimmed a little at a time; False if it was not there. A crash midway leaves the file shorter under its name:
    a caller that must not leave a shorter file renames it first (:class:`~quorum.log.deleter.FileDeleter`)."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        return False
    while size > chunk_bytes:
        size -= chunk_bytes
        os.truncate(path, size)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def remove_ending(directory: Path, suffix: str) -> list[Path]:
    """Remove (:func:`remove_gradually`) every file of ``directory`` whose name ends with ``suffix``: what a crash
    left of a write or a deletion. Returns them, sorted; making that durable is the caller's choice."""
    doomed = sorted(p for p in Path(directory).iterdir() if p.name.endswith(suffix))
    for path in doomed:
        remove_gradually(path)
    return doomed
