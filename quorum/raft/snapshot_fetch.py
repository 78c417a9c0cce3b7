"""FetchSnapshot, both sides: the leader serves its snapshot file by position; a follower whose fetch offset was below
the leader's log start pulls it in chunks, installs it (validated, frozen, the log emptied to start at its end) and
fetches on. A mixin of :class:`~quorum.raft.core.RaftCore`, kept apart so the core reads as elections and
replication."""

from __future__ import annotations

from typing import TYPE_CHECKING

from quorum.errors import Errors
from quorum.log.snapshots import CorruptSnapshotError, SnapshotId
from quorum.raft.messages import FetchSnapshotRequest, FetchSnapshotResponse
from quorum.raft.roles import Follower, Leader, Role
from quorum.raft.storage import SnapshotInstall

if TYPE_CHECKING:
    from quorum.raft.core import RaftCore

BUG_INSTALL_WITHOUT_TRUNCATE = "install-snapshot-without-truncating"


class SnapshotFetching:
    def _on_fetch_snapshot_request(self: RaftCore, source: int, m: FetchSnapshotRequest, now: int) -> None:
        r = self._serving_leader(source, m)
        if r is None:
            return
        if m.max_bytes <= 0:
            self._reply(source, m, Errors.INVALID_REQUEST)
            return
        s = r.replica(source)
        s.last_fetch_ms = now  # fetching a snapshot is fetching: it keeps the leader's quorum check happy
        self._note_check_quorum(r, now)
        sid = SnapshotId(m.snapshot_end_offset, m.snapshot_epoch)
        try:
            found = self.log.read_snapshot(sid, m.position, min(m.max_bytes, self.config.fetch_max_bytes))
        except ValueError:
            self._reply(source, m, Errors.POSITION_OUT_OF_RANGE)
            return
        if found is None or m.position < 0:
            self._reply(source, m, Errors.SNAPSHOT_NOT_FOUND if found is None else Errors.POSITION_OUT_OF_RANGE)
            return
        data, size = found
        reply = FetchSnapshotResponse(
            Errors.NONE, r.epoch, self.id, sid.end_offset, sid.epoch, size, m.position, data, m.correlation_id
        )
        self._send(source, reply)

    def _start_snapshot_fetch(self: RaftCore, f: Follower, sid: SnapshotId, now: int) -> None:
        if sid.epoch > f.epoch or sid.end_offset <= 0 or sid.end_offset < self.high_watermark:
            # A snapshot below what we know is committed would empty committed offsets: a leader never sends one.
            self._log.warning("fetch_snapshot_id_invalid", leader_id=f.leader_id, snapshot=str(sid), epoch=f.epoch)
            f.fetch_sent_ms = now + self.config.retry_backoff_ms
            return
        if f.snapshot_id != sid:
            if f.snapshot is not None:
                f.snapshot.abort()
            paused, self._paused_snapshot = self._paused_snapshot, None
            if paused is not None and paused[:2] == (f.leader_id, sid):
                # The same leader's file for the same id: the same bytes (a node writes a snapshot id once, and
                # the install validates every batch's CRC anyway). Go on from where the fetch stopped.
                f.snapshot_id, f.snapshot = sid, paused[2]
                self._log.info(
                    "snapshot_fetch_resumed", leader_id=f.leader_id, snapshot=str(sid), position=f.snapshot.size
                )
            else:
                if paused is not None:
                    paused[2].abort()
                f.snapshot_id, f.snapshot = sid, self.log.begin_snapshot(sid)
                self._log.info(
                    "snapshot_fetch_started",
                    leader_id=f.leader_id,
                    snapshot=str(sid),
                    log_end_offset=self.log.end_offset,
                )
        self._send_fetch(f, now)

    def _leave_snapshot_fetch(self: RaftCore, f: Follower, role: Role) -> None:
        """``f`` stops following with a snapshot fetch under way: it keeps what it fetched (a 2M-partition
        snapshot is 240 MiB). A busy observer misses a chunk's deadline and looks for the leader again; a voter
        whose chunks come late from a busy leader suspects it, and the voters still hearing it refuse the pre-vote:
        either finds the same leader, usually, and resumes when that leader names that snapshot again. Started
        over instead, a voter fetching from a leader that stayed slow restarted 72 times in 108 s. What was kept is
        dropped once a leader sends the log instead, another leader names a snapshot, or this node leads."""
        assert f.snapshot is not None
        if f.snapshot_id is not None and not isinstance(role, Leader):
            self._drop_paused_snapshot()
            self._paused_snapshot = (f.leader_id, f.snapshot_id, f.snapshot)
        else:
            f.snapshot.abort()
        f.snapshot = f.snapshot_id = None

    def _drop_paused_snapshot(self: RaftCore) -> None:
        if self._paused_snapshot is not None:
            self._paused_snapshot[2].abort()
            self._paused_snapshot = None

    def _on_fetch_snapshot_response(self: RaftCore, source: int, m: FetchSnapshotResponse, now: int) -> None:
        if self._learn(m.epoch, m.leader_id, now, f"fetch snapshot response from {source}"):
            return
        f = self.role
        if not isinstance(f, Follower) or source != f.leader_id or m.correlation_id != f.fetch_correlation:
            return
        f.fetch_correlation = None
        install, sid = f.snapshot, f.snapshot_id
        if install is None or sid is None:
            f.fetch_sent_ms = now
            return
        if m.error in (Errors.SNAPSHOT_NOT_FOUND, Errors.POSITION_OUT_OF_RANGE):
            # The leader cleaned that snapshot away (a newer one exists): fetch again to learn which.
            self._log.info("snapshot_fetch_restarted", snapshot=str(sid), error=m.error.name)
            install.abort()
            f.snapshot = f.snapshot_id = None
            self._send_fetch(f, now)
            return
        if m.error != Errors.NONE or m.epoch != f.epoch:
            f.fetch_sent_ms = now + self.config.retry_backoff_ms
            return
        if (m.snapshot_end_offset, m.snapshot_epoch) != (sid.end_offset, sid.epoch) or m.position != install.size:
            f.fetch_sent_ms = now  # not the piece we asked for: ask again
            return
        f.last_fetch_ok_ms = now
        f.fetch_deadline = self._fetch_deadline(now)
        if f.leader_unreachable:  # the leader answers after all (as for a fetch answer)
            f.leader_unreachable = False
            if not f.leader_resigned:
                f.prospective_at = None
        install.write(m.position, m.data)
        self.metrics.snapshot_bytes_fetched += len(m.data)
        if install.size < m.size:
            self._send_fetch(f, now)
            return
        f.snapshot = f.snapshot_id = None
        self._install_snapshot(install, sid, f, now)
        self._send_fetch(f, now)

    def _install_snapshot(self: RaftCore, install: SnapshotInstall, sid: SnapshotId, f: Follower, now: int) -> None:
        if BUG_INSTALL_WITHOUT_TRUNCATE in self.bugs:
            new_end = self.log.end_offset
            self.log.install_snapshot(install, truncate=False)  # type: ignore[call-arg]  # the sim's log only
        else:
            old_end = self.log.end_offset
            try:
                new_end = self.log.install_snapshot(install)
            except CorruptSnapshotError as e:
                self._log.error("fetched_snapshot_rejected", snapshot=str(sid), error=str(e))
                return  # the next fetch names a snapshot again; we start it over
            self._log.warning(
                "snapshot_installed", snapshot=str(sid), leader_id=f.leader_id, old_end=old_end, new_end=new_end
            )
        # What the log now holds is durable: the snapshot was fsync'd, the emptied log starts at its end.
        self._durable_offset = new_end if new_end == sid.end_offset else min(self._durable_offset, new_end)
        if self._flush_in_flight:
            self._truncated_below = new_end if self._truncated_below is None else min(self._truncated_below, new_end)
        if sid.end_offset > self.high_watermark:
            self.high_watermark = sid.end_offset  # a snapshot holds only committed offsets
            self.metrics.committed_offset_advances += 1
        self.metrics.snapshots_installed += 1
