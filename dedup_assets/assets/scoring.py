from dagster import AssetExecutionContext, MetadataValue, asset

from ..core.stages import build_duplicate_pairs, build_scored_pairs
from ..core.summary import reason_counts
from ..core.tables import TableBuild
from ..errors import user_errors
from ..io_manager import TableRef
from ..settings import DedupSettings
from ._shared import GROUP, KINDS, lineage_for, markdown_preview, scalar, tables_of

PAIR_PREVIEW = "left_doc_id, right_doc_id, round(jaccard, 4) as jaccard, signature_overlap, reason"


def _describe_scored(connection, table: str) -> dict:
    reasons = reason_counts(connection, table)
    return {
        "accepted_pairs": MetadataValue.int(scalar(connection, f"select count(*) from {table} where is_duplicate")),
        "reasons": MetadataValue.md(
            "| reason | pairs |\n|---|---|\n" + "\n".join(f"| {r} | {n} |" for r, n in reasons.items())
        ),
        "preview": markdown_preview(connection, f"select {PAIR_PREVIEW} from {table}"),
    }


@asset(group_name=GROUP, kinds=KINDS | {"sql"})
def scored_pairs(
    context: AssetExecutionContext,
    dedup: DedupSettings,
    documents: TableRef,
    fingerprinted: TableRef,
    candidate_pairs: TableRef,
) -> TableBuild:
    """Every candidate pair with its exact shingle `jaccard`, its sketch `signature_overlap` and
    a decision. Only Jaccard >= `jaccard_threshold` makes a duplicate; the overlap is a diagnostic.

    `reason` is `jaccard_and_minhash`, `jaccard_match`, `minhash_only_rejected` or
    `below_jaccard_threshold`; `is_exact` marks identical normalized text. Only documents in a
    candidate pair are shingled again, after a memory estimate against `memory_budget_mb`.
    """
    lineage = lineage_for(
        "scored_pairs", dedup, documents=documents, fingerprinted=fingerprinted, candidate_pairs=candidate_pairs
    )
    with user_errors(), documents.connect() as connection:
        build = build_scored_pairs(
            connection, tables_of(documents), dedup.sketch_params(), dedup.thresholds(), dedup.memory_budget_mb
        )
    context.log.info(f"scored_pairs: shingled {build.metadata['reshingled_documents']:,} candidate documents again")
    build.lineage = lineage
    build.metadata = {
        "jaccard_threshold": MetadataValue.float(dedup.jaccard_threshold),
        "reshingled_documents": MetadataValue.int(build.metadata["reshingled_documents"]),
    }
    build.describe = _describe_scored
    return build


def _describe_duplicates(connection, table: str) -> dict:
    exact, cross = connection.execute(
        f"select count(*) filter (where is_exact), count(*) filter (where left_domain <> right_domain) from {table}"
    ).fetchall()[0]
    total = scalar(connection, f"select count(*) from {table}")
    return {
        "exact_duplicate_edges": MetadataValue.int(int(exact)),
        "near_duplicate_edges": MetadataValue.int(int(total - exact)),
        "cross_domain_edges": MetadataValue.int(int(cross)),
        "preview": markdown_preview(connection, f"select {PAIR_PREVIEW} from {table}"),
    }


@asset(group_name=GROUP, kinds=KINDS | {"sql"})
def duplicate_pairs(dedup: DedupSettings, scored_pairs: TableRef) -> TableBuild:
    """The accepted duplicate edges: scored pairs whose exact Jaccard met the threshold.
    `is_exact` separates identical normalized text (exact duplicates) from near duplicates."""
    build = build_duplicate_pairs(tables_of(scored_pairs))
    build.lineage = lineage_for("duplicate_pairs", dedup, scored_pairs=scored_pairs)
    build.describe = _describe_duplicates
    return build
