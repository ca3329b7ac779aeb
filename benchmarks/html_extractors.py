#!/usr/bin/env python3
"""Compare HTML main-text extractors on pages whose main text is known.

    python benchmarks/html_extractors.py [--pages 300]

Each page wraps a known article (several paragraphs) in boilerplate that web pages carry:
navigation, a cookie banner, a sidebar of links, related-article teasers and a footer. Quality is
token precision and recall of the extracted text against the article; speed is pages per second
on one core. The pages are synthetic and regular, so treat the figures as a sanity check of
boilerplate removal and of cost, not as a ranking on real crawls.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter

from dedup_bench.markdown import markdown_table

WORDS = (
    "routing alert team service catalogue minute ownership rule engineer page escalation "
    "manager queue platform release decision reviewer replay policy retention ledger invoice "
    "payment settlement processor reconciliation refund chargeback index search ranking model "
    "promotion evaluation dataset baseline metric rollout canary rollback latency budget"
).split()
BOILERPLATE = "Home Products Pricing Docs Blog Careers Contact Sign in Subscribe Newsletter".split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    return " ".join(words).capitalize() + "."


def make_page(rng: random.Random) -> tuple[str, str]:
    paragraphs = [" ".join(sentence(rng) for _ in range(rng.randint(3, 6))) for _ in range(rng.randint(3, 6))]
    nav = "".join(f'<li><a href="/{w.lower()}">{w}</a></li>' for w in BOILERPLATE)
    teasers = "".join(f'<div class="teaser"><a href="/t{i}">{sentence(rng)}</a></div>' for i in range(5))
    html = (
        "<html><head><title>Article</title></head><body>"
        f"<header><ul class='nav'>{nav}</ul></header>"
        "<div class='cookie'>We use cookies to improve your experience. Accept all cookies.</div>"
        f"<aside><h3>Popular</h3>{teasers}</aside>"
        "<main><article><h1>Article title</h1>"
        + "".join(f"<p>{p}</p>" for p in paragraphs)
        + "</article></main>"
        f"<section class='related'><h3>Related articles</h3>{teasers}</section>"
        f"<footer><ul>{nav}</ul><p>Copyright 2026 Example Inc. All rights reserved.</p></footer>"
        "</body></html>"
    )
    return html, " ".join(["Article title", *paragraphs])


def tokens(text: str) -> Counter:
    return Counter(word.strip(".,").lower() for word in text.split() if word.strip(".,"))


def score(extracted: str, truth: str) -> tuple[float, float]:
    got, want = tokens(extracted), tokens(truth)
    common = sum((got & want).values())
    return (common / max(1, sum(got.values())), common / max(1, sum(want.values())))


def resiliparse_extract(html: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    return extract_plain_text(HTMLTree.parse(html), main_content=True)


def trafilatura_extract(html: str) -> str:
    import trafilatura

    return trafilatura.extract(html) or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    args = parser.parse_args()
    rng = random.Random(7)
    pages = [make_page(rng) for _ in range(args.pages)]
    rows = []
    for name, extract in (("resiliparse", resiliparse_extract), ("trafilatura", trafilatura_extract)):
        extract(pages[0][0])  # import and warm up outside the timing
        started = time.perf_counter()
        results = [extract(html) for html, _ in pages]
        elapsed = time.perf_counter() - started
        precision, recall = zip(*(score(text, truth) for text, (_, truth) in zip(results, pages)))
        rows.append([name, f"{args.pages / elapsed:,.0f}", f"{sum(precision) / len(precision):.3f}", f"{sum(recall) / len(recall):.3f}"])
    print(f"{args.pages} synthetic pages, one core\n")
    print(markdown_table(["extractor", "pages/s", "token precision", "token recall"], rows))


if __name__ == "__main__":
    main()
