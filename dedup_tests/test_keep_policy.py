"""The keep policy (core/keep/rule.py, setting ``keep``): a user's column decides which copy is kept,
every removed copy names the rule that decided and both values, in one-shot runs (components and
star), through the asset graph and its release, and in incremental batches; a policy that cannot
work is refused saying what to write."""

import csv
from datetime import datetime

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet  # noqa: F401  (pa.parquet)
import pytest

from dedup_assets.core.read.batches import find_batches
from dedup_assets.core.keep.rule import KeepPolicy
from dedup_assets.core.pipeline.library import run_batch, run_library
from dedup_assets.core.settings.model import Settings, SettingsError

from .conftest import TEXT_OF_A_HUNDRED as TEXT, document, scored_pages, write_csv

SURE = {"rows_per_band": 4}  # 16 bands of 4 rows: these near copies are always candidates


EXPECTED = {
    "a-best": ("kept_representative", "a-best", None),
    "a-mid": ("removed_duplicate", "a-best", "quality 0.91 > 0.7"),
    "a-low": ("removed_duplicate", "a-best", "quality 0.91 > 0.42"),
    "a-unscored": ("removed_duplicate", "a-best", "quality 0.91 > null"),
    "b-new": ("kept_representative", "b-new", None),
    "b-old": ("removed_duplicate", "b-new", "newest crawled_at 2026-03-01T00:00:00 > 2026-02-01T00:00:00"),
    "b-worst": ("removed_duplicate", "b-new", "quality 0.2 > 0.1"),
    "alone": ("kept_representative", "alone", None),
}


def _decisions(database, schema: str = "dedup") -> dict[str, tuple]:
    with duckdb.connect(str(database), read_only=True) as connection:
        rows = connection.execute(
            f"select doc_id, decision, representative_doc_id, keep_reason from {schema}.clusters"
        ).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def test_the_policy_orders_by_the_users_column_nulls_last_and_names_each_reason():
    members = pa.table(
        {
            "doc_id": ["a", "b", "c", "d", "e"],
            "domain": ["x.org", "y.org", None, "x.org", "x.org"],
            "crawled_at": pa.array([datetime(2026, 1, 1), None, datetime(2026, 2, 1), datetime(2026, 1, 1), None], pa.timestamp("us")),
            "token_count": pa.array([10, 20, 20, 10, 5], pa.int32()),
            "keep.price": [3.5, 2.0, None, 3.5, 2.0],
        }
    )
    policy = KeepPolicy.parse(["price asc", "longest"])
    order = policy.order(members).to_pylist()
    assert members["doc_id"].take(pa.array(order)).to_pylist() == ["b", "e", "a", "d", "c"]
    reasons = policy.reasons(members, np.full(5, order[0])).to_pylist()
    assert reasons == [
        "price 2 < 3.5", None, "price 2 < null", "price 2 < 3.5", "longest token_count 20 > 5"
    ]
    # a representative the policy ranks below the member gets no reason: the caller says why
    assert policy.reasons(members, np.full(5, 2)).to_pylist()[1] is None


def test_text_and_the_doc_id_tie_break_are_named_with_both_values():
    members = pa.table(
        {
            "doc_id": ["p", "q"],
            "domain": ["a.com", "a.com"],
            "crawled_at": pa.array([None, None], pa.timestamp("us")),
            "token_count": pa.array([5, 5], pa.int32()),
            "keep.lang": ["en", "en"],
        }
    )
    assert KeepPolicy.parse(["lang desc"]).reasons(members, np.array([0, 0])).to_pylist() == [None, "doc_id 'p' < 'q'"]
    members = members.set_column(4, "keep.lang", pa.array(["de", "en"]))
    assert KeepPolicy.parse(["lang asc"]).reasons(members, np.array([0, 0])).to_pylist() == [None, "lang 'de' < 'en'"]


@pytest.mark.parametrize("mode", ["components", "star"])
def test_a_run_keeps_the_highest_quality_copy_of_every_cluster_and_names_rule_and_values(tmp_path, mode):
    pages = write_csv(tmp_path / "pages.csv", scored_pages())
    database = tmp_path / "run.duckdb"
    run_library(str(pages), str(database), None, Settings(cluster_mode=mode, keep=["quality desc", "newest"], **SURE))
    assert _decisions(database) == EXPECTED


def test_the_default_policy_is_the_rule_before_keep_and_still_names_its_reasons(tmp_path):
    pages = write_csv(tmp_path / "pages.csv", scored_pages())
    database = tmp_path / "run.duckdb"
    run_library(str(pages), str(database), None, Settings(**SURE))
    decisions = _decisions(database)
    # the newest copy of cluster a, whatever its quality
    assert decisions["a-unscored"] == ("kept_representative", "a-unscored", None)
    assert decisions["a-low"] == (
        "removed_duplicate", "a-unscored", "newest crawled_at 2026-06-01T00:00:00 > 2026-05-01T00:00:00"
    )
    assert decisions["b-new"][2] == "newest crawled_at 2026-09-01T00:00:00 > 2026-03-01T00:00:00"


def test_the_asset_graph_records_the_policy_and_its_release_lists_every_reason(runner, tmp_path):
    pages = write_csv(tmp_path / "pages.csv", scored_pages())
    runner.run(pages, keep=["quality desc", "newest"], audit_sample_size=0, **SURE)
    assert runner.lineage("clusters")["keep"] == ["quality desc", "newest"]
    assert "keep" not in runner.lineage("fingerprinted")  # a new policy rebuilds clusters, not what is before them
    assert runner.manifest()["settings"]["keep"] == ["quality desc", "newest"]
    with (runner.output_dir / "clusters.csv").open(newline="", encoding="utf-8") as file:
        released = {row["doc_id"]: (row["decision"], row["representative_doc_id"], row["keep_reason"] or None) for row in csv.DictReader(file)}
    assert released == EXPECTED
    assert set(runner.table("deduped_documents").doc_id) == {"a-best", "b-new", "alone"}


def test_a_column_the_documents_lack_is_refused_naming_it_and_the_columns_there(tmp_path):
    pages = write_csv(tmp_path / "pages.csv", scored_pages())
    with pytest.raises(SettingsError) as raised:
        run_library(str(pages), str(tmp_path / "run.duckdb"), None, Settings(keep=["score desc"], **SURE))
    message = str(raised.value)
    assert message.startswith("keep orders by 'score', which the documents table does not have. Its columns: ")
    assert "quality" in message and "body" not in message.split("Its columns: ")[1].split(".")[0]


@pytest.mark.parametrize(
    "keep, prefer_domains, message",
    [
        (["quality"], [], "keep[0] is 'quality': name a rule (prefer_domains, newest, oldest, longest, shortest) or a column and its order, e.g. 'quality desc'"),
        (["quality up"], [], "keep[0] is 'quality up': name a rule"),
        (["newest", "crawled_at asc"], [], "keep[1] ('crawled_at asc') can never decide: keep[0] ('newest') orders by crawled_at already. Keep one"),
        (["longest", "shortest"], [], "keep[1] ('shortest') can never decide: keep[0] ('longest') orders by token_count already"),
        ("quality desc", [], 'keep must be a list of rules, e.g. ["quality desc", "newest"], got \'quality desc\''),
        (["newest"], ["original.com"], 'prefer_domains is set, but keep ([\'newest\']) has no prefer_domains rule, so the list would decide nothing: add "prefer_domains" to keep'),
    ],
)
def test_a_policy_that_cannot_work_is_refused_saying_what_to_write(keep, prefer_domains, message):
    with pytest.raises(SettingsError) as raised:
        Settings(keep=keep, prefer_domains=prefer_domains)
    assert str(raised.value).startswith(message)


def test_batches_keep_by_the_policy_among_their_own_and_an_earlier_kept_copy_says_it_stays(tmp_path):
    pages = {page["doc_id"]: page for page in scored_pages()}
    folder = tmp_path / "batches"
    folder.mkdir()
    first = ["a-low", "alone"]
    write_csv(folder / "2026-11-01.csv", [pages[name] for name in first])
    write_csv(folder / "2026-11-02.csv", [page for name, page in pages.items() if name not in first])
    batches, database = find_batches(folder), tmp_path / "index.duckdb"
    settings = Settings(keep=["quality desc", "newest"], **SURE)
    for key in batches.keys():
        run_batch(batches, key, str(database), None, settings)
    decisions = _decisions(database, "incremental")
    # decisions are final: a-low, kept by the first batch, stays kept over the better a-best
    assert decisions["a-low"] == ("kept_representative", "a-low", None)
    assert decisions["a-best"] == ("removed_duplicate", "a-low", "kept earlier: a-low of batch 2026-11-01 stays kept")
    # where the policy agrees, it is the reason
    assert decisions["a-unscored"] == ("removed_duplicate", "a-low", "quality 0.42 > null")
    # a cluster of the batch's own documents is decided as a one-shot run decides it
    assert {name: decisions[name] for name in ("b-new", "b-old", "b-worst")} == {
        name: EXPECTED[name] for name in ("b-new", "b-old", "b-worst")
    }


@pytest.mark.parametrize(
    "values, kept, reason",
    [
        (("9", "10"), "second", "rank 10 > 9"),  # text that reads as numbers compares as numbers
        (("2026-01-02", "2025-12-31"), "first", "rank 2026-01-02T00:00:00 > 2025-12-31T00:00:00"),
        (("b", "a10"), "first", "rank 'b' > 'a10'"),  # any other text as text
        (("", "1"), "second", "rank 1 > null"),  # an empty value is null, last
    ],
)
def test_a_text_column_is_compared_as_what_all_its_values_read_as(tmp_path, values, kept, reason):
    pages = [{**document("first", TEXT), "rank": values[0]}, {**document("second", TEXT + " one"), "rank": values[1]}]
    path = tmp_path / "pages.csv"
    write_csv(path, pages)
    database = tmp_path / "run.duckdb"
    run_library(str(path), str(database), None, Settings(keep=["rank desc"], **SURE))
    removed = "second" if kept == "first" else "first"
    assert _decisions(database)[removed] == ("removed_duplicate", kept, reason)


def test_an_undated_batch_with_copies_is_decided_by_the_default_policy(tmp_path):
    # every crawled_at null: the rows the batch ranks in Python hold a column of nulls alone
    folder = tmp_path / "batches"
    folder.mkdir()
    pages = [{**document(doc_id, body), "crawled_at": ""} for doc_id, body in (("a", TEXT), ("b", TEXT + " more"))]
    write_csv(folder / "2026-11-01.csv", pages)
    database = tmp_path / "index.duckdb"
    run_batch(find_batches(folder), "2026-11-01", str(database), None, Settings(**SURE))
    assert _decisions(database, "incremental") == {
        "a": ("removed_duplicate", "b", "longest token_count 101 > 100"),
        "b": ("kept_representative", "b", None),
    }


def test_a_nan_score_is_missing_and_sorts_last(tmp_path):
    rows = [{**document("scored", TEXT), "quality": 0.5}, {**document("nan", TEXT + " one"), "quality": float("nan")}]
    path = tmp_path / "pages.parquet"
    pa.parquet.write_table(pa.Table.from_pylist(rows), path)
    database = tmp_path / "run.duckdb"
    run_library(str(path), str(database), None, Settings(keep=["quality desc"], **SURE))
    assert _decisions(database)["nan"] == ("removed_duplicate", "scored", "quality 0.5 > null")


@pytest.mark.parametrize(
    "keep, message",
    [
        (["body desc"], "keep cannot order by body, the text itself: use longest or shortest to keep by length"),
        (["score desc"], "keep orders by 'score', which the documents table does not have."),
    ],
)
def test_a_column_that_cannot_order_is_refused_with_its_true_cause(tmp_path, keep, message):
    pages = write_csv(tmp_path / "pages.csv", scored_pages())
    with pytest.raises(SettingsError) as raised:
        run_library(str(pages), str(tmp_path / "run.duckdb"), None, Settings(keep=keep, **SURE))
    assert str(raised.value).startswith(message)
