"""Fingerprinting throughput by script: ``benchmark.py --scripts N``.

N generated documents of about 3 KB in English, Chinese, Japanese and Thai go through the
library's fingerprinting (normalize, tokenize, shingle, sketch, band) at the benchmark's settings,
word and character shingles; each is timed three times after a warm-up run (so no compile is
counted) and the smallest is kept. The figure that matters is bytes per second against English's:
a script that fell back to the Python reference would show as tens of times slower.

The texts are random draws, not prose: what the kernels' speed depends on is the bytes per
character, the characters per token and how often a document needs the reference, and those
are the scripts' own.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa

from .common import ROWS_PER_BAND, SHINGLE_SIZE
from .corpus import vocabulary
from .markdown import markdown_table

DOCUMENT_BYTES = 3_000
TIMED_RUNS = 3
SEED = 1234
# common characters of each script: a block's first code points stand in for its most used ones
HAN = [chr(0x4E00 + offset) for offset in range(3_500)]
HIRAGANA = [chr(code) for code in range(0x3041, 0x3097)]
THAI_CONSONANTS = [chr(code) for code in range(0x0E01, 0x0E2F)]
THAI_VOWELS = ["\u0e30", "\u0e32", "\u0e34", "\u0e35", "\u0e38", "\u0e39", "\u0e40", "\u0e41", ""]
THAI_TONES = ["\u0e48", "\u0e49", "", "", ""]


def _zipf(rng: np.random.Generator, size: int, count: int) -> np.ndarray:
    """Indexes into a list of ``size`` items, the first ones most often, as words and characters are."""
    return np.minimum(rng.zipf(1.3, count) - 1, size - 1)


def english(rng: np.random.Generator, words: list[str]) -> str:
    picks = _zipf(rng, len(words), DOCUMENT_BYTES // 6)
    return " ".join(words[index] + (". " if index % 11 == 0 else "") for index in picks)


def chinese(rng: np.random.Generator) -> str:
    characters = [HAN[index] for index in _zipf(rng, len(HAN), DOCUMENT_BYTES // 3)]
    for position in range(12, len(characters), 13):
        characters[position] = "，" if position % 3 else "。"
    return "".join(characters)


def japanese(rng: np.random.Generator) -> str:
    kana = _zipf(rng, len(HIRAGANA), DOCUMENT_BYTES // 3)
    han = _zipf(rng, len(HAN), DOCUMENT_BYTES // 3)
    return "".join(
        (HAN[han[position]] if position % 3 == 0 else HIRAGANA[kana[position]]) + ("。" if position % 17 == 16 else "")
        for position in range(DOCUMENT_BYTES // 3)
    )


def thai(rng: np.random.Generator) -> str:
    syllables = []
    for position in range(DOCUMENT_BYTES // 7):
        consonant = THAI_CONSONANTS[rng.integers(len(THAI_CONSONANTS))]
        vowel = THAI_VOWELS[rng.integers(len(THAI_VOWELS))]
        tone = THAI_TONES[rng.integers(len(THAI_TONES))]
        syllables.append(consonant + vowel + tone + (" " if position % 5 == 4 else ""))
    return "".join(syllables)


def corpora(documents: int) -> dict[str, pa.Array]:
    rng = np.random.default_rng(SEED)
    words = vocabulary(rng)
    makers = {
        "english": lambda: english(rng, words),
        "chinese": lambda: chinese(rng),
        "japanese": lambda: japanese(rng),
        "thai": lambda: thai(rng),
    }
    return {script: pa.array([make() for _ in range(documents)], pa.large_string()) for script, make in makers.items()}


def measure_scripts(documents: int, perm: int) -> dict:
    """Each script's fingerprinting seconds (smallest of three), MB/s, and MB/s against English's.
    The three rounds each time every script and unit in turn, so that a load that comes and goes
    on the machine weighs on all of them alike."""
    from dedup_assets.core.pipeline.step_params import SketchParams
    from dedup_assets.core.sketch.fingerprints import fingerprint_batch
    from dedup_assets.core.text.normalize import kernel_text

    doc_ids = pa.array([str(row) for row in range(documents)])
    runs = [
        (script, bodies, SketchParams("fss", size, perm, ROWS_PER_BAND, 42, shingle_unit=unit))
        for script, bodies in corpora(documents).items()
        for unit, size in (("word", SHINGLE_SIZE), ("char", 5))
    ]
    seconds = {index: [] for index in range(len(runs))}
    shingles = {}
    for _ in range(TIMED_RUNS):
        for index, (_, bodies, params) in enumerate(runs):
            fingerprint_batch(doc_ids[:64], bodies[:64], params)  # compiled before any timing
            started = time.perf_counter()
            batch = fingerprint_batch(doc_ids, bodies, params)
            seconds[index].append(time.perf_counter() - started)
            shingles[index] = int(np.asarray(batch.column("shingle_count")).sum())
    rows = []
    for index, (script, bodies, params) in enumerate(runs):
        megabytes = (bodies.buffers()[2].size if bodies.buffers()[2] else 0) / 1e6
        rows.append(
            {
                "script": script,
                "unit": params.shingle_unit,
                "documents": documents,
                "megabytes": round(megabytes, 2),
                "seconds": round(min(seconds[index]), 3),
                "mb_per_s": round(megabytes / min(seconds[index]), 1),
                "shingles_per_kb": round(shingles[index] / (megabytes * 1000), 1),
                "documents_by_reference": int(kernel_text(bodies).prenormalized.sum()),
            }
        )
    for row in rows:
        english_row = next(other for other in rows if other["script"] == "english" and other["unit"] == row["unit"])
        row["vs_english_per_byte"] = round(english_row["mb_per_s"] / row["mb_per_s"], 2)
    return {"documents": documents, "perm": perm, "rows": rows}


def report_lines(record: dict) -> list[str]:
    header = ["script", "unit", "MB", "seconds", "MB/s", "shingles per KB", "by the reference", "slower than English per byte"]
    columns = ("script", "unit", "megabytes", "seconds", "mb_per_s", "shingles_per_kb", "documents_by_reference")
    rows = [[*(str(row[column]) for column in columns), f"{row['vs_english_per_byte']}×"] for row in record["rows"]]
    return [
        f"{record['documents']:,} documents of about {DOCUMENT_BYTES:,} bytes per script, num_perm "
        f"{record['perm']}, {ROWS_PER_BAND} rows per band; seconds are the smallest of {TIMED_RUNS} runs",
        "",
        markdown_table(header, rows),
    ]
