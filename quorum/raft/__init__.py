"""Raft for the metadata log: the consensus core, its roles, the batch accumulator, and the asyncio runtime."""
