"""What the input, pair, contract, recall and engine checks assert: plain functions of a DuckDB
connection and table names, each returning its result with a message that names what is wrong.
Tested by direct calls. The cluster checks are in ``cluster_rules.py``."""

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from ..core.pipeline.capabilities import CAPABILITIES
from ..core.audit.contract import contract_mismatches, contract_path_for, load_contract, settings_mismatch
from ..core.incremental.index_reports import one_shot_differences
from ..core.incremental.index_tables import IndexTables
from ..core.settings.presets import recall_shortfalls
from ..core.lsh.scurve import lsh_probability
from ..core.settings.model import Settings
from ..core.release.summary import duplicate_clusters, reason_counts
from ..core.storage.tables import Tables
from .results import check_result, counted, fetch_rows, warning_result


def doc_id_unique(connection: duckdb.DuckDBPyConnection, documents: str) -> AssetCheckResult:
    repeated = fetch_rows(
        connection,
        f"select doc_id, count(*) from {documents} group by doc_id having count(*) > 1 order by doc_id",
    )
    total = fetch_rows(connection, f"select count(*) from {documents}")[0][0]
    return check_result(
        [f"doc_id {doc_id!r} appears {n} times" for doc_id, n in repeated],
        f"{counted(total, 'document')}, all doc_id unique",
    )


def input_records_accounted(
    connection: duckdb.DuckDBPyConnection, input_records: int, documents: str, rejected: str
) -> AssetCheckResult:
    """Every input row is a document or a rejected row, never both, never neither."""
    kept, dropped, both = fetch_rows(
        connection,
        f"""
        select (select count(*) from {documents}), (select count(*) from {rejected}),
               (select count(*) from {documents} d semi join {rejected} r using (source_file, input_row))
        """,
    )[0]
    failures = []
    if kept + dropped != input_records:
        failures.append(
            f"{counted(input_records, 'input row')} but {counted(kept, 'document')} + {dropped} rejected"
        )
    if both:
        failures.append(f"{counted(both, 'input row')} {'is' if both == 1 else 'are'} both a document and rejected")
    return check_result(
        failures,
        f"{counted(input_records, 'input row')} = {counted(kept, 'document')} + {dropped} rejected",
        input_records=MetadataValue.int(input_records),
    )


def pairs_ordered_and_unique(connection: duckdb.DuckDBPyConnection, pairs: str) -> AssetCheckResult:
    unordered = fetch_rows(
        connection, f"select left_doc_id, right_doc_id from {pairs} where left_doc_id >= right_doc_id"
    )
    repeated = fetch_rows(
        connection,
        f"select left_doc_id, right_doc_id from {pairs} group by all having count(*) > 1",
    )
    total = fetch_rows(connection, f"select count(*) from {pairs}")[0][0]
    return check_result(
        [f"pair ({l}, {r}) is not left < right" for l, r in unordered]
        + [f"pair ({l}, {r}) appears more than once" for l, r in repeated],
        f"{counted(total, 'pair')}, each ordered left < right and unique",
    )


def duplicate_edges_meet_threshold(
    connection: duckdb.DuckDBPyConnection, duplicate_pairs: str, threshold: float
) -> AssetCheckResult:
    weak = connection.execute(
        f"select left_doc_id, right_doc_id, jaccard from {duplicate_pairs} where jaccard < ? "
        "order by jaccard",
        [threshold],
    ).fetchall()
    total, weakest = fetch_rows(connection, f"select count(*), min(jaccard) from {duplicate_pairs}")[0]
    return check_result(
        [f"edge ({l}, {r}) has Jaccard {j:.4f} < {threshold}" for l, r, j in weak],
        f"{counted(total, 'edge')}, none with Jaccard below {threshold}",
        weakest_jaccard=MetadataValue.float(float(weakest)) if weakest is not None else "no edges",
    )


def comparable_contract(input_path: Path, settings: dict) -> tuple[dict | None, str]:
    """The input's ``<name>.expected.json`` when it ships one written for this run's settings;
    otherwise None and why the run is not compared."""
    contract = load_contract(input_path)
    contract_file = str(contract_path_for(input_path))
    if contract is None:
        return None, f"no contract for this input ({contract_file} does not exist)"
    changed = settings_mismatch(contract, settings)
    if changed:
        described = ", ".join(f"{k}={got} (contract: {want})" for k, (want, got) in changed.items())
        return None, f"contract {contract_file} is for other settings: {described}"
    return contract, contract_file


def fixture_contract(
    connection: duckdb.DuckDBPyConnection,
    contract: dict,
    contract_file: str,
    manifest: str,
    scored_pairs: str,
    clusters: str,
) -> AssetCheckResult:
    """Compare the run's counts, pair reasons and duplicate clusters with ``contract``."""
    counts = {  # stored as doubles: counts back to integers, ratios as they are
        metric: int(value) if float(value).is_integer() else value
        for metric, value in fetch_rows(connection, f"select metric, value from {manifest}")
    }
    failures = contract_mismatches(
        contract, counts, reason_counts(connection, scored_pairs), duplicate_clusters(connection, clusters)
    )
    return check_result(failures, f"run matches {contract_file}", contract=contract_file)


def same_as_incremental(
    connection: duckdb.DuckDBPyConnection, one_shot: Tables, index: IndexTables
) -> AssetCheckResult | None:
    """The one-shot run's duplicate edges and clusters equal those the incremental batches found
    together; None when the two hold different documents, which makes them not comparable."""
    differences = one_shot_differences(connection, one_shot, index)
    if differences is None:
        return None
    edges = fetch_rows(connection, f"select count(*) from {one_shot.duplicate_pairs}")[0][0]
    batches = fetch_rows(connection, f"select count(*) from {index.batches}")[0][0]
    return check_result(
        differences,
        f"The incremental index's batches ({batches}) found the same {counted(edges, 'edge')} "
        "and the same clusters as this one-shot run.",
        batches=MetadataValue.int(batches),
        duplicate_edges=MetadataValue.int(edges),
    )


def _chance(settings: Settings) -> float:
    """The share of the pairs exactly at the threshold that the bands in use make candidates."""
    params = settings.sketch_params()
    return round(float(lsh_probability(settings.jaccard_threshold, params.bands, params.rows_per_band)), 4)


def _bands(settings: Settings) -> str:
    params = settings.sketch_params()
    return f"{params.bands} bands of {params.rows_per_band} rows"


def _recall_figures(name: str, figures: dict) -> str:
    return (
        f"{name} {figures['recall']} ({figures['found_pairs']} of {figures['true_pairs']} true pairs; "
        f"95% interval {figures['ci_low']}–{figures['ci_high']})"
    )


def recall_reaches_min_recall(summary: dict, settings: Settings, how_to_fix: Callable[[dict], str]) -> AssetCheckResult:
    """The recall the audit measured, over every true pair, over the near copies and in each
    Jaccard band, is at least min_recall. Below it: the figures that fall short, the bands in use,
    and the changes that make LSH find more, as ``how_to_fix`` writes them for the command that
    was run; the changes are in the result's metadata too (``more_recall``), for the run's summary."""
    shortfalls = recall_shortfalls(summary, settings.min_recall)
    failure, fix = None, None
    if shortfalls:
        skipped, banding_missed = _skipped_buckets(summary, settings)
        fix = settings.more_recall() if banding_missed else None
        bands = (
            f"LSH's {_bands(settings)} make {_chance(settings):.0%} of the pairs at J = {settings.jaccard_threshold} candidates. "
            + (
                f"With {', '.join(f'{name}: {json.dumps(value)}' for name, value in fix[0].items())} "
                f"({_bands(fix[1])}: {_chance(fix[1]):.0%}) it finds more. {how_to_fix(fix[0])}"
                if fix
                else "No other bands find more of them; recall_audit lists the missed pairs."
            )
        )
        failure = (
            f"{'; '.join(_recall_figures(name, figures) for name, figures in shortfalls)} "
            f"{'is' if len(shortfalls) == 1 else 'are'} below min_recall={settings.min_recall}: "
            + " ".join(part for part in (skipped, bands if banding_missed else "") if part)
        )
    return warning_result(
        failure,
        f"{_recall_figures('recall', summary)} reaches min_recall={settings.min_recall}, over the near "
        "copies and in every Jaccard band too",
        recall=MetadataValue.float(summary["recall"]),
        ci_low=MetadataValue.float(summary["ci_low"]),
        ci_high=MetadataValue.float(summary["ci_high"]),
        candidate_chance_at_threshold=MetadataValue.float(_chance(settings)),
        below_min_recall=MetadataValue.json({name: figures["recall"] for name, figures in shortfalls}),
        more_recall=MetadataValue.json(fix[0] if fix else {}),
    )


def _skipped_buckets(summary: dict, settings: Settings) -> tuple[str, bool]:
    """What the buckets hot_buckets: skip left out cost the recall, said ("" when none), and
    whether the pairs LSH's bands missed alone bring recall below min_recall: with most missed
    pairs in skipped buckets, more bands are no advice (issue 49: pages sharing a long footer,
    recall 0.0001, were told to use more bands)."""
    lost = summary.get("missed_sharing_a_bucket") or 0
    true, found = summary["true_pairs"], summary["found_pairs"]
    if settings.hot_buckets != "skip" or not lost:
        return "", True
    said = (
        f"{lost:,} of the {true - found:,} missed pairs shared a bucket that hot_buckets: skip left out of "
        f"the join (a bucket of more than max_bucket_size={settings.max_bucket_size:,} texts; they are in "
        "hot_buckets.csv): pages that shared text such as boilerplate makes near copies by Jaccard. "
        "More bands do not find those; a larger max_bucket_size joins them, at a cost that grows with "
        "the square of a bucket's texts."
    )
    return said, (found + lost) / true < settings.min_recall


def engine_matches_duckdb(
    engine: str, differences: dict[str, tuple[int, int]] | None, documents: int, max_documents: int
) -> AssetCheckResult:
    """The ``engine``'s candidate pairs, edges, clusters and survivors are the DuckDB engine's,
    row for row (``differences`` from ``core.audit.consistency``; None when not compared)."""
    if CAPABILITIES[engine].reference:
        description = f"engine {engine}: these tables are the reference others are compared with"
        return check_result([], description, compared=False)
    if differences is None:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=f"not compared: {documents:,} documents is above compare_up_to_documents="
            f"{max_documents:,} (of the engine resource), and comparing runs the DuckDB engine "
            "over them again on this node. Raise it to compare this corpus.",
            metadata={"compared": False},
        )
    failures = [
        f"{table}: {only_here:,} rows only on engine {engine}, {only_duckdb:,} only on duckdb"
        for table, (only_here, only_duckdb) in differences.items()
        if only_here or only_duckdb
    ]
    if failures:
        failures.append(f"re-run with engine: duckdb, and report the difference as a bug of engine {engine}")
    return check_result(
        failures,
        f"{', '.join(differences)}: the same rows on engine {engine} and on duckdb, both ways",
        compared=True,
        documents=MetadataValue.int(documents),
    )
