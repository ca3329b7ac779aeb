"""The keep rule: which member of a duplicate cluster is kept. It is written here only: the one-shot
clusters (``cluster.py``, components and star), the incremental batches' decisions
(``incremental/batch_clusters.py``) and the ray engine's clusters (``distributed/ray_clusters.py``)
all order members with :func:`keep_order`.

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
:func:`checked_domains` is what ``Settings`` stores of the list, refusing an entry that could
never match or never decide.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# what the rule reads of each member
KEEP_COLUMNS = ("doc_id", "domain", "crawled_at", "token_count")
_PREFERENCE = "domain_preference"
# a host has none of these: a prefer_domains entry with one is a URL, a port or a pattern
_NOT_IN_A_HOST = "/:@?#*[]"


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


def checked_domains(entries: list[str]) -> list[str]:
    """``prefer_domains`` as the rule compares them, or a ValueError saying what to write
    instead: an entry must be a host, named once, and able to decide."""
    if not isinstance(entries, (list, tuple)) or not all(isinstance(entry, str) for entry in entries):
        raise ValueError(f'prefer_domains must be a list of domains, e.g. ["example.com"], got {entries!r}')
    domains = normalized_domains(pa.array([entry.strip() for entry in entries], pa.string())).to_pylist()
    for index, (entry, domain) in enumerate(zip(entries, domains)):
        if not domain:
            raise ValueError(f"prefer_domains[{index}] is empty: give a domain such as example.com, or leave it out")
        if domain.startswith(".") or any(mark in domain for mark in _NOT_IN_A_HOST) or any(c.isspace() for c in domain):
            raise ValueError(
                f"prefer_domains[{index}] is {entry!r}, not a domain: give the host alone, e.g. example.com "
                "(an entry matches its subdomains too, such as www.example.com)"
            )
    # an entry an earlier one matches (itself again, or a subdomain of it) can never decide
    for index, first in enumerate(domain_preference(pa.array(domains, pa.string()), domains).to_pylist()):
        if first == index:
            continue
        if domains[first] == domains[index]:
            raise ValueError(
                f"prefer_domains names {domains[index]!r} twice (prefer_domains[{first}] and "
                f"prefer_domains[{index}]): keep one"
            )
        raise ValueError(
            f"prefer_domains[{index}] ({domains[index]!r}) can never decide: prefer_domains[{first}] "
            f"({domains[first]!r}) before it matches its subdomains already. Put {domains[index]!r} "
            f"first to prefer it over the rest of {domains[first]!r}, or leave it out"
        )
    return domains


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
