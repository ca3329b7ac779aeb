"""Text as the specification defines it, and as the compiled kernels read it.

- :func:`normalize_text` (NFD, drop combining marks, lowercase, punctuation and ``_`` to space,
  collapse whitespace), :func:`tokenize` and :func:`token_shingles` are the reference.
- The kernels read a column's UTF-8 bytes (:func:`utf8_buffers`) and normalize through a per-code-
  point table (:func:`code_point_table`). Each reference step works character by character except
  two: NFD reorders combining marks (all of which are then dropped, so the order cannot matter)
  and ``str.lower`` picks final or medial sigma for a capital sigma from its neighbours. So for
  every other code point a document's result is the concatenation of each code point's own
  result, with every character that is not alphanumeric (``str.isalnum``; exactly the characters
  tokens are made of) standing for a separator. The table holds that per code point of the Basic
  Multilingual Plane; :func:`kernel_text` sends documents with a capital sigma or a character
  beyond it to the reference instead.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernels

_NON_WORD_RUN = re.compile(r"[^\w\s]+", flags=re.UNICODE)


def fold_characters(value: str) -> str:
    """The normalization's per-character steps: NFD, drop combining marks, lowercase."""
    text = unicodedata.normalize("NFD", value)
    return "".join(ch for ch in text if not unicodedata.combining(ch)).lower()


def normalize_text(value: str | None) -> str:
    """NFD, drop combining marks, lowercase, punctuation and ``_`` to space, collapse whitespace."""
    text = fold_characters(value or "")
    text = _NON_WORD_RUN.sub(" ", text)
    text = text.replace("_", " ")
    return " ".join(text.split())


def tokenize(normalized: str) -> list[str]:
    """Tokens of already-normalized text."""
    return normalized.split()


def token_shingles(tokens: list[str], size: int) -> set[str]:
    """Ordered ``size``-token windows; a shorter non-empty document is one whole-document shingle."""
    if size <= 0:
        raise ValueError(f"shingle size must be positive, got {size}")
    if not tokens:
        return set()
    if len(tokens) < size:
        return {" ".join(tokens)}
    return {" ".join(tokens[idx : idx + size]) for idx in range(len(tokens) - size + 1)}


def document_shingles(body: str | None, size: int) -> set[str]:
    """Normalize, tokenize and shingle one body."""
    return token_shingles(tokenize(normalize_text(body)), size)


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


class CodePointTable(NamedTuple):
    offsets: np.ndarray  # int32[PLANE_SIZE + 1]: code point -> slice of ``mapped``
    mapped: np.ndarray  # uint8: normalized UTF-8, separators as b" "
    expansion: int  # the most UTF-8 bytes one input byte can become


def normalize_code_point(code_point: int) -> str:
    """One character through the reference steps, separators as spaces."""
    return "".join(ch if ch.isalnum() else " " for ch in fold_characters(chr(code_point)))


# for a batch without a non-ASCII byte: the kernels never look code points up
ASCII_ONLY = CodePointTable(np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.uint8), 1)


@cache
def code_point_table() -> CodePointTable:
    """Built once per process, on the first batch with a non-ASCII character."""
    offsets = np.zeros(PLANE_SIZE + 1, dtype=np.int32)
    pieces: list[bytes] = []
    expansion, total = 1, 0
    for code_point in range(PLANE_SIZE):
        if code_point in SURROGATES:
            piece = b""  # never in valid UTF-8
        else:
            normalized = normalize_code_point(code_point)
            if len(normalized.split()) > 1:
                raise RuntimeError(f"U+{code_point:04X} normalizes to more than one token")
            piece = normalized.encode("utf-8")
            expansion = max(expansion, -(-len(piece) // len(chr(code_point).encode("utf-8"))))
        pieces.append(piece)
        total += len(piece)
        offsets[code_point + 1] = total
    mapped = np.frombuffer(b"".join(pieces), dtype=np.uint8).copy()
    return CodePointTable(offsets, mapped, expansion)


class KernelText(NamedTuple):
    """A column of bodies as the kernels read it: UTF-8 bytes and offsets, which documents were
    already normalized by the reference, and the code-point table for the others."""

    data: np.ndarray
    offsets: np.ndarray
    prenormalized: np.ndarray
    map_offsets: np.ndarray
    map_bytes: np.ndarray
    expansion: int


def kernel_text(bodies: pa.Array | pa.ChunkedArray) -> KernelText:
    """The bodies for the kernels, without copying unless some need the reference: those with
    a capital sigma or a character beyond the Basic Multilingual Plane are normalized by
    ``normalize_text`` here; the kernels map every other document through the code-point table."""
    text = bodies.combine_chunks() if isinstance(bodies, pa.ChunkedArray) else bodies
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        text = text.cast(pa.large_string())
    if text.null_count:
        text = pc.fill_null(text, "")
    data, offsets = utf8_buffers(text)
    flagged, all_ascii = kernels.needs_reference_kernel(data, offsets)
    if flagged.any():
        rows = np.flatnonzero(flagged)
        normalized = pa.array([normalize_text(text[int(row)].as_py()) for row in rows], text.type)
        text = pc.replace_with_mask(text, pa.array(flagged), normalized)
        data, offsets = utf8_buffers(text)
    table = ASCII_ONLY if all_ascii else code_point_table()
    return KernelText(data, offsets, flagged, table.offsets, table.mapped, table.expansion)
