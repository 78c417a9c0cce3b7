"""The invariants that catch what crashes can make of election state and commits, each shown able to fail: a node
acts only on the epoch, vote and leader it stored; a voter grants one candidate per epoch; a node that lacks
committed entries must not be able to win a vote (Raft's Figure 8)."""

from __future__ import annotations

import pytest
from simkit import calm, commit, core, wait_all_hw, wait_for_leader

from quorum.errors import Errors
from quorum.log.batch import build_batch
from quorum.raft.messages import Envelope, VoteResponse
from quorum.raft.roles import Voted
from quorum.sim.harness import InvariantViolation


def batch(offset: int, epoch: int, value: bytes = b"v") -> bytes:
    return build_batch([(None, value)], base_offset=offset, epoch=epoch)


def test_acting_on_a_vote_it_did_not_store_is_a_violation() -> None:
    sim = calm(1, 3)
    leader = wait_for_leader(sim, 1000)
    follower, third = (i for i in sim.nodes if i != leader)
    c = core(sim, follower)
    sim.check_invariants()
    c.role = Voted(c.epoch, third, sim.now + 1000)  # a vote it never wrote to its quorum-state
    with pytest.raises(InvariantViolation, match=f"node {follower} acts on a vote for {third} in epoch {c.epoch}"):
        sim.check_invariants()


def test_a_voter_granting_two_candidates_in_one_epoch_is_a_violation() -> None:
    sim = calm(1, 3)

    def grant(to: int, epoch: int, pre_vote: bool = False, granted: bool = True) -> None:
        sim._send(Envelope(1, to, VoteResponse(Errors.NONE, epoch, -1, granted, pre_vote, 1)))

    grant(2, 5)
    grant(2, 5)  # the same vote again (a duplicated request): fine
    grant(3, 5, pre_vote=True)  # a pre-vote binds nothing
    grant(3, 5, granted=False)
    grant(3, 6)  # the next epoch
    with pytest.raises(InvariantViolation, match="node 1 granted its vote in epoch 5 to both 2 and 3"):
        grant(3, 5)


def test_a_node_that_lacks_committed_entries_and_could_win_a_vote_is_a_violation() -> None:
    """Raft's Figure 8: committed entries are safe only if every node lacking them is less up to date than a
    majority. Two down nodes are edited into that state: one lost the committed tail and holds a later epoch."""
    sim = calm(1, 3)
    leader = wait_for_leader(sim, 1000)
    end = commit(sim, leader, b"committed") + 1
    wait_all_hw(sim, end)
    a, b = (i for i in sim.nodes if i != leader)
    sim.crash(a)
    sim.crash(b)
    sim.check_invariants()  # b holds the committed entries: fine
    log = sim.nodes[a].log
    log.truncate_to(end - 1)
    log.append(batch(end - 1, core(sim, leader).epoch + 1, b"never committed"))
    # a's log (later last epoch) is as up to date as b's: a and b elect a, which overwrites the committed entry.
    with pytest.raises(InvariantViolation, match=f"node {a} lacks committed entries below offset {end}"):
        sim.check_invariants()
