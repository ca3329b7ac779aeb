"""The benchmark reports' markdown: tables, numbers, ratios, shares and verdicts."""

from __future__ import annotations

from collections.abc import Callable


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def records_table(columns: dict[str, tuple[str, Callable]], records: list[dict]) -> str:
    """One row per record: each column's header maps to the record's key and its format."""
    rows = [[show(record.get(key)) for key, show in columns.values()] for record in records]
    return markdown_table(list(columns), rows)


def number(digits: int = 0) -> Callable:
    return lambda value: fmt_number(value, digits)


def fmt_number(value: float | int | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}×"


def fmt_share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else numerator / denominator


def verdict(met: bool) -> str:
    return "met" if met else "NOT met"
