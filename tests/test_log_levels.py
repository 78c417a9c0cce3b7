"""What the nodes log, and where: per-request chatter (heartbeats, describes) only at DEBUG, ``error_name`` beside
every ``error_code``, ``--log-level``/``PYKRAFT_LOG_LEVEL``/``--log-file`` (rotated by size, JSON), and progress
lines while a long log or a big snapshot is replayed at start."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from metrics_helpers import FAST, live_node

from pykraft import cli, logs
from pykraft.broker import BrokerAgent
from pykraft.testing import free_ports
from quorum import progress
from quorum.errors import Errors
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.quorum_state import QuorumStateStore
from quorum.log.snapshots import SnapshotId
from quorum.raft.client import CommittedBatch, LeaderAndEpoch, SnapshotReader
from quorum.raft.config import VoterAddress
from quorum.raft.runtime import RaftNode


@pytest.fixture
def configure() -> Iterator[Callable[..., None]]:
    """``configure_logging`` as a process would, undone afterwards (loggers left uncached: later tests capture)."""

    def apply(**kwargs: Any) -> None:
        logs.configure_logging(**kwargs)
        structlog.configure(cache_logger_on_first_use=False)

    yield apply
    logs.configure_logging(level="DEBUG")  # closes the file the test wrote to
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# -- levels: a controller and a broker heartbeating, in one process ----------------------------------------------


async def heartbeat_for_a_while(tmp_path: Path, seconds: float) -> int:
    """A single-voter controller and broker 101 heartbeating every 50 ms for ``seconds``, then shut down in a
    controlled way; the number of heartbeats the broker sent."""
    (listener_port,) = free_ports(1)
    async with live_node(tmp_path) as live:
        port = live.voters[1].port
        agent = BrokerAgent(101, "rack-1", f"127.0.0.1:{port}", ("127.0.0.1", listener_port), heartbeat_interval_ms=50)
        beats = 0
        beat = agent.heartbeat

        async def counted(want_shutdown: bool = False) -> bool:
            nonlocal beats
            beats += 1
            return await beat(want_shutdown)

        agent.heartbeat = counted  # type: ignore[method-assign]
        stop = asyncio.Event()
        task = asyncio.create_task(agent.run(stop))
        try:
            async with asyncio.timeout(15):
                while agent.fenced:
                    await asyncio.sleep(0.02)
            await asyncio.sleep(seconds)
            stop.set()
            await asyncio.wait_for(task, 15)
        finally:
            task.cancel()
    return beats


@pytest.mark.parametrize("level", ["INFO", "DEBUG"])
async def test_heartbeats_are_logged_only_at_debug(tmp_path: Path, configure: Callable[..., None], level: str) -> None:
    path = tmp_path / "logs" / "node.log"
    configure(level=level, file=path)
    beats = await heartbeat_for_a_while(tmp_path, 0.6)
    assert beats >= 10
    events = read_events(path)
    requests = [e for e in events if e["event"] == "request"]
    heartbeats = [e for e in requests if e["api"] == "BrokerHeartbeat"]
    # The state changes stay at INFO either way: the broker registered, its fencing changed, the leader elected.
    assert any(e["event"] == "broker_registered" for e in events), events
    assert any(e["event"] == "broker_fencing_changed" for e in events), events
    assert any(e["event"] == "controller_activated" for e in events), events
    assert any(e["api"] == "RegisterBroker" and e["level"] == "info" for e in requests), requests
    if level == "INFO":
        assert not [e for e in events if e["level"] == "debug"]
        # Only the heartbeats that changed the broker's state (first seen fenced, unfenced, shutting down, told to
        # shut down): a handful however long it ran, each different from the one before.
        assert 2 <= len(heartbeats) <= 4 < beats, heartbeats
        states = [(e["fenced"], e["in_controlled_shutdown"], e["should_shut_down"]) for e in heartbeats]
        assert all(a != b for a, b in itertools.pairwise(states)), states
    else:
        assert len(heartbeats) >= beats - 1 >= 10, (len(heartbeats), beats)
        assert {e["level"] for e in heartbeats} == {"debug", "info"}  # the steady beat, and the state changes
    for e in requests:
        assert e["error_name"] == Errors(e["error_code"]).name, e


# -- error_name ------------------------------------------------------------------------------------------------


def test_every_int_error_code_gets_kafkas_name(tmp_path: Path, configure: Callable[..., None]) -> None:
    path = tmp_path / "node.log"
    configure(file=path)
    log = structlog.get_logger("test")
    log.info("refused", error_code=41)
    log.warning("odd", error_code=12345)
    log.info("named already", error_code=41, error_name="MINE")
    log.info("no code", error="NOT_CONTROLLER")
    log.info("not an int", error_code="41")
    log.info("a flag", error_code=True)
    refused, odd, named, no_code, text, flag = read_events(path)
    assert (refused["error_code"], refused["error_name"]) == (41, "NOT_CONTROLLER")
    assert odd["error_name"] == "UNKNOWN_CODE_12345"
    assert named["error_name"] == "MINE"
    for e in (no_code, text, flag):
        assert "error_name" not in e, e


# -- --log-level, PYKRAFT_LOG_LEVEL, --log-file ------------------------------------------------------------------

NODE = ["node", "--node-id", "1", "--controller-quorum-voters", "1@127.0.0.1:9091", "--data-dir", "/nonexistent"]
BROKER = ["broker", "--broker-id", "101", "--bootstrap-server", "127.0.0.1:9091"]


@pytest.mark.parametrize("argv", [NODE, BROKER], ids=["node", "broker"])
def test_the_flag_wins_over_the_variable_and_info_is_the_default(argv: list[str]) -> None:
    parser = cli.build_parser()
    plain = parser.parse_args(argv)
    assert logs.settings_from(plain, {}) == logs.LogSettings("INFO", None, 100 * 1024 * 1024, 5)
    assert logs.settings_from(plain, {"PYKRAFT_LOG_LEVEL": "warning"}).level == "WARNING"
    flagged = parser.parse_args([*argv, "--log-level", "debug", "--log-file", "x.log", "--log-file-max-bytes", "10"])
    settings = logs.settings_from(flagged, {"PYKRAFT_LOG_LEVEL": "ERROR"})
    assert settings == logs.LogSettings("DEBUG", "x.log", 10, 5)


@pytest.mark.parametrize(
    ("extra", "env", "names"),
    [
        (["--log-level", "loud"], None, "argument --log-level: invalid level 'loud'"),
        ([], "chatty", "environment variable PYKRAFT_LOG_LEVEL: invalid level 'chatty'"),
        (["--log-file-backups", "0"], None, "argument --log-file-backups: must be at least 1, got 0"),
        (["--log-file-max-bytes", "lots"], None, "argument --log-file-max-bytes: 'lots' is not an integer"),
    ],
)
def test_a_bad_level_is_a_one_line_usage_error(
    extra: list[str], env: str | None, names: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    if env is not None:
        monkeypatch.setenv("PYKRAFT_LOG_LEVEL", env)
    with pytest.raises(SystemExit) as exited:
        cli.main([*BROKER, *extra])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pykraft broker: error: ") and names in err, err
    assert "DEBUG, INFO, WARNING" in err or "integer" in err or "at least" in err


def test_the_log_file_rotates_by_size_and_loses_nothing(tmp_path: Path, configure: Callable[..., None]) -> None:
    path = tmp_path / "logs" / "controller-1.log"
    configure(file=path, max_bytes=4096, backups=3, json=False)  # a file is JSON even when asked otherwise
    log = structlog.get_logger("test")
    total = 400  # ~180 bytes each: about 18 files' worth, of which the newest 4 are kept
    for i in range(total):
        log.info("line", seq=i, pad="x" * 40)
    files = [path, *(path.with_name(f"{path.name}.{n}") for n in (1, 2, 3))]
    assert all(f.exists() for f in files) and not path.with_name(f"{path.name}.4").exists()
    seqs = []
    for f in reversed(files):  # oldest first
        assert f.stat().st_size <= 4096, f
        assert f == path or f.stat().st_size > 4096 - 300, f  # rotated when the next line would not fit
        seqs += [e["seq"] for e in read_events(f)]  # every line whole JSON: none split across two files
    # What is kept is one unbroken run ending with the last line written: nothing lost at a rotation.
    assert seqs == list(range(seqs[0], total)), seqs


def test_each_event_reaches_stderr_in_one_write(
    configure: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """stderr is unbuffered: an event written in two calls (print() writes the line, then its end) could be cut by a
    kill -9 between them, and the next process's first event would join the open line."""
    writes: list[str] = []

    class Stderr:
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

        def isatty(self) -> bool:
            return False

    monkeypatch.setattr("sys.stderr", Stderr())
    configure(node_id=7)
    log = structlog.get_logger("test")
    log.info("first", seq=1)
    log.warning("second", seq=2)
    assert len(writes) == 2 and all(w.endswith("\n") and w.count("\n") == 1 for w in writes), writes
    assert [json.loads(w)["seq"] for w in writes] == [1, 2]


# -- progress while replaying at start -------------------------------------------------------------------------


class Recorder:
    """A listener that keeps what it was handed (the records of the snapshot and of the log after it)."""

    def __init__(self) -> None:
        self.records = 0
        self.next_offset = 0

    def handle_commit(self, batch: CommittedBatch) -> None:
        if not batch.is_control:
            self.records += len(batch.records)
        self.next_offset = batch.last_offset + 1

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        self.records = sum(len(b.records) for b in reader.batches())

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        pass


def raft_node(tmp_path: Path, port: int) -> RaftNode:
    metadata_log = MetadataLog.open(tmp_path / "data")
    return RaftNode(
        node_id=1,
        voters={1: VoterAddress(1, "127.0.0.1", port)},
        cluster_id="replay",
        log=metadata_log,
        store=QuorumStateStore(metadata_log.dir),
        config=FAST,
        faults=LoggingFaultHandler(),
    )


async def caught_up(node: RaftNode, listener: Recorder) -> None:
    async with asyncio.timeout(10):
        while not (node.core is not None and node.core.is_leader and node.high_watermark > 0):
            await asyncio.sleep(0.01)
        while listener.next_offset < node.high_watermark:
            await asyncio.sleep(0.01)


async def write_history(tmp_path: Path, port: int, batches: int, snapshot_after: int) -> None:
    """A log of ``batches`` batches of 10 records, with a snapshot (of 500 records) after the first
    ``snapshot_after`` of them."""
    node = raft_node(tmp_path, port)
    listener = Recorder()
    node.register(listener)
    node.start()
    await caught_up(node, listener)
    epoch = node.leader_and_epoch.epoch
    for i in range(batches):
        offset = node.append_atomic(epoch, [b"r%d-%d" % (i, j) for j in range(10)])
        await node.wait_committed(offset, epoch)  # one batch each
        if i == snapshot_after - 1:
            writer = node.create_snapshot(SnapshotId(offset + 1, epoch), 0)
            assert writer is not None
            for k in range(50):
                writer.append([b"s%d-%d" % (k, j) for j in range(10)])
            await writer.freeze()
    await node.shutdown(graceful=False)


@pytest.mark.parametrize("interval_s", [0.0, 60.0], ids=["small-interval", "default-like"])
async def test_a_replay_at_start_logs_progress_then_a_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interval_s: float
) -> None:
    (port,) = free_ports(1)
    await write_history(tmp_path, port, batches=60, snapshot_after=20)
    monkeypatch.setattr(progress, "INTERVAL_S", interval_s)
    node = raft_node(tmp_path, port)
    listener = Recorder()
    with structlog.testing.capture_logs() as events:
        node.register(listener)  # as the controller does: the snapshot loads now
        node.start()
        try:
            await caught_up(node, listener)
        finally:
            await node.shutdown(graceful=False)
    assert listener.records == 500 + 40 * 10
    lines = [e for e in events if e.get("replay") in ("snapshot", "log")]
    (delivered,) = [e for e in events if e["event"] == "snapshot_delivered"]
    (replayed,) = [e for e in events if e["event"] == "log_replayed"]
    assert delivered["records"] == 500
    assert replayed["records"] >= 400 and replayed["records_per_s"] > 0 and replayed["seconds"] >= 0
    assert replayed["to_offset"] >= replayed["from_offset"] + 40 * 10
    if interval_s > 1:
        assert lines == []  # a short replay: nothing but the summaries
        return
    snapshot = [e for e in lines if e["replay"] == "snapshot"]
    replay = [e for e in lines if e["replay"] == "log"]
    # At interval 0 every batch logs a line: the snapshot's one batch, the log's 40.
    assert len(snapshot) >= 1 and len(replay) == 40, (snapshot, replay)
    assert snapshot[-1]["records"] == 500 and snapshot[-1]["percent"] > 90 and snapshot[-1]["snapshot"]
    records = [e["records"] for e in replay]
    assert records == list(range(10, 401, 10))
    assert [e["percent"] for e in replay] == sorted(e["percent"] for e in replay) and replay[-1]["percent"] == 100
    assert replay[-1]["eta_s"] == 0 and all(e["eta_s"] >= 0 for e in replay)
    for e in [*snapshot, *replay]:
        assert e["records_per_s"] > 0 and e["elapsed_s"] >= 0 and 0 < e["percent"] <= 100, e
    assert all(e["node_id"] == 1 and e["log_level"] == "info" for e in lines)
