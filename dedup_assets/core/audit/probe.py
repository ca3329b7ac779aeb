"""The recall audit's ground truth, found while the documents are fingerprinted: every document
whose exact shingle Jaccard with a sampled document is at least the threshold, without LSH.

The sample is fixed before any body is read: the ``audit_sample_size`` doc_ids with the smallest
hash keyed by ``minhash_seed`` (every document at 0), so it depends on the doc_ids alone, not on
row order or engine.

A pair with Jaccard ``J(x, y) >= t`` shares at least ``t·|x|`` of x's shingles, so y holds at
least one of any ``floor((1 - t)·|x|) + 1`` shingles of x (the *probes* of x: its rarest in
the sample; prefix filtering). :class:`AuditProbe` holds the sample's distinct shingle sets (the
*owners*: sampled copies of one text are one owner, so a copy group sampled many times costs as
much as one sampled document) and their probes, and is fed the bodies batch by batch: the
fingerprinting kernel marks the documents that hold a probe (or the probe finds them itself), a
kernel lists whose probes each holds, and each such pair is verified with exact Jaccard. The
documents found are exactly those at Jaccard ``>= t`` with an owner, the sampled ones among them,
whatever feeds it: the fingerprinting pass (on the ray engine, the workers' copies of the probe,
whose rows come back through :meth:`AuditProbe.take_found`), or a pass of its own
(:func:`probe_pass`, for the sweep and a rescore without the stored pairs).

What it keeps grows with the distinct texts found, not with their copies: a sampled document is
kept as one row per owner that finds it, and the other documents an owner finds, when the feed
names their text (the pipeline's copy key: content hash and first band key), as one row per
text. ``sql/recall_audit.sql`` counts the document pairs from the copy groups' sizes.
"""

from __future__ import annotations

import copy
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..sketch import kernels
from .sample import AUDIT_SAMPLE_BODIES, same_input, sample_doc_ids
from ..read.ingest import document_bodies
from ..verify.jaccard import shingle_sets
from ..sketch.fingerprints import kernel_blocks
from ..storage.store import TableBuild, table_exists, write_table
from ..storage.tables import Tables, beside, sql_over
from ..text.passages import ignored_hashes
from ..text.normalize import Shingling, kernel_text

# the audit's true pairs: a table of the fingerprinted asset, beside it in its schema
AUDIT_PAIRS = "audit_true_pairs"
# its lineage entries beside fingerprinted's: the threshold the pairs were found at (a rescore
# at a higher one filters them; a lower one needs them found again) and the sample's size
AUDIT_THRESHOLD = "audit_jaccard_threshold"
AUDIT_SAMPLED = "audit_sampled_documents"
# One row per document an owner found: sampled_doc_id names the owner (its first sampled document
# in the sample's order), doc_id the document found, with their Jaccard, and sample_place its place
# in the sample, null when it is not sampled. A document not sampled stands for every document of
# its text that the owner found where the feed named the texts (the smallest doc_id of them).
AUDIT_PAIRS_SCHEMA = pa.schema(
    [
        ("sampled_doc_id", pa.string()),
        ("doc_id", pa.string()),
        ("jaccard", pa.float64()),
        ("sample_place", pa.int32()),
    ]
)
# bits of the probe filter per probe: few enough to stay in cache, enough that an unrelated
# shingle rarely passes
_FILTER_BITS_PER_PROBE = 16
# The probe's rows as found, before a text's rows of several batches are merged: the owner's
# place, and the copy key where the feed names texts (null: the document is its own text).
FOUND_SCHEMA = pa.schema(
    [
        ("owner", pa.int64()),
        ("doc_id", pa.string()),
        ("jaccard", pa.float64()),
        ("sample_place", pa.int32()),
        ("text_a", pa.uint64()),
        ("text_b", pa.uint64()),
    ]
)
# the probe's rows with a text's rows merged, a temporary table audit_true_pairs is made from
_MERGED = "audit_found_merged"
# Rows held in memory before they are written to a file beside the database: shared boilerplate
# can make a sample's true pairs tens of millions of rows, which DuckDB then merges and orders,
# spilling as it needs.
SPILL_ROWS = 1 << 20


class AuditProbe:
    """The documents at Jaccard ``threshold`` or above with a sample of documents
    (``sample_ids``, whose bodies are ``sample_bodies``), found as every document's body is fed
    through :meth:`feed`, once each, in any order and from several threads at once; :meth:`found`
    gives them."""

    def __init__(
        self, sample_ids: pa.Array, sample_bodies: pa.Array, shingling: Shingling, threshold: float,
        spill_folder: str | None = None, spill_rows: int = SPILL_ROWS,
    ):
        self.sample_ids, self.shingling, self.threshold = sample_ids.cast(pa.string()), shingling, threshold
        values, offsets = shingle_sets(sample_bodies, shingling)
        # the owners: the sample's distinct shingle sets, in the order of their first sampled document
        firsts = _first_of_each_set(values, offsets)
        self.owner_ids = self.sample_ids.take(pa.array(firsts))
        self._values, self._offsets = _rows(values, offsets, firsts)
        probes, self._owner_offsets, self._owners = _probes(self._values, self._offsets, threshold)
        self.filter_bits = _probe_filter(probes)
        # what the kernels look shingles up in: the probes' table, or none
        self.probes, self._places = kernels.probe_slots_kernel(probes) if len(probes) else (kernels.NO_PROBES, None)
        self._found = _FoundRows(spill_folder, spill_rows)

    def feed(
        self, doc_ids: pa.Array, bodies: pa.Array, hits: np.ndarray | None = None, texts: np.ndarray | None = None
    ) -> None:
        """Verify one batch's documents against the sample. ``hits`` marks those holding a probe
        where the fingerprinting kernel tested them; unset, every document is tested here.
        ``texts`` (a row of uint64 per document: the copy key) names each document's text, so
        that an owner keeps one row per text it finds; unset, one per document."""
        if hits is not None:
            held = np.flatnonzero(hits)
            doc_ids, bodies = doc_ids.take(pa.array(held)), bodies.take(pa.array(held))
            texts = None if texts is None else texts[held]
        if not len(doc_ids) or not len(self.probes):
            return
        doc_ids = doc_ids.cast(pa.string())
        owner_count = len(self.owner_ids)
        offsets, owners = kernels.probe_owners_kernel(
            kernel_text(bodies, self.shingling.unit, ignored_hashes(self.shingling)), self.shingling.size, self.probes, self._places,
            self.filter_bits, self._owner_offsets, self._owners, owner_count, kernel_blocks(),
        )
        counts = np.diff(offsets)
        candidates = np.flatnonzero(counts)
        if not len(candidates):
            return
        values, candidate_offsets = shingle_sets(bodies.take(pa.array(candidates)), self.shingling)
        # one set table: the owners' sets, then the candidates'
        table = np.concatenate([self._values, values])
        table_offsets = np.concatenate([self._offsets[:-1], candidate_offsets + self._offsets[-1]])
        rows = np.repeat(np.arange(len(candidates), dtype=np.int64), counts[candidates])
        # J(x, y) <= min(|x|, |y|) / max(|x|, |y|): pairs of too different sizes are not measured
        left_sizes, right_sizes = np.diff(self._offsets)[owners], np.diff(candidate_offsets)[rows]
        sized = np.minimum(left_sizes, right_sizes) >= self.threshold * np.maximum(left_sizes, right_sizes) - 1e-9
        owners, rows = owners[sized], rows[sized]
        jaccard = kernels.pair_jaccard_kernel(table, table_offsets, owners, rows + owner_count, kernel_blocks())
        keep = np.flatnonzero(jaccard >= self.threshold)
        if not len(keep):
            return
        documents = candidates[rows[keep]]
        found_ids = doc_ids.take(pa.array(documents))
        no_text = pa.nulls(len(keep), pa.uint64())
        found = pa.table(
            [
                pa.array(owners[keep]),
                found_ids,
                pa.array(jaccard[keep]),
                pc.cast(pc.index_in(found_ids, value_set=self.sample_ids), pa.int32()),
                no_text if texts is None else pa.array(texts[documents, 0]),
                no_text if texts is None else pa.array(texts[documents, 1]),
            ],
            schema=FOUND_SCHEMA,
        )
        self._found.add(found if texts is None else _one_per_text(found))

    def __getstate__(self) -> dict:
        # shipped to a worker (the ray engine's fingerprinting) without the rows found here: what
        # it finds there comes back through take_found and add_found
        return {**self.__dict__, "_found": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._found = _FoundRows(None, SPILL_ROWS)

    def emptied(self) -> AuditProbe:
        """A copy that shares what this probe tests against and holds no found rows: each call
        of the ray engine's fingerprinting feeds its own and takes what it found, as a worker
        process may run calls at once on one unpickled probe."""
        copied = copy.copy(self)
        copied._found = _FoundRows(None, self._found.spill_rows)
        return copied

    def take_found(self) -> pa.Table:
        """The rows found since the last call (:data:`FOUND_SCHEMA`), no longer held here."""
        taken, self._found = self._found, _FoundRows(self._found.folder, self._found.spill_rows)
        relation, params, inputs = taken.relation()
        with duckdb.connect() as connection:
            for name, table in inputs.items():
                connection.register(name, table)
            return connection.sql(f"select * from {relation}", params=params).to_arrow_table().cast(FOUND_SCHEMA)

    def add_found(self, rows: pa.Table) -> None:
        """Rows another copy of this probe found (:meth:`take_found`'s)."""
        self._found.add(rows)

    def build(self) -> TableBuild:
        """The ``audit_true_pairs`` table (:data:`AUDIT_PAIRS_SCHEMA`): every document found,
        ordered by owner and doc_id, in DuckDB (``sql/audit_true_pairs.sql``)."""
        rows, params, inputs = self._found.relation()
        merged = TableBuild(sql=sql_over("audit_found_merged", rows=rows), params=params, arrow_inputs=inputs)
        owners = pa.table({"owner": pa.array(np.arange(len(self.owner_ids), dtype=np.int64)), "sampled_doc_id": self.owner_ids})
        return TableBuild(
            sql=sql_over("audit_true_pairs", merged=_MERGED), arrow_inputs={"owners": owners}, staged=((_MERGED, merged),)
        )

    def found(self) -> pa.Table:
        """:meth:`build`'s rows, as a table in memory."""
        with duckdb.connect() as connection:
            write_table(connection, "found", self.build())
            return connection.sql("select * from found").to_arrow_table().cast(AUDIT_PAIRS_SCHEMA)

    def lineage(self) -> dict:
        """What the audit_true_pairs table records beside fingerprinted's lineage."""
        return {AUDIT_THRESHOLD: self.threshold, AUDIT_SAMPLED: len(self.sample_ids)}


def _first_of_each_set(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The row of the first of each distinct set of the CSR (values, offsets), ascending."""
    firsts: dict[bytes, int] = {}
    for row in range(len(offsets) - 1):
        firsts.setdefault(np.sort(values[offsets[row] : offsets[row + 1]]).tobytes(), row)
    return np.array(sorted(firsts.values()), dtype=np.int64)


def _rows(values: np.ndarray, offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR of the chosen ``rows`` of (values, offsets)."""
    sizes = np.diff(offsets)[rows]
    taken = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(sizes, out=taken[1:])
    picked = [values[offsets[row] : offsets[row + 1]] for row in rows]
    return (np.concatenate(picked) if picked else np.zeros(0, np.uint64)), taken


class _FoundRows:
    """The probe's rows (:data:`FOUND_SCHEMA`), fed from several threads: the last
    ``spill_rows`` or fewer in memory, the rest in a Parquet file of a temporary folder in
    ``spill_folder`` (None: the system's), removed with this object."""

    def __init__(self, spill_folder: str | None, spill_rows: int):
        self.folder, self.spill_rows = spill_folder, spill_rows
        self._held: list[pa.Table] = []
        self._count = 0
        self._lock = threading.Lock()
        self._spill: tempfile.TemporaryDirectory | None = None
        self._writer: pq.ParquetWriter | None = None

    def add(self, rows: pa.Table) -> None:
        rows = rows.select(FOUND_SCHEMA.names).cast(FOUND_SCHEMA)  # a grouped batch's columns come back loose
        with self._lock:
            self._held.append(rows)
            self._count += rows.num_rows
            if self._count >= self.spill_rows:
                self._write()

    def _write(self) -> None:
        if self._spill is None:
            self._spill = tempfile.TemporaryDirectory(prefix="dedup-audit-", dir=self.folder)
            self._writer = pq.ParquetWriter(self._path(), FOUND_SCHEMA)
        for rows in self._held:
            self._writer.write_table(rows)
        self._held, self._count = [], 0

    def _path(self) -> str:
        return str(Path(self._spill.name) / "found.parquet")

    def relation(self) -> tuple[str, list, dict[str, pa.Table]]:
        """(a relation of every row, its parameters, the Arrow tables it reads by name); the file
        is complete from here on."""
        with self._lock:
            if self._spill is None:
                return "found_held", [], {"found_held": pa.concat_tables([FOUND_SCHEMA.empty_table(), *self._held])}
            if self._writer is not None:
                self._write()
                self._writer.close()
                self._writer = None
            return "read_parquet($1)", [self._path()], {}


def _one_per_text(found: pa.Table) -> pa.Table:
    """``found`` with its documents not sampled kept once per owner and text (the copy key in
    ``text_a``, ``text_b``): the smallest doc_id. A text's documents have one shingle set, so one
    Jaccard with the owner. The key stays, so that the rows of several batches merge again."""
    sampled = pc.is_valid(found.column("sample_place"))
    keys = ["owner", "text_a", "text_b"]
    others = found.filter(pc.invert(sampled)).group_by(keys, use_threads=False).aggregate(
        [("doc_id", "min"), ("jaccard", "min"), ("sample_place", "min")]
    ).rename_columns([*keys, "doc_id", "jaccard", "sample_place"])
    return pa.concat_tables([found.filter(sampled), others.select(found.column_names)])


def _probes(values: np.ndarray, offsets: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each owner's probes (the owners' sets are the CSR ``values``, ``offsets``): the distinct
    hashes (sorted) and, per hash, its owners (their places, ascending) as CSR.

    Any ``floor((1 - t)·|x|) + 1`` shingles of x will do, so x probes with its rarest, by how
    many owners hold each (then by hash): a shingle most pages share (a common phrase, a
    footer) would make most pages candidates of every owner probing with it."""
    _, inverse, held_by = np.unique(values, return_inverse=True, return_counts=True)
    # rarest first, then by the hash's top 40 bits, in one key a partition orders in linear time
    # (which of two equal keys is taken does not matter: any subset of the size will do)
    rareness = (np.minimum(held_by[inverse], (1 << 24) - 1).astype(np.uint64) << np.uint64(40)) | (
        values >> np.uint64(24)
    )
    hashes, owners = [], []
    for index in range(len(offsets) - 1):
        start, end = offsets[index], offsets[index + 1]
        count = min(int(np.floor((1.0 - threshold) * (end - start) + 1e-9)) + 1, end - start)
        rarest = start + np.argpartition(rareness[start:end], count - 1)[:count] if count else np.zeros(0, np.int64)
        hashes.append(values[rarest])
        owners.append(np.full(count, index, dtype=np.int64))
    hashes = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    owners = np.concatenate(owners) if owners else np.zeros(0, np.int64)
    by_hash = np.argsort(hashes, kind="stable")  # stable: each hash's owners stay ascending
    hashes, owners = hashes[by_hash], owners[by_hash]
    unique, starts = np.unique(hashes, return_index=True)
    return unique, np.append(starts, len(hashes)).astype(np.int64), owners


def _probe_filter(hashes: np.ndarray) -> np.ndarray:
    """A bitmap (uint64 words, a power-of-two number of bits) of the probes' top hash bits."""
    bits = 64
    while bits < len(hashes) * _FILTER_BITS_PER_PROBE:
        bits *= 2
    words = np.zeros(bits // 64, dtype=np.uint64)
    top = hashes >> np.uint64(64 - int(np.log2(bits)))
    np.bitwise_or.at(words, (top >> np.uint64(6)).astype(np.int64), np.uint64(1) << (top & np.uint64(63)))
    return words


def audit_probe(
    connection: duckdb.DuckDBPyConnection,
    documents: str,
    shingling: Shingling,
    threshold: float,
    sample_size: int,
    seed: int,
) -> AuditProbe:
    """The probe of ``sample_size`` documents of the ``documents`` table (0: all), seeded by
    ``seed``: their doc_ids read, the sample drawn, its bodies taken from the documents step's
    :data:`AUDIT_SAMPLE_BODIES` when it holds exactly this sample, else read
    (:func:`.ingest.document_bodies`)."""
    doc_ids = connection.sql(f"select doc_id from {documents}").to_arrow_table().column(0)
    sample = sample_doc_ids(doc_ids, sample_size, seed)
    stash = beside(documents, AUDIT_SAMPLE_BODIES)
    kept = None
    # kept from this input (its sha256, where recorded), and exactly this sample
    if table_exists(connection, stash) and same_input(connection, stash, documents):
        kept = connection.sql(f"select doc_id, body from {stash}").to_arrow_table()
    if kept is not None and kept.column("doc_id").combine_chunks().cast(pa.string()).equals(sample):
        bodies = kept.column("body").combine_chunks()
    else:
        bodies = document_bodies(connection, documents, sample).column("body").combine_chunks()
    # many true pairs are written beside the database file (the system's temporary folder may be memory)
    path = connection.sql("select path from duckdb_databases() where database_name = current_database()").fetchall()
    folder = str(Path(path[0][0]).resolve().parent) if path and path[0][0] else None
    return AuditProbe(sample, bodies, shingling, threshold, folder)


def sampled_pairs(found: pa.Table) -> pa.Table:
    """Every pair of two sampled documents among ``found`` (:data:`AUDIT_PAIRS_SCHEMA`), as
    (``left_doc_id < right_doc_id``, ``jaccard``), ordered: for a probe of every document, all its
    true pairs. A sampled document is listed by the owner of its set with Jaccard 1, and a pair is
    taken from the owner of the earlier of the two in the sample."""
    with duckdb.connect() as connection:
        connection.register("found", found)
        return connection.sql(
            """
            select least(x.doc_id, y.doc_id) as left_doc_id, greatest(x.doc_id, y.doc_id) as right_doc_id, y.jaccard
            from found x
            join found y on y.sampled_doc_id = x.sampled_doc_id and y.sample_place > x.sample_place
            where x.jaccard = 1
            order by left_doc_id, right_doc_id
            """
        ).to_arrow_table()


def probe_pass(probe: AuditProbe, batches: Iterable[pa.RecordBatch]) -> AuditProbe:
    """Feed ``probe`` every (doc_id, body) batch: its own pass, where fingerprinting does not."""
    for batch in batches:
        probe.feed(batch.column(0), batch.column(1))
    return probe


def documents_pass(
    connection: duckdb.DuckDBPyConnection, documents: str, probe: AuditProbe, batch_size: int
) -> AuditProbe:
    """:func:`probe_pass` over every body of the ``documents`` table, ``batch_size`` at a time."""
    bodies = connection.sql(f"select doc_id, body from {documents}").to_arrow_reader(batch_size)
    return probe_pass(probe, bodies)


def audit_pairs_table(tables: Tables) -> str:
    return beside(tables.fingerprinted, AUDIT_PAIRS)
