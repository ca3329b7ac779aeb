"""The ``word`` unit, the default: runs of token characters, every Han, Hiragana and Katakana
character a token of its own (``text/normalize.py`` says the rule). A document read as it is has its token
bounds found from a bit per byte; any other is hashed in one pass over its code points, each a
core of token bytes between separators in the code-point table (at most one token a code point).
"""

from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ...sketch import kernels
from . import Tokenizer, register


@intrinsic
def _trailing_zeros(typingctx, value):
    """LLVM's cttz (tzcnt) of a non-zero word."""

    def codegen(context, builder, signature, args):
        count = builder.module.declare_intrinsic("llvm.cttz", [ir.IntType(64), ir.IntType(1)])
        return builder.call(count, [args[0], ir.Constant(ir.IntType(1), 1)])

    return types.uint64(types.uint64), codegen


@nb.njit(inline="always")
def _nonzero_byte_bits(word):
    # bit j set where byte j of the (little-endian) word is not zero
    flags = word | (word >> np.uint64(4))
    flags |= flags >> np.uint64(2)
    flags |= flags >> np.uint64(1)
    flags &= np.uint64(0x0101010101010101)
    return (flags * np.uint64(0x0102040810204080)) >> np.uint64(56)


@nb.njit(inline="always")
def token_bounds(lowered, words, length, starts, ends):
    """Token starts and ends from a bit per byte (64 bytes per word); the token count."""
    count = 0
    end_count = 0
    carry = np.uint64(0)
    for block in range((length + np.uint64(63)) // np.uint64(64)):
        inside = np.uint64(0)
        for word in range(8):
            inside |= _nonzero_byte_bits(words[np.uint64(block) * np.uint64(8) + np.uint64(word)]) << np.uint64(8 * word)
        before = (inside << np.uint64(1)) | carry
        carry = inside >> np.uint64(63)
        begins, finishes = inside & ~before, ~inside & before
        offset = np.uint64(block) * np.uint64(64)
        while begins != 0:
            starts[count] = offset + _trailing_zeros(begins)
            count += 1
            begins &= begins - np.uint64(1)
        while finishes != 0:
            ends[end_count] = offset + _trailing_zeros(finishes)
            end_count += 1
            finishes &= finishes - np.uint64(1)
    if carry != 0:  # a token ran to the end of the text, which filled its last block
        ends[end_count] = length
    return count


@nb.njit
def word_tokens(text, doc, scratch):
    """The kernel entry point: a document read as it is (ASCII, or normalized by the reference)
    by its token bounds, any other through the code-point table's cores."""
    if kernels.reads_as_is(text, doc):
        return kernels.token_hashes_of_bytes(
            text.data, text.offsets[doc], text.offsets[doc + 1], scratch.tokens, scratch.lowered,
            scratch.token_bounds, text.tokenizer,
        )
    return kernels.mapped_token_hashes(
        text.data, text.offsets[doc], text.offsets[doc + 1], text.map_cores, text.map_core_info, scratch.tokens
    )


# a token takes at least one byte and one separator
register(
    Tokenizer(
        "word", "shingles of shingle_size tokens (every Han, Hiragana and Katakana character is a token)",
        str.split, " ", token_bounds, min_token_bytes=2, kernel=word_tokens,
    )
)
