"""One peer engine on the benchmark's task, in this process, timed stage by stage (``run``, the
child side of ``theirs.run_peer``).

The engine is one of ``peer_engines.ENGINES``. Every engine gets the same verification and clustering,
and, unless it names another (``front_end``), the same front end, written as a Python user of these
libraries would write them:

    read     pyarrow batches of 4,096 bodies, as Python strings
    shingle  lowercase, ASCII punctuation to spaces, split on whitespace, the set of 5-token
             shingles as UTF-8 bytes (for ASCII text this is the pipeline's normalization)
    hash64   xxh64 of every distinct shingle, sorted per document: the exact sets that verify
             compares, and the pre-hashed input of the engines that take one
    sketch   the engine's (string engines hash inside it)
    lsh      the engine's index, and every candidate pair i < j
    verify   exact Jaccard of each candidate pair's hashed sets, kept at >= 0.7
    cc       scipy connected components of the kept pairs

The vectorized front end (``fastsketch-vec``) reads batches of 16,384 bodies into polars, which
lowercases, cuts tokens at the same characters and hashes every token (shingle); numpy combines each
5 consecutive token hashes into one shingle hash, then each document's are sorted and made distinct
(hash64): the same sets as above, other 64-bit values (but for letters whose lowercase is newer
than the Unicode of Python's ``str.lower``, which polars lowers and Python leaves).

It returns wall and CPU seconds per stage, the timed total, peak RSS, counts, and
the recall of the planted pairs with exact Jaccard >= 0.7 in the corpus's ``*.truth.parquet``.
"""

from __future__ import annotations

import gc
import resource
import string
import time
from collections import defaultdict
from contextlib import contextmanager
from itertools import chain, pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .common import ROWS_PER_BAND, SHINGLE_SIZE, THRESHOLD, truth_path
from .peer_engines import ENGINES, pair_keys

TO_SPACE = str.maketrans(string.punctuation, " " * len(string.punctuation))
# what ``shingle_set`` cuts tokens at: ASCII punctuation and the whitespace bytes.split() knows
CUT = r"[\t\n\x0B\x0C\r!-/:-@\[-`{-~]"
MIX = np.uint64(0x9E3779B97F4A7C15)


class Stages:
    """Wall and CPU seconds per named stage, summed over every time the stage runs."""

    def __init__(self):
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    @contextmanager
    def __call__(self, name: str):
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall[name] += time.perf_counter() - wall
            self.cpu[name] += time.process_time() - cpu


def shingle_set(body: str) -> list[bytes]:
    """Distinct 5-token shingles; a shorter non-empty document is one whole-document shingle."""
    tokens = body.lower().translate(TO_SPACE).encode("utf-8").split()
    if len(tokens) < SHINGLE_SIZE:
        return [b" ".join(tokens)] if tokens else []
    return list(set(map(b" ".join, zip(*(tokens[start:] for start in range(SHINGLE_SIZE))))))


def hashed_sets(shingles: list[list[bytes]]) -> tuple[np.ndarray, np.ndarray]:
    """(hashes, offsets): document i's sorted shingle hashes are hashes[offsets[i]:offsets[i+1]]."""
    offsets = np.zeros(len(shingles) + 1, dtype=np.int64)
    np.cumsum([len(shingled) for shingled in shingles], out=offsets[1:])
    hashes = np.fromiter(
        map(xxhash.xxh64_intdigest, chain.from_iterable(shingles)), np.uint64, offsets[-1]
    )
    sort_each(hashes, offsets)
    return hashes, offsets


def sort_each(hashes: np.ndarray, offsets: np.ndarray) -> None:
    for start, end in pairwise(offsets.tolist()):
        hashes[start:end].sort()


class PythonFrontEnd:
    """Python strings, ``shingle_set`` and ``hashed_sets``."""

    batch_rows = 4096

    def bodies(self, column: pa.Array) -> list[str]:
        return column.to_pylist()

    def shingle(self, bodies: list[str]) -> list[list[bytes]]:
        return [shingle_set(body or "") for body in bodies]

    def hash(self, shingles: list[list[bytes]]) -> tuple[np.ndarray, np.ndarray]:
        return hashed_sets(shingles)


class VectorFrontEnd:
    """polars and numpy over a batch at a time (the module's docstring); ``shingle`` returns every
    window's hash and each document's window count, ``hash`` the sorted distinct sets."""

    batch_rows = 16_384

    def __init__(self):
        import polars

        self.polars = polars

    def bodies(self, column):
        return self.polars.from_arrow(column).fill_null("")

    def shingle(self, bodies):
        text = self.polars.col("token")
        tokens = (
            bodies.to_frame("token").with_row_index("doc").lazy()
            .select("doc", text.str.to_lowercase().str.replace_all(CUT, " ").str.split(" "))
            .explode("token").filter(text != "")
            .select("doc", text.hash()).collect()
        )  # faster than str.extract_all of the tokens
        doc = tokens["doc"].to_numpy()
        lengths = np.bincount(doc, minlength=len(bodies))
        # every document's tokens followed by SHINGLE_SIZE - 1 zeros, so that no window reaches
        # into the next document and a document shorter than a shingle is one window, as in
        # shingle_set: the window at p is sum(padded[p + k] * MIX ** (SHINGLE_SIZE - 1 - k))
        pad = SHINGLE_SIZE - 1
        padded = np.zeros(len(doc) + pad * len(lengths), dtype=np.uint64)
        padded[np.arange(len(doc)) + pad * doc] = tokens["token"].to_numpy()
        windows = padded.copy()
        with np.errstate(over="ignore"):
            for k in range(1, SHINGLE_SIZE):
                windows[:-k] *= MIX
                windows[:-k] += padded[k:]
        counts = np.maximum(lengths - pad, np.minimum(lengths, 1))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        starts = np.cumsum(lengths + pad) - lengths - pad
        return windows[np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])], offsets

    def hash(self, shingles):
        hashes, offsets = shingles
        sort_each(hashes, offsets)
        distinct = np.ones(len(hashes) + 1, dtype=bool)
        distinct[1:-1] = hashes[1:] != hashes[:-1]
        distinct[offsets[:-1]] = True  # every document's first
        kept = np.zeros(len(hashes) + 1, dtype=np.int64)
        np.cumsum(distinct[:-1], out=kept[1:])
        return hashes[distinct[:-1]], kept[offsets]


FRONT_ENDS = {"python": PythonFrontEnd, "vectorized": VectorFrontEnd}


def set_jaccard(
    hashes: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray
) -> np.ndarray:
    """Exact Jaccard of the hashed sets of each (left[k], right[k]) pair of documents."""
    bounds = offsets.tolist()
    scores = np.zeros(len(left), dtype=np.float64)
    for pair, (i, j) in enumerate(zip(left.tolist(), right.tolist())):
        small, large = hashes[bounds[i] : bounds[i + 1]], hashes[bounds[j] : bounds[j + 1]]
        if len(small) > len(large):
            small, large = large, small
        if len(small):
            found = large[np.minimum(np.searchsorted(large, small), len(large) - 1)] == small
            common = int(np.count_nonzero(found))
            scores[pair] = common / (len(small) + len(large) - common)
    return scores


def planted_recall(corpus: Path, doc_ids: pa.Array, sets, candidates, accepted) -> dict:
    """Share of the planted pairs with exact Jaccard >= THRESHOLD (of the hashed ``sets``) among
    the ``accepted`` pairs and among the ``candidates``; empty without a truth sidecar."""
    if not truth_path(corpus).exists():
        return {}
    truth = pq.read_table(truth_path(corpus), columns=["doc_id", "origin_doc_id"])
    origin = pc.index_in(truth["origin_doc_id"], value_set=doc_ids)
    copy = pc.index_in(truth["doc_id"], value_set=doc_ids)
    present = pc.and_(pc.is_valid(origin), pc.is_valid(copy))
    origin = pc.filter(origin, present).to_numpy().astype(np.int64)
    copy = pc.filter(copy, present).to_numpy().astype(np.int64)
    positive = set_jaccard(*sets, origin, copy) >= THRESHOLD
    wanted = pair_keys(origin[positive], copy[positive])
    found = {
        name: float(np.isin(wanted, pair_keys(*pairs)).mean()) if len(wanted) else None
        for name, pairs in (("recall", accepted), ("candidate_recall", candidates))
    }
    return {"planted_pairs": len(origin), "planted_positive": int(positive.sum()), **found}


def run(corpus: str, engine_name: str, perm: int) -> dict:
    corpus, stages = Path(corpus), Stages()
    engine = ENGINES[engine_name](perm, perm // ROWS_PER_BAND)
    front = FRONT_ENDS[engine.front_end]()
    hash_parts, count_parts, id_parts = [], [], []
    started = time.perf_counter()
    batches = pq.ParquetFile(corpus).iter_batches(front.batch_rows, columns=["doc_id", "body"])
    while True:
        with stages("read"):
            batch = next(batches, None)
            if batch is None:
                break
            bodies = front.bodies(batch.column("body"))
        with stages("shingle"):
            shingles = front.shingle(bodies)
        del bodies
        with stages("hash64"):
            hashes, offsets = front.hash(shingles)
        with stages("sketch"):
            engine.sketch(shingles, hashes, offsets)
        del shingles
        hash_parts.append(hashes)
        count_parts.append(np.diff(offsets))
        id_parts.append(batch.column("doc_id"))
    with stages("hash64"):
        hashes = np.concatenate(hash_parts)
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(count_parts))])
        del hash_parts, count_parts
    documents = len(offsets) - 1
    gc.collect()
    with stages("lsh"):
        left, right = engine.candidates(documents)
    with stages("verify"):
        kept = set_jaccard(hashes, offsets, left, right) >= THRESHOLD
        accepted = left[kept], right[kept]
    with stages("cc"):
        graph = coo_matrix((np.ones(kept.sum(), np.int8), accepted), shape=(documents, documents))
        components, _ = connected_components(graph, directed=False)
    timed = time.perf_counter() - started
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    recall = {}
    if engine.finds_pairs:
        doc_ids = pa.chunked_array(id_parts).combine_chunks()
        recall = planted_recall(corpus, doc_ids, (hashes, offsets), (left, right), accepted)
    return {
        "engine": engine_name,
        "threads": engine.threads,
        "perm": perm,
        "documents": documents,
        "shingles": int(offsets[-1]),
        "candidates": len(left),
        "accepted": int(kept.sum()),
        "docs_in_duplicate_groups": documents - int(components),
        "stages": dict(stages.wall),
        "cpu": dict(stages.cpu),
        "timed_s": timed,
        "peak_rss_mb": peak_rss_mb,
        **recall,
    }
