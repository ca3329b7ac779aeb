"""Text as the specification defines it, extended to every script, and as the kernels read it.

The rule, in the specification's terms (the README's "Text in every script" says it for users):
- **Normalize**: NFD; drop the combining marks that are accents (the combining-diacritics blocks
  used by Latin, Greek and Cyrillic, and Hebrew and Arabic vowel pointing, which is optional in
  both scripts); recompose what is left (NFC), so marks that are letters elsewhere (kana voicing,
  Thai and Indic vowels and tones) stay on their letters and Hangul stays in syllables; lowercase;
  every character that is neither alphanumeric nor a kept mark (``_`` included) separates tokens.
  For Latin, Greek and Cyrillic text this is the specification's normalization exactly.
- **Tokens** (``word`` unit): runs of token characters, except that every Han, Hiragana and
  Katakana character is a token of its own, since those scripts put no spaces between words.
- **Shingles**: ``size`` consecutive tokens; in the ``char`` unit, ``size`` consecutive characters
  of the normalized text with its spaces removed (for Thai, Khmer, Lao, Myanmar, or by choice).
  A document shorter than ``size`` is one whole-document shingle.

:func:`normalize_text`, :func:`tokenize` and :func:`token_shingles` are the reference (a unit's
tokens and what joins them come from its tokenizer, ``text/tokenizers/``). The kernels read a column's
UTF-8 bytes (:func:`utf8_buffers`) and normalize through a per-code-point table
(:func:`code_point_table`): a document's normalization is the concatenation of its code points'
own, except where a character's result depends on its neighbours. The table records, for each
code point of the Basic Multilingual Plane, what can make it so (a capital sigma, whose lowercase
depends on its neighbours; a kept mark that composes with what precedes it; kept marks out of
canonical order across code points); :func:`kernel_text` sends the documents where that happens,
and those with a character beyond the plane, to the reference instead.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import Literal, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sketch import kernels
from .tokenizers import TOKENIZERS, Tokenizer

# the shingle_unit setting's words: the registered tokenizers' names
ShingleUnit = Literal[tuple(TOKENIZERS)]
# The version of the text rule above (normalization and tokens, both units), in the reference and
# in the kernels' code point table alike: raised with any change to the tokens a text comes to.
# Recorded with every fingerprint table and index (``sketch/scheme.py``), which refuses another.
NORMALIZATION = "text-v1"


class Shingling(NamedTuple):
    """How a document becomes shingles: ``size`` consecutive tokens (``word``) or characters
    (``char``), without the ``ignored`` shingles (the ``ignored_passages``', sorted) unless a
    document has no other."""

    size: int = 5
    unit: str = "word"
    ignored: tuple[str, ...] = ()


NO_IGNORED = np.zeros(0, dtype=np.uint64)


def kept_shingles(shingles: set[str], ignored: tuple[str, ...]) -> set[str]:
    """``shingles`` without the ``ignored`` ones, unless none would be left (as the kernels do)."""
    return (shingles - set(ignored)) or shingles if ignored else shingles


# Combining marks that are accents: dropped after NFD (the specification's rule, kept for the
# scripts it was written for). Every other mark is part of its letter.
_ACCENT_BLOCKS = (
    (0x0300, 0x036F),  # combining diacritical marks (Latin, Greek)
    (0x0483, 0x0489),  # Cyrillic, and its extensions and Glagolitic below
    (0x0591, 0x05C7),  # Hebrew points and cantillation
    (0x064B, 0x0652),  # Arabic harakat (maddah and hamza, which form letters, stay)
    (0x0656, 0x065F),
    (0x0670, 0x0670),  # superscript alef
    (0x06D6, 0x06ED),  # Quranic annotation
    (0x08D3, 0x08FF),
    (0x1AB0, 0x1AFF),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20FF),
    (0x2DE0, 0x2DFF),
    (0xA66F, 0xA67D),
    (0xA69E, 0xA69F),
    (0xFB1E, 0xFB1E),  # Hebrew varika
    (0xFE20, 0xFE2F),
    (0x1E000, 0x1E02F),
)
# Variation selectors choose a glyph, never a letter: separators, as before.
_VARIATION_SELECTORS = ((0x180B, 0x180D), (0x180F, 0x180F), (0xFE00, 0xFE0F), (0xE0100, 0xE01EF))
# Han, Hiragana and Katakana (with their iteration and prolonged-sound marks): a token each.
_CJK_BLOCKS = (
    (0x3005, 0x3007),
    (0x3021, 0x3029),
    (0x3031, 0x3035),
    (0x3038, 0x303C),
    (0x3040, 0x30FF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFF9F),
    (0x1B000, 0x1B16F),
    (0x20000, 0x323AF),
)


def _within(code_point: int, blocks: tuple[tuple[int, int], ...]) -> bool:
    return any(first <= code_point <= last for first, last in blocks)


@cache  # per distinct character: the reference runs it on every character of its documents
def _is_accent(ch: str) -> bool:
    return unicodedata.combining(ch) != 0 and _within(ord(ch), _ACCENT_BLOCKS)


def _is_token_character(ch: str) -> bool:
    if ch.isalnum():
        return True
    code_point = ord(ch)
    return (
        unicodedata.category(ch)[0] == "M"
        and not _within(code_point, _ACCENT_BLOCKS)
        and not _within(code_point, _VARIATION_SELECTORS)
    )


def _kept_decomposition(value: str) -> str:
    """NFD without the accents."""
    return "".join(ch for ch in unicodedata.normalize("NFD", value) if not _is_accent(ch))


def fold_characters(value: str) -> str:
    """The normalization's character steps: NFD, drop accents, recompose, lowercase."""
    return unicodedata.normalize("NFC", _kept_decomposition(value)).lower()


@cache
def _spaced(ch: str) -> str:
    """A folded character as the tokenizer sees it: itself, a token of its own, or a separator."""
    if not _is_token_character(ch):
        return " "
    return f" {ch} " if _within(ord(ch), _CJK_BLOCKS) else ch


# the rule on ASCII, where no character decomposes, is an accent or is Han: letters lowercased,
# letters and digits kept, everything else a separator
_ASCII_SPACED = str.maketrans({chr(code): _spaced(chr(code).lower()) for code in range(128)})


def normalize_text(value: str | None) -> str:
    """The normalized text: tokens separated by single spaces (see the module's rule). ASCII
    text takes a translation table instead of the Unicode steps, 15x faster, same result."""
    value = value or ""
    if value.isascii():
        return " ".join(value.translate(_ASCII_SPACED).split())
    return normalize_unicode(value)


def normalize_unicode(value: str) -> str:
    """:func:`normalize_text` of any text, character by character through the Unicode steps."""
    return " ".join("".join(_spaced(ch) for ch in fold_characters(value)).split())


def tokenize(normalized: str, unit: str = "word") -> list[str]:
    """Tokens of already-normalized text by the ``unit``'s tokenizer: its words, or (``char``) its
    characters but spaces."""
    return TOKENIZERS[unit].tokenize(normalized)


def token_shingles(tokens: list[str], size: int, unit: str = "word") -> set[str]:
    """Ordered ``size``-token windows; a shorter non-empty document is one whole-document shingle.
    Tokens are joined by the unit's separator: words by a space, characters by nothing."""
    if size <= 0:
        raise ValueError(f"shingle size must be positive, got {size}")
    if not tokens:
        return set()
    if len(tokens) < size:
        return {joined(tokens, unit)}
    # the windows tokens[i : i + size], as columns of shifted lists rather than a slice each
    return set(map(TOKENIZERS[unit].separator.join, zip(*(tokens[shift:] for shift in range(size)))))


def joined(tokens: list[str], unit: str = "word") -> str:
    """Tokens as one string, joined by the unit's separator: words between spaces, characters
    side by side."""
    return TOKENIZERS[unit].separator.join(tokens)


def document_shingles(body: str | None, shingling: Shingling) -> set[str]:
    """Normalize, tokenize and shingle one body, without the ignored shingles."""
    shingles = token_shingles(tokenize(normalize_text(body), shingling.unit), shingling.size, shingling.unit)
    return kept_shingles(shingles, shingling.ignored)


# Below this many characters a character shingle is shared by most pages of a language.
SHORT_CHARACTER_SHINGLE = 3
# ... which matters from about this many documents: buckets and candidate pairs grow as its square
MANY_DOCUMENTS = 10_000


def shingling_warning(shingling: Shingling, documents: int) -> str | None:
    """A warning for character shingles too short for the corpus, else None."""
    if shingling.unit != "char" or shingling.size >= SHORT_CHARACTER_SHINGLE or documents < MANY_DOCUMENTS:
        return None
    return (
        f"shingle_unit char with shingle_size {shingling.size} on {documents:,} documents: shingles "
        f"this short are shared by most pages of a language, so LSH buckets and candidate pairs "
        f"grow with the square of the corpus (a hot bucket or a refused self-join). Set "
        f"shingle_size to {SHORT_CHARACTER_SHINGLE} or more (3 to 5 is usual for character shingles)."
    )


def utf8_buffers(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A string array's UTF-8 bytes and its offsets into them, without a copy; always read-only
    (Arrow's buffers are read-only or not depending on how they were made, and each flag would
    be a kernel signature of its own, compiled again)."""
    _, offsets, data = text.buffers()
    offset_type = np.int64 if pa.types.is_large_string(text.type) else np.int32
    offsets = np.frombuffer(offsets, dtype=offset_type)[text.offset : text.offset + len(text) + 1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(1, np.uint8)
    for array in (data, offsets):
        array.flags.writeable = False
    return data, offsets


# --- the kernels' view: a per-code-point table and the UTF-8 buffers ------------------------------

PLANE_SIZE = 0x10000
SURROGATES = range(0xD800, 0xE000)


@cache
def _compositions() -> tuple[frozenset[str], frozenset[str]]:
    """The letters that start a canonical composition with a kept mark, and those marks: the two
    halves of every primary composite whose second half is not an accent (NFC composes it back;
    a composition exclusion it does not), and Hangul's leading consonants and syllables without
    a final, which take a vowel and a final."""
    firsts = {chr(code) for code in range(0x1100, 0x1113)}
    firsts |= {chr(code) for code in range(0xAC00, 0xD7A4, 28)}
    seconds = {chr(code) for code in [*range(0x1161, 0x1176), *range(0x11A8, 0x11C3)]}
    for code_point in range(0x110000):
        parts = unicodedata.decomposition(chr(code_point)).split()
        if len(parts) != 2 or parts[0].startswith("<"):
            continue
        first, second = (chr(int(part, 16)) for part in parts)
        if not _is_accent(second) and unicodedata.normalize("NFC", first + second) == chr(code_point):
            firsts.add(first)
            seconds.add(second)
    return frozenset(firsts), frozenset(seconds)


def code_point_context(code_point: int) -> int:
    """What the kernels need to know to tell whether a code point's result depends on its
    neighbours (``kernels.needs_reference_kernel`` reads the bits). Canonical reordering moves a
    kept mark before an earlier one of a higher class; composition joins a kept composing mark
    that leads a code point's decomposition to a letter before it that can take it."""
    if code_point == 0x03A3:  # capital sigma: final or medial by its neighbours
        return kernels.NEEDS_REFERENCE
    kept = _kept_decomposition(chr(code_point))
    classes = [unicodedata.combining(ch) for ch in kept]
    starters = [index for index, value in enumerate(classes) if value == 0]
    leading = classes[: starters[0]] if starters else classes
    trailing = classes[starters[-1] + 1 :] if starters else classes
    context = min(leading, default=kernels.NO_LEADING_MARK) | max(trailing, default=0) << kernels.TRAILING_CLASS_SHIFT
    firsts, seconds = _compositions()
    if starters:
        context |= kernels.HAS_STARTER
    if any(ch in seconds for ch in (kept[: starters[0] + 1] if starters else kept)):
        context |= kernels.COMPOSES_BACKWARD
    composed = [ch for ch in unicodedata.normalize("NFC", kept) if unicodedata.combining(ch) == 0]
    if composed:
        context |= kernels.ENDS_WITH_STARTER | (kernels.ENDS_COMPOSABLE if composed[-1] in firsts else 0)
    return context


def normalize_code_point(code_point: int) -> str:
    """One character through the reference steps, separators as spaces."""
    return "".join(_spaced(ch) for ch in fold_characters(chr(code_point)))


class CodePointTable(NamedTuple):
    pieces: np.ndarray  # uint64[PLANE_SIZE]: each code point's normalized UTF-8 (separators as
    # b" "), first byte lowest; at most 8 bytes, so the kernels store it as one word
    lengths: np.ndarray  # uint8[PLANE_SIZE]: its bytes
    expansion: int  # the most UTF-8 bytes one input byte can become
    context: np.ndarray  # uint32[PLANE_SIZE]: the context bits above
    cores: np.ndarray  # uint64[PLANE_SIZE]: the piece's token bytes, without its separators
    core_info: np.ndarray  # uint8[PLANE_SIZE]: the core's length and kernels.*_SEPARATOR bits
    risky_starts: np.ndarray  # uint64[64, 64]: by the six low bits of a lead byte and of the next,
    # the third bytes (bit ``byte & 0x3F``) that start a code point whose context can make a
    # document need the reference (kernels.risky_context); every bit where two bytes decide


# for a batch without a non-ASCII byte: the kernels never look code points up
ASCII_ONLY = CodePointTable(
    np.zeros(1, np.uint64), np.zeros(1, np.uint8), 1, np.zeros(1, np.uint32), np.zeros(1, np.uint64),
    np.zeros(1, np.uint8), np.zeros((1, 1), np.uint64),
)


def _risky_starts(context: np.ndarray) -> np.ndarray:
    """Every code point whose context bits can flag a document, by its first three UTF-8 bytes
    (two for a two-byte character), and every lead of a four-byte character: a document without
    one needs no walk. Three bytes, because the block that holds Chinese and Japanese
    punctuation (U+3000-U+303F) also holds the ideographic tone marks."""
    starts = np.zeros((64, 64), dtype=np.uint64)
    everything = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
    for code_point in np.flatnonzero(kernels.risky_context(context)):
        if code_point in SURROGATES:
            continue  # never in valid UTF-8 (their context is unset)
        if code_point < 0x80:  # an ASCII document never reaches the walk
            raise RuntimeError(f"U+{code_point:04X} is ASCII, yet its result depends on its neighbours")
        encoded = chr(code_point).encode("utf-8")
        key = encoded[0] & 0x3F, encoded[1] & 0x3F
        starts[key] = everything if len(encoded) == 2 else starts[key] | np.uint64(1 << (encoded[2] & 0x3F))
    starts[0xF0 & 0x3F :] = everything
    return starts


def _core(code_point: int, piece: bytes) -> tuple[bytes, int]:
    """A piece as separators, a core of token bytes, separators (what ``kernels._byte_class``
    keeps: bytes of non-ASCII characters and ASCII letters and digits): the core and its info."""
    kept = [byte >= 0x80 or chr(byte).isalnum() for byte in piece]
    first = kept.index(True) if any(kept) else len(piece)
    last = len(piece) - kept[::-1].index(True) if any(kept) else len(piece)
    core = piece[first:last]
    if not all(kept[first:last]) or core != core.lower():
        raise RuntimeError(f"U+{code_point:04X} normalizes to {piece!r}: not one lowercase token between separators")
    leading = kernels.LEADING_SEPARATOR if first > 0 else 0
    trailing = kernels.TRAILING_SEPARATOR if last < len(piece) else 0
    return core, len(core) | leading | trailing


@cache
def code_point_table() -> CodePointTable:
    """Built once per process, on the first batch with a non-ASCII character."""
    pieces = np.zeros(PLANE_SIZE, dtype=np.uint64)
    lengths = np.zeros(PLANE_SIZE, dtype=np.uint8)
    context = np.zeros(PLANE_SIZE, dtype=np.uint32)
    cores = np.zeros(PLANE_SIZE, dtype=np.uint64)
    core_info = np.zeros(PLANE_SIZE, dtype=np.uint8)
    expansion = 1
    for code_point in range(PLANE_SIZE):
        if code_point in SURROGATES:
            continue  # never in valid UTF-8
        normalized = normalize_code_point(code_point)
        piece = normalized.encode("utf-8")
        if len(normalized.split()) > 1 or len(piece) > 8:
            raise RuntimeError(f"U+{code_point:04X} normalizes to more than one token or 8 bytes")
        pieces[code_point] = int.from_bytes(piece, "little")  # as the kernels' little-endian words read
        lengths[code_point] = len(piece)
        core, core_info[code_point] = _core(code_point, piece)
        cores[code_point] = int.from_bytes(core, "little")
        expansion = max(expansion, -(-len(piece) // len(chr(code_point).encode("utf-8"))))
        context[code_point] = code_point_context(code_point)
    return CodePointTable(pieces, lengths, expansion, context, cores, core_info, _risky_starts(context))


class KernelText(NamedTuple):
    """A column of bodies as the kernels read it: UTF-8 bytes and offsets, which documents were
    already normalized by the reference, the code-point table for the others, and the tokenizer
    (the shingle unit), whose type picks the kernels' entry point."""

    data: np.ndarray
    offsets: np.ndarray
    prenormalized: np.ndarray
    map_pieces: np.ndarray
    map_lengths: np.ndarray
    map_cores: np.ndarray
    map_core_info: np.ndarray
    expansion: int
    tokenizer: Tokenizer
    min_token_bytes: int  # the tokenizer's, which sizes the kernels' token buffers
    ignored: np.ndarray  # sorted hashes of the shingles left out (ignored_hashes); empty: none


def kernel_text(bodies: pa.Array | pa.ChunkedArray, unit: str = "word", ignored: np.ndarray = NO_IGNORED) -> KernelText:
    """The bodies for the kernels, without copying unless some need the reference: those the
    code-point table cannot normalize exactly (see the module) are normalized by
    ``normalize_text`` here; the kernels map every other document through the table. The
    kernels leave the shingles whose hashes ``ignored`` holds (sorted) out."""
    text = bodies.combine_chunks() if isinstance(bodies, pa.ChunkedArray) else bodies
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        text = text.cast(pa.large_string())
    if text.null_count:
        text = pc.fill_null(text, "")
    data, offsets = utf8_buffers(text)
    all_ascii = kernels.all_ascii_kernel(data, offsets)
    table = ASCII_ONLY if all_ascii else code_point_table()
    flagged = np.zeros(len(offsets) - 1, dtype=np.bool_)
    if not all_ascii:
        flagged = kernels.needs_reference_kernel(data, offsets, table.context, table.risky_starts)
    if flagged.any():
        rows = np.flatnonzero(flagged)
        normalized = pa.array([normalize_text(text[int(row)].as_py()) for row in rows], text.type)
        text = pc.replace_with_mask(text, pa.array(flagged), normalized)
        data, offsets = utf8_buffers(text)
    tokenizer = TOKENIZERS[unit]
    return KernelText(
        data, offsets, flagged, table.pieces, table.lengths, table.cores, table.core_info, table.expansion,
        tokenizer, tokenizer.min_token_bytes, ignored,
    )
