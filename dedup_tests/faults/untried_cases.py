"""The inputs of issue 49's four untried cases, which docs/fault-matrix.md runs through ``dedup run``:
extreme inputs of the fault matrix, so they live in the test tree (run from the project's root).

    python -m dedup_tests.faults.untried_cases one-word OUT.parquet [--documents 2000000]
    python -m dedup_tests.faults.untried_cases footer OUT.parquet [--documents 200000] [--words 200 400]
    python -m dedup_tests.faults.untried_cases small-files FOLDER [--files 5000]

(The fourth case, DuckDB held to 64 MB, runs the benchmark's corpus: ``python -m dedup_bench.corpus``.)

- ``one-word``: documents whose body is one word, drawn by Zipf rank from the corpus's
  50,000-word vocabulary: groups of exact copies up to a twelfth of the input, and every body
  shorter than a shingle.
- ``footer``: distinct pages of ``--words`` random words (Zipf), each ending with the same
  150-word footer. At 200 to 400 words the footer is a third of a page; at 20 to 60 it is most of
  it, so its bands fill buckets with every page.
- ``small-files``: CSV files of 2 to 6 rows (``doc_id,body,url``), whose bodies are drawn from
  3,000 texts, so copies cross files; about 1% of the rows repeat a doc_id of an earlier file.

Every draw comes from a generator seeded per case, so a case writes the same bytes every time.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_bench.corpus import vocabulary
from dedup_bench.tokens import ZipfSampler

FOOTER_WORDS = 150
SCHEMA = pa.schema([("doc_id", pa.string()), ("body", pa.string())])


def _words(seed: int) -> np.ndarray:
    return np.array(vocabulary(np.random.default_rng(seed)), dtype=object)


def one_word(out: Path, documents: int = 2_000_000, seed: int = 1) -> str:
    rng, words = np.random.default_rng(seed), _words(seed)
    ranks = ZipfSampler(len(words))(rng, documents)
    ids = pa.array([f"w{index:07d}" for index in range(documents)])
    pq.write_table(pa.table({"doc_id": ids, "body": pa.array(words[ranks].tolist(), pa.string())}, schema=SCHEMA), out)
    counts = np.bincount(ranks)
    return f"{documents:,} one-word documents, {int((counts > 0).sum()):,} distinct bodies, the largest group {int(counts.max()):,}"


def footer_pages(out: Path, documents: int = 200_000, words: tuple[int, int] = (200, 400), seed: int = 2) -> str:
    rng, vocabulary_words = np.random.default_rng(seed), _words(seed)
    zipf = ZipfSampler(len(vocabulary_words))
    footer = " ".join(vocabulary_words[rng.integers(0, len(vocabulary_words), FOOTER_WORDS)])
    with pq.ParquetWriter(out, SCHEMA) as writer:
        for start in range(0, documents, 10_000):
            ids = range(start, min(documents, start + 10_000))
            bodies = [
                " ".join(vocabulary_words[zipf(rng, int(rng.integers(words[0], words[1] + 1)))]) + " " + footer
                for _ in ids
            ]
            writer.write_table(pa.table({"doc_id": [f"p{index:07d}" for index in ids], "body": bodies}, schema=SCHEMA))
    return f"{documents:,} pages of {words[0]} to {words[1]} words, each ending with the same {FOOTER_WORDS}-word footer"


def small_files(folder: Path, files: int = 5_000, seed: int = 4) -> str:
    rng, words = np.random.default_rng(seed), _words(seed)
    folder.mkdir(parents=True, exist_ok=True)
    texts = [" ".join(words[rng.integers(0, len(words), int(rng.integers(30, 80)))]) for _ in range(3_000)]
    rows = repeated = 0
    for number in range(files):
        with (folder / f"part-{number:05d}.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(["doc_id", "body", "url"])
            for row in range(int(rng.integers(2, 7))):
                doc_id = f"f{number:05d}-{row}"
                if rng.random() < 0.01 and number:  # the first row's id of an earlier file
                    doc_id, repeated = f"f{int(rng.integers(0, number)):05d}-0", repeated + 1
                body = texts[int(rng.integers(0, len(texts)))]
                writer.writerow([doc_id, body, f"https://site{number % 97}.example/{number}/{row}"])
                rows += 1
    return f"{files:,} CSV files, {rows:,} rows, {repeated:,} of them repeating an earlier file's doc_id"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("case", choices=["one-word", "footer", "small-files"])
    parser.add_argument("out", type=Path, help="the file (.parquet), or for small-files the folder")
    parser.add_argument("--documents", type=int)
    parser.add_argument("--words", type=int, nargs=2, default=(200, 400), help="footer: a page's own words, least and most")
    parser.add_argument("--files", type=int, default=5_000)
    args = parser.parse_args(argv)
    (args.out if args.case == "small-files" else args.out.parent).mkdir(parents=True, exist_ok=True)
    if args.case == "one-word":
        said = one_word(args.out, args.documents or 2_000_000)
    elif args.case == "footer":
        said = footer_pages(args.out, args.documents or 200_000, tuple(args.words))
    else:
        said = small_files(args.out, args.files)
    print(f"wrote {said} to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
