"""The keep rule: which member of a duplicate cluster is kept. It is written here only: the one-shot
clusters (``cluster.py``, components and star), the incremental batches' decisions
(``incremental.py``) and the ray engine's clusters (``distributed/steps.py``) all order members
with :func:`keep_order`.

Members are ordered by, in turn:

1. ``prefer_domains``: a member whose ``domain`` is earlier in the list first. An entry matches
   its domain and every subdomain of it (``example.com`` matches ``www.example.com`` and
   ``news.example.com``, not ``badexample.com``), regardless of case and of a trailing dot; a
   member the list does not match comes after every listed one. Empty by default, which leaves
   the order below alone.
2. the newest ``crawled_at``, an undated member after every dated one;
3. the most tokens;
4. the smallest ``doc_id``.

doc_ids are unique, so the order is total: every path and engine keeps the same document.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# what the rule reads of each member
KEEP_COLUMNS = ("doc_id", "domain", "crawled_at", "token_count")
_PREFERENCE = "domain_preference"


def normalized_domains(domains: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Domains as the rule compares them: lower-cased, without the trailing dot of a fully
    qualified name; a missing domain is empty, which no entry matches."""
    return pc.utf8_rtrim(pc.utf8_lower(pc.fill_null(domains, "")), ".")


def domain_preference(domains: pa.Array | pa.ChunkedArray, prefer_domains: Sequence[str]) -> pa.Array:
    """Each domain's place in ``prefer_domains`` (normalized entries): the first entry that
    matches it, or ``len(prefer_domains)`` where none does."""
    domains = normalized_domains(domains)
    preference = pa.array(np.full(len(domains), len(prefer_domains), dtype=np.int32))
    for place, preferred in reversed(list(enumerate(prefer_domains))):  # so the first match wins
        matches = pc.or_(pc.equal(domains, preferred), pc.ends_with(domains, "." + preferred))
        preference = pc.if_else(matches, np.int32(place), preference)
    return preference


def keep_order(members: pa.Table, prefer_domains: Sequence[str] = (), within: str | None = None) -> pa.Array:
    """Indices that put ``members`` (with KEEP_COLUMNS) in the rule's order; with ``within``,
    grouped by that column first (ascending) and in the rule's order inside each group."""
    columns = {within: members[within]} if within else {}
    if prefer_domains:
        columns[_PREFERENCE] = domain_preference(members["domain"], prefer_domains)
    keys = [(name, "ascending") for name in columns]
    columns.update({name: members[name] for name in ("crawled_at", "token_count", "doc_id")})
    keys += [("crawled_at", "descending"), ("token_count", "descending"), ("doc_id", "ascending")]
    # nulls sort last in every pyarrow (its default): an undated member after every dated one
    return pc.sort_indices(pa.table(columns), sort_keys=keys)


def keep_ranked(rows: list[dict], prefer_domains: Sequence[str] = ()) -> list[dict]:
    """``rows`` (dicts with KEEP_COLUMNS, as the incremental decisions hold members) in the
    rule's order."""
    if not rows:
        return []
    table = pa.Table.from_pylist([{name: row[name] for name in KEEP_COLUMNS} for row in rows])
    return [rows[index] for index in keep_order(table, prefer_domains).to_pylist()]
