"""The base class of the problems a user can fix: every one's message says what to do. The
assets report one as a Dagster failure carrying that message alone, the commands as one line;
any other exception is a bug and keeps its traceback."""


class DedupError(Exception):
    """A problem the user can fix; the message says what to do."""


class InconsistentTables(DedupError, ValueError):
    """Tables that disagree with each other (one was rebuilt without the ones after it); the
    message names what to materialize again."""


class SettingsError(DedupError, ValueError):
    """A setting is out of range or inconsistent with another."""
