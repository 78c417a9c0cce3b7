"""The bounds of every node listener and peer connection, each with its reason: message sizes, connections, streams,
handshakes, idleness, queues (quorum/transport/peer.py, server.py and frames.py apply them)."""

from __future__ import annotations

# Message size limits, set deliberately (gRPC's default receive limit is 4 MiB, its send limit unbounded). The
# largest legitimate message on a node's listener is a Raft FetchResponse or FetchSnapshotResponse: up to
# RaftConfig.fetch_max_bytes (8 MiB, Kafka's MAX_FETCH_SIZE_BYTES) of records — and a single batch may reach
# max_batch_bytes (8 MiB) on its own — plus a few dozen bytes of header. The quorum admin's AppendRecords carries at
# most one such batch, a CreateTopics of 10,000 topics with explicit 3-replica assignments is ~0.5 MiB, and ExportLog
# chunks default to 4 MiB. 16 MiB is twice the largest of them; anything bigger is refused by gRPC itself with
# RESOURCE_EXHAUSTED before a byte of it reaches Python.
RAFT_FETCH_MAX_BYTES = 8 * 1024 * 1024
MAX_MESSAGE_BYTES = 2 * RAFT_FETCH_MAX_BYTES
# Slowloris bounds. A connection holds at most this many open calls (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a
# peer uses one; an admin client multiplexes all its calls on one connection (the benchmarks keep 64 to 256 in
# flight). Past the limit, a client that knows it waits for a slot on its side; but calls opened in a burst before
# the server's SETTINGS reach the client are refused (REFUSED_STREAM: UNAVAILABLE): at 100, 128 CreateTopics callers
# starting at once got thousands of UNAVAILABLE in the CreateTopics benchmark, and 1,000 calls at once on a fresh
# channel 636 (grpcio 1.78). 1,024 leaves that far above any client of ours.
MAX_STREAMS_PER_CONNECTION = 1024
# Connections a listener accepts at once: 3-5 voters, one or two per broker (hundreds at most), admin tools. Beyond
# it new connections are refused, so idle connections cost at most this many x the streams above.
MAX_CONNECTIONS = 4096
# A connection that has not finished its HTTP/2 (and TLS) handshake by then is closed (gRPC's default: 120 s).
HANDSHAKE_TIMEOUT_MS = 10_000
# A connection with no call open for this long is closed (HTTP/2 GOAWAY; gRPC's default: never), so connections
# that carry nothing do not hold a place under MAX_CONNECTIONS for ever. Kafka's connections.max.idle.ms default.
# Peers and brokers are never idle (a peer stream stays open, heartbeats every 2 s); an admin client's channel
# reconnects on its next call.
CONNECTION_MAX_IDLE_MS = 600_000
# The server pings each connection this often and closes it when the ack takes longer than the timeout: a peer that
# vanished without closing (a host powered off, a dropped route) stops holding its connection and streams.
SERVER_KEEPALIVE_TIME_MS = 60_000
SERVER_KEEPALIVE_TIMEOUT_MS = 20_000
# Inbound peer streams that have not sent their first message yet. A real peer's stream may stay silent for long (a
# leader sends a follower nothing between elections), so there is no deadline; instead, at this many the oldest is
# ended to make room: an idle stranger costs a bounded amount, and a real peer whose stream is ended reconnects.
PENDING_STREAM_LIMIT = 64
# Inbound streams of non-voters (brokers' observers) at once, one per node id; at the limit the one silent longest is
# ended (a live observer fetches all the time). Voters' streams are never counted nor ended for room.
OBSERVER_STREAM_LIMIT = 1024
QUEUE_LIMIT = 512  # messages waiting per stream
# Bytes a frame connection may hold unsent (a peer that stops reading); more are dropped, as past a full queue. Twice
# the largest message: a fetch answer in full behind another. (On TLS the count is the TLS layer's: the socket's own
# buffer below it adds at most a message and 64 KiB.)
WRITE_BUFFER_LIMIT = 2 * MAX_MESSAGE_BYTES
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # Reconnect attempts to a loopback or LAN peer cost next to nothing; a short ceiling means a restarted voter
    # hears the leader (or a resigning leader's EndQuorumEpoch) within ~0.1 s instead of up to a second.
    ("grpc.initial_reconnect_backoff_ms", 20),
    ("grpc.min_reconnect_backoff_ms", 20),
    ("grpc.max_reconnect_backoff_ms", 100),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]
SERVER_OPTIONS = [  # every node listener (peers, quorum admin, Controller service) and the brokers' listener
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
    ("grpc.max_allowed_incoming_connections", MAX_CONNECTIONS),
    ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_MS),
    ("grpc.max_connection_idle_ms", CONNECTION_MAX_IDLE_MS),
    ("grpc.keepalive_time_ms", SERVER_KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", SERVER_KEEPALIVE_TIMEOUT_MS),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.so_reuseport", 0),
]
