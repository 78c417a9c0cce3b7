"""Prometheus metrics of a ``pykraft broker`` agent, read from its data plane at scrape time (nothing on the hot
path), named after Kafka's broker MBeans:

- ``kafka_server_replicamanager_*``: partition_count, leader_count, under_replicated_partitions (led here, fewer in
  the ISR than the replication factor, which during a reassignment leaves out the replicas being added),
  reassigning_partitions (led here, with replicas being added), isr_shrinks / isr_expands (counters);
- ``kafka_server_brokertopicmetrics_*_total``: replication_bytes_in / _out (fetched as a follower / sent as a
  leader) and reassignment_bytes_in / _out (the part of those for replicas a reassignment adds);
- ``kafka_server_replication_*``: throttled_partitions{side} (replicas whose replication is throttled now),
  throttle_rate_bytes{side} (the rates in force: leader, follower, disk; +Inf when unthrottled),
  throttled_bytes_total{side}, and quota_holds_total{side} (fetches a spent quota held back);
- ``kafka_log_log_size{topic,partition}`` and ``kafka_log_log_end_offset{topic,partition}``: each replica's size;
- with a metadata observer (``--controller-quorum-voters``): its ``kafka_raft_*`` and
  ``pykraft_metadata_last_applied_offset{,_lag}`` (also as Kafka's ``kafka_server_metadata_last_applied_offset``);
- ``process_*``, ``python_*``, ``pykraft_gc_*`` and ``pykraft_build_info`` as the controllers have them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pykraft.metrics import MetadataCollector, RaftCollector, register_process_collectors, single_samples
from pykraft.replica.manager import ReplicaManager, under_replicated
from pykraft.replica.partition import MESSAGE_BYTES
from pykraft.replica.throttle import TokenBucket

if TYPE_CHECKING:
    from broker.observer import MetadataObserver


def _rate(bucket: TokenBucket) -> float:
    return float("inf") if bucket.unlimited else float(bucket.rate)


class BrokerCollector(Collector):
    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        m = self.manager
        labels = ["broker_id"]
        bid = [str(m.broker_id)]
        now = m.clock()
        partitions = list(m.partitions.values())  # a copy: the event loop may change the dict meanwhile
        led = [p for p in partitions if p.is_leader]

        gauge, counter = single_samples(labels, bid)

        def by_side(
            family: GaugeMetricFamily | CounterMetricFamily, values: dict[str, float]
        ) -> GaugeMetricFamily | CounterMetricFamily:
            for side, value in values.items():
                family.add_metric([*bid, side], value)
            return family

        yield gauge("kafka_server_replicamanager_partition_count", "Replicas held by this broker", len(partitions))
        yield gauge("kafka_server_replicamanager_leader_count", "Partitions led by this broker", len(led))
        yield gauge(
            "kafka_server_replicamanager_under_replicated_partitions",
            "Partitions led here with fewer in-sync replicas than the replication factor",
            sum(1 for p in led if under_replicated(p)),
        )
        yield gauge(
            "kafka_server_replicamanager_reassigning_partitions",
            "Partitions led here that a reassignment is adding replicas to",
            sum(1 for p in led if p.is_reassigning),
        )
        c = m.counters
        yield counter("kafka_server_replicamanager_isr_shrinks", "ISR shrinks this leader made", c.isr_shrinks)
        yield counter("kafka_server_replicamanager_isr_expands", "ISR expansions this leader made", c.isr_expands)
        yield counter(
            "kafka_server_brokertopicmetrics_replication_bytes_in",
            "Bytes fetched as a follower",
            c.replication_bytes_in,
        )
        yield counter(
            "kafka_server_brokertopicmetrics_replication_bytes_out", "Bytes sent to followers", c.replication_bytes_out
        )
        yield counter(
            "kafka_server_brokertopicmetrics_reassignment_bytes_in",
            "Bytes fetched for replicas this broker is adding",
            c.reassignment_bytes_in,
        )
        yield counter(
            "kafka_server_brokertopicmetrics_reassignment_bytes_out",
            "Bytes sent to replicas a reassignment is adding",
            c.reassignment_bytes_out,
        )
        t = m.throttles
        side = [*labels, "side"]
        yield by_side(
            GaugeMetricFamily(
                "kafka_server_replication_throttled_partitions", "Replicas throttled now, by side", labels=side
            ),
            {
                "leader": sum(1 for p in led if m.throttled(p)),
                "follower": sum(1 for p in partitions if not p.is_leader and m.follower_throttled(p)),
            },
        )
        yield by_side(
            GaugeMetricFamily(
                "kafka_server_replication_throttle_rate_bytes",
                "Replication rates in force, bytes per second (+Inf: unthrottled)",
                labels=side,
            ),
            {"leader": _rate(t.leader), "follower": _rate(t.follower), "disk": _rate(t.disk)},
        )
        yield by_side(
            CounterMetricFamily(
                "kafka_server_replication_throttled_bytes", "Bytes moved for throttled replicas", labels=side
            ),
            {"leader": t.counters.leader_throttled_bytes, "follower": t.counters.follower_throttled_bytes},
        )
        yield by_side(
            CounterMetricFamily(
                "kafka_server_replication_quota_holds",
                "Times a spent quota held a replica back (leader: an answer without records; follower: a partition "
                "left out of a fetch; disk: the disk rate did)",
                labels=side,
            ),
            {
                "leader": t.counters.leader_holds,
                "follower": t.counters.follower_skips,
                "disk": t.counters.disk_holds,
            },
        )
        replica = [*labels, "topic", "partition"]
        size = GaugeMetricFamily("kafka_log_log_size", "Replica size in bytes", labels=replica)
        leo = GaugeMetricFamily("kafka_log_log_end_offset", "Replica log end offset", labels=replica)
        for p in partitions:
            end = p.peek_leo(now)
            size.add_metric([*bid, p.topic, str(p.index)], end * MESSAGE_BYTES)
            leo.add_metric([*bid, p.topic, str(p.index)], end)
        yield size
        yield leo


def broker_registry(manager: ReplicaManager, observer: MetadataObserver | None = None) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(BrokerCollector(manager))
    if observer is not None:
        registry.register(RaftCollector(observer.node))
        registry.register(
            MetadataCollector(
                observer.node,
                lambda: observer.current_metadata_offset,
                "kafka_server_metadata_last_applied_offset",
            )
        )
    register_process_collectors(registry, "broker")
    return registry


def serve_broker_metrics(
    manager: ReplicaManager, host: str, port: int, observer: MetadataObserver | None = None
) -> WSGIServer:
    """Serve the broker's metrics on ``host:port`` from a daemon thread (raises OSError when it cannot be bound).
    Returns the server: ``shutdown()`` stops it."""
    server, _ = start_http_server(port, addr=host, registry=broker_registry(manager, observer))
    return server
