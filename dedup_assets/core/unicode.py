"""The specification's normalization as a per-code-point table, for the compiled tokenizer.

``normalize_text`` is NFD, drop combining marks, lowercase, punctuation and ``_`` to space,
collapse whitespace. Each step works character by character except two: NFD reorders combining
marks (all of which are then dropped, so the order cannot matter) and ``str.lower`` picks final
or medial sigma for a capital sigma from its neighbours. So for every other code point the result
of a document is the concatenation of each code point's own result, with every character that is
not alphanumeric (``str.isalnum``; these are exactly the characters the tokens are made of)
standing for a separator. The table holds that per code point of the Basic Multilingual Plane;
documents with capital sigma or characters beyond it go to the reference instead.
"""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

import numpy as np

from .text import fold_characters

PLANE_SIZE = 0x10000
CAPITAL_SIGMA = 0x03A3
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
    """Built once per process (about 0.1 s)."""
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
