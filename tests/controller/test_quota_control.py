"""Client quotas in the controller (controller/quota_control.py) and KIP-599's buckets (controller/mutation_quota.py):
AlterClientQuotas' validation and records, DescribeClientQuotas' filters, replay on standbys, snapshots (after the
configs, before the ACLs), Kafka's entity resolution order and the strict token bucket on a test clock."""

from __future__ import annotations

import pytest
from ctl_helpers import SharedLog, active_cluster, start_controller
from test_snapshot_image import check_order, image_state, loaded, replayed, snapshot_of

from controller.authorizer import AclOperation, AclPermissionType, PatternType, ResourceType, StandardAcl
from controller.mutation_quota import ControllerMutationQuotas, resolve
from controller.quota_control import (
    CLIENT_ID,
    USER,
    FilterComponent,
    MatchType,
    QuotaAlteration,
    QuotaOp,
)
from controller.records import AccessControlEntryRecord, ClientQuotaRecord, ConfigRecord, deserialize
from quorum.errors import Errors

RATE = "controller_mutation_rate"


def alter(entity: list[tuple[str, str | None]], *ops: QuotaOp) -> QuotaAlteration:
    return QuotaAlteration(entity, list(ops))


def quota_records(log: SharedLog, first: int = 0) -> list[ClientQuotaRecord]:
    return [r for r in log.records(first) if isinstance(r, ClientQuotaRecord)]


async def test_alter_writes_records_and_describe_reads_committed(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    standby, _ = await start_controller(log, 2)
    log.commit_all()
    first = len(log.entries)
    results = await ctl.alter_client_quotas(
        [
            alter([(USER, "alice")], QuotaOp(RATE, 10.0), QuotaOp("producer_byte_rate", 1024.0)),
            alter([(USER, None), (CLIENT_ID, None)], QuotaOp(RATE, 2.5)),
            alter([(CLIENT_ID, "app")], QuotaOp(RATE, 1.0)),
        ]
    )
    assert [r.error.code for r in results] == [Errors.NONE] * 3
    assert len(quota_records(log, first)) == 4
    for node in (ctl, standby):  # every node replays the same
        assert node.quotas.quotas.committed()[((USER, "alice"),)] == ((RATE, 10.0), ("producer_byte_rate", 1024.0))
    # The same value again writes nothing; a removal of the last key drops the entity.
    first = len(log.entries)
    await ctl.alter_client_quotas([alter([(USER, "alice")], QuotaOp(RATE, 10.0))])
    assert quota_records(log, first) == []
    await ctl.alter_client_quotas([alter([(CLIENT_ID, "app")], QuotaOp(RATE, 0.0, remove=True))])
    assert ((CLIENT_ID, "app"),) not in standby.quotas.quotas.committed()
    # validate_only: checked, nothing written.
    first = len(log.entries)
    [r] = await ctl.alter_client_quotas([alter([(USER, "bob")], QuotaOp(RATE, 3.0))], validate_only=True)
    assert r.error.code == Errors.NONE and quota_records(log, first) == []
    described = await ctl.describe_client_quotas([FilterComponent(USER, MatchType.SPECIFIED)], strict=False)
    assert [e for e, _ in described.entries] == [((CLIENT_ID, None), (USER, None)), ((USER, "alice"),)]


@pytest.mark.parametrize(
    ("alteration", "message"),
    [
        (alter([], QuotaOp(RATE, 1.0)), "Invalid empty client quota entity"),
        (alter([(USER, "a"), (USER, "b")], QuotaOp(RATE, 1.0)), "duplicate entity entry user"),
        (alter([("group", "g")], QuotaOp(RATE, 1.0)), "Unhandled client quota entity type: group"),
        (alter([(USER, "")], QuotaOp(RATE, 1.0)), "Empty user not supported"),
        (alter([("ip", "1.2.3.4"), (USER, "a")], QuotaOp(RATE, 1.0)), "IP entity should not be combined"),
        (alter([(USER, "a")], QuotaOp("bogus_rate", 1.0)), "Invalid configuration key bogus_rate"),
        (alter([(USER, "a")], QuotaOp(RATE, -1.0)), "Quota controller_mutation_rate must be greater than 0"),
        (alter([(USER, "a")], QuotaOp(RATE, 0.0)), "Quota controller_mutation_rate must be greater than 0"),
        (alter([(USER, "a")], QuotaOp(RATE, float("nan"))), "must be greater than 0"),
        (alter([(USER, "a")], QuotaOp("producer_byte_rate", 1.5)), "producer_byte_rate cannot be a fractional value."),
        (alter([(USER, "a")], QuotaOp("producer_byte_rate", 2e19)), "is too large for a LONG."),
        (alter([("ip", "1.2.3.4")], QuotaOp(RATE, 1.0)), "Invalid configuration key controller_mutation_rate"),
        (
            alter([(USER, "a")], QuotaOp(RATE, 1.0), QuotaOp(RATE, 2.0)),
            f"Duplicate quota key {RATE} not updating quota for this entity ClientQuotaEntity(entries={{user=a}})",
        ),
        (alter([(USER, "ok")], QuotaOp(RATE, 2.0)), "Ignoring duplicate entity ClientQuotaEntity(entries={user=ok})"),
    ],
)
async def test_alter_refuses_with_kafkas_messages(log: SharedLog, alteration: QuotaAlteration, message: str) -> None:
    ctl, _, _ = await active_cluster(log, [])
    first = len(log.entries)
    good = alter([(USER, "ok")], QuotaOp(RATE, 1.0))
    fine, bad = await ctl.alter_client_quotas([good, alteration])
    assert bad.error.code == Errors.INVALID_REQUEST and message in (bad.error.message or "")
    assert fine.error.code == Errors.NONE  # an entry fails alone
    assert [r.entity[0].entity_name for r in quota_records(log, first)] == ["ok"]


async def test_describe_filters(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    entities = [
        [(USER, "alice")],
        [(USER, "alice"), (CLIENT_ID, "app")],
        [(USER, None)],
        [(USER, None), (CLIENT_ID, "app")],
        [(CLIENT_ID, "app")],
        [(CLIENT_ID, None)],
    ]
    await ctl.alter_client_quotas([alter(e, QuotaOp(RATE, 1.0)) for e in entities])

    async def names(*components: FilterComponent, strict: bool = False) -> list[str]:
        r = await ctl.describe_client_quotas(list(components), strict)
        assert r.error.code == Errors.NONE, r.error
        return [",".join(f"{t}={n}" for t, n in e) for e, _ in r.entries]

    exact_alice = FilterComponent(USER, MatchType.EXACT, "alice")
    assert await names(exact_alice) == ["client-id=app,user=alice", "user=alice"]
    assert await names(exact_alice, strict=True) == ["user=alice"]
    assert await names(FilterComponent(USER, MatchType.DEFAULT), strict=True) == ["user=None"]
    assert await names(FilterComponent(CLIENT_ID, MatchType.SPECIFIED), strict=True) == [
        "client-id=None",
        "client-id=app",
    ]
    assert len(await names()) == 6 and await names(strict=True) == []
    for bad, code, message in [
        ([FilterComponent(USER, MatchType.EXACT)], Errors.INVALID_REQUEST, "MATCH_TYPE_EXACT, but set match"),
        ([FilterComponent(USER, MatchType.DEFAULT, "x")], Errors.INVALID_REQUEST, "MATCH_TYPE_DEFAULT, but also"),
        ([FilterComponent(USER, 2), FilterComponent(USER, 2)], Errors.INVALID_REQUEST, "more than once"),
        ([FilterComponent("group", 2)], Errors.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([FilterComponent(USER, 7)], Errors.UNSUPPORTED_VERSION, "Unknown match type 7"),
        ([FilterComponent("ip", 2), FilterComponent(USER, 2)], Errors.INVALID_REQUEST, "IP filter component"),
    ]:
        r = await ctl.describe_client_quotas(bad, False)
        assert r.error.code == code and message in (r.error.message or ""), (bad, r.error)


async def test_snapshot_carries_quotas_after_configs_before_acls(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [(0, None, False)])
    await ctl.create_acls(
        [StandardAcl(ResourceType.TOPIC, "t", PatternType.LITERAL, "User:a", "*", AclOperation.READ, 3)]
    )
    await ctl.alter_client_quotas(
        [
            alter([(USER, "alice"), (CLIENT_ID, None)], QuotaOp(RATE, 4.0), QuotaOp("request_percentage", 50.0)),
            alter([(CLIENT_ID, "x")], QuotaOp(RATE, 1.0)),
        ]
    )
    await ctl.alter_client_quotas([alter([(CLIENT_ID, "x")], QuotaOp(RATE, 0, remove=True))])
    snapshot = snapshot_of(ctl)
    records = [deserialize(v).message for v in snapshot.records]
    check_order(records)
    kinds = [type(r) for r in records]
    assert kinds[-3:] == [ClientQuotaRecord, ClientQuotaRecord, AccessControlEntryRecord]
    assert ConfigRecord not in kinds or kinds.index(ConfigRecord) < kinds.index(ClientQuotaRecord)
    fresh, from_log = loaded(snapshot), replayed(log, snapshot.snapshot_id.end_offset)
    assert image_state(fresh) == image_state(from_log) == image_state(ctl)
    assert fresh.quotas.quotas.committed() == {
        ((CLIENT_ID, None), (USER, "alice")): ((RATE, 4.0), ("request_percentage", 50.0))
    }
    assert AclPermissionType.ALLOW == 3


# -- resolution and the bucket ----------------------------------------------------------------------------------

LEVELS = [
    (((CLIENT_ID, "c"), (USER, "u")), ("u", "c")),
    (((CLIENT_ID, None), (USER, "u")), ("u", "c")),
    (((USER, "u"),), ("u", "")),
    (((CLIENT_ID, "c"), (USER, None)), ("u", "c")),
    (((CLIENT_ID, None), (USER, None)), ("u", "c")),
    (((USER, None),), ("u", "")),
    (((CLIENT_ID, "c"),), ("", "c")),
    (((CLIENT_ID, None),), ("", "c")),
]


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_resolution_follows_kafkas_order(level: int) -> None:
    """With the entities of ``level`` and every later level set, ``level`` wins, with its tags; entities naming
    another user or client never apply."""
    table = {LEVELS[i][0]: float(i + 1) for i in range(level, len(LEVELS))}
    table[((USER, "other"),)] = 99.0
    table[((CLIENT_ID, "other"), (USER, "u"))] = 99.0
    found = resolve(lambda e, k: table.get(e) if k == RATE else None, "u", "c")
    assert found == (LEVELS[level][1], float(level + 1))


def test_no_quota_no_limit() -> None:
    assert resolve(lambda e, k: None, "u", "c") is None
    quotas = ControllerMutationQuotas(lambda e, k: None, clock=lambda: 0.0)
    q = quotas.quota_for("User:u", "c")
    assert all(q.record(10_000) for _ in range(100)) and quotas.buckets == {}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_strict_bucket_admits_until_in_debt_and_names_the_wait() -> None:
    """rate 2/s: burst 22 tokens. A request is admitted while the bucket is not in debt (and may take it below
    zero); then refused with the time to climb back to zero; refilled at the rate, capped at the burst."""
    clock = Clock()
    quotas = ControllerMutationQuotas(lambda e, k: 2.0 if e == ((USER, "alice"),) else None, clock)
    q = quotas.quota_for("User:alice", "any")
    assert q.record(20)  # 22 -> 2
    assert q.record(10)  # not in debt: admitted, 2 -> -8
    assert not q.record(1) and q.throttle_time_ms == 4000  # 8 tokens at 2/s
    clock.now += 3.0  # -8 + 6 = -2
    assert not q.record(1) and q.throttle_time_ms == 1000
    clock.now += 1.0  # 0: not in debt
    assert q.record(5)  # -> -5
    clock.now += 3600.0  # capped at the burst
    assert q.record(22) and q.record(1)  # 22 -> 0, and at 0 (not in debt) admitted: -> -1
    assert not q.record(1) and q.throttle_time_ms == 500
    # another principal under no quota, and the same principal's bucket shared across requests
    assert quotas.quota_for("User:bob", "any").record(1000)
    assert not quotas.quota_for("User:alice", "other").record(1)


def test_refund_gives_back_what_a_refused_topic_recorded() -> None:
    clock = Clock()
    quotas = ControllerMutationQuotas(lambda e, k: 1.0 if e == ((USER, None),) else None, clock)
    q = quotas.quota_for("User:a", "")
    assert q.record(11) and q.record(5)  # 11 -> 0 -> -5
    q.refund(5)
    assert q.record(1)
    assert quotas.buckets.keys() == {("a", "")}
    assert quotas.quota_for("User:b", "").record(11)  # a default user quota: a bucket per user


def test_the_windows_size_the_burst_and_throttling_is_counted_without_principals() -> None:
    """controller.quota.window.num x controller.quota.window.size.seconds seconds of the rate fit in a bucket (here
    2 x 3 = 6 s at 1/s: 6 tokens, not Kafka's default 11); MutationStats sums throttled requests, topics, throttle
    time and recorded partitions over every principal, and the metrics carry no principal label."""
    from types import SimpleNamespace

    from pykraft.metrics import mutation_quota_metrics

    clock = Clock()
    quotas = ControllerMutationQuotas(lambda e, k: 1.0 if e == ((USER, None),) else None, clock, 2, 3)
    q = quotas.quota_for("User:a", "")
    assert q.record(6) and q.record(2)  # 6 -> 0 -> -2
    assert not q.record(1) and q.throttle_time_ms == 2000
    q.throttled(1)
    assert quotas.quota_for("User:b", "").record(6)  # b's own bucket, also 6
    q.refund(2)
    assert quotas.stats.throttled_requests == 1 and quotas.stats.throttled_topics == 1
    assert quotas.stats.throttle_time_ms == 2000 and quotas.stats.recorded_partitions == 12
    families = {f.name: f for f in mutation_quota_metrics(SimpleNamespace(mutation_quotas=quotas))}  # type: ignore[arg-type]
    assert families["kafka_controller_mutation_throttled_requests"].samples[0].value == 1
    assert families["kafka_controller_mutation_throttle_time_seconds"].samples[0].value == 2.0
    assert families["kafka_controller_mutation_partitions"].samples[0].value == 12
    assert families["kafka_controller_mutation_quota_buckets"].samples[0].value == 2
    assert all(not sample.labels for f in families.values() for sample in f.samples)
    with pytest.raises(ValueError, match=r"controller\.quota\.window\.num \(0\)"):
        ControllerMutationQuotas(lambda e, k: None, window_num=0)
