"""Commands a message gives the user to paste: written as a person would type them."""

from __future__ import annotations

import re
import shlex
import sys

# what bash still reads inside double quotes, besides the quote that we escape: $, `, ! and a
# backslash before one of $ ` " \ or a line's end (another, as in \t, stays as it is)
_SPECIAL_IN_DOUBLE_QUOTES = re.compile(r'[$`!]|\\([$`"\\\n]|$)')


def python_command(code: str, python: str | None = None) -> str:
    """``python -c`` running ``code`` (by default this Python): the code in double quotes, as the
    README writes such commands, where nothing in it but its double quotes needs escaping."""
    program = python or shlex.quote(sys.executable)
    plain = not _SPECIAL_IN_DOUBLE_QUOTES.search(code)
    quoted = '"' + code.replace('"', '\\"') + '"' if plain else shlex.quote(code)
    return f"{program} -c {quoted}"


def sql_literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"
