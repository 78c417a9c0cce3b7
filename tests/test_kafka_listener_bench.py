"""``benchmarks/kafka_listener.py``'s core, as its quick mode runs it, against one in-process node (its Kafka listener,
3 brokers): every front answers, every printed rate and CPU figure is there and positive, and the topics counted as
created are the ones gRPC finds."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT / "tests" / "kafka_protocol"))  # the in-process node with a Kafka listener, not copied
from kafka_helpers import kafka_node  # noqa: E402

_spec = importlib.util.spec_from_file_location("kafka_listener_bench", ROOT / "benchmarks" / "kafka_listener.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

LABELS = ("gRPC", "confluent", "raw frames", "confluent, 1 shared")


async def leader_of() -> int:
    return 1


def test_quick_core_prints_every_front_with_positive_figures(tmp_path: Path) -> None:
    lines: list[str] = []
    with kafka_node(tmp_path) as node:
        report = asyncio.run(
            bench.measure(
                node.grpc_bootstrap,
                {1: ("127.0.0.1", node.listener.port)},
                leader_of,
                clients=(1, 2),
                duration=0.1,
                rounds=1,
                controllers={1: os.getpid()},  # the node runs in this process
                out=lines.append,
            )
        )
    text = "\n".join(lines)
    assert report["failed"] == 0, text
    heads = [line for line in lines if "topic(s)/request:" in line]
    assert [h.split(":")[0].split() for h in heads] == [
        ["1", "caller(s)", "x", "1", "topic(s)/request"],
        ["2", "caller(s)", "x", "1", "topic(s)/request"],
        ["1", "caller(s)", "x", "100", "topic(s)/request"],
        ["2", "caller(s)", "x", "100", "topic(s)/request"],
    ], text
    for head in heads:
        rates = dict(re.findall(r"(?:^|\| )([a-zA-Z ,1]+?) ([\d,]+) topics/s", head.split(": ", 1)[1]))
        expected = LABELS if head.lstrip().startswith("2") else LABELS[:3]
        assert set(rates) == set(expected), head
        assert all(int(v.replace(",", "")) > 0 for v in rates.values()), head
        if "gRPC" in rates and len(rates) > 1:
            assert re.search(r"\(\d+\.\d\dx gRPC\)", head), head
    medians = [line for line in lines if "median of the rounds' ratios" in line]
    assert len(medians) == 4 and all(re.search(r"confluent \d+\.\d\dx \| raw frames \d+\.\d\dx", m) for m in medians), (
        text
    )
    for line in (line for line in lines if "CPU seconds" in line):
        leaders = [float(x) for x in re.findall(r"leader (\d+\.\d+) s", line)]
        per_topic = [int(x.replace(",", "")) for x in re.findall(r"= ([\d,]+) us/topic", line)]
        assert leaders and all(x > 0 for x in leaders) and len(per_topic) == len(leaders), line
        assert all(x > 0 for x in per_topic), line
    for shape in report["shapes"]:
        for res in shape["fronts"].values():
            assert res["created"] > 0 and res["counted_through_grpc"] == res["created"], shape
            assert not res["failovers"] and res["cpu_s"]["leader"] > 0, shape
    assert "changed during" not in text and not report["kafka_clients_reopened"]
