"""The keep rule (core/keep/rule.py) and prefer_domains: one order for every path, a mirror kept by
default and its original with prefer_domains in one-shot runs (components and star), through the
asset graph and in incremental batches, and prefer_domains checked at launch."""

import re
from datetime import datetime

import duckdb
import pyarrow as pa
import pytest
from pydantic import ValidationError

from dedup_assets.core.read.batches import find_batches
from dedup_assets.core.incremental.batch_order import BatchOrderError, index_settings, settings_problems
from dedup_assets.core.incremental.index_tables import IndexedBatch
from dedup_assets.core.keep.rule import KeepPolicy
from dedup_assets.core.pipeline.library import run_batch, run_library
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.launch.user_messages import user_message
from dedup_assets.settings_resource import DedupSettings

from .conftest import FIXTURE, mirror_pages, write_csv

# 16 bands of 4 rows: mirror_pages' pair is always a candidate
SURE = {"rows_per_band": 4}


def _decisions(database, schema: str = "dedup") -> dict[str, tuple[str, str, int]]:
    with duckdb.connect(str(database), read_only=True) as connection:
        rows = connection.execute(
            f"select doc_id, decision, representative_doc_id, representative_rank from {schema}.clusters"
        ).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def _members(*rows: tuple[str, str | None, str | None, int]) -> pa.Table:
    doc_ids, domains, dates, tokens = zip(*rows)
    stamps = [None if day is None else datetime.fromisoformat(day) for day in dates]
    return pa.table(
        {"doc_id": doc_ids, "domain": domains, "crawled_at": pa.array(stamps, pa.timestamp("us")), "token_count": tokens}
    )


def _ordered(members: pa.Table, prefer_domains=()) -> list[str]:
    return members["doc_id"].take(KeepPolicy.parse(prefer_domains=prefer_domains).order(members)).to_pylist()


def test_the_rule_orders_by_preferred_domain_then_newest_then_most_tokens_then_doc_id():
    members = _members(
        ("a-undated", "x.org", None, 50),
        ("b-old", "x.org", "2026-01-01", 50),
        ("c-new-short", "x.org", "2026-03-01", 10),
        ("d-new-long", "x.org", "2026-03-01", 20),
        ("e-new-long", "x.org", "2026-03-01", 20),
    )
    assert _ordered(members) == ["d-new-long", "e-new-long", "c-new-short", "b-old", "a-undated"]


def test_a_listed_domain_matches_its_subdomains_in_any_case_and_comes_first_in_list_order():
    members = _members(
        ("newest", "mirror.net", "2026-09-01", 10),
        ("news", "News.Original.COM.", "2026-01-01", 10),  # a subdomain, other case, trailing dot
        ("root", "original.com", "2026-02-01", 10),
        ("lookalike", "badoriginal.com", "2026-08-01", 10),  # not a subdomain of original.com
        ("undated-docs", "docs.example.org", None, 10),
        ("no-domain", None, "2026-07-01", 10),
    )
    assert _ordered(members, ["original.com"]) == ["root", "news", "newest", "lookalike", "no-domain", "undated-docs"]
    # an earlier entry wins over a later one, whatever the dates; unlisted domains after both
    assert _ordered(members, ["example.org", "original.com"]) == [
        "undated-docs", "root", "news", "newest", "lookalike", "no-domain"
    ]
    # a subdomain listed before its parent is preferred over the rest of the parent
    assert _ordered(members, ["news.original.com", "original.com"])[:2] == ["news", "root"]


@pytest.mark.parametrize("mode", ["components", "star"])
def test_a_mirror_is_kept_by_default_and_the_original_with_prefer_domains(tmp_path, mode):
    write_csv(tmp_path / "pages.csv", mirror_pages())
    kept = {}
    for name, preferred in (("default", []), ("preferred", ["Original.com"])):
        database = tmp_path / f"{name}.duckdb"
        run_library(str(tmp_path / "pages.csv"), str(database), None, Settings(cluster_mode=mode, prefer_domains=preferred, **SURE))
        kept[name] = _decisions(database)
    assert kept["default"]["mirror"] == ("kept_representative", "mirror", 1)
    assert kept["default"]["original"] == ("removed_duplicate", "mirror", 2)
    assert kept["preferred"]["original"] == ("kept_representative", "original", 1)
    assert kept["preferred"]["mirror"] == ("removed_duplicate", "original", 2)
    # a page without a duplicate is its own representative either way
    assert kept["default"]["other"] == kept["preferred"]["other"] == ("kept_representative", "other", 1)


def test_the_asset_graph_keeps_the_original_records_prefer_domains_and_refuses_clusters_of_another_list(runner, tmp_path):
    pages = write_csv(tmp_path / "pages.csv", mirror_pages())
    runner.run(pages, prefer_domains=["original.com"], audit_sample_size=0, **SURE)
    kept = runner.table("clusters").set_index("doc_id")["decision"].to_dict()
    assert kept == {"original": "kept_representative", "mirror": "removed_duplicate", "other": "kept_representative"}
    assert set(runner.table("deduped_documents").doc_id) == {"original", "other"}
    assert runner.lineage("clusters")["prefer_domains"] == ["original.com"]
    assert runner.manifest()["settings"]["prefer_domains"] == ["original.com"]
    # deduped_documents alone, with another list: clusters must be built again first
    result = runner.run(pages, selection="deduped_documents", raise_on_error=False, audit_sample_size=0, **SURE)
    assert not result.success
    [message] = [user_message(event.step_failure_data.error) for event in result.get_step_failure_events()]
    assert "clusters was built with prefer_domains=['original.com'], this run uses prefer_domains=[]" in message
    assert "Re-materialize clusters and everything downstream of it" in message


def test_on_the_fixture_prefer_domains_keeps_its_mirrors_and_its_contract_is_not_evaluated(runner):
    # each topic's mirror is on a subdomain of example.net (mirror., kb., cdn., ...)
    result = runner.run(FIXTURE, prefer_domains=["example.net"], audit_sample_size=0)
    checks = {evaluation.check_name: evaluation for evaluation in result.get_asset_check_evaluations()}
    # its representatives are the default rule's: compared with nothing
    assert checks["fixture_contract"].metadata["compared"].value is False
    clusters = runner.table("clusters")
    kept = set(clusters.loc[clusters["decision"] == "kept_representative", "doc_id"])
    mirrors = {doc_id for doc_id in clusters.doc_id if doc_id.endswith("-mirror")}
    assert len(mirrors) == 6 and mirrors <= kept
    assert len(kept) == 12  # the same clusters, other representatives


def test_a_batch_of_an_original_and_its_mirror_keeps_as_one_run_does(tmp_path):
    folder = tmp_path / "batches"
    folder.mkdir()
    write_csv(folder / "2026-11-01.csv", mirror_pages())
    batches = find_batches(folder)
    for preferred, kept in (([], "mirror"), (["original.com"], "original")):
        database = tmp_path / f"{kept}.duckdb"
        settings = Settings(prefer_domains=preferred, **SURE)
        run_batch(batches, "2026-11-01", str(database), None, settings)
        run_library(str(folder), str(database), None, settings)
        assert _decisions(database, "incremental") == _decisions(database)
        assert _decisions(database)[kept] == ("kept_representative", kept, 1)


def test_an_earlier_batchs_kept_mirror_stays_kept_when_its_original_comes_later(tmp_path):
    """Decisions are final: prefer_domains decides among a batch's own documents, and which
    earlier kept document a removed one names, but it takes back nothing."""
    original, mirror, _ = mirror_pages()
    folder = tmp_path / "batches"
    folder.mkdir()
    write_csv(folder / "2026-11-01.csv", [mirror])
    write_csv(folder / "2026-11-02.csv", [original])
    batches, database = find_batches(folder), tmp_path / "index.duckdb"
    settings = Settings(prefer_domains=["original.com"], **SURE)
    for key in batches.keys():
        run_batch(batches, key, str(database), None, settings)
    assert _decisions(database, "incremental") == {
        "mirror": ("kept_representative", "mirror", 1), "original": ("removed_duplicate", "mirror", 2)
    }


def test_the_index_refuses_a_batch_with_another_prefer_domains_and_an_older_index_a_list(tmp_path):
    folder = tmp_path / "batches"
    folder.mkdir()
    original, mirror, other = mirror_pages()
    write_csv(folder / "2026-11-01.csv", [original, other])
    write_csv(folder / "2026-11-02.csv", [mirror])
    batches, database = find_batches(folder), tmp_path / "index.duckdb"
    run_batch(batches, "2026-11-01", str(database), None, Settings(**SURE))
    changed = "the index has prefer_domains=[], this run prefer_domains=['original.com']"
    with pytest.raises(BatchOrderError, match=re.escape(changed)):
        run_batch(batches, "2026-11-02", str(database), None, Settings(prefer_domains=["original.com"], **SURE))
    # an index from before prefer_domains was recorded kept by the rule without it
    old = {k: v for k, v in index_settings(Settings()).items() if k != "prefer_domains"}
    indexed = [IndexedBatch("2026-11-01", 1, 0, 2, "sha", "payload", old)]
    assert settings_problems(indexed, index_settings(Settings())) == []
    assert settings_problems(indexed, index_settings(Settings(prefer_domains=["original.com"]))) == [
        ("prefer_domains", [], ["original.com"])
    ]


@pytest.mark.parametrize(
    "entries, message",
    [
        (["original.com", " "], "prefer_domains[1] is empty: give a domain such as example.com, or leave it out"),
        (
            ["https://original.com/"],
            "prefer_domains[0] is 'https://original.com/', not a domain: give the host alone, e.g. example.com "
            "(an entry matches its subdomains too, such as www.example.com)",
        ),
        (["*.original.com"], "prefer_domains[0] is '*.original.com', not a domain"),
        (["original.com:8080"], "prefer_domains[0] is 'original.com:8080', not a domain"),
        (
            ["original.com", "mirror.net", "Original.COM."],
            "prefer_domains names 'original.com' twice (prefer_domains[0] and prefer_domains[2]): keep one",
        ),
        (
            ["original.com", "www.original.com"],
            "prefer_domains[1] ('www.original.com') can never decide: prefer_domains[0] ('original.com') before "
            "it matches its subdomains already. Put 'www.original.com' first to prefer it over the rest of "
            "'original.com', or leave it out",
        ),
        ("original.com", 'prefer_domains must be a list of domains, e.g. ["example.com"], got \'original.com\''),
    ],
)
def test_prefer_domains_that_cannot_work_are_refused_saying_what_to_write(entries, message):
    with pytest.raises(SettingsError) as raised:
        Settings(prefer_domains=entries)
    assert str(raised.value).startswith(message)


def test_the_resource_refuses_a_bad_list_at_launch_and_keeps_a_good_one_as_the_rule_compares_it():
    with pytest.raises(ValidationError, match=r"prefer_domains\[1\] is empty"):
        DedupSettings(prefer_domains=["original.com", ""])
    assert DedupSettings(prefer_domains=[" Original.COM. ", "mirror.net"]).settings().prefer_domains == [
        "original.com", "mirror.net"
    ]
