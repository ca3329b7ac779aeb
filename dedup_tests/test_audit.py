"""The audit's true pairs: the probe that rides on fingerprinting must find exactly the pairs a
plain all-pairs computation finds, exact copies included, whichever pass feeds it; the audit
counts them per pair of texts as the all-pairs computation does one by one, a giant copy group
included; its sample depends on the doc_ids alone; and a sampled audit's interval holds the
recall an exhaustive one measures."""

import gc
import json
import pickle
import random
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dedup_assets.core.audit.recall import band_labels, clustered_interval, wilson_interval
from dedup_assets.core.audit import sample as audit_sample_module
from dedup_assets.core.audit.probe import AuditProbe, audit_probe, probe_pass, sampled_pairs
from dedup_assets.core.audit.sample import SampleBodies, sample_doc_ids
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.read import read_documents
from dedup_assets.core.release.files import verify_release
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.pipeline.step_params import SketchParams
from dedup_assets.core.storage.store import write_table
from dedup_assets.core.sketch.fingerprints import fingerprint_batch
from dedup_assets.core.text.normalize import Shingling, document_shingles

from .conftest import FIXTURE, HARD_FIXTURE, write_csv

SHINGLING = Shingling(5)


def _generated(count: int, seed: int = 11) -> list[str]:
    """Pages of random words, a third of them edited copies of an earlier page (a word or a few
    replaced, or none: an exact copy), many exact copies of a few popular pages, and a few too
    short to have a shingle."""
    rng = random.Random(seed)
    words = [f"w{index}" for index in range(300)]
    pages: list[str] = []
    for index in range(count):
        if pages and index % 3 == 0:
            page = rng.choice(pages).split()
            for _ in range(rng.choice([0, 1, 2, 4, 8])):
                page[rng.randrange(len(page))] = rng.choice(words)
            pages.append(" ".join(page))
        elif pages and index % 7 == 0:  # the popular pages, copied many times
            pages.append(pages[rng.choice([1, 2, 4])])
        elif index % 97 == 0:
            pages.append("too short")
        else:
            pages.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 60))))
    return pages


def _all_pairs(bodies: list[str], threshold: float) -> dict[tuple[int, int], float]:
    """The brute force: every pair of rows, by the reference shingle sets."""
    sets = [set(document_shingles(body, SHINGLING)) for body in bodies]
    found = {}
    for left, right in combinations(range(len(bodies)), 2):
        if sets[left] and sets[right]:
            jaccard = len(sets[left] & sets[right]) / len(sets[left] | sets[right])
            if jaccard >= threshold:
                found[(left, right)] = jaccard
    return found


def _ids(count: int) -> pa.Array:
    return pa.array([f"doc-{index:05d}" for index in range(count)])


def _probe_pairs(bodies: list[str], size: int, threshold: float, batch: int, feed: str) -> dict[tuple[int, int], float]:
    """The probe's pairs as row pairs, fed by the fingerprinting kernel (fss), by the published
    hashes' fingerprinting (blake2b, which leaves the test to the probe) or by a pass of its own.
    Fingerprinting names each document's text by its copy key, so the probe keeps one document
    per text it is not sampled in: here each stands for every document of its text again."""
    ids, column = _ids(len(bodies)), pa.array(bodies, pa.large_string())
    sample = sample_doc_ids(ids, size, seed=1)
    rows = {doc_id: row for row, doc_id in enumerate(ids.to_pylist())}
    wanted = pa.array([rows[doc_id] for doc_id in sample.to_pylist()])
    probe = AuditProbe(sample, column.take(wanted), SHINGLING, threshold)
    batches = [(ids.slice(start, batch), column.slice(start, batch)) for start in range(0, len(bodies), batch)]
    texts = {doc_id: (doc_id,) for doc_id in ids.to_pylist()}
    if feed == "own pass":
        probe_pass(probe, (pa.RecordBatch.from_arrays(list(pair), ["doc_id", "body"]) for pair in batches))
    else:
        params = SketchParams(feed, SHINGLING.size, 16, 4, 1)
        for doc_ids, bodies_batch in batches:
            made = fingerprint_batch(doc_ids, bodies_batch, params, probe).to_pydict()
            keys = zip(made["content_hash"], (bands[0] for bands in made["lsh_bands"]))
            texts.update(zip(made["doc_id"], keys))
    places = {doc_id: place for place, doc_id in enumerate(sample.to_pylist())}
    found = probe.found().to_pylist()
    assert all((row["sample_place"] is None) != (row["doc_id"] in places) for row in found)
    by_text: dict[tuple, list[str]] = {}
    for doc_id, text in texts.items():
        if doc_id not in places:
            by_text.setdefault(text, []).append(doc_id)
    listed = []
    for owner in {row["sampled_doc_id"] for row in found}:
        rows_of_owner = [row for row in found if row["sampled_doc_id"] == owner]
        own = [row["doc_id"] for row in rows_of_owner if row["doc_id"] in places and row["jaccard"] == 1.0]
        assert owner == min(own, key=places.get), "the owner is its set's first sampled document"
        for row in rows_of_owner:
            members = [row["doc_id"]] if row["doc_id"] in places else by_text[texts[row["doc_id"]]]
            assert row["doc_id"] == min(members)
            for x in own:
                for y in members:
                    if y != x and not (y in places and places[y] < places[x]):
                        listed.append((tuple(sorted((rows[x], rows[y]))), row["jaccard"]))
    pairs = dict(listed)
    assert len(pairs) == len(listed), "each pair once"
    return pairs


def _bodies(path) -> list[str]:
    return read_documents(path).column("body").to_pylist()


@pytest.mark.parametrize("feed", ["fss", "blake2b", "own pass"])
@pytest.mark.parametrize("threshold", [0.7, 0.5, 0.9])
@pytest.mark.parametrize("name", ["fixture", "hard cases", "generated"])
def test_the_exhaustive_probe_finds_exactly_the_all_pairs_true_pairs(name, threshold, feed):
    bodies = {"fixture": lambda: _bodies(FIXTURE), "hard cases": lambda: _bodies(HARD_FIXTURE),
              "generated": lambda: _generated(900)}[name]()
    expected = _all_pairs(bodies, threshold)
    found = _probe_pairs(bodies, 0, threshold, batch=128, feed=feed)
    assert expected, "the corpus must have true pairs for this to compare anything"
    assert found.keys() == expected.keys()
    assert all(found[pair] == pytest.approx(expected[pair]) for pair in expected)
    # exact copies are true pairs like any other
    assert sum(value == 1.0 for value in expected.values()) > (100 if name == "generated" else 0)


@pytest.mark.parametrize("feed", ["fss", "own pass"])
def test_a_sampled_probe_finds_the_true_pairs_of_its_sampled_documents_only(feed):
    bodies = _generated(900, seed=5)
    expected = _all_pairs(bodies, 0.7)
    rows = {doc_id: row for row, doc_id in enumerate(_ids(len(bodies)).to_pylist())}
    sampled = {rows[doc_id] for doc_id in sample_doc_ids(_ids(len(bodies)), 150, seed=1).to_pylist()}
    found = _probe_pairs(bodies, 150, 0.7, batch=97, feed=feed)
    touching = {pair for pair in expected if sampled & set(pair)}
    assert touching and found.keys() == touching


def test_a_sampled_document_is_found_by_its_own_set_and_pairs_with_nothing_else():
    # one long page, sampled, alone: it holds every probe it has, and finds itself only
    page = " ".join(f"w{index}" for index in range(200_000))
    ids = pa.array(["long", "other"])
    probe = AuditProbe(ids.slice(0, 1), pa.array([page]), SHINGLING, 0.7)
    probe.feed(ids, pa.array([page, "a page of other words entirely"]))
    itself = {"sampled_doc_id": "long", "doc_id": "long", "jaccard": 1.0, "sample_place": 0}
    assert probe.found().to_pylist() == [itself] and sampled_pairs(probe.found()).num_rows == 0
    probe.feed(pa.array(["copy"]), pa.array([page]))  # its copy is found
    assert probe.found().to_pylist() == [
        {"sampled_doc_id": "long", "doc_id": "copy", "jaccard": 1.0, "sample_place": None}, itself
    ]


def test_sampled_copies_are_one_owner_and_a_texts_copies_one_row():
    page = " ".join(f"w{index}" for index in range(60))
    near = page.replace("w30", "x30")
    ids = pa.array([f"copy-{index:03d}" for index in range(200)])
    probe = AuditProbe(ids.slice(0, 50), pa.array([page] * 50), SHINGLING, 0.7)
    assert probe.owner_ids.to_pylist() == ["copy-000"]
    # fed in two batches, as fingerprinting feeds it: each document with its copy key
    keys = np.array([[7, 8]] * 150 + [[9, 10]] * 50, np.uint64)
    bodies = pa.array([page] * 150 + [near] * 50)
    probe.feed(ids.slice(0, 120), bodies.slice(0, 120), None, keys[:120])
    probe.feed(ids.slice(120), bodies.slice(120), None, keys[120:])
    found = probe.found()
    assert found.num_rows == 50 + 2  # the sampled copies, one copy not sampled, one near copy
    others = found.filter(pc.is_null(found.column("sample_place"))).to_pylist()
    assert [(row["doc_id"], row["jaccard"] < 1) for row in others] == [("copy-050", False), ("copy-150", True)]
    # a probe of every document lists every pair of two, the copies' among them
    every = AuditProbe(ids.slice(0, 4), pa.array([page, page, near, page]), SHINGLING, 0.7)
    probe_pass(every, [pa.RecordBatch.from_arrays([ids.slice(0, 4), pa.array([page, page, near, page])], ["doc_id", "body"])])
    pairs = sampled_pairs(every.found()).to_pylist()
    assert [(row["left_doc_id"], row["right_doc_id"], row["jaccard"] == 1) for row in pairs] == [
        ("copy-000", "copy-001", True), ("copy-000", "copy-002", False), ("copy-000", "copy-003", True),
        ("copy-001", "copy-002", False), ("copy-001", "copy-003", True), ("copy-002", "copy-003", False),
    ]


def test_rows_past_the_spill_size_go_to_a_file_beside_and_give_the_same_true_pairs(tmp_path):
    """Shared boilerplate can make the sample's true pairs tens of millions of rows: past
    ``spill_rows`` they are written to a file, and DuckDB merges them as it merges rows in memory."""
    page = " ".join(f"w{index}" for index in range(60))
    ids = pa.array([f"doc-{index:03d}" for index in range(300)])
    bodies = pa.array([page.replace(f"w{index % 60}", f"x{index}") for index in range(300)])
    keys = np.array([[index // 3, 0] for index in range(300)], np.uint64)  # texts of three documents

    def probe(**spill) -> AuditProbe:
        audit = AuditProbe(ids.slice(0, 40), bodies.slice(0, 40), SHINGLING, 0.7, **spill)
        for start in range(0, 300, 50):  # a text's documents across two batches, now and then
            audit.feed(ids.slice(start, 50), bodies.slice(start, 50), None, keys[start : start + 50])
        return audit

    in_memory = probe().found()
    spilled = probe(spill_folder=str(tmp_path), spill_rows=25)
    [folder] = tmp_path.glob("dedup-audit-*")
    assert spilled.found().equals(in_memory) and in_memory.num_rows > 40
    assert (folder / "found.parquet").stat().st_size > 0
    with duckdb.connect(str(tmp_path / "audit.duckdb")) as connection:  # as fingerprinting writes it
        write_table(connection, "true_pairs", spilled.build())
        assert connection.sql("select * from true_pairs").to_arrow_table().cast(in_memory.schema).equals(in_memory)
    del spilled
    gc.collect()
    assert not folder.exists()


def test_copies_of_the_probe_fed_elsewhere_give_its_true_pairs(tmp_path):
    """The ray engine's workers each feed a pickled copy of the probe (without the rows found
    here), each call of theirs its own emptied copy, and hand back what they found: the same true pairs as the probe fed itself, spilled
    past its spill size or not."""
    page = " ".join(f"w{index}" for index in range(60))
    ids = pa.array([f"doc-{index:03d}" for index in range(300)])
    bodies = pa.array([page.replace(f"w{index % 60}", f"x{index}") for index in range(300)])
    keys = np.array([[index // 3, 0] for index in range(300)], np.uint64)
    batches = [(ids.slice(start, 50), bodies.slice(start, 50), None, keys[start : start + 50]) for start in range(0, 300, 50)]
    direct = AuditProbe(ids.slice(0, 40), bodies.slice(0, 40), SHINGLING, 0.7)
    for batch in batches:
        direct.feed(*batch)
    shipped = AuditProbe(ids.slice(0, 40), bodies.slice(0, 40), SHINGLING, 0.7, spill_folder=str(tmp_path), spill_rows=25)
    files = []
    worker = pickle.loads(pickle.dumps(shipped))  # one worker process's copy, for calls that overlap
    for first, second in zip(batches[::2], batches[1::2]):
        calls = [worker.emptied(), worker.emptied()]  # each call's own, as ray_sketch takes them
        calls[0].feed(*first)
        calls[1].feed(*second)
        for call, (fed, *_) in zip(calls, (first, second)):
            files.append(call.take_found())
            assert set(files[-1]["doc_id"].to_pylist()) <= set(fed.to_pylist())  # only what it was fed
            shipped.add_found(files[-1])
            assert call.take_found().num_rows == 0  # taken once
    assert worker.take_found().num_rows == 0  # the calls' rows were never the worker's copy's
    # a retried task's file that overlaps another (the first batch's: the sampled documents'): its rows count once
    assert pc.sum(pc.is_valid(files[0]["sample_place"])).as_py() > 0
    shipped.add_found(files[0])
    expected = direct.found()
    assert expected.num_rows > 40 and shipped.found().equals(expected)
    assert list(tmp_path.glob("dedup-audit-*"))  # the copies' rows spilled here, as the probe's own


def test_the_sample_depends_on_the_doc_ids_and_seed_alone():
    ids = _ids(1000)
    drawn = sample_doc_ids(ids, 20, seed=4).to_pylist()
    assert len(set(drawn)) == 20 and set(drawn) <= set(ids.to_pylist())
    shuffled = pa.array(random.Random(3).sample(ids.to_pylist(), 1000))
    assert sample_doc_ids(shuffled, 20, seed=4).to_pylist() == drawn  # row order does not matter
    assert sample_doc_ids(ids, 20, seed=5).to_pylist() != drawn
    assert sample_doc_ids(ids, 19, seed=4).to_pylist() == drawn[:19]  # a smaller sample is inside it
    assert sorted(sample_doc_ids(ids, 0, seed=4).to_pylist()) == ids.to_pylist()
    assert sorted(sample_doc_ids(ids, 5000, seed=4).to_pylist()) == ids.to_pylist()
    # chunked, as DuckDB gives a column
    assert sample_doc_ids(pa.chunked_array([ids.slice(0, 300), ids.slice(300)]), 20, seed=4).to_pylist() == drawn


def _offered(sample: SampleBodies, ids: pa.Array, bodies: pa.Array, documents: np.ndarray, batch: int) -> pa.Table:
    for start in range(0, len(ids), batch):
        end = start + batch
        sample.offer(ids.slice(start, batch), bodies.slice(start, batch), documents[start:end])
    return sample.table()


@pytest.mark.parametrize("size", [1, 20, 999, 5000])
def test_the_sample_kept_while_documents_stream_is_the_sample_drawn_from_every_doc_id(size):
    rng = random.Random(size)
    ids = pa.array(rng.sample(_ids(3000).to_pylist(), 3000))  # shuffled: the stream's order is any
    bodies = pa.array([f"page {doc_id}" for doc_id in ids.to_pylist()])
    documents = np.array([rng.random() > 0.1 for _ in range(3000)])  # the others were rejected
    kept = _offered(SampleBodies(size, seed=4), ids, bodies, documents, batch=256)
    drawn = sample_doc_ids(ids.filter(pa.array(documents)), size, seed=4)
    assert kept.column("doc_id").to_pylist() == drawn.to_pylist()
    assert kept.column("body").to_pylist() == [f"page {doc_id}" for doc_id in drawn.to_pylist()]


def test_a_sample_whose_bodies_are_too_large_to_keep_is_left_empty(monkeypatch):
    monkeypatch.setattr(audit_sample_module, "SAMPLE_BODIES_MAX_BYTES", 10_000)
    ids = _ids(500)
    bodies = pa.array(["x" * 100] * 500)
    assert _offered(SampleBodies(50, seed=4), ids, bodies, np.ones(500, bool), batch=100).num_rows == 50
    assert _offered(SampleBodies(200, seed=4), ids, bodies, np.ones(500, bool), batch=100).num_rows == 0
    # a sample of the whole corpus, offered in one batch, is held to the cap too
    assert _offered(SampleBodies(1000, seed=4), ids, bodies, np.ones(500, bool), batch=500).num_rows == 0
    assert _offered(SampleBodies(1000, seed=4), ids[:50], bodies[:50], np.ones(50, bool), batch=500).num_rows == 50


def test_the_probe_takes_the_kept_sample_only_when_it_is_this_sample():
    pages = _generated(400)
    ids = _ids(len(pages))
    with duckdb.connect() as connection:
        connection.execute("create schema dedup")
        connection.register("pages", pa.table({"doc_id": ids, "body": pa.array(pages)}))
        connection.execute("create table dedup.documents as select * from pages")

        def probe_values(kept: pa.Table | None) -> np.ndarray:
            connection.execute("drop table if exists dedup.audit_sample_bodies")
            if kept is not None:
                connection.register("kept", kept)
                connection.execute("create table dedup.audit_sample_bodies as select * from kept")
            return audit_probe(connection, "dedup.documents", SHINGLING, 0.7, 30, 1)._values

        read = probe_values(None)
        sample = _offered(SampleBodies(30, seed=1), ids, pa.array(pages), np.ones(len(pages), bool), batch=64)
        assert np.array_equal(probe_values(sample), read)
        # the bodies kept are the ones taken: one changed changes the probe
        bodies = ["other words entirely", *sample.column("body").to_pylist()[1:]]
        changed = sample.set_column(1, "body", pa.array(bodies, pa.large_string()))
        assert not np.array_equal(probe_values(changed), read)
        # a sample of another seed, or of other documents, is not taken
        other = _offered(SampleBodies(30, seed=2), ids, pa.array(pages), np.ones(len(pages), bool), batch=64)
        assert np.array_equal(probe_values(other.set_column(1, "body", pa.array(["x"] * 30, pa.large_string()))), read)
        assert np.array_equal(probe_values(sample.slice(0, 0)), read)


def _corpus(path: Path, pages: list[str]) -> Path:
    return write_csv(path, [{"doc_id": f"doc-{index:05d}", "body": body} for index, body in enumerate(pages)])


def _recall_audit(folder: Path, corpus: Path, settings: Settings) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """A library run's recall_audit.json, its recall_audit table and its fingerprinted table."""
    run_library(str(corpus), str(folder / "run.duckdb"), str(folder / "out"), settings)
    with duckdb.connect(str(folder / "run.duckdb"), read_only=True) as connection:
        audit = connection.execute("select * from dedup.recall_audit").fetchdf()
        fingerprinted = connection.execute("select doc_id, content_hash from dedup.fingerprinted").fetchdf()
    return json.loads((folder / "out" / "recall_audit.json").read_text()), audit, fingerprinted


def _expected_counts(
    doc_ids: list[str], expected: dict[tuple[int, int], float], sample: list[str], first: dict[str, str]
) -> dict[tuple[str, str, str], int]:
    """The brute force's true pairs with a sampled document, one by one, counted as the audit
    counts them: per pair of texts (their first copies) and sampled text (the first copy of the
    pair's earlier sampled document)."""
    place = {doc_id: index for index, doc_id in enumerate(sample)}
    counts: dict[tuple[str, str, str], int] = {}
    for left, right in expected:
        ends = (doc_ids[left], doc_ids[right])
        sampled = [doc_id for doc_id in ends if doc_id in place]
        if sampled:
            texts = sorted(first[doc_id] for doc_id in ends)
            key = (*texts, first[min(sampled, key=place.get)])
            counts[key] = counts.get(key, 0) + 1
    return counts


def _audit_counts(audit: pd.DataFrame) -> dict[tuple[str, str, str], int]:
    return {
        (left, right, text): int(pairs)
        for left, right, text, pairs in audit[["left_doc_id", "right_doc_id", "sampled_text", "pairs"]].values.tolist()
    }


def _first_of(fingerprinted: pd.DataFrame) -> dict[str, str]:
    return dict(_first_copies(fingerprinted))


def test_the_sampled_interval_holds_the_recall_the_exhaustive_audit_measures(tmp_path):
    pages = _generated(1500, seed=8)
    corpus = _corpus(tmp_path / "pages.csv", pages)
    # 4 bands of 8 rows: LSH finds a pair at Jaccard 0.75 about a third of the time
    lossy = Settings(num_perm=32, rows_per_band=8)
    (tmp_path / "all").mkdir()
    (tmp_path / "sampled").mkdir()
    every, audit, fingerprinted = _recall_audit(tmp_path / "all", corpus, replace(lossy, audit_sample_size=0))
    # the exhaustive audit's pairs are the brute force's, copies included, counted per text
    expected = _all_pairs(pages, 0.7)
    doc_ids = _ids(len(pages)).to_pylist()
    sample = sample_doc_ids(_ids(len(pages)), 0, lossy.minhash_seed).to_pylist()
    assert _audit_counts(audit) == _expected_counts(doc_ids, expected, sample, _first_of(fingerprinted))
    assert every["sampled_documents"] == len(pages) and every["true_pairs"] == len(expected)
    assert 0.2 < every["recall"] < 0.95, "LSH must miss some pairs for the interval to mean anything"
    near = {pair for pair, value in expected.items() if value < 1}
    assert every["near_copies"]["true_pairs"] == len(near) < len(expected)
    sampled, _, _ = _recall_audit(tmp_path / "sampled", corpus, replace(lossy, audit_sample_size=300))
    assert sampled["sampled_documents"] == 300 and 0 < sampled["true_pairs"] < every["true_pairs"]
    assert sampled["ci_low"] <= every["found_pairs"] / every["true_pairs"] <= sampled["ci_high"]
    near_copies = sampled["near_copies"]
    assert near_copies["ci_low"] <= every["near_copies"]["found_pairs"] / len(near) <= near_copies["ci_high"]


def _check(result, name: str):
    return next((e for e in result.get_asset_check_evaluations() if e.check_name == name), None)


def test_the_exhaustive_audit_asset_counts_the_all_pairs_true_pairs_and_what_lsh_found(runner):
    result = runner.run(HARD_FIXTURE, audit_sample_size=0)
    assert result.success
    audit = runner.table("recall_audit")
    documents = read_documents(HARD_FIXTURE)
    doc_ids, bodies = documents.column("doc_id").to_pylist(), documents.column("body").to_pylist()
    expected = _all_pairs(bodies, 0.7)
    first = _first_of(runner.table("fingerprinted"))
    sample = sample_doc_ids(pa.array(doc_ids), 0, Settings().minhash_seed).to_pylist()
    assert _audit_counts(audit) == _expected_counts(doc_ids, expected, sample, first)
    # the hard fixture has exact copies, counted here: in the headline, not in the near copies
    identical = sum(value == 1.0 for value in expected.values())
    assert identical > 0
    # each pair in its band, [0.7, 0.8) to 1.0, as DuckDB bands them
    bands = audit["jaccard_band"].tolist()
    assert bands == [_band(value) for value in audit["jaccard"]] and len(set(bands)) > 1
    # shared_bands as the two texts' band keys give them
    keys = dict(runner.table("fingerprinted")[["doc_id", "lsh_bands"]].values.tolist())
    assert audit["shared_bands"].tolist() == [
        sum(a == b for a, b in zip(keys[left], keys[right])) for left, right in audit[["left_doc_id", "right_doc_id"]].values.tolist()
    ]
    # found: one text, or an accepted edge between the two texts' first copies
    edges = {tuple(pair) for pair in runner.table("duplicate_pairs")[["left_doc_id", "right_doc_id"]].values.tolist()}
    should_be_found = audit[
        [left == right or (left, right) in edges for left, right in audit[["left_doc_id", "right_doc_id"]].values.tolist()]
    ]
    assert audit[audit["found"]].equals(should_be_found)
    found = int(audit[audit["found"]]["pairs"].sum())
    metadata = result.asset_materializations_for_node("recall_audit")[-1].metadata
    assert (metadata["true_pairs"].value, metadata["found_pairs"].value) == (len(expected), found)
    near = audit[audit["jaccard"] < 1]
    assert (metadata["near_copy_true_pairs"].value, metadata["near_copy_found_pairs"].value) == (
        int(near["pairs"].sum()), int(near[near["found"]]["pairs"].sum())
    ) and int(near["pairs"].sum()) == len(expected) - identical
    fingerprinted = result.asset_materializations_for_node("fingerprinted")[-1].metadata
    assert fingerprinted["audit_sampled_documents"].value == documents.num_rows
    check = _check(result, "recall_reaches_min_recall")
    assert check.passed and check.description.startswith(f"recall 1.0 ({found} of {len(expected)} true pairs")


def _first_copies(fingerprinted: pd.DataFrame) -> list[tuple[str, str]]:
    """(doc_id, the first document in input order with its content hash) of every document."""
    first = fingerprinted.groupby("content_hash", sort=False)["doc_id"].transform("first")
    return list(zip(fingerprinted["doc_id"], first))


def test_a_changed_sample_size_rebuilds_from_fingerprinted_and_a_lower_threshold_reads_again(runner):
    assert runner.run(FIXTURE).success
    # the sample is drawn by fingerprinted: a run at another size refuses its tables
    result = runner.run(FIXTURE, selection="recall_audit", raise_on_error=False, audit_sample_size=5)
    assert not result.success
    message = str(result.get_step_failure_events()[0].event_specific_data.error)
    assert "audit_sample_size=1000, this run uses audit_sample_size=5" in message
    assert "Re-materialize fingerprinted and everything downstream of it" in message
    assert runner.run(FIXTURE, selection="fingerprinted*", audit_sample_size=5).success
    assert runner.table("recall_audit").empty or len(set(runner.table("recall_audit")["sampled_text"])) <= 5
    # rescored at a higher threshold, the audit keeps the pairs at or above it; at a lower one
    # the pairs between were never looked for, so the same probe reads the bodies again
    assert runner.run(FIXTURE, selection="fingerprinted*", audit_sample_size=0).success
    every = runner.table("recall_audit")[["left_doc_id", "right_doc_id", "jaccard", "sampled_text", "pairs"]]
    assert runner.run(FIXTURE, selection="scored_pairs*", audit_sample_size=0, jaccard_threshold=0.99).success
    assert runner.table("recall_audit")[["left_doc_id", "right_doc_id", "jaccard", "sampled_text", "pairs"]].equals(
        every[every["jaccard"] >= 0.99].reset_index(drop=True)
    )
    assert runner.run(FIXTURE, selection="fingerprinted*", audit_sample_size=0, jaccard_threshold=0.99).success
    assert runner.run(FIXTURE, selection="scored_pairs*", audit_sample_size=0, jaccard_threshold=0.7).success
    again = runner.table("recall_audit")[["left_doc_id", "right_doc_id", "jaccard", "sampled_text", "pairs"]]
    assert again.equals(every) and (every["jaccard"] < 0.99).any()


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
    assert manifest["recall_audit"]["found_pairs"] == int(audit[audit["found"]]["pairs"].sum())
    missed_file = pd.read_csv(runner.output_dir / "missed_pairs.csv")
    assert sorted(missed_file["left_doc_id"] + "~" + missed_file["right_doc_id"]) == sorted(
        missed["left_doc_id"] + "~" + missed["right_doc_id"]
    )
    assert verify_release(runner.output_dir) == []
    check = _check(result, "recall_reaches_min_recall")
    assert not check.passed and check.severity.value == "WARN"
    assert "are below min_recall=0.9: LSH's 2 bands of 32 rows make 0% of the pairs at J = 0.7 candidates." in check.description
    # run from Python (materialize): the preset as run config, and as the dedup.yaml line that keeps it
    fix = check.description.split('With preset: "web" (20 bands of 6 rows: 92%) it finds more. ')[1].splitlines()
    assert fix == [
        'Add to the run config (it lasts that run): {"resources": {"dedup": {"config": {"preset": "web"}}}}',
        "To keep it for every run, add to dedup.yaml in the folder you run from:",
        "  preset: web",
    ]


def test_a_sample_without_a_true_pair_passes_the_recall_check_saying_nothing_was_measured(runner, tmp_path):
    pages = tmp_path / "pages.csv"
    rows = read_documents(FIXTURE).to_pandas().head(3)
    rows["body"] = ["one page about apples and pears in autumn", "a second page on trains and timetables",
                    "a third page about the weather at sea"]
    rows[["doc_id", "source", "domain", "crawled_at", "title", "body"]].to_csv(pages, index=False)
    result = runner.run(pages, audit_sample_size=0)
    assert result.success and runner.table("recall_audit").empty
    check = _check(result, "recall_reaches_min_recall")
    assert check.passed and check.metadata["compared"].value is False
    assert check.description == "not compared: the 3 sampled documents have no true pair to measure recall on"


def _band(jaccard: float) -> str:
    return next(label for upper, label in ((0.8, "[0.7, 0.8)"), (0.9, "[0.8, 0.9)"), (1.0, "[0.9, 1.0)")) if jaccard < upper) if jaccard < 1 else "1.0"


def test_jaccard_bands_and_the_wilson_interval():
    assert band_labels(0.7) == ["[0.7, 0.8)", "[0.8, 0.9)", "[0.9, 1.0)", "1.0"]
    assert band_labels(0.75)[0] == "[0.75, 0.8)"
    # the textbook case: 81 of 263, interval 0.2553-0.3662 (Wilson 1927, as in Newcombe 1998)
    low, high = wilson_interval(81, 263)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 10)[0] == 0.0


def test_the_interval_widens_when_each_text_brings_pairs_found_or_missed_together():
    # one pair per text: Wilson's interval, but for the n / (n - 1) of a variance estimated
    one_each = clustered_interval(np.ones(263, np.int64), np.repeat([1, 0], [81, 182]))
    assert one_each == pytest.approx(wilson_interval(81, 263), abs=0.002)
    # the same 81 of 263 pairs where a few texts bring most pairs, all found or all missed:
    # fewer independent draws, a wider interval
    true = np.array([60, 50, 40, 30, 21, *[1] * 62])
    found = np.array([60, 0, 0, 0, 21, *[0] * 62])
    assert true.sum() == 263 and found.sum() == 81
    low, high = clustered_interval(true, found)
    plain = wilson_interval(81, 263)
    assert low < plain[0] - 0.1 and high > plain[1] + 0.1
    assert clustered_interval(np.array([5, 5]), np.array([5, 5])) == wilson_interval(10, 10)
    assert clustered_interval(np.zeros(0, np.int64), np.zeros(0, np.int64)) == (0.0, 1.0)


def test_a_giant_copy_group_is_counted_from_its_size_not_listed(tmp_path):
    # 400 copies of one page spread among 300 generated pages and a few near copies of it: every
    # pair the brute force lists one by one, the audit counts per text, sampled or exhaustive
    rng = random.Random(6)
    page = " ".join(f"w{rng.randrange(300)}" for _ in range(80))
    near = [page.replace(page.split()[index], "other", 1) for index in (10, 40)]
    pages = _generated(300, seed=3) + [page] * 400 + near
    rng.shuffle(pages)
    corpus = _corpus(tmp_path / "pages.csv", pages)
    doc_ids = _ids(len(pages)).to_pylist()
    expected = _all_pairs(pages, 0.7)
    copies = pages.count(page)
    for size in (0, 60):
        (tmp_path / str(size)).mkdir()
        summary, audit, fingerprinted = _recall_audit(tmp_path / str(size), corpus, Settings(audit_sample_size=size))
        sample = sample_doc_ids(pa.array(doc_ids), size, Settings().minhash_seed).to_pylist()
        first = _first_of(fingerprinted)
        counts = _expected_counts(doc_ids, expected, sample, first)
        assert _audit_counts(audit) == counts
        assert summary["true_pairs"] == sum(counts.values())
        # the group's pairs among its copies: n(n - 1)/2 less those of its copies not sampled
        text = first[doc_ids[pages.index(page)]]
        sampled = sum(pages[doc_ids.index(doc_id)] == page for doc_id in sample)
        assert sampled > 1
        among = audit[(audit["left_doc_id"] == text) & (audit["right_doc_id"] == text)]
        assert among["pairs"].tolist() == [copies * (copies - 1) // 2 - (copies - sampled) * (copies - sampled - 1) // 2]
        assert among["found"].all()  # each copy is paired with the first copy through its content hash
        with duckdb.connect(str(tmp_path / str(size) / "run.duckdb"), read_only=True) as connection:
            stored = connection.execute("select doc_id from dedup.audit_true_pairs").fetchdf()["doc_id"]
        # kept by each owner that finds the group (its own set, and the near copies' where
        # sampled): its sampled copies, and the others as one row, never each copy
        assert sum(pages[doc_ids.index(doc_id)] == page for doc_id in stored) <= (1 + len(near)) * (sampled + 1)
