"""Problems a user can fix, and how they reach the user: one clear paragraph, not a traceback."""

from __future__ import annotations

from contextlib import contextmanager

from dagster import Failure

from .core.lsh import PairBudgetExceeded
from .core.readers import InputError
from .core.settings import SettingsError
from .core.store import DuckDBUnavailable
from .core.verify import MemoryBudgetExceeded
from .lineage import StaleUpstream

USER_ERRORS = (
    InputError,
    SettingsError,
    PairBudgetExceeded,
    MemoryBudgetExceeded,
    StaleUpstream,
    DuckDBUnavailable,
)


@contextmanager
def user_errors():
    """Report a problem the user can fix as a Dagster failure carrying only its message."""
    try:
        yield
    except USER_ERRORS as error:
        raise Failure(description=str(error)) from None
