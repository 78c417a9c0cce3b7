"""``report.html``: the audit a person reads — the export's manifest, warnings (risky ACLs among them), the findings
grouped by root cause, a filterable timeline of what changed when, the topics, the ACLs, charts (matplotlib PNGs
beside it) and the tables.

The page is one file with its own small script (no external scripts or styles: it works offline). Missing values
are empty cells, never "None"; enums print by name (a config's resource type is ``TOPIC``, not 2).
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display here or on a Spark driver
import matplotlib.pyplot as plt

from audit.acls import RISKS, SHOWN
from audit.findings import Group, group
from audit.timeline import KINDS, resource_type_name

FEW_BUCKETS = 24  # up to this many points a series is drawn as bars, one per bucket


def _bar(path: Path, labels: list[str], series: dict[str, list[float]], title: str, ylabel: str) -> str:
    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(labels))], values, width=width, label=name)
    ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(labels))], labels, rotation=45, ha="right")
    ax.set_xlim(-0.6, max(len(labels), 3) - 0.4)  # one bar is not as wide as the chart
    # Counts start at zero; with nothing to count the axis still reads 0..1, not -0.04..0.04.
    ax.set_ylim(bottom=0, top=None if any(v for values in series.values() for v in values) else 1)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    if len(series) > 1:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def _line(path: Path, xs: list[Any], ys: list[float], title: str, ylabel: str) -> str:
    """A series over time: bars, one per bucket, when there are few (a lone point on a line chart gets an axis of
    years); a line over exactly the buckets' range otherwise."""
    if len(xs) <= FEW_BUCKETS:
        labels = [x.strftime("%Y-%m-%d %H:%M") if isinstance(x, dt.datetime) else str(x) for x in xs]
        return _bar(path, labels, {ylabel: ys}, title, ylabel)
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.plot(xs, ys, marker="." if len(xs) < 200 else None)
    ax.set_xlim(xs[0], xs[-1])
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path.name


def _text(value: Any) -> str:
    """A value as the page shows it: empty for a missing one (not "None"), yes/no, lists joined by commas."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    if isinstance(value, list | tuple):
        return ",".join(_text(v) for v in value)
    return str(value)


def _cell(value: Any) -> str:
    """A table cell: empty for a missing value (not "None")."""
    return html.escape(_text(value))


def _duration(ms: int) -> str:
    return f"{ms / 1000:,.1f} s"


def _readable(row: dict[str, Any]) -> dict[str, Any]:
    """Enums by name: a config resource's type."""
    if "resource_type" in row:
        return {**row, "resource_type": resource_type_name(row["resource_type"])}
    return row


def _table(rows: list[dict[str, Any]], limit: int = 200, attrs: str = "") -> str:
    if not rows:
        return "<p><em>none</em></p>"
    rows = [_readable(r) for r in rows]
    cols = list(rows[0])
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r[c])}</td>" for c in cols) + "</tr>" for r in rows[:limit])
    more = f"<p>({len(rows) - limit} more rows in the Parquet table)</p>" if len(rows) > limit else ""
    return f"<table{attrs}><tr>{head}</tr>{body}</table>{more}"


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


def _manifest(manifest: dict[str, Any] | None) -> str:
    """The export the audit read: what ``pykraft export`` recorded (summary.json's ``manifest``)."""
    if manifest is None:
        return (
            '<section id="manifest"><h2>Export</h2><p>No manifest: the directory is not a pykraft export '
            "(read as it is).</p></section>"
        )
    hw = manifest.get("high_watermark")
    rows = [
        ("cluster id", manifest.get("cluster_id")),
        ("node id", manifest.get("node_id")),
        ("high watermark", f"{hw:,}" if isinstance(hw, int) else "not recorded (offline export)"),
        ("log start offset", manifest.get("log_start_offset")),
        ("log end offset", manifest.get("log_end_offset")),
        ("leader epoch", manifest.get("epoch")),
        ("exported at", manifest.get("exported_at")),
        ("source", manifest.get("source")),
        (
            "files",
            None if "file_count" not in manifest else f"{manifest['file_count']:,} ({manifest['bytes']:,} bytes)",
        ),
    ]
    body = "".join(f"<tr><th>{name}</th><td>{_cell(value)}</td></tr>" for name, value in rows if value is not None)
    damage = manifest.get("damage") or []
    said = (
        '<p class="bad">The export stopped at damage:</p><ul>'
        + "".join(f"<li>{_cell(d)}</li>" for d in damage)
        + "</ul>"
        if damage
        else ""
    )
    return f'<section id="manifest"><h2>Export</h2><table class="kv">{body}</table>{said}</section>'


def _warnings(warnings: dict[str, dict] | None, as_of: int | None) -> str:
    if not warnings:
        return ""
    when = "at the end of the log" if as_of is None else f"as of offset {as_of:,}"
    parts = []
    for name, title in (
        ("leaders_on_fenced_brokers", "partition(s) led by a fenced broker"),
        ("offline_partitions", "partition(s) without a leader (leader -1)"),
        ("leaders_not_registered", "partition(s) led by a broker that is not registered"),
    ):
        entry = warnings.get(name) or {}
        if not entry.get("count"):
            continue
        by = entry.get("by_broker") or {}
        brokers = " (" + ", ".join(f"broker {b}: {n:,}" for b, n in by.items()) + ")" if by else ""
        shown = f"; the first {len(entry['rows'])}" if entry["count"] > len(entry["rows"]) else ""
        parts.append(
            f'<div class="warning" id="warning-{name}"><p><strong>{entry["count"]:,} {title}</strong>{brokers}, '
            f"{when}{shown}:</p>" + _table(entry["rows"]) + "</div>"
        )
    risky = warnings.get("risky_acls") or {}
    if risky.get("count"):
        by = ", ".join(f"{RISKS[r]}: {n:,}" for r, n in risky["by_risk"].items())
        shown = f"; the first {len(risky['rows'])}" if risky["count"] > len(risky["rows"]) else ""
        rows = [{**r, "risks": "; ".join(r["risks"])} for r in risky["rows"]]
        parts.append(
            f'<div class="warning" id="warning-risky_acls"><p><strong>{risky["count"]:,} risky ACL(s) in force'
            f"</strong> ({html.escape(by)}), {when}{shown}:</p>" + _table(rows) + "</div>"
        )
    if not parts:
        return (
            '<section id="warnings"><h2>Warnings</h2><p class="ok">None: every partition has a leader on an '
            "unfenced, registered broker, and no ACL in force is a risky grant.</p></section>"
        )
    return '<section id="warnings"><h2>Warnings</h2>' + "".join(parts) + "</section>"


FINDING_COLUMNS = ("check", "offset", "file", "position", "explanation")


def _finding_row(f: dict[str, Any], attrs: str = "") -> str:
    cells = {**f, "file": Path(f["file"]).name if f.get("file") else None}
    return f"<tr{attrs}>" + "".join(f"<td>{_cell(cells.get(c))}</td>" for c in FINDING_COLUMNS) + "</tr>"


def _findings(result: Any, rows: list[dict[str, Any]], topic_ids: dict[str, str] | None) -> str:
    violations = result.violations
    if not violations:
        return "<h2>Invariants</h2><p class=ok>No invariant was violated.</p>"
    total = sum(violations.values())
    counted = ", ".join(f"{html.escape(k)}: {v:,}" for k, v in sorted(violations.items()))
    groups: list[Group] = group(rows, topic_ids)
    folded = sum(len(g.consequences) for g in groups)
    read = f"the first {len(rows):,} of {total:,}" if total > len(rows) else f"{total:,}"
    head = "".join(f"<th>{c}</th>" for c in FINDING_COLUMNS)
    body = []
    for g in groups[:200]:
        body.append(_finding_row(g.root, ' class="root"'))
        if g.consequences:
            kinds: dict[str, int] = {}
            for c in g.consequences:
                kinds[c["check"]] = kinds.get(c["check"], 0) + 1
            what = ", ".join(f"{k} {n:,}" for k, n in kinds.items())
            inner = "".join(_finding_row(c) for c in g.consequences[:500])
            body.append(
                f'<tr class="consequences"><td colspan="{len(FINDING_COLUMNS)}"><details><summary>'
                f"{len(g.consequences):,} consequence(s): {html.escape(what)}</summary>"
                f"<table><tr>{head}</tr>{inner}</table></details></td></tr>"
            )
    more = f"<p>({len(groups) - 200:,} more root causes in the violations table)</p>" if len(groups) > 200 else ""
    return (
        f"<h2>Invariants</h2><p class=bad>{counted}</p><p>{len(groups):,} root cause(s) among {read} finding(s); "
        f"{folded:,} consequence(s) folded under their cause (click to open). Damage to the log comes first, "
        "then the records' findings by offset, then the final state's.</p>"
        f'<table id="findings"><tr>{head}</tr>{"".join(body)}</table>{more}'
    )


TIMELINE_SCRIPT = """
(function () {
  var text = document.getElementById('timeline-text');
  var boxes = document.querySelectorAll('input.timeline-kind');
  var rows = document.querySelectorAll('#timeline tbody tr');
  var shown = document.getElementById('timeline-shown');
  function apply() {
    var q = text.value.toLowerCase(), on = {}, n = 0;
    boxes.forEach(function (b) { on[b.value] = b.checked; });
    rows.forEach(function (r) {
      var keep = on[r.dataset.kind] && (!q || r.textContent.toLowerCase().indexOf(q) >= 0);
      r.hidden = !keep;
      if (keep) n++;
    });
    shown.textContent = n.toLocaleString();
  }
  text.addEventListener('input', apply);
  boxes.forEach(function (b) { b.addEventListener('change', apply); });
  apply();
})();
"""


def _timeline(rows: list[dict[str, Any]], total: int) -> str:
    if not rows:
        return '<h2>What changed when</h2><p id="timeline-none">Nothing changed.</p>'
    present = [k for k in KINDS if any(r["kind"] == k for r in rows)]
    boxes = "".join(
        f'<label><input type="checkbox" class="timeline-kind" value="{k}" checked> {k}</label> ' for k in present
    )
    body = "".join(
        f'<tr data-kind="{html.escape(r["kind"])}">'
        + "".join(f"<td>{_cell(r[c])}</td>" for c in ("offset", "time", "kind", "subject", "detail"))
        + "</tr>"
        for r in rows
    )
    note = (
        f"the newest {len(rows):,} of {total:,} (all in the <code>timeline</code> Parquet table)"
        if total > len(rows)
        else f"all {total:,}"
    )
    return (
        "<h2>What changed when</h2><p>Broker registrations, fencings and controlled shutdowns, leader, ISR and "
        f"replica changes, config changes, topics created and deleted, ACLs created and removed, by offset and batch "
        f"time: {note}.</p>"
        '<p class="filter"><input type="search" id="timeline-text" placeholder="filter: broker 101, orders-3, '
        f'retention…" size="40"> {boxes} <span id="timeline-shown"></span> shown</p>'
        '<table id="timeline"><thead><tr><th>offset</th><th>time</th><th>kind</th><th>subject</th><th>detail</th>'
        f"</tr></thead><tbody>{body}</tbody></table><script>{TIMELINE_SCRIPT}</script>"
    )


def _acls(rows: list[dict[str, Any]], counts: dict[str, int] | None, total: int) -> str:
    """Who may do what: the ACLs in force (when each was created), then those removed (and when)."""
    if not counts or not counts["created"]:
        return '<section id="acls"><h2>ACLs</h2><p>The log holds no ACL.</p></section>'

    def shown(r: dict[str, Any], removed: bool) -> dict[str, Any]:
        row = {k: r[k] for k in SHOWN}
        row["created at offset"] = "(in the snapshot)" if r["created_in_snapshot"] else r["created_offset"]
        row["created"] = r["created_time"]
        if removed:
            row["removed at offset"], row["removed"] = r["removed_offset"], r["removed_time"]
        row["id"] = r["acl_id"]
        return row

    live = [shown(r, False) for r in rows if r["in_force"]]
    gone = [shown(r, True) for r in rows if not r["in_force"]]
    note = f"<p>(the first {len(rows):,} of {total:,}; all in the <code>acls</code> Parquet table)</p>"
    return (
        f'<section id="acls"><h2>ACLs</h2><p>{counts["in_force"]:,} in force, {counts["removed"]:,} removed; '
        "offsets and batch times of each creation and removal.</p>"
        + (note if total > len(rows) else "")
        + "<h3>In force</h3>"
        + _table(live, 500, ' id="acls-in-force"')
        + "<h3>Removed</h3>"
        + _table(gone, 500, ' id="acls-removed"')
        + "</section>"
    )


def _topics(rows: list[dict[str, Any]], total: int | None) -> str:
    if not rows:
        return "<h2>Topics</h2><p><em>none</em></p>"
    total = total if total is not None else len(rows)
    shown = [
        {
            "name": r["topic_name"],
            "topic id": r["topic_id"],
            "partitions": r["partitions"],
            "replication factor": r["replication_factor"],
            "configs overridden": r["configs_overridden"],
            "created at offset": r["created_offset"],
            "created": r["created_time"],
            "deleted": r["deleted"],
            "deleted at offset": r["deleted_offset"],
        }
        for r in rows
    ]
    note = f"<p>The first {len(rows):,} of {total:,} by name.</p>" if total > len(rows) else ""
    return "<h2>Topics</h2>" + note + _table(shown, len(shown), ' id="topics"')


def write_report(
    out: Path,
    result: Any,
    tables: dict[str, list[dict[str, Any]]],
    *,
    warnings: dict[str, dict] | None = None,
    topic_ids: dict[str, str] | None = None,
) -> Path:
    """``tables``: the first rows of each table (``timeline``: the newest; ``topics_overview``: the topics, live
    and deleted); ``warnings``: :func:`audit.tables.warnings`; ``topic_ids``: topic name -> id, to group the final
    state's findings with the records'."""
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
    last = s.get("last_offset")
    sections = [
        "<h1>Metadata log audit</h1>",
        _manifest(s.get("manifest")) if "manifest" in s else "",
        f'<p id="audited">{html.escape(s["log_dir"])} — {result.records:,} records in {s["files"]} file(s), last '
        f"offset {_cell(last)}"
        + (f", state as of offset {s['as_of_offset']}" if s.get("as_of_offset") is not None else "")
        + "</p>",
        _warnings(warnings, s.get("as_of_offset")),
        _findings(result, tables.get("violations", []), topic_ids),
        _timeline(tables.get("timeline", []), result.tables.get("timeline", len(tables.get("timeline", [])))),
        _topics(tables.get("topics_overview", []), s.get("topics_total")),
        _acls(tables.get("acls", []), s.get("acls"), result.tables.get("acls", 0)),
        "<h2>Charts</h2>" + "".join(f'<img src="{c}" alt="{c}">' for c in charts),
        "<h2>State</h2>" + _table([{"table": k, "rows": v} for k, v in result.tables.items()]),
        "<h2>Brokers</h2>" + _table(brokers),
        "<h2>Racks</h2>" + _table(racks),
        "<h2>Replication factors</h2>" + _table(factors),
        "<h2>Configs in use</h2>" + _table(tables.get("configs_in_use", []), 100, ' id="configs_in_use"'),
        "<h2>Leadership timeline</h2><p>Each broker's registrations, fencings, unfencings and controlled shutdowns "
        "(the batch's time), with the leader changes in the same batch: leaderships it lost and gained, how many of "
        "those it lost went offline, and how many partitions it leads after.</p>" + _table(events),
        "<h2>Offline partitions</h2>" + _offline_summary(s.get("offline")) + _table(offline, 100),
        "<h2>Reassignments</h2>" + _reassignments(tables.get("reassignments", []), s.get("reassignments")),
    ]
    page = (
        "<!doctype html><meta charset=utf-8><title>pykraft audit</title><style>body{font-family:sans-serif;"
        "margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;font-size:90%}"
        ".ok{color:#060}.bad{color:#a00}img{display:block;margin:1em 0}table.kv th{text-align:left}"
        ".warning{border-left:4px solid #c60;background:#fff6e8;padding:.3em 1em;margin:.5em 0}"
        "tr.root td{background:#fbeaea}tr.consequences>td{border:none;padding-left:2em}"
        "#timeline td:nth-child(5){font-family:monospace}</style>" + "".join(sections)
    )
    path = out / "report.html"
    path.write_text(page)
    return path
