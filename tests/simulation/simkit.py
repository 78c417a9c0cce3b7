"""Helpers for scripted simulator scenarios: a fault-free cluster, waiting for a settled leader, committing."""

from __future__ import annotations

from quorum.log.batch import iter_batches
from quorum.log.control import LeaderChangeMessage, decode_control
from quorum.raft.core import RaftCore
from quorum.raft.messages import Envelope, FetchRequest
from quorum.raft.roles import Follower, Leader
from quorum.sim.harness import Faults, SimNode, Simulation


def calm_faults() -> Faults:
    """No random faults, crash points or random client appends: the test scripts them."""
    return Faults.none()


def calm(seed: int = 1, voters: int = 3) -> Simulation:
    return Simulation(seed, voters, faults=calm_faults())


def core(sim: Simulation, node_id: int) -> RaftCore:
    c = sim.nodes[node_id].core
    assert c is not None, f"node {node_id} is down"
    return c


def settled_leader(sim: Simulation, among: list[int] | None = None) -> int | None:
    """A leader that has committed in its epoch and that every other up node in ``among`` (default: all) follows."""
    ids = list(sim.nodes) if among is None else among
    for i in ids:
        c = sim.nodes[i].core
        if c is None or not isinstance(c.role, Leader) or c.role.high_watermark is None:
            continue
        others = [sim.nodes[j].core for j in ids if j != i]
        if all(o is None or (isinstance(o.role, Follower) and o.leader_id == i and o.epoch == c.epoch) for o in others):
            return i
    return None


def wait_for_leader(sim: Simulation, max_ms: int, among: list[int] | None = None, other_than: int | None = None) -> int:
    started = sim.now

    def found() -> bool:
        leader = settled_leader(sim, among)
        return leader is not None and leader != other_than

    assert sim.run_until(found, max_ms), (
        f"no settled leader among {among or list(sim.nodes)} within {max_ms} ms of t={started}: "
        + "; ".join(describe(sim, i) for i in sim.nodes)
    )
    leader = settled_leader(sim, among)
    assert leader is not None
    return leader


def commit(sim: Simulation, leader: int, value: bytes, max_ms: int = 1000) -> int:
    """Append ``value`` on ``leader`` and run until it is acknowledged (committed in the leader's epoch)."""
    offset = sim.append(leader, value)
    assert sim.run_until(lambda: offset in sim.acked, max_ms), (
        f"{value!r} at offset {offset} not committed in {max_ms} ms"
    )
    assert sim.acked[offset] == value
    return offset


def wait_all_hw(sim: Simulation, target: int, max_ms: int = 1000, among: list[int] | None = None) -> None:
    ids = list(sim.nodes) if among is None else among
    assert sim.run_until(lambda: all(core(sim, i).high_watermark >= target for i in ids), max_ms), (
        f"not every node of {ids} reached high watermark {target}: " + "; ".join(describe(sim, i) for i in sim.nodes)
    )


def sync(sim: Simulation, among: list[int] | None = None, max_ms: int = 1000) -> None:
    """Run until every up node of ``among`` knows the highest high watermark any node knows."""
    ids = [i for i in (list(sim.nodes) if among is None else among) if sim.nodes[i].up]
    target = max(core(sim, i).high_watermark for i in ids)
    wait_all_hw(sim, target, max_ms, ids)


def values(node: SimNode) -> list[bytes]:
    """The data records a node holds (its snapshot's below its log start, then its log's), in order (control
    batches skipped)."""
    out: list[bytes] = []
    for batch in iter_batches(node.log.data()):
        if not batch.is_control:
            out.extend(r.value or b"" for r in batch.records())
    return out


def leader_changes(node: SimNode) -> list[tuple[int, LeaderChangeMessage]]:
    """``(epoch, LeaderChangeMessage)`` of every control batch a node holds (snapshot, then log)."""
    out = []
    for batch in iter_batches(node.log.data()):
        if batch.is_control:
            for r in batch.records():
                _, message, _ = decode_control(r.key, r.value)
                out.append((batch.epoch, message))
    return out


def describe(sim: Simulation, node_id: int) -> str:
    n = sim.nodes[node_id]
    if n.core is None:
        return f"{node_id}: down (leo {n.log.end_offset})"
    c = n.core
    return f"{node_id}: {c.role.name} epoch {c.epoch} leader {c.leader_id} leo {n.log.end_offset} hw {c.high_watermark}"


def assert_acked_everywhere(sim: Simulation, among: list[int] | None = None) -> None:
    """Every acknowledged append sits at its offset in the log (or the snapshot) of each (up or down) node of
    ``among``."""
    assert sim.acked, "nothing was acknowledged"
    for i in among or list(sim.nodes):
        node = sim.nodes[i]
        held = values(node)
        for offset, value in sim.acked.items():
            assert value in held, f"node {i} lost acknowledged {value!r} (offset {offset})"
            assert value in node.log.data_from(offset), f"node {i} holds {value!r} elsewhere than at offset {offset}"


def guard_fetch_offsets(sim: Simulation) -> Simulation:
    """Add a check to ``sim``: every Fetch a voter sends names an offset its own log holds durably.

    The leader counts a voter's fetch offset toward the high watermark as data that voter has on disk; a fetch
    sent before the voter's flush completes lets the leader commit what a crash can still take back. The harness
    only notices when that actually moves the high watermark past what a majority holds; this catches the fetch
    itself. (A check of the test suite, not of ``python -m quorum.sim``.)"""
    send = sim._send

    def checked(env: Envelope) -> None:
        m = env.message
        if isinstance(m, FetchRequest):
            durable = sim.nodes[env.source].log.durable_end
            if m.fetch_offset > durable:
                raise sim._violation(
                    f"node {env.source} fetches at offset {m.fetch_offset} but holds only {durable} durably "
                    "(check of tests/simulation/simkit.py:guard_fetch_offsets)"
                )
        send(env)

    sim._send = checked  # type: ignore[method-assign]
    return sim


def guard_progress(sim: Simulation, max_steps_at_one_instant: int = 10_000) -> Simulation:
    """Add a check to ``sim``: virtual time keeps moving. A core whose next deadline stays in the past is ticked
    again and again at one instant (a busy loop in the real runtime); ``run_until`` would never return."""
    step = sim.step
    last = [sim.now, 0]

    def checked() -> None:
        step()
        if sim.now != last[0]:
            last[0], last[1] = sim.now, 0
            return
        last[1] += 1
        if last[1] > max_steps_at_one_instant:
            raise sim._violation(
                f"livelock: {last[1]} steps at t={sim.now} ms without time moving "
                "(check of tests/simulation/simkit.py:guard_progress)"
            )

    sim.step = checked  # type: ignore[method-assign]
    return sim
