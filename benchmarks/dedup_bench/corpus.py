"""A deterministic, web-like synthetic corpus with planted near-duplicates.

    python -m dedup_bench.corpus N OUT.parquet [--seed 1234] [--web]

``OUT.parquet`` has the pipeline's six input columns (``doc_id, source, domain, crawled_at,
title, body``), one row group per 16,384 documents (web pages: 4,096). ``OUT.truth.parquet`` has
one row per planted copy: ``doc_id, origin_doc_id, edit_rate, kind`` (``mirror`` or ``edited``).

The model: words of a 50,000-word vocabulary drawn by Zipf rank (frequent words are short);
originals of 150 to 600 tokens with commas, full stops and sentence capitals, so normalization has
work to do; a fifth of the documents copy a uniformly chosen earlier document (itself possibly a
copy, so clusters form chains and trees). A quarter of the copies are exact mirrors on another
domain; the others edit each token with probability r ~ U(0.005, 0.08), split evenly between
substituting a new word, deleting the token and inserting a new word after it.

``--web`` writes the web-length corpus instead (``web_corpus.WebPages``): page lengths of real web
pages, each site's boilerplate on its pages, and some pages mostly boilerplate.

Every draw comes from one seeded generator in a fixed order, so a (N, seed) pair writes the same
bytes every time (with the same numpy and pyarrow versions). Documents are built a row group at a
time; only the tokens of documents that a later copy reads are kept across row groups.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .common import truth_path
from .tokens import STOP, SUFFIXES, Tokens, TokenStore, ZipfSampler, edit_tokens, random_tokens

DEFAULT_SEED = 1234
VOCABULARY = 50_000
MIN_TOKENS, MAX_TOKENS = 150, 600
COPY_SHARE = 0.20
MIRROR_SHARE = 0.25
EDIT_RATES = (0.005, 0.08)
ROW_GROUP_DOCS = 16_384
DOMAINS = 20_000
TITLE_CHARS = 64
SOURCES = ("cc-main-2024-10", "cc-main-2024-26", "cc-main-2024-42", "news-crawl", "forum-dump")
SOURCE_WEIGHTS = (0.3, 0.3, 0.2, 0.12, 0.08)
TLDS = ("com", "org", "net", "de", "co.uk", "io", "info", "fr")
CRAWL_START = np.datetime64("2024-01-01T00:00:00", "us")
CRAWL_SECONDS = 366 * 86_400

SCHEMA = pa.schema(
    [
        ("doc_id", pa.int64()),
        ("source", pa.string()),
        ("domain", pa.string()),
        ("crawled_at", pa.timestamp("us")),
        ("title", pa.string()),
        ("body", pa.string()),
    ]
)


def vocabulary(rng: np.random.Generator) -> list[str]:
    """Distinct lowercase words by rank; length grows with the log of the rank."""
    ranks = np.arange(1, VOCABULARY + 1)
    lengths = np.clip(np.rint(1.5 + 0.55 * np.log2(ranks) + rng.normal(0, 1, VOCABULARY)), 2, 12)
    letters = rng.integers(ord("a"), ord("z") + 1, (VOCABULARY, 16), dtype=np.uint8)
    words, seen = [], set()
    for row, length in zip(letters, lengths.astype(int)):
        # a short word taken already grows by the row's next letter
        while (word := row[:length].tobytes().decode()) in seen:
            length += 1
        seen.add(word)
        words.append(word)
    return words


class Renderer:
    """Bodies from tokens with one Arrow ``take`` over every (capital, word, suffix) piece: the
    taken pieces lie end to end, so a document's body is a slice of their bytes."""

    def __init__(self, words: list[str]):
        self.words = len(words)
        self.pieces = pa.array(
            [
                spelled + suffix
                for spelled in [*words, *(word.capitalize() for word in words)]
                for suffix in SUFFIXES
            ]
        )

    def __call__(self, tokens: Tokens) -> pa.StringArray:
        marks = tokens.marks.astype(np.int64)
        capital = np.zeros(len(marks), dtype=np.int64)
        capital[1:] = marks[:-1] == STOP
        capital[tokens.starts()] = 1
        piece = ((capital * self.words + tokens.words) * len(SUFFIXES)) + marks
        taken = self.pieces.take(piece)
        _, offsets, data = taken.buffers()
        token_offsets = np.frombuffer(offsets, dtype=np.int32)[: len(taken) + 1]
        body_offsets = token_offsets[np.concatenate([tokens.starts(), [len(marks)]])]
        return pa.StringArray.from_buffers(len(tokens.lengths), pa.py_buffer(body_offsets), data)


class Plan:
    """What every document is, drawn up front: origin (-1 for an original), edit rate, kind,
    length of an original, and the positions of its domain and source names and crawl time."""

    def __init__(self, rng: np.random.Generator, documents: int, domains: int):
        ids = np.arange(documents)
        is_copy = rng.random(documents) < COPY_SHARE
        is_copy[0] = False
        self.origin = np.where(is_copy, (rng.random(documents) * ids).astype(np.int64), -1)
        self.mirror = is_copy & (rng.random(documents) < MIRROR_SHARE)
        rates = rng.uniform(*EDIT_RATES, documents).astype(np.float32)
        self.rate = np.where(is_copy & ~self.mirror, rates, np.float32(0))
        self.length = rng.integers(MIN_TOKENS, MAX_TOKENS + 1, documents)
        domain = ZipfSampler(domains)(rng, documents).astype(np.int64)
        # a mirror is the same page on another site (moving one may meet a mirror of it)
        while (clash := self.mirror & (domain == domain[np.maximum(self.origin, 0)])).any():
            domain[clash] = (domain[clash] + 1) % domains
        self.domain = domain.astype(np.int32)
        self.source = rng.choice(len(SOURCES), documents, p=SOURCE_WEIGHTS).astype(np.uint8)
        seconds = rng.integers(0, CRAWL_SECONDS, documents)
        self.crawled_at = CRAWL_START + (seconds * 1_000_000).astype("timedelta64[us]")
        referenced = np.zeros(documents, dtype=bool)
        referenced[self.origin[is_copy]] = True
        self.referenced = referenced

    def truth(self) -> pa.Table:
        copies = np.flatnonzero(self.origin >= 0)
        return pa.table(
            {
                "doc_id": pa.array(copies, pa.int64()),
                "origin_doc_id": pa.array(self.origin[copies], pa.int64()),
                "edit_rate": pa.array(self.rate[copies], pa.float32()),
                "kind": pa.array(np.where(self.mirror[copies], "mirror", "edited")),
            }
        )


def domain_names(rng: np.random.Generator, words: list[str]) -> np.ndarray:
    first = rng.integers(0, 2_000, DOMAINS)
    second = rng.integers(0, VOCABULARY, DOMAINS)
    tld = rng.integers(0, len(TLDS), DOMAINS)
    return np.array([f"{words[a]}{words[b]}.{TLDS[t]}" for a, b, t in zip(first, second, tld)])


class PlainPages:
    """What an original is: Zipf prose of its planned length. It draws nothing of its own."""

    group_docs = ROW_GROUP_DOCS  # documents built, rendered and written at a time

    def __init__(self, rng: np.random.Generator, words: list[str], plan: Plan):
        pass

    def originals(self, rng: np.random.Generator, zipf: ZipfSampler, ids: np.ndarray, plan: Plan) -> Tokens:
        return random_tokens(rng, zipf, ids, plan.length[ids])


def build_group(
    rng: np.random.Generator,
    zipf: ZipfSampler,
    plan: Plan,
    store: TokenStore,
    ids: np.ndarray,
    pages: PlainPages,
) -> Tokens:
    """The tokens of documents ``ids`` (one row group), in doc_id order. Copies are built in
    waves: a copy waits until its origin, when it is in this group, has been built."""
    originals = ids[plan.origin[ids] < 0]
    parts = [pages.originals(rng, zipf, originals, plan)]
    store.keep(parts[0], plan.referenced)
    pending = ids[plan.origin[ids] >= 0]
    built = np.zeros(len(ids), dtype=bool)
    built[originals - ids[0]] = True
    while len(pending):
        origins = plan.origin[pending]
        ready = (origins < ids[0]) | built[np.maximum(origins - ids[0], 0)]
        copies = pending[ready]
        part = edit_tokens(rng, zipf, store.take(origins[ready], copies), plan.rate[copies])
        store.keep(part, plan.referenced)
        parts.append(part)
        built[copies - ids[0]] = True
        pending = pending[~ready]
    group = Tokens.concat(parts)
    return group.select(np.argsort(group.doc_ids, kind="stable"))


def corpus_writer(out: Path) -> pq.ParquetWriter:
    """A writer of corpus rows to ``out``: dictionaries only where values repeat, and no body or
    title statistics, which would be page-sized."""
    return pq.ParquetWriter(
        out,
        SCHEMA,
        compression="snappy",
        use_dictionary=["source", "domain"],
        write_statistics=["doc_id", "source", "domain", "crawled_at"],
    )


def generate(documents: int, out: Path, seed: int = DEFAULT_SEED, pages: type = PlainPages) -> dict:
    """Write the corpus and its truth sidecar, with originals made by ``pages`` (PlainPages, or
    ``web_corpus.WebPages``); return a few figures about them."""
    if documents < 1:
        raise ValueError(f"documents must be positive, got {documents}")
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    words = vocabulary(rng)
    render = Renderer(words)
    zipf = ZipfSampler(VOCABULARY)
    domains = domain_names(rng, words)
    sources = np.asarray(SOURCES)
    plan = Plan(rng, documents, len(domains))
    model = pages(rng, words, plan)
    # the planned lengths of the documents copies read are an estimate of their tokens
    store = TokenStore(documents, int(plan.length[plan.referenced].sum()))
    body_bytes = 0
    with corpus_writer(out) as writer:
        for start in range(0, documents, model.group_docs):
            ids = np.arange(start, min(start + model.group_docs, documents))
            body = render(build_group(rng, zipf, plan, store, ids, model))
            body_bytes += len(body.buffers()[2])
            title = pc.replace_substring_regex(
                pc.utf8_slice_codeunits(body, 0, TITLE_CHARS), r"[ ,.]+\S*$", ""
            )
            names = (sources[plan.source[ids]], domains[plan.domain[ids]])
            columns = [ids, *names, plan.crawled_at[ids], title, body]
            writer.write_table(pa.Table.from_arrays(columns, schema=SCHEMA))
    truth = plan.truth()
    pq.write_table(truth, truth_path(out))
    return {
        "documents": documents,
        "planted_copies": truth.num_rows,
        "mirrors": int(plan.mirror.sum()),
        "body_bytes": body_bytes,
        "seconds": time.perf_counter() - started,
    }


def write(documents: int, out: str, web: bool = False, seed: int = DEFAULT_SEED) -> dict:
    """``generate`` with the plain or the web-length pages (``web_corpus.WebPages``)."""
    from .web_corpus import WebPages  # it builds on this module

    return generate(documents, Path(out), seed, WebPages if web else PlainPages)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", type=int)
    parser.add_argument("out", type=Path, help="the corpus file (.parquet)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--web", action="store_true", help="the web-length corpus (web_corpus.py)")
    args = parser.parse_args(argv)
    if args.out.suffix != ".parquet":
        parser.error("the corpus file must end in .parquet")
    figures = write(args.documents, args.out, args.web, args.seed)
    print(
        f"wrote {figures['documents']:,} documents ({figures['body_bytes'] / 1e9:.2f} GB of body "
        f"text; {figures['planted_copies']:,} planted copies, {figures['mirrors']:,} mirrors) "
        f"to {args.out} in {figures['seconds']:.1f} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
