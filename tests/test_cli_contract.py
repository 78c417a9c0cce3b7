"""The command-line contract, in process (no cluster): exports hold exactly their manifest's files and `audit` / `log
dump` refuse anything else; bad paths and arguments are one-line errors naming the flag; every option has help.

Everything here fails before a server is dialled or Spark starts, so it runs in a few seconds."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from audit.cli import check_as_of, last_offset
from audit.source import select_files
from pykraft.cli import build_parser, main
from pykraft.demo import write_demo_log
from pykraft.manifest import MANIFEST
from quorum.log.log import METADATA_PARTITION_DIR


def one_line(text: str) -> str:
    text = text.strip()
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


@pytest.fixture
def node_dir(tmp_path: Path) -> Path:
    data = tmp_path / "node"
    write_demo_log(str(data))
    return data


@pytest.fixture
def export(tmp_path: Path, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "export"
    assert main(["export", "--data-dir", str(node_dir), "--out", str(out)]) == 0
    capsys.readouterr()
    return out


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse usage errors
        code = int(e.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# -- export ----------------------------------------------------------------------------------------------------------


def test_export_refuses_a_non_empty_out_unless_forced(
    export: Path, node_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads((export / MANIFEST).read_text())
    stale = export / METADATA_PARTITION_DIR / f"{999:020d}.log"
    stale.write_bytes(b"left over from an earlier export")
    code, _, err = run(["export", "--data-dir", str(node_dir), "--out", str(export)], capsys)
    assert code == 1 and "not empty" in one_line(err) and "--force" in err, err
    assert stale.exists(), "a refused export must not touch --out"

    code, _, err = run(["export", "--data-dir", str(node_dir), "--out", str(export), "--force"], capsys)
    assert code == 0, err
    assert not stale.exists(), "--force clears --out first"
    again = json.loads((export / MANIFEST).read_text())
    assert again["files"] == manifest["files"], "the same log exports to the same files"
    listed = {f"{METADATA_PARTITION_DIR}/{p.name}" for p in (export / METADATA_PARTITION_DIR).iterdir()}
    assert listed == set(again["files"]), (listed, again["files"])


def test_export_out_problems_are_one_line(tmp_path: Path, node_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _, err = run(["export", "--data-dir", str(node_dir), "--out", str(a_file)], capsys)
    assert code == 1 and "is not a directory" in one_line(err), err
    code, _, err = run(["export", "--data-dir", str(node_dir), "--out", str(node_dir / "inside"), "--force"], capsys)
    assert code == 1 and "overlaps --data-dir" in one_line(err), err
    code, _, err = run(["export", "--data-dir", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")], capsys)
    assert code == 1 and "no metadata log here" in one_line(err), err


# -- audit and log dump read only what the manifest lists -----------------------------------------------------------


def test_a_stale_file_in_an_export_is_refused(export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["log", "dump", str(export)], capsys)
    assert code == 0 and out, err
    stale = export / METADATA_PARTITION_DIR / f"{999:020d}.log"
    stale.write_bytes((export / METADATA_PARTITION_DIR / f"{0:020d}.log").read_bytes())
    for argv in (["log", "dump", str(export)], ["audit", str(export), "--out", str(tmp_path / "audit")]):
        started = time.monotonic()
        code, out, err = run(argv, capsys)
        assert code == 1 and out == "", (argv, out)
        message = one_line(err)
        assert f"{stale}: file not in manifest" in message, message
        assert time.monotonic() - started < 10, "refused before any Spark work"
    assert not (tmp_path / "audit").exists(), "--out is only made once the input is accepted"


def test_an_altered_file_in_an_export_is_refused(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    segment = export / METADATA_PARTITION_DIR / f"{0:020d}.log"
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF
    segment.write_bytes(bytes(data))
    for argv in (
        ["log", "dump", str(export)],
        ["log", "dump", str(segment)],
        ["audit", str(export), "--out", str(tmp_path / "audit")],
    ):
        code, _, err = run(argv, capsys)
        assert code == 1 and f"{segment}: checksum mismatch" in one_line(err), (argv, err)
    segment.unlink()
    code, _, err = run(["log", "dump", str(export)], capsys)
    assert code == 1 and "listed in" in one_line(err) and "but missing" in err, err


def test_a_node_directory_without_a_manifest_is_read_as_it_is(
    node_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["log", "dump", str(node_dir)], capsys)
    assert code == 0 and out, err


def test_audit_checks_as_of_offset_and_out_before_spark(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = json.loads((export / MANIFEST).read_text())
    files = select_files(export)
    last = last_offset(files)
    assert last is not None and last == manifest["log_end_offset"] - 1
    check_as_of(last, files, manifest)  # the last offset itself is fine
    check_as_of(last, files, None)  # (found by reading the log when there is no manifest)
    for as_of in (last + 1, 10**9):
        code, _, err = run(["audit", str(export), "--out", str(tmp_path / "a"), "--as-of-offset", str(as_of)], capsys)
        assert code == 1 and f"last offset is {last:,}" in one_line(err) and "--as-of-offset" in err, err
    code, _, err = run(["audit", str(export), "--out", str(tmp_path / "a"), "--as-of-offset", "-1"], capsys)
    assert code == 1 and "--as-of-offset -1" in one_line(err), err
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _, err = run(["audit", str(export), "--out", str(a_file)], capsys)
    assert code == 1 and "--out" in one_line(err) and "not a directory" in err, err
    inside = export / METADATA_PARTITION_DIR / "report"
    code, _, err = run(["audit", str(export), "--out", str(inside)], capsys)
    assert code == 1 and "inside the log directory" in one_line(err), err


# -- cluster and argument errors ---------------------------------------------------------------------------------------


def test_cluster_up_argument_and_path_errors_name_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _, err = run(["cluster", "up", "--data-dir", str(a_file)], capsys)
    assert code == 1 and f"--data-dir {a_file}: exists and is not a directory" in one_line(err), err
    for flag, value in (("--brokers", "-1"), ("--controllers", "0"), ("--racks", "0"), ("--timeout", "0")):
        code, _, err = run(["cluster", "up", "--data-dir", str(tmp_path / "d"), flag, value], capsys)
        assert code == 2 and f"argument {flag}:" in one_line(err), (flag, err)
    assert not (tmp_path / "d").exists(), "nothing started or made for a bad command line"


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "--list"],
        ["configs", "--describe", "--entity-type", "topics"],
        ["leader-election", "--election-type", "preferred", "--all-topic-partitions"],
        ["reassign-partitions", "--list"],
        ["quorum", "describe"],
        ["snapshot", "create"],
        ["cluster", "describe"],
        ["export", "--out", "x"],
    ],
)
def test_every_bootstrap_server_is_checked_the_same_way(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    for bad, why in (("127.0.0.1", "is not HOST:PORT"), ("h:99999", "port from 1 to 65535"), ("::1:9091", "IPv6")):
        code, out, err = run([*argv, "--bootstrap-server", bad], capsys)
        assert code == 2 and out == "", (argv, out)
        message = one_line(err)
        assert "argument --bootstrap-server:" in message and why in message, (argv, message)


def _parsers(parser: argparse.ArgumentParser, path: str = "pykraft") -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _parsers(sub, f"{path} {name}")
    return found


def test_every_option_has_help_and_shows_its_default() -> None:
    parsers = _parsers(build_parser())
    assert len(parsers) > 15
    for path, parser in parsers:
        text = parser.format_help()
        for action in parser._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS or "-h" in action.option_strings:
                continue
            assert action.help, f"{path} {action.option_strings[-1]} has no help text"
            default = action.default
            if default not in (None, False, argparse.SUPPRESS, []) and "default" not in action.help.lower():
                shown = f"(default: {default})"
                assert shown in " ".join(text.split()), f"{path} {action.option_strings[-1]}: {shown} not in help"
