"""ACLs in the controller (controller/acl_control.py through the QuorumController): CreateAcls / DeleteAcls /
DescribeAcls with Kafka's AclControlManager semantics, replay on standbys, the authorizer fed from committed
state only, leadership loss, snapshots."""

from __future__ import annotations

import asyncio

import pytest
from ctl_helpers import MemorySnapshotReader, SharedLog, active_cluster, quiet_settings, settle, start_controller
from test_authorizer import ALLOWED, DENIED, Op, Pat, Perm, Res, acl
from test_snapshot_image import loaded, replayed, snapshot_of

from controller.acl_control import acl_record
from controller.authorizer import AclBindingFilter, StandardAcl
from controller.quorum_controller import NotControllerError, ReplayError
from controller.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord, deserialize
from quorum.errors import Errors
from quorum.log.message import Uuid


def acl_records(log: SharedLog, first: int = 0) -> list:
    return [r for r in log.records(first) if isinstance(r, (AccessControlEntryRecord, RemoveAccessControlEntryRecord))]


async def test_create_describe_and_authorize_once_committed(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    standby, _ = await start_controller(log, 2)
    log.commit_all()
    log.auto_commit = False
    first = len(log.entries)
    task = asyncio.ensure_future(ctl.create_acls([acl(), acl(name="pay", pattern=Pat.PREFIXED, op=Op.WRITE)]))
    await settle()
    assert not task.done()  # answered once committed
    [batch] = [b for b in log.batches if b.base_offset >= first]
    assert batch.last_offset - batch.base_offset == 1  # one atomic batch
    assert len(ctl.acls.acls) == 2 and not ctl.acls.acls.committed()  # replayed at once, not committed yet
    assert ctl.authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == DENIED  # not yet
    log.commit_all()
    results = await asyncio.wait_for(task, 5)
    assert [r.error.code for r in results] == [Errors.NONE, Errors.NONE]
    records = acl_records(log, first)
    assert [r.principal for r in records] == ["User:alice", "User:alice"]
    assert len({r.id for r in records}) == 2 and all(r.id != Uuid() for r in records)  # random ids
    for node in (ctl, standby):  # the standby replayed the same records: the same ACLs, the same decisions
        assert dict(node.acls.acls.committed()) == {
            r.id: s for r, s in zip(records, [acl(), acl("pay", Op.WRITE, pattern=Pat.PREFIXED)], strict=True)
        }
        assert node.authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == ALLOWED
        assert node.authorizer.authorize("User:alice", "h", Op.DESCRIBE, Res.TOPIC, "payments") == ALLOWED
        assert node.authorizer.authorize("User:bob", "h", Op.READ, Res.TOPIC, "orders") == DENIED
    described = await ctl.describe_acls(AclBindingFilter(Res.TOPIC, "payments", Pat.MATCH))
    assert not described.error.failed and described.acls == (acl("pay", Op.WRITE, pattern=Pat.PREFIXED),)


@pytest.mark.parametrize(
    "bad, message",
    [
        (acl(rtype=Res.ANY), "Invalid resourceType ANY"),
        (acl(rtype=Res.UNKNOWN), "Invalid resourceType UNKNOWN"),
        (acl(rtype=99), "Invalid resourceType UNKNOWN"),
        (acl(pattern=Pat.MATCH), "Invalid patternType MATCH"),
        (acl(pattern=Pat.ANY), "Invalid patternType ANY"),
        (acl(pattern=Pat.UNKNOWN), "Invalid patternType UNKNOWN"),
        (acl(op=Op.ANY), "Invalid operation ANY"),
        (acl(op=Op.UNKNOWN), "Invalid operation UNKNOWN"),
        (acl(perm=Perm.ANY), "Invalid permissionType ANY"),
        (acl(perm=Perm.UNKNOWN), "Invalid permissionType UNKNOWN"),
        (acl(name=""), "Resource name should not be empty"),
        (
            acl(name="orders", rtype=Res.CLUSTER, op=Op.CREATE),
            "The only valid name for the CLUSTER resource is kafka-cluster",
        ),
        (acl(principal="alice"), "Could not parse principal from `alice` (no colon is present"),
        (acl(host=""), "Invalid host: the host should not be empty"),
    ],
)
async def test_create_refuses_what_is_not_concrete(log: SharedLog, bad: StandardAcl, message: str) -> None:
    ctl, _, _ = await active_cluster(log, [])
    first = len(log.entries)
    good = acl(name="kafka-cluster", rtype=Res.CLUSTER, op=Op.CREATE)
    results = await ctl.create_acls([bad, good])
    assert results[0].error.code == Errors.INVALID_REQUEST and message in (results[0].error.message or "")
    assert not results[1].error.failed  # the others of the request go on
    assert [r.resource_type for r in acl_records(log, first)] == [Res.CLUSTER]
    assert list(ctl.acls.acls.committed().values()) == [good]


async def test_an_existing_acl_is_not_written_twice(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    first = len(log.entries)
    results = await ctl.create_acls([acl(), acl(), acl(host="10.0.0.1")])  # twice in one request
    assert [r.error.failed for r in results] == [False] * 3
    results = await ctl.create_acls([acl(host="10.0.0.1"), acl(perm=Perm.DENY)])  # one exists already
    assert [r.error.failed for r in results] == [False] * 2
    assert [(r.host, r.permission_type) for r in acl_records(log, first)] == [
        ("*", Perm.ALLOW),
        ("10.0.0.1", Perm.ALLOW),
        ("*", Perm.DENY),
    ]
    assert await ctl.create_acls([acl()]) == [results[0]] and len(acl_records(log, first)) == 3  # nothing written


async def test_delete_with_filters(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    everything = [
        acl(),
        acl(name="*"),
        acl(name="ord", pattern=Pat.PREFIXED),
        acl(name="pay", pattern=Pat.PREFIXED),
        acl(rtype=Res.GROUP),
        acl(principal="User:bob", op=Op.WRITE),
    ]
    await ctl.create_acls(everything)
    ids = {a: i for i, a in ctl.acls.acls.committed().items()}
    first = len(log.entries)
    results = await ctl.delete_acls(
        [
            AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH, principal="User:alice"),  # literal, wildcard, prefix
            AclBindingFilter(Res.TOPIC, "orders", Pat.LITERAL),  # overlaps the first: listed, removed once
            AclBindingFilter(Res.ANY, None, Pat.ANY, operation=Op.UNKNOWN),  # refused
            AclBindingFilter(Res.GROUP, "nope", Pat.ANY),  # matches nothing
        ]
    )
    assert results[0].matching == (acl(), acl(name="*"), acl(name="ord", pattern=Pat.PREFIXED))
    assert results[1].matching == (acl(), acl(principal="User:bob", op=Op.WRITE))
    assert (results[2].error.code, results[2].error.message) == (Errors.INVALID_REQUEST, "Unknown entryFilter.")
    assert not results[3].error.failed and results[3].matching == ()
    removed = [r.id for r in acl_records(log, first)]
    expected = [acl(), acl(name="*"), acl(name="ord", pattern=Pat.PREFIXED), acl(principal="User:bob", op=Op.WRITE)]
    assert removed == [ids[a] for a in expected]  # one RemoveAccessControlEntryRecord per ACL
    assert sorted(ctl.acls.acls.committed().values()) == sorted(
        [acl(name="pay", pattern=Pat.PREFIXED), acl(rtype=Res.GROUP)]
    )
    assert ctl.authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == DENIED
    assert ctl.authorizer.authorize("User:alice", "h", Op.READ, Res.GROUP, "orders") == ALLOWED
    [unknown] = await ctl.delete_acls([AclBindingFilter(Res.UNKNOWN)])
    assert unknown.error.message == "Unknown patternFilter."
    assert (await ctl.describe_acls(AclBindingFilter(pattern_type=Pat.UNKNOWN))).error.code == Errors.INVALID_REQUEST
    everything_left = await ctl.describe_acls(AclBindingFilter())
    assert everything_left.acls == (
        acl(name="pay", pattern=Pat.PREFIXED),
        acl(rtype=Res.GROUP),
    )  # sorted: TOPIC 2 < GROUP 3


async def test_describe_reads_committed_state(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    await ctl.create_acls([acl()])
    log.auto_commit = False
    create = asyncio.ensure_future(ctl.create_acls([acl(name="pay")]))
    await settle()
    assert ctl.acls.describe_acls(AclBindingFilter(), committed=True).acls == (acl(),)
    read = asyncio.ensure_future(ctl.describe_acls(AclBindingFilter()))
    await settle()
    assert not read.done()  # it waits for the pending write: a client reads its own writes
    log.commit_all()
    assert (await asyncio.wait_for(read, 5)).acls == (acl(), acl(name="pay"))
    await create


async def test_leadership_loss_drops_uncommitted_acls_everywhere(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [])
    standby, _ = await start_controller(log, 2)
    await ctl.create_acls([acl()])
    log.auto_commit = False
    create = asyncio.ensure_future(ctl.create_acls([acl(name="pay"), acl(perm=Perm.DENY)]))
    await settle()
    assert len(ctl.acls.acls) == 3
    log.truncate_uncommitted()
    log.elect(2, 2)
    await settle()
    with pytest.raises(NotControllerError):
        await asyncio.wait_for(create, 5)
    for node in (ctl, standby):
        assert list(node.acls.acls.values()) == [acl()] and list(node.acls.ids_by_acl) == [acl()]
        assert node.authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == ALLOWED
    # the new controller writes them again, and the old one, now a standby, follows
    log.auto_commit = True
    results = await standby.create_acls([acl(name="pay"), acl(perm=Perm.DENY), acl()])
    assert not any(r.error.failed for r in results)
    await settle()
    for node in (ctl, standby):
        assert len(node.acls.acls.committed()) == 3
        assert node.authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == DENIED


async def test_foreign_records_duplicates_and_a_remove_of_an_unknown_id(log: SharedLog) -> None:
    """Another writer's records replay as Kafka's: an ACL held under two ids stays until both are removed (and is
    not written again meanwhile); a remove naming no ACL is fatal for the node that replays it."""
    ctl, _, _ = await active_cluster(log, [])
    standby, _ = await start_controller(log, 2)
    a, b = Uuid.random(), Uuid.random()
    log.foreign([acl_record(a, acl()), acl_record(b, acl())])
    log.commit_all()
    await settle()
    assert standby.acls.ids_by_acl.committed() == {acl(): (a, b)}
    log.foreign([RemoveAccessControlEntryRecord(id=a)])
    log.commit_all()
    await settle()
    assert standby.acls.ids_by_acl.committed() == {acl(): (b,)}
    assert standby.authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == ALLOWED
    first = len(log.entries)
    assert not (await ctl.create_acls([acl()]))[0].error.failed and acl_records(log, first) == []
    log.foreign([RemoveAccessControlEntryRecord(id=a)])
    with pytest.raises(ReplayError, match="no acl with ID"):
        log.commit_all()


async def test_snapshot_carries_the_acls_after_the_configs(log: SharedLog) -> None:
    ctl, _, _ = await active_cluster(log, [(0, None, False)])
    await ctl.create_acls([acl(), acl(name="ord", pattern=Pat.PREFIXED, perm=Perm.DENY), acl(rtype=Res.GROUP)])
    await ctl.delete_acls([AclBindingFilter(Res.GROUP)])
    await ctl.create_acls([acl(name="*", principal="User:*", op=Op.DESCRIBE)])
    snapshot = snapshot_of(ctl)
    kinds = [type(deserialize(v).message) for v in snapshot.records]
    assert kinds[-3:] == [AccessControlEntryRecord] * 3  # last (the order with configs: test_snapshot_image)
    fresh = loaded(snapshot)
    from_log = replayed(log, snapshot.snapshot_id.end_offset)
    for node in (fresh, from_log):
        assert node.acls.acls.committed() == ctl.acls.acls.committed()  # the same ids, the same ACLs
        assert node.acls.ids_by_acl.committed() == ctl.acls.ids_by_acl.committed()
        assert sorted(node.authorizer) == sorted(ctl.authorizer)
        assert node.authorizer.authorize("User:alice", "h", Op.READ, Res.TOPIC, "orders") == DENIED
        assert node.authorizer.authorize("User:bob", "h", Op.DESCRIBE, Res.TOPIC, "x") == ALLOWED
    # A snapshot loaded over state that held other ACLs: the authorizer holds the snapshot's, nothing else.
    other = SharedLog()
    behind, _, _ = await active_cluster(other, [])
    await behind.create_acls([acl(principal="User:mallory", op=Op.ALL)])
    behind.handle_leader_change(type(other.leader)(2, 2))  # a standby now, as Raft would make it before loading
    behind.handle_load_snapshot(MemorySnapshotReader(snapshot))
    assert sorted(behind.authorizer) == sorted(ctl.authorizer)
    assert behind.authorizer.authorize("User:mallory", "h", Op.READ, Res.TOPIC, "t") == DENIED


async def test_a_brokers_image_holds_and_serves_the_same_acls(log: SharedLog) -> None:
    """A broker's image (serve_local_reads: never active) replays the ACL records like a standby, answers
    DescribeAcls from them and decides as the controller does."""
    image, _ = await start_controller(log, 101, quiet_settings(serve_local_reads=True))
    ctl, _, _ = await active_cluster(log, [])
    await ctl.create_acls([acl(), acl(name="*", principal="User:*", op=Op.DESCRIBE)])
    await settle()
    assert not image.active
    described = await image.describe_acls(AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH))
    assert described.acls == (acl(name="*", principal="User:*", op=Op.DESCRIBE), acl())
    assert image.authorizer.authorize("User:bob", "h", Op.DESCRIBE, Res.TOPIC, "x") == ALLOWED
    assert image.authorizer.authorize("User:bob", "h", Op.READ, Res.TOPIC, "orders") == DENIED
    with pytest.raises(NotControllerError):
        await image.create_acls([acl(name="pay")])
