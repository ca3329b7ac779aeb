"""Cluster guards and the two cluster modes: the chained-member and cluster-size warnings, the
star mode's blocking check, and star and components clusters against a plain Python
re-implementation on generated chains."""

import csv
import random
from pathlib import Path

import duckdb
import numpy as np
import networkx as nx
import pandas as pd
import pyarrow as pa
import pytest

from dedup_assets.checks import cluster_rules
from dedup_assets.core.verify.jaccard import shingle_set_jaccard
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.storage.tables import Tables
from dedup_assets.core.text.normalize import Shingling, document_shingles

from .conftest import PROJECT_ROOT

CLUSTER_CASES = PROJECT_ROOT / "data" / "cluster_cases.csv"
TABLES = Tables.in_schema("dedup")


def _checks(result) -> dict:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _kept(runner) -> set[str]:
    clusters = runner.table("clusters")
    return set(clusters.loc[clusters["decision"] == "kept_representative", "doc_id"])


def test_components_chain_a_member_and_the_check_warns_naming_the_cluster(runner):
    result = runner.run(CLUSTER_CASES, audit_sample_size=0)
    checks = _checks(result)
    chained = checks["no_chained_members"]
    assert not chained.passed and chained.severity.value == "WARN"
    assert "1 document in 1 cluster is removed with Jaccard below 0.7" in chained.description
    assert "worst: cluster-chain-a, 1 of 3, down to 0.6386" in chained.description
    assert "cluster_mode 'star'" in chained.description
    assert chained.metadata["chained_members"].value == 1
    assert checks["largest_cluster_within_max_cluster_size"].passed
    assert checks["fixture_contract"].passed
    # components chain by design: the blocking check holds them to their chained mark instead
    assert checks["removals_meet_threshold"].passed
    assert checks["removals_meet_threshold"].description == (
        "2 removed documents: 1 at or above Jaccard 0.7 with the representative, 1 below it and marked chained "
        "(see no_chained_members)"
    )
    inspection = pd.read_csv(runner.output_dir / "cluster_inspection.csv").set_index("cluster_id")
    assert inspection.loc["cluster-chain-a", "chained_members"] == 1
    assert inspection.loc["cluster-chain-a", "min_jaccard_to_representative"] == pytest.approx(0.6386, abs=1e-4)
    assert len(_kept(runner)) == 9
    # the planted pair LSH misses at 8 x 8 is a true pair the exhaustive audit finds, not found
    audit = runner.table("recall_audit").set_index(["left_doc_id", "right_doc_id"])
    assert not audit.loc[("planted-p", "planted-q"), "found"]
    assert audit.loc[("planted-p", "planted-q"), "shared_bands"] == 0


def test_star_mode_keeps_both_ends_of_the_chain_and_checks_every_removal(runner):
    result = runner.run(CLUSTER_CASES, cluster_mode="star")
    checks = _checks(result)
    assert checks["removals_meet_threshold"].passed
    assert checks["removals_meet_threshold"].description == (
        "1 removed document, each at or above Jaccard 0.7 with its representative"
    )
    assert checks["no_chained_members"].passed
    # its contract is written for components: compared with nothing, it passes saying so
    contract = checks["fixture_contract"]
    assert contract.description.startswith("not compared: contract ") and "cluster_mode=star" in contract.description
    assert contract.passed and contract.metadata["compared"].value is False
    kept = _kept(runner)
    assert len(kept) == 10 and {"chain-a", "chain-c"} <= kept and "chain-b" not in kept
    assert runner.lineage("clusters")["cluster_mode"] == "star"


def test_a_cluster_above_max_cluster_size_warns(runner):
    checks = _checks(runner.run(CLUSTER_CASES, max_cluster_size=2))
    largest = checks["largest_cluster_within_max_cluster_size"]
    assert not largest.passed and largest.severity.value == "WARN"
    assert largest.description.startswith("cluster-chain-a has 3 documents: more than max_cluster_size=2")
    assert largest.metadata["largest_cluster_size"].value == 3



def test_a_giant_cluster_of_copies_is_not_blamed_on_chaining():
    """Issue 49's 2M one-word documents: clusters of 175,512 identical copies were warned of as
    chains through boilerplate, with cluster_mode 'star' as the way out, which splits nothing
    where no member is chained. A cluster with chained members still gets that advice."""
    rows = [("cluster-copies", 5, "c0", False, "removed_duplicate")] * 5 + [
        ("cluster-chain", 4, "h0", doc == 3, "removed_duplicate") for doc in range(4)
    ]
    # the matches of one reference document are no cluster of the input's: never warned of
    rows += [("reference:r.csv:r0", 9, "r0", False, "matched_reference")] * 9
    with duckdb.connect() as connection:
        connection.execute(
            "create table clusters as select * from (values "
            + ", ".join(f"('{c}', {n}, '{r}', {str(x).lower()}, '{d}')" for c, n, r, x, d in rows)
            + ") as t(cluster_id, cluster_size, representative_doc_id, chained, decision)"
        )
        warned = cluster_rules.largest_cluster_within(connection, "clusters", 3)
        copies_only = cluster_rules.largest_cluster_within(connection, "(select * from clusters where cluster_id = 'cluster-copies')", 3)
    assert not warned.passed and warned.description == (
        "cluster-copies has 5 documents; cluster-chain has 4 documents: more than max_cluster_size=3. A cluster this "
        "large is usually documents chained through shared boilerplate; cluster_inspection.csv shows its chained "
        "members. cluster_mode 'star' removes only documents at or above the threshold with the representative; "
        "re-materialize clusters and everything downstream. cluster-copies has no chained member: every document is "
        "at or above the threshold with the representative, one page copied (or nearly) that many times, such as an "
        "error page or a cookie wall, which cluster_mode 'star' would not split; raise max_cluster_size to accept "
        "such clusters."
    )
    assert "star' removes" not in copies_only.description and "no chained member" in copies_only.description

def _removals(connection, mode: str, **sample):
    return cluster_rules.removals_meet_threshold(connection, TABLES, Shingling(5), "fss", 0.7, mode, 0, **sample)


def test_star_check_fails_on_a_removal_below_the_threshold(tmp_path):
    database = tmp_path / "db.duckdb"
    run_library(str(CLUSTER_CASES), str(database), None, Settings(cluster_mode="star"))
    with duckdb.connect(str(database)) as connection:
        passed = _removals(connection, "star")
        assert passed.passed
        # what components mode decides: chain-c removed for chain-a, 0.64 apart
        connection.execute(
            "update dedup.clusters set decision = 'removed_duplicate', representative_doc_id = 'chain-a' "
            "where doc_id = 'chain-c'"
        )
        failed = _removals(connection, "star")
        # under components the same removal must carry its chained mark, and this one lacks it
        unmarked = _removals(connection, "components")
        connection.execute("update dedup.clusters set chained = true where doc_id = 'chain-c'")
        marked = _removals(connection, "components")
        connection.execute("update dedup.clusters set chained = true where doc_id = 'chain-b'")
        wrongly_marked = _removals(connection, "components")
    assert not failed.passed and failed.severity.value == "ERROR"
    assert failed.description == (
        "star clusters broke their rule: re-materialize clusters, and report it if it recurs. chain-c is "
        "removed for chain-a at Jaccard 0.6386 < 0.7"
    )
    assert not unmarked.passed and unmarked.description.endswith(
        "chain-c is removed for chain-a at Jaccard 0.6386 < 0.7 but not marked chained"
    )
    assert marked.passed
    assert not wrongly_marked.passed and wrongly_marked.description.endswith(
        "chain-b is marked chained but is at Jaccard 0.8013 with chain-a"
    )


def test_removals_check_fails_on_an_unscored_removal_below_the_threshold(tmp_path):
    database = tmp_path / "db.duckdb"
    run_library(str(CLUSTER_CASES), str(database), None, Settings(cluster_mode="star"))
    with duckdb.connect(str(database)) as connection:
        passed = _removals(connection, "star")
        # chain-c removed for chain-a, a pair verification never scored: measured from the bodies
        connection.execute(
            "update dedup.clusters set decision = 'removed_duplicate', representative_doc_id = 'chain-a' "
            "where doc_id = 'chain-c'"
        )
        connection.execute("delete from dedup.scored_pairs where left_doc_id = 'chain-a' and right_doc_id = 'chain-c'")
        failed = _removals(connection, "star")
    assert passed.passed and passed.metadata["measured_again"].value == 0
    assert not failed.passed and failed.metadata["measured_again"].value == 1
    assert failed.description.endswith("chain-c is removed for chain-a at Jaccard 0.6386 < 0.7")


def _scored_removal(connection) -> tuple[str, str, float]:
    """A removed document, its representative and their Jaccard in scored_pairs, of two texts."""
    return connection.execute(
        """
        select c.doc_id, c.representative_doc_id, s.jaccard
        from dedup.clusters c
        join dedup.scored_pairs s on s.left_doc_id = least(c.doc_id, c.representative_doc_id)
         and s.right_doc_id = greatest(c.doc_id, c.representative_doc_id)
        where c.decision = 'removed_duplicate' and not s.is_exact
        order by s.jaccard, c.doc_id limit 1
        """
    ).fetchall()[0]


def test_removals_check_trusts_scored_pairs_but_recomputes_a_sample_by_the_reference(tmp_path):
    database = tmp_path / "db.duckdb"
    run_library(str(PROJECT_ROOT / "data" / "documents.csv"), str(database), None)
    corrupt = "update dedup.scored_pairs set jaccard = ? where left_doc_id = ? and right_doc_id = ?"
    with duckdb.connect(str(database)) as connection:
        passed = _removals(connection, "components")
        doc_id, kept, jaccard = _scored_removal(connection)
        left, right = sorted([doc_id, kept])
        bodies = dict(connection.execute("select doc_id, body from dedup.documents").fetchall())
        connection.execute(corrupt, [0.99, left, right])
        # every scored removal of the fixture is in the sample: the reference disagrees
        corrupted = _removals(connection, "components")
        # with no sample, the scored Jaccard is trusted without reading a body
        trusted = _removals(connection, "components", sample_size=0)
        connection.execute(corrupt, [0.5, left, right])
        trusted_below = _removals(connection, "components", sample_size=0)
    scored = passed.metadata["trusted_from_scored_pairs"].value + passed.metadata["reference_sample"].value
    assert passed.passed and scored > 1 and passed.metadata["reference_sample"].value == scored
    assert passed.metadata["same_text"].value > 0 and passed.metadata["measured_again"].value == 0
    reference = shingle_set_jaccard(*(document_shingles(bodies[d], Shingling(5)) for d in (left, right)))
    assert jaccard == pytest.approx(reference, abs=1e-12)
    assert not corrupted.passed and corrupted.description.startswith(
        "scored_pairs disagrees with the reference Jaccard: re-materialize scored_pairs and everything downstream, "
        f"and report it if it recurs. scored_pairs has Jaccard 0.9900 for ({left}, {right}), but their bodies give "
        f"{reference:.4f} by the reference"
    )
    assert trusted.passed and trusted.metadata["reference_sample"].value == 0
    assert trusted.metadata["trusted_from_scored_pairs"].value == scored
    assert not trusted_below.passed
    assert f"{doc_id} is removed for {kept} at Jaccard 0.5000 < 0.7 but not marked chained" in trusted_below.description


def test_the_reference_sample_depends_on_the_pairs_and_the_seed_not_their_order():
    left = pa.array([f"doc-{n:04d}" for n in range(500)])
    right = pa.array([f"doc-{n:04d}x" for n in range(500)])
    drawn = cluster_rules.reference_sample(left, right, 7, 50)
    order = np.random.default_rng(0).permutation(500)
    shuffled = cluster_rules.reference_sample(left.take(order), right.take(order), 7, 50)
    assert len(drawn) == 50 and sorted(order[shuffled].tolist()) == drawn.tolist()
    assert cluster_rules.reference_sample(left, right, 8, 50).tolist() != drawn.tolist()
    assert cluster_rules.reference_sample(left, right, 7, 1_000).tolist() == list(range(500))


def _chains(path: Path, seed: int) -> dict[str, dict]:
    """A CSV of chains: each document is the previous one with a few words changed, so its
    neighbours are duplicates and the chain's ends are not; some are exact copies of the previous
    one; crawl dates from a few days, so that ties fall to token counts and doc_ids."""
    rng = random.Random(seed)
    words = [f"word{n}" for n in range(400)]
    rows = {}
    for chain in range(6):
        text = [rng.choice(words) for _ in range(rng.randint(60, 120))]
        for link in range(rng.randint(2, 7)):
            copy = link > 0 and (rng.random() < 0.2 or (chain, link) == (0, 1))
            if not copy:  # else an exact copy of the previous link
                for _ in range(rng.randint(1, 3)):
                    text[rng.randrange(len(text))] = rng.choice(words)
            rows[f"c{chain}-{link}"] = {
                "doc_id": f"c{chain}-{link}",
                "source": "test",
                "domain": f"site{rng.randint(0, 3)}.example",
                "crawled_at": f"2026-01-1{rng.randint(0, 3)}",
                "title": "",
                "body": " ".join(text),
            }
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["doc_id", "source", "domain", "crawled_at", "title", "body"])
        writer.writeheader()
        writer.writerows(rows.values())
    return rows


def _plain_clusters(rows: dict, edges: list[tuple[str, str]], tokens: dict, mode: str) -> list[set[str]]:
    """The clusters as the README describes them, in plain Python."""
    sets = {doc_id: document_shingles(row["body"], Shingling(5)) for doc_id, row in rows.items()}

    def jaccard(a: str, b: str) -> float:
        return len(sets[a] & sets[b]) / len(sets[a] | sets[b])

    graph = nx.Graph(edges)
    graph.add_nodes_from(rows)
    clusters = []
    for component in nx.connected_components(graph):
        # the keep rule: newest crawl, then most tokens, then the smallest doc_id
        left = sorted(component, key=lambda d: (_negated(rows[d]["crawled_at"]), -tokens[d], d))
        while left:
            best = left[0]
            taken = [d for d in left if mode == "components" or d == best or jaccard(d, best) >= 0.7]
            clusters.append(set(taken))
            left = [d for d in left if d not in taken]
    return clusters


def _negated(date: str) -> tuple:
    return tuple(-int(part) for part in date.split("-"))


@pytest.mark.parametrize("mode", ["components", "star"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clusters_equal_a_plain_python_clustering_of_generated_chains(tmp_path, mode, seed):
    rows = _chains(tmp_path / "chains.csv", seed)
    database = tmp_path / "db.duckdb"
    run_library(str(tmp_path / "chains.csv"), str(database), None, Settings(cluster_mode=mode))
    with duckdb.connect(str(database), read_only=True) as connection:
        edges = connection.execute("select left_doc_id, right_doc_id from dedup.duplicate_pairs").fetchall()
        tokens = dict(connection.execute("select doc_id, token_count from dedup.fingerprinted").fetchall())
        stored = connection.execute(
            "select list(doc_id order by doc_id) from dedup.clusters group by cluster_id"
        ).fetchall()
        chained = connection.execute("select count(*) filter (where chained) from dedup.clusters").fetchall()[0][0]
    expected = _plain_clusters(rows, edges, tokens, mode)
    assert sorted(sorted(members) for (members,) in stored) == sorted(sorted(c) for c in expected)
    if mode == "star":
        assert chained == 0
    else:
        assert chained > 0  # the corpus chains
    assert any(len(c) > 1 for c in expected)  # the corpus has clusters to get wrong
    copies = [doc for doc, row in rows.items() if sum(r["body"] == row["body"] for r in rows.values()) > 1]
    assert copies
