"""The ``cluster_metadata`` PySpark data source::

    spark.dataSource.register(ClusterMetadataDataSource)
    df = spark.read.format("cluster_metadata").load("/path/to/__cluster_metadata-0")

Options: ``fromStart`` (read every log segment even when a snapshot covers its beginning; default false: the newest
snapshot, then the log from its end offset), ``json`` (add the whole record as JSON; default false), ``splitBytes``
(largest partition, default 64 MiB), ``minPartitions`` (split finer until there are about this many; default 1 —
:func:`audit.job.read_rows` asks for four per core). The driver only lists files and splits them at batch
boundaries; executors open, decode and turn records into Arrow rows (audit.decode) — nothing is collected to the
driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from audit.decode import FileRange, decode_range, plan_ranges, spark_schema
from quorum.log.log import METADATA_PARTITION_DIR
from quorum.log.reader import SNAPSHOT_SUFFIX, parse_snapshot_name
from quorum.log.segment import SUFFIX

DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024


class AuditInputError(ValueError):
    """A path that holds no metadata log: reported in one line, not as a Java stack trace."""


def _truthy(value: str | None) -> bool:
    return str(value).lower() in ("1", "true", "yes")


def select_files(path: str | Path, from_start: bool = False) -> list[Path]:
    """The files to read: segments (and the newest snapshot unless ``from_start``), in log order."""
    root = Path(path)
    if not root.exists():
        raise AuditInputError(f"{root}: no such file or directory")
    if root.is_file():
        return [root]
    if (root / METADATA_PARTITION_DIR).is_dir():
        root = root / METADATA_PARTITION_DIR
    segments = sorted(root.glob("*" + SUFFIX))
    snapshots = sorted(
        (p for p in root.glob("*" + SNAPSHOT_SUFFIX) if parse_snapshot_name(p) is not None),
        key=lambda p: parse_snapshot_name(p),  # type: ignore[arg-type,return-value]
    )
    if not segments and not snapshots:
        raise AuditInputError(f"{root}: no log segments (*.log) or snapshots (*.checkpoint)")
    if from_start or not snapshots:
        return segments
    newest = snapshots[-1]
    end_offset, _ = parse_snapshot_name(newest)  # type: ignore[misc]
    # Keep segments that may hold offsets >= the snapshot's end (a segment's records start at its base offset).
    bases = [int(p.name[: -len(SUFFIX)]) for p in segments]
    keep = [p for i, p in enumerate(segments) if i + 1 >= len(bases) or bases[i + 1] > end_offset]
    return [newest, *keep]


def plan(path: str | Path, from_start: bool, split_bytes: int, min_ranges: int) -> tuple[list[FileRange], int]:
    """The ranges to decode, and the first log offset to keep: a snapshot read first covers the log below it."""
    files = select_files(path, from_start)
    snap = parse_snapshot_name(files[0]) if files else None
    return plan_ranges(files, split_bytes, min_ranges), snap[0] if snap is not None else 0


def read_range(r: FileRange, with_json: bool, first_log_offset: int) -> Iterator[pa.RecordBatch]:
    """:func:`decode_range`, leaving out log records the snapshot already holds."""
    for batch in decode_range(r, with_json=with_json):
        if first_log_offset and r.source == "log":
            offset = batch.column("offset")
            batch = batch.filter(pc.or_kleene(pc.is_null(offset), pc.greater_equal(offset, first_log_offset)))
        yield batch


class _Partition(InputPartition):
    def __init__(self, r: FileRange, with_json: bool, first_log_offset: int) -> None:
        super().__init__(r.path)
        self.range = r
        self.with_json = with_json
        self.first_log_offset = first_log_offset


class ClusterMetadataReader(DataSourceReader):
    def __init__(self, options: dict[str, str], with_json: bool) -> None:
        # Spark hands options over case-insensitively (keys lower-cased): look them up the same way.
        self.options = {k.lower(): v for k, v in options.items()}
        self.with_json = with_json

    def partitions(self) -> list[InputPartition]:
        path = self.options.get("path")
        if not path:
            raise AuditInputError("cluster_metadata: give the log directory, e.g. .load('/data/__cluster_metadata-0')")
        split = int(self.options.get("splitbytes", DEFAULT_SPLIT_BYTES))
        min_ranges = int(self.options.get("minpartitions", 1))
        ranges, first = plan(path, _truthy(self.options.get("fromstart")), split, min_ranges)
        return [_Partition(r, self.with_json, first) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator:  # type: ignore[override]
        assert isinstance(partition, _Partition)
        yield from read_range(partition.range, partition.with_json, partition.first_log_offset)


class ClusterMetadataDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "cluster_metadata"

    def schema(self) -> StructType:
        return spark_schema(_truthy(self.options.get("json")))

    def reader(self, schema: object) -> DataSourceReader:
        return ClusterMetadataReader(dict(self.options), _truthy(self.options.get("json")))
