"""The admin client and the CLIs over mutual TLS, in process: a stand-in Controller service on 127.0.0.1 that
records each caller's principal, served with the cluster CA's certificate for ``controller-1``.

Covers both transports of :class:`AdminClient` (grpc.aio, and the blocking channels of the broker's heartbeat
thread), the server name checks, the one-line causes of refused handshakes, and ``--command-config`` as every
command that dials a cluster takes it."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from pykraft.api import controller_pb2 as pb
from pykraft.api import controller_pb2_grpc as pb_grpc
from pykraft.cli import build_parser, main
from pykraft.client import AdminClient, AdminError
from pykraft.security.ca import CertFiles, ensure_cluster_certificates
from pykraft.security.principal import SslPrincipalMapper, principal_of
from pykraft.security.tls import ReloadingServerCredentials, TlsSettings, channel_credentials
from quorum.errors import Errors


class StandIn(pb_grpc.ControllerServicer):
    """Answers DescribeCluster, DescribeTopics and CreateSnapshot; remembers who asked."""

    def __init__(self) -> None:
        self.callers: list[str] = []
        self.mapper = SslPrincipalMapper()

    async def DescribeCluster(self, request, context):  # type: ignore[no-untyped-def]
        self.callers.append(str(principal_of(context, self.mapper)))
        return pb.DescribeClusterResponse(cluster_id="tls-test", controller_id=1)

    async def DescribeTopics(self, request, context):  # type: ignore[no-untyped-def]
        self.callers.append(str(principal_of(context, self.mapper)))
        response = pb.DescribeTopicsResponse()
        response.topics.add(name="orders", topic_id="AAAAAAAAAAAAAAAAAAAAAA")
        return response

    async def CreateSnapshot(self, request, context):  # type: ignore[no-untyped-def]
        self.callers.append(str(principal_of(context, self.mapper)))
        return pb.CreateSnapshotResponse(node_id=1, end_offset=-1)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CertFiles]:
    return ensure_cluster_certificates(tmp_path_factory.mktemp("ca"), ["controller-1", "admin"])


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    """``admin`` from another CA that trusts our CA's servers: only the server's check can refuse it."""
    return ensure_cluster_certificates(tmp_path_factory.mktemp("other-ca"), ["admin"])["admin"]


def settings(files: CertFiles, ca: Path | None = None) -> TlsSettings:
    return TlsSettings(certificate=files.certificate, key=files.key, ca=ca or files.ca)


@contextlib.asynccontextmanager
async def serving(files: CertFiles | None) -> AsyncIterator[tuple[int, StandIn]]:
    """The stand-in on a free port: mutual TLS with ``files`` (client certificates required), or plaintext."""
    servicer = StandIn()
    server = grpc.aio.server()
    pb_grpc.add_ControllerServicer_to_server(servicer, server)
    if files is None:
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        port = server.add_secure_port("127.0.0.1:0", ReloadingServerCredentials(settings(files)).credentials())
    await server.start()
    try:
        yield port, servicer
    finally:
        await server.stop(None)


def client(port: int, tls: object = None, host: str = "127.0.0.1", **kwargs: object) -> AdminClient:
    return AdminClient(
        f"{host}:{port}",
        tls=tls,
        connect_timeout_ms=1500,
        default_api_timeout_ms=3000,
        **kwargs,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("blocking", [False, True], ids=["aio", "blocking"])
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_the_admin_client_presents_its_certificate(
    certs: dict[str, CertFiles], blocking: bool, host: str
) -> None:
    async with serving(certs["controller-1"]) as (port, servicer):
        async with client(port, settings(certs["admin"]), host, blocking_transport=blocking) as admin:
            assert (await admin.describe_cluster()).cluster_id == "tls-test"
    assert servicer.callers == ["User:admin"]


async def test_ready_credentials_and_an_expected_server_name(certs: dict[str, CertFiles]) -> None:
    credentials = channel_credentials(settings(certs["admin"]))
    async with serving(certs["controller-1"]) as (port, servicer):
        async with client(port, credentials, server_name="controller-1") as admin:
            assert (await admin.describe_cluster()).controller_id == 1
        async with client(port, credentials, server_name="controller-2") as admin:
            with pytest.raises(AdminError, match="does not name the host dialled") as refused:
                await admin.describe_cluster()
    assert refused.value.code == Errors.NETWORK_EXCEPTION
    assert servicer.callers == ["User:admin"], "the wrong server was not asked"


@pytest.mark.parametrize(
    ("who", "cause"),
    [
        ("plaintext", "a TLS server closes plaintext connections: use security.protocol=SSL"),
        ("no certificate", "a TLS server closes connections whose client certificate is missing or untrusted"),
        ("another CA", "a TLS server closes connections whose client certificate is missing or untrusted"),
    ],
)
async def test_refused_clients_get_one_line_saying_why(
    certs: dict[str, CertFiles], stranger: CertFiles, who: str, cause: str
) -> None:
    tls = {
        "plaintext": None,
        "no certificate": TlsSettings(ca=certs["admin"].ca),
        "another CA": settings(stranger, ca=certs["admin"].ca),
    }[who]
    async with serving(certs["controller-1"]) as (port, servicer):
        async with client(port, tls) as admin:
            with pytest.raises(AdminError) as refused:
                await admin.describe_cluster()
    message = str(refused.value)
    assert message.startswith(f"no controller reachable at 127.0.0.1:{port} within 1.5 s"), message
    assert cause in message and "\n" not in message, message
    assert servicer.callers == [], "no handler runs for a refused client"


async def test_a_tls_client_against_a_plaintext_server_says_so(certs: dict[str, CertFiles]) -> None:
    async with serving(None) as (port, _):
        async with client(port, settings(certs["admin"])) as admin:
            with pytest.raises(AdminError, match="the server does not speak TLS"):
                await admin.describe_cluster()


def test_bad_tls_settings_fail_when_the_client_is_made(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    with pytest.raises(ValueError, match=r"ssl\.certificate\.location: .*missing\.crt: no such file"):
        AdminClient("127.0.0.1:1", tls=TlsSettings(certificate=tmp_path / "missing.crt", key=certs["admin"].key))


# -- --command-config ------------------------------------------------------------------------------------------------


def write_config(path: Path, props: dict[str, str]) -> Path:
    path.write_text("# written by the test\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_that_dials_a_cluster_takes_command_config() -> None:
    top = subparsers(build_parser())
    dialling = {
        "topics": top["topics"],
        "leader-election": top["leader-election"],
        "configs": top["configs"],
        "acls": top["acls"],
        "reassign-partitions": top["reassign-partitions"],
        "export": top["export"],
        "quorum describe": subparsers(top["quorum"])["describe"],
        "snapshot create": subparsers(top["snapshot"])["create"],
        "cluster describe": subparsers(top["cluster"])["describe"],
    }
    for name, parser in dialling.items():
        flags = {s for a in parser._actions for s in a.option_strings}
        assert "--bootstrap-server" in flags, name
        assert "--command-config" in flags, f"pykraft {name} has no --command-config"


def test_command_config_is_read_when_the_arguments_are(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    parser = build_parser()
    base = ["topics", "--bootstrap-server", "127.0.0.1:9091", "--list"]
    ssl = write_config(tmp_path / "admin.properties", certs["admin"].properties())
    args = parser.parse_args([*base, "--command-config", str(ssl)])
    assert args.tls == TlsSettings(certificate=certs["admin"].certificate, key=certs["admin"].key, ca=certs["admin"].ca)
    plain = write_config(tmp_path / "plain.properties", {"security.protocol": "PLAINTEXT"})
    assert parser.parse_args([*base, "--command-config", str(plain)]).tls is None
    assert parser.parse_args(base).tls is None


@pytest.mark.parametrize(
    ("props", "error"),
    [
        (None, "no such file"),
        ({"ssl.ca.location": "/tmp/ca.crt"}, "ssl.ca.location is set but security.protocol is PLAINTEXT"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.crt"}, "ssl.ca.location: /nonexistent"),
        ({"security.protocol": "SASL_SSL"}, "security.protocol must be PLAINTEXT or SSL"),
    ],
)
def test_a_bad_command_config_is_a_one_line_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], props: dict[str, str] | None, error: str
) -> None:
    path = tmp_path / "client.properties"
    if props is not None:
        write_config(path, props)
    with pytest.raises(SystemExit) as exited:
        main(["topics", "--bootstrap-server", "127.0.0.1:9091", "--list", "--command-config", str(path)])
    err = capsys.readouterr().err.strip()
    assert exited.value.code == 2
    assert "\n" not in err and "argument --command-config:" in err and error in err, err


async def test_the_cli_uses_the_command_config(
    tmp_path: Path, certs: dict[str, CertFiles], capsys: pytest.CaptureFixture[str]
) -> None:
    config = str(write_config(tmp_path / "admin.properties", certs["admin"].properties()))
    async with serving(certs["controller-1"]) as (port, servicer):
        server = f"127.0.0.1:{port}"

        def run(*argv: str) -> int:  # the CLI runs its own event loop: off this one, which serves the stand-in
            return main(list(argv))

        listed = await asyncio.to_thread(
            run, "topics", "--bootstrap-server", server, "--list", "--command-config", config
        )
        assert (listed, capsys.readouterr().out) == (0, "orders\n")
        snap = await asyncio.to_thread(
            run, "snapshot", "create", "--bootstrap-server", server, "--command-config", config
        )
        assert snap == 0 and "nothing committed yet" in capsys.readouterr().out
        refused = await asyncio.to_thread(
            run, "topics", "--bootstrap-server", server, "--list", "--connect-timeout-ms", "1000"
        )
        err = capsys.readouterr().err.strip()
    assert refused == 1 and "\n" not in err and "security.protocol=SSL" in err, err
    assert servicer.callers == ["User:admin", "User:admin"]


# -- pykraft broker's settings -----------------------------------------------------------------------------------


def broker_args(*extra: str) -> argparse.Namespace:
    return build_parser().parse_args(["broker", "--broker-id", "101", "--bootstrap-server", "127.0.0.1:9091", *extra])


def test_the_broker_takes_tls_settings_as_the_node_does(tmp_path: Path, certs: dict[str, CertFiles]) -> None:
    from pykraft.broker import observer_settings, tls_settings

    files = ensure_cluster_certificates(tmp_path / "ca", ["broker-101"])["broker-101"]
    overrides = [a for k, v in files.properties().items() for a in ("--override", f"{k}={v}")]
    args = broker_args(*overrides)
    assert observer_settings(args) is None, "TLS settings alone do not ask for an observer"
    assert tls_settings(args) == TlsSettings(certificate=files.certificate, key=files.key, ca=files.ca)
    config = write_config(tmp_path / "broker.properties", files.properties())
    assert tls_settings(broker_args("--config", str(config))) == tls_settings(args)
    assert tls_settings(broker_args()) is None, "PLAINTEXT by default"
    voters = ["--controller-quorum-voters", "1@127.0.0.1:9091", "--metadata-dir", str(tmp_path / "m"), *overrides]
    observing = observer_settings(broker_args(*voters))
    assert observing is not None and list(observing.voters) == [1]


@pytest.mark.parametrize(
    ("extra", "error"),
    [
        (["--override", "security.protocol=SSL"], "ssl.certificate.location must be set for a TLS server"),
        (["--override", "ssl.ca.location=/x"], "ssl.ca.location is set but security.protocol is PLAINTEXT"),
        (["--override", "ssl.nonsense=1"], "ssl.nonsense: not a config the broker agent knows"),
        (["--config", "/nonexistent/broker.properties"], "--config /nonexistent/broker.properties"),
    ],
)
def test_bad_broker_tls_settings_are_usage_errors(
    capsys: pytest.CaptureFixture[str], extra: list[str], error: str
) -> None:
    from pykraft import broker

    assert broker.run(broker_args(*extra)) == 2  # not through main(): that would set up the process's logging
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and error in err, err
