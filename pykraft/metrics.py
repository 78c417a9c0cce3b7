"""Prometheus metrics of a node, read from its live state at scrape time (nothing on the hot path but the
observation of a histogram: :mod:`quorum.histogram`).

Each node has its own :class:`CollectorRegistry` (tests run several nodes in one process): Raft (``kafka_raft_*``),
the controller (``kafka_controller_*``), the metadata it applied (``pykraft_metadata_*``), and the process
(``process_*``, ``python_*``, ``pykraft_gc_*``, ``pykraft_build_info``). README.md "Metrics" maps the names to
Kafka's JMX names; deploy/grafana/pykraft.json plots them.
"""

from __future__ import annotations

import importlib.metadata
import platform
import time
from collections.abc import Callable, Iterable, Iterator

import grpc
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from controller.quorum_controller import QuorumController
from pykraft import gc_pauses, loop_stalls
from pykraft.gc_pauses import GcPauses
from pykraft.loop_stalls import LoopStalls
from pykraft.metrics_http import ReloadingSslContext, serve_wsgi
from quorum.fault import LoggingFaultHandler
from quorum.histogram import Histogram
from quorum.raft.roles import Leader
from quorum.raft.runtime import RaftNode
from quorum.transport.peer import PeerTransport

ROLES = ("Unattached", "Voted", "Prospective", "Candidate", "Leader", "Follower", "Resigned")


Sample = Callable[[str, str, float], GaugeMetricFamily | CounterMetricFamily]


def single_samples(labels: list[str], values: list[str]) -> tuple[Sample, Sample]:
    """Makers of one-sample gauge and counter families, every sample carrying the same labels."""

    def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
        g = GaugeMetricFamily(name, doc, labels=labels)
        g.add_metric(values, value)
        return g

    def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
        c = CounterMetricFamily(name, doc, labels=labels)
        c.add_metric(values, value)
        return c

    return gauge, counter


def histogram_family(
    name: str, doc: str, labels: list[str], series: Iterable[tuple[list[str], Histogram]]
) -> HistogramMetricFamily:
    """One Prometheus histogram family (``name_bucket``, ``_sum``, ``_count``) from :class:`Histogram` values."""
    family = HistogramMetricFamily(name, doc, labels=labels)
    for values, histogram in series:
        buckets, total = histogram.cumulative()
        family.add_metric(values, buckets, total)
    return family


class RaftCollector(Collector):
    def __init__(self, node: RaftNode) -> None:
        self.node = node

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        core = self.node.core
        if core is None:
            return
        labels = ["node_id"]
        nid = [str(self.node.node_id)]

        gauge, counter = single_samples(labels, nid)

        yield gauge("kafka_raft_current_leader", "Id of the current leader, -1 if unknown", core.leader_id)
        yield gauge("kafka_raft_current_epoch", "Current epoch", core.epoch)
        yield gauge("kafka_raft_high_watermark", "High watermark (committed end offset)", core.high_watermark)
        yield gauge("kafka_raft_log_end_offset", "Log end offset", self.node.log.end_offset)
        yield gauge(
            "kafka_raft_log_start_offset", "Log start offset (below it: only the snapshot)", self.node.log.start_offset
        )
        snap = self.node.snapshot_stats
        yield gauge(
            "kafka_raft_latest_snapshot_end_offset",
            "End offset of the newest snapshot, -1 if none",
            snap.latest.end_offset if snap.latest else -1,
        )
        yield gauge(
            "kafka_raft_snapshot_load_seconds",
            "Seconds the last snapshot took to load at start or install",
            snap.load_seconds,
        )
        yield counter(
            "kafka_raft_snapshots_installed",
            "Snapshots fetched from the leader and installed",
            core.metrics.snapshots_installed,
        )
        yield counter(
            "kafka_raft_snapshot_fetched_bytes",
            "Snapshot bytes fetched from the leader",
            core.metrics.snapshot_bytes_fetched,
        )
        yield counter(
            "kafka_raft_retention_deleted_bytes",
            "Bytes of snapshots and segments deleted by retention",
            snap.bytes_deleted,
        )
        state = GaugeMetricFamily("kafka_raft_current_state", "1 for the current role", labels=[*labels, "state"])
        for role in ROLES:
            state.add_metric([*nid, role], 1.0 if core.role.name == role else 0.0)
        yield state
        m = core.metrics
        yield counter("kafka_raft_elections", "Elections this node started", m.elections)
        yield counter("kafka_raft_leader_changes", "Leader or epoch changes seen", m.leader_changes)
        yield counter("kafka_raft_appended_records", "Records appended as leader", m.appended_records)
        yield counter("kafka_raft_appended_batches", "Batches written as leader", m.appended_batches)
        yield counter("kafka_raft_commits", "High watermark advances", m.committed_offset_advances)
        yield counter("kafka_raft_truncations", "Log truncations after divergence", m.truncations)
        yield counter("kafka_raft_resignations", "Times this node resigned leadership", m.resignations)
        yield histogram_family(
            "kafka_raft_election_latency_seconds",
            "From this node's first pre-vote of an election to leading, or following a leader",
            labels,
            [(nid, m.election_seconds)],
        )
        yield from voter_lag(core.role, self.node.log.end_offset, labels, nid)
        yield from peer_transport_metrics(self.node.transport, labels, nid)
        # Where a commit's time goes (quorum/raft/hops.py): per stage, the summed time since the traced append (on
        # the leader) or since a fetch answer with records arrived (on a follower); divide by the samples.
        stages = CounterMetricFamily(
            "pykraft_raft_commit_stage_seconds",
            "Summed time from a traced append (leader) or fetched records (follower) to each stage",
            labels=[*labels, "side", "stage"],
        )
        samples = CounterMetricFamily(
            "pykraft_raft_commit_stage_samples",
            "Appends (leader) or fetch answers (follower) traced",
            labels=[*labels, "side"],
        )
        traces = (("leader", self.node.leader_trace), ("follower", self.node.follower_trace))
        for side, trace in traces:
            for stage, seconds in trace.seconds.items():
                stages.add_metric([*nid, side, stage], seconds)
            samples.add_metric([*nid, side], trace.samples)
        yield stages
        yield samples
        yield histogram_family(
            "pykraft_raft_commit_stage_duration_seconds",
            "Time from a traced append (leader) or fetched records (follower) to each stage",
            [*labels, "side", "stage"],
            [([*nid, side, stage], h) for side, trace in traces for stage, h in trace.histograms.items()],
        )


def peer_transport_metrics(
    transport: PeerTransport, labels: list[str], nid: list[str]
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The peer streams: how each outbound one runs now, and what the transport refused, ended or dropped."""
    wire = GaugeMetricFamily(
        "pykraft_peer_stream_wire",
        "1 for how this node's stream to each peer runs now (frames, grpc); 0 for both while it has none open",
        labels=[*labels, "peer", "wire"],
    )
    for peer in transport.peers:
        now = transport.wire(peer)
        for kind in ("frames", "grpc"):
            wire.add_metric([*nid, str(peer), kind], 1.0 if now == kind else 0.0)
    yield wire
    _, counter = single_samples(labels, nid)
    yield counter(
        "pykraft_peer_messages_dropped",
        "Peer messages dropped: no stream to the node, or its queue or write buffer full",
        transport.dropped,
    )
    yield counter(
        "pykraft_peer_streams_refused",
        "Inbound peer streams ended: the caller's certificate does not allow what it sent",
        transport.refused,
    )
    yield counter(
        "pykraft_peer_streams_undecodable",
        "Inbound peer streams ended at bytes that are no PeerMessage (or a frame over the size limit)",
        transport.undecodable,
    )
    yield counter(
        "pykraft_peer_streams_ended_for_room",
        "Inbound peer streams ended to stay within the pending and non-voter stream limits",
        transport.streams_ended,
    )
    yield counter(
        "pykraft_peer_frame_connections_turned_away",
        "Frame connections closed as they came, over the connection limit",
        transport.frames_turned_away,
    )
    yield counter(
        "pykraft_peer_frame_handshakes_failed",
        "Frame connections whose TLS handshake failed or took too long",
        transport.frame_handshakes_failed,
    )


def voter_lag(role: object, log_end_offset: int, labels: list[str], nid: list[str]) -> Iterator[GaugeMetricFamily]:
    """On the leader, each voter's log end offset (its last fetch offset) and how far behind the leader's log end
    it is — the leader itself included (lag 0), as DescribeQuorum lists it. Elsewhere: no samples."""
    end = GaugeMetricFamily(
        "kafka_raft_voter_log_end_offset", "On the leader: each voter's log end offset", labels=[*labels, "voter_id"]
    )
    lag = GaugeMetricFamily(
        "kafka_raft_voter_lag",
        "On the leader: offsets each voter is behind the leader's log end",
        labels=[*labels, "voter_id"],
    )
    if isinstance(role, Leader):
        voters = [(role.local_id, log_end_offset), *((v, s.end_offset) for v, s in list(role.replicas.items()))]
        for voter, offset in sorted(voters):
            end.add_metric([*nid, str(voter)], offset)
            lag.add_metric([*nid, str(voter)], max(0, log_end_offset - offset))
    yield end
    yield lag


class MetadataCollector(Collector):
    """The last metadata offset a node applied (a controller's state, a broker's image) and its lag behind the
    high watermark: ``pykraft_metadata_last_applied_offset{,_lag}``, and under Kafka's name (``alias``)."""

    def __init__(self, node: RaftNode, applied: Callable[[], int], alias: str) -> None:
        self.node = node
        self.applied = applied
        self.alias = alias

    def collect(self) -> Iterator[GaugeMetricFamily]:
        core = self.node.core
        applied = self.applied()
        gauge, _ = single_samples(["node_id"], [str(self.node.node_id)])
        yield gauge("pykraft_metadata_last_applied_offset", "Last metadata offset applied, -1 for none", applied)
        yield gauge(self.alias, "Last metadata offset applied, -1 for none", applied)
        # Offsets below the high watermark are committed: caught up means applied == high watermark - 1.
        hw = core.high_watermark if core is not None else 0
        yield gauge(
            "pykraft_metadata_last_applied_offset_lag",
            "Committed offsets (below the high watermark) not applied yet",
            max(0, hw - 1 - applied),
        )


RECOUNT_S = 30.0  # a large image's partition health is counted again at most this often
RECOUNT_ALWAYS_BELOW = 100_000  # partitions: below, every scrape counts (a few ms)


class PartitionHealth:
    """Kafka's OfflinePartitionsCount (leader -1) and PreferredReplicaImbalanceCount (leader not the first
    replica, offline ones included, as Kafka counts them), over the committed image. Counting is O(partitions):
    ~0.3 s at 2M on the scrape's thread, so it runs only when something was committed since, and for a large image
    at most every RECOUNT_S."""

    def __init__(self) -> None:
        self.counted_at: tuple[int, float] | None = None  # (committed offset, time.monotonic())
        self.offline = 0
        self.imbalanced = 0

    def count(self, c: QuorumController) -> tuple[int, int]:
        committed = c.replication.partitions.committed()
        now = time.monotonic()
        if self.counted_at is not None:
            offset, at = self.counted_at
            if offset == c.committed_offset or (len(committed) >= RECOUNT_ALWAYS_BELOW and now - at < RECOUNT_S):
                return self.offline, self.imbalanced
        self.counted_at = (c.committed_offset, now)
        offline = imbalanced = 0
        for p in list(committed.values()):  # a copy: the event loop changes the dict meanwhile
            leader, replicas = p[2], p[0]
            if leader == -1:
                offline += 1
            if (replicas[0] if replicas else -1) != leader:
                imbalanced += 1
        self.offline, self.imbalanced = offline, imbalanced
        return offline, imbalanced


class ControllerCollector(Collector):
    """Kafka-like controller metrics (kafka_controller_*)."""

    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller
        self.health = PartitionHealth()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        c = self.controller
        yield GaugeMetricFamily(
            "kafka_controller_active_controller_count", "1 on the active controller", value=1 if c.active else 0
        )
        brokers = list(c.cluster.brokers.committed().values())
        yield GaugeMetricFamily(
            "kafka_controller_fenced_broker_count", "Fenced brokers", value=sum(b.fenced for b in brokers)
        )
        yield GaugeMetricFamily(
            "kafka_controller_active_broker_count", "Unfenced brokers", value=sum(not b.fenced for b in brokers)
        )
        yield GaugeMetricFamily(
            "kafka_controller_global_topic_count", "Topics", value=len(c.replication.topics.committed())
        )
        yield GaugeMetricFamily(
            "kafka_controller_global_partition_count", "Partitions", value=len(c.replication.partitions.committed())
        )
        yield GaugeMetricFamily(
            "kafka_controller_reassigning_partition_count",
            "Partitions under reassignment (adding or removing replicas)",
            value=c.replication.reassignments.committed_count(),
        )
        yield GaugeMetricFamily("kafka_controller_event_queue_size", "Events waiting", value=c.queue.size)
        q = c.queue.stats
        yield CounterMetricFamily("kafka_controller_events_processed", "Events run", value=q.processed)
        yield CounterMetricFamily("kafka_controller_events_timed_out", "Events expired in the queue", value=q.timed_out)
        yield CounterMetricFamily(
            "pykraft_controller_events_rejected", "Requests refused because the event queue was full", value=q.rejected
        )
        yield CounterMetricFamily(
            "kafka_controller_event_queue_time_seconds", "Time events spent queued", value=q.queue_time_total_s
        )
        yield CounterMetricFamily(
            "kafka_controller_event_queue_processing_time_seconds",
            "Time spent running events",
            value=q.process_time_total_s,
        )
        yield histogram_family(
            "kafka_controller_event_queue_wait_seconds",
            "Time from an event being ready (queued, or a deferred event's time) to its start",
            [],
            [([], q.queue_time)],
        )
        yield histogram_family(
            "kafka_controller_event_processing_seconds", "Time running an event", [], [([], q.process_time)]
        )
        offline, imbalanced = self.health.count(c)
        yield GaugeMetricFamily(
            "kafka_controller_offline_partitions_count", "Partitions without a leader", value=offline
        )
        yield GaugeMetricFamily(
            "kafka_controller_preferred_replica_imbalance_count",
            "Partitions not led by their first replica",
            value=imbalanced,
        )
        yield CounterMetricFamily(
            "kafka_controller_records_appended", "Metadata records appended", value=c.metrics.records_appended
        )
        yield CounterMetricFamily("kafka_controller_commits", "Appended batches committed", value=c.metrics.commits)
        yield CounterMetricFamily(
            "kafka_controller_commit_latency_seconds",
            "Append-to-commit time, summed",
            value=c.metrics.commit_seconds_total,
        )
        yield histogram_family(
            "kafka_controller_commit_time_seconds",
            "Append-to-commit time of the batches this controller wrote",
            [],
            [([], c.metrics.commit_time)],
        )
        yield GaugeMetricFamily(
            "kafka_controller_last_committed_offset", "Last committed offset", value=c.committed_offset
        )
        yield from snapshot_metrics(c)
        yield from mutation_quota_metrics(c)
        count = CounterMetricFamily("kafka_controller_requests", "Requests by API", labels=["api"])
        seconds = CounterMetricFamily(
            "kafka_controller_request_seconds", "Request latency by API, summed", labels=["api"]
        )
        for api, n in sorted(c.metrics.requests.items()):
            count.add_metric([api], n)
            seconds.add_metric([api], c.metrics.request_seconds.get(api, 0.0))
        yield count
        yield seconds
        yield histogram_family(
            "kafka_controller_request_time_seconds",
            "Request time by API and outcome (a Kafka error name; NONE: succeeded)",
            ["api", "error"],
            [([api, error], h) for (api, error), h in sorted(list(c.metrics.request_time.items()))],
        )


def snapshot_metrics(c: QuorumController) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """Kafka's SnapshotEmitter gauges (kafka.server:type=SnapshotEmitter), and what this controller adds."""
    m = c.metrics
    yield GaugeMetricFamily(
        "kafka_server_snapshotemitter_latest_snapshot_generated_bytes",
        "Size of the latest snapshot this node generated",
        value=m.last_snapshot_bytes,
    )
    since = m.last_snapshot_time if m.last_snapshot_time is not None else c.snapshots.last_snapshot_at
    yield GaugeMetricFamily(
        "kafka_server_snapshotemitter_latest_snapshot_generated_age_ms",
        "Time since the latest snapshot was generated (since start before the first)",
        value=round((time.monotonic() - since) * 1000),
    )
    yield CounterMetricFamily(
        "kafka_controller_snapshots_generated", "Snapshots generated", value=m.snapshots_generated
    )
    yield CounterMetricFamily(
        "kafka_controller_snapshot_failures", "Snapshots that failed to be written", value=m.snapshot_failures
    )
    yield GaugeMetricFamily(
        "kafka_controller_latest_snapshot_end_offset",
        "End offset of the latest snapshot generated, -1 before the first",
        value=m.last_snapshot_id.end_offset if m.last_snapshot_id is not None else -1,
    )
    yield GaugeMetricFamily(
        "kafka_controller_snapshot_generation_seconds",
        "Time the latest snapshot took, image to frozen file",
        value=m.last_snapshot_seconds,
    )
    yield GaugeMetricFamily(
        "kafka_controller_bytes_since_last_snapshot",
        "Bytes of committed batches not in a snapshot yet (metadata.log.max.record.bytes.between.snapshots)",
        value=m.bytes_since_snapshot,
    )
    yield GaugeMetricFamily(
        "kafka_controller_snapshot_load_seconds", "Time the latest snapshot load took", value=m.snapshot_load_seconds
    )


def mutation_quota_metrics(c: QuorumController) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """KIP-599's throttling (Kafka's per-user ControllerMutation sensors), summed over principals and client ids so
    that no caller adds series; on the active controller (another node throttles nothing)."""
    quotas = c.mutation_quotas
    m = quotas.stats
    yield CounterMetricFamily(
        "kafka_controller_mutation_throttled_requests",
        "Requests with topics refused THROTTLING_QUOTA_EXCEEDED (controller_mutation_rate)",
        value=m.throttled_requests,
    )
    yield CounterMetricFamily(
        "kafka_controller_mutation_throttled_topics",
        "Topics refused THROTTLING_QUOTA_EXCEEDED",
        value=m.throttled_topics,
    )
    yield CounterMetricFamily(
        "kafka_controller_mutation_throttle_time_seconds",
        "Throttle times the throttled requests were answered with, summed",
        value=m.throttle_time_ms / 1000,
    )
    yield CounterMetricFamily(
        "kafka_controller_mutation_partitions",
        "Partitions created or deleted under a controller_mutation_rate quota (recorded into a bucket)",
        value=m.recorded_partitions,
    )
    yield GaugeMetricFamily(
        "kafka_controller_mutation_quota_buckets",
        "Token buckets held (one per quota'd user / client id)",
        value=len(quotas.buckets),
    )


class GcCollector(Collector):
    def __init__(self, pauses: GcPauses) -> None:
        self.pauses = pauses

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        p = self.pauses
        count = CounterMetricFamily("pykraft_gc_pauses", "Garbage collections by generation", labels=["generation"])
        seconds = CounterMetricFamily(
            "pykraft_gc_pause_seconds", "Time the process stood still collecting, summed", labels=["generation"]
        )
        for generation in range(3):
            count.add_metric([str(generation)], p.pauses[generation])
            seconds.add_metric([str(generation)], p.seconds[generation])
        yield count
        yield seconds
        yield GaugeMetricFamily("pykraft_gc_pause_max_seconds", "Longest collection pause", value=p.longest)


class LoopStallCollector(Collector):
    def __init__(self, stalls: LoopStalls) -> None:
        self.stalls = stalls

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        s = self.stalls
        yield CounterMetricFamily(
            "pykraft_loop_stalls", "Times the event loop ran a timer 50 ms or more late", value=s.count
        )
        yield CounterMetricFamily(
            "pykraft_loop_stall_seconds", "How late the event loop ran those timers, summed", value=s.seconds
        )
        yield GaugeMetricFamily("pykraft_loop_stall_max_seconds", "Longest event loop stall", value=s.longest)


class FaultCollector(Collector):
    """``pykraft_fatal_fault`` is 1 from the moment a fatal fault is being handled (the process exits right after:
    a scrape racing the exit, or an in-process handler, sees it), labelled with its cause."""

    def __init__(self, faults: LoggingFaultHandler) -> None:
        self.faults = faults

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("pykraft_fatal_fault", "1 once a fatal fault stopped this node", labels=["cause"])
        for fault in self.faults.faults[:1]:
            g.add_metric([fault.message], 1.0)
        if not self.faults.faults:
            g.add_metric([""], 0.0)
        yield g


def build_labels() -> dict[str, str]:
    try:
        version = importlib.metadata.version("pykraft")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that was never installed
        version = "unknown"
    return {
        "version": version,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "grpcio": grpc.__version__,
    }


class BuildInfoCollector(Collector):
    """``pykraft_build_info{version,python,implementation,grpcio,role} 1`` (Kafka's app-info MBean)."""

    def __init__(self, role: str) -> None:
        self.labels = {**build_labels(), "role": role}

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("pykraft_build_info", "pykraft's version and runtime; always 1", labels=list(self.labels))
        g.add_metric(list(self.labels.values()), 1)
        yield g


def register_process_collectors(registry: CollectorRegistry, role: str) -> None:
    """What every pykraft process serves: process_* (CPU, memory, descriptors), python_info, python_gc_*,
    pykraft_gc_*, pykraft_build_info."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    registry.register(GcCollector(gc_pauses.install()))
    registry.register(LoopStallCollector(loop_stalls.STALLS))
    registry.register(BuildInfoCollector(role))


def node_registry(
    node: RaftNode, controller: QuorumController | None, faults: LoggingFaultHandler
) -> CollectorRegistry:
    """A controller node's metrics (``controller`` None: a quorum without one, as the Raft benchmark runs)."""
    registry = CollectorRegistry()
    registry.register(RaftCollector(node))
    registry.register(FaultCollector(faults))
    if controller is not None:
        registry.register(ControllerCollector(controller))
        registry.register(
            MetadataCollector(node, lambda: controller.committed_offset, "kafka_controller_last_applied_record_offset")
        )
    register_process_collectors(registry, "controller")
    return registry


def serve_metrics(
    node: RaftNode,
    controller: QuorumController | None,
    host: str,
    port: int,
    faults: LoggingFaultHandler,
    tls: ReloadingSslContext | None = None,
) -> CollectorRegistry:
    """Serve the node's metrics on ``host:port`` (HTTPS with ``tls``: :mod:`pykraft.metrics_http`)."""
    registry = node_registry(node, controller, faults)
    serve_wsgi(make_wsgi_app(registry), host, port, tls, "node-metrics")
    return registry
