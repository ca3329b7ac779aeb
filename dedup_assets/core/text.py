"""Text normalization and ordered token shingles, exactly as the specification defines them, and
text columns as the UTF-8 bytes the compiled kernels read."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pyarrow as pa

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
    """A string array's UTF-8 bytes and its offsets into them, without a copy."""
    _, offsets, data = text.buffers()
    offset_type = np.int64 if pa.types.is_large_string(text.type) else np.int32
    offsets = np.frombuffer(offsets, dtype=offset_type)[text.offset : text.offset + len(text) + 1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(1, np.uint8)
    return data, offsets
