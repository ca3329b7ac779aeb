"""The input columns a keep policy (``rule.py``) orders by: checked against the documents
table, and typed once over all of it, so every path and engine compares them alike. A CSV's
columns are text; a text column whose every non-empty value reads as a number is
compared as numbers (``"10" > "9"``), one whose every value reads as a date as dates, any other as
text. An empty value is null, which sorts last."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pyarrow as pa

from ..util.errors import SettingsError
from .rule import KeepPolicy, quoted
from ..pipeline.step_params import ClusterParams
from ..storage.store import column_types
from ..storage.tables import Tables

NUMBER, DATE, TEXT = "DOUBLE", "TIMESTAMP", "VARCHAR"
# DuckDB types whose values have no order a user could mean
_UNORDERED = ("[", "STRUCT", "MAP", "UNION", "BLOB")


def typed_policy(connection: duckdb.DuckDBPyConnection, policy: KeepPolicy, documents: list[str]) -> KeepPolicy:
    """``policy`` with its text columns typed over ``documents`` (relations with the same columns:
    the one-shot documents table, or an index's documents and a batch's), or a SettingsError
    naming a column the documents lack or one whose values cannot be ordered."""
    types = {name: kind for name, kind in column_types(connection, documents[0]).items() if name != "body"}
    rules = []
    for rule in policy.rules:
        if rule in policy.input_columns:
            kind = types.get(rule.column)
            if kind is None:
                raise SettingsError(
                    f"keep orders by {rule.column!r}, which the documents table does not have. Its columns: "
                    f"{', '.join(sorted(types))}. Name one of them: a CSV or Parquet column of the input is a "
                    "documents column under its own name (a JSONL file's fields are only those `fields` maps)"
                    if rule.column != "body"
                    else "keep cannot order by body, the text itself: use longest or shortest to keep by length"
                )
            if any(mark in kind.upper() for mark in _UNORDERED):
                raise SettingsError(
                    f"keep orders by {rule.column!r}, a column of {kind} values, which have no order: name a "
                    "column of numbers, dates, text or booleans"
                )
            if kind == TEXT:
                rule = replace(rule, as_type=_text_kind(connection, rule.column, documents))
        rules.append(rule)
    return replace(policy, rules=tuple(rules))


def typed_params(connection: duckdb.DuckDBPyConnection, params: ClusterParams, tables: Tables) -> ClusterParams:
    """The cluster step's params with the keep policy typed over ``tables.documents``: what every
    engine clusters by, so a column the input lacks is refused before any engine starts."""
    return replace(params, keep=typed_policy(connection, params.keep, [tables.documents]))


def _text_kind(connection: duckdb.DuckDBPyConnection, column: str, documents: list[str]) -> str:
    values = " union all ".join(f"select nullif(trim({quoted(column)}), '') as v from {name}" for name in documents)
    numbers, dates, present = connection.execute(
        f"select count(try_cast(v as {NUMBER})), count(try_cast(v as {DATE})), count(v) from ({values})"
    ).fetchall()[0]
    if present and numbers == present:
        return NUMBER
    if present and dates == present:
        return DATE
    return TEXT


def prepared(policy: KeepPolicy, members: pa.Table) -> pa.Table:
    """``members`` with the policy's input columns, read raw under their own names, as its rules
    compare them, each under its field: for an engine that reads them so (the ray engine); DuckDB
    queries select them so (``KeepPolicy.select_list``)."""
    for rule in policy.input_columns:
        members = members.append_column(rule.field, members[rule.column])
    typed = [rule for rule in policy.input_columns if rule.as_type]
    if not typed:
        return members
    with duckdb.connect() as connection:
        connection.register("members", members)
        casts = ", ".join(f"{rule.value_sql(quoted(rule.field))} as {quoted(rule.field)}" for rule in typed)
        connection.execute("set preserve_insertion_order = true")
        return connection.sql(f"select * replace ({casts}) from members").to_arrow_table()
