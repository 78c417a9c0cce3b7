"""The broker agent's simulated data plane: enough replication to make the ISR real.

Each partition replica on a broker has a log end offset (LEO) counted in messages; no bytes are stored. A leader's
log grows at the agent's produce rate; followers fetch from their leader over gRPC (``proto/broker.proto``) and
move their LEO to what the leader gave them; the leader tracks each follower as Kafka's ``Replica`` does and
shrinks or expands the ISR through the controller's AlterPartition, as Kafka's ``Partition`` does. A reassignment's
new replicas start empty and copy their leader's log, bounded by Kafka's replication throttles and a disk rate.

- :mod:`pykraft.replica.partition`: one partition's leader and follower state and its decisions (pure: every method
  takes the time; nothing reads a clock or does I/O).
- :mod:`pykraft.replica.manager`: the partitions of one broker, metadata, fetch answers, AlterPartition batching,
  the throttles applied to fetches.
- :mod:`pykraft.replica.throttle`: token buckets, Kafka's throttled-replica lists, one broker's quotas.
- :mod:`pykraft.replica.data_plane`: the I/O — the fetch and DescribeReplicas service, follower fetchers, the
  metadata and config poller.
"""
