"""deploy/grafana/pykraft.json: every metric any panel (or the instance variable) queries is served by a real node —
a renamed metric breaks this test, not a dashboard nobody looks at until an incident."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from metrics_helpers import Scrape, live_node, unfenced_brokers

from pykraft.client import NewTopic

DASHBOARD = Path(__file__).resolve().parents[1] / "deploy" / "grafana" / "pykraft.json"

# PromQL words that look like identifiers but are not metric names (functions are recognised by their "(").
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings: label values, Grafana variables in them
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range durations, $__rate_interval
    # Label lists of aggregations and vector matching: by (a, b), on(instance), group_left (x).
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([A-Za-z_:][\w:]*)\s*(\()?", expr):
        name, call = m.group(1), m.group(2)
        if call or name in KEYWORDS or re.fullmatch(r"\d+[smhdwy]", name):
            continue
        names.add(name)
    return names


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, expression) of every panel target (rows' nested panels included) and query variable."""
    out = []
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))
        for target in panel.get("targets", []):
            out.append((panel["title"], target["expr"]))
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if variable.get("type") == "query" and query:
            # label_values(selector, label): the selector is PromQL; the label is no metric.
            m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query)
            out.append((f"${variable['name']}", m.group(1) if m else query))
    return out


def unserved(wanted: dict[str, list[str]], scrape: Scrape) -> dict[str, list[str]]:
    """The names in ``wanted`` the scrape has no sample of; a histogram's ``_bucket``/``_sum``/``_count`` count as
    served when the scrape has that histogram."""
    missing = {}
    for name, where in sorted(wanted.items()):
        base = next((name.removesuffix(s) for s in HISTOGRAM_SUFFIXES if name.endswith(s)), None)
        if base is not None and scrape.families.get(base) == "histogram":
            continue
        if name not in scrape.names:
            missing[name] = where
    return missing


def test_metric_names_are_found_in_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (api, le) (rate(kafka_controller_request_time_seconds_bucket{instance=~"$i",'
        'error!="NONE"}[$__rate_interval]))) / on(instance) group_left max(up) > bool 0 or vector(1)'
    )
    assert metric_names(expr) == {"kafka_controller_request_time_seconds_bucket", "up"}
    assert metric_names("sum(increase(kafka_raft_elections_total[5m])) * 2 + x:recorded:rate5m") == {
        "kafka_raft_elections_total",
        "x:recorded:rate5m",
    }
    variable = {"templating": {"list": [{"name": "i", "type": "query", "query": "label_values(a_metric, instance)"}]}}
    assert dashboard_queries({"panels": [], **variable}) == [("$i", "a_metric")]


def test_names_a_node_does_not_serve_are_caught() -> None:
    scrape = Scrape(
        "# TYPE a_total counter\na_total 1\n"
        "# TYPE h_seconds histogram\n"
        'h_seconds_bucket{le="1.0"} 1\nh_seconds_bucket{le="+Inf"} 1\nh_seconds_sum 0.5\nh_seconds_count 1\n'
    )
    wanted = {n: ["panel"] for n in ("a_total", "h_seconds_bucket", "h_seconds_count", "a", "a_count", "b", "h_total")}
    assert unserved(wanted, scrape) == {"a": ["panel"], "a_count": ["panel"], "b": ["panel"], "h_total": ["panel"]}


def test_the_dashboard_is_importable_with_a_prometheus_input() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert [i["name"] for i in dashboard["__inputs"]] == ["DS_PROMETHEUS"]
    queries = dashboard_queries(dashboard)
    assert len(queries) >= 20
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
            assert panel["targets"], panel["title"]


async def test_every_queried_metric_is_served_by_a_node(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    wanted: dict[str, list[str]] = {}
    for where, expr in dashboard_queries(dashboard):
        for name in metric_names(expr):
            wanted.setdefault(name, []).append(where)
    # What the issue asks the dashboard to plot.
    assert {
        "kafka_raft_current_leader",
        "kafka_raft_current_epoch",
        "kafka_raft_high_watermark",
        "kafka_raft_voter_lag",
        "kafka_controller_request_time_seconds_bucket",
        "kafka_controller_request_time_seconds_count",
        "kafka_controller_commit_time_seconds_bucket",
        "kafka_controller_event_queue_wait_seconds_bucket",
        "kafka_raft_elections_total",
        "kafka_controller_offline_partitions_count",
        "kafka_controller_preferred_replica_imbalance_count",
        "kafka_controller_fenced_broker_count",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
    } <= set(wanted)

    async with live_node(tmp_path) as live:
        await unfenced_brokers(live.admin, [101])
        await live.admin.create_topics([NewTopic("orders", 2, 1)])
        scrape = await live.scrape()

    missing = unserved(wanted, scrape)
    assert not missing, f"queried by the dashboard but not served: {missing}"
