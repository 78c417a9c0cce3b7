"""Who may do what: the ACLs of the metadata log (AccessControlEntryRecord / RemoveAccessControlEntryRecord).

The ``acls`` table has a row per ACL id the log created, with where it was created and, unless it is still in force
at the end of the log (or the audited offset), where it was removed — each an offset and its batch's append time.
An ACL found in a snapshot was created before it; its offset is unknown (``created_in_snapshot``). The rules are
the controller's replay (``controller.acl_control.AclControl.replay``): a record naming an id again replaces that
ACL; a removal names an id.

:func:`risky` flags the grants an operator should look at first, as warnings (they are legal, not damage): ALLOW to
every user (``User:*``), ALLOW of ALL operations from any host, ALLOW on every resource of a type (the LITERAL
``*``), and ALLOW of ALL on the CLUSTER. DENY ACLs only ever take rights away and are never flagged.

Enums are Kafka's names (TOPIC, LITERAL, READ, ALLOW), as ``kafka-acls.sh`` prints them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

TYPES = ("AccessControlEntryRecord", "RemoveAccessControlEntryRecord")
ACL_COLUMNS = (  # an ACL record's fields, as the records table holds them (audit/decode.py)
    "acl_id",
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)
INPUT = [
    *ACL_COLUMNS,
    "record_type",
    "order",
    "offset",
    "source",
    "append_time",
    "file",
    "position",
]
# Kafka's codes (org.apache.kafka.common.resource / acl); the controller's enums hold the same.
RESOURCE_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}  # fmt: skip
PATTERN_TYPES = {0: "UNKNOWN", 1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {0: "UNKNOWN", 1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
              12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS", 15: "TWO_PHASE_COMMIT"}  # fmt: skip
PERMISSIONS = {0: "UNKNOWN", 1: "ANY", 2: "DENY", 3: "ALLOW"}

ACLS = pa.schema(
    [
        ("acl_id", pa.string()),
        ("principal", pa.string()),
        ("host", pa.string()),
        ("operation", pa.string()),
        ("permission", pa.string()),
        ("resource_type", pa.string()),
        ("resource_name", pa.string()),
        ("pattern_type", pa.string()),
        ("in_force", pa.bool_()),  # at the end of the log (or the audited offset)
        ("created_offset", pa.int64()),  # null: found in a snapshot
        ("created_time", pa.timestamp("ms")),  # the batch's append time (a snapshot's: its batch's)
        ("created_in_snapshot", pa.bool_()),
        ("removed_offset", pa.int64()),
        ("removed_time", pa.timestamp("ms")),
    ]
)
SHOWN = ("principal", "host", "operation", "permission", "resource_type", "resource_name", "pattern_type")
RISKS = {
    "everyone": "ALLOW to every user (User:*)",
    "all_from_any_host": "ALLOW of ALL operations from any host (*)",
    "wildcard_resource": "ALLOW on every resource of its type (LITERAL *)",
    "all_on_cluster": "ALLOW of ALL on the CLUSTER",
}


def _name(codes: dict[int, str], code: int | None) -> str | None:
    return None if code is None else codes.get(code, str(code))


def describe(acl: dict[str, Any]) -> str:
    """An ACL in one line, as kafka-acls.sh lists it: ``User:alice from * ALLOW READ on TOPIC orders (LITERAL)``."""
    return (
        f"{acl['principal']} from {acl['host']} {acl['permission']} {acl['operation']} on {acl['resource_type']} "
        f"{acl['resource_name']} ({acl['pattern_type']})"
    )


def _walk(rows: pa.Table) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(every ACL created, with its removal if any; the changes in log order as timeline rows)."""
    live: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []

    def event(row: dict[str, Any], kind: str, acl: dict[str, Any], why: str = "") -> None:
        events.append(
            {
                "order": row["order"],
                "offset": row["offset"],
                "time": row["append_time"],
                "kind": kind,
                "subject": f"{acl['resource_type']} {acl['resource_name']} ({acl['pattern_type']})",
                "detail": f"{acl['principal']} from {acl['host']} {acl['permission']} {acl['operation']}{why} "
                f"(id {acl['acl_id']})",
            }
        )

    def remove(acl: dict[str, Any], row: dict[str, Any], why: str = "") -> None:
        acl["in_force"] = False
        acl["removed_offset"] = row["offset"]
        acl["removed_time"] = row["append_time"]
        event(row, "acl_removed", acl, why)

    for row in sorted(rows.to_pylist(), key=lambda r: r["order"]):
        acl_id = row["acl_id"]
        before = live.pop(acl_id, None)
        if row["record_type"] == "RemoveAccessControlEntryRecord":
            if before is not None:  # (an unknown id removes nothing: the controller would stop on it)
                remove(before, row)
            continue
        if before is not None:  # the same id again: the new ACL replaces the old one, as the controller's replay
            remove(before, row, " (replaced)")
        snapshot = row["source"] == "snapshot"
        acl = {
            "acl_id": acl_id,
            "principal": row["principal"],
            "host": row["host"],
            "operation": _name(OPERATIONS, row["operation"]),
            "permission": _name(PERMISSIONS, row["permission_type"]),
            "resource_type": _name(RESOURCE_TYPES, row["resource_type"]),
            "resource_name": row["resource_name"],
            "pattern_type": _name(PATTERN_TYPES, row["pattern_type"]),
            "in_force": True,
            "created_offset": None if snapshot else row["offset"],
            "created_time": row["append_time"],
            "created_in_snapshot": snapshot,
            "removed_offset": None,
            "removed_time": None,
        }
        live[acl_id] = acl
        out.append(acl)
        if not snapshot:  # (a snapshot's ACLs were created before it; the timeline has no offset for them)
            event(row, "acl_created", acl)
    return out, events


def acls(rows: pa.Table) -> pa.Table:
    """The ``acls`` table (:data:`ACLS`) of the ACL records (:data:`INPUT`, any order): in force first, each part by
    where it was created."""
    made, _ = _walk(rows)
    made.sort(key=lambda a: (not a["in_force"], a["created_offset"] is not None, a["created_offset"] or 0))
    return pa.Table.from_pylist(made, schema=ACLS) if made else ACLS.empty_table()


def events(rows: pa.Table) -> list[dict[str, Any]]:
    """The ACLs created and removed, as rows of the timeline (``audit.timeline.TIMELINE``)."""
    return _walk(rows)[1]


def risks(acl: dict[str, Any]) -> list[str]:
    """Which of :data:`RISKS` an ACL (a row of :data:`ACLS`) is."""
    if acl["permission"] != "ALLOW":
        return []
    found = []
    if acl["principal"] == "User:*":
        found.append("everyone")
    if acl["host"] == "*" and acl["operation"] == "ALL":
        found.append("all_from_any_host")
    if acl["pattern_type"] == "LITERAL" and acl["resource_name"] == "*":
        found.append("wildcard_resource")
    if acl["resource_type"] == "CLUSTER" and acl["operation"] == "ALL":
        found.append("all_on_cluster")
    return found


def risky(table: pa.Table, rows: int) -> dict[str, Any]:
    """The warning entry for the ACLs in force that :func:`risks` flags: how many, how many per risk, and the first
    ``rows`` (by where they were created), each with its risks in words."""
    flagged = []
    for acl in table.to_pylist():
        if acl["in_force"] and (why := risks(acl)):
            flagged.append({**{k: acl[k] for k in SHOWN}, "created_offset": acl["created_offset"],
                            "created_time": acl["created_time"], "acl_id": acl["acl_id"],
                            "risks": [RISKS[r] for r in why], "_risks": why})  # fmt: skip
    by_risk = {r: sum(r in f["_risks"] for f in flagged) for r in RISKS}
    return {
        "count": len(flagged),
        "by_risk": {r: n for r, n in by_risk.items() if n},
        "rows": [{k: v for k, v in f.items() if k != "_risks"} for f in flagged[:rows]],
    }
