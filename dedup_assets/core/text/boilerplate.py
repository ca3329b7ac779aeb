"""Boilerplate you can see: the passages many documents share (a footer, a cookie notice, a chat
template), found before anything is removed, and the clusters that such a passage alone may have
made ("template clusters").

A shingle is boilerplate when it is in at least :data:`MIN_SHARE` of a seeded sample of
:data:`SAMPLE_SIZE` documents (and in at least :data:`MIN_DOCUMENTS` of them). Where a sampled
document has boilerplate shingles in a row, the tokens they cover are one passage; a passage that
holds a more shared one (a common word before a footer) counts as that one. A passage's count is
the sampled documents that have it, and its estimate that share of the corpus. The
sample makes the cost the same at any corpus size; a corpus no larger than the sample is counted
whole, exactly.

A cluster is a template cluster when its representative and its first removed member, with their
boilerplate shingles left out, are no longer duplicates (exact Jaccard below the run's threshold):
pages that may differ in everything but the template. A true copy of a page with a footer shares
its own words too, and stays a duplicate. The largest :data:`CLUSTERS_CHECKED` clusters are
checked."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import duckdb
import pyarrow as pa

from ..util.errors import InconsistentTables
from ..read.ingest import document_bodies
from .passages import MIN_SHARE, passage_shingles
from ..storage.tables import Tables
from .normalize import Shingling, joined, normalize_text, tokenize
from .tokenizers import TOKENIZERS

SAMPLE_SIZE = 2_000
MIN_DOCUMENTS = 5
CLUSTERS_CHECKED = 1_000
EXAMPLES = 5

PASSAGE_SCHEMA = pa.schema(
    [
        ("passage_rank", pa.int64()),
        ("passage", pa.string()),
        ("tokens", pa.int64()),
        ("sample_documents", pa.int64()),
        ("sampled", pa.int64()),
        ("share", pa.float64()),
        ("estimated_documents", pa.int64()),
        ("example_doc_ids", pa.string()),
    ]
)
TEMPLATE_SCHEMA = pa.schema(
    [
        ("cluster_id", pa.string()),
        ("cluster_size", pa.int64()),
        ("representative_doc_id", pa.string()),
        ("member_doc_id", pa.string()),
        ("shared_shingles", pa.int64()),
        ("boilerplate_shingles", pa.int64()),
        ("jaccard", pa.float64()),
        ("jaccard_without_boilerplate", pa.float64()),
    ]
)


def _shingles(tokens: list[str], size: int, unit: str) -> list[str]:
    """Every shingle in order, repeats included: ``text.token_shingles``' windows, which it gives
    as a set."""
    if len(tokens) <= size:
        return [joined(tokens, unit)] if tokens else []
    return [joined(tokens[first : first + size], unit) for first in range(len(tokens) - size + 1)]


def _passages(tokens: list[str], shingles: list[str], frequent: set[str], size: int, unit: str) -> list[tuple[str, int]]:
    """The runs of tokens the document's boilerplate shingles cover, as (text, tokens)."""
    covered = [False] * len(tokens)
    for first, shingle in enumerate(shingles):
        if shingle in frequent:
            covered[first : first + size] = [True] * min(size, len(tokens) - first)
    runs, start = [], None
    for place, inside in enumerate(covered + [False]):
        if inside and start is None:
            start = place
        elif not inside and start is not None:
            runs.append((joined(tokens[start:place], unit), place - start))
            start = None
    return runs


def boilerplate_passages(
    connection: duckdb.DuckDBPyConnection, tables: Tables, shingling: Shingling, share: float = MIN_SHARE,
    min_documents: int = MIN_DOCUMENTS,
) -> pa.Table:
    """The passages (``PASSAGE_SCHEMA``) of the seeded sample of ``tables.documents``, most
    shared first: the runs of tokens that shingles in at least ``share`` of the sample (and in
    ``min_documents``) cover."""
    total = connection.execute(f"select count(*) from {tables.documents}").fetchall()[0][0]
    # the sample: the doc_ids with the smallest md5, the same for the same documents on any run
    sampled_ids = connection.sql(
        f"select doc_id from {tables.documents} order by md5(doc_id), doc_id limit {SAMPLE_SIZE}"
    ).to_arrow_table().column("doc_id")
    # by row number where the bodies stay in the input's Parquet files: a scan would decode them all
    rows = document_bodies(connection, tables.documents, sampled_ids).select(["doc_id", "body"]).to_pylist()
    rows = [(row["doc_id"], row["body"]) for row in rows]
    documents = []
    frequency: Counter[str] = Counter()
    for doc_id, body in rows:
        tokens = tokenize(normalize_text(body), shingling.unit)
        shingles = _shingles(tokens, shingling.size, shingling.unit)
        documents.append((doc_id, tokens, shingles))
        frequency.update(set(shingles))
    sampled = len(rows)
    least = max(min_documents, math.ceil(share * sampled))
    frequent = {shingle for shingle, count in frequency.items() if count >= least}
    having: dict[str, set[str]] = defaultdict(set)
    lengths: dict[str, int] = {}
    for doc_id, tokens, shingles in documents:
        if frequent.isdisjoint(shingles):
            continue
        for text, length in _passages(tokens, shingles, frequent, shingling.size, shingling.unit):
            having[text].add(doc_id)
            lengths[text] = length
    ranked = _merged(having, lengths, shingling.unit)
    return pa.Table.from_pylist(
        [
            {
                "passage_rank": rank,
                "passage": text,
                "tokens": lengths[text],
                "sample_documents": len(having[text]),
                "sampled": sampled,
                "share": len(having[text]) / sampled,
                "estimated_documents": round(len(having[text]) / sampled * total),
                "example_doc_ids": ";".join(sorted(having[text])[:EXAMPLES]),
            }
            for rank, text in enumerate(ranked, start=1)
        ],
        schema=PASSAGE_SCHEMA,
    )


def shared_passages(connection: duckdb.DuckDBPyConnection, tables: Tables, shingling: Shingling, share: float) -> list[str]:
    """What ``ignore_shared_above`` leaves out: the passages made of the shingles that at least
    ``share`` of the sample has, most shared first. Each is a run of such shingles in a document,
    so leaving out the passages' shingles leaves out those shingles, however the passages that
    hold them differ from page to page. A passage shorter than a shingle (of a document that
    short) would leave out nothing a longer document has, and is not one."""
    found = boilerplate_passages(connection, tables, Shingling(shingling.size, shingling.unit), share, 1)
    return [row["passage"] for row in found.to_pylist() if row["tokens"] >= shingling.size]


def _merged(having: dict[str, set[str]], lengths: dict[str, int], unit: str) -> list[str]:
    """The passages, most shared first, each one that holds a more shared passage counted with it:
    a footer after a common word ("eh" + the footer) is the footer again."""
    pad = TOKENIZERS[unit].separator
    kept: list[str] = []
    for text in sorted(having, key=lambda text: (-len(having[text]), -lengths[text], text)):
        holder = next((other for other in kept if f"{pad}{other}{pad}" in f"{pad}{text}{pad}"), None)
        if holder is None:
            kept.append(text)
        else:
            having[holder] |= having.pop(text)
    return sorted(kept, key=lambda text: (-len(having[text]), -lengths[text], text))


def template_clusters(
    connection: duckdb.DuckDBPyConnection, tables: Tables, passages: str, shingling: Shingling, threshold: float
) -> pa.Table:
    """The template clusters (``TEMPLATE_SCHEMA``) among the largest clusters of
    ``tables.clusters``, by the boilerplate of the ``passages`` table: without the shingles of
    those passages, the representative and its first removed member have a Jaccard below
    ``threshold``."""
    found = [text for (text,) in connection.execute(f"select passage from {passages}").fetchall()]
    frequent = set(passage_shingles(found, shingling.size, shingling.unit))
    if not frequent:
        return pa.Table.from_pylist([], schema=TEMPLATE_SCHEMA)
    pairs = connection.execute(
        f"""
        select cluster_id, cluster_size, representative_doc_id, doc_id
        from {tables.clusters}
        where representative_rank = 2 and decision <> 'matched_reference'
        order by cluster_size desc, cluster_id
        limit {CLUSTERS_CHECKED}
        """
    ).fetchall()
    # by doc_id, not by a join: a join with documents read over its Parquet files decodes every
    # body of the corpus (29 s of a 1M run), these are at most two per cluster checked
    wanted = sorted({doc_id for _, _, representative, member in pairs for doc_id in (representative, member)})
    if not wanted:
        return pa.Table.from_pylist([], schema=TEMPLATE_SCHEMA)
    bodies = document_bodies(connection, tables.documents, pa.array(wanted, pa.string()), in_order=False)
    body_of = dict(zip(bodies.column("doc_id").to_pylist(), bodies.column("body").to_pylist()))
    if len(body_of) < len(wanted):
        raise InconsistentTables(
            f"{len(wanted) - len(body_of):,} documents of the clusters are not in documents: re-materialize "
            "documents and everything downstream"
        )
    found = []
    for cluster_id, size, representative, member in pairs:
        kept, removed = (
            set(_shingles(tokenize(normalize_text(body_of[doc_id]), shingling.unit), shingling.size, shingling.unit))
            for doc_id in (representative, member)
        )
        shared, union = kept & removed, kept | removed
        own_shared, own_union = len(shared - frequent), len(union - frequent)
        without = own_shared / own_union if own_union else 0.0
        if len(shared) > own_shared and without < threshold:
            found.append(
                {
                    "cluster_id": cluster_id,
                    "cluster_size": size,
                    "representative_doc_id": representative,
                    "member_doc_id": member,
                    "shared_shingles": len(shared),
                    "boilerplate_shingles": len(shared) - own_shared,
                    "jaccard": len(shared) / len(union),
                    "jaccard_without_boilerplate": without,
                }
            )
    return pa.Table.from_pylist(found, schema=TEMPLATE_SCHEMA)
