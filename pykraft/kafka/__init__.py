"""Kafka's binary protocol on a controller: a second front door onto the same QuorumController as the gRPC API.

:mod:`~pykraft.kafka.protocol` frames and headers, :mod:`~pykraft.kafka.registry` the APIs, one module per API under
:mod:`pykraft.kafka.apis`, and :mod:`~pykraft.kafka.listener` the asyncio server.
"""
