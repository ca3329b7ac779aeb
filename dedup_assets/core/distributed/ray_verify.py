"""The ray engine's ``scored_pairs`` and ``duplicate_pairs``: exact Jaccard from the bodies of the
pairs LSH found, their first copies' scores for the others, as ``verify/pairs.py`` decides."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.data

from ..sketch import kernels
from ..verify.jaccard import pair_jaccard
from ..pipeline.step_params import SketchParams, Thresholds
from ..sketch.fingerprints import list_matrix
from ..storage.store import TableBuild
from ..verify.pairs import decided_pairs
from .datasets import (
    POSITION,
)
from .ray_tables import (
    PAIR_SCHEMA,
    SCORED_SCHEMA,
    AtPositions,
    RayTables,
    arrow_map,
    column_or_nulls,
    kept,
    ordered_pairs,
    renamed,
    use_task_cpus,
)

# what verification measures of a pair, which the acceptance rule reads
MEASURED_FIELDS = [SCORED_SCHEMA.field(name) for name in ("jaccard", "signature_overlap", "is_exact")]


def _pair_scores(tables: RayTables, params: SketchParams) -> ray.data.Dataset:
    """Exact Jaccard, signature overlap and content equality of every pair LSH found. Each
    side's columns are taken in place by its position (``AtPositions``): first both
    signatures, which give the overlap and are dropped, then both bodies, which give the
    Jaccard. Only the pairs move, carrying at most one side's signature or body; the documents
    never do."""
    partitions = tables.partitions
    positions = tables.read("fingerprinted", ["doc_id", POSITION])

    def side_positions(side: str) -> ray.data.Dataset:
        return renamed(positions, {"doc_id": f"{side}_doc_id", POSITION: f"{side}_position"})

    pairs = (
        kept(tables.read("candidate_pairs", ["left_doc_id", "right_doc_id", "found_by"]), lambda b: pc.equal(b["found_by"], "lsh"))
        .select_columns(["left_doc_id", "right_doc_id"])
        .join(side_positions("left"), "inner", partitions, on=("left_doc_id",))
        .join(side_positions("right"), "inner", partitions, on=("right_doc_id",))
    )

    def at(side: str) -> Callable[[pa.Table], pa.Table]:  # keyed by that side's position
        return lambda part: part.append_column(POSITION, part[f"{side}_position"])

    def take(keyed: ray.data.Dataset, side: str, table: str, columns: list[str], then) -> ray.data.Dataset:
        def named(part: pa.Table) -> pa.Table:
            part = part.drop_columns([POSITION])
            return then(part.rename_columns([f"{side}_{name}" if name in columns else name for name in part.column_names]))

        return AtPositions(keyed).take(tables, table, columns, named)

    sketch = ["shingle_count", "signature", "content_hash"]

    def overlap(batch: pa.Table) -> pa.Table:
        count = batch.num_rows
        rows = np.arange(count, dtype=np.int64)
        signatures = np.concatenate([list_matrix(batch["left_signature"]), list_matrix(batch["right_signature"])])
        return batch.drop_columns([f"{side}_{name}" for side in ("left", "right") for name in ("signature", "content_hash")]).append_column(
            "signature_overlap", pa.array(kernels.pair_overlap_kernel(signatures, rows, rows + count))
        ).append_column("is_exact", pc.equal(batch["left_content_hash"], batch["right_content_hash"]))

    def score(batch: pa.Table) -> pa.Table:
        use_task_cpus()
        count = batch.num_rows
        rows = np.arange(count, dtype=np.int64)
        texts = pa.concat_arrays([batch[f"{side}_body"].combine_chunks().cast(pa.large_string()) for side in ("left", "right")])
        counts = np.concatenate([batch["left_shingle_count"].to_numpy(), batch["right_shingle_count"].to_numpy()])
        return pa.table(
            {
                "left_doc_id": batch["left_doc_id"],
                "right_doc_id": batch["right_doc_id"],
                "jaccard": pair_jaccard(texts, rows, rows + count, params.shingling, params.hash_scheme, counts),
                "signature_overlap": batch["signature_overlap"],
                "is_exact": batch["is_exact"],
            }
        )

    # each step inside the take before it: see AtPositions.take
    signed = take(
        take(arrow_map(pairs, at("left")), "left", "fingerprinted", sketch, at("right")),
        "right", "fingerprinted", sketch, lambda part: at("left")(overlap(part)),
    )
    return take(take(signed, "left", "documents", ["body"], at("right")), "right", "documents", ["body"], score)


def scored_pairs(tables: RayTables, params: SketchParams, thresholds: Thresholds) -> TableBuild:
    """``scored_pairs``: the candidates scored as ``sql/scored_pairs.sql`` scores them, and decided by
    the DuckDB engine's own rule (``sql/pair_decision.sql``, batch by batch)."""
    partitions = tables.partitions
    candidates = tables.read("candidate_pairs")
    copies = tables.read("first_copies")

    def first_of(dataset: ray.data.Dataset, side: str) -> ray.data.Dataset:
        return dataset.join(
            renamed(copies, {"doc_id": f"{side}_doc_id", "first_copy_doc_id": f"{side}_first"}),
            "left_outer",
            partitions,
            on=(f"{side}_doc_id",),
        )

    def score_keys(batch: pa.Table) -> pa.Table:
        via_copy = pc.equal(batch["found_by"], "lsh_via_copy")
        firsts = [column_or_nulls(batch, f"{side}_first", pa.string()) for side in ("left", "right")]
        left = pc.if_else(pc.and_(via_copy, pc.is_valid(firsts[0])), firsts[0], batch["left_doc_id"])
        right = pc.if_else(pc.and_(via_copy, pc.is_valid(firsts[1])), firsts[1], batch["right_doc_id"])
        low, high = ordered_pairs(left, right)
        return batch.select(PAIR_SCHEMA.names).append_column("score_left", low).append_column("score_right", high)

    if not candidates.count():
        tables.write("scored_pairs", ray.data.from_arrow(SCORED_SCHEMA.empty_table()), SCORED_SCHEMA)
        return tables.view("scored_pairs")
    # joins with a side that has no rows are left out (see candidate_pairs)
    keyed = arrow_map(first_of(first_of(candidates, "left"), "right") if copies.count() else candidates, score_keys)
    if candidates.filter(expr="found_by == 'lsh'").count():
        scores = renamed(_pair_scores(tables, params), {"left_doc_id": "score_left", "right_doc_id": "score_right"})
        keyed = keyed.join(scores, "left_outer", partitions, on=("score_left", "score_right"))

    def decide(batch: pa.Table) -> pa.Table:
        # the measured columns, null where a pair was not measured, then the one acceptance rule
        measured = pa.table(
            {
                **{name: batch[name] for name in PAIR_SCHEMA.names},
                **{field.name: column_or_nulls(batch, field.name, field.type) for field in MEASURED_FIELDS},
            }
        )
        return decided_pairs(measured, thresholds).cast(SCORED_SCHEMA)

    scored = arrow_map(keyed, decide)
    tables.write("scored_pairs", scored, SCORED_SCHEMA)
    return tables.view("scored_pairs")


def duplicate_pairs(tables: RayTables) -> TableBuild:
    """The accepted edges, in pair order."""
    tables.write("duplicate_pairs", tables.read("scored_pairs").filter(expr="is_duplicate"), SCORED_SCHEMA)
    return tables.view("duplicate_pairs")
