"""``meta.properties`` and the directory lock: a data directory knows which node and cluster it belongs to.

Kafka's format (``version=1``, ``cluster.id``, ``node.id``, ``directory.id``). A directory formatted for another node
or cluster refuses to start — mixing them up could make a node vote on, or serve, a log that is not its own.
"""

from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from quorum.log.files import atomic_write, fsync_dir
from quorum.log.message import Uuid

META_PROPERTIES = "meta.properties"


class StorageIdentityError(Exception):
    """The data directory belongs to another node or cluster, or is in use."""


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int
    directory_id: str

    def render(self) -> str:
        return (
            "#\n# written by pykraft\nversion=1\n"
            f"cluster.id={self.cluster_id}\nnode.id={self.node_id}\ndirectory.id={self.directory_id}\n"
        )


def read_properties(path: Path) -> dict[str, str]:
    """Java-style properties: ``key=value`` or ``key: value``, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ValueError(f"{path}: line {raw!r} is not key=value")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def ensure_meta_properties(data_dir: Path, cluster_id: str, node_id: int) -> MetaProperties:
    """Format an empty directory, or check that an existing one is this node's, in this cluster."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / META_PROPERTIES
    if not path.exists():
        meta = MetaProperties(cluster_id, node_id, str(Uuid.random()))
        atomic_write(path, meta.render().encode())
        fsync_dir(data_dir)
        return meta
    props = read_properties(path)
    try:
        found = MetaProperties(props["cluster.id"], int(props["node.id"]), props.get("directory.id", ""))
    except (KeyError, ValueError) as e:
        raise StorageIdentityError(
            f"{path} is damaged ({e}); refusing to start on a directory of unknown owner"
        ) from None
    if found.node_id != node_id:
        raise StorageIdentityError(
            f"{data_dir} was formatted for node.id={found.node_id}, but this is node {node_id}: "
            "point --data-dir at this node's own directory"
        )
    if found.cluster_id != cluster_id:
        raise StorageIdentityError(
            f"{data_dir} belongs to cluster {found.cluster_id}, but this node is configured for cluster {cluster_id}"
        )
    return found


class DirectoryLock:
    """An exclusive ``.lock`` on the data directory, held for the life of the process."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / ".lock"
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise StorageIdentityError(f"{data_dir} is in use by another process (it holds {self.path})") from None

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = -1
