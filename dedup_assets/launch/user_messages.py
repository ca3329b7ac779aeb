"""Problems a user can fix, and how they reach the user: one clear paragraph, not a traceback."""

from __future__ import annotations

import re
from contextlib import contextmanager

from dagster import Failure

from ..core.errors import DedupError


@contextmanager
def user_errors():
    """Report a problem the user can fix as a Dagster failure carrying only its message."""
    try:
        yield
    except DedupError as error:
        raise Failure(description=str(error)) from None


def last_sentence(text: str) -> str:
    """An error's own words: its last line before any stack trace, without the class name
    (``<module>.Failure: <description>`` -> the description) or
    pydantic's trimmings (``Value error, <message> [type=value_error, ...]``)."""
    lines = [
        line.strip()
        for line in text.split("Stack Trace:")[0].strip().splitlines()
        if line.strip() and not line.strip().startswith("For further information visit")
    ]
    last = lines[-1] if lines else text.strip()
    last = re.sub(r"^([A-Za-z_][\w.]*(Error|Exception|Failure)): ", "", last)
    return re.sub(r"\s*\[type=.*\]$", "", re.sub(r"^Value error, ", "", last))


def user_message(error) -> str:
    """The sentence a user can act on from a Dagster error: a Failure's description, or the
    innermost error's text."""
    while error.cause is not None and "Failure" not in error.cls_name:
        error = error.cause
    return last_sentence(error.message)
