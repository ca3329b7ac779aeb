"""The environment variables that say where a run's files are, each with its default in code, so
none needs to be set. They are read when a run (or a command) starts, never when the definitions
load; a resource field set in the run config wins over them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

from ..core.settings.choices import DEFAULT_DUCKDB_MEMORY


class Variable(NamedTuple):
    name: str
    default: str

    def value(self) -> str:
        return os.environ.get(self.name) or self.default

    def path(self) -> Path:
        """The value as an absolute path: a relative one resolves against the working directory."""
        return Path(self.value()).expanduser().resolve()


DATABASE = Variable("DEDUP_DATABASE", "var/dedup_assets.duckdb")
DUCKDB_MEMORY = Variable("DEDUP_DUCKDB_MEMORY", DEFAULT_DUCKDB_MEMORY)
INPUT = Variable("DEDUP_INPUT", "data/documents.csv")
OUTPUT_DIR = Variable("DEDUP_OUTPUT_DIR", "output")
BATCHES = Variable("DEDUP_BATCHES", "batches")
LABELS = Variable("DEDUP_LABELS", "")  # unset: no evaluation
CACHE = Variable("DEDUP_CACHE", "")  # unset: no cache of fetched WARC records
# the settings file (settings_file.py): unset, dedup.yaml in the working directory if there is one
SETTINGS_FILE = Variable("DEDUP_SETTINGS", "dedup.yaml")
