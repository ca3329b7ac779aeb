"""The recall audit's sample: which documents (:func:`sample_doc_ids`, fixed by their doc_ids and
the seed before any body is read), and their bodies, kept by the documents step as the bodies
stream past (:class:`SampleBodies`) so that fingerprinting need not read them again."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sketch import kernels
from ..storage.store import TableBuild, read_lineage
from ..text.normalize import utf8_buffers


def sample_doc_ids(doc_ids: pa.Array | pa.ChunkedArray, size: int, seed: int) -> pa.Array:
    """The ``size`` doc_ids with the smallest hash keyed by ``seed`` (ties, which 64 bits make
    rare, by doc_id), in that order; every doc_id when ``size`` is 0 or at least their count."""
    ids = (doc_ids.combine_chunks() if isinstance(doc_ids, pa.ChunkedArray) else doc_ids).cast(pa.large_string())
    hashes = kernels.keyed_hash_kernel(*utf8_buffers(ids), np.uint64(seed))
    if 0 < size < len(ids):
        # only the doc_ids up to the size-th smallest hash are sorted
        chosen = np.flatnonzero(hashes <= np.partition(hashes, size - 1)[size - 1])
        ids, hashes = ids.take(pa.array(chosen)), hashes[chosen]
    keyed = pa.table({"hash": hashes, "doc_id": ids})
    order = pc.sort_indices(keyed, sort_keys=[("hash", "ascending"), ("doc_id", "ascending")])
    return ids.take(order[: size or len(ids)]).cast(pa.string())


def same_input(connection: duckdb.DuckDBPyConnection, table: str, documents: str) -> bool:
    return read_lineage(connection, table).get("input_sha256") == read_lineage(connection, documents).get("input_sha256")


# The audit's sample with its bodies, which the documents step keeps as the bodies stream past
# (a table beside documents), so that fingerprinting does not scan every body a second time to
# find a thousand. At most this many bytes of bodies are kept; beyond them (a sample of the
# whole corpus, or of pages far longer than the web's) the table is left empty and the bodies
# are read again. The bytes count the sample's doc_ids and hashes too.
AUDIT_SAMPLE_BODIES = "audit_sample_bodies"
SAMPLE_BODIES_SCHEMA = pa.schema([("doc_id", pa.string()), ("body", pa.large_string())])
SAMPLE_BODIES_MAX_BYTES = 128 << 20


class SampleBodies:
    """The documents of the sample :func:`sample_doc_ids` draws (``size`` > 0 of them, keyed by
    ``seed``) with their bodies, found while every document is offered once, in any order: it
    holds the rows whose keyed hash can still be among the ``size`` smallest. Whether it is the
    sample is checked where it is used (:func:`audit_probe`): a document the stream later
    rejects, for one, makes it another."""

    def __init__(self, size: int, seed: int):
        self.size, self.seed = size, np.uint64(seed)
        self._held = pa.table({"hash": pa.array([], pa.uint64()), "doc_id": pa.array([], pa.large_string()),
                               "body": pa.array([], pa.large_string())})
        self._bound: np.uint64 | None = None  # the size-th smallest hash held, once size are
        self.too_large = False

    def offer(self, doc_ids: pa.Array, bodies: pa.Array, documents: np.ndarray) -> None:
        """One batch's records; ``documents`` marks those that became documents."""
        if self.too_large or not len(doc_ids):
            return
        ids = doc_ids.cast(pa.large_string())
        hashes = kernels.keyed_hash_kernel(*utf8_buffers(ids), self.seed)
        wanted = documents if self._bound is None else documents & (hashes <= self._bound)
        chosen = np.flatnonzero(wanted)
        if not len(chosen):
            return
        rows = pa.array(chosen)
        offered = pa.table({"hash": hashes[chosen], "doc_id": ids.take(rows), "body": bodies.take(rows).cast(pa.large_string())})
        self._held = pa.concat_tables([self._held, offered])
        # pruned now and then, not at every batch, and before the rows held pass the cap
        if self._held.num_rows >= 2 * self.size or self._held.nbytes > SAMPLE_BODIES_MAX_BYTES:
            self._prune()

    def _prune(self) -> None:
        """Keep the rows at or below the size-th smallest hash; if they pass the cap, none."""
        held = self._held.column("hash").to_numpy()
        if len(held) > self.size:
            self._bound = np.partition(held, self.size - 1)[self.size - 1]
            self._held = self._held.filter(pa.array(held <= self._bound)).combine_chunks()
        if self._held.nbytes > SAMPLE_BODIES_MAX_BYTES:
            self.too_large = True
            self._held = self._held.slice(0, 0)

    def table(self) -> pa.Table:
        """The sample in :func:`sample_doc_ids`' order (empty when its bodies were too large)."""
        if not self.too_large:
            self._prune()
        order = pc.sort_indices(self._held, sort_keys=[("hash", "ascending"), ("doc_id", "ascending")])
        chosen = self._held.take(order[: self.size])
        return pa.table([chosen.column("doc_id").cast(pa.string()), chosen.column("body")], schema=SAMPLE_BODIES_SCHEMA)

    def build(self) -> TableBuild:
        return TableBuild(batches=self.table().to_batches(), schema=SAMPLE_BODIES_SCHEMA)


def no_sample_bodies() -> TableBuild:
    return TableBuild(batches=[], schema=SAMPLE_BODIES_SCHEMA)
