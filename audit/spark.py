"""A SparkSession for the audit: the virtualenv's Python on executors, quiet logs, the data source registered, and
a clear one-line error (not a Java stack trace) when Java is missing."""

from __future__ import annotations

import os
import shutil
import sys

from pyspark.sql import SparkSession

from audit.source import AuditInputError, ClusterMetadataDataSource


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def spark_session(master: str = "local[*]", app: str = "pykraft-audit", memory: str = "4g") -> SparkSession:
    if find_java() is None:
        raise AuditInputError(
            "Spark needs Java 17: install it (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    # Executors must run this interpreter (it has pykraft and its dependencies), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # A local audit talks only to itself: keep the driver's ports on loopback (Spark would otherwise pick the
        # first non-loopback interface, and say so on stderr).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", os.environ.get("PYKRAFT_SHUFFLE_PARTITIONS", _cores(master)))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ClusterMetadataDataSource)
    return spark


def _cores(master: str) -> str:
    """Shuffle partitions for a local master: its core count (the metadata state is small; many tiny shuffle
    tasks cost more than they split)."""
    if master.startswith("local[") and master[6:-1].isdigit():
        return master[6:-1]
    return str(os.cpu_count() or 2) if master.startswith("local") else "16"
