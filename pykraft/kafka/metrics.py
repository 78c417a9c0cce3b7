"""Prometheus metrics of a node's Kafka listener, with Kafka's RequestMetrics names: requests by API and version,
errors, time per request, connections (and those closed before any request, by reason), and frames refused by
reason."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from pykraft.kafka.listener import UNSUPPORTED, KafkaListener


def _version(version: int) -> str:
    return "unsupported" if version == UNSUPPORTED else str(version)


class KafkaListenerCollector(Collector):
    def __init__(self, listener: KafkaListener) -> None:
        self.listener = listener

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        stats = self.listener.stats
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Kafka-protocol requests answered, by API and version",
            labels=["request", "version"],
        )
        for (name, version), n in sorted(stats.requests.items()):
            requests.add_metric([name, _version(version)], n)
        yield requests
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Kafka-protocol requests answered with an error code (top-level or the first item's)",
            labels=["request", "version"],
        )
        for (name, version), n in sorted(stats.errors.items()):
            errors.add_metric([name, _version(version)], n)
        yield errors
        latency = HistogramMetricFamily(
            "kafka_network_requestmetrics_total_time_seconds",
            "Time from a Kafka-protocol request's decoding to its response's encoding",
            labels=["request"],
        )
        for name, histogram in sorted(stats.latency.items()):
            buckets, total = histogram.cumulative()
            latency.add_metric([name], buckets, total)
        yield latency
        refused = CounterMetricFamily(
            "pykraft_kafka_listener_frames_refused",
            "Connections closed for a frame that is no request (size, api_key, version, header, body, truncated)",
            labels=["reason"],
        )
        for reason, n in sorted(stats.refused.items()):
            refused.add_metric([reason], n)
        yield refused
        closed = CounterMetricFamily(
            "pykraft_kafka_listener_connections_refused",
            "Kafka-protocol connections closed before any request: over max.connections (limit) or "
            "max.connections.per.ip (per_ip_limit), a failed TLS handshake (handshake), a certificate no "
            "ssl.principal.mapping.rules rule maps (principal)",
            labels=["reason"],
        )
        for reason, n in sorted(stats.connections_refused.items()):
            closed.add_metric([reason], n)
        yield closed
        yield GaugeMetricFamily(
            "pykraft_kafka_listener_connections", "Open Kafka-protocol connections", value=stats.connections
        )
        yield CounterMetricFamily(
            "pykraft_kafka_listener_connections_accepted",
            "Kafka-protocol connections accepted",
            value=stats.connections_total,
        )
