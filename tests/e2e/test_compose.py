"""The Docker packaging, checked without Docker: every docker-compose.yml service runs a valid ``pykraft`` command
(parsed by the real CLI parser, and for nodes turned into settings the way ``pykraft node`` does), the controllers
agree on one voter set that names exactly themselves, brokers bootstrap from those controllers and observe the same
voter set into a volume of their own, and the image's entry point is ``pykraft``. One image is built once and run
by every service; every service has a healthcheck (a valid ``pykraft`` command too) and starts only once what it
depends on is healthy; metrics ports and the controllers' external listeners are published on the host's
127.0.0.1, and the endpoints the controllers advertise are those host ports. The image runs as a non-root user.
With ``docker-compose`` on PATH, ``docker-compose config -q`` accepts the file (no Docker engine needed). Also
``make -n run`` (printed, not executed) starts the local cluster."""

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


def published(service: dict) -> list[tuple[str, int, int]]:
    """``ports`` as (host address, host port, container port); a short-syntax entry without an address is ""."""
    out = []
    for entry in service.get("ports", []):
        *ip, host_port, container_port = str(entry).split("/")[0].split(":")
        out.append((":".join(ip), int(host_port), int(container_port)))
    return out


def servers(bootstrap: str | list[str]) -> list[str]:
    """A parsed ``--bootstrap-server``: some commands keep the text, others parse it into a list."""
    return [s.strip() for s in bootstrap.split(",")] if isinstance(bootstrap, str) else list(bootstrap)


def healthcheck_argv(name: str, service: dict) -> list[str]:
    """The ``pykraft`` command a CMD-SHELL healthcheck runs first (before any ``|``), without ``pykraft``."""
    test = service.get("healthcheck", {}).get("test")
    assert isinstance(test, list) and test[0] == "CMD-SHELL" and len(test) == 2, f"{name}: healthcheck {test!r}"
    argv = shlex.split(test[1].split("|")[0])
    assert argv[0] == "pykraft", f"{name}: the healthcheck runs {argv[0]!r}, not pykraft"
    return argv[1:]


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
        assert args.external_port != me.port, f"{name}: the external listener is the voter port"


def test_controllers_advertise_the_host_ports_they_publish(capsys: pytest.CaptureFixture[str]) -> None:
    """Hints name the leader as the host reaches it: each controller's advertised endpoint is 127.0.0.1 and the
    host port published for its external listener, and every controller advertises the same map."""
    services = compose()["services"]
    controllers = {name: a for name, a in parsed_services(capsys).items() if a.command == "node"}
    maps = {a.advertised_endpoints for a in controllers.values()}
    assert len(maps) == 1 and None not in maps, f"the controllers' --advertised-endpoints differ: {maps}"
    advertised = parse_voters(maps.pop())
    for name, args in controllers.items():
        settings = settings_from_args(args)
        assert settings.advertised == advertised and settings.external_port is not None, name
        mine = advertised[args.node_id]
        external = [(ip, hp) for ip, hp, cp in published(services[name]) if cp == settings.external_port]
        assert external == [(mine.host, mine.port)] and mine.host == "127.0.0.1", (
            f"{name} advertises {mine.host}:{mine.port}, publishes its external port {settings.external_port} "
            f"as {external}"
        )
        voter_port = settings.address.port
        assert all(cp != voter_port for _, _, cp in published(services[name])), f"{name} publishes the voter port"


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
        assert set(services[name].get("depends_on", {})) == set(controllers), f"{name} starts before controllers"
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
    assert {"pyproject.toml", project["project"]["readme"], *project["project"]["license-files"]} <= copied, copied
    # The build context holds what is copied (an allow-list), not .venv or data directories.
    ignore = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()]
    assert ignore[ignore.index("*") + 1 :] and {f"!{c}" for c in copied if c != "."} <= set(ignore), ignore


def test_dockerfile_runs_as_a_user_and_exposes_the_compose_ports(capsys: pytest.CaptureFixture[str]) -> None:
    lines = [line.strip() for line in (REPO / "Dockerfile").read_text().splitlines()]
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), f"the image runs as root: USER {users}"
    exposed = {int(p.split("/")[0]) for line in lines if line.startswith("EXPOSE ") for p in line.split()[1:]}
    installs = [line for line in lines if "pip install" in line]
    assert installs and all("--no-cache-dir" in line and "[audit]" not in line for line in installs), installs
    assert lines[[line.split()[0] for line in lines if line].index("FROM")].startswith("FROM python:3.11-slim")
    for name, args in parsed_services(capsys).items():
        ports = {args.metrics_port} | ({settings_from_args(args).address.port} if args.command == "node" else set())
        if args.command == "node":
            ports.add(args.external_port)
        assert ports <= exposed, f"{name} listens on {sorted(ports)}, the Dockerfile exposes {sorted(exposed)}"


def test_one_image_built_once() -> None:
    services = compose()["services"]
    images = {svc.get("image") for svc in services.values()}
    assert len(images) == 1 and None not in images, f"services run different images: {images}"
    built = [name for name, svc in services.items() if "build" in svc]
    assert len(built) == 1, f"the image is built by {built}: once is enough, the others reuse the tag"


def test_healthchecks_and_healthy_dependencies(capsys: pytest.CaptureFixture[str]) -> None:
    """Every service has a healthcheck that is a valid ``pykraft`` command: a controller asks itself for the
    quorum (describe goes on to the leader), a broker asks the controllers whether it is unfenced. Whatever a
    service depends on must be healthy first, not merely started."""
    services = compose()["services"]
    parsed = parsed_services(capsys)
    for name, svc in services.items():
        argv = healthcheck_argv(name, svc)
        check = parse(f"{name} (healthcheck)", argv, capsys)
        args = parsed[name]
        if args.command == "node":
            me = settings_from_args(args).address
            assert argv[:2] == ["quorum", "describe"], f"{name}: healthcheck {argv}"
            assert servers(check.bootstrap_server) in ([f"127.0.0.1:{me.port}"], [f"{me.host}:{me.port}"]), check
            assert "answeredByRole" in svc["healthcheck"]["test"][1] and check.output == "json", name
        else:
            assert argv[:2] == ["cluster", "describe"], f"{name}: healthcheck {argv}"
            assert servers(check.bootstrap_server) == servers(args.bootstrap_server), (check, args.bootstrap_server)
            assert re.search(rf"\^{args.broker_id} .*unfenced", svc["healthcheck"]["test"][1]), name
        for dependency, how in (svc.get("depends_on") or {}).items():
            assert dependency in services and how == {"condition": "service_healthy"}, f"{name}: {dependency} {how}"
    assert all(isinstance(svc.get("depends_on", {}), dict) for svc in services.values()), "a depends_on is a list"


def test_metrics_ports_published_on_loopback(capsys: pytest.CaptureFixture[str]) -> None:
    services = compose()["services"]
    host_ports: list[int] = []
    for name, args in parsed_services(capsys).items():
        assert args.metrics_port, f"{name} serves no metrics"
        ports = published(services[name])
        assert [cp for _, _, cp in ports].count(args.metrics_port) == 1, f"{name}: metrics not published: {ports}"
        # A published port answers only if the process binds beyond the container's own loopback.
        bound = args.listen_host if args.command == "node" else args.metrics_host
        assert bound == "0.0.0.0", f"{name} serves metrics on {bound}: the published port would not answer"
        assert all(ip == "127.0.0.1" for ip, _, _ in ports), f"{name} publishes beyond the host's loopback: {ports}"
        host_ports += [hp for _, hp, _ in ports]
    assert len(host_ports) == len(set(host_ports)), f"a host port is published twice: {sorted(host_ports)}"


def test_every_service_names_the_same_voters(capsys: pytest.CaptureFixture[str]) -> None:
    voters = {name: a.controller_quorum_voters for name, a in parsed_services(capsys).items()}
    assert len(set(voters.values())) == 1, voters


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_accepts_the_file() -> None:
    r = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "config", "-q"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr


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
