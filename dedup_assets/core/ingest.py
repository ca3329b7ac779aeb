"""The documents step: the validated input streamed into ``documents``, the rows that cannot be
documents into ``rejected_documents``, and the input's identity (size and sha256) taken while
it is read."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
import pyarrow as pa

from .readers import InputFile, InputStats, describe_input, document_batches
from .settings import InputPolicy
from .store import TableBuild
from .streams import Progress, prefetched

def document_stream(
    path: Path, stats: InputStats, batch_size: int, policy: InputPolicy, log: Progress
) -> Iterator[pa.RecordBatch]:
    """The validated input, logged as it streams; the next batch is read and validated while
    the caller stores the previous one."""
    last = time.monotonic()
    for batch in prefetched(document_batches(path, stats, batch_size, policy)):
        if time.monotonic() - last >= 5.0:
            last = time.monotonic()
            log(f"documents: {stats.rows:,} rows read")
        yield batch


def build_documents(
    path: Path, batch_size: int, policy: InputPolicy, log: Progress
) -> tuple[TableBuild, InputStats]:
    """The accepted documents as a stream; ``stats`` fills in (rejected rows included) as it is
    written, for :func:`build_rejected_documents`."""
    stats = InputStats()
    return TableBuild(batches=document_stream(path, stats, batch_size, policy, log)), stats


def build_rejected_documents(stats: InputStats) -> TableBuild:
    """The rejected rows ``stats`` collected, in input order (call after documents is written)."""
    return TableBuild(
        sql="select * from rejected order by source_file, input_row",
        arrow_inputs={"rejected": stats.rejected_table()},
    )


@contextmanager
def input_identity(path: Path, source_format: str | None) -> Iterator[Future[InputFile]]:
    """The input's identity, hashed in a second thread while the caller reads the input."""
    with ThreadPoolExecutor(max_workers=1) as hasher:
        yield hasher.submit(describe_input, path, source_format)
