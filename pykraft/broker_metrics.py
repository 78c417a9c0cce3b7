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
- ``kafka_log_log_size{topic,partition}`` and ``kafka_log_log_end_offset{topic,partition}``: each replica's size,
  on ``/metrics`` only while the broker holds at most ``--metrics-replica-series-max`` replicas (default 10,000;
  0: never). Past the cap ``/metrics`` carries none of them (never an arbitrary subset) and
  ``pykraft_broker_replica_series_omitted`` counts the replicas left out (0 under the cap, so a dashboard tells
  "capped" from "no replicas"); ``/metrics/replicas`` on the same port always lists every replica, for a scrape
  job that opts in. Two series per replica is two million lines per scrape at 2M partitions (RF 3, 6 brokers);
  capped, the main scrape walks only the replicas led here for the counts above (all of them only while a follower
  quota is in force) and writes no line per replica;
- with a metadata observer (``--controller-quorum-voters``): its ``kafka_raft_*`` and
  ``pykraft_metadata_last_applied_offset{,_lag}`` (also as Kafka's ``kafka_server_metadata_last_applied_offset``),
  and ``pykraft_broker_replicas_applied_offset``: the image's last offset the replica manager holds all of (it
  applies the image's changes after the image replays them, a slice at a time: the README gives how far behind);
- ``process_*``, ``python_*``, ``pykraft_gc_*`` and ``pykraft_build_info`` as the controllers have them.

:func:`serve_broker_metrics` serves both paths from one port; any other path answers what ``/metrics`` does, as
prometheus_client's own server answers every path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from pykraft.metrics import MetadataCollector, RaftCollector, register_process_collectors, single_samples
from pykraft.metrics_http import ReloadingSslContext, WsgiApp, serve_wsgi
from pykraft.replica.manager import ReplicaManager
from pykraft.replica.partition import MESSAGE_BYTES, Partition
from pykraft.replica.throttle import TokenBucket

if TYPE_CHECKING:
    from broker.observer import MetadataObserver

DEFAULT_REPLICA_SERIES_MAX = 10_000  # --metrics-replica-series-max
REPLICAS_PATH = "/metrics/replicas"


def _rate(bucket: TokenBucket) -> float:
    return float("inf") if bucket.unlimited else float(bucket.rate)


def replica_families(broker_id: str, partitions: Iterable[Partition], now: int) -> list[GaugeMetricFamily]:
    """``kafka_log_log_size`` and ``kafka_log_log_end_offset``, one sample each per replica. The samples are built
    directly, one label dict shared by a replica's two: ``add_metric`` would zip a label list per sample, and this
    runs once per replica on every scrape that asks for them."""
    labels = ["broker_id", "topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size", "Replica size in bytes", labels=labels)
    leo = GaugeMetricFamily("kafka_log_log_end_offset", "Replica log end offset", labels=labels)
    sizes, leos = size.samples, leo.samples
    for p in partitions:
        end = p.peek_leo(now)
        values = {"broker_id": broker_id, "topic": p.topic, "partition": str(p.index)}
        sizes.append(Sample("kafka_log_log_size", values, end * MESSAGE_BYTES))
        leos.append(Sample("kafka_log_log_end_offset", values, end))
    return [size, leo]


class ReplicaCollector(Collector):
    """Every replica's series, whatever their number: what ``/metrics/replicas`` serves."""

    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[GaugeMetricFamily]:
        m = self.manager
        partitions = list(m.partitions.values())  # a copy: the event loop may change the dict meanwhile
        yield from replica_families(str(m.broker_id), partitions, m.clock())


class BrokerCollector(Collector):
    """What ``/metrics`` serves from the data plane: the broker's counts, and each replica's series while there are
    at most ``replica_series_max`` replicas."""

    def __init__(self, manager: ReplicaManager, replica_series_max: int = DEFAULT_REPLICA_SERIES_MAX) -> None:
        if replica_series_max < 0:
            raise ValueError(f"replica_series_max {replica_series_max} must not be negative")
        self.manager = manager
        self.replica_series_max = replica_series_max

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        m = self.manager
        labels = ["broker_id"]
        bid = [str(m.broker_id)]
        now = m.clock()
        held = len(m.partitions)
        omitted = held if held > self.replica_series_max else 0
        t = m.throttles
        # The replicas this scrape walks: none for the led counts (the manager keeps them as replicas change), those
        # led here while a leader quota is in force, and every one only when it needs them all (each replica's
        # series, or a follower quota to check). The throttle checks are skipped outright while a side is
        # unthrottled: each would answer False, a method call per replica for nothing.
        follower_limited = not t.follower.unlimited
        led, under, reassigning, _, leader_throttled = m.led_counts(walk=False)
        partitions = list(m.partitions.values()) if follower_limited or not omitted else []  # a copy, as above
        follower_throttled = (
            sum(1 for p in partitions if not p.is_leader and m.follower_throttled(p)) if follower_limited else 0
        )

        gauge, counter = single_samples(labels, bid)

        def by_side(
            family: GaugeMetricFamily | CounterMetricFamily, values: dict[str, float]
        ) -> GaugeMetricFamily | CounterMetricFamily:
            for side, value in values.items():
                family.add_metric([*bid, side], value)
            return family

        yield gauge("kafka_server_replicamanager_partition_count", "Replicas held by this broker", held)
        yield gauge("kafka_server_replicamanager_leader_count", "Partitions led by this broker", led)
        yield gauge(
            "kafka_server_replicamanager_under_replicated_partitions",
            "Partitions led here with fewer in-sync replicas than the replication factor",
            under,
        )
        yield gauge(
            "kafka_server_replicamanager_reassigning_partitions",
            "Partitions led here that a reassignment is adding replicas to",
            reassigning,
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
        side = [*labels, "side"]
        yield by_side(
            GaugeMetricFamily(
                "kafka_server_replication_throttled_partitions", "Replicas throttled now, by side", labels=side
            ),
            {
                "leader": leader_throttled,
                "follower": follower_throttled,
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
        yield gauge(
            "pykraft_broker_replica_series_omitted",
            "Replicas whose kafka_log_* series /metrics leaves out (more than --metrics-replica-series-max; "
            "/metrics/replicas lists them all)",
            omitted,
        )
        if not omitted:
            yield from replica_families(bid[0], partitions, now)


def broker_registry(
    manager: ReplicaManager,
    observer: MetadataObserver | None = None,
    replica_series_max: int = DEFAULT_REPLICA_SERIES_MAX,
    replicas_applied: Callable[[], int] | None = None,
) -> CollectorRegistry:
    """What ``/metrics`` serves."""
    registry = CollectorRegistry()
    registry.register(BrokerCollector(manager, replica_series_max))
    if observer is not None:
        registry.register(RaftCollector(observer.node))
        registry.register(
            MetadataCollector(
                observer.node,
                lambda: observer.current_metadata_offset,
                "kafka_server_metadata_last_applied_offset",
            )
        )
    if replicas_applied is not None:
        registry.register(ReplicasAppliedCollector(manager.broker_id, replicas_applied))
    register_process_collectors(registry, "broker")
    return registry


class ReplicasAppliedCollector(Collector):
    """``pykraft_broker_replicas_applied_offset``: the metadata image's last offset the replica manager holds."""

    def __init__(self, broker_id: int, applied: Callable[[], int]) -> None:
        self.broker_id = broker_id
        self.applied = applied

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge, _ = single_samples(["broker_id"], [str(self.broker_id)])
        yield gauge(
            "pykraft_broker_replicas_applied_offset",
            "The image's last offset whose partitions the replica manager holds, -1 for none",
            self.applied(),
        )


def replicas_registry(manager: ReplicaManager) -> CollectorRegistry:
    """What ``/metrics/replicas`` serves: every replica's series and nothing else."""
    registry = CollectorRegistry()
    registry.register(ReplicaCollector(manager))
    return registry


def broker_metrics_app(main: CollectorRegistry, replicas: CollectorRegistry) -> WsgiApp:
    """One WSGI app for both registries, by path: ``/metrics/replicas`` (a trailing slash allowed) serves
    ``replicas``, any other path ``main`` (prometheus_client's server answers every path, and scrape configs may
    rely on that)."""
    main_app, replicas_app = make_wsgi_app(main), make_wsgi_app(replicas)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        chosen = replicas_app if path.rstrip("/") == REPLICAS_PATH else main_app
        return chosen(environ, start_response)

    return app


def serve_broker_metrics(
    manager: ReplicaManager,
    host: str,
    port: int,
    observer: MetadataObserver | None = None,
    replica_series_max: int = DEFAULT_REPLICA_SERIES_MAX,
    tls: ReloadingSslContext | None = None,
    replicas_applied: Callable[[], int] | None = None,
) -> WSGIServer:
    """Serve the broker's metrics on ``host:port`` from a daemon thread, ``/metrics`` and ``/metrics/replicas``
    (raises OSError when it cannot be bound), over HTTPS with ``tls`` (:mod:`pykraft.metrics_http`). A thread per
    request, as prometheus_client's ``start_http_server``: a slow ``/metrics/replicas`` scrape does not hold up
    ``/metrics``. Returns the server: ``shutdown()`` stops it, ``server_close()`` frees the port."""
    main = broker_registry(manager, observer, replica_series_max, replicas_applied)
    app = broker_metrics_app(main, replicas_registry(manager))
    return serve_wsgi(app, host, port, tls, "broker-metrics")
