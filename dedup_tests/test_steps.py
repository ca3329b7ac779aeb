"""The steps' SQL and builders (lsh, verify, cluster) and the table store, on small hand-made
tables in DuckDB."""

import duckdb
import pyarrow as pa
import pytest

from dedup_assets.core.cluster.components import build_clusters
from dedup_assets.core.reference.matching import no_reference_matches
from dedup_assets.core.lsh.candidates import (
    BucketPressure,
    PairBudgetExceeded,
    band_buckets,
    bucket_pressure,
    build_band_memberships,
    build_candidate_pairs,
    copy_groups,
    ensure_within_limits,
)
from dedup_assets.core.settings.choices import PAIR_SLOT_BYTES
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.sketch.fingerprints import tokenless_keys
from dedup_assets.core.pipeline.step_params import ClusterParams, PairLimits, SketchParams, Thresholds
from dedup_assets.core.storage.store import TableBuild, connect, write_table
from dedup_assets.core.storage.tables import Tables
from dedup_assets.core.text.normalize import Shingling
from dedup_assets.core.verify.pairs import MemoryBudgetExceeded, build_scored_pairs

TABLES = Tables.in_schema("main")


@pytest.fixture
def connection():
    with duckdb.connect() as connection:
        yield connection


def _load(connection, name: str, rows: list[dict]) -> None:
    data = pa.Table.from_pylist(rows)
    connection.execute(f"create or replace table {name} as select * from data")


def _candidates(connection, pairs: list[tuple[str, str, str]]) -> None:
    """A candidate_pairs table of (left_doc_id, right_doc_id, found_by), each sharing one band."""
    _load(
        connection,
        "candidate_pairs",
        [
            {"left_doc_id": l, "right_doc_id": r, "left_domain": "x", "right_domain": "y", "shared_bands": 1, "found_by": f}
            for l, r, f in pairs
        ],
    )


def _band_keys(connection, rows: dict[str, list[int]], without_shingles=(), content=None) -> None:
    """A fingerprinted table with these band keys (and band_memberships, the view over it); every
    document has its own content hash unless ``content`` gives it one. ``without_shingles``: documents
    of distinct bodies without a token, keyed by their characters as fingerprinting keys them."""
    schema = pa.schema(
        [
            ("doc_id", pa.string()),
            ("shingle_count", pa.int32()),
            ("content_hash", pa.uint64()),
            ("lsh_bands", pa.list_(pa.uint64())),
        ]
    )
    content = content or {}
    data = pa.Table.from_pylist(
        [
            {"doc_id": doc, "shingle_count": 3, "content_hash": content.get(doc, 1000 + row), "lsh_bands": keys}
            for row, (doc, keys) in enumerate(rows.items())
        ]
        + [
            {"doc_id": doc, "shingle_count": 0, "content_hash": int(hashed), "lsh_bands": [int(key) for key in keys]}
            for doc, hashed, keys in zip(without_shingles, *tokenless_keys(pa.array(["!" * (1 + i) for i in range(len(without_shingles))], pa.string()), 2))
        ],
        schema=schema,
    )
    connection.execute("create or replace table fingerprinted as select * from data")
    write_table(connection, "band_memberships", build_band_memberships(TABLES))


def test_bucket_pressure_and_budget_name_the_worst_bucket(connection):
    _band_keys(
        connection,
        {**{f"d{i}": [7, 100 + i] for i in range(5)}, "x": [200, 9], "y": [201, 9]},
        without_shingles=("empty1", "empty2"),  # two texts without a token: they share no bucket
    )
    pressure = bucket_pressure(connection, TABLES)
    # 9 buckets of the texts with tokens, and one per band of each text without
    assert pressure == BucketPressure(11, 5, "000:0000000000000007", 9 + 2 * 2, 11)
    assert band_buckets(connection, TABLES, copy_groups(connection, TABLES), 5)[1].pairs().to_pylist() == [
        {"left_doc_id": a, "right_doc_id": b, "shared_bands": 1}
        for a, b in [("d0", "d1"), ("d0", "d2"), ("d0", "d3"), ("d0", "d4"), ("d1", "d2"), ("d1", "d3"),
                     ("d1", "d4"), ("d2", "d3"), ("d2", "d4"), ("d3", "d4"), ("x", "y")]
    ]
    ensure_within_limits(pressure, PairLimits(11, 5))
    with pytest.raises(PairBudgetExceeded, match="000:0000000000000007 with 5 different texts"):
        ensure_within_limits(pressure, PairLimits(10, 5))
    assert BucketPressure.from_lineage({"num_perm": 64, **pressure.as_lineage()}) == pressure
    assert BucketPressure.from_lineage({"num_perm": 64}) is None  # tables built before the figures


def test_a_hot_bucket_is_refused_by_name_or_with_skip_left_out_of_the_join_and_listed(connection):
    # d0..d4 share bucket 7 of band 0 and nothing else but d0 and d1, which share band 1's key 50
    _load(connection, "documents", [{"doc_id": f"d{i}", "domain": "a.example"} for i in range(5)])
    _band_keys(connection, {"d0": [7, 50], "d1": [7, 50], "d2": [7, 52], "d3": [7, 53], "d4": [7, 54]})
    with pytest.raises(PairBudgetExceeded) as refused:
        build_candidate_pairs(connection, TABLES, PairLimits(100, 4))
    assert str(refused.value).startswith(
        "LSH bucket 000:0000000000000007 holds 5 different texts, above max_bucket_size=4: every two"
    )
    assert "set hot_buckets: skip to leave such buckets out of the join" in str(refused.value)
    build, pressure, hot = build_candidate_pairs(connection, TABLES, PairLimits(100, 4, skip_hot_buckets=True))
    write_table(connection, "candidate_pairs", build)
    # only the pair of the other band's shared bucket: the hot bucket's ten pairs are left out
    assert connection.execute("select left_doc_id, right_doc_id, shared_bands from candidate_pairs").fetchall() == [
        ("d0", "d1", 1)
    ]
    # the pressure of what was joined: band 1's buckets (one of two texts, three of one)
    assert pressure == BucketPressure(1, 2, "001:0000000000000032", 4, 1)
    assert hot.to_pylist() == [
        {
            "band_index": 0, "lsh_band": 7, "bucket_key": "000:0000000000000007", "texts": 5, "documents": 5,
            "example_doc_ids": ["d0", "d1", "d2"],
        }
    ]
    # at the limit, nothing is hot
    assert build_candidate_pairs(connection, TABLES, PairLimits(100, 5, skip_hot_buckets=True))[2].num_rows == 0


def test_the_worst_bucket_among_equals_is_the_first_band_then_the_smallest_key(connection):
    _band_keys(connection, {"a": [5, 1], "b": [5, 1], "c": [2, 10], "d": [2, 11]})
    assert bucket_pressure(connection, TABLES) == BucketPressure(3, 2, "000:0000000000000002", 5, 3)
    _band_keys(connection, {})
    assert bucket_pressure(connection, TABLES) == BucketPressure(0, 0, None, 0, 0)
    _load(connection, "documents", [{"doc_id": "a", "domain": "a.example"}])
    build, _, _ = build_candidate_pairs(connection, TABLES, PairLimits(0, 2))
    assert write_table(connection, "candidate_pairs", build) == 0


def test_candidates_are_global_ordered_and_count_shared_bands(connection):
    _load(connection, "documents", [{"doc_id": d, "domain": f"{d}.example"} for d in ("a", "b", "c")])
    _band_keys(connection, {"b": [1, 2], "a": [1, 2], "c": [9, 1]})  # c: same value, other band
    build, _, _ = build_candidate_pairs(connection, TABLES, PairLimits(100, 2))
    write_table(connection, "candidate_pairs", build)
    assert connection.execute("select * from candidate_pairs").fetchall() == [
        ("a", "b", "a.example", "b.example", 2, "lsh")
    ]


def test_exact_copies_are_paired_with_their_first_copy_not_joined(connection):
    # a1..a3 are copies of one text, which shares band 0 with b; c1, c2 are copies alone in their
    # buckets; x and y have equal content hashes but other band keys, so they are not copies; the
    # empty documents have one content hash but no shingles, so they stay singletons
    docs = ("a1", "a2", "a3", "b", "c1", "c2", "x", "y", "e1", "e2")
    _load(connection, "documents", [{"doc_id": d, "domain": f"{d}.example"} for d in docs])
    _band_keys(
        connection,
        {
            "a2": [1, 2], "a1": [1, 2], "a3": [1, 2], "b": [1, 9],
            "c1": [5, 6], "c2": [5, 6], "x": [30, 31], "y": [40, 41],
        },
        without_shingles=("e1", "e2"),
        content={"a1": 7, "a2": 7, "a3": 7, "c1": 8, "c2": 8, "x": 9, "y": 9},
    )
    # one bucket of two texts, a (3 documents) and b: a-b, and b with the two further copies of a;
    # published, every two documents sharing a bucket: 6 in a and b's, 3 in the copies of a's
    # other band, 1 in each of c's two
    assert bucket_pressure(connection, TABLES) == BucketPressure(3, 2, "000:0000000000000001", 9 + 2 * 2, 11)
    build, _, _ = build_candidate_pairs(connection, TABLES, PairLimits(3, 2))
    write_table(connection, "candidate_pairs", build)
    rows = connection.execute(
        "select left_doc_id, right_doc_id, shared_bands, found_by from candidate_pairs"
    ).fetchall()
    # a2 was fingerprinted first: it is a's first copy though a1 is the smaller doc_id; every
    # pair keeps left_doc_id < right_doc_id
    assert rows == [
        ("a1", "a2", 2, "content_hash"),
        ("a1", "b", 1, "lsh_via_copy"),
        ("a2", "a3", 2, "content_hash"),
        ("a2", "b", 1, "lsh"),
        ("a3", "b", 1, "lsh_via_copy"),
        ("c1", "c2", 2, "content_hash"),
    ]


def test_pairs_with_copies_take_their_first_copies_scores_without_shingling(connection):
    text = "one two three four five six seven eight nine ten"
    bodies = {"a1": text, "a2": text.upper(), "b": text.replace("ten", "eleven")}
    _load(connection, "documents", [{"doc_id": k, "body": v} for k, v in bodies.items()])
    _load(
        connection,
        "fingerprinted",
        [
            {"doc_id": "a1", "content_hash": 1, "signature": [1] * 8, "shingle_count": 6},
            {"doc_id": "a2", "content_hash": 1, "signature": [1] * 8, "shingle_count": 6},
            {"doc_id": "b", "content_hash": 2, "signature": [1] * 4 + [2] * 4, "shingle_count": 6},
        ],
    )
    _candidates(connection, [("a1", "a2", "content_hash"), ("a1", "b", "lsh"), ("a2", "b", "lsh_via_copy")])
    build, reshingled = build_scored_pairs(
        connection, TABLES, SketchParams("fss", 5, 8, 8, 42), Thresholds(0.7, 0.7), 100
    )
    assert reshingled == 2  # a1 and b: a2 is a copy of a1
    write_table(connection, "scored_pairs", build)
    rows = connection.execute(
        "select left_doc_id, right_doc_id, found_by, round(jaccard, 4), signature_overlap, is_exact, is_duplicate, reason "
        "from scored_pairs"
    ).fetchall()
    assert rows == [
        ("a1", "a2", "content_hash", 1.0, 1.0, True, True, "jaccard_and_minhash"),
        ("a1", "b", "lsh", round(5 / 7, 4), 0.5, False, True, "jaccard_match"),
        ("a2", "b", "lsh_via_copy", round(5 / 7, 4), 0.5, False, True, "jaccard_match"),
    ]


def test_a_bucket_of_too_many_different_texts_is_refused_with_advice_for_near_duplicates():
    hot = BucketPressure(4_950, 100, "003:00000000000000ff", 9, 4_950)
    ensure_within_limits(hot, PairLimits(max_pair_slots=4_950, max_bucket_size=100))
    with pytest.raises(PairBudgetExceeded) as raised:
        ensure_within_limits(hot, PairLimits(max_pair_slots=10**9, max_bucket_size=99))
    message = str(raised.value)
    assert "LSH bucket 003:00000000000000ff holds 100 different texts, above max_bucket_size=99" in message
    assert "boilerplate" in message and "raise rows_per_band" in message and "raise max_bucket_size" in message


def test_the_pair_budget_says_where_it_came_from_and_what_to_change():
    pressure = BucketPressure(6_000_000, 12, "000:0000000000000001", 9, 6_000_000)
    derived = Settings().pair_limits()
    assert derived == PairLimits(3072 * 2**20 // PAIR_SLOT_BYTES, 1_000, 3072)
    with pytest.raises(PairBudgetExceeded) as raised:
        ensure_within_limits(pressure, derived)
    message = str(raised.value)
    assert f"above max_pair_slots={derived.max_pair_slots:,} (what memory_budget_mb=3,072 holds" in message
    assert "raise rows_per_band" in message and "raise memory_budget_mb, or set max_pair_slots" in message
    ensure_within_limits(pressure, Settings(memory_budget_mb=4096).pair_limits())
    with pytest.raises(SettingsError, match="max_bucket_size must be at least 2, got 1"):
        Settings(max_bucket_size=1)
    # the published budget stays available as an explicit value
    with pytest.raises(PairBudgetExceeded, match=r"above max_pair_slots=1,000,000\. The largest"):
        ensure_within_limits(pressure, Settings(max_pair_slots=1_000_000).pair_limits())


def test_reasons_follow_exact_jaccard_only(connection):
    bodies = {
        "a": "one two three four five six seven eight nine ten",
        "b": "one two three four five six seven eight nine ten",
        "c": "one two three four five six seven eight nine eleven",
        "d": "completely different words that share nothing at all",
    }
    _load(connection, "documents", [{"doc_id": k, "body": v} for k, v in bodies.items()])
    signature = [1] * 8
    _load(
        connection,
        "fingerprinted",
        [
            {"doc_id": "a", "content_hash": 1, "signature": signature, "shingle_count": 6},
            {"doc_id": "b", "content_hash": 1, "signature": signature, "shingle_count": 6},
            {"doc_id": "c", "content_hash": 2, "signature": [1] * 4 + [2] * 4, "shingle_count": 6},
            {"doc_id": "d", "content_hash": 3, "signature": signature, "shingle_count": 4},
        ],
    )
    _candidates(connection, [(l, r, "lsh") for l, r in (("a", "b"), ("a", "c"), ("a", "d"), ("c", "d"))])
    build, reshingled = build_scored_pairs(
        connection, TABLES, SketchParams("fss", 5, 8, 8, 42), Thresholds(0.7, 0.7), 100
    )
    assert reshingled == 4
    write_table(connection, "scored_pairs", build)
    rows = connection.execute(
        "select left_doc_id, right_doc_id, round(jaccard, 4), signature_overlap, is_exact, is_duplicate, reason from scored_pairs"
    ).fetchall()
    assert rows == [
        ("a", "b", 1.0, 1.0, True, True, "jaccard_and_minhash"),
        ("a", "c", round(5 / 7, 4), 0.5, False, True, "jaccard_match"),
        ("a", "d", 0.0, 1.0, False, False, "minhash_only_rejected"),
        ("c", "d", 0.0, 0.5, False, False, "below_jaccard_threshold"),
    ]
    with pytest.raises(MemoryBudgetExceeded, match="memory_budget_mb=0"):
        build_scored_pairs(connection, TABLES, SketchParams("fss", 5, 8, 8, 42), Thresholds(0.7, 0.7), 0)


def _words(first: int, last: int) -> str:
    return " ".join(f"w{n}" for n in range(first, last))


# a 100-word text; b replaces its last 10 words, c replaces b's first 10: with 5-word shingles
# J(a, b) = J(b, c) = 86/106 (0.81) and J(a, c) = 76/116 (0.66), a chain at threshold 0.7
CHAIN = {
    "chain-a": _words(0, 100),
    "chain-b": _words(0, 90) + " " + _words(500, 510),
    "chain-c": _words(600, 610) + " " + _words(10, 90) + " " + _words(500, 510),
}


def _cluster_tables(connection) -> list[str]:
    """documents, fingerprinted, scored_pairs and duplicate_pairs of a chain (chain-c newest), a
    tie broken by token count, two copies and a document alone; returns the doc_ids in input
    order."""
    documents = [
        ("chain-a", "2026-01-01", 10, CHAIN["chain-a"]),
        ("chain-b", "2026-01-02", 10, CHAIN["chain-b"]),
        ("chain-c", "2026-01-03", 10, CHAIN["chain-c"]),
        ("tie-long", "2026-01-05", 12, _words(0, 40)),
        ("tie-short", "2026-01-05", 11, _words(0, 39)),
        ("same-b", "2026-01-04", 10, _words(100, 120)),
        ("same-a", "2026-01-04", 10, _words(100, 120)),
        ("alone", "2026-01-01", 3, "one two three"),
    ]
    connection.execute(
        "create table documents (doc_id varchar, crawled_at timestamp, source_file varchar, input_row bigint, body varchar, "
        "domain varchar default 'example.com')"
    )
    connection.execute("create table fingerprinted (doc_id varchar, token_count integer, shingle_count integer)")
    for row, (doc_id, crawled_at, tokens, body) in enumerate(documents, start=1):
        shingles = len(set(zip(*(body.split()[i:] for i in range(5))))) or 1
        connection.execute(
            "insert into documents by name select ? as doc_id, ? as crawled_at, ? as source_file, ? as input_row, ? as body",
            [doc_id, crawled_at, "in.csv", row, body],
        )
        connection.execute("insert into fingerprinted values (?, ?, ?)", [doc_id, tokens, shingles])
    edges = [
        {"left_doc_id": l, "right_doc_id": r, "found_by": found_by, "jaccard": jaccard}
        for l, r, found_by, jaccard in (
            ("chain-a", "chain-b", "lsh", 86 / 106),
            ("chain-b", "chain-c", "lsh", 86 / 106),
            ("tie-long", "tie-short", "lsh", 35 / 36),
            ("same-a", "same-b", "content_hash", 1.0),
        )
    ]
    _load(connection, "scored_pairs", edges)
    _load(connection, "duplicate_pairs", edges)
    write_table(connection, "reference_matches", no_reference_matches())  # a run without references
    return [d[0] for d in documents]


def _clusters(connection, mode: str) -> list[tuple]:
    write_table(connection, "clusters", build_clusters(connection, TABLES, ClusterParams(mode, Shingling(5), 0.7, 100)))
    return connection.execute(
        "select doc_id, cluster_id, cluster_size, representative_rank, representative_doc_id, decision, "
        "round(jaccard_to_representative, 4), chained from clusters order by cluster_id, representative_rank"
    ).fetchall()


def test_components_join_transitively_rank_representatives_and_flag_chained_members(connection):
    order = _cluster_tables(connection)
    assert _clusters(connection, "components") == [
        ("alone", "cluster-alone", 1, 1, "alone", "kept_representative", None, False),
        ("chain-c", "cluster-chain-a", 3, 1, "chain-c", "kept_representative", 1.0, False),
        ("chain-b", "cluster-chain-a", 3, 2, "chain-c", "removed_duplicate", round(86 / 106, 4), False),
        ("chain-a", "cluster-chain-a", 3, 3, "chain-c", "removed_duplicate", round(76 / 116, 4), True),
        ("same-a", "cluster-same-a", 2, 1, "same-a", "kept_representative", 1.0, False),
        ("same-b", "cluster-same-a", 2, 2, "same-a", "removed_duplicate", 1.0, False),
        ("tie-long", "cluster-tie-long", 2, 1, "tie-long", "kept_representative", 1.0, False),
        ("tie-short", "cluster-tie-long", 2, 2, "tie-long", "removed_duplicate", round(35 / 36, 4), False),
    ]
    # stored in input order, so it lines up with documents row by row
    assert [r[0] for r in connection.execute("select doc_id from clusters").fetchall()] == order


def test_star_mode_keeps_a_chained_member_apart(connection):
    _cluster_tables(connection)
    assert _clusters(connection, "star") == [
        ("alone", "cluster-alone", 1, 1, "alone", "kept_representative", None, False),
        ("chain-a", "cluster-chain-a", 1, 1, "chain-a", "kept_representative", 1.0, False),
        ("chain-c", "cluster-chain-b", 2, 1, "chain-c", "kept_representative", 1.0, False),
        ("chain-b", "cluster-chain-b", 2, 2, "chain-c", "removed_duplicate", round(86 / 106, 4), False),
        ("same-a", "cluster-same-a", 2, 1, "same-a", "kept_representative", 1.0, False),
        ("same-b", "cluster-same-a", 2, 2, "same-a", "removed_duplicate", 1.0, False),
        ("tie-long", "cluster-tie-long", 2, 1, "tie-long", "kept_representative", 1.0, False),
        ("tie-short", "cluster-tie-long", 2, 2, "tie-long", "removed_duplicate", round(35 / 36, 4), False),
    ]


def test_clusters_keep_verifications_jaccard_and_reread_only_unsettled_components(connection):
    _cluster_tables(connection)
    # a body changed after verification would fail its shingle count if it were read again
    connection.execute("update documents set body = 'changed since' where doc_id = 'tie-short'")
    connection.execute("update scored_pairs set jaccard = 0.9 where left_doc_id = 'tie-long'")
    rows = _clusters(connection, "components")
    assert ("tie-short", "cluster-tie-long", 2, 2, "tie-long", "removed_duplicate", 0.9, False) in rows
    # chain-a was not scored with chain-c, its representative: measured from the bodies
    chained = ("chain-a", "cluster-chain-a", 3, 3, "chain-c", "removed_duplicate", round(76 / 116, 4), True)
    assert chained in rows
    connection.execute("update documents set body = 'changed since' where doc_id = 'chain-a'")
    with pytest.raises(ValueError, match="re-materialize fingerprinted"):
        _clusters(connection, "components")


def test_clusters_refuse_members_missing_from_documents(connection):
    _cluster_tables(connection)
    connection.execute("delete from documents where doc_id = 'tie-short'")
    with pytest.raises(ValueError) as raised:
        _clusters(connection, "star")
    assert "1 members and 0 texts of the duplicate components are missing from documents or fingerprinted" in str(
        raised.value
    )


def test_star_mode_measures_a_later_rounds_pair_verification_did_not_score(connection):
    _cluster_tables(connection)
    # trio-r (newest) takes neither trio-x nor trio-y; round 2 pairs trio-y with trio-x, a pair
    # verification did not score, so it is measured from the bodies
    trio = [("trio-r", "2026-02-03", _words(700, 800)), ("trio-x", "2026-02-02", CHAIN["chain-a"]),
            ("trio-y", "2026-02-01", CHAIN["chain-b"])]
    for row, (doc_id, crawled_at, body) in enumerate(trio, start=100):
        connection.execute(
            "insert into documents by name select ? as doc_id, ? as crawled_at, 'in.csv' as source_file, ? as input_row, ? as body",
            [doc_id, crawled_at, row, body],
        )
        connection.execute("insert into fingerprinted values (?, 10, 96)", [doc_id])
    for table in ("scored_pairs", "duplicate_pairs"):
        connection.execute(f"insert into {table} values ('trio-r', 'trio-x', 'lsh', 0.0)")
    connection.execute("insert into duplicate_pairs values ('trio-x', 'trio-y', 'lsh', 0.9)")
    rows = _clusters(connection, "star")
    assert ("trio-y", "cluster-trio-x", 2, 2, "trio-x", "removed_duplicate", round(86 / 106, 4), False) in rows
    assert ("trio-r", "cluster-trio-r", 1, 1, "trio-r", "kept_representative", 1.0, False) in rows


def test_a_failed_stream_leaves_the_previous_table(connection):
    connection.execute("create table kept as select 1 as x")

    def failing():
        yield pa.record_batch({"x": [2]})
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_table(connection, "kept", TableBuild(batches=failing()))
    assert connection.execute("select x from kept").fetchall() == [(1,)]


@pytest.mark.parametrize(
    "missing, message",
    [
        ("documents", "1 candidate pairs name documents missing from documents: re-materialize candidate_pairs"),
        ("fingerprinted", "fingerprinted has 1 rows for the 2 candidate documents (one missing or repeated): re-mat"),
    ],
)
def test_verification_names_the_table_a_candidate_document_is_missing_from(connection, missing, message):
    text = "one two three four five six seven"
    _load(connection, "documents", [{"doc_id": d, "body": text} for d in ("a", "b")])
    _load(
        connection,
        "fingerprinted",
        [{"doc_id": d, "content_hash": 1, "signature": [1] * 8, "shingle_count": 3} for d in ("a", "b")],
    )
    _candidates(connection, [("a", "b", "lsh")])
    connection.execute(f"delete from {missing} where doc_id = 'b'")
    with pytest.raises(ValueError) as raised:
        build_scored_pairs(connection, TABLES, SketchParams("fss", 5, 8, 8, 42), Thresholds(0.7, 0.7), 100)
    assert message in str(raised.value)


def test_verification_refuses_bodies_changed_since_fingerprinting(connection):
    _load(connection, "documents", [{"doc_id": "a", "body": "one two three four five six"}, {"doc_id": "b", "body": "one two three four five six"}])
    _load(
        connection,
        "fingerprinted",
        [
            {"doc_id": "a", "content_hash": 1, "signature": [1] * 8, "shingle_count": 2},
            {"doc_id": "b", "content_hash": 1, "signature": [1] * 8, "shingle_count": 7},  # stale
        ],
    )
    _candidates(connection, [("a", "b", "lsh")])
    with pytest.raises(ValueError, match="re-materialize fingerprinted"):
        build_scored_pairs(connection, TABLES, SketchParams("fss", 5, 8, 8, 42), Thresholds(0.7, 0.7), 100)


def _size_bytes(size: str) -> float:
    number, unit = size.split()
    return float(number) * {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


@pytest.mark.parametrize("memory_limit", ["512MB", "25%"])
def test_connections_keep_block_memory_up_to_their_limit(tmp_path, memory_limit):
    with connect(str(tmp_path / "limits.duckdb"), memory_limit) as connection:
        limit, kept = connection.execute(
            "select current_setting('memory_limit'), current_setting('block_allocator_memory')"
        ).fetchall()[0]
    # DuckDB prints both rounded to one decimal, so "the same" is within a tenth
    assert 0.9 * _size_bytes(limit) <= _size_bytes(kept) <= _size_bytes(limit)
