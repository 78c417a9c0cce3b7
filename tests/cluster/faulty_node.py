"""``pykraft node`` with faults injected at the OS call (and one at the controller's replay), for
tests/cluster/test_fatal_faults.py.

    python tests/cluster/faulty_node.py --faults-dir DIR node --node-id 1 ...

Each fault is armed while a file of its name exists in DIR, so a test arms and disarms it on a running process:
- ``fdatasync-eio``: ``os.fdatasync`` fails with EIO (the log's flush);
- ``append-enospc``: ``os.pwrite`` fails with ENOSPC (a segment append);
- ``quorum-state-rename``: renaming a file onto ``quorum-state`` fails with EIO;
- ``replay``: the controller fails to apply a TopicRecord whose name starts with ``poison``.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

FAULTS = ("fdatasync-eio", "append-enospc", "quorum-state-rename", "replay")


def install(faults_dir: Path) -> None:
    def armed(name: str) -> bool:
        return (faults_dir / name).exists()

    real_fdatasync, real_pwrite, real_replace = os.fdatasync, os.pwrite, os.replace

    def fdatasync(fd: int) -> None:
        if armed("fdatasync-eio"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fdatasync(fd)

    def pwrite(fd: int, data: bytes, position: int) -> int:
        if armed("append-enospc"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_pwrite(fd, data, position)

    def replace(src: str, dst: str, **kwargs: object) -> None:
        if armed("quorum-state-rename") and os.fspath(dst).endswith("quorum-state"):
            raise OSError(errno.EIO, os.strerror(errno.EIO), os.fspath(src), None, os.fspath(dst))
        real_replace(src, dst, **kwargs)  # type: ignore[arg-type]

    os.fdatasync, os.pwrite, os.replace = fdatasync, pwrite, replace  # type: ignore[assignment]

    from controller.quorum_controller import QuorumController
    from controller.records import TopicRecord

    real_replay = QuorumController._replay

    def replay(self: QuorumController, record: object, offset: int) -> None:
        if armed("replay") and isinstance(record, TopicRecord) and record.name.startswith("poison"):
            raise RuntimeError(f"injected replay fault for topic {record.name}")
        real_replay(self, record, offset)  # type: ignore[arg-type]

    QuorumController._replay = replay  # type: ignore[method-assign]


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] != "--faults-dir":
        sys.exit("usage: faulty_node.py --faults-dir DIR node ARGS...")
    install(Path(sys.argv[2]))
    from pykraft.cli import main

    sys.exit(main(sys.argv[3:]))
