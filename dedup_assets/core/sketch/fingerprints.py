"""Fingerprints: per document, token and shingle counts, a content hash, a MinHash signature and
its LSH band keys, under either hash scheme behind one interface (:func:`fingerprint_batch`).

- ``fss`` (default): compiled kernels (``kernels.py``) hash shingles to 64 bits and fill a Fast
  Similarity Sketch, with no Python object per token.
- ``blake2b``: the published definition, bit for bit (``minhash.py``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernels
from ..util.errors import InconsistentTables
from .minhash import blake2b_columns
from ..pipeline.step_params import SketchParams
from ..storage.store import TableBuild
from ..util.streams import Progress, ThroughputLog, mapped_in_order, prefetched
from ..storage.tables import Tables
from ..text.passages import ignored_hashes
from ..text.normalize import kernel_text

if TYPE_CHECKING:  # audit_probe shingles through verify/jaccard.py, which imports this module
    from ..audit.probe import AuditProbe


def fingerprint_schema(params: SketchParams) -> pa.Schema:
    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("token_count", pa.int32()),
            ("shingle_count", pa.int32()),
            ("content_hash", pa.uint64()),
            ("signature", pa.list_(pa.uint64(), params.num_perm)),
            ("lsh_bands", pa.list_(pa.uint64(), params.bands)),
        ]
    )


def kernel_blocks() -> int:
    """How many blocks a parallel kernel splits its documents into: a few per core, so that
    uneven document lengths even out."""
    return 4 * max(1, min(len(os.sched_getaffinity(0)), 8))


# at most this many batches fingerprinted at once; each runs its kernels on its share of the
# cores, which keeps them busier than every batch split over all of them while DuckDB reads and
# writes beside. Each holds a batch: up to 3 more in memory than fingerprinting one at a time.
STREAM_WORKERS = 4


def stream_workers() -> tuple[int, int]:
    """How many batches are fingerprinted at once, and the kernel threads of each: as many as
    divide the cores evenly (up to :data:`STREAM_WORKERS`), so that no core idles and none
    has two threads; one batch on every core where the kernels' threads cannot be shared."""
    cores = max(1, len(os.sched_getaffinity(0)))
    if not kernels.threads_may_share_kernels():
        return 1, cores
    workers = max(count for count in range(1, min(cores, STREAM_WORKERS) + 1) if cores % count == 0)
    return workers, cores // workers


def _fss_columns(bodies: pa.Array, params: SketchParams, probe: AuditProbe | None):
    return kernels.fingerprint_kernel(
        kernel_text(bodies, params.shingle_unit, ignored_hashes(params.shingling)),
        params.shingle_size,
        kernels.round_seeds(params.num_perm, params.minhash_seed),
        params.rows_per_band,
        kernel_blocks(),
        kernels.NO_PROBES if probe is None else probe.probes,
        kernels.NO_PROBE_FILTER if probe is None else probe.filter_bits,
    )


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64s (wrapping): spreads related keys over all 64 bits."""
    z = values + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def tokenless_keys(bodies: pa.Array, band_count: int) -> tuple[np.ndarray, np.ndarray]:
    """(content hash, band keys) of bodies without a word token: from their characters, trimmed of
    surrounding whitespace (every empty or blank body is one text), so that byte-identical ones
    are one copy group and share buckets with nothing else. Tagged apart from the token hashes."""
    trimmed = pc.fill_null(pc.utf8_trim_whitespace(bodies), "").to_pylist()
    # 128 bits: the content hash, and apart from it the bands' seed, so that two texts must agree
    # on both (copy_groups.sql's key) to be taken for one
    digests = b"".join(hashlib.blake2b(text.encode("utf-8"), digest_size=16, person=b"tokenless").digest() for text in trimmed)
    content, seed = np.frombuffer(digests, dtype="<u8").reshape(len(trimmed), 2).T.astype(np.uint64)
    bands = _splitmix64(seed[:, None] ^ (_GOLDEN * np.arange(1, band_count + 1, dtype=np.uint64)))
    return content, bands


def fingerprint_batch(
    doc_ids: pa.Array, bodies: pa.Array, params: SketchParams, probe: AuditProbe | None = None
) -> pa.RecordBatch:
    """Fingerprint one batch, and feed it to the recall audit's ``probe`` if given. Documents
    without tokens (empty, blank, only punctuation or emoji) have no shingles and an all-zero
    signature; their content hash and band keys come from their characters (:func:`tokenless_keys`),
    so that only their exact copies share their buckets."""
    if params.hash_scheme == "fss":
        token_counts, shingle_counts, content, signatures, bands, hits = _fss_columns(bodies, params, probe)
    else:  # the published hashes are not the probe's: it tests the batch itself
        (token_counts, shingle_counts, content, signatures, bands), hits = blake2b_columns(bodies, params), None
    tokenless = np.flatnonzero(token_counts == 0)
    if len(tokenless):
        content[tokenless], bands[tokenless] = tokenless_keys(bodies.take(pa.array(tokenless)), bands.shape[1])
    if probe is not None:  # named by the copy key (copy_groups.sql), the probe keeps a text's copies once
        probe.feed(doc_ids, bodies, hits, np.column_stack([content, bands[:, 0]]))
    bands = np.ascontiguousarray(bands[:, : params.bands])  # chosen bands may use fewer values than num_perm
    return pa.RecordBatch.from_arrays(
        [
            doc_ids.cast(pa.string()),
            pa.array(token_counts.astype(np.int32)),
            pa.array(shingle_counts.astype(np.int32)),
            pa.array(content),
            pa.FixedSizeListArray.from_arrays(pa.array(signatures.ravel()), params.num_perm),
            pa.FixedSizeListArray.from_arrays(pa.array(bands.ravel()), params.bands),
        ],
        schema=fingerprint_schema(params),
    )


def list_matrix(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A column of uint64 lists of one length (signatures, band keys) as a (rows, length) array."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(column) == 0:
        return np.zeros((0, 0), dtype=np.uint64)
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if (lengths != lengths[0]).any():
        raise InconsistentTables("fingerprint lists of different lengths: re-materialize fingerprinted")
    return column.flatten().to_numpy().reshape(len(column), int(lengths[0]))


def fingerprint_stream(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    params: SketchParams,
    batch_size: int,
    log: Progress,
    probe: AuditProbe | None = None,
) -> Iterator[pa.RecordBatch]:
    """Fingerprints, one Arrow batch per ``batch_size`` documents read from ``documents`` through
    ``connection``: a cursor of its own, since the caller writes while this stream reads. Each
    batch is also fed to the recall audit's ``probe``, if given.

    One thread reads batches from DuckDB, :func:`stream_workers` fingerprint them, and the
    caller stores them in order."""
    total = connection.execute(f"select count(*) from {tables.documents}").fetchall()[0][0]
    progress = ThroughputLog(log, "fingerprinted", total)
    reader = connection.sql(f"select doc_id, body from {tables.documents}").to_arrow_reader(batch_size)
    workers, threads = stream_workers()
    for fingerprints in mapped_in_order(
        lambda batch: fingerprint_batch(batch.column(0), batch.column(1), params, probe),
        prefetched(reader),
        workers,
        lambda: kernels.use_threads(threads),
    ):
        yield fingerprints
        progress.advance(fingerprints.num_rows)


def build_fingerprinted(
    reader: duckdb.DuckDBPyConnection,
    tables: Tables,
    params: SketchParams,
    batch_size: int,
    log: Progress,
    probe: AuditProbe | None = None,
) -> TableBuild:
    """The ``fingerprinted`` table, streamed from ``documents`` through ``reader`` (a cursor the
    caller keeps open until the table is written); ``probe`` has found its true pairs once it is."""
    return TableBuild(
        batches=fingerprint_stream(reader, tables, params, batch_size, log, probe),
        schema=fingerprint_schema(params),
    )
