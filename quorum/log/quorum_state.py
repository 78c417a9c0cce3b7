"""The ``quorum-state`` file: the Raft election state that must survive a crash (epoch, vote, leader).

Kafka's format (``FileQuorumStateStore``, schema ``QuorumStateData``): one JSON object on one line, no newline,
replaced atomically. We write ``data_version`` 0 (a static voter set, kraft.version 0) and read both 0 and 1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from quorum.log.files import atomic_write

QUORUM_STATE_NAME = "quorum-state"


@dataclass(frozen=True)
class ElectionState:
    leader_epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    voters: tuple[int, ...] = ()
    cluster_id: str = ""
    applied_offset: int = 0
    voted_directory_id: str = field(default="AAAAAAAAAAAAAAAAAAAAAA")

    def to_json(self) -> str:
        return json.dumps(
            {
                "clusterId": self.cluster_id,
                "leaderId": self.leader_id,
                "leaderEpoch": self.leader_epoch,
                "votedId": self.voted_id,
                "appliedOffset": self.applied_offset,
                "currentVoters": [{"voterId": v} for v in self.voters],
                "data_version": 0,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> ElectionState:
        obj = json.loads(text)
        if not isinstance(obj, dict):
            raise ValueError(f"expected a JSON object, found {type(obj).__name__}")
        version = obj.get("data_version", 0)
        if version not in (0, 1):
            raise ValueError(f"unknown data_version {version}")
        voters = obj.get("currentVoters") or []
        return cls(
            leader_epoch=int(obj["leaderEpoch"]),
            leader_id=int(obj.get("leaderId", -1)),
            voted_id=int(obj.get("votedId", -1)),
            voters=tuple(int(v["voterId"]) for v in voters),
            cluster_id=str(obj.get("clusterId", "")),
            applied_offset=int(obj.get("appliedOffset", 0)),
            voted_directory_id=str(obj.get("votedDirectoryId", "AAAAAAAAAAAAAAAAAAAAAA")),
        )


class QuorumStateStore:
    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / QUORUM_STATE_NAME

    def read(self) -> ElectionState | None:
        """The stored state, or None when there is none yet. A damaged file is an error that names it: guessing
        an epoch or a vote could make this node vote twice."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return ElectionState.from_json(raw.decode())  # UnicodeDecodeError is a ValueError
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{self.path}: unreadable quorum state ({e}); refusing to guess an epoch") from None

    def write(self, state: ElectionState) -> None:
        atomic_write(self.path, state.to_json().encode())
