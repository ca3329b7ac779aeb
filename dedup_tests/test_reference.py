"""Reference corpora (issue 53, setting ``reference``): new documents are deduplicated against a
corpus that is never removed or rewritten; a matched document names the reference document and
the exact score; the reference is fingerprinted once and its index reused while it is as it was;
a named index of another sketch scheme is refused with the command that re-fingerprints it."""

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.reference.index import ReferenceError, index_path
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.text.normalize import Shingling, document_shingles

from .conftest import OTHER_OF_A_HUNDRED, TEXT_OF_A_HUNDRED, document, write_csv

SURE = {"rows_per_band": 4}  # 16 bands of 4 rows: these near copies are always candidates
DEDUP = Path(sys.executable).parent / "dedup"


def _words(prefix: str, count: int = 100) -> str:
    return " ".join(f"{prefix}{n}" for n in range(count))


def _corpora(folder: Path) -> tuple[Path, Path]:
    """A reference of four pages (two of them one text), and new pages: an exact copy of a
    reference page under an id the reference also uses, a near copy (J 0.96), two copies of each
    other, and a page of its own."""
    reference = write_csv(folder / "reference.csv", [
        document("r-a", TEXT_OF_A_HUNDRED), document("r-a-copy", TEXT_OF_A_HUNDRED),
        document("r-b", OTHER_OF_A_HUNDRED), document("shared-id", _words("ref")),
    ])
    new = write_csv(folder / "new.csv", [
        document("shared-id", TEXT_OF_A_HUNDRED),  # r-a's text under an id the reference has too
        document("near-b", OTHER_OF_A_HUNDRED + " and two more"),
        document("twin-1", _words("twin")), document("twin-2", _words("twin") + " again"),
        document("alone", _words("alone")),
    ])
    return reference, new


def _rows(database: Path, query: str) -> list[tuple]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return connection.execute(query).fetchall()


def _jaccard(left: str, right: str) -> float:
    """The string Jaccard of two bodies' shingles, by the reference shingling (``core/text/normalize.py``)."""
    left, right = document_shingles(left, Shingling()), document_shingles(right, Shingling())
    return len(left & right) / len(left | right)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_new_documents_that_match_the_reference_are_removed_naming_it_and_the_exact_score(tmp_path):
    reference, new = _corpora(tmp_path)
    database, release = tmp_path / "db.duckdb", tmp_path / "release"
    counts = run_library(str(new), str(database), str(release), Settings(reference=[str(reference)], **SURE))["counts"]

    matches = _rows(database, "select doc_id, reference_doc_id, reference_source_file, reference_input_row, jaccard from dedup.reference_matches")
    texts = {row["doc_id"]: row["body"] for row in csv.DictReader(new.open())}
    expected_near = _jaccard(OTHER_OF_A_HUNDRED, texts["near-b"])
    # r-a and r-a-copy are one text: the smaller id speaks for it
    assert [row[:4] for row in matches] == [("shared-id", "r-a", str(reference), 1), ("near-b", "r-b", str(reference), 3)]
    assert matches[0][4] == 1.0 and matches[1][4] == pytest.approx(expected_near)

    clusters = {
        row[0]: row[1:]
        for row in _rows(database, "select doc_id, cluster_id, decision, representative_doc_id, keep_reason from dedup.clusters")
    }
    assert clusters["shared-id"][:3] == (f"reference:{reference}:r-a", "matched_reference", "r-a")
    assert clusters["shared-id"][3] == f"matches r-a of reference {reference}, which is never removed"
    # duplicates inside the new data: the default keep policy keeps the longer
    assert clusters["twin-1"][1:3] == ("removed_duplicate", "twin-2")
    assert {doc_id for doc_id, row in clusters.items() if row[1] == "kept_representative"} == {"twin-2", "alone"}
    assert (counts["reference_matched_rows"], counts["within_input_duplicate_rows"], counts["unique_document_rows"]) == (2, 2, 1)

    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["counts"]["reference_matched_rows"] == 2
    assert manifest["references"] == [{"reference": str(reference), "documents": 4, "sha256": _sha256(reference)}]
    with (release / "reference_matches.csv").open(newline="") as file:
        assert [row["doc_id"] for row in csv.DictReader(file)] == ["shared-id", "near-b"]


def test_the_reference_is_fingerprinted_once_and_never_written_again(tmp_path):
    reference, new = _corpora(tmp_path)
    database = tmp_path / "db.duckdb"
    settings = Settings(reference=[str(reference)], **SURE)
    first, second = [], []
    run_library(str(new), str(database), None, settings, log=first.append)
    index = index_path(str(reference), tmp_path / "reference_indexes")
    built = _sha256(index), _sha256(reference)
    run_library(str(new), str(database), None, settings, log=second.append)

    assert any("fingerprinting it into" in line and "no index of it yet" in line for line in first)
    reused = [line for line in second if line.startswith(f"reference {reference}:")]
    assert reused == [
        f"reference {reference}: its index {index} is reused (4 documents; the input, its read settings and the "
        "sketch scheme are as they were), not fingerprinted again"
    ]
    assert (_sha256(index), _sha256(reference)) == built  # neither the reference nor its index is touched

    # an edited reference is fingerprinted again, and says why
    with reference.open("a") as file:
        file.write(f"r-new,test,example.com,2026-01-01,r-new,{_words('fresh')}\n")
    third = []
    run_library(str(new), str(database), None, settings, log=third.append)
    assert any(f"fingerprinting it into {index}, as {reference} changed since its index was built" in line for line in third)


def _long(prefix: str, count: int) -> str:
    return " ".join(f"{prefix}{n}" for n in range(count))


def test_a_page_near_only_a_matched_page_stays_with_the_input_and_ids_of_two_references_stay_apart(tmp_path):
    # far-b is near near-b (J 0.73) but not near first's x (J 0.65): near-b goes for the reference, far-b stays
    base = _long("w", 100)
    first = write_csv(tmp_path / "first.csv", [document("x", base), document("r-quiet", "!!! ???")])
    second = write_csv(tmp_path / "second.csv", [document("x", _long("v", 100))])
    new = write_csv(tmp_path / "new.csv", [
        document("near-b", base + " " + _long("e", 12)),
        document("far-b", base + " " + _long("e", 12) + " " + _long("f", 40)),
        document("x", _long("v", 100) + " again"),  # the input's own x matches second's x
        document("quiet", "!!! ???"),  # no tokens: an exact copy of the reference's page
    ])
    for mode in ("components", "star"):
        database = tmp_path / f"{mode}.duckdb"
        run_library(str(new), str(database), None, Settings(reference=[str(first), str(second)], cluster_mode=mode, **SURE))
        rows = dict(
            (row[0], row[1:])
            for row in _rows(database, "select doc_id, cluster_id, decision, representative_doc_id from dedup.clusters")
        )
        assert rows["near-b"] == (f"reference:{first}:x", "matched_reference", "x")
        assert rows["x"] == (f"reference:{second}:x", "matched_reference", "x")
        assert rows["quiet"] == (f"reference:{first}:r-quiet", "matched_reference", "r-quiet")
        assert rows["far-b"] == ("cluster-far-b", "kept_representative", "far-b")
        assert _rows(database, "select count(*), count(distinct doc_id) from dedup.clusters") == [(4, 4)]


def test_the_input_and_reference_share_a_boilerplate_bucket_refused_or_skipped(tmp_path):
    footer = _long("footer", 60)
    reference = write_csv(tmp_path / "reference.csv", [document(f"r{n}", _long(f"own{n}x", 3) + " " + footer) for n in range(8)])
    new = write_csv(tmp_path / "new.csv", [document(f"n{n}", _long(f"new{n}x", 3) + " " + footer) for n in range(4)])
    settings = {"reference": [str(reference)], "max_bucket_size": 5, **SURE}
    with pytest.raises(ReferenceError, match=r"LSH buckets hold the input's and the reference's texts together, more than max_bucket_size=5"):
        run_library(str(new), str(tmp_path / "db.duckdb"), None, Settings(**settings))
    # skipped, the shared buckets make no pairs: fewer pages match than without the limit
    run_library(str(new), str(tmp_path / "skip.duckdb"), None, Settings(hot_buckets="skip", **settings))
    run_library(str(new), str(tmp_path / "all.duckdb"), None, Settings(**{**settings, "max_bucket_size": 1_000}))
    count = "select count(*) from dedup.reference_matches"
    assert _rows(tmp_path / "skip.duckdb", count)[0][0] < _rows(tmp_path / "all.duckdb", count)[0][0] == 4


def test_another_ignored_passages_fingerprints_the_reference_again(tmp_path):
    reference, new = _corpora(tmp_path)
    run_library(str(new), str(tmp_path / "db.duckdb"), None, Settings(reference=[str(reference)], **SURE))
    log = []
    settings = Settings(reference=[str(reference)], ignored_passages=[_words("ref")], **SURE)
    run_library(str(new), str(tmp_path / "db.duckdb"), None, settings, log=log.append)
    assert any("as its index was built with other settings (ignored_passages)" in line for line in log)


def test_a_file_added_to_a_reference_folder_fingerprints_it_again(tmp_path):
    reference, new = _corpora(tmp_path)
    folder = tmp_path / "reference"
    folder.mkdir()
    reference.rename(folder / "part-1.csv")
    settings = Settings(reference=[str(folder)], **SURE)
    run_library(str(new), str(tmp_path / "db.duckdb"), None, settings)
    write_csv(folder / "part-2.csv", [document("r-twin", _words("twin"))])
    log = []
    run_library(str(new), str(tmp_path / "db.duckdb"), None, settings, log=log.append)
    assert any("as files were added to it or taken from it since its index was built" in line for line in log)
    # the new file's page is a reference document now: both twins match it
    assert _rows(tmp_path / "db.duckdb", "select doc_id, reference_doc_id from dedup.reference_matches where reference_doc_id = 'r-twin'") == [
        ("twin-1", "r-twin"), ("twin-2", "r-twin")
    ]


def test_a_named_index_of_another_scheme_is_refused_in_one_line_with_the_command_that_rebuilds_it(tmp_path):
    reference, new = _corpora(tmp_path)
    database = tmp_path / "db.duckdb"
    run_library(str(new), str(database), None, Settings(reference=[str(reference)], **SURE))
    index = index_path(str(reference), tmp_path / "reference_indexes")
    named = tmp_path / "shared_index.duckdb"
    named.write_bytes(index.read_bytes())

    # the named index serves a run of its own scheme as it is
    run_library(str(new), str(tmp_path / "other.duckdb"), None, Settings(reference=[str(named)], **SURE))
    assert _rows(tmp_path / "other.duckdb", "select count(*) from dedup.reference_matches") == [(2,)]

    with pytest.raises(ReferenceError) as refused:
        run_library(str(new), str(database), None, Settings(reference=[str(named)], num_perm=128, **SURE))
    message = str(refused.value)
    assert "\n" not in message
    assert message == (
        f"reference index {named} was fingerprinted with another sketch scheme (permutations 64 (index) vs 128 "
        "(this run), bands 16 (index) vs 32 (this run)), whose fingerprints cannot be compared with this run's. "
        f'Run with the settings it was built with, or name its input instead of the index, "reference": ["{reference}"], '
        "which fingerprints it again"
    )
    # what the message says to write works
    run_library(str(new), str(database), None, Settings(reference=[str(reference)], num_perm=128, **SURE))
    assert _rows(database, "select count(*) from dedup.reference_matches") == [(2,)]


def test_what_is_not_a_reference_is_refused_naming_it(tmp_path):
    _, new = _corpora(tmp_path)
    with pytest.raises(SettingsError, match=r'reference must be a list of inputs, e\.g\. \["corpus.parquet"\]'):
        Settings(reference="corpus.parquet")
    from dedup_assets.core.incremental.batch_order import index_settings

    with pytest.raises(SettingsError, match="reference applies to the one-shot graph only"):
        index_settings(Settings(reference=["corpus.parquet"]))
    not_an_index = tmp_path / "empty.duckdb"
    duckdb.connect(str(not_an_index)).close()
    with pytest.raises(ReferenceError, match=f"reference {not_an_index} is not a reference index"):
        run_library(str(new), str(tmp_path / "db.duckdb"), None, Settings(reference=[str(not_an_index)]))


def test_the_asset_graph_matches_the_reference_and_its_checks_pass(runner, tmp_path):
    reference, new = _corpora(tmp_path)
    result = runner.run(new, reference=[str(reference)], audit_sample_size=0, **SURE)
    assert result.success
    checks = [evaluation for evaluation in result.get_asset_check_evaluations()]
    assert checks and all(evaluation.passed for evaluation in checks), [c.check_name for c in checks if not c.passed]
    assert runner.lineage("reference_matches")["reference"] == [str(reference)]
    assert "reference" not in runner.lineage("fingerprinted")  # a new reference rebuilds from reference_matches on
    assert set(runner.table("deduped_documents").doc_id) == {"twin-2", "alone"}
    assert runner.manifest()["counts"]["reference_matched_rows"] == 2


def _cli_run(folder: Path, new: Path, reference: Path) -> subprocess.CompletedProcess:
    """``dedup run`` of ``new`` against ``reference``, as a user runs it, into ``folder``."""
    (folder / "dagster_home").mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ, "DAGSTER_HOME": str(folder / "dagster_home"), "DEDUP_DATABASE": str(folder / "db.duckdb"),
        "DEDUP_OUTPUT_DIR": str(folder / "out"), "DEDUP_DUCKDB_MEMORY": "2GB",
    }
    config = {"resources": {"dedup": {"config": {"reference": [str(reference)]}}}}
    done = subprocess.run(
        [str(DEDUP), "run", "--input", str(new), "--config-json", json.dumps(config)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


_RUN = """
import sys
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
run_library(sys.argv[1], sys.argv[2], None, Settings(reference=[sys.argv[3]]), log=print)
"""


@pytest.mark.faults
def test_two_runs_at_once_build_the_reference_index_once(tmp_path):
    reference = write_csv(tmp_path / "reference.csv", [document(f"r{n}", _words(f"page{n}x")) for n in range(3_000)])
    _, new = _corpora(tmp_path)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _RUN, str(new), str(tmp_path / f"run{n}" / "db.duckdb"), str(reference)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for n in range(2)
    ]
    # the two databases are in two folders: each has its own reference_indexes/, so they share
    # none; a third run beside the first shares the first's
    runs.append(subprocess.Popen(
        [sys.executable, "-c", _RUN, str(new), str(tmp_path / "run0" / "other.duckdb"), str(reference)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ))
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    beside = [outputs[0][0], outputs[2][0]]
    assert sorted("fingerprinting it into" in out for out in beside) == [False, True]  # one built it, one waited and reused it
    assert sum("not fingerprinted again" in out for out in beside) == 1
    assert not list((tmp_path / "run0" / "reference_indexes").glob("*.partial*"))


@pytest.mark.slow
def test_ten_thousand_new_documents_against_a_hundred_thousand_reference_through_the_cli(tmp_path):
    """The issue's case: `dedup run` of 10k new documents against a 100k reference, twice."""
    import numpy as np
    import pyarrow.parquet as pq
    from dedup_bench.common import truth_path
    from dedup_bench.corpus import generate

    generate(110_000, tmp_path / "corpus.parquet")
    corpus = pq.read_table(tmp_path / "corpus.parquet")
    is_new = np.arange(corpus.num_rows) % 11 == 0  # planted copies fall on both sides
    new, reference = tmp_path / "new.parquet", tmp_path / "reference.parquet"
    pq.write_table(corpus.filter(is_new), new)
    pq.write_table(corpus.filter(~is_new), reference)
    new_ids = {str(i) for i in corpus.column("doc_id").filter(is_new).to_pylist()}
    reference_ids = {str(i) for i in corpus.column("doc_id").filter(~is_new).to_pylist()}
    assert (len(new_ids), len(reference_ids)) == (10_000, 100_000)

    first = _cli_run(tmp_path / "run", new, reference)
    index = index_path(str(reference), tmp_path / "run" / "reference_indexes")
    before = _sha256(index), _sha256(reference)
    second = _cli_run(tmp_path / "run", new, reference)
    assert "fingerprinting it into" in first.stdout + first.stderr
    assert f"its index {index} is reused (100,000 documents" in second.stdout + second.stderr
    assert "fingerprinting it into" not in second.stdout + second.stderr
    assert (_sha256(index), _sha256(reference)) == before

    out = tmp_path / "run" / "out"
    with (out / "reference_matches.csv").open(newline="") as file:
        matches = list(csv.DictReader(file))
    with (out / "clusters.csv").open(newline="") as file:
        clustered = {row["doc_id"] for row in csv.DictReader(file)}
    assert clustered == new_ids  # no reference row is in the release
    assert matches and {row["reference_doc_id"] for row in matches} <= reference_ids
    assert all(float(row["jaccard"]) >= 0.7 for row in matches)
    # the scores are exact: the string Jaccard of a sample of them, by the reference shingling
    bodies = {str(d): b for d, b in zip(corpus.column("doc_id").to_pylist(), corpus.column("body").to_pylist())}
    for row in matches[:: max(1, len(matches) // 40)]:
        assert float(row["jaccard"]) == pytest.approx(_jaccard(bodies[row["doc_id"]], bodies[row["reference_doc_id"]]), abs=1e-12)
    # planted copies of a reference document at or above the threshold are found as LSH finds
    # pairs at the defaults (64 permutations, 8 bands of 8: 0.87 of the pairs at J >= 0.7 on the
    # benchmark's corpus, docs/performance.md); 1,989 of 2,221 here when written
    truth = pq.read_table(truth_path(tmp_path / "corpus.parquet")).to_pylist()
    planted = {(str(p["doc_id"]), str(p["origin_doc_id"])) for p in truth}
    across = {(a, b) if a in new_ids else (b, a) for a, b in planted if (a in new_ids) != (b in new_ids)}
    across = {(a, b) for a, b in across if _jaccard(bodies[a], bodies[b]) >= 0.7}
    matched = {row["doc_id"] for row in matches}
    found = sum(doc in matched for doc, _ in across)
    assert across and found / len(across) >= 0.85, (found, len(across))
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["reference_matched_rows"] == len(matches)
    assert counts["reference_matched_rows"] + counts["within_input_duplicate_rows"] + counts["unique_document_rows"] == 10_000
