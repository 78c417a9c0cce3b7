"""Files the log no longer holds, deleted off the event loop.

Retention takes a segment or snapshot out of the log's state at once: nothing reads it after that. Removing the
file is another matter. The unlink of a 240 MiB snapshot and the directory fsync that makes it durable (which
waits for the filesystem's journal, and so for other files' pending writes) held a leader's event loop for 30-50 ms
at 2M partitions, and a commit waited that long. Kafka too removes such files later, on a scheduler thread.

A :class:`FileDeleter` runs deletions one at a time, in the order they were asked. Each first renames its files to
``<name>.deleted`` (Kafka's suffix for the same purpose) and makes that durable (directory fsync) before the next
starts: the same order and the same durability as when they ran inline. Only then are the files removed, cut down
from their end a little at a time (:func:`~quorum.log.files.remove_gradually`: a 247 MiB unlink on a filesystem
that trims freed blocks at once held other processes' fdatasyncs up to 35-53 ms here). A crash before a deletion
ran leaves the file in place. For a segment that means a log starting lower than retention had moved it, still
contiguous (segments go oldest first) and still covered by the snapshot that retention kept, which the next
retention removes again. For a snapshot it means an older snapshot than the newest, which retention removes again.
A crash after the rename leaves a ``.deleted`` file, which no reader takes for a segment or a snapshot, and which
the next open removes (:func:`remove_deleted`).

A file's name is never reused while its deletion waits. A new segment starts at the log end, and a new or installed
snapshot ends above every snapshot the log had; both are above every segment and snapshot retention removed. Only
an install replaces segments below them (:meth:`~quorum.log.log.MetadataLog.truncate_to_snapshot`), and it first
waits for pending deletions (:meth:`FileDeleter.drain`), so that a crash cannot leave old segments beside the
installed snapshot's new log.

After a failed deletion nothing more is deleted (a later segment removed while an earlier one stays would leave a
hole in the log), and the error is raised by the next :meth:`FileDeleter.check`: the log's owner treats it as any
storage error.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from quorum.log.files import fsync_dir, remove_ending, remove_gradually

DELETED_SUFFIX = ".deleted"


class FileDeleter:
    """Deletes a log's files: inline until :meth:`start_background`, then on one thread of its own."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self._executor: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None  # the last deletion asked (each waits for the one before)
        self._failure: BaseException | None = None
        self._lock = threading.Lock()

    def start_background(self, thread_name: str) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)

    def delete(self, paths: Sequence[Path], release: Callable[[], None] | None = None) -> None:
        """Delete one segment's or snapshot's files: ``release`` (closing them) first, then renamed to ``.deleted``
        durably, then removed a little at a time."""
        self.run(partial(_delete, self.dir, list(paths), release))

    def run(self, job: Callable[[], None]) -> None:
        """Run ``job`` in the deletions' order: inline until :meth:`start_background`, then on the thread."""
        if self._executor is None:
            job()
            return
        self._pending = self._executor.submit(self._run, job)

    def _run(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._failure is not None:
                return  # an earlier one failed: deleting later files could leave a hole in the log
        try:
            job()
        except BaseException as e:
            with self._lock:
                self._failure = e

    def check(self) -> None:
        """Raise the error of a deletion that failed in the background, if one did."""
        with self._lock:
            failure = self._failure
        if failure is not None:
            raise failure

    def drain(self) -> None:
        """Wait until every deletion asked so far has run; then :meth:`check`."""
        pending = self._pending
        if pending is not None:
            pending.result()
        self.check()

    def close(self) -> None:
        """Finish the pending deletions and stop the thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        self.check()


def _delete(directory: Path, paths: list[Path], release: Callable[[], None] | None) -> None:
    if release is not None:
        release()
    doomed = []
    for path in paths:
        renamed = path.with_name(path.name + DELETED_SUFFIX)
        try:
            os.replace(path, renamed)
        except FileNotFoundError:
            continue  # already gone
        doomed.append(renamed)
    if doomed:
        fsync_dir(directory)  # out of the log for good before anything later is deleted
    for path in doomed:
        remove_gradually(path)


def remove_deleted(directory: Path) -> list[Path]:
    """Remove the ``.deleted`` files a crash left behind a deletion (see the module's notes); returns them."""
    return remove_ending(directory, DELETED_SUFFIX)
