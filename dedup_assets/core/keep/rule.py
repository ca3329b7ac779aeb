"""The keep rule: which member of a duplicate cluster is kept, and why each other one went. It is
written here only: the one-shot clusters (``cluster/components.py``, components and star), the incremental
batches' decisions (``incremental/batch_clusters.py``) and the ray engine's clusters
(``distributed/ray_clusters.py``) all order members and name reasons with one :class:`KeepPolicy`.

The ``keep`` setting is an ordered list of rules; members are ordered by each in turn:

- ``prefer_domains``: a member whose ``domain`` is earlier in the ``prefer_domains`` list first. An
  entry matches its domain and every subdomain of it (``example.com`` matches ``www.example.com``
  and ``news.example.com``, not ``badexample.com``), regardless of case and of a trailing dot; a
  member the list does not match comes after every listed one.
- ``newest`` / ``oldest``: ``crawled_at``; ``longest`` / ``shortest``: ``token_count``.
- ``<column> desc`` / ``<column> asc``: any column of ``documents`` (an input's own column, such as
  a quality score), numbers, dates, text or booleans; ``desc`` keeps the highest.

A null sorts after every value, whatever the direction, and the smallest ``doc_id`` decides last.
doc_ids are unique, so the order is total: every path and engine keeps the same document. The
default, ``prefer_domains, newest, longest``, is the rule before ``keep`` existed.

A removed member's ``keep_reason`` names the first rule on which it and its representative differ,
and both values, the representative's first: ``quality 0.91 > 0.42``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# what every policy reads of each member; a column rule adds its own column (KeepRule.field)
KEEP_COLUMNS = ("doc_id", "domain", "crawled_at", "token_count")
DEFAULT_KEEP = ("prefer_domains", "newest", "longest")
# named rules: (the column they read, descending)
NAMED_RULES = {
    "newest": ("crawled_at", True),
    "oldest": ("crawled_at", False),
    "longest": ("token_count", True),
    "shortest": ("token_count", False),
}
PREFER_DOMAINS = "prefer_domains"
ORDERS = {"desc": True, "asc": False}
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


@dataclass(frozen=True)
class KeepRule:
    """One rule: the ``keep`` entry it was written as, the documents column it reads, the
    column of the members table that holds it (``field``) and its direction."""

    entry: str
    column: str
    descending: bool
    as_type: str | None = None  # a text column's values compared as this DuckDB type (columns.py)

    def value_sql(self, column: str) -> str:
        """``column`` (SQL) as the rule compares it: a text value trimmed, empty as null, and cast
        to ``as_type``."""
        if self.as_type is None:
            return column
        return f"try_cast(nullif(trim({column}), '') as {self.as_type})"

    @property
    def field(self) -> str:
        # a column of the input under a name of its own, so it cannot shadow the members' columns
        return self.column if self.column in KEEP_COLUMNS else f"keep.{self.column}"

    @property
    def label(self) -> str:
        """How a reason names the rule: ``newest crawled_at``, ``quality``."""
        if self.entry in NAMED_RULES:
            return f"{self.entry} {self.column}"
        return self.entry if self.entry == PREFER_DOMAINS else self.column


def _rule(index: int, entry: str) -> KeepRule:
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"keep[{index}] is {entry!r}: give a rule such as newest, longest or 'quality desc'")
    entry = " ".join(entry.split())
    if entry == PREFER_DOMAINS:
        return KeepRule(entry, "domain", False)
    if entry in NAMED_RULES:
        return KeepRule(entry, *NAMED_RULES[entry])
    column, _, order = entry.rpartition(" ")
    if not column or order.lower() not in ORDERS:
        named = ", ".join([PREFER_DOMAINS, *NAMED_RULES])
        raise ValueError(
            f"keep[{index}] is {entry!r}: name a rule ({named}) or a column and its order, e.g. "
            f"'{entry if not column else column} desc' to keep the highest value, '... asc' the lowest"
        )
    return KeepRule(entry, column, ORDERS[order.lower()])


@dataclass(frozen=True)
class KeepPolicy:
    """The ``keep`` rules in order, with the ``prefer_domains`` list its rule of that name reads."""

    rules: tuple[KeepRule, ...]
    prefer_domains: tuple[str, ...] = ()

    @classmethod
    def parse(cls, entries: Sequence[str] = DEFAULT_KEEP, prefer_domains: Sequence[str] = ()) -> KeepPolicy:
        """The policy ``keep`` and ``prefer_domains`` (checked) say, or a ValueError saying what to
        write instead."""
        if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
            raise ValueError(f"keep must be a list of rules, e.g. [\"quality desc\", \"newest\"], got {entries!r}")
        rules = tuple(_rule(index, entry) for index, entry in enumerate(entries))
        for index, rule in enumerate(rules):
            earlier = next((i for i, other in enumerate(rules[:index]) if _same_order(other, rule)), None)
            if earlier is not None:
                raise ValueError(
                    f"keep[{index}] ({rule.entry!r}) can never decide: keep[{earlier}] "
                    f"({rules[earlier].entry!r}) orders by {rule.column} already. Keep one"
                )
        if prefer_domains and not any(rule.entry == PREFER_DOMAINS for rule in rules):
            raise ValueError(
                f"prefer_domains is set, but keep ({list(entries)}) has no prefer_domains rule, so the list "
                f"would decide nothing: add \"prefer_domains\" to keep where it should decide, or leave prefer_domains empty"
            )
        return cls(rules, tuple(prefer_domains))

    @property
    def input_columns(self) -> tuple[KeepRule, ...]:
        """The rules that read a documents column beyond KEEP_COLUMNS: the members table needs it
        under the rule's ``field``."""
        return tuple(rule for rule in self.rules if rule.field != rule.column)

    def select_list(self, alias: str) -> str:
        """The rules' input columns as a SQL select list over the relation ``alias``, each under its
        field and as its rule compares it: ``, d."quality" as "keep.quality"``."""
        return "".join(f", {rule.value_sql(alias + '.' + quoted(rule.column))} as {quoted(rule.field)}" for rule in self.input_columns)

    @property
    def member_columns(self) -> tuple[str, ...]:
        """The columns of a members table the policy reads."""
        return KEEP_COLUMNS + tuple(rule.field for rule in self.input_columns)

    def _sort_columns(self, members: pa.Table) -> list[tuple[str, pa.Array | pa.ChunkedArray, bool]]:
        """(label, values, descending) of each rule that can decide, doc_id last."""
        columns = []
        for rule in self.rules:
            if rule.entry != PREFER_DOMAINS:
                columns.append((rule.label, _comparable(members[rule.field]), rule.descending))
            elif self.prefer_domains:  # an empty list decides nothing
                columns.append((PREFER_DOMAINS, domain_preference(members["domain"], self.prefer_domains), False))
        return columns + [("doc_id", members["doc_id"], False)]

    def order(self, members: pa.Table, within: str | None = None) -> pa.Array:
        """Indices that put ``members`` (KEEP_COLUMNS and the rules' fields) in the policy's order;
        with ``within``, grouped by that column first (ascending) and in order inside each group."""
        sort = ([(within, members[within], False)] if within else []) + self._sort_columns(members)
        table = pa.table({str(place): values for place, (_, values, _) in enumerate(sort)})
        keys = [(str(place), "descending" if descending else "ascending") for place, (_, _, descending) in enumerate(sort)]
        # nulls sort last in every pyarrow (its default), either way
        return pc.sort_indices(table, sort_keys=keys)

    def ranked(self, rows: list[dict]) -> list[dict]:
        """``rows`` (dicts with KEEP_COLUMNS and the rules' fields, as the incremental decisions
        hold members) in the policy's order."""
        if not rows:
            return []
        table = pa.Table.from_pylist([{name: row[name] for name in self.member_columns} for row in rows])
        return [rows[index] for index in self.order(table).to_pylist()]

    def reasons(self, members: pa.Table, representative: np.ndarray) -> pa.Array:
        """For each member (row i), why its representative (row ``representative[i]``) was kept
        and not it: the first rule on which the two differ, and both values, the representative's
        first (``quality 0.91 > 0.42``). Null where a member is its own representative, or where
        the rule would rank the member first (an incremental batch keeps an earlier kept copy)."""
        reasons = pa.nulls(members.num_rows, pa.string())
        kept_rows = pa.array(representative, pa.int64())
        open_ = np.arange(members.num_rows) != representative  # members still to be decided
        for label, values, descending in self._sort_columns(members):
            kept = values.take(kept_rows)
            if label == PREFER_DOMAINS:
                listed, domains = len(self.prefer_domains), members["domain"]
                shown = [_preference_text(domains.take(kept_rows), kept, listed), " over ", _preference_text(domains, values, listed)]
            else:
                shown = [_shown(kept), " > " if descending else " < ", _shown(values)]
            differ = open_ & ~_same(kept, values)
            wins = _first(kept, values, descending)
            reasons = pc.if_else(pa.array(differ & wins), pc.binary_join_element_wise(label + " ", *shown, ""), reasons)
            open_ &= ~differ
        return reasons

def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _same_order(one: KeepRule, other: KeepRule) -> bool:
    """Whether two rules read the same thing: the second could never decide."""
    if PREFER_DOMAINS in (one.entry, other.entry):
        return one.entry == other.entry
    return one.field == other.field


def _comparable(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Values as the rule compares them: a NaN is null (missing, last), as no order holds it."""
    if pa.types.is_floating(values.type):
        return pc.if_else(pc.is_nan(values), pa.scalar(None, values.type), values)
    return values


def _same(left: pa.Array, right: pa.Array) -> np.ndarray:
    """Equal, or both null."""
    both_null = pc.and_(pc.is_null(left), pc.is_null(right))
    if pa.types.is_null(left.type):  # a column of nulls alone (rows made in Python)
        return both_null.to_numpy(zero_copy_only=False)
    return pc.or_(both_null, pc.fill_null(pc.equal(left, right), False)).to_numpy(zero_copy_only=False)


def _first(left: pa.Array, right: pa.Array, descending: bool) -> np.ndarray:
    """Whether ``left`` sorts before ``right`` in that direction, nulls last."""
    if pa.types.is_null(left.type):
        return np.zeros(len(left), dtype=bool)
    before = pc.greater(left, right) if descending else pc.less(left, right)
    only_left = pc.and_(pc.is_valid(left), pc.is_null(right))
    return pc.or_(pc.fill_null(before, False), only_left).to_numpy(zero_copy_only=False)


def _shown(values: pa.Array) -> pa.Array:
    """Values as a reason shows them: a date in ISO 8601, text quoted, a null as ``null``."""
    if pa.types.is_timestamp(values.type):
        seconds = pc.strftime(pc.cast(values, pa.timestamp("s"), safe=False), format="%Y-%m-%dT%H:%M:%S")
        fraction = pc.not_equal(pc.cast(values, pa.timestamp("s"), safe=False), values)
        # the fraction where there is one: two crawls a second apart or less still read apart
        text = pc.if_else(pc.fill_null(fraction, False), pc.strftime(values, format="%Y-%m-%dT%H:%M:%S"), seconds)
    elif pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        text = pc.binary_join_element_wise("'", pc.cast(values, pa.string()), "'", "")
    else:
        text = pc.cast(values, pa.string())
    return pc.fill_null(text, "null")


def _preference_text(domains: pa.Array, places: pa.Array, listed: int) -> pa.Array:
    """``news.example.com (entry 1)`` or ``other.org (not listed)``."""
    place = pc.if_else(
        pc.equal(places, listed), "not listed", pc.binary_join_element_wise("entry ", pc.cast(pc.add(places, 1), pa.string()), "")
    )
    return pc.binary_join_element_wise(pc.fill_null(pc.cast(domains, pa.string()), "no domain"), " (", place, ")", "")
