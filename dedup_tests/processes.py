"""The processes of this machine as /proc lists them, for tests that stop or look for a run's
processes by their parent."""

from __future__ import annotations

from pathlib import Path


def child_processes(parents: set[int]) -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process whose parent is one of ``parents``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        if parent in parents:
            found.append((int(entry.name), parent, command))
    return found
