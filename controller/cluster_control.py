"""ClusterControl: which brokers exist, where they are (rack, listeners) and whether they may lead.

Registrations are replicated state (RegisterBrokerRecord, BrokerRegistrationChangeRecord, …). Heartbeats are not:
the active controller keeps each broker's last heartbeat in memory (Kafka's BrokerHeartbeatManager) and turns a
missed session into a fencing record. A new controller starts every session afresh, so a failover never fences a
healthy broker.

Broker lifecycle: registered fenced → unfenced once its heartbeats show it has seen its own registration →
fenced again after ``broker.session.timeout.ms`` without a heartbeat, or → controlled shutdown (leaderships moved
away) → fenced and told to stop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from controller.records import (
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    FenceBrokerRecord,
    RegisterBrokerRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from controller.results import ControllerResult
from controller.timeline import Timeline, TimelineDict
from quorum.errors import Errors, KafkaError
from quorum.log.message import ApiMessage, Uuid

if TYPE_CHECKING:
    from controller.departures import BrokerDepartures

DEFAULT_SESSION_TIMEOUT_MS = 9000  # broker.session.timeout.ms
# What a registration says its broker supports (name, min, max). Replay does not keep it: every broker here runs this
# build, so a snapshot writes it back unchanged.
SUPPORTED_FEATURES = (("metadata.version", 7, 22),)


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


class BrokerRegistration(NamedTuple):
    id: int
    epoch: int
    incarnation_id: Uuid
    rack: str | None
    endpoints: tuple[Endpoint, ...]
    fenced: bool = True
    in_controlled_shutdown: bool = False

    @property
    def active(self) -> bool:
        """May lead and be in an ISR: unfenced and not shutting down."""
        return not self.fenced and not self.in_controlled_shutdown


@dataclass(frozen=True)
class RegisterBrokerRequest:
    broker_id: int
    incarnation_id: Uuid
    rack: str | None
    endpoints: tuple[Endpoint, ...]


@dataclass(frozen=True)
class HeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shutdown: bool = False


@dataclass(frozen=True)
class HeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


@dataclass
class _Session:
    last_contact_ms: int
    metadata_offset: int = -1


def supported_features() -> list[BrokerFeature]:
    return [
        BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi) for n, lo, hi in SUPPORTED_FEATURES
    ]


class ClusterControl:
    def __init__(self, timeline: Timeline, session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS) -> None:
        self.brokers: TimelineDict[int, BrokerRegistration] = TimelineDict(timeline)
        self.session_timeout_ms = session_timeout_ms
        self._sessions: dict[int, _Session] = {}  # soft state of the active controller only

    # -- queries ---------------------------------------------------------------------------------------------

    def active(self, broker_id: int) -> bool:
        b = self.brokers.get(broker_id)
        return b is not None and b.active

    # -- requests (generate records; change nothing) ---------------------------------------------------------

    def register_broker(self, req: RegisterBrokerRequest, write_offset: int, now_ms: int) -> ControllerResult[int]:
        """A (re)registration. The broker epoch is the offset of its RegisterBrokerRecord, as in Kafka; a new
        incarnation replaces the old registration (the old process is gone or about to be)."""
        if req.broker_id < 0:
            raise KafkaError(f"broker_id: {req.broker_id} is not a valid broker id", Errors.INVALID_REQUEST)
        if not req.endpoints:
            raise KafkaError(f"endpoints: broker {req.broker_id} registered no listener", Errors.INVALID_REQUEST)
        record = RegisterBrokerRecord(
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id,
            broker_epoch=write_offset,
            end_points=[
                BrokerEndpoint(name=e.name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                for e in req.endpoints
            ],
            features=supported_features(),
            rack=req.rack,
            fenced=True,
            in_controlled_shutdown=False,
        )
        self._sessions[req.broker_id] = _Session(now_ms)
        return ControllerResult([record], write_offset)

    def heartbeat(
        self,
        req: HeartbeatRequest,
        committed_offset: int,
        now_ms: int,
        partition_moves: Callable[[int, bool], list[ApiMessage]],
        has_leaderships: Callable[[int], bool],
        departures: BrokerDepartures,
    ) -> ControllerResult[HeartbeatReply]:
        """Advance a broker's state. ``partition_moves(broker, removing)`` makes the PartitionChangeRecords that
        take leaderships and ISR membership away from a broker (or give leaderless partitions to it);
        ``departures`` moves a shutting-down broker's in steps (controller/departures.py)."""
        b = self._check_epoch(req.broker_id, req.broker_epoch)
        session = self._sessions.setdefault(req.broker_id, _Session(now_ms))
        session.last_contact_ms = now_ms
        session.metadata_offset = max(session.metadata_offset, req.current_metadata_offset)
        records: list[ApiMessage] = []
        caught_up = req.current_metadata_offset >= b.epoch  # it has seen its own registration
        should_shut_down = False
        if req.want_shutdown:
            if not b.in_controlled_shutdown:
                # Kafka's order: the broker is marked shutting down, then its leaderships and ISR places go.
                records.append(self._change(b, in_controlled_shutdown=True))
                records += departures.shutting_down(b.id)
            elif departures.leaving(b.id):
                pass  # its places are still moving
            elif has_leaderships(b.id):
                records += departures.shutting_down(b.id)  # a new active controller resumes where it stopped
            else:
                if not b.fenced:
                    records.append(self._change(b, fenced=True))
                should_shut_down = True
        elif req.want_fence:
            if not b.fenced:
                records += partition_moves(b.id, True)
                records.append(self._change(b, fenced=True))
        elif b.fenced and caught_up and not b.in_controlled_shutdown:
            records.append(self._change(b, fenced=False))
            records += partition_moves(b.id, False)
        fenced_next = b.fenced
        for r in records:
            if isinstance(r, BrokerRegistrationChangeRecord) and r.broker_id == b.id and r.fenced != 0:
                fenced_next = r.fenced == 1
        in_shutdown = b.in_controlled_shutdown or req.want_shutdown
        # Kafka: "caught up" in the reply means it has every committed offset; unfencing needs only its own
        # registration (above).
        reply = HeartbeatReply(
            req.current_metadata_offset >= committed_offset, fenced_next, in_shutdown, should_shut_down
        )
        return ControllerResult(records, reply, atomic=False)

    def stale_broker(self, now_ms: int) -> int | None:
        """The lowest id among unfenced brokers whose session has expired (one heartbeat missed for too long): the
        next to fence, one at a time as Kafka's maybeFenceOneStaleBroker (the moves of a second broker must see the
        first one's replayed, or its ISR changes would put the first back into the ISRs it had just left)."""
        return next((broker_id for broker_id in sorted(self.brokers) if self.session_expired(broker_id, now_ms)), None)

    def session_expired(self, broker_id: int, now_ms: int) -> bool:
        """Registered, unfenced, not shutting down, and silent for longer than the session timeout."""
        b = self.brokers.get(broker_id)
        session = self._sessions.get(broker_id)
        if b is None or b.fenced or b.in_controlled_shutdown or session is None:
            return False
        return now_ms - session.last_contact_ms > self.session_timeout_ms

    def fence_record(self, broker_id: int) -> ApiMessage:
        return self._change(self.brokers[broker_id], fenced=True)

    def start_sessions(self, now_ms: int) -> None:
        """A newly active controller gives every broker a fresh session (it has no heartbeat history)."""
        self._sessions = {broker_id: _Session(now_ms) for broker_id in self.brokers}

    def last_contact_ms(self, broker_id: int) -> int | None:
        s = self._sessions.get(broker_id)
        return None if s is None else s.last_contact_ms

    def _check_epoch(self, broker_id: int, epoch: int) -> BrokerRegistration:
        b = self.brokers.get(broker_id)
        if b is None:
            raise KafkaError(f"broker_id: broker {broker_id} is not registered", Errors.BROKER_ID_NOT_REGISTERED)
        if b.epoch != epoch:
            raise KafkaError(
                f"broker_epoch: {epoch} is stale; broker {broker_id} is registered with epoch {b.epoch}",
                Errors.STALE_BROKER_EPOCH,
            )
        return b

    @staticmethod
    def _change(
        b: BrokerRegistration, *, fenced: bool | None = None, in_controlled_shutdown: bool | None = None
    ) -> BrokerRegistrationChangeRecord:
        # Kafka 3.3+ writes BrokerRegistrationChangeRecord (not Fence/UnfenceBrokerRecord): version 0 for a fencing
        # change, 1 once it carries InControlledShutdown.
        return BrokerRegistrationChangeRecord(
            broker_id=b.id,
            broker_epoch=b.epoch,
            fenced=0 if fenced is None else (1 if fenced else -1),
            in_controlled_shutdown=1 if in_controlled_shutdown else 0,
        )

    # -- replay (the only writer of state) --------------------------------------------------------------------

    def replay(self, record: ApiMessage) -> None:
        if isinstance(record, RegisterBrokerRecord):
            self.brokers[record.broker_id] = BrokerRegistration(
                id=record.broker_id,
                epoch=record.broker_epoch,
                incarnation_id=record.incarnation_id,
                rack=record.rack,
                endpoints=tuple(Endpoint(e.name, e.host, e.port, e.security_protocol) for e in record.end_points),
                fenced=record.fenced,
                in_controlled_shutdown=record.in_controlled_shutdown,
            )
        elif isinstance(record, BrokerRegistrationChangeRecord):
            b = self._registered(record.broker_id, record.broker_epoch)
            if b is not None:
                # As Kafka's BrokerRegistration: fenced 0 = unchanged; a controlled shutdown lasts until the broker
                # registers again.
                fenced = b.fenced if record.fenced == 0 else record.fenced == 1
                shutdown = b.in_controlled_shutdown or record.in_controlled_shutdown == 1
                self.brokers[b.id] = b._replace(fenced=fenced, in_controlled_shutdown=shutdown)
        elif isinstance(record, FenceBrokerRecord | UnfenceBrokerRecord):
            b = self._registered(record.id, record.epoch)
            if b is not None:
                self.brokers[b.id] = b._replace(fenced=isinstance(record, FenceBrokerRecord))
        elif isinstance(record, UnregisterBrokerRecord):
            b = self._registered(record.broker_id, record.broker_epoch)
            if b is not None:
                del self.brokers[b.id]
                self._sessions.pop(b.id, None)

    def _registered(self, broker_id: int, epoch: int) -> BrokerRegistration | None:
        b = self.brokers.get(broker_id)
        return b if b is not None and b.epoch == epoch else None
