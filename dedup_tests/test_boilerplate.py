"""Boilerplate you can see (core/text/boilerplate.py): a footer many distinct pages share is named, with
its count, share and examples, before anything is removed; the clusters it alone made are named
as template clusters, and planted copies are not; both are release files, with a picture. With
``ignored_passages`` naming the footer, no two distinct pages merge and the planted copies still do."""

import csv
import json
import random

import duckdb
import pyarrow as pa
import pytest

from dedup_assets.core.text.boilerplate import boilerplate_passages
from dedup_assets.core.verify.jaccard import exact_jaccard
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.storage.tables import Tables
from dedup_assets.core.text.normalize import Shingling

from .conftest import FIXTURE, document, write_csv

VOCABULARY = [f"w{n}" for n in range(5_000)]


def footer_pages(pages: int = 300, seed: int = 7) -> tuple[list[dict], str]:
    """Distinct pages of 10 to 40 words of their own, each ending with the same 150-word footer,
    and 10 planted near copies (a first word more) of the first pages; and the footer."""
    rng = random.Random(seed)
    footer = " ".join(f"f{n}" for n in range(150))
    rows = [
        document(f"page-{n:03d}", " ".join(rng.choices(VOCABULARY, k=rng.randint(10, 40))) + " " + footer)
        for n in range(pages)
    ]
    rows += [document(f"copy-{n:03d}", "again " + rows[n]["body"]) for n in range(10)]
    return rows, footer


def _csv_rows(path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as file:
        return list(csv.DictReader(file))


def test_the_shared_footer_is_the_top_passage_with_its_count_and_examples():
    rows, footer = footer_pages()
    tables = Tables.in_schema("main")
    with duckdb.connect() as connection:
        connection.register("pages", pa.Table.from_pylist(rows))
        connection.execute("create table documents as select * from pages")
        passages = boilerplate_passages(connection, tables, Shingling()).to_pylist()
    top = passages[0]
    assert top["passage"] == footer
    assert (top["passage_rank"], top["tokens"], top["sample_documents"], top["sampled"]) == (1, 150, 310, 310)
    assert top["share"] == 1.0 and top["estimated_documents"] == 310
    assert top["example_doc_ids"] == "copy-000;copy-001;copy-002;copy-003;copy-004"
    # no page's own words are shared by 1% of the pages: the footer is the only passage
    assert len(passages) == 1


def test_a_corpus_without_shared_passages_has_none_and_no_template_clusters(runner):
    runner.run(FIXTURE, audit_sample_size=0)
    assert runner.table("boilerplate").empty
    assert runner.table("template_clusters").empty
    assert (runner.output_dir / "boilerplate.png").stat().st_size > 0


def test_the_run_names_the_footer_its_template_clusters_and_not_the_planted_copies(runner, tmp_path):
    rows, footer = footer_pages()
    pages = write_csv(tmp_path / "pages.csv", rows)
    runner.run(pages, audit_sample_size=0)
    [top, *_] = _csv_rows(runner.output_dir / "boilerplate.csv")
    assert top["passage"] == footer and top["sample_documents"] == "310"
    templates = _csv_rows(runner.output_dir / "template_clusters.csv")
    clusters = runner.table("clusters")
    merged = clusters[clusters["cluster_size"] > 1]
    # distinct pages that the footer alone joined are template clusters
    distinct_pages_merged = merged.groupby("cluster_id")["doc_id"].apply(
        lambda ids: sum(doc_id.startswith("page-") for doc_id in ids) > 1
    )
    assert {row["cluster_id"] for row in templates} == set(distinct_pages_merged[distinct_pages_merged].index)
    assert templates and all(float(row["jaccard_without_boilerplate"]) < 0.7 for row in templates)
    # a planted copy with its page alone is not: they share their own words too
    pairs_only = merged.groupby("cluster_id").size() == 2
    planted = {
        cluster for cluster in pairs_only[pairs_only].index
        if set(merged.loc[merged.cluster_id == cluster, "doc_id"].str[5:]) == {merged.loc[merged.cluster_id == cluster, "doc_id"].iloc[0][5:]}
    }
    assert planted and not planted & {row["cluster_id"] for row in templates}
    assert "boilerplate.csv" in {entry["file"] for entry in runner.manifest()["outputs"]}


def _clusters(database) -> list[set[str]]:
    with duckdb.connect(str(database), read_only=True) as connection:
        rows = connection.execute("select cluster_id, list(doc_id order by doc_id) from dedup.clusters group by 1").fetchall()
    return [set(members) for _, members in rows]


@pytest.mark.parametrize("hash_scheme", ["fss", "blake2b"])
def test_ignoring_the_footer_merges_no_two_distinct_pages_and_still_every_planted_copy(tmp_path, hash_scheme):
    rows, footer = footer_pages()
    pages = write_csv(tmp_path / "pages.csv", rows)
    found = {}
    for name, ignored in (("default", []), ("ignoring", [footer])):
        database = tmp_path / f"{name}.duckdb"
        run_library(str(pages), str(database), None, Settings(hash_scheme=hash_scheme, ignored_passages=ignored))
        found[name] = _clusters(database)
    # by default the footer merges distinct pages
    assert max(len(members) for members in found["default"]) > 100
    # ignoring it: each planted copy with its page, every other page alone
    assert sorted(sorted(members) for members in found["ignoring"] if len(members) > 1) == [
        [f"copy-{n:03d}", f"page-{n:03d}"] for n in range(10)
    ]
    assert len(found["ignoring"]) == 300


@pytest.mark.parametrize("hash_scheme", ["fss", "blake2b"])
def test_a_share_threshold_finds_the_footer_and_leaves_it_out_as_the_listed_passage_does(tmp_path, hash_scheme):
    rows, footer = footer_pages()
    pages = write_csv(tmp_path / "pages.csv", rows)
    database, release, log = tmp_path / "share.duckdb", tmp_path / "release", []
    run_library(str(pages), str(database), str(release), Settings(hash_scheme=hash_scheme, ignore_shared_above=0.5), log=log.append)
    clusters = _clusters(database)
    assert sorted(sorted(members) for members in clusters if len(members) > 1) == [
        [f"copy-{n:03d}", f"page-{n:03d}"] for n in range(10)
    ]
    assert len(clusters) == 300
    # every step after fingerprinting left the found footer out, as a run that lists it does
    listed = tmp_path / "listed.duckdb"
    run_library(str(pages), str(listed), None, Settings(hash_scheme=hash_scheme, ignored_passages=[footer]))
    for table in ("fingerprinted", "scored_pairs", "clusters", "recall_audit"):
        query = f"select * from dedup.{table}"
        with duckdb.connect(str(database), read_only=True) as found, duckdb.connect(str(listed), read_only=True) as given:
            assert found.sql(query).fetchall() == given.sql(query).fetchall(), table
    # the footer, found in the sample, is named in the log, in fingerprinted's lineage and in the release
    with duckdb.connect(str(database), read_only=True) as connection:
        lineage = json.loads(connection.execute(
            "select lineage from dedup.asset_lineage where table_name = 'fingerprinted'"
        ).fetchall()[0][0])
    assert lineage["ignored_passages_found"] == [footer]
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["derived_settings"]["ignored_passages_found"] == [footer]
    assert manifest["settings"]["ignored_passages"] == [] and manifest["settings"]["ignore_shared_above"] == 0.5
    assert any(line.startswith("fingerprinted: leaving out 1 passage(s) whose shingles 0.5 or more") for line in log)


def test_the_asset_graph_leaves_the_found_footer_out_of_every_step_and_its_checks_pass(runner, tmp_path):
    rows, footer = footer_pages()
    result = runner.run(write_csv(tmp_path / "pages.csv", rows), ignore_shared_above=0.5)
    failed = [check.check_name for check in result.get_asset_check_evaluations() if not check.passed]
    assert result.success and not failed, failed
    clusters = runner.table("clusters")
    assert clusters.cluster_id.nunique() == 300
    # the steps after fingerprinted inherit what it found: verification scored without the footer
    assert runner.lineage("scored_pairs")["ignored_passages_found"] == [footer]
    assert runner.manifest()["derived_settings"]["ignored_passages_found"] == [footer]


def test_a_share_threshold_is_refused_where_it_cannot_work():
    from dedup_assets.core.incremental.batch_order import index_settings

    with pytest.raises(SettingsError, match="ignore_shared_above must be between 0.01 and 1, got 0.001"):
        Settings(ignore_shared_above=0.001)
    with pytest.raises(SettingsError, match="ignore_shared_above applies to the one-shot graph only"):
        index_settings(Settings(ignore_shared_above=0.5))


def test_a_document_of_the_passage_alone_keeps_its_shingles_and_its_copies():
    footer = " ".join(f"f{n}" for n in range(150))
    shingling = Settings(ignored_passages=[footer]).shingling()
    only_footer, page = pa.array([footer, footer]), pa.array(["x y z w v " + footer, "a b c d e " + footer])
    for scheme in ("fss", "blake2b"):
        assert exact_jaccard(only_footer, only_footer, shingling, scheme).tolist() == [1.0, 1.0]
        assert exact_jaccard(page, pa.array(["a b c d e " + footer] * 2), shingling, scheme).tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    "passages, message",
    [
        ("please note", "ignored_passages must be a list of passages"),
        (["cookie notice"], "ignored_passages[0] has 2 word tokens, fewer than shingle_size (5)"),
    ],
)
def test_passages_that_would_leave_nothing_out_are_refused(passages, message):
    with pytest.raises(SettingsError) as raised:
        Settings(ignored_passages=passages)
    assert str(raised.value).startswith(message)
