"""Fixtures of the audit tests: one SparkSession per test module (starting one costs seconds and gigabytes)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from audit.spark import spark_session

    session = spark_session("local[2]", app="pykraft-audit-tests", memory="1g")
    # Test data is tiny: two shuffle partitions (not the job's 8) and no adaptive re-planning halve the run time;
    # without whole-stage code generation no query waits for Janino to compile code for a few hundred rows
    # (tests/audit: 169 s against 187 s).
    session.conf.set("spark.sql.shuffle.partitions", "2")
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.codegen.wholeStage", "false")
    try:
        yield session
    finally:
        session.stop()
