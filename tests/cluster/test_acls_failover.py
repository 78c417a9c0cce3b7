"""``pykraft acls`` against three ``pykraft node`` processes (the ``cluster`` fixture): ACLs added with the CLI are
in the metadata log of every node, so after a kill -9 of the active controller the new one lists the same ACLs and
takes further changes, which the restarted node's log receives too."""

from __future__ import annotations

import subprocess
import sys

from cluster_helpers import data_records, read_log, wait_caught_up

from controller.authorizer import AclBindingFilter, PatternType, ResourceType
from controller.records import AccessControlEntryRecord, deserialize
from pykraft.client import AdminClient
from pykraft.testing import Cluster

ORDERS = "ResourcePattern(resourceType=TOPIC, name=orders, patternType=PREFIXED)"
ALICE_READ = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
MALLORY = "(principal=User:mallory, host=*, operation=READ, permissionType=DENY)"


def acls(servers: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pykraft", "acls", "--bootstrap-server", servers, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def listed(servers: str) -> str:
    r = acls(servers, "--list")
    assert r.returncode == 0, r.stderr
    return r.stdout


async def test_acls_survive_failover(cluster: Cluster) -> None:
    leader, epoch, _ = await wait_caught_up(cluster)
    servers = ",".join(n.address for n in cluster.nodes.values())
    r = acls(servers, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders",
             "--resource-pattern-type", "prefixed")  # fmt: skip
    assert r.returncode == 0, r.stderr + cluster.logs()
    assert f"Current ACLs for resource `{ORDERS}`: \n \t{ALICE_READ} \n" in r.stdout

    cluster.nodes[leader].kill()
    await cluster.wait_for_leader(newer_than=epoch)
    others = ",".join(n.address for n in cluster.nodes.values() if n.running)
    assert listed(others) == f"Current ACLs for resource `{ORDERS}`: \n \t{ALICE_READ} \n\n"
    r = acls(others, "--add", "--deny-principal", "User:mallory", "--operation", "Read", "--topic", "orders",
             "--resource-pattern-type", "prefixed")  # fmt: skip
    assert r.returncode == 0, r.stderr

    cluster.nodes[leader].start()  # the killed node catches up: the new ACL reaches its log too
    await wait_caught_up(cluster)
    expected = f"Current ACLs for resource `{ORDERS}`: \n \t{ALICE_READ}\n\t{MALLORY} \n\n"  # sorted by principal
    assert listed(servers) == expected
    async with AdminClient(servers, default_api_timeout_ms=20_000) as admin:  # MATCH: the prefix covers orders.eu
        described = await admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, "orders.eu", PatternType.MATCH))
    assert [a.principal for a in described] == ["User:alice", "User:mallory"]
    cluster.stop()
    for node in cluster.nodes.values():
        records = [deserialize(value).message for _, value in data_records(read_log(node.data_dir))]
        entries = [r.principal for r in records if isinstance(r, AccessControlEntryRecord)]
        assert entries == ["User:alice", "User:mallory"], (node.node_id, entries)
