"""Labelled evaluation: labels files read and refused with their line, pair precision, recall
and F1 and the adjusted Rand index against plain Python counts, the disagreeing pairs, and the
evaluation asset's release files."""

import itertools
import json
import random

import duckdb
import pandas as pd
import pytest

from dedup_assets.core.audit.evaluation import adjusted_rand_index, read_labels
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.read import InputError
from dedup_assets.core.storage.store import read_lineage
from dedup_assets.settings_resource import DedupSettings

from .conftest import PROJECT_ROOT

CLUSTER_CASES = PROJECT_ROOT / "data" / "cluster_cases.csv"


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def _plain_ari(labels: list, clusters: list) -> float:
    """The adjusted Rand index counted pair by pair (Hubert and Arabie's formula)."""
    pairs = list(itertools.combinations(range(len(labels)), 2))
    together = sum(labels[i] == labels[j] and clusters[i] == clusters[j] for i, j in pairs)
    same_label = sum(labels[i] == labels[j] for i, j in pairs)
    same_cluster = sum(clusters[i] == clusters[j] for i, j in pairs)
    expected = same_label * same_cluster / len(pairs)
    return (together - expected) / ((same_label + same_cluster) / 2 - expected)


def test_adjusted_rand_index_of_known_partitions():
    # scikit-learn's documented example: adjusted_rand_score([0, 0, 1, 2], [0, 0, 1, 1]) = 0.5714...
    assert adjusted_rand_index(together=1, same_label=1, same_cluster=2, labelled=4) == pytest.approx(4 / 7)
    assert adjusted_rand_index(together=0, same_label=0, same_cluster=0, labelled=4) == 1.0  # all singletons
    assert adjusted_rand_index(together=0, same_label=6, same_cluster=0, labelled=4) == 0.0  # one label, singletons
    assert adjusted_rand_index(together=6, same_label=6, same_cluster=6, labelled=4) == 1.0  # one cluster in both
    assert adjusted_rand_index(together=0, same_label=0, same_cluster=0, labelled=1) is None


def _library_run(tmp_path, labels_path, mode="components"):
    from dedup_assets.core.settings.model import Settings

    database = tmp_path / "db.duckdb"
    run_library(str(CLUSTER_CASES), str(database), None, Settings(cluster_mode=mode), labels_path=str(labels_path))
    with duckdb.connect(str(database), read_only=True) as connection:
        summary = read_lineage(connection, "dedup.evaluation")["evaluation_summary"]
        errors = connection.sql("select * from dedup.evaluation").fetchdf()
        clusters = dict(connection.sql("select doc_id, cluster_id from dedup.clusters").fetchall())
    return summary, errors, clusters


@pytest.mark.parametrize("mode", ["components", "star"])
def test_pair_labels_give_precision_recall_and_f1_of_the_clusters(tmp_path, mode):
    labels = [
        ("chain-a", "chain-b", 1), ("chain-a", "chain-c", 0), ("chain-b", "chain-c", 1),
        ("planted-p", "planted-q", 1), ("chain-a", "single-vendor", 0), ("ghost", "chain-a", 1),
    ]
    path = _write(tmp_path / "pairs.csv", "left_doc_id,right_doc_id,label\n" + "".join(f"{l},{r},{y}\n" for l, r, y in labels))
    summary, errors, clusters = _library_run(tmp_path, path, mode)
    known = [(l, r, y) for l, r, y in labels if l in clusters and r in clusters]
    predicted = {(l, r): clusters[l] == clusters[r] for l, r, _ in known}
    tp = sum(y and predicted[l, r] for l, r, y in known)
    fp = sum(not y and predicted[l, r] for l, r, y in known)
    fn = sum(y and not predicted[l, r] for l, r, y in known)
    assert (summary["precision"], summary["recall"]) == (round(tp / (tp + fp), 4), round(tp / (tp + fn), 4))
    assert summary["f1"] == round(2 * tp / (2 * tp + fp + fn), 4)
    assert summary["pair_labels"]["unknown_doc_id_pairs"] == 1 and summary["evaluated"]
    assert summary["adjusted_rand_index"] is None and not summary["cluster_labels"]["evaluated"]
    wrong = {(l, r) for l, r, y in known if y != predicted[l, r]}
    assert set(zip(errors["left_doc_id"], errors["right_doc_id"])) == wrong
    # components put chain-a and chain-c in one cluster at Jaccard 0.64; star keeps them apart
    assert (("chain-a", "chain-c") in wrong) == (mode == "components")
    assert errors.set_index(["left_doc_id", "right_doc_id"]).loc[("planted-p", "planted-q"), "jaccard"] == pytest.approx(0.7207, abs=1e-4)


@pytest.mark.parametrize("seed", [1, 2])
def test_cluster_labels_give_the_adjusted_rand_index_of_plain_pair_counts(tmp_path, seed):
    rng = random.Random(seed)
    doc_ids = ["chain-a", "chain-b", "chain-c", "planted-p", "planted-q", "single-vendor", "single-budget", "single-survey"]
    labels = {doc_id: rng.choice("xyz") for doc_id in doc_ids}
    path = _write(
        tmp_path / "clusters.csv",
        "doc_id,cluster_label\n" + "".join(f"{d},{l}\n" for d, l in labels.items()) + "nowhere,x\n",
    )
    summary, errors, clusters = _library_run(tmp_path, path)
    assert summary["adjusted_rand_index"] == round(_plain_ari(list(labels.values()), [clusters[d] for d in labels]), 4)
    assert summary["cluster_labels"]["labelled_documents"] == len(doc_ids)
    assert summary["cluster_labels"]["unknown_doc_ids"] == 1
    assert summary["precision"] is None and summary["cluster_labels"]["evaluated"]
    disagree = {
        (a, b)
        for a, b in itertools.combinations(sorted(doc_ids), 2)
        if (labels[a] == labels[b]) != (clusters[a] == clusters[b])
    }
    assert set(zip(errors["left_doc_id"], errors["right_doc_id"])) == disagree
    assert summary["disagreeing_pairs"] == len(disagree)


def test_labels_that_name_no_input_document_evaluate_nothing(tmp_path):
    path = _write(tmp_path / "pairs.csv", "left_doc_id,right_doc_id,label\nghost-1,ghost-2,1\n")
    summary, errors, _ = _library_run(tmp_path, path)
    assert not summary["evaluated"] and summary["precision"] is None and summary["f1"] is None
    assert summary["not_evaluated_because"].startswith("no labelled doc_id is in the input")
    assert summary["pair_labels"]["unknown_doc_id_pairs"] == 1 and errors.empty


@pytest.mark.parametrize(
    "text, message",
    [
        ("left,right,label\na,b,1\n", "the header is left,right,label; a labels file has the header left_doc_id,right_doc_id,label"),
        ("left_doc_id,right_doc_id,label\na,b,yes\n", "line 2: label must be 1 (duplicates) or 0 (not), got 'yes'"),
        ("left_doc_id,right_doc_id,label\na,b,1\nb,a,0\n", "line 3: the pair (a, b) is labelled 0, but"),
        ("left_doc_id,right_doc_id,label\na,a,1\n", "line 2: a document is labelled against itself ('a')"),
        ("left_doc_id,right_doc_id,label\na,,1\n", "line 2: expected 3 non-empty values"),
        ("doc_id,cluster_label\na,x\na,y\n", "line 3: a has cluster_label 'y', but"),
    ],
)
def test_a_bad_labels_file_is_refused_with_its_line(tmp_path, text, message):
    path = _write(tmp_path / "labels.csv", text)
    with pytest.raises(InputError) as error:
        read_labels(path)
    assert str(error.value).startswith(str(path)) and message in str(error.value)


def test_a_folder_holds_pair_and_cluster_labels_together(tmp_path):
    folder = tmp_path / "labels"
    folder.mkdir()
    _write(folder / "pairs.csv", "left_doc_id,right_doc_id,label\nb,a,1\n")
    _write(folder / "clusters.csv", "doc_id,cluster_label\na,x\nb,x\n")
    labels = read_labels(folder)
    assert labels.pairs == [("a", "b", 1)] and labels.clusters == [("a", "x"), ("b", "x")]
    assert [f["labels"] for f in labels.files] == ["cluster", "pair"]
    with pytest.raises(InputError, match="no such labels file or folder"):
        read_labels(tmp_path / "missing.csv")


def test_labels_come_from_DEDUP_LABELS_unless_labels_path_is_set(tmp_path, monkeypatch):
    monkeypatch.setenv("DEDUP_LABELS", str(tmp_path / "env.csv"))
    assert DedupSettings().labels() == tmp_path / "env.csv"
    assert DedupSettings(labels_path=str(tmp_path / "own.csv")).labels() == tmp_path / "own.csv"
    monkeypatch.delenv("DEDUP_LABELS")
    assert DedupSettings().labels() is None and DedupSettings().current_values()["labels_path"] is None


def test_the_evaluation_asset_writes_its_figures_and_errors_to_the_release(runner, tmp_path):
    path = _write(
        tmp_path / "pairs.csv", "left_doc_id,right_doc_id,label\nchain-a,chain-b,1\nchain-a,chain-c,0\nplanted-p,planted-q,1\n"
    )
    result = runner.run(CLUSTER_CASES, labels_path=str(path))
    metadata = next(
        e.materialization.metadata for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == "evaluation"
    )
    assert metadata["evaluated"].value is True and metadata["precision"].value == 0.5
    figures = json.loads((runner.output_dir / "evaluation.json").read_text())
    assert {name: figures[name] for name in ("precision", "recall", "f1", "adjusted_rand_index")} == {
        "precision": 0.5, "recall": 0.5, "f1": 0.5, "adjusted_rand_index": None,
    }
    assert runner.manifest()["evaluation"]["f1"] == 0.5
    errors = pd.read_csv(runner.output_dir / "evaluation_errors.csv")
    assert sorted(zip(errors["left_doc_id"], errors["error"])) == [("chain-a", "false_positive"), ("planted-p", "false_negative")]


def test_without_labels_the_release_says_nothing_was_evaluated(runner, monkeypatch):
    monkeypatch.delenv("DEDUP_LABELS", raising=False)
    result = runner.run(CLUSTER_CASES)
    metadata = next(
        e.materialization.metadata for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == "evaluation"
    )
    assert metadata["evaluated"].value is False and "precision" not in metadata
    figures = json.loads((runner.output_dir / "evaluation.json").read_text())
    assert figures["evaluated"] is False and figures["precision"] is None
    assert figures["not_evaluated_because"] == "no labels: set DEDUP_LABELS (labels_path) to a labels CSV"
