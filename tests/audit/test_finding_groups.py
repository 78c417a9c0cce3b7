"""The report's findings grouped by root cause (audit.findings): damage before what a lost record explains, a
partition's or topic's later findings under its first, the final state's under the record that broke the rule."""

from __future__ import annotations

from audit.findings import group


def f(check: str, offset: int | None, explanation: str) -> dict:
    return {"check": check, "offset": offset, "file": None, "position": None, "explanation": explanation}


def test_roots_first_with_their_consequences() -> None:
    findings = [
        f("partition_ids_contiguous", None, "topic 'orders' has 2 partitions numbered 0..2"),
        f("leader_in_isr", None, "final state: partition bad-0 has leader 102 outside ISR [101]"),
        f(
            "partition_exists",
            40,
            "PartitionChangeRecord for partition 1 of topic id TID1, which the topic lacks",
        ),
        f("leader_in_isr", 30, "partition 0 of topic id TID2: leader 102 is not in ISR [101]"),
        f(
            "brokers_registered",
            12,
            "PartitionRecord for partition 0 of topic id TID3 names broker 7",
        ),
        f(
            "brokers_registered",
            13,
            "PartitionRecord for partition 1 of topic id TID3 names broker 7",
        ),
        f("readable", 20, "log.log: 100 unreadable bytes from byte 4096"),
        f("leader_in_isr", 5, "partition 3 of topic id TID9: leader 4 is not in ISR [1]"),
    ]
    groups = group(findings, {"orders": "TID1", "bad": "TID2"})
    roots = [(g.root["check"], g.root["offset"]) for g in groups]
    # damage first, then the records' findings by offset
    assert roots == [("readable", 20), ("leader_in_isr", 5), ("brokers_registered", 12), ("leader_in_isr", 30)]
    by_root = {(g.root["check"], g.root["offset"]): [c["check"] for c in g.consequences] for g in groups}
    # after the damage, a missing partition and the topic's numbering (its final state) follow from it
    assert by_root[("readable", 20)] == ["partition_exists", "partition_ids_contiguous"]
    assert by_root[("brokers_registered", 12)] == ["brokers_registered"]  # the same broker
    assert by_root[("leader_in_isr", 30)] == ["leader_in_isr"]  # its final state, by the topic's name
    assert by_root[("leader_in_isr", 5)] == []  # before the damage: its own cause


def test_without_links_every_finding_is_a_root() -> None:
    findings = [f("replicas_distinct", 3, "partition 0 of topic id A lists replicas 1,1 with a repeat")]
    findings.append(f("replicas_distinct", 9, "partition 1 of topic id A lists replicas 2,2 with a repeat"))
    assert [len(g.consequences) for g in group(findings)] == [0, 0]
