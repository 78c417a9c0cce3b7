"""The Docker packaging, checked without Docker: every docker-compose.yml service runs a valid ``pykraft`` command
(parsed by the real CLI parser, and for nodes turned into settings the way ``pykraft node`` does), the controllers
agree on one voter set that names exactly themselves, brokers bootstrap from those controllers and observe the same
voter set into a volume of their own, and the image's entry point is ``pykraft``. Also ``make -n run`` (printed,
not executed) starts the local cluster."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import tomllib
from collections import Counter

import pytest
import yaml
from e2e_helpers import REPO

from pykraft.broker import observer_settings
from pykraft.cli import build_parser
from pykraft.node import settings_from_args
from quorum.raft.config import parse_voters


def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def command(service: dict) -> list[str]:
    cmd = service["command"]
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def parse(name: str, argv: list[str], capsys: pytest.CaptureFixture[str]) -> argparse.Namespace:
    try:
        return build_parser().parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"service {name}: `pykraft {shlex.join(argv)}` is not a valid command (exit {e.code}): "
                    f"{capsys.readouterr().err}")  # fmt: skip


def parsed_services(capsys: pytest.CaptureFixture[str]) -> dict[str, argparse.Namespace]:
    return {name: parse(name, command(svc), capsys) for name, svc in compose()["services"].items()}


def test_every_service_command_is_a_valid_pykraft_invocation(capsys: pytest.CaptureFixture[str]) -> None:
    services = compose()["services"]
    assert services, "docker-compose.yml has no services"
    for name, svc in services.items():
        assert "command" in svc, f"service {name} has no command"
        assert svc.get("build") == "." or "image" in svc, f"service {name}: neither built here nor an image"
    parsed = parsed_services(capsys)
    kinds = Counter(a.command for a in parsed.values())
    assert kinds == {"node": 3, "broker": 6}, kinds
    for name, args in parsed.items():
        if args.command == "node":
            settings = settings_from_args(args)  # what `pykraft node` does first: flags, overrides, voter checks
            assert settings.node_id == args.node_id, name
        else:
            assert args.broker_id >= 0, name
            host, _, port = args.listener.rpartition(":")
            assert host == name and port.isdigit(), f"{name}: advertised listener {args.listener!r}"


def test_controllers_share_one_voter_set_naming_themselves(capsys: pytest.CaptureFixture[str]) -> None:
    services = compose()["services"]
    parsed = parsed_services(capsys)
    controllers = {name: a for name, a in parsed.items() if a.command == "node"}
    voter_lists = {a.controller_quorum_voters for a in controllers.values()}
    assert len(voter_lists) == 1, f"the controllers' --controller-quorum-voters differ: {voter_lists}"
    voters = parse_voters(voter_lists.pop())
    assert {v.host for v in voters.values()} == set(controllers), (voters, sorted(controllers))

    node_ids = [a.node_id for a in controllers.values()]
    assert len(node_ids) == len(set(node_ids)), f"node ids repeat: {node_ids}"
    assert set(node_ids) == set(voters), (node_ids, sorted(voters))
    for name, args in controllers.items():
        me = voters[args.node_id]
        assert me.host == name, f"{name} is node {args.node_id}, but the voter list puts that node on {me.host}"
        assert args.listen_host in (None, "0.0.0.0", name), f"{name}: --listen-host {args.listen_host}"
        published = [str(p).rpartition(":")[2] for p in services[name].get("ports", [])]
        assert str(me.port) in published, f"{name}: listens on {me.port}, publishes {services[name].get('ports')}"
    host_ports = [str(p).split(":")[0] for name in controllers for p in services[name].get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), f"controllers publish the same host port: {host_ports}"


def test_brokers_bootstrap_from_the_controllers(capsys: pytest.CaptureFixture[str]) -> None:
    services = compose()["services"]
    parsed = parsed_services(capsys)
    controllers = {name: a for name, a in parsed.items() if a.command == "node"}
    voters = parse_voters(next(iter(controllers.values())).controller_quorum_voters)
    addresses = {f"{v.host}:{v.port}" for v in voters.values()}
    brokers = {name: a for name, a in parsed.items() if a.command == "broker"}
    ids = [a.broker_id for a in brokers.values()]
    assert len(ids) == len(set(ids)), f"broker ids repeat: {ids}"
    assert not set(ids) & set(voters), "a broker id is also a controller's node id"
    for name, args in brokers.items():
        servers = [s.strip() for s in args.bootstrap_server.split(",")]
        assert servers and set(servers) <= addresses, f"{name}: --bootstrap-server {servers} not in {addresses}"
        assert set(services[name].get("depends_on", [])) >= set(controllers), f"{name} starts before controllers"
    racks = Counter(a.rack for a in brokers.values())
    assert len(racks) == 3 and set(racks.values()) == {2}, f"6 brokers over 3 racks expected: {racks}"


def test_dockerfile_entrypoint_is_pykraft() -> None:
    lines = (REPO / "Dockerfile").read_text().splitlines()
    entry = [line for line in lines if line.strip().upper().startswith("ENTRYPOINT")]
    assert len(entry) == 1, entry
    assert json.loads(entry[0].strip()[len("ENTRYPOINT") :]) == ["pykraft"], entry
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["pykraft"] == "pykraft.cli:main"
    # `pip install .` in the image needs every package the project ships, copied into the build context.
    copied = {src.rstrip("/") for line in lines if line.startswith("COPY ") for src in line.split()[1:-1]}
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        package = pattern.rstrip("*")
        assert (REPO / package).is_dir() and package in copied, f"package {package} is not copied: {copied}"
    assert {"pyproject.toml", project["project"]["readme"]} <= copied, copied


def test_brokers_observe_the_controllers_voter_set_into_their_own_volume(capsys: pytest.CaptureFixture[str]) -> None:
    services = compose()["services"]
    parsed = parsed_services(capsys)
    voters = next(a.controller_quorum_voters for a in parsed.values() if a.command == "node")
    volumes = set(compose().get("volumes") or {})
    mounted: list[str] = []
    for name, args in parsed.items():
        if args.command != "broker":
            continue
        assert args.controller_quorum_voters == voters, f"{name}: observes {args.controller_quorum_voters}"
        settings = observer_settings(args)  # what `pykraft broker` does first: flags, voter and id checks
        assert settings is not None and settings.voters == parse_voters(voters), name
        mounts = [str(v).split(":") for v in services[name].get("volumes", [])]
        holding = [vol for vol, target, *_ in mounts if args.metadata_dir.startswith(target.rstrip("/") + "/")]
        assert len(holding) == 1 and holding[0] in volumes, f"{name}: --metadata-dir {args.metadata_dir} on {mounts}"
        mounted += holding
    assert len(mounted) == len(set(mounted)) == 6, f"brokers share metadata volumes: {mounted}"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_run_starts_the_local_cluster() -> None:
    r = subprocess.run(["make", "-n", "run"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert re.search(r"pykraft cluster up( |$)", r.stdout, re.MULTILINE), r.stdout
