"""Where duplicates come from: the diagnostic release files, the run counts that go with them and
``mirror_domain_pairs``, on real runs of the library pipeline, each checked against a plain Python
computation from the run's own tables."""

from __future__ import annotations

import csv
import json
import random
from collections import Counter, defaultdict
from pathlib import Path

import duckdb
import pytest

from dedup_assets.core.audit.contract import load_contract
from dedup_assets.core.release.diagnostics import (
    CAPS,
    COLLISION_BUCKETS_FILE,
    DOMAIN_SUMMARY_FILE,
    DUPLICATE_SUMMARY_FILE,
    diagnostic_queries,
    max_collision_bucket_size,
    mirror_domain_pairs,
)
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.lsh.candidates import bucket_pressure
from dedup_assets.core.release.summary import run_counts
from dedup_assets.core.storage.tables import SCHEMA, Tables

from .conftest import FIXTURE, document, write_csv

TABLES = Tables.in_schema(SCHEMA)
DIAGNOSTIC_FILES = (COLLISION_BUCKETS_FILE, DOMAIN_SUMMARY_FILE, DUPLICATE_SUMMARY_FILE)
BOILERPLATE_COPIES = 55  # one text on more pages and domains than a collision bucket row lists


def _text(seed: int, words: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [f"w{rng.randrange(5_000)}" for _ in range(words)]


def _corpus() -> list[dict]:
    """Mirrors across domains and within one, near duplicates, a boilerplate page copied onto
    many domains, singletons and an empty body; every page names one of two WARC files."""
    news, notice, same, one, other = _text(1), _text(2), _text(3), _text(4), _text(5)
    rows = [
        document("news-a1", " ".join(news), "news-a.com"),
        document("news-a2", " ".join(news), "news-a.com"),
        document("news-b", " ".join(news), "news-b.org"),
        document("news-c", " ".join(news), "news-c.net"),
        document("news-edit", " ".join(news[:-2] + ["fresh", "words"]), "news-a.com"),
        document("same-1", " ".join(same), "same.com"),
        document("same-2", " ".join(same[:30] + ["changed"] + same[31:]), "same.com"),
        document("empty", "", "news-b.org"),
        # two pairs of domains with one edge each, which sort apart by either name
        document("one-beta", " ".join(one), "beta.org"),
        document("one-zeta", " ".join(one), "zeta.org"),
        document("other-delta", " ".join(other), "delta.org"),
        document("other-gamma", " ".join(other), "gamma.org"),
    ]
    rows += [
        document(f"notice-{i:02d}", " ".join(notice), f"site{i % 25:02d}.example")
        for i in range(BOILERPLATE_COPIES)
    ]
    rows += [document(f"single-{i}", " ".join(_text(100 + i)), f"single{i}.com") for i in range(5)]
    for position, row in enumerate(rows):
        row["warc_filename"] = f"crawl-{position % 2}.warc.gz"
    return rows


def _run(folder: Path, input_path: Path) -> tuple[Path, Path]:
    database, output = folder / "db.duckdb", folder / "out"
    run_library(str(input_path), str(database), str(output))
    return database, output


@pytest.fixture(scope="module")
def two_files(tmp_path_factory) -> tuple[Path, Path]:
    """The corpus in two CSV files without a warc_filename column: pages come from input files."""
    folder = tmp_path_factory.mktemp("two_files")
    rows = [{k: v for k, v in row.items() if k != "warc_filename"} for row in _corpus()]
    (folder / "input").mkdir()
    write_csv(folder / "input" / "a.csv", rows[::2])
    write_csv(folder / "input" / "b.csv", rows[1::2])
    return _run(folder, folder / "input")


@pytest.fixture(scope="module")
def warc_column(tmp_path_factory) -> tuple[Path, Path]:
    """The corpus in one CSV file whose rows name their WARC file (warc_filename)."""
    folder = tmp_path_factory.mktemp("warc_column")
    return _run(folder, write_csv(folder / "pages.csv", _corpus()))


def _connect(database: Path) -> duckdb.DuckDBPyConnection:
    return duckdb.connect(str(database), read_only=True)


def _records(connection, name: str) -> list[dict]:
    """The rows of file ``name``'s query, with its caps bound as the release binds them."""
    cursor = connection.execute(diagnostic_queries(TABLES)[name], CAPS.get(name))
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def _file(output: Path, name: str) -> list[dict]:
    with open(output / name, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _as_csv(rows: list[dict]) -> list[dict]:
    """Rows as a CSV file gives them back: text, an empty cell for None."""
    return [{name: "" if value is None else str(value) for name, value in row.items()} for row in rows]


def _manifest(output: Path) -> dict:
    return json.loads((output / "manifest.json").read_text(encoding="utf-8"))


# --- the expected rows, from the tables in plain Python -------------------------------------


def _buckets(connection) -> dict[tuple[int, int], list[str]]:
    """Every bucket's documents, from every band row."""
    buckets = defaultdict(list)
    for doc_id, band_index, lsh_band in connection.execute(
        f"select doc_id, band_index, lsh_band from {TABLES.band_memberships}"
    ).fetchall():
        buckets[(band_index, lsh_band)].append(doc_id)
    return buckets


def _domains(connection) -> dict[str, str]:
    return dict(connection.execute(f"select doc_id, domain from {TABLES.documents}").fetchall())


def _expected_collision_buckets(connection, buckets_listed: int, members_shown: int, domains_shown: int) -> list[dict]:
    domains = _domains(connection)
    shared = sorted(
        ((band_index, lsh_band, sorted(members)) for (band_index, lsh_band), members in _buckets(connection).items()),
        key=lambda bucket: (-len(bucket[2]), bucket[0], bucket[1]),
    )
    rows = []
    for band_index, lsh_band, members in shared[:buckets_listed]:
        if len(members) < 2:
            break
        names = sorted({domains[doc_id] for doc_id in members})
        rows.append(
            {
                "band_index": band_index,
                "lsh_band": lsh_band,
                "bucket_key": f"{band_index:03d}:{lsh_band:016x}",
                "member_count": len(members),
                "potential_pairs": len(members) * (len(members) - 1) // 2,
                "domain_count": len(names),
                "domains_shown": min(len(names), domains_shown),
                "domains": ";".join(names[:domains_shown]),
                "members_shown": min(len(members), members_shown),
                "member_doc_ids": ";".join(members[:members_shown]),
            }
        )
    return rows


def _expected_domain_summary(connection, partner_domains_shown: int) -> list[dict]:
    domains = _domains(connection)
    documents, removed = Counter(domains.values()), Counter()
    for doc_id, decision in connection.execute(f"select doc_id, decision from {TABLES.clusters}").fetchall():
        removed[domains[doc_id]] += decision == "removed_duplicate"
    pairs = defaultdict(Counter)
    partners = defaultdict(Counter)
    for left, right, is_duplicate in connection.execute(
        f"select left_domain, right_domain, is_duplicate from {TABLES.scored_pairs}"
    ).fetchall():
        relation = "same_domain" if left == right else "cross_domain"
        for domain, partner in {(left, right), (right, left)}:
            pairs[domain][f"{relation}_candidate_pairs"] += 1
            pairs[domain][f"{relation}_duplicate_pairs"] += is_duplicate
            if is_duplicate and relation == "cross_domain":
                partners[domain][partner] += 1
    rows = []
    for domain in sorted(documents):
        top = sorted(partners[domain].items(), key=lambda item: (-item[1], item[0]))[:partner_domains_shown]
        rows.append(
            {
                "domain": domain,
                "documents": documents[domain],
                "removed_documents": removed[domain],
                **{
                    f"{relation}_{kind}_pairs": pairs[domain][f"{relation}_{kind}_pairs"]
                    for relation in ("same_domain", "cross_domain")
                    for kind in ("candidate", "duplicate")
                },
                "duplicate_partner_domains": len(partners[domain]),
                "top_partner_domains": ";".join(f"{name}:{count}" for name, count in top) or None,
            }
        )
    return rows


def _expected_duplicate_summary(connection) -> list[dict]:
    groups = Counter()
    exact = Counter()
    for found_by, reason, left, right, is_exact in connection.execute(
        f"select found_by, reason, left_domain, right_domain, is_exact from {TABLES.duplicate_pairs}"
    ).fetchall():
        key = (found_by, reason, "same_domain" if left == right else "cross_domain")
        groups[key] += 1
        exact[key] += is_exact
    return [
        {"found_by": f, "reason": r, "domain_relation": d, "pair_rows": groups[(f, r, d)], "exact_pair_rows": exact[(f, r, d)]}
        for f, r, d in sorted(groups)
    ]


def _expected_counts(connection, file_of: dict[str, str] | None) -> dict:
    """The counts by hand; ``file_of``: each document's WARC file, None for input without any."""
    def rows(columns: str, table: str) -> list[tuple]:
        return connection.execute(f"select {columns} from {table}").fetchall()

    candidates = rows("left_domain, right_domain", TABLES.candidate_pairs)
    edges = rows("left_doc_id, right_doc_id, left_domain, right_domain", TABLES.duplicate_pairs)
    clusters = rows("cluster_size, representative_rank", TABLES.clusters)
    same_candidates = sum(left == right for left, right in candidates)
    same_edges = sum(left == right for _, _, left, right in edges)
    representatives = sum(rank == 1 for _, rank in clusters)
    warc = {}
    if file_of is not None:
        within_warc = sum(file_of[left] == file_of[right] for left, right, _, _ in edges)
        warc = {"within_warc_duplicate_pair_rows": within_warc, "cross_warc_duplicate_pair_rows": len(edges) - within_warc}
    return {
        "same_domain_candidate_pair_rows": same_candidates,
        "cross_domain_candidate_pair_rows": len(candidates) - same_candidates,
        "same_domain_duplicate_pair_rows": same_edges,
        "cross_domain_duplicate_pair_rows": len(edges) - same_edges,
        **warc,
        "max_collision_bucket_size": max(len(members) for members in _buckets(connection).values()),
        "max_cluster_size": max(size for size, _ in clusters),
        "retained_ratio": round(representatives / len(clusters), 4),
    }


# --- the tests ---------------------------------------------------------------------------------


def test_collision_buckets_are_the_largest_buckets_of_every_band_row_with_their_caps(two_files, monkeypatch):
    database, output = two_files
    caps = CAPS[COLLISION_BUCKETS_FILE]
    with _connect(database) as connection:
        expected = _expected_collision_buckets(connection, **caps)
        assert _records(connection, COLLISION_BUCKETS_FILE) == expected
        # the boilerplate's buckets come first, cut to the caps but counted whole
        top = expected[0]
        assert (top["member_count"], top["domain_count"]) == (BOILERPLATE_COPIES, 25)
        assert (top["members_shown"], top["domains_shown"]) == (caps["members_shown"], caps["domains_shown"])
        assert len(top["member_doc_ids"].split(";")) == caps["members_shown"] < BOILERPLATE_COPIES
        # fewer buckets listed and fewer members shown: the caps are the ones the query applies
        small = {"buckets_listed": 10, "members_shown": 2, "domains_shown": 1}
        monkeypatch.setitem(CAPS, COLLISION_BUCKETS_FILE, small)
        smaller = _records(connection, COLLISION_BUCKETS_FILE)
        assert len(expected) > 10
        assert smaller == _expected_collision_buckets(connection, **small)
    assert _file(output, COLLISION_BUCKETS_FILE) == _as_csv(expected)


def test_domain_summary_counts_each_domains_documents_and_pairs(two_files, monkeypatch):
    database, output = two_files
    shown = CAPS[DOMAIN_SUMMARY_FILE]["partner_domains_shown"]
    with _connect(database) as connection:
        expected = _expected_domain_summary(connection, shown)
        assert _records(connection, DOMAIN_SUMMARY_FILE) == expected
        # every kind of pair occurs, and some domain has more partners than a row lists
        assert all(sum(row[name] for row in expected) for name in expected[0] if name.endswith("_pairs"))
        assert max(row["duplicate_partner_domains"] for row in expected) > shown
        monkeypatch.setitem(CAPS, DOMAIN_SUMMARY_FILE, {"partner_domains_shown": 1})
        assert _records(connection, DOMAIN_SUMMARY_FILE) == _expected_domain_summary(connection, 1)
    assert _file(output, DOMAIN_SUMMARY_FILE) == _as_csv(expected)


def test_duplicate_summary_groups_the_accepted_edges(two_files):
    database, output = two_files
    with _connect(database) as connection:
        expected = _expected_duplicate_summary(connection)
        assert _records(connection, DUPLICATE_SUMMARY_FILE) == expected
    assert {row["domain_relation"] for row in expected} == {"same_domain", "cross_domain"}
    assert _file(output, DUPLICATE_SUMMARY_FILE) == _as_csv(expected)


def test_counts_of_input_without_warc_files_have_no_warc_figures(two_files):
    """Without warc_filename the input has no WARC files: no pair is within or across one."""
    database, output = two_files
    with _connect(database) as connection:
        expected = _expected_counts(connection, None)
        manifest_counts = _manifest(output)["counts"]
        counts = run_counts(connection, TABLES, bucket_pressure(connection, TABLES))
        assert max_collision_bucket_size(connection, TABLES) == expected["max_collision_bucket_size"]
    assert {name: counts[name] for name in expected} == expected
    assert not {"within_warc_duplicate_pair_rows", "cross_warc_duplicate_pair_rows"} & set(counts)
    assert manifest_counts == counts
    # every count a fixture contract may compare is still there
    assert set(load_contract(FIXTURE)["counts"]) <= set(counts)


def test_counts_take_the_warc_file_from_warc_filename(warc_column):
    database, output = warc_column
    with _connect(database) as connection:
        file_of = dict(connection.execute(f"select doc_id, warc_filename from {TABLES.documents}").fetchall())
        expected = _expected_counts(connection, file_of)
        sources = connection.execute(f"select count(distinct source_file) from {TABLES.documents}").fetchall()
    assert sources == [(1,)]  # by input file, every pair would be within one
    assert expected["cross_warc_duplicate_pair_rows"] and expected["within_warc_duplicate_pair_rows"]
    counts = _manifest(output)["counts"]
    assert {name: counts[name] for name in expected} == expected


def test_mirror_domain_pairs_rank_pairs_of_domains_by_duplicate_edges(two_files):
    database, _ = two_files
    with _connect(database) as connection:
        pairs = Counter(
            tuple(sorted((left, right)))
            for left, right in connection.execute(
                f"select left_domain, right_domain from {TABLES.duplicate_pairs} where left_domain <> right_domain"
            ).fetchall()
        )
        ranked = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))
        limit = len(ranked) - 1  # all but one, ties among them broken by both names
        assert mirror_domain_pairs(connection, TABLES, limit) == [
            {"domain_a": a, "domain_b": b, "pairs": count} for (a, b), count in ranked[:limit]
        ]


def test_the_diagnostic_files_are_listed_with_their_caps_and_byte_identical_across_runs(two_files, tmp_path):
    database, output = two_files
    input_folder = database.parent / "input"
    _, again = _run(tmp_path, input_folder)
    manifest = _manifest(output)
    assert manifest["diagnostic_caps"] == CAPS
    listed = {entry["file"]: entry for entry in manifest["outputs"]}
    for name in DIAGNOSTIC_FILES:
        assert (output / name).read_bytes() == (again / name).read_bytes(), name
        assert listed[name]["rows"] == len(_file(output, name)), name
        assert listed[name] == next(entry for entry in _manifest(again)["outputs"] if entry["file"] == name)
