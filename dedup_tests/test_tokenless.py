"""Bodies without a word token (empty, blank, only punctuation, emoji or zero-width characters) are
compared by their characters: exact copies of one are a copy group, one kept, and they pair with
nothing else."""

import duckdb
import pyarrow as pa
import pytest

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.sketch.fingerprints import fingerprint_batch
from dedup_assets.core.pipeline.step_params import SketchParams

from .conftest import document, write_csv

PAGE = " ".join(f"word{index}" for index in range(80))
BODIES = {
    "punct-a": "?!?! ...",
    "punct-b": "  ?!?! ...\n",  # the same characters, other surrounding whitespace
    "punct-c": "?!?!...",  # not the same characters
    "emoji-a": "🙂🙂🙂",
    "emoji-b": "🙂🙂🙂",
    "zero-width-a": "\u200b\u200b",
    "zero-width-b": "\u200b\u200b",
    "empty-a": "",
    "empty-b": "   ",
    "page-a": PAGE,
    "page-b": PAGE + " ?!?! ...",  # the page's tokens: its copy, never the punctuation's
}


@pytest.mark.parametrize("scheme", ["fss", "blake2b"])
def test_tokenless_bodies_are_keyed_by_their_trimmed_characters(scheme):
    params = SketchParams(hash_scheme=scheme, shingle_size=5, num_perm=64, rows_per_band=4, minhash_seed=1)
    batch = fingerprint_batch(pa.array(list(BODIES)), pa.array(list(BODIES.values())), params).to_pydict()
    key = {doc_id: (content, bands[0]) for doc_id, content, bands in zip(batch["doc_id"], batch["content_hash"], batch["lsh_bands"])}
    bands = dict(zip(batch["doc_id"], batch["lsh_bands"]))
    for same in (("punct-a", "punct-b"), ("emoji-a", "emoji-b"), ("zero-width-a", "zero-width-b"), ("empty-a", "empty-b"), ("page-a", "page-b")):
        assert key[same[0]] == key[same[1]], same
        assert bands[same[0]] == bands[same[1]], same
    distinct = ["punct-a", "punct-c", "emoji-a", "zero-width-a", "empty-a", "page-a"]
    assert len({key[doc_id] for doc_id in distinct}) == len(distinct)
    # no band key of one token-less text in another's: they never share a bucket
    keys = [set(bands[doc_id]) for doc_id in distinct]
    assert all(not (keys[i] & keys[j]) for i in range(len(keys)) for j in range(i + 1, len(keys)))
    tokenless = [doc_id for doc_id, count in zip(batch["doc_id"], batch["token_count"]) if count == 0]
    assert tokenless == [doc_id for doc_id in BODIES if not doc_id.startswith("page")]
    assert all(batch["signature"][batch["doc_id"].index(doc_id)] == [0] * 64 for doc_id in tokenless)


@pytest.mark.parametrize("engine_settings", [{}, {"cluster_mode": "star"}], ids=["components", "star"])
def test_exact_copies_of_a_tokenless_body_are_one_cluster_with_one_kept(tmp_path, engine_settings):
    csv = write_csv(tmp_path / "pages.csv", [document(doc_id, body) for doc_id, body in BODIES.items()])
    database = tmp_path / "run.duckdb"
    run_library(str(csv), str(database), None, Settings(**engine_settings))
    with duckdb.connect(str(database), read_only=True) as connection:
        clusters = connection.execute(
            "select list(doc_id order by doc_id) from dedup.clusters where cluster_size > 1 group by cluster_id order by 1"
        ).fetchall()
        pairs = connection.execute(
            "select left_doc_id, right_doc_id, found_by, is_duplicate, jaccard from dedup.scored_pairs order by all"
        ).fetchall()
        kept = connection.execute("select doc_id from dedup.deduped_documents order by 1").fetchall()
    assert clusters == [
        (["emoji-a", "emoji-b"],),
        (["empty-a", "empty-b"],),
        (["page-a", "page-b"],),
        (["punct-a", "punct-b"],),
        (["zero-width-a", "zero-width-b"],),
    ]
    assert pairs == [
        ("emoji-a", "emoji-b", "content_hash", True, 1.0),
        ("empty-a", "empty-b", "content_hash", True, 1.0),
        ("page-a", "page-b", "content_hash", True, 1.0),
        ("punct-a", "punct-b", "content_hash", True, 1.0),
        ("zero-width-a", "zero-width-b", "content_hash", True, 1.0),
    ]
    # every row is kept or a duplicate: one of each cluster and the token-less text with no copy
    assert [doc_id for (doc_id,) in kept] == ["emoji-a", "empty-a", "page-a", "punct-a", "punct-c", "zero-width-a"]
