"""The ray engine's ``scored_pairs`` and ``duplicate_pairs`` on Daft (its Ray runner, on the run's
Ray session): exact Jaccard from the bodies of the pairs LSH found, their first copies' scores for
the others, as ``verify/pairs.py`` decides. Daft's joins move the pairs to each side's sketch
and body; our functions score and decide each batch."""

from __future__ import annotations

from pathlib import Path

import daft
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from daft import col

from ..pipeline.step_params import SketchParams, Thresholds
from ..sketch import kernels
from ..sketch.fingerprints import list_matrix
from ..storage.store import TableBuild
from ..verify.jaccard import pair_jaccard
from ..verify.pairs import decided_pairs
from .daft_tables import frame, hash_joined, join_partitions, mapped_batches, pair_ends, rows_among, scratch_folder, staged, write_frames
from .datasets import table_rows
from .ray_tables import PAIR_SCHEMA, SCORED_SCHEMA, RayTables, ordered_pairs

# what verification measures of a pair, which the acceptance rule reads
MEASURED_FIELDS = [SCORED_SCHEMA.field(name) for name in ("jaccard", "signature_overlap", "is_exact")]
# about the bytes of bodies one Daft query of verification carries: the pairs are verified in
# slices, by the hash of both ids. In one query, 800 pages of 25 KB in one LSH group
# (269,884 pairs, 13 GB of bodies carried) grew a Daft worker to 19 GB, and Ray's memory monitor
# killed it; in slices of this size the largest worker peaked at 6.5 GB
SLICE_BYTES = 2**30


def _sides(pairs: daft.DataFrame, table: daft.DataFrame, columns: list[str], partitions: int) -> daft.DataFrame:
    """``pairs`` with ``columns`` of ``table`` for each side, named ``left_<column>`` and
    ``right_<column>``; pairs with a side missing from ``table`` are left out."""
    for side in ("left", "right"):
        named = table.select(col("doc_id").alias(f"{side}_doc_id"), *[col(name).alias(f"{side}_{name}") for name in columns])
        pairs = hash_joined(pairs, named, f"{side}_doc_id", partitions)
    return pairs


def _lsh_pairs(tables: RayTables) -> daft.DataFrame:
    pairs = frame(tables.root, "candidate_pairs", ["left_doc_id", "right_doc_id", "found_by"])
    return pairs.where(col("found_by") == "lsh").select("left_doc_id", "right_doc_id")


def _needed(tables: RayTables, scratch: Path) -> tuple[daft.DataFrame, daft.DataFrame]:
    """(sketches, bodies): the ``fingerprinted`` and ``documents`` columns verification reads, of
    the documents of an LSH pair only, staged in ``scratch``: the pairs' ids are broadcast to
    the tables' files, so the tables stay where they lie (a hash join of the pairs with the whole
    tables moved 1M documents' signatures and bodies between the nodes, in every slice). The ids
    are the pairs' ends as read, a document once per pair: a semi-join keeps a row once however
    often its key comes, and making them distinct first (a grouping, staged) took 6–12 s at 1M
    on two nodes, where the repeats cost the signatures' staging 0.4 s."""
    ends = pair_ends(_lsh_pairs(tables))
    count = 2 * table_rows(tables.root, "candidate_pairs")  # no fewer than the ends: LSH pairs are among them
    sketch = frame(tables.root, "fingerprinted", ["doc_id", "shingle_count", "signature", "content_hash"])
    bodies = frame(tables.root, "documents", ["doc_id", "body"])
    return tuple(
        staged(scratch, name, rows_among(table, ends, "doc_id", count)) for name, table in (("sketches", sketch), ("bodies", bodies))
    )


def _slices(tables: RayTables, bodies: daft.DataFrame, partitions: int) -> int:
    """How many slices verification takes: the bytes of the bodies the LSH pairs carry over
    SLICE_BYTES (each pair's documents' body lengths)."""
    lengths = bodies.select(col("doc_id"), col("body").length_bytes().alias("bytes"))
    ends = pair_ends(_lsh_pairs(tables))
    carried = hash_joined(ends, lengths, "doc_id", partitions).sum("bytes").to_pydict()["bytes"][0] or 0
    return max(1, -(-carried // SLICE_BYTES))


def _in_slice(left: str, right: str, index: int, slices: int) -> daft.Expression:
    # by both ids, so that the pairs of one document (a dense group's hub) spread over the slices
    return col(left).hash(seed=col(right).hash()) % slices == index


OVERLAP_SCHEMA = pa.schema(
    [
        ("left_doc_id", pa.string()),
        ("right_doc_id", pa.string()),
        ("left_shingle_count", pa.int32()),
        ("right_shingle_count", pa.int32()),
        ("signature_overlap", pa.float64()),
        ("is_exact", pa.bool_()),
    ]
)
SCORES_SCHEMA = pa.schema([("score_left", pa.string()), ("score_right", pa.string()), *MEASURED_FIELDS])


def _pair_scores(
    params: SketchParams, pairs: daft.DataFrame, sketch: daft.DataFrame, bodies: daft.DataFrame, partitions: int
) -> daft.DataFrame:
    """Exact Jaccard, signature overlap and content equality of LSH ``pairs``, keyed
    ``score_left``, ``score_right``: first both signatures (``sketch``), which give the overlap
    and are dropped, then both bodies, which give the Jaccard; each join in ``partitions``."""

    def overlap(batch: pa.Table) -> pa.Table:
        count = batch.num_rows
        rows = np.arange(count, dtype=np.int64)
        signatures = np.concatenate([list_matrix(batch["left_signature"]), list_matrix(batch["right_signature"])])
        return batch.append_column(
            "signature_overlap", pa.array(kernels.pair_overlap_kernel(signatures, rows, rows + count))
        ).append_column("is_exact", pc.equal(batch["left_content_hash"], batch["right_content_hash"]))

    def score(batch: pa.Table) -> pa.Table:
        count = batch.num_rows
        rows = np.arange(count, dtype=np.int64)
        texts = pa.concat_arrays([batch[f"{side}_body"].combine_chunks().cast(pa.large_string()) for side in ("left", "right")])
        counts = np.concatenate([batch["left_shingle_count"].to_numpy(), batch["right_shingle_count"].to_numpy()])
        return pa.table(
            {
                "score_left": batch["left_doc_id"],
                "score_right": batch["right_doc_id"],
                "jaccard": pair_jaccard(texts, rows, rows + count, params.shingling, params.hash_scheme, counts),
                "signature_overlap": batch["signature_overlap"],
                "is_exact": batch["is_exact"],
            }
        )

    sides = ["shingle_count", "signature", "content_hash"]
    signed = mapped_batches(_sides(pairs, sketch, sides, partitions), overlap, OVERLAP_SCHEMA)
    return mapped_batches(_sides(signed, bodies, ["body"], partitions), score, SCORES_SCHEMA)


KEYED_SCHEMA = PAIR_SCHEMA.append(pa.field("score_left", pa.string())).append(pa.field("score_right", pa.string()))


def scored_pairs(tables: RayTables, params: SketchParams, thresholds: Thresholds) -> TableBuild:
    """``scored_pairs``: the candidates scored as ``sql/scored_pairs.sql`` scores them, and decided by
    the DuckDB engine's own rule (``sql/pair_decision.sql``, batch by batch)."""
    with scratch_folder(tables.root, "verify") as scratch:  # the pairs' sketches and bodies
        _scored_pairs(tables, params, thresholds, scratch)
    return tables.view("scored_pairs")


def _scored_pairs(tables: RayTables, params: SketchParams, thresholds: Thresholds, scratch: Path) -> None:
    candidates = frame(tables.root, "candidate_pairs", PAIR_SCHEMA.names)
    copies = frame(tables.root, "first_copies")
    partitions = join_partitions()
    for side in ("left", "right"):
        firsts = copies.select(col("doc_id").alias(f"{side}_doc_id"), col("first_copy_doc_id").alias(f"{side}_first"))
        candidates = hash_joined(candidates, firsts, f"{side}_doc_id", partitions, how="left")

    def score_keys(batch: pa.Table) -> pa.Table:
        # an lsh_via_copy pair takes the score of its first copies' pair
        via_copy = pc.equal(batch["found_by"], "lsh_via_copy")
        left, right = (
            pc.if_else(pc.and_(via_copy, pc.is_valid(batch[f"{side}_first"])), batch[f"{side}_first"], batch[f"{side}_doc_id"])
            for side in ("left", "right")
        )
        low, high = ordered_pairs(left, right)
        return batch.select(PAIR_SCHEMA.names).append_column("score_left", low).append_column("score_right", high)

    keyed = mapped_batches(candidates, score_keys, KEYED_SCHEMA)

    def decide(batch: pa.Table) -> pa.Table:
        # the measured columns, null where a pair was not measured, then the one acceptance rule
        return decided_pairs(batch.select([*PAIR_SCHEMA.names, *(field.name for field in MEASURED_FIELDS)]), thresholds)

    def sliced(index: int, slices: int) -> daft.DataFrame:
        # a measured pair's score keys are its ids, in order: both sides of the join in one slice
        in_slice = _lsh_pairs(tables).where(_in_slice("left_doc_id", "right_doc_id", index, slices))
        scores = _pair_scores(params, in_slice, sketches, bodies, partitions)
        keys = ["score_left", "score_right"]
        measured = hash_joined(keyed.where(_in_slice(*keys, index, slices)), scores, keys, partitions, how="left")
        return mapped_batches(measured, decide, SCORED_SCHEMA)

    sketches, bodies = _needed(tables, scratch)
    slices = _slices(tables, bodies, partitions)
    write_frames(tables.root, "scored_pairs", [sliced(index, slices) for index in range(slices)], SCORED_SCHEMA)


def duplicate_pairs(tables: RayTables) -> TableBuild:
    """The accepted edges, in pair order."""
    write_frames(tables.root, "duplicate_pairs", [frame(tables.root, "scored_pairs").where(col("is_duplicate"))], SCORED_SCHEMA)
    return tables.view("duplicate_pairs")
