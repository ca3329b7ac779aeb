"""Problems a user can fix, and how they reach the user: one clear paragraph, not a traceback."""

from __future__ import annotations

from contextlib import contextmanager

from dagster import Failure

from .core.settings import SettingsError
from .core.inputs import InputError
from .core.stages import MemoryBudgetExceeded, PairBudgetExceeded
from .lineage import StaleUpstream

USER_ERRORS = (InputError, SettingsError, PairBudgetExceeded, MemoryBudgetExceeded, StaleUpstream)


@contextmanager
def user_errors():
    """Report a problem the user can fix as a Dagster failure carrying only its message."""
    try:
        yield
    except USER_ERRORS as error:
        raise Failure(description=str(error)) from None
