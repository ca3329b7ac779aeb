"""What each asset check asserts: plain functions of a DuckDB connection and table names, each
returning its result with a message that names what is wrong. Tested by direct calls."""

import json
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

from ..core.incremental import IndexTables, one_shot_differences
from ..core.store import rows_with_ids
from ..core.tables import Tables
from ..core.contract import contract_mismatches, contract_path_for, load_contract, settings_mismatch
from ..core.scurve import lsh_probability
from ..core.settings import Settings
from ..core.summary import duplicate_clusters, reason_counts
from ..core.text import Shingling
from ..core.jaccard import pair_jaccard

_SHOWN = 5


def _result(failures: list[str], passed_text: str, **metadata) -> AssetCheckResult:
    description = passed_text
    if failures:
        description = "; ".join(failures[:_SHOWN])
        if len(failures) > _SHOWN:
            description += f" (and {len(failures) - _SHOWN} more)"
    return AssetCheckResult(
        passed=not failures,
        severity=AssetCheckSeverity.ERROR,
        description=description,
        metadata={"problems": MetadataValue.int(len(failures)), **metadata},
    )


def _count(number: int, noun: str) -> str:
    """``1 pair``, ``2 pairs``."""
    return f"{number} {noun if number == 1 else noun + 's'}"


def _rows(connection: duckdb.DuckDBPyConnection, query: str) -> list[tuple]:
    return connection.execute(query).fetchall()


def doc_id_unique(connection: duckdb.DuckDBPyConnection, documents: str) -> AssetCheckResult:
    repeated = _rows(
        connection,
        f"select doc_id, count(*) from {documents} group by doc_id having count(*) > 1 order by doc_id",
    )
    total = _rows(connection, f"select count(*) from {documents}")[0][0]
    return _result(
        [f"doc_id {doc_id!r} appears {n} times" for doc_id, n in repeated],
        f"{_count(total, 'document')}, all doc_id unique",
    )


def input_records_accounted(
    connection: duckdb.DuckDBPyConnection, input_records: int, documents: str, rejected: str
) -> AssetCheckResult:
    """Every input row is a document or a rejected row, never both, never neither."""
    kept, dropped, both = _rows(
        connection,
        f"""
        select (select count(*) from {documents}), (select count(*) from {rejected}),
               (select count(*) from {documents} d semi join {rejected} r using (source_file, input_row))
        """,
    )[0]
    failures = []
    if kept + dropped != input_records:
        failures.append(
            f"{_count(input_records, 'input row')} but {_count(kept, 'document')} + {dropped} rejected"
        )
    if both:
        failures.append(f"{_count(both, 'input row')} {'is' if both == 1 else 'are'} both a document and rejected")
    return _result(
        failures,
        f"{_count(input_records, 'input row')} = {_count(kept, 'document')} + {dropped} rejected",
        input_records=MetadataValue.int(input_records),
    )


def pairs_ordered_and_unique(connection: duckdb.DuckDBPyConnection, pairs: str) -> AssetCheckResult:
    unordered = _rows(
        connection, f"select left_doc_id, right_doc_id from {pairs} where left_doc_id >= right_doc_id"
    )
    repeated = _rows(
        connection,
        f"select left_doc_id, right_doc_id from {pairs} group by all having count(*) > 1",
    )
    total = _rows(connection, f"select count(*) from {pairs}")[0][0]
    return _result(
        [f"pair ({l}, {r}) is not left < right" for l, r in unordered]
        + [f"pair ({l}, {r}) appears more than once" for l, r in repeated],
        f"{_count(total, 'pair')}, each ordered left < right and unique",
    )


def duplicate_edges_meet_threshold(
    connection: duckdb.DuckDBPyConnection, duplicate_pairs: str, threshold: float
) -> AssetCheckResult:
    weak = connection.execute(
        f"select left_doc_id, right_doc_id, jaccard from {duplicate_pairs} where jaccard < ? "
        "order by jaccard",
        [threshold],
    ).fetchall()
    total, weakest = _rows(connection, f"select count(*), min(jaccard) from {duplicate_pairs}")[0]
    return _result(
        [f"edge ({l}, {r}) has Jaccard {j:.4f} < {threshold}" for l, r, j in weak],
        f"{_count(total, 'edge')}, none with Jaccard below {threshold}",
        weakest_jaccard=MetadataValue.float(float(weakest)) if weakest is not None else "no edges",
    )


def every_document_in_one_cluster(
    connection: duckdb.DuckDBPyConnection, documents: str, clusters: str
) -> AssetCheckResult:
    twice = _rows(connection, f"select doc_id, count(*) from {clusters} group by doc_id having count(*) > 1")
    missing = _rows(connection, f"select doc_id from {documents} anti join {clusters} using (doc_id)")
    unknown = _rows(connection, f"select doc_id from {clusters} anti join {documents} using (doc_id)")
    counts = _rows(connection, f"select count(*), count(distinct cluster_id) from {clusters}")[0]
    return _result(
        [f"{doc_id} is in {_count(n, 'cluster')}" for doc_id, n in twice]
        + [f"{doc_id} is in no cluster" for (doc_id,) in missing]
        + [f"{doc_id} is clustered but not an input document" for (doc_id,) in unknown],
        f"{_count(counts[0], 'document')} in {_count(counts[1], 'cluster')}",
    )


def one_representative_per_cluster(connection: duckdb.DuckDBPyConnection, clusters: str) -> AssetCheckResult:
    wrong = _rows(
        connection,
        f"""
        select cluster_id, count(*) filter (where decision = 'kept_representative') as kept
        from {clusters} group by cluster_id having kept <> 1 order by cluster_id
        """,
    )
    total = _rows(connection, f"select count(distinct cluster_id) from {clusters}")[0][0]
    return _result(
        [f"{cluster_id} has {_count(kept, 'representative')}" for cluster_id, kept in wrong],
        f"{_count(total, 'cluster')}, one representative each",
    )


def representatives_account_for_input(
    connection: duckdb.DuckDBPyConnection, documents: str, clusters: str, deduped: str
) -> AssetCheckResult:
    inputs, kept, removed = _rows(
        connection,
        f"""
        select (select count(*) from {documents}),
               (select count(*) from {deduped}),
               (select count(*) from {clusters} where decision = 'removed_duplicate')
        """,
    )[0]
    mismatched = _rows(
        connection,
        f"""
        select count(*) from (
          (select doc_id from {deduped}
           except select doc_id from {clusters} where decision = 'kept_representative')
          union all
          (select doc_id from {clusters} where decision = 'kept_representative'
           except select doc_id from {deduped})
        )
        """,
    )[0][0]
    failures = []
    if kept + removed != inputs:
        failures.append(
            f"{_count(kept, 'representative')} + {removed} removed != {_count(inputs, 'input document')}"
        )
    if mismatched:
        failures.append(
            f"{_count(mismatched, 'document')} {'differs' if mismatched == 1 else 'differ'} between deduped_documents "
            "and the representatives in clusters"
        )
    return _result(
        failures,
        f"{_count(kept, 'representative')} + {removed} removed = {_count(inputs, 'input document')}",
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
        for metric, value in _rows(connection, f"select metric, value from {manifest}")
    }
    failures = contract_mismatches(
        contract, counts, reason_counts(connection, scored_pairs), duplicate_clusters(connection, clusters)
    )
    return _result(failures, f"run matches {contract_file}", contract=contract_file)


def same_as_incremental(
    connection: duckdb.DuckDBPyConnection, one_shot: Tables, index: IndexTables
) -> AssetCheckResult | None:
    """The one-shot run's duplicate edges and clusters equal those the incremental batches found
    together; None when the two hold different documents, which makes them not comparable."""
    differences = one_shot_differences(connection, one_shot, index)
    if differences is None:
        return None
    edges = _rows(connection, f"select count(*) from {one_shot.duplicate_pairs}")[0][0]
    batches = _rows(connection, f"select count(*) from {index.batches}")[0][0]
    return _result(
        differences,
        f"The incremental index's batches ({batches}) found the same {_count(edges, 'edge')} "
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


def recall_reaches_min_recall(summary: dict, settings: Settings, command: Callable[[dict], str]) -> AssetCheckResult:
    """The recall the audit measured is at least min_recall. Below it, one line: the figures, the
    bands in use, and the command (``command`` of the changes) that makes LSH find more."""
    figures = (
        f"recall {summary['recall']} ({summary['found_pairs']} of {summary['true_pairs']} true pairs; "
        f"95% interval {summary['ci_low']}–{summary['ci_high']})"
    )
    failure = None
    if summary["recall"] < settings.min_recall:
        fix = settings.more_recall()
        failure = (
            f"{figures} is below min_recall={settings.min_recall}: LSH's {_bands(settings)} make "
            f"{_chance(settings):.0%} of the pairs at J = {settings.jaccard_threshold} candidates. "
            + (
                f"With {', '.join(f'{name}: {json.dumps(value)}' for name, value in fix[0].items())} "
                f"({_bands(fix[1])}: {_chance(fix[1]):.0%}) it finds more: {command(fix[0])}"
                if fix
                else "No other bands find more of them; recall_audit lists the missed pairs."
            )
        )
    return _warning(
        failure,
        f"{figures} reaches min_recall={settings.min_recall}",
        recall=MetadataValue.float(summary["recall"]),
        ci_low=MetadataValue.float(summary["ci_low"]),
        ci_high=MetadataValue.float(summary["ci_high"]),
        candidate_chance_at_threshold=MetadataValue.float(_chance(settings)),
    )


def _warning(failure: str | None, passed_text: str, **metadata) -> AssetCheckResult:
    return AssetCheckResult(
        passed=failure is None,
        severity=AssetCheckSeverity.WARN,
        description=failure or passed_text,
        metadata=metadata,
    )


def largest_cluster_within(connection: duckdb.DuckDBPyConnection, clusters: str, max_cluster_size: int) -> AssetCheckResult:
    """No cluster has more than ``max_cluster_size`` documents: a giant cluster is usually a
    chain through shared boilerplate, not one page copied."""
    largest = _rows(
        connection,
        f"""
        select cluster_id, any_value(cluster_size) as size, any_value(representative_doc_id)
        from {clusters} where cluster_size > 1 group by cluster_id order by size desc, cluster_id limit {_SHOWN}
        """,
    )
    size = largest[0][1] if largest else 1
    over = [f"{cluster_id} has {size:,} documents" for cluster_id, size, _ in largest if size > max_cluster_size]
    failure = None
    if over:
        failure = (
            f"{'; '.join(over)}: more than max_cluster_size={max_cluster_size:,}. A cluster this large is "
            "usually documents chained through shared boilerplate; cluster_inspection.csv shows its "
            "chained members. cluster_mode 'star' removes only documents at or above the threshold "
            "with the representative; re-materialize clusters and everything downstream"
        )
    return _warning(
        failure,
        f"the largest cluster has {_count(size, 'document')}, within max_cluster_size={max_cluster_size:,}",
        largest_cluster_size=MetadataValue.int(int(size)),
        largest_clusters=MetadataValue.md(
            "\n".join(f"- {cluster_id}: {size:,} documents, keeps {kept}" for cluster_id, size, kept in largest)
            or "no multi-member cluster"
        ),
    )


def no_chained_members(connection: duckdb.DuckDBPyConnection, clusters: str, threshold: float) -> AssetCheckResult:
    """No document is removed as a duplicate of a representative it is below the threshold
    with (it joined the cluster through other members)."""
    worst = _rows(
        connection,
        f"""
        select cluster_id, any_value(cluster_size), count(*) filter (where chained) as chained,
               min(jaccard_to_representative) as weakest
        from {clusters} where cluster_size > 1 group by cluster_id having chained > 0
        order by chained desc, weakest, cluster_id
        """,
    )
    total = sum(row[2] for row in worst)
    failure = None
    if total:
        failure = (
            f"{_count(total, 'document')} in {_count(len(worst), 'cluster')} "
            f"{'is' if total == 1 else 'are'} removed with Jaccard below {threshold} with the kept "
            f"representative, chained to it through other members (worst: {worst[0][0]}, "
            f"{worst[0][2]} of {worst[0][1]}, down to {worst[0][3]:.4f}). cluster_mode 'star' keeps them "
            "apart; re-materialize clusters and everything downstream"
        )
    return _warning(
        failure,
        f"every removed document is at or above Jaccard {threshold} with its representative",
        chained_members=MetadataValue.int(int(total)),
        worst_clusters=MetadataValue.md(
            "\n".join(
                f"- {cluster_id}: {chained} of {size} chained, down to Jaccard {weakest:.4f}"
                for cluster_id, size, chained, weakest in worst[:_SHOWN]
            )
            or "none"
        ),
    )


def removals_meet_threshold(
    connection: duckdb.DuckDBPyConnection, tables: Tables, shingling: Shingling, hash_scheme: str, threshold: float,
    cluster_mode: str,
) -> AssetCheckResult:
    """Every removed document's exact Jaccard with its representative, computed again from the
    two bodies, is at least ``threshold``; with cluster_mode components a document below it
    must be marked chained, and only such a one. Two copies of one text (one content hash) count
    as 1, as in scored_pairs."""
    removed = connection.sql(
        f"""
        select c.doc_id, c.representative_doc_id, l.content_hash = r.content_hash as same_text, c.chained
        from {tables.clusters} c
        join {tables.fingerprinted} l on l.doc_id = c.doc_id
        join {tables.fingerprinted} r on r.doc_id = c.representative_doc_id
        where c.decision = 'removed_duplicate'
        order by c.doc_id
        """
    ).to_arrow_table()
    jaccard = np.ones(removed.num_rows)
    scored = ~removed.column(2).to_numpy(zero_copy_only=False).astype(bool)
    if scored.any():
        # each body once, and none of a removal that is a copy of its representative's text
        pairs = removed.filter(pa.array(scored))
        involved = pc.unique(pa.concat_arrays([pairs.column(0).combine_chunks(), pairs.column(1).combine_chunks()]))
        bodies = rows_with_ids(connection, tables.documents, involved, ["body"])
        doc_ids = bodies.column(0).combine_chunks()
        jaccard[scored] = pair_jaccard(
            bodies.column(1),
            pc.index_in(pairs.column(0), value_set=doc_ids).to_numpy(),
            pc.index_in(pairs.column(1), value_set=doc_ids).to_numpy(),
            shingling,
            hash_scheme,
        )
    chained = removed.column(3).to_numpy(zero_copy_only=False).astype(bool)
    below = jaccard < threshold
    wrong = below if cluster_mode == "star" else below != chained
    failures = []
    for i in np.flatnonzero(wrong):
        doc_id, kept = removed.column(0)[i], removed.column(1)[i]
        if cluster_mode == "star":
            failures.append(f"{doc_id} is removed for {kept} at Jaccard {jaccard[i]:.4f} < {threshold}")
        elif below[i]:
            failures.append(f"{doc_id} is removed for {kept} at Jaccard {jaccard[i]:.4f} < {threshold} but not marked chained")
        else:
            failures.append(f"{doc_id} is marked chained but is at Jaccard {jaccard[i]:.4f} with {kept}")
    if failures:  # a broken promise of the clustering, not a fault of the data
        failures[0] = (
            f"{cluster_mode} clusters broke their rule: re-materialize clusters, and report it if it recurs. {failures[0]}"
        )
    passed = f"{_count(removed.num_rows, 'removed document')}, each at or above Jaccard {threshold} with its representative"
    if cluster_mode != "star" and below.any():
        passed = (
            f"{_count(removed.num_rows, 'removed document')}: {int((~below).sum())} at or above Jaccard {threshold} with "
            f"the representative, {int(below.sum())} below it and marked chained (see no_chained_members)"
        )
    return _result(
        failures,
        passed,
        weakest_jaccard=MetadataValue.float(float(jaccard.min())) if len(jaccard) else "nothing removed",
    )


def engine_matches_duckdb(
    engine: str, differences: dict[str, tuple[int, int]] | None, documents: int, max_documents: int
) -> AssetCheckResult:
    """The ``engine``'s candidate pairs, edges, clusters and survivors are the DuckDB engine's,
    row for row (``differences`` from ``core.consistency``; None when not compared)."""
    if engine == "duckdb":
        return _result([], "engine duckdb: these tables are the DuckDB engine's own", compared=False)
    if differences is None:
        return AssetCheckResult(
            passed=False,
            severity=AssetCheckSeverity.WARN,
            description=f"not compared: {documents:,} documents is above compare_up_to_documents="
            f"{max_documents:,} (of the ray_engine resource), and comparing runs the DuckDB engine "
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
    return _result(
        failures,
        f"{', '.join(differences)}: the same rows on engine {engine} and on duckdb, both ways",
        compared=True,
        documents=MetadataValue.int(documents),
    )
