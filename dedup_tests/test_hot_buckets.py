"""hot_buckets: a bucket over max_bucket_size is refused by name (the default, as the published
method does), or with hot_buckets: skip left out of the join, listed in the table and the
release, and its cost measured by the recall audit; every document still accounted for."""

from __future__ import annotations

import csv
import json

import pytest

from .conftest import boilerplate_pages, write_csv


def test_a_hot_bucket_is_refused_by_default_and_the_message_names_the_way_out(runner, tmp_path):
    result = runner.run(write_csv(tmp_path / "pages.csv", boilerplate_pages()), max_bucket_size=3, raise_on_error=False)
    assert not result.success
    (failure,) = result.get_step_failure_events()
    message = failure.event_specific_data.error.message
    assert "above max_bucket_size=3" in message and "set hot_buckets: skip" in message


def test_skipped_hot_buckets_are_listed_and_the_audit_measures_what_they_cost(runner, tmp_path):
    result = runner.run(
        write_csv(tmp_path / "pages.csv", boilerplate_pages()), max_bucket_size=3, hot_buckets="skip", audit_sample_size=0
    )
    assert result.success
    hot = runner.table("hot_buckets")
    assert len(hot) >= 1 and (hot["texts"] > 3).all()
    assert all(set(ids) <= {f"page{n}" for n in range(10)} and len(ids) == 3 for ids in hot["example_doc_ids"])
    manifest = runner.manifest()
    assert manifest["settings"]["hot_buckets"] == "skip"
    assert manifest["counts"]["hot_buckets_skipped"] == len(hot)
    assert manifest["counts"]["largest_hot_bucket_texts"] == hot["texts"].max()
    with open(runner.output_dir / "hot_buckets.csv", newline="", encoding="utf-8") as listed:
        rows = list(csv.DictReader(listed))
    assert [row["bucket_key"] for row in rows] == hot["bucket_key"].tolist()
    assert json.loads(rows[0]["example_doc_ids"]) == list(hot["example_doc_ids"][0])
    # the pages only the hot buckets paired are missed, and the exhaustive audit says so; the
    # pair elsewhere is still found
    audit = manifest["recall_audit"]
    assert audit["found_pairs"] < audit["true_pairs"]
    pairs = runner.table("duplicate_pairs")
    assert ("story-a", "story-b") in set(zip(pairs["left_doc_id"], pairs["right_doc_id"]))
    # nothing is lost: every document has its row in the clusters
    assert sorted(runner.table("clusters")["doc_id"]) == sorted([f"page{n}" for n in range(10)] + ["story-a", "story-b"])


def test_skip_is_refused_at_launch_where_it_does_not_apply():
    from dedup_assets.core.incremental.batch_order import index_settings
    from dedup_assets.core.settings.model import Settings, SettingsError

    with pytest.raises(SettingsError, match="hot_buckets 'skip' applies to the one-shot graph only"):
        index_settings(Settings(hot_buckets="skip"))
    with pytest.raises(SettingsError, match="hot_buckets must be one of refuse, skip"):
        Settings(hot_buckets="drop")


def test_the_bucket_limit_rebuilds_tables_only_where_it_decides_their_rows(runner):
    from .conftest import FIXTURE

    assert runner.run(FIXTURE).success
    # refused, max_bucket_size decides no row: tables built with another limit are still good
    assert runner.run(FIXTURE, selection="scored_pairs*", max_bucket_size=500).success
    # skipping, it does: the candidates must be built again, and the refusal says from where
    failed = runner.run(FIXTURE, selection="scored_pairs*", hot_buckets="skip", raise_on_error=False)
    assert not failed.success
    message = failed.get_step_failure_events()[0].event_specific_data.error.message
    assert "built with hot_buckets='refuse', this run uses hot_buckets='skip'" in message
    assert "Re-materialize candidate_pairs and everything downstream of it" in message
