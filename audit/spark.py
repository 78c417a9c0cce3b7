"""A SparkSession for the audit: the virtualenv's Python on executors, quiet logs, the data source registered, and
a clear one-line error (not a Java stack trace) when Java is missing.

Unless ``verbose``, nothing of the JVM's start-up reaches the terminal: the driver logs through a log4j2
configuration that keeps errors only (so neither Spark's "Using Spark's default log4j profile" and "Setting default
log level" lines nor NativeCodeLoader's warning are written), and the JVM's own notices on stderr (``WARNING:
Using incubator modules``) are dropped by a thread that passes every other line of the JVM's stderr on.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from audit.source import AuditInputError, ClusterMetadataDataSource


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


# An audit is a short job, most of it spent in code the JVM sees for the first time: the optimising JIT (C2) and
# concurrent GC threads burn more CPU than they win back before it ends. C1 alone and the parallel collector:
# 5M-record audit, local[2], first run 36.7 -> 29.2 s (69 -> 50 CPU-s), a second run in the same JVM 24.2 -> 23.4 s.
LOCAL_JVM = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m -XX:+UseParallelGC"


# Errors only, on stderr, in Spark's own layout (its log4j2-defaults.properties, at level error); shipped beside
# this module rather than written to a shared temporary directory.
QUIET_LOG4J2 = Path(__file__).with_name("log4j2-quiet.properties")
# What the JVM prints at start-up whatever log4j says: its own notices, and the interactive shell's hint (PySpark's
# gateway counts as a shell).
JVM_NOTICES = re.compile(
    rb"^(WARNING: Using incubator modules|Picked up (_JAVA_OPTIONS|JAVA_TOOL_OPTIONS)"
    rb"|Setting default log level to |To adjust logging level use sc\.setLogLevel)"
)


def _forward(source: int, target: int) -> None:
    """Copy the JVM's stderr to ours, line by line, leaving out its start-up notices."""
    with os.fdopen(source, "rb", buffering=0) as pipe, os.fdopen(target, "wb", buffering=0) as out:
        pending = b""
        while chunk := pipe.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if not JVM_NOTICES.match(line))
            if kept:
                out.write(kept)
        if pending and not JVM_NOTICES.match(pending):
            out.write(pending)


@contextmanager
def _filtered_stderr() -> Iterator[None]:
    """While the JVM is launched, fd 2 is a pipe that :func:`_forward` reads: the JVM keeps it as its stderr."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable fd 2: nothing to filter
        yield
        return
    read, write = os.pipe()
    threading.Thread(target=_forward, args=(read, os.dup(saved)), name="jvm-stderr", daemon=True).start()
    os.dup2(write, 2)
    os.close(write)
    try:
        yield
    finally:
        os.dup2(saved, 2)  # ours again; the JVM keeps the pipe (closed when it exits, which ends the thread)
        os.close(saved)


def spark_session(
    master: str = "local[*]", app: str = "pykraft-audit", memory: str = "4g", *, verbose: bool = False
) -> SparkSession:
    if find_java() is None:
        raise AuditInputError(
            "Spark needs Java 17: install it (e.g. apt-get install openjdk-17-jre-headless) or set JAVA_HOME"
        )
    # Executors must run this interpreter (it has pykraft and its dependencies), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app)
    java_options = []
    if master.startswith("local"):
        # A local audit talks only to itself: keep the driver's ports on loopback (Spark would otherwise pick the
        # first non-loopback interface, and say so on stderr).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # The local JVM is the whole cluster, so its JIT flags are ours to choose (a cluster's executors keep theirs).
        java_options.append(os.environ.get("PYKRAFT_SPARK_JAVA_OPTIONS", LOCAL_JVM))
    if not verbose:
        java_options.append(f"-Dlog4j2.configurationFile={QUIET_LOG4J2.as_uri()}")
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", " ".join(java_options))
    # A JVM already running (an earlier session of this process) keeps its stderr: only a launch is filtered.
    launching = not verbose and SparkContext._gateway is None
    with _filtered_stderr() if launching else nullcontext():
        spark = _configured(builder, master, memory).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ClusterMetadataDataSource)
    return spark


def _configured(builder: SparkSession.Builder, master: str, memory: str) -> SparkSession.Builder:
    return (
        builder.config("spark.ui.enabled", "false")
        .config("spark.driver.memory", memory)
        .config("spark.sql.shuffle.partitions", os.environ.get("PYKRAFT_SHUFFLE_PARTITIONS", _cores(master)))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )


def _cores(master: str) -> str:
    """Shuffle partitions for a local master: its core count (the metadata state is small; many tiny shuffle
    tasks cost more than they split)."""
    if master.startswith("local[") and master[6:-1].isdigit():
        return master[6:-1]
    return str(os.cpu_count() or 2) if master.startswith("local") else "16"
