"""Small helpers every asset module uses: turning user errors into clear failures, stamping
lineage, and rendering previews for the UI."""

from __future__ import annotations

from contextlib import contextmanager

import pandas as pd
from dagster import Failure, MetadataValue

from ..core.fingerprint import SettingsError
from ..core.inputs import InputError
from ..core.lsh import PairBudgetExceeded
from ..lineage import StaleUpstream, combined_lineage
from ..settings import DedupSettings

GROUP = "deduplication"
PREVIEW_ROWS = 10
_USER_ERRORS = (InputError, PairBudgetExceeded, SettingsError, StaleUpstream)


@contextmanager
def user_errors():
    """Report a problem the user can fix as a one-paragraph Dagster failure, not a traceback."""
    try:
        yield
    except _USER_ERRORS as error:
        raise Failure(description=str(error)) from None


def lineage_for(asset_name: str, dedup: DedupSettings, **upstreams: pd.DataFrame) -> dict:
    """Lineage of the asset being built; fails if its inputs were built with other settings."""
    with user_errors():
        return combined_lineage(
            asset_name,
            dedup.current_values(),
            {name: frame.attrs.get("lineage", {}) for name, frame in upstreams.items()},
        )


def stamped(frame: pd.DataFrame, lineage: dict) -> pd.DataFrame:
    frame.attrs["lineage"] = lineage
    return frame


def preview(frame: pd.DataFrame, columns: list[str] | None = None) -> MetadataValue:
    shown = frame if columns is None else frame[columns]
    if shown.empty:
        return MetadataValue.md("_no rows_")
    return MetadataValue.md(shown.head(PREVIEW_ROWS).to_markdown(index=False))
