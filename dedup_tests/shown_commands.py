"""Every shell command the README and docs/*.md show a user, as a shell would read it.

A command is taken from a fenced block marked bash, sh, shell or console, from a plain fenced
block, or from an indented block, when its program is one a user of this project types
(``PROGRAMS``): a plain block of CSV or a Python snippet is no command. In a block, comment lines
and blank lines separate commands, a ``$ `` prompt is dropped, and a command runs on over
``\\`` continuations, open quotes and unfinished compound commands (``for … done``) for as long
as ``bash -n`` says it is incomplete.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
# what a shown command starts with (after VAR=value assignments), for blocks that say no language
PROGRAMS = ("make", "dagster", "dg", "dedup", ".venv/bin/", "python", ".", "source", "duckdb", "mkdir", "for")
FENCE = re.compile(r"^(```|~~~)\s*([\w-]*)")


@dataclass(frozen=True)
class Shown:
    """A command a page shows: where, and its text as the shell reads it."""

    page: str
    block: int  # 1-based line of its code block's first line: commands of a block run together
    line: int  # 1-based line of the command's first line
    text: str

    @property
    def key(self) -> str:
        """The command's words without its trailing comment: how the exception list names it."""
        words = shlex.split(self.text.replace("\\\n", " "), comments=True)
        return " ".join(" ".join(words).split())  # one line, though a quoted JSON spans several

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages(root: Path = PROJECT_ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _program(command: str) -> str:
    words = shlex.split(command.replace("\\\n", " "), comments=True)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]  # DEDUP_INPUT=… before the program
    return words[0] if words else ""


def is_shell(command: str) -> bool:
    try:
        program = _program(command)
    except ValueError:  # unbalanced quotes: prose or code, not a command
        return False
    return program == "." or any(program == name or (name.endswith("/") and program.startswith(name)) for name in PROGRAMS)


def _complete(text: str) -> bool:
    # bash itself decides where a command ends: quotes, continuations, for/do/done
    checked = subprocess.run(["bash", "-n", "-c", text], capture_output=True, text=True)
    incomplete = "unexpected end of file" in checked.stderr or "unexpected EOF" in checked.stderr
    return not incomplete and not text.endswith("\\")


def block_commands(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The commands of one code block, given as (line number, line) pairs."""
    commands: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, line in lines:
        if not pending:
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            line = re.sub(r"^\s*\$ ", "", line)  # a prompt is no part of the command
            start = number
        pending.append(line)
        text = "\n".join(pending)
        if _complete(text):
            commands.append((start, text.strip()))
            pending = []
    if pending:
        commands.append((start, "\n".join(pending).strip()))  # incomplete: bash will say so when it runs
    return commands


def _blocks(text: str) -> list[tuple[str | None, list[tuple[int, str]]]]:
    """(language, numbered lines) of each fenced block (language "" when none is given) and of
    each indented block (language None)."""
    blocks: list[tuple[str | None, list[tuple[int, str]]]] = []
    fence: str | None = None
    language = ""
    body: list[tuple[int, str]] = []
    indented: list[tuple[int, str]] = []
    previous_blank = True
    for number, line in enumerate(text.splitlines(), start=1):
        if fence is not None:
            if line.strip().startswith(fence):
                blocks.append((language, body))
                fence, body = None, []
            else:
                body.append((number, line))
            continue
        opened = FENCE.match(line)
        if opened:
            fence, language = opened.group(1), opened.group(2).lower()
            continue
        if line.startswith("    ") and (indented or previous_blank) and line.strip():
            indented.append((number, line[4:]))
        elif indented and not line.strip():
            indented.append((number, ""))
        else:
            if indented:
                blocks.append((None, indented))
                indented = []
        previous_blank = not line.strip()
    if indented:
        blocks.append((None, indented))
    return blocks


def page_commands(page: Path, root: Path = PROJECT_ROOT) -> list[Shown]:
    """Every command ``page`` shows, in page order."""
    name = page.relative_to(root).as_posix()
    shown = []
    for language, lines in _blocks(page.read_text(encoding="utf-8")):
        if language is not None and language and language not in SHELL_LANGUAGES:
            continue  # python, sql, mermaid: not for a shell
        for line, command in block_commands(lines):
            # a block that names its language is all shell; one that does not must show it
            if language in SHELL_LANGUAGES or is_shell(command):
                shown.append(Shown(name, lines[0][0] if lines else 0, line, command))
    return shown


def shown_commands(root: Path = PROJECT_ROOT) -> list[Shown]:
    return [command for page in pages(root) for command in page_commands(page, root)]
