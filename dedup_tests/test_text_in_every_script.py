"""Chinese and Japanese pages through the whole pipeline: their near-duplicates are found at the
rate the S-curve predicts, in either shingle unit, one-shot and in incremental batches, and bad
input in them is still accounted for row by row."""

import random
from itertools import combinations
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from dagster import Failure

from dedup_assets.core.read.batches import find_batches
from dedup_assets.core.incremental.index_reports import one_shot_differences
from dedup_assets.core.incremental.index_tables import IndexTables
from dedup_assets.core.pipeline.library import run_batch, run_library
from dedup_assets.core.lsh.scurve import lsh_probability
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.storage.tables import SCHEMA, Tables
from dedup_assets.core.text.normalize import Shingling, document_shingles, shingling_warning
from dedup_assets.core.verify.jaccard import exact_jaccard

from .conftest import HAN, chinese_pages as _chinese_corpus, document, page_without_spaces as _page, write_csv


def _true_pairs(rows: list[dict], shingling: Shingling, threshold: float = 0.7) -> dict[tuple[str, str], float]:
    """Every pair at exact Jaccard ≥ threshold, by brute force over the reference shingles."""
    sets = {row["doc_id"]: document_shingles(row["body"], shingling) for row in rows}
    pairs = {}
    for left, right in combinations(sorted(sets), 2):
        union = len(sets[left] | sets[right])
        jaccard = len(sets[left] & sets[right]) / union if union else 0.0
        if jaccard >= threshold:
            pairs[(left, right)] = jaccard
    return pairs


def _found_pairs(database: Path) -> set[tuple[str, str]]:
    with duckdb.connect(str(database), read_only=True) as connection:
        return set(connection.execute("select left_doc_id, right_doc_id from dedup.duplicate_pairs").fetchall())


@pytest.mark.parametrize("shingling", [Shingling(5, "word"), Shingling(3, "char")], ids=["word-5", "char-3"])
def test_chinese_near_duplicates_are_found_at_the_rate_the_s_curve_predicts(tmp_path, shingling):
    rows = _chinese_corpus()
    write_csv(tmp_path / "zh.csv", rows)
    settings = Settings(rows_per_band=4, shingle_size=shingling.size, shingle_unit=shingling.unit)
    run_library(str(tmp_path / "zh.csv"), str(tmp_path / "zh.duckdb"), None, settings)

    truth = _true_pairs(rows, shingling)
    found = _found_pairs(tmp_path / "zh.duckdb")
    # a clause per token made each page one or two shingles: only the exact copies were pairs
    assert len([pair for pair, jaccard in truth.items() if jaccard < 1.0]) >= 30
    assert found <= set(truth)  # every accepted pair is verified exactly
    predicted = sum(lsh_probability(jaccard, 16, 4) for jaccard in truth.values()) / len(truth)
    recall = len(found) / len(truth)
    assert recall >= predicted - 0.05, (recall, predicted)


def test_word_and_char_shingles_agree_on_text_without_spaces():
    rows = _chinese_corpus(pages=20)
    left = pa.array([row["body"] for row in rows[:-1]])
    right = pa.array([row["body"] for row in rows[1:]])
    # Han and kana are a token each, and punctuation only separates: the same five-character windows
    assert exact_jaccard(left, right, Shingling(5, "word")).tolist() == exact_jaccard(
        left, right, Shingling(5, "char")
    ).tolist()


def test_batches_of_chinese_pages_in_char_mode_find_the_edges_and_clusters_of_one_run(tmp_path):
    rows = _chinese_corpus(pages=80, seed=7)
    folder = tmp_path / "batches"
    folder.mkdir()
    for day, half in enumerate((rows[: len(rows) // 2], rows[len(rows) // 2 :]), start=1):
        write_csv(folder / f"2026-11-{day:02d}.csv", half)
    batches = find_batches(folder)
    database = tmp_path / "index.duckdb"
    settings = Settings(rows_per_band=4, shingle_size=3, shingle_unit="char")
    run_library(str(folder), str(database), None, settings)
    for key in batches.keys():
        run_batch(batches, key, str(database), None, settings)

    with duckdb.connect(str(database), read_only=True) as connection:
        assert one_shot_differences(connection, Tables.in_schema(SCHEMA), IndexTables.in_schema()) == []
        near = connection.execute("select count(*) from incremental.pairs where not is_exact").fetchone()[0]
    assert near >= 10


def test_bad_input_in_chinese_pages_is_still_accounted_for(tmp_path):
    page = _page(random.Random(1))
    good = page.encode("utf-8")
    lines = [
        b"doc_id,source,domain,crawled_at,title,body",
        b"ok,t,example.com,2026-01-01,t," + good,
        # bytes that are not UTF-8 inside Chinese text: replaced and counted, the rest kept
        b"broken,t,example.com,2026-01-01,t," + good[:30] + b"\xff\xfe" + good[30:],
        b"punctuation,t,example.com,2026-01-01,t,\xef\xbc\x8c\xe3\x80\x82\xef\xbc\x81",  # ，。！
        b"blank-id,t,example.com,2026-01-01,t,",
        b",t,example.com,2026-01-01,t," + good,
    ]
    source = tmp_path / "zh.csv"
    source.write_bytes(b"\n".join(lines) + b"\n")
    result = run_library(str(source), str(tmp_path / "zh.duckdb"), None)

    with duckdb.connect(str(tmp_path / "zh.duckdb"), read_only=True) as connection:
        documents = dict(
            connection.execute(
                "select d.doc_id, f.token_count from dedup.documents d join dedup.fingerprinted f using (doc_id)"
            ).fetchall()
        )
        rejected = connection.execute("select input_row, reason from dedup.rejected_documents").fetchall()
        replaced = connection.execute(
            "select replaced_characters from dedup.documents where doc_id = 'broken'"
        ).fetchone()[0]
    assert documents["ok"] == len([ch for ch in page if ch not in "，。、！？"])
    assert replaced == 2 and documents["broken"] > 0
    assert documents["punctuation"] == 0  # kept, with no tokens: it pairs with nothing
    assert rejected == [(5, "missing_field")]
    assert result["counts"]["document_rows"] + len(rejected) == len(lines) - 1


def test_shingle_unit_is_checked_and_short_character_shingles_warn_on_large_corpora():
    with pytest.raises(SettingsError, match="shingle_unit must be one of word, char, got 'chars'"):
        Settings(shingle_unit="chars")
    with pytest.raises(SettingsError, match="between 1 and 64 chars, got 65"):
        Settings(shingle_size=65, shingle_unit="char")
    assert shingling_warning(Shingling(2, "char"), 9_999) is None
    assert shingling_warning(Shingling(3, "char"), 1_000_000) is None
    assert shingling_warning(Shingling(2, "word"), 1_000_000) is None
    warning = shingling_warning(Shingling(2, "char"), 10_000)
    assert "shingle_size 2 on 10,000 documents" in warning and "Set shingle_size to 3 or more" in warning


def test_the_graph_records_the_shingle_unit_and_refuses_to_mix_units(runner, tmp_path):
    write_csv(tmp_path / "zh.csv", _chinese_corpus(pages=40))
    runner.run(tmp_path / "zh.csv", shingle_unit="char", shingle_size=3)
    assert runner.manifest()["settings"]["shingle_unit"] == "char"
    assert runner.lineage("clusters")["shingle_unit"] == "char"
    with pytest.raises(Failure) as raised:
        runner.run(tmp_path / "zh.csv", selection="scored_pairs", shingle_size=3)
    message = str(raised.value.description)
    assert "was built with shingle_unit='char', this run uses shingle_unit='word'" in message
    assert message.endswith("Materialize fingerprinted* with the same run config.")  # written for Python
