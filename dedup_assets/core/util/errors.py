"""The base class of the problems a user can fix: every one's message says what to do. The
assets report one as a Dagster failure carrying that message alone, the commands as one line;
any other exception is a bug and keeps its traceback."""

from __future__ import annotations

from collections.abc import Mapping


class DedupError(Exception):
    """A problem the user can fix; the message says what to do. A fix that is a change of
    settings (``fix``: the dedup resource's fields -> values), or assets to materialize again
    (``select``, a Dagster asset selection, with the settings ``fix`` to build them with), is data,
    not words: the message names no command, and the launch layer writes it for the command the
    user ran (``launch.entry_point.how_to_fix``)."""

    def __init__(self, message: str, fix: Mapping[str, object] | None = None, select: str | None = None) -> None:
        super().__init__(message)
        self.fix, self.select = dict(fix or {}), select


class InconsistentTables(DedupError, ValueError):
    """Tables that disagree with each other (one was rebuilt without the ones after it); the
    message names what to materialize again."""


class SettingsError(DedupError, ValueError):
    """A setting is out of range or inconsistent with another."""


def listed(names: tuple[str, ...] | list[str]) -> str:
    """Names as a message lists them: "a", "a and b", "a, b and c"."""
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
