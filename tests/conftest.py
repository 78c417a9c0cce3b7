"""Loaded before any test module: ``pykraft`` turns gRPC's fork support off before grpc is first imported, as in a
node (a snapshot is written by a forked child: quorum/log/snapshot_fork.py)."""

import pykraft  # noqa: F401
