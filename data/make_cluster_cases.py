"""Write ``data/cluster_cases.csv``: a small fixture for cluster shape and LSH recall.

Run from the project root: ``.venv/bin/python data/make_cluster_cases.py``. The output is
deterministic: the bodies come from ``random.Random`` with fixed seeds, and where a case needs a
property of the default sketch (fss, 5-word shingles, 64 values in 8 bands of 8 rows, seed 42) the
script tries seeds in a fixed order and keeps the first that has it. Exact Jaccard and band keys
are computed with the project's own code (``verify.pair_jaccard``, ``sketch.fingerprint_batch``),
so the fixture holds for the pipeline as it is.

The cases, under the default settings (jaccard_threshold 0.7):

- ``chain-a`` ~ ``chain-b`` ~ ``chain-c``: ``chain-b`` is the base page, ``chain-a`` changes three
  words in its first half and ``chain-c`` three in its second half. J(a, b) and J(b, c) are about
  0.8 and both pairs share at least one LSH band; J(a, c) is about 0.64, and the two share no band.
  Connected components make one cluster of three; ``chain-a`` is the newest and represents it. A
  rule that removes only documents within the threshold of the representative keeps ``chain-c``.
  ``chain-a`` and ``chain-b`` are on one domain, ``chain-c`` on another.
- ``planted-p`` ~ ``planted-q``: five changed words put J between 0.70 and 0.75, and the two share
  no band, so LSH misses the pair; only the recall audit finds it.
- ``single-*``: unrelated pages, each on a domain of its own.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import numpy as np
import pyarrow as pa

from dedup_assets.core.settings.model import Settings
from dedup_assets.core.sketch.fingerprints import fingerprint_batch
from dedup_assets.core.verify.jaccard import pair_jaccard

OUTPUT = ROOT / "data" / "cluster_cases.csv"
COLUMNS = ["doc_id", "source", "domain", "crawled_at", "title", "body"]
SETTINGS = Settings()
PARAMS = SETTINGS.sketch_params()

ADJECTIVES = (
    "nightly regional stale primary shared internal quarterly manual automatic detailed "
    "failed pending archived current previous secure partial complete local remote weekly "
    "large small recent legacy optional required temporary permanent public private"
).split()
NOUNS = (
    "export ledger archive report cluster schedule budget invoice account dashboard backup "
    "index queue policy contract vendor warehouse shipment catalog release checklist runbook "
    "pipeline database server network ticket incident review audit summary template handbook "
    "partner customer survey forecast inventory timeline roadmap migration snapshot replica "
    "workflow meeting deadline request approval payment refund manifest badge laptop office"
).split()
VERBS = (
    "copies checks updates reviews moves archives publishes validates compares merges "
    "schedules tracks rebuilds exports imports approves rejects summarizes reconciles flags "
    "replaces restores records confirms"
).split()
PREPOSITIONS = "to from into with before after during across beside under".split()
ADVERBS = "usually quietly quickly carefully often rarely always gradually".split()
OPENERS = ("Each morning", "After the review", "On most days", "Before the deadline",
           "During the migration", "At the end of the quarter", "Once a week", "In practice")
PEOPLE = ("the team", "the operator", "the analyst", "the reviewer", "the owner", "the auditor", "the lead")


def _sentence(rng: random.Random) -> str:
    """One sentence from a few fixed shapes, so the text reads like a plain-English page."""
    a, n, v = rng.choice, NOUNS, VERBS
    shape = rng.randrange(4)
    if shape == 0:
        words = f"The {a(ADJECTIVES)} {a(n)} {a(v)} the {a(n)} {a(PREPOSITIONS)} the {a(ADJECTIVES)} {a(n)}"
    elif shape == 1:
        words = f"{a(OPENERS)}, {a(PEOPLE)} {a(ADVERBS)} {a(v)} every {a(ADJECTIVES)} {a(n)} {a(PREPOSITIONS)} the {a(n)}"
    elif shape == 2:
        adjective = a(ADJECTIVES)
        article = "An" if adjective[0] in "aeiou" else "A"
        words = (f"{article} {adjective} {a(n)} {a(v)} the {a(n)}, and the {a(n)} {a(ADVERBS)} "
                 f"{a(v)} the {a(ADJECTIVES)} {a(n)}")
    else:
        words = f"If the {a(n)} is {a(ADJECTIVES)}, the {a(n)} {a(v)} its {a(n)} {a(PREPOSITIONS)} the {a(n)}"
    return words[0].upper() + words[1:] + "."


def body(seed: int, minimum_words: int) -> str:
    """Sentences drawn with ``seed`` until the body has at least ``minimum_words`` words."""
    rng, sentences, count = random.Random(seed), [], 0
    while count < minimum_words:
        sentence = _sentence(rng)
        sentences.append(sentence)
        count += len(sentence.split())
    return " ".join(sentences)


def edited(text: str, seed: int, edits: int, first: float, last: float) -> str:
    """``text`` with ``edits`` of its adjectives, nouns and verbs between fractions ``first`` and
    ``last`` of it replaced by others of their kind, at least 6 words apart so each edit changes
    its own 5 shingles."""
    rng, words = random.Random(seed), text.split(" ")
    kinds = (ADJECTIVES, NOUNS, VERBS)
    low, high = int(len(words) * first) + 5, int(len(words) * last) - 5
    editable = [
        i for i in range(low, high)
        if any(words[i].rstrip(".,") in kind for kind in kinds) and words[i - 1] not in ("a", "A", "an", "An")
    ]
    while True:
        positions = sorted(rng.sample(editable, edits))
        if all(b - a >= 6 for a, b in zip(positions, positions[1:])):
            break
    for position in positions:
        word = words[position]
        core = word.rstrip(".,")
        kind = next(kind for kind in kinds if core in kind)
        words[position] = rng.choice([w for w in kind if w != core]) + word[len(core):]
    return " ".join(words)


def measure(bodies: list[str], pairs: list[tuple[int, int]]) -> list[tuple[float, int]]:
    """(exact Jaccard, shared band keys) of each pair of ``bodies``, by the project's code."""
    array = pa.array(bodies, pa.large_string())
    jaccard = pair_jaccard(
        array,
        np.array([p[0] for p in pairs]),
        np.array([p[1] for p in pairs]),
        PARAMS.shingle_size,
        PARAMS.hash_scheme,
    )
    bands = fingerprint_batch(pa.array([str(i) for i in range(len(bodies))]), array, PARAMS)
    keys = np.array(bands.column("lsh_bands").to_pylist(), dtype=np.uint64)
    return [(float(j), int((keys[l] == keys[r]).sum())) for j, (l, r) in zip(jaccard, pairs)]


def chain() -> tuple[str, str, str]:
    """The first (b, a, c) bodies where a ~ b and b ~ c share a band and reach the threshold,
    and a, c stay below it and share no band."""
    threshold = SETTINGS.jaccard_threshold
    for seed in range(1000, 2000):
        b = body(seed, 140)
        a = edited(b, seed + 10_000, 3, 0.0, 0.5)
        c = edited(b, seed + 20_000, 3, 0.5, 1.0)
        (ab, ab_bands), (bc, bc_bands), (ac, ac_bands) = measure([a, b, c], [(0, 1), (1, 2), (0, 2)])
        if (ab >= threshold and bc >= threshold and ab_bands and bc_bands
                and 0.5 <= ac <= 0.65 and not ac_bands):
            return a, b, c
    raise RuntimeError("no chain found")


def planted_pair() -> tuple[str, str]:
    """The first (p, q) with 0.70 <= J < 0.75 that share no band key."""
    for seed in range(3000, 4000):
        p = body(seed, 150)
        q = edited(p, seed + 10_000, 5, 0.0, 1.0)
        ((jaccard, shared),) = measure([p, q], [(0, 1)])
        if SETTINGS.jaccard_threshold <= jaccard < 0.75 and shared == 0:
            return p, q
    raise RuntimeError("no planted pair found")


SINGLETONS = [
    ("single-vendor", "vendors.example.com", "2026-02-03", "Vendor contract review"),
    ("single-budget", "finance.example.org", "2026-01-22", "Quarterly budget notes"),
    ("single-survey", "research.example.io", "2026-02-17", "Customer survey summary"),
    ("single-badge", "security.example.net", "2026-03-01", "Badge and office access"),
    ("single-roadmap", "product.example.dev", "2026-01-09", "Roadmap planning checklist"),
    ("single-warehouse", "logistics.example.co", "2026-02-26", "Warehouse shipment schedule"),
]


def rows() -> list[list[str]]:
    a, b, c = chain()
    p, q = planted_pair()
    result = [
        ["chain-a", "crawl", "guides.example.com", "2026-03-20", "Nightly export handbook", a],
        ["chain-b", "crawl", "guides.example.com", "2026-03-12", "Nightly export handbook", b],
        ["chain-c", "crawl", "mirror.example.net", "2026-03-05", "Nightly export handbook", c],
        ["planted-p", "crawl", "blog.example.org", "2026-02-11", "Archive snapshot runbook", p],
        ["planted-q", "crawl", "news.example.io", "2026-02-14", "Archive snapshot runbook", q],
    ]
    for index, (doc_id, domain, crawled_at, heading) in enumerate(SINGLETONS):
        result.append([doc_id, "crawl", domain, crawled_at, heading, body(5000 + index, 80 + 20 * index)])
    return result


def main() -> None:
    with OUTPUT.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(rows())
    print(f"wrote {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
