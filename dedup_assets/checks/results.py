"""What every asset check result is made of: a blocking failure or a warning with a message
that lists the first few problems, and the counting words they are written with."""

import duckdb
from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue

SHOWN = 5


def check_result(failures: list[str], passed_text: str, **metadata) -> AssetCheckResult:
    description = passed_text
    if failures:
        description = "; ".join(failures[:SHOWN])
        if len(failures) > SHOWN:
            description += f" (and {len(failures) - SHOWN} more)"
    return AssetCheckResult(
        passed=not failures,
        severity=AssetCheckSeverity.ERROR,
        description=description,
        metadata={"problems": MetadataValue.int(len(failures)), **metadata},
    )


def counted(number: int, noun: str) -> str:
    """``1 pair``, ``2 pairs``."""
    return f"{number} {noun if number == 1 else noun + 's'}"


def fetch_rows(connection: duckdb.DuckDBPyConnection, query: str) -> list[tuple]:
    return connection.execute(query).fetchall()


def warning_result(failure: str | None, passed_text: str, **metadata) -> AssetCheckResult:
    return AssetCheckResult(
        passed=failure is None,
        severity=AssetCheckSeverity.WARN,
        description=failure or passed_text,
        metadata=metadata,
    )
