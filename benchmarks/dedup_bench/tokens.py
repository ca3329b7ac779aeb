"""Documents as token arrays for the corpus generator: Zipf draws, planted edits, and the store
of tokens that later copies read. Every operation works on many documents at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# What follows a token: a mark indexes this tuple. The last token of a document ends it.
SUFFIXES = (" ", ", ", ". ", ".")
SPACE, COMMA, STOP, END = range(len(SUFFIXES))
COMMA_SHARE, STOP_SHARE = 0.06, 0.04
WORD_DTYPE = np.uint16


class ZipfSampler:
    """Ranks 0..size-1 with probability proportional to 1/(rank+1), by Walker's alias method:
    one uniform draw per sample picks a column and decides between it and its alias."""

    def __init__(self, size: int):
        if size > np.iinfo(WORD_DTYPE).max + 1:
            raise ValueError(f"at most {np.iinfo(WORD_DTYPE).max + 1} ranks, got {size}")
        weights = 1.0 / np.arange(1, size + 1)
        scaled = weights * (size / weights.sum())
        self.size = size
        self.keep = np.ones(size)
        self.alias = np.arange(size, dtype=WORD_DTYPE)
        small = [int(i) for i in np.flatnonzero(scaled < 1)]
        large = [int(i) for i in np.flatnonzero(scaled >= 1)]
        while small and large:
            short, tall = small.pop(), large.pop()
            self.keep[short], self.alias[short] = scaled[short], tall
            scaled[tall] -= 1 - scaled[short]
            (small if scaled[tall] < 1 else large).append(tall)

    def __call__(self, rng: np.random.Generator, count: int) -> np.ndarray:
        position = rng.random(count) * self.size
        column = np.minimum(position.astype(np.int64), self.size - 1)
        own = (position - column) < self.keep[column]
        return np.where(own, column.astype(WORD_DTYPE), self.alias[column])


def punctuation(rng: np.random.Generator, count: int) -> np.ndarray:
    """Marks of tokens inside a document: mostly a space, now and then a comma or a full stop."""
    draw = rng.random(count)
    marks = np.full(count, SPACE, dtype=np.uint8)
    marks[draw < COMMA_SHARE + STOP_SHARE] = COMMA
    marks[draw < STOP_SHARE] = STOP
    return marks


def ragged_index(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Positions of the ranges [starts[i], starts[i] + lengths[i]) laid end to end."""
    placed = np.cumsum(lengths) - lengths
    return np.repeat(starts - placed, lengths) + np.arange(int(lengths.sum()))


@dataclass
class Tokens:
    """Documents ``doc_ids`` of ``lengths`` tokens each; ``words`` and ``marks`` end to end."""

    doc_ids: np.ndarray
    lengths: np.ndarray
    words: np.ndarray
    marks: np.ndarray

    def starts(self) -> np.ndarray:
        return np.cumsum(self.lengths) - self.lengths

    def select(self, rows: np.ndarray) -> Tokens:
        index = ragged_index(self.starts()[rows], self.lengths[rows])
        return Tokens(self.doc_ids[rows], self.lengths[rows], self.words[index], self.marks[index])

    @classmethod
    def concat(cls, parts: list[Tokens]) -> Tokens:
        fields = cls.__annotations__
        return cls(*(np.concatenate([getattr(part, name) for part in parts]) for name in fields))


def random_tokens(
    rng: np.random.Generator, zipf: ZipfSampler, doc_ids: np.ndarray, lengths: np.ndarray
) -> Tokens:
    """Original documents: Zipf words, sentence punctuation, a full stop at the end."""
    total = int(lengths.sum())
    words = zipf(rng, total)
    marks = punctuation(rng, total)
    marks[np.cumsum(lengths) - 1] = END
    return Tokens(doc_ids, lengths, words, marks)


def edit_tokens(
    rng: np.random.Generator, zipf: ZipfSampler, source: Tokens, rates: np.ndarray
) -> Tokens:
    """Copies of ``source`` where each token is substituted, deleted, or followed by an inserted
    word, each with probability rate / 3 for its document's rate; rate 0 copies exactly."""
    rate = np.repeat(rates.astype(np.float64), source.lengths)
    draw = rng.random(len(rate))
    substitute = draw < rate / 3
    delete = (draw >= rate / 3) & (draw < 2 * rate / 3)
    insert = (draw >= 2 * rate / 3) & (draw < rate)
    delete[source.starts()] = False  # so that no copy is ever empty
    keep = ~delete
    words = source.words.copy()
    words[substitute] = zipf(rng, int(substitute.sum()))
    emitted = keep.astype(np.int64) + insert
    slots = np.cumsum(emitted) - emitted
    out_words = np.empty(int(emitted.sum()), dtype=WORD_DTYPE)
    out_marks = np.empty(len(out_words), dtype=np.uint8)
    out_words[slots[keep]], out_marks[slots[keep]] = words[keep], source.marks[keep]
    added = slots[insert] + keep[insert]
    out_words[added] = zipf(rng, len(added))
    out_marks[added] = punctuation(rng, len(added))
    lengths = np.add.reduceat(emitted, source.starts())
    # a deleted last token, or a word inserted after it, leaves the end mark inside
    out_marks[out_marks == END] = STOP
    out_marks[np.cumsum(lengths) - 1] = END
    return Tokens(source.doc_ids, lengths, out_words, out_marks)


class TokenStore:
    """The tokens of documents that a later copy reads, in one buffer that grows when it is full."""

    def __init__(self, documents: int, expected_tokens: int):
        self.start = np.zeros(documents, dtype=np.int64)
        self.length = np.zeros(documents, dtype=np.int64)
        self.words = np.empty(expected_tokens, dtype=WORD_DTYPE)
        self.marks = np.empty(expected_tokens, dtype=np.uint8)
        self.size = 0

    def keep(self, tokens: Tokens, referenced: np.ndarray) -> None:
        """Store those of ``tokens``'s documents that ``referenced`` marks."""
        kept = tokens.select(np.flatnonzero(referenced[tokens.doc_ids]))
        end = self.size + len(kept.words)
        if end > len(self.words):
            spare = max(end, len(self.words) + len(self.words) // 4) - self.size
            self.words = np.concatenate([self.words[: self.size], np.empty(spare, WORD_DTYPE)])
            self.marks = np.concatenate([self.marks[: self.size], np.empty(spare, np.uint8)])
        self.words[self.size : end], self.marks[self.size : end] = kept.words, kept.marks
        self.start[kept.doc_ids] = self.size + kept.starts()
        self.length[kept.doc_ids] = kept.lengths
        self.size = end

    def take(self, origins: np.ndarray, doc_ids: np.ndarray) -> Tokens:
        """The stored tokens of ``origins``, as documents ``doc_ids``."""
        lengths = self.length[origins]
        index = ragged_index(self.start[origins], lengths)
        return Tokens(doc_ids, lengths, self.words[index], self.marks[index])
