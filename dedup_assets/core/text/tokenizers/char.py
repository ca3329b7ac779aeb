"""The ``char`` unit: every character of the normalized text but its spaces is a token, so a
shingle is ``shingle_size`` consecutive characters (for Thai, Khmer, Lao or Myanmar, whose
words have no spaces between them, or by choice)."""

from __future__ import annotations

import numba as nb
import numpy as np

from . import Tokenizer, register


@nb.njit(inline="always")
def character_bounds(lowered, words, length, starts, ends):
    """Every character of every token as a token: a UTF-8 lead byte (not 10xxxxxx) starts one,
    which ends at the next lead byte or separator; the count."""
    count = 0
    inside = False
    for position in range(length):
        byte = lowered[position]
        if byte == 0:
            if inside:
                ends[count - 1] = position
                inside = False
        elif (byte & np.uint8(0xC0)) != np.uint8(0x80):
            if inside:
                ends[count - 1] = position
            starts[count] = position
            count += 1
            inside = True
    if inside:
        ends[count - 1] = length
    return count


def _characters(normalized: str) -> list[str]:
    return list(normalized.replace(" ", ""))


register(
    Tokenizer(
        "char",
        "shingles of shingle_size characters of the normalized text, spaces removed (for Thai, Khmer, "
        "Lao or Myanmar text, or by choice; 3 to 5 is usual)",
        _characters, "", character_bounds, min_token_bytes=1,
    )
)
