"""``dedup``: the project's command line.

- ``dedup run [--job NAME] [--config-json JSON]``: the quiet one-shot run (``make run``).
- ``dedup verify-release DIR``: checks a release folder against its ``manifest.json``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def verify_release_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="dedup verify-release",
        description="Check every file of a release folder against its manifest.json: present, "
        "listed, same rows and sha256.",
    )
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args(argv).folder
    # imported here so that the command answers without loading Dagster
    from .core.release import verify_release

    if not folder.is_dir():
        print(f"Error: {folder}: no such folder. Give the release folder (DEDUP_OUTPUT_DIR).", file=sys.stderr)
        return 2
    problems = verify_release(folder)
    if problems:
        print(f"{folder}: the release does not match its manifest.json:", file=sys.stderr)
        for problem in problems:
            print(f"  {problem}", file=sys.stderr)
        return 1
    print(f"{folder}: every file matches manifest.json.")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    commands = ("run", "verify-release")
    if not argv or argv[0] not in commands:
        print(f"usage: dedup {{{','.join(commands)}}} ...\n\n{__doc__}", file=sys.stderr)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    if argv[0] == "verify-release":
        return verify_release_command(argv[1:])
    from .run import main as run

    return run(argv[1:], prog="dedup run")


if __name__ == "__main__":
    sys.exit(main())
