"""The authorization switch (``authorizer.class.name``) as a node setting, and the client host an ACL's host is held
to, from gRPC's peer strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.authorization import STANDARD_AUTHORIZER, authorizer_enabled, client_host
from pykraft.cli import build_parser
from pykraft.node import ConfigError, NodeSettings, settings_from_args

VOTERS = "1@127.0.0.1:19091"


def node_settings(tmp_path: Path, *overrides: str) -> NodeSettings:
    argv = ["node", "--node-id", "1", "--controller-quorum-voters", VOTERS, "--data-dir", str(tmp_path)]
    for o in overrides:
        argv += ["--override", o]
    return settings_from_args(build_parser().parse_args(argv))


@pytest.mark.parametrize(
    ("value", "enabled"), [("", False), ("  ", False), (STANDARD_AUTHORIZER, True), ("StandardAuthorizer", True)]
)
def test_kafkas_standard_authorizer_turns_it_on(tmp_path: Path, value: str, enabled: bool) -> None:
    assert authorizer_enabled(value) is enabled
    settings = node_settings(tmp_path, f"authorizer.class.name={value}")
    assert authorizer_enabled(settings.controller.authorizer_class_name) is enabled


def test_off_by_default(tmp_path: Path) -> None:
    assert node_settings(tmp_path).controller.authorizer_class_name == ""


@pytest.mark.parametrize("value", ["kafka.security.authorizer.AclAuthorizer", "standardauthorizer", "x.Standard"])
def test_any_other_class_is_refused_at_start(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=rf"authorizer\.class\.name: '{value}' is not an authorizer pykraft has"):
        node_settings(tmp_path, f"authorizer.class.name={value}")


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:127.0.0.1:50123", "127.0.0.1"),
        ("ipv4:10.1.2.3:1", "10.1.2.3"),
        ("ipv6:[::1]:50123", "::1"),
        ("ipv6:%5B::1%5D:50123", "::1"),  # gRPC percent-encodes the brackets in some versions
        ("ipv6:[2001:db8:0:0:0:0:0:7]:9", "2001:db8::7"),  # one spelling per address: the short form
        ("ipv6:[::ffff:192.168.0.4]:9", "192.168.0.4"),  # an IPv4 client on a dual-stack listener
        ("unix:/tmp/sock", "unix:/tmp/sock"),
    ],
)
def test_client_host_from_grpc_peer(peer: str, host: str) -> None:
    assert client_host(peer) == host
