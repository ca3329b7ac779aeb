"""Compile and cache the kernels once, by running the library on a few made-up documents:
``python -m dedup_assets.warm`` (``make setup`` runs it), so that a first real run does not
spend its first minute compiling."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

from .core import kernels
from .core.pipeline import run_library

# ASCII, accented (the code-point table), a capital sigma and an emoji (the Python reference),
# and near-duplicates so that verification and clustering run too
BODIES = [
    "The quick brown fox jumps over the lazy dog near the river bank today",
    "The quick brown fox jumps over the lazy dog near the river bank tonight",
    "Café crème brûlée: naïve façade, déjà vu, coöperate and résumé for everyone here",
    "Café crème brûlée: naïve façade, déjà vu, coöperate and résumé for everyone there",
    "ΣΟΦΙΑ και ΟΔΥΣΣΕΑΣ ταξιδεύουν μαζί στη θάλασσα 🌊 κάθε καλοκαίρι με φίλους",
]


def main() -> int:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dedup-warm-") as folder:
        source = Path(folder) / "warm.csv"
        rows = len(BODIES)
        pa_csv.write_csv(
            pa.table(
                {
                    "doc_id": [f"warm-{row}" for row in range(rows)],
                    "source": ["warm-up"] * rows,
                    "domain": ["example.com"] * rows,
                    "crawled_at": ["2026-01-01"] * rows,
                    "title": ["warm-up"] * rows,
                    "body": BODIES,
                }
            ),
            source,
        )
        run_library(str(source), str(Path(folder) / "warm.duckdb"), str(Path(folder) / "release"))
    compiled = kernels.compiled_here()
    seconds = time.perf_counter() - started
    if compiled:
        print(f"Compiled {compiled} kernel signatures in {seconds:.0f} s; cached for later runs.")
    else:
        print(f"Kernels already compiled and cached ({seconds:.1f} s).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
