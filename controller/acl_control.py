"""AclControl: the ACLs stored in the metadata log (Kafka's AclControlManager).

- State: every ACL by its id, and the ids holding each distinct ACL, in timeline maps like the other managers',
  so the active controller's uncommitted ACLs are dropped with the rest on a lost leadership. Standbys and
  brokers' images replay the same AccessControlEntryRecord / RemoveAccessControlEntryRecord and hold the same
  ACLs; snapshots carry them (``controller/snapshot.py``).
- :meth:`AclControl.create_acls`, :meth:`AclControl.delete_acls`: CreateAcls and DeleteAcls with Kafka's
  validation, codes and messages; like every manager here they read state and return records plus a response, and
  :meth:`AclControl.replay` is the only code that changes state.
- :meth:`AclControl.publish` keeps a :class:`~controller.authorizer.StandardAuthorizer` equal to the *committed*
  ACLs: called after each committed batch and after a snapshot load, it applies the ids whose committed value
  changed (or reloads everything after the maps were replaced), so an ACL takes effect once it is committed, on
  every node alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import structlog

from controller.authorizer import (
    CLUSTER_NAME,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    StandardAcl,
    StandardAuthorizer,
    from_code,
    parse_principal,
)
from controller.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
from controller.results import NO_ERROR, ApiError, ControllerResult
from controller.timeline import Timeline, TimelineDict
from quorum.errors import Errors
from quorum.log.message import ApiMessage, Uuid

log = structlog.get_logger("controller")


@dataclass(frozen=True)
class AclCreateResult:
    error: ApiError = NO_ERROR


@dataclass(frozen=True)
class AclDeleteResult:
    """One filter's answer: an error for the filter, or the ACLs it matched (each removed)."""

    error: ApiError = NO_ERROR
    matching: tuple[StandardAcl, ...] = ()


@dataclass(frozen=True)
class DescribeAclsResult:
    error: ApiError = NO_ERROR
    acls: tuple[StandardAcl, ...] = ()


def acl_of(record: AccessControlEntryRecord) -> StandardAcl:
    return StandardAcl(
        record.resource_type,
        record.resource_name,
        record.pattern_type,
        record.principal,
        record.host,
        record.operation,
        record.permission_type,
    )


def acl_record(acl_id: Uuid, acl: StandardAcl) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


def validate_new_acl(acl: StandardAcl) -> ApiError | None:
    """Kafka's AclControlManager.validateNewAcl, and the forwarding broker's checks of a creation (the cluster
    resource's name), which run here because clients reach the controller directly. Every failure is
    INVALID_REQUEST with Kafka's message naming the field. An empty host is refused too (ours: Kafka's
    AccessControlEntry only refuses a null one, and an empty host could never match a connection)."""
    resource_type = from_code(ResourceType, acl.resource_type)
    pattern_type = from_code(PatternType, acl.pattern_type)
    operation = from_code(AclOperation, acl.operation)
    permission = from_code(AclPermissionType, acl.permission_type)
    if resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        message = f"Invalid resourceType {resource_type.name}"
    elif pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        message = f"Invalid patternType {pattern_type.name}"
    elif operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        message = f"Invalid operation {operation.name}"
    elif permission not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        message = f"Invalid permissionType {permission.name}"
    elif not acl.resource_name:
        message = "Resource name should not be empty"
    elif resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        message = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    elif not acl.host:
        message = "Invalid host: the host should not be empty (* matches every host)"
    else:
        try:
            parse_principal(acl.principal)
            return None
        except ValueError as e:
            message = str(e)
    return ApiError(Errors.INVALID_REQUEST, message)


class AclControl:
    def __init__(self, timeline: Timeline, new_id: Callable[[], Uuid] = Uuid.random) -> None:
        self.new_id = new_id
        self.acls: TimelineDict[Uuid, StandardAcl] = TimelineDict(timeline)
        # Each distinct ACL -> the ids holding it: one, unless another writer wrote it twice (replay accepts that;
        # this controller never writes an ACL that exists).
        self.ids_by_acl: TimelineDict[StandardAcl, tuple[Uuid, ...]] = TimelineDict(timeline)
        self._published: StandardAuthorizer | None = None  # the authorizer publish() keeps up to date
        self._published_loads = -1

    # -- replay --------------------------------------------------------------------------------------------------

    def replay(self, record: ApiMessage) -> None:
        if isinstance(record, AccessControlEntryRecord):
            acl = acl_of(record)
            before = self.acls.get(record.id)
            if before is not None:  # the same id again: the new ACL replaces the old one
                self._forget(record.id, before)
            self.acls[record.id] = acl
            ids = self.ids_by_acl.get(acl, ())
            if record.id not in ids:
                self.ids_by_acl[acl] = (*ids, record.id)
            log.debug("acl_replayed", id=str(record.id), acl=str(acl))
        elif isinstance(record, RemoveAccessControlEntryRecord):
            acl = self.acls.get(record.id)
            if acl is None:  # as Kafka: the log names an ACL this node never had; its state no longer follows
                raise ValueError(f"Unable to replay RemoveAccessControlEntryRecord: no acl with ID {record.id} found")
            del self.acls[record.id]
            self._forget(record.id, acl)
            log.debug("acl_removed", id=str(record.id), acl=str(acl))

    def _forget(self, acl_id: Uuid, acl: StandardAcl) -> None:
        ids = tuple(i for i in self.ids_by_acl.get(acl, ()) if i != acl_id)
        if ids:
            self.ids_by_acl[acl] = ids
        elif acl in self.ids_by_acl:
            del self.ids_by_acl[acl]

    # -- CreateAcls ----------------------------------------------------------------------------------------------

    def create_acls(self, creations: list[StandardAcl]) -> ControllerResult[list[AclCreateResult]]:
        """One result per creation, in order. An ACL that exists already (or twice in the request) succeeds
        without a record; each new one gets a random id. The records form one atomic batch."""
        results: list[AclCreateResult] = []
        records: list[ApiMessage] = []
        new: set[StandardAcl] = set()
        new_ids: set[Uuid] = set()
        for acl in creations:
            error = validate_new_acl(acl)
            if error is not None:
                results.append(AclCreateResult(error))
                continue
            if acl not in self.ids_by_acl and acl not in new:
                acl_id = self.new_id()
                while acl_id in self.acls or acl_id in new_ids:
                    acl_id = self.new_id()
                new.add(acl)
                new_ids.add(acl_id)
                records.append(acl_record(acl_id, acl))
            results.append(AclCreateResult())
        return ControllerResult(records, results)

    # -- DeleteAcls ----------------------------------------------------------------------------------------------

    def delete_acls(self, filters: list[AclBindingFilter]) -> ControllerResult[list[AclDeleteResult]]:
        """One result per filter, in order, listing every ACL it matches; an ACL that several filters match is
        listed by each and removed once. The records form one atomic batch."""
        results: list[AclDeleteResult] = []
        removed: dict[Uuid, None] = {}  # in the order found
        current = self.acls.items()
        for f in filters:
            unknown = f.unknown()
            if unknown is not None:
                results.append(AclDeleteResult(ApiError(Errors.INVALID_REQUEST, unknown)))
                continue
            matching = []
            for acl_id, acl in current:
                if f.matches(acl):
                    matching.append(acl)
                    removed[acl_id] = None
            results.append(AclDeleteResult(NO_ERROR, tuple(matching)))
        return ControllerResult([RemoveAccessControlEntryRecord(id=acl_id) for acl_id in removed], results)

    # -- DescribeAcls --------------------------------------------------------------------------------------------

    def describe_acls(self, acl_filter: AclBindingFilter, committed: bool = True) -> DescribeAclsResult:
        """The ACLs the filter matches, sorted by resource then entry; ``committed``: only what the high
        watermark has passed."""
        unknown = acl_filter.unknown()
        if unknown is not None:
            return DescribeAclsResult(ApiError(Errors.INVALID_REQUEST, unknown))
        view: Mapping[Uuid, StandardAcl] = self.acls.committed() if committed else self.acls
        return DescribeAclsResult(NO_ERROR, tuple(sorted(a for a in view.values() if acl_filter.matches(a))))

    # -- the authorizer ------------------------------------------------------------------------------------------

    def publish(self, authorizer: StandardAuthorizer) -> None:
        """Bring ``authorizer`` to the committed ACLs: the changed ids only, or all of them the first time and
        after the maps were bulk loaded or released."""
        committed = self.acls.committed()
        if self._published is not authorizer or self.acls.loads != self._published_loads:
            self.acls.take_committed_changes()  # from now on the map notes which ids change
            authorizer.replace_all(committed.items())
            self._published = authorizer
            self._published_loads = self.acls.loads
            return
        for acl_id in self.acls.take_committed_changes():
            acl = committed.get(acl_id)
            if acl is None:
                authorizer.remove_acl(acl_id)
            elif authorizer.get(acl_id) != acl:
                authorizer.add_acl(acl_id, acl)
