"""The ACL API over gRPC against a real node in this process (a single voter: Raft over gRPC, the QuorumController,
the Controller service; no metrics, whose registry would install the process-wide gc hook of pykraft/gc_pauses.py
for the rest of the test run): the AdminClient's create_acls / describe_acls / delete_acls through the service, and
``pykraft acls`` (run in-process through ``pykraft.cli.main``) printing what kafka-acls.sh prints."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from structlog.testing import capture_logs

from controller.authorizer import (
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AuthorizationResult,
    PatternType,
    ResourceType,
    StandardAcl,
)
from controller.quorum_controller import ControllerSettings, QuorumController
from pykraft.api import controller_pb2 as pb
from pykraft.cli import main
from pykraft.client import AdminClient, AdminError
from pykraft.service import ControllerService
from pykraft.testing import free_ports
from quorum.errors import Errors
from quorum.fault import LoggingFaultHandler
from quorum.log.log import MetadataLog
from quorum.log.quorum_state import QuorumStateStore
from quorum.raft.config import RaftConfig, VoterAddress
from quorum.raft.runtime import RaftNode

Op, Perm, Res, Pat = AclOperation, AclPermissionType, ResourceType, PatternType
FAST = RaftConfig(election_timeout_ms=50, fetch_timeout_ms=200, request_timeout_ms=200)


def acl(
    name: str = "orders", op: int = Op.READ, perm: int = Perm.ALLOW, principal: str = "User:alice", **kw
) -> StandardAcl:  # type: ignore[no-untyped-def]
    return StandardAcl(
        kw.get("rtype", Res.TOPIC), name, kw.get("pattern", Pat.LITERAL), principal, kw.get("host", "*"), op, perm
    )


@dataclass
class LiveNode:
    controller: QuorumController
    admin: AdminClient
    bootstrap: str


@asynccontextmanager
async def live_node(tmp_path: Path) -> AsyncIterator[LiveNode]:
    """Node 1, leading alone once its election timeout passed; stopped (server included) on the way out."""
    [port] = free_ports(1)
    voters = {1: VoterAddress(1, "127.0.0.1", port)}
    metadata_log = MetadataLog.open(tmp_path / "controller")
    faults = LoggingFaultHandler()
    node = RaftNode(
        node_id=1,
        voters=voters,
        cluster_id="acls",
        log=metadata_log,
        store=QuorumStateStore(metadata_log.dir),
        config=FAST,
        faults=faults,
    )
    controller = QuorumController(1, node, ControllerSettings(max_idle_interval_ms=0), faults)
    server = grpc.aio.server()
    node.transport.add_to_server(server)
    ControllerService(controller, "acls", voters).add_to_server(server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    controller.start()
    node.start()
    try:
        async with AdminClient(f"127.0.0.1:{port}", request_timeout_ms=5000, default_api_timeout_ms=15_000) as admin:
            yield LiveNode(controller, admin, f"127.0.0.1:{port}")
    finally:
        await controller.close()
        await node.shutdown(graceful=False)
        await server.stop(0)


async def test_admin_client_round_trip(tmp_path: Path) -> None:
    async with live_node(tmp_path) as live:
        admin = live.admin
        results = await admin.create_acls([acl(), acl(name="pay", pattern=Pat.PREFIXED, op=Op.WRITE), acl(op=Op.ANY)])
        assert [r.error.code for r in results] == [Errors.NONE, Errors.NONE, Errors.INVALID_REQUEST]
        assert results[2].error.message == "Invalid operation ANY"
        assert await admin.describe_acls() == [acl(), acl(name="pay", pattern=Pat.PREFIXED, op=Op.WRITE)]
        matched = await admin.describe_acls(AclBindingFilter(Res.TOPIC, "payments", Pat.MATCH))
        assert matched == [acl(name="pay", pattern=Pat.PREFIXED, op=Op.WRITE)]
        assert await admin.describe_acls(AclBindingFilter(Res.TOPIC, "orders", Pat.ANY, principal="User:bob")) == []
        authorize = live.controller.authorizer.authorize
        assert authorize("User:alice", "127.0.0.1", Op.DESCRIBE, Res.TOPIC, "payments") == AuthorizationResult.ALLOWED
        with pytest.raises(AdminError) as e:
            await admin.describe_acls(AclBindingFilter(resource_type=Res.UNKNOWN))
        assert e.value.code == Errors.INVALID_REQUEST and "Unknown patternFilter." in str(e.value)
        [gone, bad] = await admin.delete_acls(
            [AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH), AclBindingFilter(operation=0)]
        )
        assert gone.matching == (acl(),) and not gone.error.failed
        assert (bad.error.code, bad.error.message) == (Errors.INVALID_REQUEST, "Unknown entryFilter.")
        assert await admin.describe_acls() == [acl(name="pay", pattern=Pat.PREFIXED, op=Op.WRITE)]
        assert authorize("User:alice", "127.0.0.1", Op.READ, Res.TOPIC, "orders") == AuthorizationResult.DENIED
        # the request's own shape: a negative timeout is refused before the controller sees it
        response = await admin._call("CreateAcls", pb.CreateAclsRequest(timeout_ms=-1))
        assert response.error_code == Errors.INVALID_REQUEST and "timeout_ms" in response.error_message


def _kafka_block(header: str, entries: list[str]) -> str:
    return header + " \n " + "\n".join("\t" + e for e in entries) + " \n\n"


async def test_acls_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async with live_node(tmp_path) as live:
        bootstrap = live.bootstrap

        def run(*args: str) -> tuple[int, str, str]:
            capsys.readouterr()
            with capture_logs():  # the node's own log lines (it runs in this process) stay out of the output
                try:
                    code = main(["acls", "--bootstrap-server", bootstrap, *args])
                except SystemExit as e:
                    code = int(e.code or 0)
                out = capsys.readouterr()
            return code, out.out, out.err

        async def cli(*args: str) -> tuple[int, str, str]:
            return await asyncio.to_thread(run, *args)  # the CLI runs its own event loop

        topic = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)"
        read = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
        write = "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)"
        code, out, err = await cli(
            "--add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--operation",
            "write",
            "--topic",
            "orders",
        )
        assert (code, err) == (0, "")
        assert out == _kafka_block(f"Adding ACLs for resource `{topic}`:", [read, write]) + _kafka_block(
            f"Current ACLs for resource `{topic}`:", [read, write]
        )
        code, out, err = await cli(
            "--add",
            "--deny-principal",
            "User:mallory",
            "--deny-host",
            "10.0.0.9",
            "--cluster",
            "--resource-pattern-type",
            "LITERAL",
        )
        assert code == 0, err
        cluster = "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)"
        deny = "(principal=User:mallory, host=10.0.0.9, operation=ALL, permissionType=DENY)"
        assert out.endswith(_kafka_block(f"Current ACLs for resource `{cluster}`:", [deny]))
        code, out, err = await cli(
            "--add",
            "--allow-principal",
            "User:*",
            "--operation",
            "Describe",
            "--topic",
            "ord",
            "--resource-pattern-type",
            "prefixed",
        )
        assert code == 0, err
        prefixed = "ResourcePattern(resourceType=TOPIC, name=ord, patternType=PREFIXED)"
        everyone = "(principal=User:*, host=*, operation=DESCRIBE, permissionType=ALLOW)"

        code, out, err = await cli("--list")
        assert code == 0, err
        assert out == (
            _kafka_block(f"Current ACLs for resource `{prefixed}`:", [everyone])  # sorted: type, name, pattern
            + _kafka_block(f"Current ACLs for resource `{topic}`:", [read, write])
            + _kafka_block(f"Current ACLs for resource `{cluster}`:", [deny])
        )
        code, out, _ = await cli("--list", "--topic", "orders", "--resource-pattern-type", "match")
        assert out == _kafka_block(f"Current ACLs for resource `{prefixed}`:", [everyone]) + _kafka_block(
            f"Current ACLs for resource `{topic}`:", [read, write]
        )
        authorize = live.controller.authorizer.authorize
        assert authorize("User:bob", "h", Op.DESCRIBE, Res.TOPIC, "orders.eu") == AuthorizationResult.ALLOWED
        assert (
            authorize("User:mallory", "10.0.0.9", Op.CREATE, Res.CLUSTER, "kafka-cluster") == AuthorizationResult.DENIED
        )

        # --remove with a principal: only its ACLs (operation All by default: here Read named); then the listing
        code, out, err = await cli(
            "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders", "--force"
        )
        assert code == 0, err
        assert out == _kafka_block(f"Current ACLs for resource `{topic}`:", [write])
        code, out, err = await cli("--remove", "--topic", "orders", "--force")  # no principal: every ACL of it
        assert (code, out) == (0, ""), err
        assert [a.resource_name for a in await live.admin.describe_acls()] == ["ord", "kafka-cluster"]

        # usage errors: one line, exit 2, nothing sent
        for args, message in [
            (("--add", "--list"), "Command must include exactly one action: --list, --add, --remove."),
            (
                ("--add", "--allow-principal", "alice", "--topic", "t"),
                "format principalType:principalName but got alice",
            ),
            (
                ("--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"),
                "Unknown operation name Fly",
            ),
            (
                ("--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"),
                "'match' is not valid when adding",
            ),
            (
                ("--add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"),
                "ResourceType CLUSTER only supports operations",
            ),
            (("--remove", "--force"), "You must provide at least one resource"),
            (
                ("--list", "--allow-principal", "User:a"),
                'Option "[list]" can\'t be used with option "[allow-principal]"',
            ),
        ]:
            code, out, err = await cli(*args)
            assert code == 2 and out == "" and message in err and err.count("\n") == 1, (args, err)
        assert len(await live.admin.describe_acls()) == 2


def test_node_settings_configure_the_authorizer() -> None:
    from pykraft.node import controller_settings

    settings = controller_settings({"super.users": "User:admin;User:broker", "allow.everyone.if.no.acl.found": "true"})
    assert (settings.super_users, settings.allow_everyone_if_no_acl_found) == ("User:admin;User:broker", True)
    assert not controller_settings({}).allow_everyone_if_no_acl_found
    with pytest.raises(ValueError, match="principalType:principalName but got admin"):
        controller_settings({"super.users": "admin"})
    with pytest.raises(ValueError, match="must be true or false"):
        controller_settings({"allow.everyone.if.no.acl.found": "yes"})
