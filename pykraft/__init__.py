import os

# gRPC's fork support restarts its polling threads in a forked child, where they crash once the child closes the
# descriptors it inherited. Our only fork is the child that writes a snapshot (quorum/log/snapshot_fork.py), which
# never touches gRPC: without fork support it inherits none of gRPC's threads. Set before anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
