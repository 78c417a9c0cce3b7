"""The audit's ACLs without Spark (the job's tasks in this process, ``audit.records.build_tables``): a metadata log in
Kafka's format — a snapshot laid out as Kafka's, then segments written by our log writer (MetadataLog.append of
RecordBatch v2) — whose ACLs are created, replaced and removed. The ``acls`` table must hold exactly the ACLs the
controller's own replay (AclControl) holds at the end, each with the offset and batch time it was created and, for
those gone, removed; the timeline has each change; :func:`audit.acls.risky` flags each risky grant, and no other.
(The report and summary.json over Spark: ``test_spark_audit.py``.)"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.dataset as pads
import pytest
from audit_helpers import SNAPSHOT_ACLS, TS, acl_log, uid

from audit import acls
from audit.records import build_tables, in_process
from controller.acl_control import AclControl
from controller.records import ApiMessage
from controller.timeline import Timeline


def reference(records: list[ApiMessage]) -> set[tuple]:
    """The ACLs in force after the controller's own replay."""
    control = AclControl(Timeline())
    for r in records:
        control.replay(r)
    return {(str(i), a.principal, a.host, a.operation, a.permission_type, a.resource_type, a.resource_name,
             a.pattern_type) for i, a in control.acls.items()}  # fmt: skip


def codes(row: dict) -> tuple:
    def back(names: dict[int, str], name: str) -> int:
        return next(code for code, n in names.items() if n == name)

    return (
        row["acl_id"], row["principal"], row["host"], back(acls.OPERATIONS, row["operation"]),
        back(acls.PERMISSIONS, row["permission"]), back(acls.RESOURCE_TYPES, row["resource_type"]),
        row["resource_name"], back(acls.PATTERN_TYPES, row["pattern_type"]),
    )  # fmt: skip


def at(offset_index: int) -> dt.datetime:
    return dt.datetime.fromtimestamp((TS + 1000 * offset_index) / 1000)


@pytest.fixture
def audited(tmp_path: Path) -> tuple[dict[str, int], list[ApiMessage], Path]:
    offsets, read = acl_log(tmp_path / "log")
    build_tables(in_process, 2, tmp_path / "log", tmp_path / "out")
    return offsets, read, tmp_path / "out"


def test_acls_in_force_are_the_controllers_with_when_each_was_created_and_removed(
    audited: tuple[dict[str, int], list[ApiMessage], Path],
) -> None:
    o, read, out = audited
    table = pads.dataset(out / "acls", format="parquet").to_table()
    assert table.schema.equals(acls.ACLS)
    rows = table.to_pylist()
    live = [r for r in rows if r["in_force"]]
    assert {codes(r) for r in live} == reference(read)
    assert len(live) == 5  # 2 (snapshot), 3 (cluster), 4, 5, 7 (replaced); not 1 and 6 (removed), not 7's first
    by_id = {(r["acl_id"], r["principal"]): r for r in rows}
    snap = by_id[(str(uid(102)), "User:*")]
    assert snap["created_in_snapshot"] and snap["created_offset"] is None and snap["removed_offset"] is None
    alice = by_id[(str(uid(103)), "User:alice")]
    assert (alice["created_offset"], alice["created_time"], alice["created_in_snapshot"]) == (
        o["cluster_all"],
        at(2),
        False,
    )
    assert (alice["operation"], alice["resource_type"], alice["resource_name"]) == ("ALL", "CLUSTER", "kafka-cluster")
    bob = by_id[(str(uid(101)), "User:bob")]
    assert not bob["in_force"] and (bob["removed_offset"], bob["removed_time"]) == (o["removed"], at(4))
    erin = by_id[(str(uid(106)), "User:erin")]
    assert (erin["created_offset"], erin["removed_offset"], erin["pattern_type"]) == (
        o["more"] + 2,
        o["removed"] + 1,
        "PREFIXED",
    )
    frank = by_id[(str(uid(107)), "User:frank")]
    assert (frank["in_force"], frank["removed_offset"]) == (False, o["replaced"])
    assert by_id[(str(uid(107)), "User:*")]["created_offset"] == o["replaced"]
    # the timeline: each creation in the log and each removal, at its offset
    timeline = pads.dataset(out / "timeline", format="parquet").to_table().to_pylist()
    changes = {(r["offset"], r["kind"]): r for r in timeline if r["kind"].startswith("acl_")}
    assert sorted(changes) == sorted(
        [(o["cluster_all"], "acl_created"), *((o["more"] + i, "acl_created") for i in range(3)),
         (o["removed"], "acl_removed"), (o["removed"] + 1, "acl_removed"), (o["frank"], "acl_created"),
         (o["replaced"], "acl_removed"), (o["replaced"], "acl_created")]
    )  # fmt: skip
    # every removal names an ACL in force: no remove_of_existing_acl finding (test_spark_audit's broken log has them)
    assert not pads.dataset(out / "violations", format="parquet").to_table().num_rows
    assert changes[(o["removed"], "acl_removed")]["subject"] == "TOPIC orders (LITERAL)"
    assert changes[(o["removed"], "acl_removed")]["detail"] == f"User:bob from * ALLOW READ (id {uid(101)})"


def test_as_of_offset_gives_the_acls_in_force_there(tmp_path: Path) -> None:
    o, read = acl_log(tmp_path / "log")
    build_tables(in_process, 2, tmp_path / "log", tmp_path / "out", as_of_offset=o["removed"])
    rows = pads.dataset(tmp_path / "out" / "acls", format="parquet").to_table().to_pylist()
    upto = len(SNAPSHOT_ACLS) + 1 + 3 + 1  # the snapshot's, the cluster's, "more", bob's removal (not erin's)
    assert {codes(r) for r in rows if r["in_force"]} == reference(read[:upto])


def acl_row(principal: str, host: str, operation: str, permission: str, resource_type: str, name: str,
            pattern: str = "LITERAL") -> dict:  # fmt: skip
    return {"principal": principal, "host": host, "operation": operation, "permission": permission,
            "resource_type": resource_type, "resource_name": name, "pattern_type": pattern}  # fmt: skip


@pytest.mark.parametrize(
    ("acl", "expected"),
    [
        (acl_row("User:*", "10.0.0.1", "READ", "ALLOW", "TOPIC", "orders"), ["everyone"]),
        (acl_row("User:a", "*", "ALL", "ALLOW", "TOPIC", "orders"), ["all_from_any_host"]),
        (acl_row("User:a", "10.0.0.1", "ALL", "ALLOW", "TOPIC", "orders"), []),  # ALL, but from one host
        (acl_row("User:a", "10.0.0.1", "READ", "ALLOW", "TOPIC", "*"), ["wildcard_resource"]),
        (acl_row("User:a", "10.0.0.1", "READ", "ALLOW", "TOPIC", "*", "PREFIXED"), []),  # names starting '*'
        (acl_row("User:a", "10.0.0.1", "ALL", "ALLOW", "CLUSTER", "kafka-cluster"), ["all_on_cluster"]),
        (acl_row("User:a", "10.0.0.1", "ALTER", "ALLOW", "CLUSTER", "kafka-cluster"), []),
        (acl_row("User:*", "*", "ALL", "DENY", "TOPIC", "*"), []),  # DENY only takes rights away
        (
            acl_row("User:*", "*", "ALL", "ALLOW", "CLUSTER", "kafka-cluster"),
            ["everyone", "all_from_any_host", "all_on_cluster"],
        ),
    ],
)
def test_risky_grants(acl: dict, expected: list[str]) -> None:
    assert acls.risks(acl) == expected


def test_risky_warning_lists_the_acls_in_force_with_their_offsets(
    audited: tuple[dict[str, int], list[ApiMessage], Path],
) -> None:
    o, _, out = audited
    warning = acls.risky(pads.dataset(out / "acls", format="parquet").to_table(), rows=20)
    flagged = {(r["principal"], r["resource_name"]): (r["created_offset"], r["risks"]) for r in warning["rows"]}
    assert flagged == {
        ("User:*", "g1"): (None, [acls.RISKS["everyone"]]),  # from the snapshot
        ("User:alice", "kafka-cluster"): (
            o["cluster_all"],
            [acls.RISKS["all_from_any_host"], acls.RISKS["all_on_cluster"]],
        ),
        ("User:carol", "*"): (o["more"], [acls.RISKS["wildcard_resource"]]),
        ("User:*", "x"): (o["replaced"], [acls.RISKS["everyone"], acls.RISKS["all_from_any_host"]]),
    }  # (frank's first ACL was replaced, dave's is a DENY)
    assert warning["count"] == 4
    assert warning["by_risk"] == {"everyone": 2, "all_from_any_host": 2, "wildcard_resource": 1, "all_on_cluster": 1}
