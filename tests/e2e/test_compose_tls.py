"""docker-compose.tls.yml, checked without Docker: merged over docker-compose.yml as compose merges files, its one-shot
``tls-init`` service runs a valid ``pykraft tls create`` (run here as a process, into a temporary directory standing
for the ``tls`` volume) naming every process and ``admin``; every other service waits for it, mounts the volume
read-only and starts with its own properties file, which ``pykraft node`` / ``pykraft broker`` then read as they
would in the container: TLS on, authorization on, metrics over HTTPS, each certificate naming its service (the
host the others dial). The healthchecks pass the admin's properties. With ``docker-compose`` on PATH, ``config -q``
accepts both files together."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from e2e_helpers import REPO

from pykraft.broker import broker_properties, observer_settings, tls_settings
from pykraft.cli import build_parser
from pykraft.metrics_http import metrics_tls_settings
from pykraft.node import settings_from_args
from pykraft.security.command_config import tls_settings_from_command_config

TLS_FILE = "docker-compose.tls.yml"


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((REPO / name).read_text())


def merged() -> dict[str, Any]:
    """docker-compose.yml with docker-compose.tls.yml on top, by compose's rules for what these files use: command
    and healthcheck.test replaced, volumes merged by their target, depends_on merged, new services added."""
    base, over = load("docker-compose.yml"), load(TLS_FILE)
    services = {name: dict(svc) for name, svc in base["services"].items()}
    for name, svc in over["services"].items():
        target = services.setdefault(name, {})
        for key, value in svc.items():
            if key == "volumes":
                mounts = {v.split(":")[1]: v for v in target.get("volumes", [])}
                mounts.update({v.split(":")[1]: v for v in value})
                target["volumes"] = list(mounts.values())
            elif key in ("depends_on", "healthcheck"):
                target[key] = {**target.get(key, {}), **value}
            else:
                target[key] = value
    return {"services": services, "volumes": {**(base.get("volumes") or {}), **(over.get("volumes") or {})}}


def argv_of(svc: dict[str, Any], tls_dir: Path) -> list[str]:
    return [str(c).replace("/tls/", f"{tls_dir}/") for c in svc["command"]]


def healthcheck_argv(svc: dict[str, Any], tls_dir: Path) -> list[str]:
    test = svc["healthcheck"]["test"]
    assert test[0] == "CMD-SHELL", test
    argv = shlex.split(test[1].split("|")[0])
    assert argv[0] == "pykraft", argv
    return [a.replace("/tls/", f"{tls_dir}/") for a in argv[1:]]


@pytest.fixture(scope="module")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What tls-init leaves in the volume: its command run as a process, /tls standing for a temporary directory."""
    directory = tmp_path_factory.mktemp("tls-volume")
    init = merged()["services"]["tls-init"]
    argv = [str(c) for c in init["command"]]
    assert argv[argv.index("--dir") + 1] == "/tls", argv
    argv[argv.index("--dir") + 1] = str(directory)
    pykraft = Path(sys.executable).with_name("pykraft")
    done = subprocess.run([str(pykraft), *argv], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return directory


def test_tls_init_runs_first_and_every_service_mounts_its_volume() -> None:
    compose = merged()
    services = compose["services"]
    init = services.pop("tls-init")
    assert init["image"] == "pykraft:local" and init["volumes"] == ["tls:/tls"], init
    assert "tls" in compose["volumes"]
    names = [str(c) for c in init["command"]][init["command"].index("--authorize") + 1 :]
    assert sorted(names) == sorted([*services, "admin"]), names
    for name, svc in services.items():
        assert svc["depends_on"]["tls-init"] == {"condition": "service_completed_successfully"}, name
        assert "tls:/tls:ro" in svc["volumes"] and f"{name}:/data" in svc["volumes"], (name, svc["volumes"])
        assert [str(c) for c in svc["command"][-2:]] == ["--config", f"/tls/{name}.properties"], name
    # The compose files say how to use it, and the image gives its user the mount point.
    assert TLS_FILE in (REPO / "docker-compose.yml").read_text()
    assert "/tls" in (REPO / "Dockerfile").read_text().split("USER")[0]


def test_each_process_starts_on_tls_with_authorization_and_https_metrics(tls_dir: Path) -> None:
    services = merged()["services"]
    del services["tls-init"]
    parser = build_parser()
    principals = {f"User:{n}" for n in [*services, "admin"]}
    for name, svc in services.items():
        args = parser.parse_args(argv_of(svc, tls_dir))
        if args.command == "node":
            settings = settings_from_args(args)  # loads and checks the files, as `pykraft node` does first
            tls, controller, metrics = settings.tls, settings.controller, settings.metrics_tls
        else:
            tls = tls_settings(args)
            observer = observer_settings(args)
            assert observer is not None, name
            controller = observer.controller
            metrics = metrics_tls_settings(broker_properties(args), tls)
        assert tls is not None and tls.certificate is not None, name
        assert metrics is not None and metrics.tls == tls, f"{name}: metrics not over HTTPS"
        assert controller.authorizer_class_name and set(controller.super_users.split(";")) == principals, name
        cert = x509.load_pem_x509_certificate(tls.certificate.read_bytes())
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert name in sans.get_values_for_type(x509.DNSName), f"{name}: the others dial it by that name"
        assert cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == name


def test_healthchecks_use_the_admin_certificate(tls_dir: Path) -> None:
    services = merged()["services"]
    del services["tls-init"]
    parser = build_parser()
    for name, svc in services.items():
        argv = healthcheck_argv(svc, tls_dir)
        assert argv[argv.index("--command-config") + 1] == str(tls_dir / "admin.properties"), (name, argv)
        check = parser.parse_args(argv)  # reads and checks the file, as the command does
        assert check.tls == tls_settings_from_command_config(tls_dir / "admin.properties"), name
        assert check.tls is not None and check.tls.certificate == tls_dir / "admin.crt", name


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_accepts_both_files() -> None:
    r = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "-f", TLS_FILE, "config", "-q"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr


def test_tls_create_is_idempotent_and_authorizes_only_the_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pykraft.cli import main

    names = ["controller-1", "broker-101", "admin"]
    assert main(["tls", "create", "--dir", str(tmp_path), "--authorize", *names]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(["tls", "create", "--dir", str(tmp_path), "--authorize", *names]) == 0
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # kept byte for byte
    assert (tmp_path / "admin.key").stat().st_mode & 0o777 == 0o600
    assert "authorizer.class.name" in (tmp_path / "broker-101.properties").read_text()
    assert "authorizer.class.name" not in (tmp_path / "admin.properties").read_text()  # a client's file
    assert main(["tls", "create", "--dir", str(tmp_path), "not a name"]) == 2
    assert "invalid principal name" in capsys.readouterr().err
