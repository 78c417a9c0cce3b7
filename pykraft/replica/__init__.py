"""The broker agent's simulated data plane: enough replication to make the ISR real.

Each partition replica on a broker has a log end offset (LEO) counted in messages; no bytes are stored. A leader's
log grows at the agent's produce rate; followers fetch from their leader over gRPC (``proto/broker.proto``) and
move their LEO to what the leader gave them; the leader tracks each follower as Kafka's ``Replica`` does and
shrinks or expands the ISR through the controller's AlterPartition, as Kafka's ``Partition`` does.

- :mod:`pykraft.replica.partition`: one partition's leader and follower state and its decisions (pure: every method
  takes the time; nothing reads a clock or does I/O).
- :mod:`pykraft.replica.manager`: the partitions of one broker, metadata, fetch answers, AlterPartition batching.
- :mod:`pykraft.replica.data_plane`: the I/O — the fetch service, follower fetchers, the metadata poller.
"""
