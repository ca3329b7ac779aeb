"""Compile and cache the kernels once, by running the library on made-up documents:
``python -m dedup_assets.launch.warm`` (``make setup`` runs it), and ``warm_if_needed`` at the
start of every run (the run launchers call it; ``python -m dedup_assets.launch.warm --if-needed``
from a shell), so that no step waits for the compiler, even after a plain ``pip install``.
``compiled_here`` says whether this process compiled any."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv

from ..core.lsh import bucket_kernels
from ..core.util import kernel_cache
from ..core.sketch import kernels
from ..core.verify.jaccard import shingle_sets
from ..core.pipeline.library import run_library
from ..core.settings.model import Settings
from ..core.read import csv_scan, doc_ids

# every cached compiled function a run can enter
CACHED_KERNELS = (
    kernels.fingerprint_kernel,
    kernels.all_ascii_kernel,
    kernels.needs_reference_kernel,
    kernels.shingle_sets_kernel,
    kernels.probe_owners_kernel,
    kernels._marked_owners,
    kernels.keyed_hash_kernel,
    kernels.probe_slots_kernel,
    kernels.pair_jaccard_kernel,
    bucket_kernels.bucket_pressure_kernel,
    bucket_kernels.bucket_pairs_kernel,
    bucket_kernels._sort_with_rows,
    kernels.pair_overlap_kernel,
    kernels._seed_sequence,
    doc_ids._register,
    doc_ids._rehash,
    csv_scan._scan,
    csv_scan._record,
    csv_scan._lines_between,
    csv_scan._next_line,
    csv_scan._line_end,
)
# more documents than the doc_id table's first size, so that its growth is compiled too
FILLER_DOCUMENTS = 1_100

# ASCII, accented (the code-point table), a capital sigma and an emoji (the Python reference),
# and near-duplicates so that verification and clustering run too
BODIES = [
    "The quick brown fox jumps over the lazy dog near the river bank today",
    "The quick brown fox jumps over the lazy dog near the river bank tonight",
    "Café crème brûlée: naïve façade, déjà vu, coöperate and résumé for everyone here",
    "Café crème brûlée: naïve façade, déjà vu, coöperate and résumé for everyone there",
    "ΣΟΦΙΑ και ΟΔΥΣΣΕΑΣ ταξιδεύουν μαζί στη θάλασσα 🌊 κάθε καλοκαίρι με φίλους",
]


def compiled_here() -> int:
    """How many kernel signatures this process has compiled rather than loaded from numba's
    on-disk cache (``__pycache__`` beside the code): after a change to the kernels, a numba
    upgrade, or on a new machine."""
    return sum(sum(kernel.stats.cache_misses.values()) for kernel in CACHED_KERNELS)


# said before the warm-up compiles: what, why, about how long (measured on 2 busy cores), and once
COMPILE_LINE = (
    "Compiling the fast kernels (numba) once for this installation, so that no step waits for the "
    "compiler: about 1-2 minutes; later runs load them from the cache."
)


def kernels_cached() -> bool:
    """Whether numba's on-disk cache holds every kernel for this machine and this code, without
    compiling or loading any (a few milliseconds). Numba has no public call for it: this reads
    each kernel's cache index as its dispatcher would (``numba.core.caching``, tested on 0.60-0.69)."""
    for kernel in CACHED_KERNELS:
        cache = kernel._cache
        _, machine, code = cache._index_key(None, kernel.targetctx.codegen())
        if not any(key[1:] == (machine, code) for key in cache._cache_file._load_index()):
            return False
    return True


def warm_if_needed(say: Callable[[str], None]) -> None:
    """Compile and cache the kernels unless they are cached, saying so first and after."""
    if kernels_cached():
        return
    folder = kernel_cache.fallback_folder
    say(COMPILE_LINE + (
        f" The code's folder and ~/.cache cannot be written, so they are cached in {folder} (set "
        "NUMBA_CACHE_DIR to keep them elsewhere)." if folder else ""
    ))
    compiled, seconds = warm()
    say(compiled_line(compiled, seconds))


def compiled_line(compiled: int, seconds: float) -> str:
    return f"Compiled {compiled} kernel signatures in {seconds:.0f} s; cached for later runs."


class CompileWatch:
    """Signatures compiled since the last look: a step that compiles is one the warm-up missed."""

    def __init__(self) -> None:
        self.seen = compiled_here()

    def new(self) -> int:
        now = compiled_here()
        new, self.seen = now - self.seen, now
        return new


def step_compiled(step: str, signatures: int) -> str:
    """What a run says when a step compiled kernels: its time includes the compiler's."""
    return (
        f"{step} compiled {signatures} kernel signature(s) inside the step (its time includes the "
        "compiler's); the warm-up missed them: please report it"
    )


def warm() -> tuple[int, float]:
    """Run the library on made-up documents: the kernel signatures this compiled, and seconds."""
    started = time.perf_counter()
    bodies = BODIES + [f"filler document number {row} with a few more words" for row in range(FILLER_DOCUMENTS)]
    with tempfile.TemporaryDirectory(prefix="dedup-warm-") as folder:
        source = Path(folder) / "warm.csv"
        rows = len(bodies)
        pa_csv.write_csv(
            pa.table(
                {
                    "doc_id": [f"warm-{row}" for row in range(rows)],
                    "source": ["warm-up"] * rows,
                    "domain": ["example.com"] * rows,
                    "crawled_at": ["2026-01-01"] * rows,
                    "title": ["warm-up"] * rows,
                    "body": bodies,
                }
            ),
            source,
        )
        run_library(str(source), str(Path(folder) / "warm.duckdb"), str(Path(folder) / "release"))
    # shingle sets counted first, as the removals check (a Dagster check, which the library run
    # has not) makes them from bodies DuckDB gives as large strings: the fingerprint kernel with
    # counting seeds, no probes and 64-bit offsets
    shingle_sets(pa.array(BODIES, pa.large_string()), Settings().shingling())
    return compiled_here(), time.perf_counter() - started


def main(argv: list[str]) -> int:
    if argv == ["--if-needed"]:  # as a run starts: quiet when every kernel is cached
        warm_if_needed(print)
        return 0
    compiled, seconds = warm()
    if compiled:
        print(compiled_line(compiled, seconds))
    else:
        print(f"Kernels already compiled and cached ({seconds:.1f} s).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
