"""Deterministic simulation of a pykraft quorum: the real consensus core on a virtual clock, a lossy network and
crashing disks, with Raft's safety invariants checked after every step."""
