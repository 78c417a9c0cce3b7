"""``report.html``: the audit's summary, charts (matplotlib PNGs beside it) and tables."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display here or on a Spark driver
import matplotlib.pyplot as plt


def _bar(path: Path, labels: list[str], series: dict[str, list[float]], title: str, ylabel: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(labels))], values, width=width, label=name)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(labels))], labels, rotation=45, ha="right")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if len(series) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def _line(path: Path, xs: list[Any], ys: list[float], title: str, ylabel: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(xs, ys, marker="." if len(xs) < 200 else None)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def _cell(value: Any) -> str:
    """A table cell: empty for a missing value (not "None")."""
    return "" if value is None else html.escape(str(value))


def _duration(ms: int) -> str:
    return f"{ms / 1000:,.1f} s"


def _table(rows: list[dict[str, Any]], limit: int = 200) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r[c])}</td>" for c in cols) + "</tr>" for r in rows[:limit])
    more = f"<p>({len(rows) - limit} more rows in the Parquet table)</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _offline_summary(offline: dict[str, int] | None) -> str:
    if not offline or not offline["partitions"]:
        return "<p>No partition was ever without a leader.</p>"
    return (
        f"<p>{offline['partitions']:,} partition(s) were without a leader (-1) {offline['intervals']:,} time(s), "
        f"{_duration(offline['total_ms'])} in all, {_duration(offline['max_ms'])} at most; "
        f"{offline['at_end']:,} still at the end of the log (counted up to its last batch).</p>"
    )


def _listed(values: list[int] | None) -> str:
    return "" if values is None else ",".join(map(str, values))


def _reassignments(rows: list[dict[str, Any]], outcomes: dict[str, int] | None) -> str:
    """The reassignments section: how many ended each way, then each one (newest first, as the table is)."""
    if not outcomes:
        return "<p>No partition was reassigned.</p>"
    counted = ", ".join(f"{n:,} {html.escape(outcome)}" for outcome, n in outcomes.items())
    shown = [
        {
            "partition": f"{r['topic_name']}-{r['partition_id']}",
            "start": r["start_time"],
            "start offset": r["start_offset"],
            "end": r["end_time"],
            "end offset": r["end_offset"],
            "duration": None if r["duration_ms"] is None else _duration(r["duration_ms"]),
            "original": _listed(r["original_replicas"]),
            "target": _listed(r["target_replicas"]),
            "final": _listed(r["final_replicas"]),
            "adding": _listed(r["adding_replicas"]),
            "removing": _listed(r["removing_replicas"]),
            "outcome": r["outcome"] + (" (found in progress)" if r["found_in_progress"] else ""),
            "new targets": r["target_changes"],
            "leader changes": r["leader_changes"],
        }
        for r in rows
    ]
    return (
        f"<p>{sum(outcomes.values()):,} reassignment(s): {counted}. The batches' times; one in progress counts up to "
        "the log's last batch.</p>" + _table(shown)
    )


def write_report(out: Path, result: Any, tables: dict[str, list[dict[str, Any]]]) -> Path:
    charts = []
    per_minute = tables.get("topics_per_minute", [])
    if per_minute:
        charts.append(
            _line(
                out / "topics_per_minute.png",
                [r["minute"] for r in per_minute],
                [r["topics_created"] for r in per_minute],
                "Topics created per minute",
                "topics",
            )
        )
    brokers = tables.get("brokers_load", [])
    if brokers:
        labels = [f"{r['broker_id']} ({r['rack'] or '-'})" for r in brokers]
        charts.append(
            _bar(
                out / "brokers_load.png",
                labels,
                {"replicas": [r["replicas"] for r in brokers], "leaders": [r["leaders"] for r in brokers]},
                "Replicas and leaders per broker",
                "partitions",
            )
        )
    racks = tables.get("racks_load", [])
    if racks:
        charts.append(
            _bar(
                out / "racks_load.png",
                [r["rack"] for r in racks],
                {"replicas": [r["replicas"] for r in racks], "leaders": [r["leaders"] for r in racks]},
                "Replicas and leaders per rack",
                "partitions",
            )
        )
    factors = tables.get("replication_factors", [])
    if factors:
        charts.append(
            _bar(
                out / "replication_factors.png",
                [str(r["replication_factor"]) for r in factors],
                {"topics": [r["topics"] for r in factors]},
                "Topics by replication factor",
                "topics",
            )
        )
    events = tables.get("broker_events", [])
    moves = [e for e in events if e["leaders_lost"] or e["leaders_gained"]][:40]
    if moves:
        charts.append(
            _bar(
                out / "leadership_moves.png",
                [f"{e['time']:%m-%d %H:%M:%S} b{e['broker_id']} {e['event']}" for e in moves],
                {
                    "lost": [e["leaders_lost"] for e in moves],
                    "gained": [e["leaders_gained"] for e in moves],
                    "went offline": [e["went_offline"] for e in moves],
                },
                "Leaderships lost and gained at broker events",
                "partitions",
            )
        )
    offline = tables.get("offline_partitions", [])
    if offline:
        longest = offline[:20]
        charts.append(
            _bar(
                out / "offline_partitions.png",
                [f"{p['topic_name']}-{p['partition_id']}" for p in longest],
                {"seconds without a leader": [p["total_ms"] / 1000 for p in longest]},
                "Partitions offline longest",
                "seconds",
            )
        )
    s = result.summary
    violations = result.violations
    verdict = (
        "<p class=ok>No invariant was violated.</p>"
        if not violations
        else "<p class=bad>" + ", ".join(f"{html.escape(k)}: {v}" for k, v in sorted(violations.items())) + "</p>"
    )
    sections = [
        f"<h1>Metadata log audit</h1><p>{html.escape(s['log_dir'])} — {result.records:,} records in {s['files']} "
        f"file(s), last offset {s['last_offset']}"
        + (f", state as of offset {s['as_of_offset']}" if s.get("as_of_offset") is not None else "")
        + "</p>",
        "<h2>State</h2>" + _table([{"table": k, "rows": v} for k, v in result.tables.items()]),
        "<h2>Invariants</h2>" + verdict + _table(tables.get("violations", []), 100),
        "<h2>Charts</h2>" + "".join(f'<img src="{c}" alt="{c}">' for c in charts),
        "<h2>Brokers</h2>" + _table(brokers),
        "<h2>Racks</h2>" + _table(racks),
        "<h2>Replication factors</h2>" + _table(factors),
        "<h2>Configs in use</h2>" + _table(tables.get("configs_in_use", []), 100),
        "<h2>Leadership timeline</h2><p>Each broker's registrations, fencings, unfencings and controlled shutdowns "
        "(the batch's time), with the leader changes in the same batch: leaderships it lost and gained, how many of "
        "those it lost went offline, and how many partitions it leads after.</p>" + _table(events),
        "<h2>Offline partitions</h2>" + _offline_summary(s.get("offline")) + _table(offline, 100),
        "<h2>Reassignments</h2>" + _reassignments(tables.get("reassignments", []), s.get("reassignments")),
    ]
    page = (
        "<!doctype html><meta charset=utf-8><title>pykraft audit</title><style>body{font-family:sans-serif;"
        "margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}"
        ".ok{color:#060}.bad{color:#a00}img{display:block;margin:1em 0}</style>" + "".join(sections)
    )
    path = out / "report.html"
    path.write_text(page)
    return path
