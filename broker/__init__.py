"""A broker's side of the metadata log: it replicates ``__cluster_metadata`` as a Raft observer and keeps its own
metadata image (:mod:`broker.observer`). Uses :mod:`quorum` and :mod:`controller`, never :mod:`pykraft`: the
process shell (``pykraft broker``) and the simulated data plane build on it."""
