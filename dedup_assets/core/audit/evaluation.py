"""Evaluation against labels a user supplies: which pairs are duplicates, and which documents
belong together.

A labels file is a CSV recognised by its header: ``left_doc_id,right_doc_id,label`` (label 1: a
duplicate pair, 0: not) or ``doc_id,cluster_label`` (documents with one label belong to one
cluster). ``labels_path`` names one such file or a folder of them. A pair is *predicted* a
duplicate when its two documents are in one cluster, which is what deduplication acts on.

- Pair labels give precision, recall and F1 over the labelled pairs.
- Cluster labels give the adjusted Rand index of the clusters against the labels, with the
  pair counts behind it.

Labels naming a doc_id that is not in the input are counted and left out. Every pair on which
the pipeline and the labels disagree is listed, with its exact Jaccard, up to ``ERRORS_LISTED``.
"""

from __future__ import annotations

import csv
import math
from fractions import Fraction
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..read import InputError, file_sha256
from ..read.ingest import document_bodies
from ..storage.store import TableBuild, read_lineage
from ..storage.tables import Tables, sql
from ..text.normalize import Shingling
from ..verify.jaccard import exact_jaccard

PAIR_COLUMNS = ("left_doc_id", "right_doc_id", "label")
CLUSTER_COLUMNS = ("doc_id", "cluster_label")
# disagreeing pairs listed in the table and evaluation_errors.csv; the summary counts them all
ERRORS_LISTED = 100_000
# documents of one label or one cluster paired when listing: enough pairs to fill the list
MEMBERS_PAIRED = math.isqrt(2 * ERRORS_LISTED) + 2
# the lineage entry of the evaluation table that holds the summary (evaluation.json)
EVALUATION_SUMMARY = "evaluation_summary"
ERROR_SCHEMA = pa.schema(
    [
        ("left_doc_id", pa.string()),
        ("right_doc_id", pa.string()),
        ("labels", pa.string()),  # which labels: pair or cluster
        ("error", pa.string()),  # false_positive: one cluster, labels say apart; false_negative: the reverse
        ("left_cluster_id", pa.string()),
        ("right_cluster_id", pa.string()),
        ("jaccard", pa.float64()),
    ]
)


@dataclass(frozen=True)
class Labels:
    """Every labels file read: pair labels and cluster labels, each possibly empty."""

    pairs: list[tuple[str, str, int]] = field(default_factory=list)
    clusters: list[tuple[str, str]] = field(default_factory=list)
    files: list[dict] = field(default_factory=list)


def read_labels(path: Path) -> Labels:
    """The labels of one file or of every ``.csv`` file of a folder. A file that is not a
    labels file, a bad label or a pair labelled twice both ways is an error naming the file and
    line."""
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".csv" and not p.name.startswith("."))
        if not files:
            raise InputError(f"{path}: the labels folder holds no .csv file. Put the labels files in it, or set labels_path to one file.")
    elif path.is_file():
        files = [path]
    else:
        raise InputError(f"{path}: no such labels file or folder. Fix DEDUP_LABELS (labels_path), or unset it to run without labels.")
    pairs, clusters, described = [], [], []
    for file in files:
        kind, rows = _read_file(file)
        (pairs if kind == "pair" else clusters).extend(rows)
        described.append({"path": str(file), "labels": kind, "rows": len(rows), "sha256": file_sha256(file)})
    return Labels(_one_label_per_pair(pairs, files), _one_label_per_document(clusters), described)


def _read_file(file: Path) -> tuple[str, list]:
    with file.open(newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = [name.strip() for name in next(reader, [])]
        if header[:3] == list(PAIR_COLUMNS) and len(header) == 3:
            kind, width = "pair", 3
        elif header[:2] == list(CLUSTER_COLUMNS) and len(header) == 2:
            kind, width = "cluster", 2
        else:
            raise InputError(
                f"{file}: the header is {','.join(header) or 'empty'}; a labels file has the header "
                f"{','.join(PAIR_COLUMNS)} (pair labels) or {','.join(CLUSTER_COLUMNS)} (cluster labels)."
            )
        rows = []
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != width or not all(cell.strip() for cell in row):
                raise InputError(f"{file}, line {line}: expected {width} non-empty values ({','.join(header)}), got {row!r}.")
            cells = [cell.strip() for cell in row]
            if kind == "pair":
                if cells[2] not in ("0", "1"):
                    raise InputError(f"{file}, line {line}: label must be 1 (duplicates) or 0 (not), got {cells[2]!r}.")
                if cells[0] == cells[1]:
                    raise InputError(f"{file}, line {line}: a document is labelled against itself ({cells[0]!r}); remove the line.")
                rows.append((*sorted(cells[:2]), int(cells[2]), file, line))
            else:
                rows.append((cells[0], cells[1], file, line))
    return kind, rows


def _one_label_per_pair(rows: list, files: list[Path]) -> list[tuple[str, str, int]]:
    seen: dict[tuple[str, str], tuple] = {}
    for left, right, label, file, line in rows:
        earlier = seen.setdefault((left, right), (label, file, line))
        if earlier[0] != label:
            raise InputError(
                f"{file}, line {line}: the pair ({left}, {right}) is labelled {label}, but {earlier[1]}, "
                f"line {earlier[2]} labels it {earlier[0]}. Keep one label per pair."
            )
    return sorted((left, right, label) for (left, right), (label, _, _) in seen.items())


def _one_label_per_document(rows: list) -> list[tuple[str, str]]:
    seen: dict[str, tuple] = {}
    for doc_id, label, file, line in rows:
        earlier = seen.setdefault(doc_id, (label, file, line))
        if earlier[0] != label:
            raise InputError(
                f"{file}, line {line}: {doc_id} has cluster_label {label!r}, but {earlier[1]}, line "
                f"{earlier[2]} gives it {earlier[0]!r}. Give each document one cluster label."
            )
    return sorted((doc_id, label) for doc_id, (label, _, _) in seen.items())


def _pairs(count: int) -> int:
    return count * (count - 1) // 2


def adjusted_rand_index(together: int, same_label: int, same_cluster: int, labelled: int) -> float | None:
    """Hubert and Arabie's adjusted Rand index from pair counts: pairs together in both
    partitions, pairs with one label, pairs in one cluster, of ``labelled`` documents. None
    for fewer than two documents. In exact integers: with millions of labels the products
    outgrow a float's precision. When it cannot be adjusted (all singletons, or one cluster, in
    both partitions) the two agree on every pair: 1.0."""
    if labelled < 2:
        return None
    pairs = _pairs(labelled)
    # (together - expected) / (largest - expected), with expected = same_label * same_cluster / pairs
    # and largest = (same_label + same_cluster) / 2, both scaled by 2 * pairs
    numerator = 2 * (together * pairs - same_label * same_cluster)
    denominator = (same_label + same_cluster) * pairs - 2 * same_label * same_cluster
    return 1.0 if denominator == 0 else float(Fraction(numerator, denominator))


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def build_evaluation(
    connection: duckdb.DuckDBPyConnection, tables: Tables, labels: Labels, shingling: Shingling, hash_scheme: str
) -> tuple[pa.Table, dict]:
    """The pairs on which the clusters and the labels disagree (at most ``ERRORS_LISTED``, each
    with its exact Jaccard), and the summary: the figures, per kind of label, with the counts
    behind them."""
    connection.register("pair_labels", pa.table({
        "left_doc_id": pa.array([row[0] for row in labels.pairs], pa.string()),
        "right_doc_id": pa.array([row[1] for row in labels.pairs], pa.string()),
        "label": pa.array([row[2] for row in labels.pairs], pa.int8()),
    }))
    connection.register("cluster_labels", pa.table({
        "doc_id": pa.array([row[0] for row in labels.clusters], pa.string()),
        "cluster_label": pa.array([row[1] for row in labels.clusters], pa.string()),
    }))
    try:
        summary = {"labels_files": labels.files}
        pair_counts = dict(zip(*_columns(connection.sql(sql("evaluation_pair_counts", tables)))))
        summary["pair_labels"] = _pair_figures(pair_counts, len(labels.pairs))
        cluster_counts = dict(zip(*_columns(connection.sql(sql("evaluation_cluster_counts", tables)))))
        summary["cluster_labels"] = _cluster_figures(cluster_counts, len(labels.clusters))
        errors = connection.sql(sql("evaluation_errors", tables), params=[ERRORS_LISTED, MEMBERS_PAIRED]).to_arrow_table()
        connection.register("disagreements", errors.append_column("position", pa.array(range(errors.num_rows))))
        sides = [errors.column(side).combine_chunks() for side in ("left_doc_id", "right_doc_id")]
        involved = pc.unique(pa.concat_arrays(sides))
        connection.register("error_documents", document_bodies(connection, tables.documents, involved))
        bodies = connection.sql(sql("evaluation_error_bodies", tables)).to_arrow_table()
    finally:
        for name in ("pair_labels", "cluster_labels", "disagreements", "error_documents"):
            connection.unregister(name)
    jaccard = exact_jaccard(bodies.column(0).combine_chunks(), bodies.column(1).combine_chunks(), shingling, hash_scheme)
    errors = errors.append_column("jaccard", pa.array(jaccard, pa.float64())).cast(ERROR_SCHEMA)
    disagreements = summary["pair_labels"]["disagreeing_pairs"] + summary["cluster_labels"]["disagreeing_pairs"]
    evaluated = summary["pair_labels"]["evaluated"] or summary["cluster_labels"]["evaluated"]
    summary = {
        "evaluated": evaluated,
        "not_evaluated_because": None if evaluated else (
            "no labels: set DEDUP_LABELS (labels_path) to a labels CSV" if not labels.files
            else "no labelled doc_id is in the input (pair labels need both documents; cluster labels two or more)"
        ),
        "precision": summary["pair_labels"]["precision"],
        "recall": summary["pair_labels"]["recall"],
        "f1": summary["pair_labels"]["f1"],
        "adjusted_rand_index": summary["cluster_labels"]["adjusted_rand_index"],
        **summary,
        "disagreeing_pairs": disagreements,
        "disagreeing_pairs_listed": errors.num_rows,
        "disagreeing_pairs_cap": ERRORS_LISTED,
    }
    return errors, summary


def _columns(relation: duckdb.DuckDBPyRelation) -> tuple[list[str], list]:
    return relation.columns, list(relation.fetchall()[0])


def _pair_figures(counts: dict, labelled: int) -> dict:
    tp, fp, fn = counts["true_positives"], counts["false_positives"], counts["false_negatives"]
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    f1 = _ratio(2 * tp, 2 * tp + fp + fn) if tp else (0.0 if fp + fn else None)
    compared = sum(counts[name] for name in ("true_positives", "false_positives", "false_negatives", "true_negatives"))
    return {
        "evaluated": compared > 0,
        "labelled_pairs": labelled,
        "compared_pairs": compared,
        "unknown_doc_id_pairs": labelled - compared,
        **{name: int(value) for name, value in counts.items()},
        "disagreeing_pairs": fp + fn,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


def _cluster_figures(counts: dict, labelled: int) -> dict:
    together, same_label, same_cluster = counts["together_pairs"], counts["same_label_pairs"], counts["same_cluster_pairs"]
    compared = counts["labelled_documents"]
    index = adjusted_rand_index(together, same_label, same_cluster, compared)
    return {
        "evaluated": compared >= 2,
        "labelled_documents": compared,
        "unknown_doc_ids": labelled - compared,
        "document_pairs": _pairs(compared),
        "together_pairs": together,  # one label and one cluster
        "same_label_pairs": same_label,
        "same_cluster_pairs": same_cluster,
        "disagreeing_pairs": same_label + same_cluster - 2 * together,
        "adjusted_rand_index": None if index is None else round(index, 4),
    }


def build_evaluation_table(
    connection: duckdb.DuckDBPyConnection, tables: Tables, labels_path: Path | None, shingling: Shingling, hash_scheme: str
) -> tuple[TableBuild, dict]:
    """The ``evaluation`` table (the disagreeing pairs) of the labels at ``labels_path`` (None:
    no labels), and the summary to store in its lineage under ``EVALUATION_SUMMARY``."""
    labels = read_labels(labels_path) if labels_path else Labels()
    errors, summary = build_evaluation(connection, tables, labels, shingling, hash_scheme)
    return TableBuild(sql="select * from errors", arrow_inputs={"errors": errors}), summary


def stored_evaluation_summary(connection: duckdb.DuckDBPyConnection, table: str) -> dict:
    """The summary of a stored ``evaluation`` table (kept in its lineage)."""
    return read_lineage(connection, table)[EVALUATION_SUMMARY]
