"""The audit's true pairs: prefix filtering over shingle hashes must find exactly the pairs a
plain all-pairs computation finds, on the fixtures and on a generated corpus."""

import json
import random
import shlex
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from dedup_assets.core.audit import exact_pairs, jaccard_band, sample_rows, wilson_interval
from dedup_assets.core.readers import read_documents
from dedup_assets.core.release import verify_release
from dedup_assets.core.text import Shingling, document_shingles, normalize_text, tokenize

from .conftest import FIXTURE, HARD_FIXTURE

SHINGLING = Shingling(5)


def _generated(count: int, seed: int = 11) -> list[str]:
    """Pages of random words, a third of them edited copies of an earlier page (a word or a few
    replaced), some exact copies, and a few too short to have a shingle."""
    rng = random.Random(seed)
    words = [f"w{index}" for index in range(300)]
    pages: list[str] = []
    for index in range(count):
        if pages and index % 3 == 0:
            page = rng.choice(pages).split()
            for _ in range(rng.choice([0, 1, 2, 4, 8])):
                page[rng.randrange(len(page))] = rng.choice(words)
            pages.append(" ".join(page))
        elif index % 97 == 0:
            pages.append("too short")
        else:
            pages.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))))
    return pages


def _all_pairs(bodies: list[str], threshold: float) -> dict[tuple[int, int], float]:
    sets = [set(document_shingles(body, SHINGLING)) for body in bodies]
    found = {}
    for left, right in combinations(range(len(bodies)), 2):
        if sets[left] and sets[right]:
            jaccard = len(sets[left] & sets[right]) / len(sets[left] | sets[right])
            if jaccard >= threshold:
                found[(left, right)] = jaccard
    return found


def _audit(bodies: list[str], sample: np.ndarray, threshold: float, batch: int) -> dict[tuple[int, int], float]:
    column = pa.array(bodies, pa.large_string())
    batches = (column.slice(start, batch) for start in range(0, len(bodies), batch))
    pairs = exact_pairs(batches, column.take(pa.array(sample)), sample, SHINGLING, threshold)
    assert (pairs.left < pairs.right).all()
    return dict(zip(zip(pairs.left.tolist(), pairs.right.tolist()), pairs.jaccard.tolist()))


def _bodies(path) -> list[str]:
    return read_documents(path).column("body").to_pylist()


@pytest.mark.parametrize("threshold", [0.7, 0.5, 0.9])
@pytest.mark.parametrize("name", ["fixture", "hard cases", "generated"])
def test_the_exhaustive_audit_finds_exactly_the_all_pairs_true_pairs(name, threshold):
    bodies = {"fixture": lambda: _bodies(FIXTURE), "hard cases": lambda: _bodies(HARD_FIXTURE),
              "generated": lambda: _generated(900)}[name]()
    expected = _all_pairs(bodies, threshold)
    found = _audit(bodies, sample_rows(len(bodies), 0, seed=1), threshold, batch=128)
    assert expected, "the corpus must have true pairs for this to compare anything"
    assert found.keys() == expected.keys()
    assert all(found[pair] == pytest.approx(expected[pair]) for pair in expected)


def test_a_sampled_audit_finds_the_true_pairs_of_its_sampled_documents_only():
    bodies = _generated(900, seed=5)
    expected = _all_pairs(bodies, 0.7)
    sample = sample_rows(len(bodies), 150, seed=3)
    sampled = set(sample.tolist())
    found = _audit(bodies, sample, 0.7, batch=97)
    touching = {pair for pair in expected if sampled & set(pair)}
    assert touching and found.keys() == touching


def test_the_sample_is_seeded_sorted_and_whole_when_asked_for_everything():
    assert sample_rows(10, 0, seed=1).tolist() == list(range(10))
    assert sample_rows(10, 50, seed=1).tolist() == list(range(10))
    drawn = sample_rows(1000, 20, seed=4)
    assert len(set(drawn.tolist())) == 20 and (np.diff(drawn) > 0).all()
    assert drawn.tolist() == sample_rows(1000, 20, seed=4).tolist()
    assert drawn.tolist() != sample_rows(1000, 20, seed=5).tolist()


def _check(result, name: str):
    return next((e for e in result.get_asset_check_evaluations() if e.check_name == name), None)


def test_the_exhaustive_audit_asset_counts_the_all_pairs_true_pairs_and_what_lsh_found(runner):
    result = runner.run(HARD_FIXTURE, audit_sample_size=0)
    assert result.success
    audit = runner.table("recall_audit")
    documents = read_documents(HARD_FIXTURE)
    # one document per distinct text, the first in input order: exact copies are left out
    first_of_text = {}
    for doc_id, body in zip(documents.column("doc_id").to_pylist(), documents.column("body").to_pylist()):
        first_of_text.setdefault(tuple(tokenize(normalize_text(body))), (doc_id, body))
    texts = [pair for tokens, pair in first_of_text.items() if tokens]
    expected = {
        tuple(sorted((texts[left][0], texts[right][0])))
        for left, right in _all_pairs([body for _, body in texts], 0.7)
    }
    assert {tuple(pair) for pair in audit[["left_doc_id", "right_doc_id"]].values.tolist()} == expected
    assert len(texts) < documents.num_rows  # the hard fixture has exact copies, left out here
    # every accepted edge between two distinct texts is a found true pair, and no other is
    kept = {doc_id for doc_id, _ in texts}
    edges = {
        (left, right)
        for left, right in runner.table("duplicate_pairs")[["left_doc_id", "right_doc_id"]].values.tolist()
        if left in kept and right in kept
    }
    found = {tuple(pair) for pair in audit[audit["found"]][["left_doc_id", "right_doc_id"]].values.tolist()}
    assert found == edges
    metadata = result.asset_materializations_for_node("recall_audit")[-1].metadata
    assert (metadata["true_pairs"].value, metadata["found_pairs"].value) == (len(audit), len(found))
    check = _check(result, "recall_reaches_min_recall")
    assert check.passed and check.description.startswith(f"recall 1.0 ({len(found)} of {len(audit)} true pairs")


def test_the_recall_check_warns_naming_the_settings_when_lsh_misses_pairs(runner):
    # 2 bands of 32 rows: a pair at Jaccard 0.8 shares a band with probability 1 - (1 - 0.8^32)^2
    result = runner.run(HARD_FIXTURE, audit_sample_size=0, num_perm=64, rows_per_band=32)
    assert result.success  # the check warns, it does not stop the run
    audit = runner.table("recall_audit")
    missed = audit[~audit["found"]]
    assert len(missed) > 0 and (missed["shared_bands"] == 0).all()
    # the release says the same: recall_audit.json is manifest.json's recall_audit, and
    # missed_pairs.csv lists the pairs not found
    manifest = runner.manifest()
    assert json.loads((runner.output_dir / "recall_audit.json").read_text()) == manifest["recall_audit"]
    assert manifest["recall_audit"]["found_pairs"] == int(audit["found"].sum())
    missed_file = pd.read_csv(runner.output_dir / "missed_pairs.csv")
    assert sorted(missed_file["left_doc_id"] + "~" + missed_file["right_doc_id"]) == sorted(
        missed["left_doc_id"] + "~" + missed["right_doc_id"]
    )
    assert verify_release(runner.output_dir) == []
    check = _check(result, "recall_reaches_min_recall")
    assert not check.passed and check.severity.value == "WARN"
    assert "is below min_recall=0.9: LSH's 2 bands of 32 rows make 0% of the pairs at J = 0.7 candidates." in check.description
    # one line, whose command carries this run's input and settings (num_perm 64 is the default) and the preset
    assert "\n" not in check.description
    command = shlex.split(check.description.split("With preset: \"web\" (20 bands of 6 rows: 92%) it finds more: ")[1])
    assert Path(command[0]).name == "dedup" and command[1:4] == ["run", "--input", str(HARD_FIXTURE)]
    config = json.loads(command[command.index("--config-json") + 1])["resources"]["dedup"]["config"]
    assert config == {"rows_per_band": 32, "audit_sample_size": 0, "preset": "web", "output_dir": str(runner.output_dir)}


def test_a_sample_without_a_true_pair_records_no_recall_result(runner, tmp_path):
    pages = tmp_path / "pages.csv"
    rows = read_documents(FIXTURE).to_pandas().head(3)
    rows["body"] = ["one page about apples and pears in autumn", "a second page on trains and timetables",
                    "a third page about the weather at sea"]
    rows[["doc_id", "source", "domain", "crawled_at", "title", "body"]].to_csv(pages, index=False)
    result = runner.run(pages, audit_sample_size=0)
    assert result.success and runner.table("recall_audit").empty
    assert _check(result, "recall_reaches_min_recall") is None


def test_jaccard_bands_and_the_wilson_interval():
    assert [jaccard_band(value, 0.7) for value in (0.7, 0.79, 0.8, 0.95, 1.0)] == [
        "[0.7, 0.8)", "[0.7, 0.8)", "[0.8, 0.9)", "[0.9, 1.0)", "1.0"
    ]
    assert jaccard_band(0.76, 0.75) == "[0.75, 0.8)"
    # the textbook case: 81 of 263, interval 0.2553-0.3662 (Wilson 1927, as in Newcombe 1998)
    low, high = wilson_interval(81, 263)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0
