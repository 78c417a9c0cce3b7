"""``pykraft log dump`` end to end: the real CLI as a subprocess (and ``pykraft.cli.main`` in-process) over logs
written by ``pykraft demo``, a hand-built snapshot, and damaged or foreign files."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import random
import shlex
import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import crc32c
import pytest
import structlog

from controller.records import (
    ConfigRecord,
    FeatureLevelRecord,
    PartitionRecord,
    TopicRecord,
    Uuid,
    serialize,
)
from pykraft import demo
from pykraft.cli import main
from quorum.log.batch import CRC_START, build_batch
from quorum.log.log import METADATA_PARTITION_DIR, PREALLOCATE_CHUNK, LogConfig, MetadataLog
from quorum.log.snapshots import SnapshotFileWriter, SnapshotId

REPO = Path(__file__).resolve().parent.parent
SEGMENT = "00000000000000000000.log"
BATCH_KEYS = {"baseOffset", "lastOffset", "count", "epoch", "isControl", "crcValid", "position", "size", "createTime"}

# What one `pykraft demo` run appends (pykraft/demo.py): on an empty log the leader change, the bootstrap
# transaction, one registration per broker and one batch unfencing them all; on every run a topic with its config
# and three partitions, a NoOp and a partition change.
N_BROKERS = len(demo.BROKERS)
EVERY_RUN = Counter(
    LeaderChangeMessage=1, TopicRecord=1, ConfigRecord=1, PartitionRecord=3, NoOpRecord=1, PartitionChangeRecord=1
)
FIRST_RUN = EVERY_RUN + Counter(
    BeginTransactionRecord=1,
    FeatureLevelRecord=1,
    ZkMigrationStateRecord=1,
    EndTransactionRecord=1,
    RegisterBrokerRecord=N_BROKERS,
    BrokerRegistrationChangeRecord=N_BROKERS,
)
FIRST_END = FIRST_RUN.total()  # 18
SECOND_END = FIRST_END + EVERY_RUN.total()  # 26


# -- helpers ---------------------------------------------------------------------------------------------------


def cli_env(*, unbuffered: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)  # the user's default: a block-buffered stdout when it is a pipe
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(),
        timeout=60,
    )


def dump(path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return run_cli("log", "dump", path, *flags)


def parse(stdout: str) -> list[dict]:
    """Every line of the output is one JSON object."""
    assert stdout.endswith("\n") or stdout == ""
    lines = []
    for text in stdout.splitlines():
        obj = json.loads(text)
        assert isinstance(obj, dict), text
        lines.append(obj)
    return lines


def kinds(lines: list[dict]) -> list[str]:
    out = []
    for line in lines:
        if "file" in line and "kind" in line:
            out.append("file")
        elif "error" in line and "offset" not in line:
            out.append("error")
        elif "baseOffset" in line:
            out.append("batch")
        else:
            assert "offset" in line, line
            out.append("record")
    return out


def records_of(lines: list[dict]) -> list[dict]:
    return [line for line, k in zip(lines, kinds(lines), strict=True) if k == "record"]


def batches_of(lines: list[dict]) -> list[dict]:
    return [line for line, k in zip(lines, kinds(lines), strict=True) if k == "batch"]


def check_structure(lines: list[dict]) -> None:
    """File line first; each batch line followed by exactly its records, at its offsets; files' batches laid end
    to end."""
    ks = kinds(lines)
    assert ks[0] == "file"
    i = 0
    position = None
    while i < len(lines):
        if ks[i] == "file":
            position = 0
            i += 1
            continue
        if ks[i] == "error":
            i += 1
            continue
        assert ks[i] == "batch", lines[i]
        batch = lines[i]
        assert BATCH_KEYS <= batch.keys()
        assert batch["position"] == position
        position += batch["size"]
        assert batch["lastOffset"] - batch["baseOffset"] + 1 == batch["count"]
        recs = lines[i + 1 : i + 1 + batch["count"]]
        assert [r["offset"] for r in recs] == list(range(batch["baseOffset"], batch["lastOffset"] + 1))
        assert all(k == "record" for k in ks[i + 1 : i + 1 + batch["count"]])
        i += 1 + batch["count"]


def one_stderr_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("pykraft: "), stderr
    return lines[0]


def write_log(directory: Path, batches: list[bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / SEGMENT
    path.write_bytes(b"".join(batches))
    return path


def set_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[CRC_START:])))
    return batch


# -- fixtures --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir after two `pykraft demo` runs (two leader epochs), written by the real CLI."""
    data = tmp_path_factory.mktemp("demo")
    for first, end in ((0, FIRST_END), (FIRST_END, SECOND_END)):
        result = run_cli("demo", "--data-dir", data)
        assert result.returncode == 0, result.stderr
        assert result.stdout == ""
        assert f"wrote offsets {first}..{end - 1} to " in result.stderr
    return data


@pytest.fixture(scope="module")
def demo_dump(demo_dir: Path) -> list[dict]:
    result = dump(demo_dir)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return parse(result.stdout)


@pytest.fixture
def segment_copy(demo_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the demo segment, to damage."""
    path = tmp_path / METADATA_PARTITION_DIR / SEGMENT
    path.parent.mkdir()
    shutil.copyfile(demo_dir / METADATA_PARTITION_DIR / SEGMENT, path)
    return path


def make_snapshot(directory: Path, end_offset: int, epoch: int) -> tuple[Path, Uuid]:
    """A snapshot written by SnapshotFileWriter as Kafka's RecordsSnapshotWriter lays it out (docs/snapshots.md): a
    control batch with the header, data batches, a control batch with the footer, offsets restarting at 0."""
    ts = 1_700_000_000_000
    topic_id = Uuid.from_int(0xAB)
    data1 = [
        FeatureLevelRecord(name="metadata.version", feature_level=demo.METADATA_VERSION_4_0_IV0),
        TopicRecord(name="snap", topic_id=topic_id),
    ]
    data2 = [
        PartitionRecord(
            partition_id=0, topic_id=topic_id, replicas=[1, 2], isr=[1, 2], leader=1, directories=[Uuid.from_int(1)] * 2
        ),
        ConfigRecord(resource_type=demo.TOPIC_RESOURCE, resource_name="snap", name="cleanup.policy", value="compact"),
    ]
    directory.mkdir(parents=True, exist_ok=True)
    # 200 bytes a batch: data1 fills one (123 bytes), data2 the next, so the dump shows two data batches.
    writer = SnapshotFileWriter(directory, SnapshotId(end_offset, epoch), ts - 5, max_batch_bytes=200, timestamp_ms=ts)
    writer.append([serialize(r) for r in data1 + data2])
    writer.freeze()
    return directory / f"{end_offset:020d}-{epoch:010d}.checkpoint", topic_id


# -- a log written by `pykraft demo` ---------------------------------------------------------------------------


def test_demo_dump_lines_and_structure(demo_dump: list[dict], demo_dir: Path) -> None:
    assert kinds(demo_dump).count("file") == 1
    assert demo_dump[0] == {"file": str(demo_dir / METADATA_PARTITION_DIR / SEGMENT), "kind": "segment"}
    check_structure(demo_dump)
    for batch in batches_of(demo_dump):
        assert batch["crcValid"] is True
        assert batch["magic"] == 2
        assert batch["compression"] == "none"
        assert batch["isTransactional"] is False
        assert (batch["producerId"], batch["producerEpoch"], batch["baseSequence"]) == (-1, -1, -1)
        assert batch["createTime"] == batch["maxTimestamp"] > 0
    for rec in records_of(demo_dump):
        assert {"offset", "type", "version", "data"} <= rec.keys()
        assert "error" not in rec
        assert isinstance(rec["type"], str) and rec["type"][0].isupper()
        assert isinstance(rec["version"], int) and rec["version"] >= 0
        assert isinstance(rec["data"], dict)


def test_demo_offsets_contiguous_across_batches(demo_dump: list[dict]) -> None:
    batches = batches_of(demo_dump)
    assert batches[0]["baseOffset"] == 0
    for prev, nxt in itertools.pairwise(batches):
        assert nxt["baseOffset"] == prev["lastOffset"] + 1
    assert batches[-1]["lastOffset"] == SECOND_END - 1
    assert [r["offset"] for r in records_of(demo_dump)] == list(range(SECOND_END))


def test_demo_record_counts_per_type(demo_dump: list[dict]) -> None:
    records = records_of(demo_dump)
    assert Counter(r["type"] for r in records[:FIRST_END]) == FIRST_RUN
    assert Counter(r["type"] for r in records[FIRST_END:]) == EVERY_RUN
    assert Counter(r["type"] for r in records) == FIRST_RUN + EVERY_RUN


def test_demo_epochs_and_control_batches(demo_dump: list[dict]) -> None:
    batches = batches_of(demo_dump)
    assert {b["epoch"] for b in batches if b["lastOffset"] < FIRST_END} == {1}
    assert {b["epoch"] for b in batches if b["baseOffset"] >= FIRST_END} == {2}
    control = [b for b in batches if b["isControl"]]
    assert [b["baseOffset"] for b in control] == [0, FIRST_END]
    changes = [r for r in records_of(demo_dump) if r["type"] == "LeaderChangeMessage"]
    assert [r["offset"] for r in changes] == [0, FIRST_END]
    for rec, epoch in zip(changes, (1, 2), strict=True):
        assert rec["controlType"] == 2
        assert rec["version"] == 0
        assert rec["data"]["leaderId"] == demo.VOTERS[(epoch - 1) % len(demo.VOTERS)]
        assert [v["voterId"] for v in rec["data"]["voters"]] == list(demo.VOTERS)
        assert [v["voterId"] for v in rec["data"]["grantingVoters"]] == list(demo.VOTERS[:2])


def test_demo_record_contents(demo_dump: list[dict]) -> None:
    records = records_of(demo_dump)
    by_type: dict[str, list[dict]] = {}
    for r in records:
        by_type.setdefault(r["type"], []).append(r)
    assert by_type["FeatureLevelRecord"][0]["data"] == {"name": "metadata.version", "featureLevel": 22}
    assert [r["data"]["brokerId"] for r in by_type["RegisterBrokerRecord"]] == list(demo.BROKERS)
    assert {r["version"] for r in by_type["RegisterBrokerRecord"]} == {3}
    topics = by_type["TopicRecord"]
    assert [t["data"]["name"] for t in topics] == ["demo-1", "demo-2"]
    ids = [t["data"]["topicId"] for t in topics]
    for topic_id in ids:  # base64url, no padding, as Kafka prints UUIDs
        assert len(topic_id) == 22 and "=" not in topic_id and "+" not in topic_id and "/" not in topic_id
    assert ids[0] != ids[1]
    assert [c["data"]["resourceName"] for c in by_type["ConfigRecord"]] == ["demo-1", "demo-2"]
    parts = by_type["PartitionRecord"]
    assert [p["data"]["topicId"] for p in parts] == [ids[0]] * 3 + [ids[1]] * 3
    assert [p["data"]["partitionId"] for p in parts] == [0, 1, 2] * 2
    for p in parts:
        assert p["version"] == 1
        assert p["data"]["leader"] == p["data"]["replicas"][0]
        assert p["data"]["isr"] == p["data"]["replicas"]
    assert [c["data"]["topicId"] for c in by_type["PartitionChangeRecord"]] == ids


@pytest.mark.parametrize("which", ["data dir", "partition dir", "segment file"])
def test_dump_accepts_every_kind_of_path(demo_dir: Path, demo_dump: list[dict], which: str) -> None:
    path = {
        "data dir": demo_dir,
        "partition dir": demo_dir / METADATA_PARTITION_DIR,
        "segment file": demo_dir / METADATA_PARTITION_DIR / SEGMENT,
    }[which]
    result = dump(path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert parse(result.stdout) == demo_dump


def test_batches_only(demo_dir: Path, demo_dump: list[dict]) -> None:
    result = dump(demo_dir, "--batches-only")
    assert result.returncode == 0, result.stderr
    lines = parse(result.stdout)
    assert lines == [line for line in demo_dump if "offset" not in line]
    assert kinds(lines).count("batch") == len(batches_of(demo_dump))


def test_in_process_main_matches_subprocess(demo_dir: Path, demo_dump: list[dict], capsys) -> None:
    assert main(["log", "dump", str(demo_dir)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert parse(out) == demo_dump


def test_in_process_main_writes_to_the_current_stdout(demo_dir: Path, demo_dump: list[dict]) -> None:
    """Each call writes to the sys.stdout of the moment (redirect_stdout, a test's capture), not to the one
    pykraft.dump happened to be imported under."""
    for _ in range(2):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert main(["log", "dump", str(demo_dir), "--batches-only"]) == 0
        assert parse(buf.getvalue()) == [line for line in demo_dump if "offset" not in line]


# -- snapshots -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("end_offset", "epoch"), [(26, 2), (0, 0), (12_345_678_901, 2**31 - 1)])
def test_snapshot_checkpoint(tmp_path: Path, end_offset: int, epoch: int) -> None:
    path, topic_id = make_snapshot(tmp_path, end_offset, epoch)
    result = dump(path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = parse(result.stdout)
    assert lines[0] == {"file": str(path), "kind": "snapshot", "endOffset": end_offset, "epoch": epoch}
    check_structure(lines)
    batches = batches_of(lines)
    assert [b["isControl"] for b in batches] == [True, False, False, True]
    assert {b["epoch"] for b in batches} == {epoch}
    assert all(b["crcValid"] for b in batches)
    records = records_of(lines)
    assert [r["offset"] for r in records] == list(range(6))
    assert [r["type"] for r in records] == [
        "SnapshotHeaderRecord",
        "FeatureLevelRecord",
        "TopicRecord",
        "PartitionRecord",
        "ConfigRecord",
        "SnapshotFooterRecord",
    ]
    header, footer = records[0], records[-1]
    assert header["controlType"] == 3 and header["version"] == 0
    assert header["data"] == {"version": 0, "lastContainedLogTimestamp": 1_700_000_000_000 - 5}
    assert footer["controlType"] == 4 and footer["version"] == 0
    assert footer["data"] == {"version": 0}
    assert records[2]["data"] == {"name": "snap", "topicId": str(topic_id)}


def test_directory_with_only_a_snapshot(tmp_path: Path) -> None:
    path, _ = make_snapshot(tmp_path / METADATA_PARTITION_DIR, 6, 3)
    result = dump(tmp_path)
    assert result.returncode == 0, result.stderr
    lines = parse(result.stdout)
    assert lines[0] == {"file": str(path), "kind": "snapshot", "endOffset": 6, "epoch": 3}
    assert len(records_of(lines)) == 6


def test_snapshots_flag_adds_them_after_the_segments(demo_dir: Path, tmp_path: Path, demo_dump: list[dict]) -> None:
    data = tmp_path / "data"
    shutil.copytree(demo_dir, data)
    snap, _ = make_snapshot(data / METADATA_PARTITION_DIR, 26, 2)
    plain = dump(data)
    assert plain.returncode == 0, plain.stderr
    assert [line["file"] for line in parse(plain.stdout) if "file" in line] == [
        str(data / METADATA_PARTITION_DIR / SEGMENT)
    ]
    both = dump(data, "--snapshots")
    assert both.returncode == 0, both.stderr
    lines = parse(both.stdout)
    files = [line for line in lines if "kind" in line]
    assert [f["kind"] for f in files] == ["segment", "snapshot"]
    assert files[1]["file"] == str(snap)
    check_structure(lines)
    assert len(records_of(lines)) == SECOND_END + 6


# -- bad input -------------------------------------------------------------------------------------------------


def _text(tmp: Path) -> Path:
    p = tmp / "notes.txt"
    p.write_text("This is a text file, not a metadata log. It is long enough to hold a whole batch header.\n" * 3)
    return p


def _random(tmp: Path, name: str = "random.log", size: int = 4096) -> Path:
    p = tmp / name
    data = bytearray(random.Random(42).randbytes(size))
    data[16] = 7  # never a magic 2: a random file must not pass for a batch by luck
    p.write_bytes(bytes(data))
    return p


def _short(tmp: Path) -> Path:
    p = tmp / SEGMENT
    p.write_bytes(b"\x00\x01garbage")
    return p


def _empty_dir(tmp: Path) -> Path:
    p = tmp / "empty"
    p.mkdir()
    return p


def _dir_with_text_segment(tmp: Path) -> Path:
    d = tmp / METADATA_PARTITION_DIR
    d.mkdir()
    shutil.copyfile(_text(tmp), d / SEGMENT)
    return d


BAD_INPUTS = {
    "text file": _text,
    "random bytes": _random,
    "random .checkpoint": lambda t: _random(t, f"{5:020d}-{1:010d}.checkpoint"),
    "short garbage": _short,
    "empty directory": _empty_dir,
    "nonexistent path": lambda t: t / "no" / "such" / "path",
    "directory of a text segment": _dir_with_text_segment,
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_not_a_log_is_one_error_line(tmp_path: Path, case: str) -> None:
    path = BAD_INPUTS[case](tmp_path)
    result = dump(path)
    assert result.returncode == 1
    assert result.stdout == ""
    line = one_stderr_line(result.stderr)
    assert str(path) in line


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_not_a_log_in_process(tmp_path: Path, case: str, capsys) -> None:
    path = BAD_INPUTS[case](tmp_path)
    assert main(["log", "dump", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert str(path) in one_stderr_line(err)


@pytest.mark.parametrize("where", ["crc field", "covered byte"])
def test_bad_crc_is_reported_and_the_rest_printed(segment_copy: Path, demo_dump: list[dict], where: str) -> None:
    victim = batches_of(demo_dump)[3]
    data = bytearray(segment_copy.read_bytes())
    # Either the stored CRC itself, or a byte the CRC covers that leaves the records readable (maxTimestamp).
    data[victim["position"] + (20 if where == "crc field" else 42)] ^= 0x01
    segment_copy.write_bytes(bytes(data))
    result = dump(segment_copy)
    assert result.returncode == 1
    line = one_stderr_line(result.stderr)
    assert "1 batches with a bad CRC" in line
    lines = parse(result.stdout)
    check_structure(lines)
    batches = batches_of(lines)
    assert [b["crcValid"] for b in batches] == [b["baseOffset"] != victim["baseOffset"] for b in batches]
    assert len(batches) == len(batches_of(demo_dump))
    assert [(r["offset"], r["type"]) for r in records_of(lines)] == [
        (r["offset"], r["type"]) for r in records_of(demo_dump)
    ]


@pytest.mark.parametrize(
    "junk",
    [b"garbage!" * 3, bytes(range(1, 200)), b"\x00" * 100 + b"x", b"\x00" * 12 + b"\xff" * 60],
    ids=["short text", "200 bytes", "zeros then a byte", "zero offset+length then junk"],
)
def test_trailing_garbage_is_an_error_line(segment_copy: Path, demo_dump: list[dict], junk: bytes) -> None:
    end = segment_copy.stat().st_size
    with open(segment_copy, "ab") as f:
        f.write(junk)
    result = dump(segment_copy)
    assert result.returncode == 1
    line = one_stderr_line(result.stderr)
    assert f"{len(junk)} unreadable bytes" in line and str(segment_copy) in line
    lines = parse(result.stdout)
    assert kinds(lines)[-1] == "error"
    error = lines[-1]
    assert isinstance(error["error"], str) and error["error"]
    assert error["position"] == end
    assert error["invalidBytes"] == len(junk)
    assert lines[0] == {"file": str(segment_copy), "kind": "segment"}
    assert lines[1:-1] == demo_dump[1:]


@pytest.mark.parametrize("zeros", [1, 11, 12, 61, 4 * 1024 * 1024])
def test_trailing_zeros_are_preallocation_not_damage(segment_copy: Path, demo_dump: list[dict], zeros: int) -> None:
    with open(segment_copy, "ab") as f:
        f.write(bytes(zeros))
    result = dump(segment_copy)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = parse(result.stdout)
    assert lines[1:] == demo_dump[1:]


def test_unclosed_log_with_preallocated_tail(tmp_path: Path) -> None:
    """A log whose writer has not closed it yet ends in pre-allocated zeros; dump reads it as it is."""
    preallocating = LogConfig(preallocate_bytes=PREALLOCATE_CHUNK)  # log.preallocate=true
    with structlog.testing.capture_logs(), MetadataLog.open(tmp_path, preallocating) as log:
        log.append(build_batch([(None, serialize(TopicRecord(name="t", topic_id=Uuid.from_int(7))))], epoch=1))
        log.flush()
        segment = tmp_path / METADATA_PARTITION_DIR / SEGMENT
        assert segment.stat().st_size > 1024  # pre-allocated
        result = dump(segment)
    assert result.returncode == 0, result.stderr
    assert [r["type"] for r in records_of(parse(result.stdout))] == ["TopicRecord"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"\x01\x63\x00" + b"\x04abc\x00", "apiKey 99"),
        (b"\x01\x63\x00", "apiKey 99"),
        (b"\x01\x02\x07" + b"\x04abc" + bytes(16) + b"\x00", "version 7"),
        (b"\x00\x02\x00" + b"\x04abc" + bytes(16) + b"\x00", "frame version 0"),
        (b"\x01", "too short"),
    ],
    ids=["unknown apiKey", "unknown apiKey, empty body", "unknown version", "frame version 0", "truncated frame"],
)
def test_undecodable_record_gets_its_own_error_line(tmp_path: Path, value: bytes, message: str) -> None:
    good = serialize(TopicRecord(name="ok", topic_id=Uuid.from_int(1)))
    config = serialize(ConfigRecord(resource_type=2, resource_name="ok", name="retention.ms", value="1"))
    path = write_log(
        tmp_path,
        [
            build_batch([(None, good), (None, value), (None, config)], base_offset=0, epoch=1),
            build_batch([(None, serialize(FeatureLevelRecord(name="x", feature_level=1)))], base_offset=3, epoch=1),
        ],
    )
    result = dump(path)
    assert result.returncode == 1
    assert "1 undecodable records" in one_stderr_line(result.stderr)
    lines = parse(result.stdout)
    check_structure(lines)
    records = records_of(lines)
    assert [r["offset"] for r in records] == [0, 1, 2, 3]
    assert [r["type"] for r in records] == ["TopicRecord", None, "ConfigRecord", "FeatureLevelRecord"]
    bad = records[1]
    assert message in bad["error"]
    assert bad["value"] == value.hex()
    assert "data" not in bad or bad["data"] is None
    assert all(b["crcValid"] for b in batches_of(lines))


def test_records_that_do_not_fill_their_batch(tmp_path: Path) -> None:
    """A CRC-valid batch whose record count disagrees with its records: one error line for the batch, the next
    batch still printed."""
    value = serialize(TopicRecord(name="ok", topic_id=Uuid.from_int(1)))
    bad = bytearray(build_batch([(None, value), (None, value)], base_offset=0, epoch=1))
    struct.pack_into(">i", bad, 57, 1)  # recordsCount 1 (lastOffsetDelta still says 2 records)
    path = write_log(tmp_path, [bytes(set_crc(bad)), build_batch([(None, value)], base_offset=2, epoch=1)])
    result = dump(path)
    assert result.returncode == 1
    one_stderr_line(result.stderr)
    lines = parse(result.stdout)
    assert kinds(lines) == ["file", "batch", "error", "batch", "record"]
    assert lines[2]["baseOffset"] == 0 and lines[2]["position"] == 0
    assert lines[4]["offset"] == 2


# -- a reader that leaves early --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log whose dump (~1 MB) is far bigger than a pipe's buffer."""
    data = tmp_path_factory.mktemp("big")
    with structlog.testing.capture_logs(), MetadataLog.open(data) as log:
        for i in range(300):
            records = [TopicRecord(name=f"topic-{i}-{j}", topic_id=Uuid.from_int(i * 100 + j)) for j in range(20)]
            log.append(build_batch([(None, serialize(r)) for r in records], epoch=1, timestamp=1))
    return data


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize("which", ["big", "demo"])
def test_head_closing_the_pipe_is_not_an_error(big_log: Path, demo_dir: Path, which: str, unbuffered: bool) -> None:
    path = big_log if which == "big" else demo_dir
    dump_cmd = shlex.join([sys.executable, "-m", "pykraft", "log", "dump", str(path)])
    cmd = f'{dump_cmd} | head -n 1; echo "status=${{PIPESTATUS[0]}}" >&2'
    result = subprocess.run(
        ["bash", "-c", cmd], capture_output=True, text=True, cwd=REPO, env=cli_env(unbuffered=unbuffered), timeout=60
    )
    assert result.returncode == 0
    first = parse(result.stdout)
    assert len(first) == 1 and first[0]["kind"] == "segment"
    assert "Traceback" not in result.stderr
    assert "Error" not in result.stderr
    assert result.stderr == "status=0\n"


@pytest.fixture(scope="module")
def tiny_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-batch log: its whole dump fits in stdout's buffer, so it is written only when stdout is flushed."""
    path = tmp_path_factory.mktemp("tiny") / SEGMENT
    path.write_bytes(build_batch([(None, serialize(TopicRecord(name="t", topic_id=Uuid.from_int(1))))], epoch=1))
    return path


@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "PYTHONUNBUFFERED"])
@pytest.mark.parametrize("which", ["big", "demo", "tiny"])
def test_reader_gone_before_the_first_write(
    big_log: Path, demo_dir: Path, tiny_log: Path, which: str, unbuffered: bool
) -> None:
    """The reader closes the pipe before pykraft writes anything. With a small dump the broken pipe surfaces only
    when stdout is flushed at the end, and that must not leak an error (or exit code 120) either."""
    path = {"big": big_log, "demo": demo_dir, "tiny": tiny_log}[which]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pykraft", "log", "dump", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=cli_env(unbuffered=unbuffered),
    )
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0, stderr
    assert stderr == ""
