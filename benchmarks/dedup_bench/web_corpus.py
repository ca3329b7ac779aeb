"""The web-length corpus: the benchmark corpus's plan (copies, mirrors, edits, domains, truth), with
pages as long as real web pages and each site's boilerplate on its pages.

    python -m dedup_bench.corpus N OUT.parquet --web [--seed 1234]

A page's length in bytes is log-normal, median MEDIAN_BYTES and sigma LENGTH_SIGMA, cut to
[MIN_BYTES, MAX_BYTES]. Every site (domain) has a template of Zipf words, log-normal around
TEMPLATE_TOKENS tokens: its first third opens each of the site's pages (the header), the rest
closes them (the footer). Between them is the page's own prose, at least OWN_OVER_TEMPLATE times
the template (so the template is at most 0.4 of the page). A share HEAVY_SHARE of the pages are
mostly boilerplate instead: their own prose is sized so the template is a fraction
HEAVY_FRACTION of the page. So the median page is about 3 KB and the mean about 5 KB, and at
100,000 pages a few dozen are past 100 KB. Two pages of a site share at most f / (2 - f) of
their shingles (0.54 at f = 0.7): below the threshold of 0.7, so the planted copies stay the
only pairs meant to be found, while the boilerplate crowds the site's LSH buckets. Copies (exact mirrors and edited) copy the whole page, template
included, as a copied page does.
"""

from __future__ import annotations

import numpy as np

from .corpus import Plan
from .tokens import COMMA_SHARE, END, STOP, STOP_SHARE, Tokens, ZipfSampler, random_tokens, ragged_index

MEDIAN_BYTES = 3_300  # of the pages that are not mostly boilerplate
LENGTH_SIGMA = 1.0
MIN_BYTES, MAX_BYTES = 300, 1_500_000
TEMPLATE_TOKENS, TEMPLATE_SIGMA = 80, 0.6
MIN_TEMPLATE, MAX_TEMPLATE = 20, 600
HEAVY_SHARE = 0.08
HEAVY_FRACTION = (0.5, 0.7)
MIN_OWN_TOKENS = 10
OWN_OVER_TEMPLATE = 1.5


def bytes_per_token(words: list[str]) -> float:
    """The mean rendered bytes of a token: its Zipf-weighted word, and a space, or a comma or a
    full stop and a space."""
    weights = 1.0 / np.arange(1, len(words) + 1)
    word = float(np.dot(weights, [len(spelled) for spelled in words]) / weights.sum())
    return word + 1 + COMMA_SHARE + STOP_SHARE


class WebPages:
    """Draws the sites' templates and every page's length (replacing the plan's), and makes the
    originals: header, own prose, footer."""

    # a group's transient token arrays are about 40 bytes a token: 4,096 pages of ~900 tokens
    # keep them near 150 MB
    group_docs = 4_096

    def __init__(self, rng: np.random.Generator, words: list[str], plan: Plan):
        zipf = ZipfSampler(len(words))
        sites = int(plan.domain.max()) + 1
        sizes = np.rint(TEMPLATE_TOKENS * rng.lognormal(0.0, TEMPLATE_SIGMA, sites))
        sizes = np.clip(sizes, MIN_TEMPLATE, MAX_TEMPLATE).astype(np.int64)
        self.template = random_tokens(rng, zipf, np.arange(sites), sizes)
        self.header = sizes // 3
        # a template's header and footer each end a sentence
        self.template.marks[self.template.starts() + self.header - 1] = STOP
        self.template.marks[np.cumsum(sizes) - 1] = STOP
        documents = len(plan.domain)
        page_bytes = np.clip(MEDIAN_BYTES * rng.lognormal(0.0, LENGTH_SIGMA, documents), MIN_BYTES, MAX_BYTES)
        template = sizes[plan.domain]
        # a page that is not mostly boilerplate has at least OWN_OVER_TEMPLATE times its template
        tokens = np.rint(page_bytes / bytes_per_token(words)).astype(np.int64)
        own = np.maximum(tokens - template, np.rint(OWN_OVER_TEMPLATE * template).astype(np.int64))
        heavy = rng.random(documents) < HEAVY_SHARE
        fraction = rng.uniform(*HEAVY_FRACTION, documents)
        own[heavy] = np.maximum(np.rint(template[heavy] * (1 - fraction[heavy]) / fraction[heavy]), MIN_OWN_TOKENS)
        # the plan's uniform lengths were drawn to keep its draws in order; a page's are these
        plan.length = template + own
        self.heavy = heavy

    def originals(self, rng: np.random.Generator, zipf: ZipfSampler, ids: np.ndarray, plan: Plan) -> Tokens:
        site = plan.domain[ids]
        size = self.template.lengths[site]
        own = random_tokens(rng, zipf, ids, plan.length[ids] - size)
        own.marks[np.cumsum(own.lengths) - 1] = STOP
        # each page is three ranges of one pool, the templates' tokens and then the prose's
        first = self.template.starts()[site]
        header = self.header[site]
        starts = np.stack([first, len(self.template.words) + own.starts(), first + header], axis=1)
        lengths = np.stack([header, own.lengths, size - header], axis=1)
        index = ragged_index(starts.ravel(), lengths.ravel())
        words = np.concatenate([self.template.words, own.words])[index]
        marks = np.concatenate([self.template.marks, own.marks])[index]
        marks[np.cumsum(plan.length[ids]) - 1] = END
        return Tokens(ids, plan.length[ids], words, marks)
