"""Compiled kernels (numba, no Python objects per token): per batch for the fast hash scheme and
the recall audit's probe, and over whole columns for verification under either scheme (LSH
buckets: ``lsh/bucket_kernels.py``).

The tokenizer works on the UTF-8 bytes of a whole Arrow string column. For ASCII text it is the
specification's normalization exactly: every ASCII byte that is not a letter or digit separates
tokens and letters are lowercased. A document with other characters is first mapped code point by
code point through a table built from the reference ``normalize_text`` (``text/normalize.py``), which is
exact for the Basic Multilingual Plane except capital sigma, whose lowercase depends on its
neighbours; documents with those are normalized by the reference itself (``text.kernel_text``).

Each shingle unit (``text/tokenizers/``) says where a document's tokens are; hashing their bytes and
every kernel that inlines it (the sketch, the shingle sets, the recall audit's probe) stay in this
one module although it is long: numba's on-disk cache notices a change only to the file that
defines a cached kernel, so a kernel split from the functions it inlines would keep running stale
code after they change (a tokenizer's files are named in the kernels' signature instead, by a
digest: ``text/tokenizers/``). ``mix64``, which the doc_id table's kernels inline too, is never changed
in place: every stored fingerprint depends on it.

Shingles are hashed from their tokens' 64-bit hashes, in order, so a shingle's hash identifies the
string ``" ".join(tokens)`` up to 64-bit collisions. Sketches use Fast Similarity Sketching
(Dahlgaard, Knudsen, Thorup, FOCS'17): k bins filled round by round, O(n + k log k) per document.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from ..util.kernel_cache import writable_cache

writable_cache(__file__)

# numba's parallel kernels run on OpenMP threads, which by default spin for a while after each
# kernel waiting for the next one. Kernels run once per batch while DuckDB works on the same two
# cores, so the spinning would take CPU from it. OpenMP reads this when it starts, at the first
# parallel kernel (not at import); a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The version of the bytes the fss scheme's kernels write for one text and one set of settings:
# token and shingle hashes, mix64, the round seeds, the sketch's fill and the band keys. Raised
# with any change to them (a cheaper per-shingle hash is FSS_SHINGLE_HASH "...-v2"): every index
# and fingerprinted table records it (``scheme.py``), and one built with another version
# is refused rather than mixed with this one's fingerprints.
FSS_SHINGLE_HASH = "seq64-mix64-v1"


def use_threads(count: int) -> None:
    """The kernels' threads, for parallel kernels this thread launches from now on (numba keeps
    the count per thread), within what numba started with."""
    nb.set_num_threads(max(1, min(int(count), nb.config.NUMBA_NUM_THREADS)))


def threads_may_share_kernels() -> bool:
    """Whether several threads may run parallel kernels at the same time. OpenMP and TBB allow
    it; numba's own workqueue, which it falls back to where neither loads (no libgomp, or
    ``NUMBA_THREADING_LAYER=workqueue``), ends the process instead."""
    nb.get_num_threads()  # starts the threading layer, so that it has a name
    return nb.threading_layer() != "workqueue"


_EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)
_ROUND_SHIFT = 54  # sketch value = round << 54 | hash >> 10: earlier rounds win, then smaller hash
# the fast sketch's 2 * num_perm rounds must fit in the 10 round bits
MAX_SKETCH_SIZE = 1 << (64 - _ROUND_SHIFT - 1)


@nb.njit(inline="always")
def mix64(value):
    # splitmix64 finalizer: a fast bijective 64-bit mixer
    value = (value ^ (value >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    value = (value ^ (value >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return value ^ (value >> np.uint64(31))


@nb.njit(inline="always")
def _byte_class(byte):
    """0 for a byte that separates tokens, otherwise the byte as it appears in a token: ASCII
    letters lowercased, digits as they are, and every byte of a multi-byte UTF-8 character.
    Arithmetic rather than a table lookup, so that a loop over bytes vectorizes."""
    letter = byte | np.uint8(0x20)
    is_letter = np.uint8(letter - np.uint8(ord("a"))) < np.uint8(26)
    is_digit = np.uint8(byte - np.uint8(ord("0"))) < np.uint8(10)
    kept = byte if is_digit | (byte >= np.uint8(128)) else np.uint8(0)
    return letter if is_letter else kept


_TOKEN_SEED = np.uint64(0x9E3779B97F4A7C15)


class Scratch(NamedTuple):
    """One thread's buffers, sized for the longest document of its block."""

    tokens: np.ndarray  # token hashes
    shingles: np.ndarray  # shingle hashes, then the distinct ones at the front
    table: np.ndarray  # open addressing for the distinct shingles
    mapped: np.ndarray  # a non-ASCII document's bytes after the code-point table, as uint64 words
    lowered: np.ndarray  # the tokenizer's byte classes, zero-padded to whole 64-byte blocks
    token_bounds: np.ndarray  # the tokenizer's token starts and ends (2 x tokens)
    round_hashes: np.ndarray  # one sketch round's hash of each shingle


@intrinsic
def _byte_swap(typingctx, value):
    """LLVM's bswap: one instruction, which numba does not expose."""

    def codegen(context, builder, signature, args):
        return builder.call(builder.module.declare_intrinsic("llvm.bswap", [ir.IntType(64)]), args)

    return types.uint64(types.uint64), codegen


@nb.njit(inline="always")
def _big_endian_at(words, position):
    """The 8 bytes from byte ``position`` of ``words`` on, the first one most significant."""
    index = position >> np.uint64(3)
    shift = (position & np.uint64(7)) << np.uint64(3)
    # the next word comes in by two shifts, since a shift by 64 is undefined
    low_first = (words[index] >> shift) | ((words[index + np.uint64(1)] << np.uint64(1)) << (np.uint64(63) - shift))
    return _byte_swap(low_first)


@nb.njit(cache=True)
def token_hashes_of_bytes(data, start, end, out, lowered, token_bounds, tokenizer):
    """Hash each token of data[start:end] into ``out``; returns the token count. The tokens are
    where ``tokenizer.bounds`` (its ``bounds``, ``text/tokenizers/``) puts them, given the bytes'
    classes. ``lowered`` (bytes) and ``token_bounds`` (2 x tokens) are scratch; ``lowered`` holds
    ``end - start + 128``.

    A token's hash packs its bytes eight at a time, first byte most significant, so that one
    multiply runs per eight bytes. Three branch-light passes: bytes to their classes, token
    starts and ends (the word unit's from a bit per byte, 64 bytes per word), then the hashes
    from 8-byte loads. A loop over bytes that hashed as it went would mispredict a branch at
    every token end; byte classes come from arithmetic rather than a table so that the first
    pass vectorizes.
    """
    length = np.uint64(end - start)
    padded = (length + np.uint64(127)) // np.uint64(64) * np.uint64(64)
    first_byte = np.uint64(start)
    position = np.uint64(0)
    while position < length:
        lowered[position] = _byte_class(data[first_byte + position])
        position += np.uint64(1)
    while position < padded:
        lowered[position] = 0
        position += np.uint64(1)
    words = lowered[:padded].view(np.uint64)
    starts, ends = token_bounds[0], token_bounds[1]
    count = tokenizer.bounds(lowered, words, length, starts, ends)
    multiplier = np.uint64(0xFF51AFD7ED558CCD)
    for token in range(count):
        token_start = starts[token]
        token_length = ends[token] - token_start
        full_words = token_length >> np.uint64(3)
        # branch-free for the common token of at most 8 bytes
        first = (_TOKEN_SEED ^ _big_endian_at(words, token_start)) * multiplier
        value = first if full_words != 0 else _TOKEN_SEED
        for word in range(1, full_words):
            value = (value ^ _big_endian_at(words, token_start + (np.uint64(word) << np.uint64(3)))) * multiplier
        rest = _big_endian_at(words, token_start + (full_words << np.uint64(3)))
        # the remaining 0-7 bytes, right-aligned (two shifts: 0 bytes must give 0)
        rest = (rest >> np.uint64(1)) >> (np.uint64(63) - ((token_length & np.uint64(7)) << np.uint64(3)))
        out[token] = mix64(value ^ rest ^ (token_length << np.uint64(56)))
    return count


@nb.njit(cache=True)
def _table_size(count):
    size = 16
    while size < 2 * count:
        size *= 2
    return size


@nb.njit(cache=True)
def _distinct(values, count, table):
    """Compact the distinct values of values[:count] to its front (first-seen order) using the
    open-addressing ``table`` as scratch; returns the distinct count."""
    size = _table_size(count)
    mask = np.uint64(size - 1)
    table[:size] = 0
    distinct = 0
    for index in range(count):
        value = values[index] | np.uint64(1)  # 0 marks an empty slot
        slot = (value * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32) & mask
        while table[slot] != 0 and table[slot] != value:
            slot = (slot + np.uint64(1)) & mask
        if table[slot] == 0:
            table[slot] = value
            values[distinct] = value
            distinct += 1
    return distinct


@nb.njit(cache=True)
def _fast_similarity_sketch(shingles, count, round_seeds, out, hashed):
    """Fill ``out`` (k bins) from shingles[:count]; rounds 0..k-1 scatter every shingle to a
    random bin, rounds k..2k-1 send every shingle to bin ``round - k`` only while it is empty.
    ``hashed`` is scratch for one round's hashes."""
    k = out.shape[0]
    out[:] = _EMPTY
    if count == 0:
        out[:] = 0
        return
    filled = 0
    for round_index in range(2 * k):
        if round_index >= k and out[round_index - k] != _EMPTY:
            continue
        seed = round_seeds[round_index]
        prefix = np.uint64(round_index) << np.uint64(_ROUND_SHIFT)
        # a round's hashes first, in a loop without the scatter, so that it vectorizes
        for index in range(count):
            hashed[index] = mix64(shingles[index] ^ seed)
        for index in range(count):
            if round_index < k:
                target = np.int64((hashed[index] >> np.uint64(32)) * np.uint64(k) >> np.uint64(32))
            else:
                target = round_index - k
            value = prefix | (hashed[index] >> np.uint64(64 - _ROUND_SHIFT))
            # branch-free: whether a bin improves is a coin toss the CPU cannot predict
            current = out[target]
            filled += current == _EMPTY
            out[target] = min(current, value)
        if filled == k:
            break


@nb.njit(cache=True)
def _band_hashes(signature, rows_per_band, out):
    for band in range(out.shape[0]):
        value = np.uint64(band + 1) * np.uint64(0x9E3779B97F4A7C15)
        for row in range(band * rows_per_band, (band + 1) * rows_per_band):
            value = mix64(value ^ signature[row])
        out[band] = value


@nb.njit(cache=True)
def is_ascii(data, start, end):
    # 256 bytes at a time, so that a document in another script stops at its first block while
    # each block's loop still vectorizes
    first, last = np.uint64(start), np.uint64(end)
    while first < last:
        stop = min(first + np.uint64(256), last)
        seen = np.uint8(0)
        # unsigned positions: a signed index costs a negative-index check per byte, which kept
        # this loop from vectorizing
        for position in range(first, stop):
            seen |= data[position]
        if seen >= 128:
            return False
        first = stop
    return True


@nb.njit(inline="always")
def _next_code_point(data, position):
    """The code point at ``position`` of valid UTF-8 of at most three bytes a character, and the
    position after it (four-byte characters are sent to the reference beforehand)."""
    lead = np.int64(data[position])
    if lead < 0x80:
        return lead, position + 1
    if lead < 0xE0:
        return ((lead & 0x1F) << 6) | (np.int64(data[position + 1]) & 0x3F), position + 2
    code_point = (
        ((lead & 0x0F) << 12) | ((np.int64(data[position + 1]) & 0x3F) << 6) | (np.int64(data[position + 2]) & 0x3F)
    )
    return code_point, position + 3


@nb.njit(cache=True)
def _map_code_points(data, start, end, pieces, lengths, out):
    """The document's bytes with every code point replaced by its normalized form from the
    table (separators as spaces) into ``out`` (uint64 words, read as bytes); returns the length
    in bytes. Each form (at most 8 bytes, first byte lowest) is shifted into a 64-bit word that is
    stored whole: no loop over a form's bytes, whose count would be a branch per code point."""
    word, bits, words = np.uint64(0), np.uint64(0), 0
    position = start
    while position < end:
        code_point, position = _next_code_point(data, position)
        piece, size = pieces[code_point], np.uint64(lengths[code_point]) << np.uint64(3)
        word |= piece << bits
        bits += size
        if bits >= np.uint64(64):
            out[words] = word
            words += 1
            bits -= np.uint64(64)
            # what did not fit is the form's top ``bits`` bits (a shift by 64 is undefined)
            word = piece >> (size - bits) if bits else np.uint64(0)
    out[words] = word
    return words * 8 + np.int64(bits >> np.uint64(3))


# A code point's form in the word unit (``text.code_point_table`` sets it): at most one token,
# so separators, a core of token bytes, separators. The low bits are the core's length.
CORE_LENGTH, LEADING_SEPARATOR, TRAILING_SEPARATOR = 0x0F, 0x10, 0x20


@nb.njit(inline="always")
def _append_core(core, size, pending, pending_size, value):
    """Append a core's ``size`` (1-8) bytes (first byte lowest) to a token being hashed as
    :func:`token_hashes_of_bytes` hashes it: ``pending`` holds the 0-7 bytes after its last full
    word, first byte most significant; a full word is mixed into ``value``. Returns the new state."""
    incoming = _byte_swap(core) >> np.uint64(64 - 8 * size)
    total = pending_size + size
    if total < 8:
        return (pending << np.uint64(8 * size)) | incoming, total, value
    taken = 8 - pending_size  # the incoming bytes that complete the word
    left = size - taken
    # two shifts: a shift by 64 (nothing pending, all 8 bytes taken) is undefined
    word = ((pending << np.uint64(1)) << np.uint64(8 * taken - 1)) | (incoming >> np.uint64(8 * left))
    value = (value ^ word) * np.uint64(0xFF51AFD7ED558CCD)
    return incoming & ((np.uint64(1) << np.uint64(8 * left)) - np.uint64(1)), left, value


@nb.njit(cache=True)
def mapped_token_hashes(data, start, end, cores, core_info, out):
    """The word unit's token hashes of a non-ASCII document in one pass over its code points,
    each looked up in the table as separators and a core, equal to mapping the document with
    :func:`_map_code_points` and hashing it with :func:`token_hashes_of_bytes` by the word
    unit's bounds (a Han character, whose form is a core between separators, is a whole token
    without a second pass over bytes). Returns the token count."""
    count, length = 0, np.uint64(0)
    pending, pending_size, value = np.uint64(0), 0, _TOKEN_SEED
    position = start
    while position <= end:
        if position < end:
            code_point, position = _next_code_point(data, position)
            info = np.int64(core_info[code_point])
        else:
            position += 1
            info = LEADING_SEPARATOR  # the end of the document ends a token
        if info & LEADING_SEPARATOR and length:
            out[count] = mix64(value ^ pending ^ (length << np.uint64(56)))
            count += 1
            length, pending, pending_size, value = np.uint64(0), np.uint64(0), 0, _TOKEN_SEED
        size = info & CORE_LENGTH
        if size:
            pending, pending_size, value = _append_core(cores[code_point], size, pending, pending_size, value)
            length += np.uint64(size)
            if info & TRAILING_SEPARATOR:
                out[count] = mix64(value ^ pending ^ (length << np.uint64(56)))
                count += 1
                length, pending, pending_size, value = np.uint64(0), np.uint64(0), 0, _TOKEN_SEED
    return count


@nb.njit(inline="always")
def reads_as_is(text, doc):
    """Whether document ``doc`` of ``text`` is read as its bytes are, without the code-point table:
    ASCII, or normalized by the reference already."""
    return text.prenormalized[doc] or is_ascii(text.data, text.offsets[doc], text.offsets[doc + 1])


@nb.njit(cache=True)
def token_hashes(text, doc, scratch):
    """Token hashes of document ``doc`` of ``text`` (a KernelText) into ``scratch.tokens`` by its
    tokenizer's bounds (:func:`token_hashes_of_bytes`), over its bytes as the reference
    normalizes them; the count. A tokenizer's kernel entry point unless it brings its own."""
    start, end = text.offsets[doc], text.offsets[doc + 1]
    if reads_as_is(text, doc):
        return token_hashes_of_bytes(
            text.data, start, end, scratch.tokens, scratch.lowered, scratch.token_bounds, text.tokenizer
        )
    length = _map_code_points(text.data, start, end, text.map_pieces, text.map_lengths, scratch.mapped)
    return token_hashes_of_bytes(
        scratch.mapped.view(np.uint8), 0, length, scratch.tokens, scratch.lowered, scratch.token_bounds,
        text.tokenizer,
    )


@nb.njit(cache=True)
def _document_shingles(text, doc, shingle_size, scratch):
    """Distinct shingle hashes of one document into ``scratch.shingles``; (tokens, distinct
    shingles)."""
    token_count, positions = _shingle_hashes(text, doc, shingle_size, scratch)
    return token_count, _distinct(scratch.shingles, positions, scratch.table)


@nb.njit(cache=True)
def _shingle_hashes(text, doc, shingle_size, scratch):
    """The hash of every shingle of one document, repeats included, into ``scratch.shingles``
    (as they are before :func:`_distinct` marks them); (tokens, shingles)."""
    tokens, shingles = scratch.tokens, scratch.shingles
    # the unit's kernel entry point, which the tokenizer's type names (``text/tokenizers/``)
    token_count = text.tokenizer.token_hashes(text, doc, scratch)
    if token_count == 0:
        return 0, 0
    # a document shorter than shingle_size is one shingle of all its tokens
    size = min(shingle_size, token_count)
    positions = token_count - size + 1
    # A shingle's hash starts at C * size and mixes in its tokens in order. All positions are
    # hashed one token offset at a time: they are independent, so this loop pipelines, while a
    # loop per shingle over a runtime size does not.
    shingles[:positions] = np.uint64(0x9E3779B97F4A7C15) * np.uint64(size)
    for offset in range(size):
        for first in range(positions):
            shingles[first] = mix64(shingles[first] ^ tokens[first + offset])
    if text.ignored.shape[0]:
        positions = _without_ignored(shingles, positions, text.ignored)
    return token_count, positions


@nb.njit(inline="always")
def _is_ignored(shingle, ignored):
    # ``ignored`` holds shingles as _distinct stores them, low bit set; a binary search of our
    # own, as numba's searchsorted compares uint64 through float64
    shingle = shingle | np.uint64(1)
    low, high = 0, ignored.shape[0]
    while low < high:
        middle = (low + high) >> 1
        if ignored[middle] < shingle:
            low = middle + 1
        else:
            high = middle
    return low < ignored.shape[0] and ignored[low] == shingle


@nb.njit(cache=True)
def _without_ignored(shingles, positions, ignored):
    """The first ``positions`` shingles without those in ``ignored`` (sorted: the
    ``ignored_passages``' shingles), moved to the front; their count. A document made of ignored
    shingles alone keeps them all: it is nothing but the passage, and its copies are its copies."""
    kept = 0
    for first in range(positions):
        kept += not _is_ignored(shingles[first], ignored)
    if kept == 0 or kept == positions:
        return positions
    kept = 0
    for first in range(positions):
        if not _is_ignored(shingles[first], ignored):
            shingles[kept] = shingles[first]
            kept += 1
    return kept


# powers of the sequence hash's multiplier, mod 2^64
_SEQUENCE_POWERS = tuple(np.uint64(pow(0x9E3779B97F4A7C15, power, 1 << 64)) for power in range(5))


@nb.njit(cache=True)
def _sequence_hash(tokens, count):
    """A hash of the token sequence: the polynomial s = s * C + token over the tokens, starting
    from s = count, then one mix. Four tokens per step (s * C^4 + t0 * C^3 + ... + t3) give the
    same value with a quarter of the multiplies in the dependency chain."""
    c1, c2, c3, c4 = _SEQUENCE_POWERS[1], _SEQUENCE_POWERS[2], _SEQUENCE_POWERS[3], _SEQUENCE_POWERS[4]
    sequence = np.uint64(count)
    head = count % 4
    for index in range(head):
        sequence = sequence * c1 + tokens[index]
    for index in range(head, count, 4):
        sequence = (
            sequence * c4 + tokens[index] * c3 + tokens[index + 1] * c2 + tokens[index + 2] * c1 + tokens[index + 3]
        )
    return mix64(sequence)


@nb.njit(cache=True)
def _scratch(text, first, last):
    """Per-thread buffers for documents first..last."""
    longest = 1
    for doc in range(first, last):
        longest = max(longest, text.offsets[doc + 1] - text.offsets[doc])
    # mapping a code point never adds a token (the table checks this), though it can lengthen the
    # bytes by ``expansion``
    capacity = longest // text.min_token_bytes + 1
    mapped_capacity = longest * text.expansion
    return Scratch(
        np.empty(capacity, dtype=np.uint64),
        np.empty(capacity, dtype=np.uint64),
        np.empty(_table_size(capacity), dtype=np.uint64),
        np.empty(mapped_capacity // 8 + 2, dtype=np.uint64),
        np.empty(mapped_capacity + 128, dtype=np.uint8),
        np.empty((2, capacity), dtype=np.uint64),
        np.empty(capacity, dtype=np.uint64),
    )


@nb.njit(cache=True)
def _blocks(documents, block_count):
    return np.linspace(0, documents, block_count + 1).astype(np.int64)


# a probe table nothing holds (and its filter): fingerprinting without a recall audit
NO_PROBES = np.zeros(0, dtype=np.uint64)
NO_PROBE_FILTER = np.zeros(1, dtype=np.uint64)


@nb.njit(inline="always")
def filter_shift(filter_bits):
    """The shift that leaves a hash's top bits, one per bit of ``filter_bits`` (a power of two)."""
    return np.uint64(64 - int(np.log2(filter_bits.shape[0] * 64)))


@nb.njit(inline="always")
def probe_slot(probe, mask):
    return (probe * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32) & mask


@nb.njit(inline="always")
def probe_at(shingle, slots, filter_bits, shift):
    """The slot of ``shingle`` (marked as :func:`_distinct` stores it) in ``slots``, the recall
    audit's probes in an open-addressing table (0: empty), or -1. The bitmap of the probes' top
    hash bits turns away almost every shingle with one cached read; the rest cost a slot or two,
    where a binary search over millions of probes missed the cache at every step."""
    bit = shingle >> shift
    if not (filter_bits[bit >> np.uint64(6)] >> (bit & np.uint64(63))) & np.uint64(1):
        return -1
    mask = np.uint64(slots.shape[0] - 1)
    slot = probe_slot(shingle, mask)
    while slots[slot] != 0:
        if slots[slot] == shingle:
            return np.int64(slot)
        slot = (slot + np.uint64(1)) & mask
    return -1


@nb.njit(cache=True, parallel=True, nogil=True)
def fingerprint_kernel(text, shingle_size, round_seeds, rows_per_band, block_count, probes, filter_bits):
    """Per document of ``text`` (a KernelText): token count, distinct shingle count, a hash of the
    token sequence (equal for identical normalized text), the sketch (n x k uint64), band
    hashes (n x bands uint64), and whether it holds one of the recall audit's ``probes`` (a table
    of shingle hashes, :func:`probe_at`, with their ``filter_bits``; :data:`NO_PROBES` for none),
    tested on the distinct shingles the sketch is made of, so the audit costs no second hash of
    the bodies."""
    documents = text.offsets.shape[0] - 1
    k = round_seeds.shape[0] // 2
    token_counts = np.zeros(documents, dtype=np.int64)
    shingle_counts = np.zeros(documents, dtype=np.int64)
    content = np.zeros(documents, dtype=np.uint64)
    signatures = np.zeros((documents, k), dtype=np.uint64)
    bands = np.zeros((documents, k // rows_per_band), dtype=np.uint64)
    hits = np.zeros(documents, dtype=np.bool_)
    shift = filter_shift(filter_bits)
    bounds = _blocks(documents, block_count)
    for block in nb.prange(block_count):
        scratch = _scratch(text, bounds[block], bounds[block + 1])
        for doc in range(bounds[block], bounds[block + 1]):
            token_count, distinct = _document_shingles(text, doc, shingle_size, scratch)
            token_counts[doc] = token_count
            shingle_counts[doc] = distinct
            content[doc] = _sequence_hash(scratch.tokens, token_count)
            _fast_similarity_sketch(scratch.shingles, distinct, round_seeds, signatures[doc], scratch.round_hashes)
            _band_hashes(signatures[doc], rows_per_band, bands[doc])
            if probes.shape[0]:
                for index in range(distinct):
                    if probe_at(scratch.shingles[index], probes, filter_bits, shift) >= 0:
                        hits[doc] = True
                        break
    return token_counts, shingle_counts, content, signatures, bands, hits


@nb.njit(cache=True, parallel=True, nogil=True)
def all_ascii_kernel(data, offsets):
    """Whether every document is ASCII (then the code-point table is not needed at all)."""
    documents = offsets.shape[0] - 1
    ascii_documents = np.zeros(documents, dtype=np.bool_)
    for doc in nb.prange(documents):
        ascii_documents[doc] = is_ascii(data, offsets[doc], offsets[doc + 1])
    return ascii_documents.all()


# A code point's context bits (``text.code_point_context`` sets them, needs_reference_kernel reads
# them): the smallest canonical combining class among the kept marks its decomposition starts with
# (NO_LEADING_MARK: none) and the largest after its last starter, whether it has a starter; that
# a document holding it always takes the reference; that a kept mark composition joins to the
# letter before it leads its decomposition; whether its own result has a letter, and whether the
# last one can take such a mark.
LEADING_CLASS, TRAILING_CLASS_SHIFT, NO_LEADING_MARK = 0xFF, 8, 0xFF
HAS_STARTER, NEEDS_REFERENCE = 1 << 16, 1 << 17
COMPOSES_BACKWARD, ENDS_WITH_STARTER, ENDS_COMPOSABLE = 1 << 18, 1 << 19, 1 << 20


def risky_context(context: np.ndarray) -> np.ndarray:
    """The code points whose context bits can flag a document in needs_reference_kernel: those
    that always need the reference, a kept mark that can compose backward, and one that leads
    with a kept mark (only such a mark can fall below a run's highest class). Any other code
    point only resets the walk's state."""
    return ((context & (NEEDS_REFERENCE | COMPOSES_BACKWARD)) != 0) | ((context & LEADING_CLASS) != NO_LEADING_MARK)


@nb.njit(cache=True, parallel=True, nogil=True)
def needs_reference_kernel(data, offsets, context, risky_starts):
    """Documents the code-point table cannot normalize exactly, from each code point's context
    bits: a character outside the Basic Multilingual Plane (a four-byte UTF-8 sequence), one that
    always needs the reference, a kept mark that composes with the letter before it where that
    letter can take one, or a kept mark of a lower combining class than a kept mark of an earlier
    code point in the same run of marks (canonical reordering would swap them)."""
    documents = offsets.shape[0] - 1
    flagged = np.zeros(documents, dtype=np.bool_)
    for doc in nb.prange(documents):
        start, end = offsets[doc], offsets[doc + 1]
        if is_ascii(data, start, end):
            continue
        # first a pass over every three bytes without a branch per byte (a walk code point by
        # code point is serial): Chinese or Japanese as written holds no code point that can flag
        risky = np.uint64(0)
        for position in range(np.uint64(start), np.uint64(max(start, end - 2))):
            lead = np.uint64(data[position])
            starts = risky_starts[lead & np.uint64(0x3F), np.uint64(data[position + np.uint64(1)]) & np.uint64(0x3F)]
            # only a lead byte starts a code point (0 or all ones: a select, not a branch)
            starts &= np.uint64(0) - np.uint64(lead >= np.uint64(0xC0))
            risky |= starts >> (np.uint64(data[position + np.uint64(2)]) & np.uint64(0x3F))
        if end - start >= 2:  # the last two bytes: at most a two-byte character, all its bits set
            lead = np.uint64(data[end - 2])
            if lead >= np.uint64(0xC0):
                risky |= risky_starts[lead & np.uint64(0x3F), np.uint64(data[end - 1]) & np.uint64(0x3F)]
        if risky & np.uint64(1) == 0:
            continue
        position, run_highest, composable = start, np.uint32(0), False
        while position < end:
            if data[position] >= 0xF0:
                flagged[doc] = True
                break
            code_point, position = _next_code_point(data, position)
            bits = context[code_point]
            backward = (bits & np.uint32(COMPOSES_BACKWARD)) != 0 and composable
            if bits & np.uint32(NEEDS_REFERENCE) or backward or (bits & np.uint32(LEADING_CLASS)) < run_highest:
                flagged[doc] = True
                break
            trailing = (bits >> np.uint32(TRAILING_CLASS_SHIFT)) & np.uint32(0xFF)
            run_highest = trailing if bits & np.uint32(HAS_STARTER) else max(run_highest, trailing)
            if bits & np.uint32(ENDS_WITH_STARTER):
                composable = (bits & np.uint32(ENDS_COMPOSABLE)) != 0
    return flagged


@nb.njit(cache=True, parallel=True, nogil=True)
def shingle_sets_kernel(text, shingle_size, row_offsets, values, block_count):
    """Distinct shingle hashes of every document into ``values`` at ``row_offsets`` (from the
    documents' distinct shingle counts; the caller allocates ``values`` once at its exact size,
    since growing and copying fresh memory cost more than the shingling). Returns False if a
    document's count differs from its slot, so the caller can refuse instead of comparing wrong
    sets."""
    documents = text.offsets.shape[0] - 1
    mismatches = np.zeros(block_count, dtype=np.int64)
    bounds = _blocks(documents, block_count)
    for block in nb.prange(block_count):
        scratch = _scratch(text, bounds[block], bounds[block + 1])
        for doc in range(bounds[block], bounds[block + 1]):
            distinct = _document_shingles(text, doc, shingle_size, scratch)[1]
            if distinct != row_offsets[doc + 1] - row_offsets[doc]:
                mismatches[block] += 1
                continue
            values[row_offsets[doc] : row_offsets[doc + 1]] = scratch.shingles[:distinct]
    return mismatches.sum() == 0


@nb.njit(cache=True, parallel=True, nogil=True)
def pair_jaccard_kernel(values, row_offsets, left_rows, right_rows, block_count):
    """Exact Jaccard of two distinct sets per (left, right) row pair: the smaller set goes into
    a hash table and the larger probes it."""
    longest = 1
    for row in range(row_offsets.shape[0] - 1):
        longest = max(longest, row_offsets[row + 1] - row_offsets[row])
    result = np.zeros(left_rows.shape[0], dtype=np.float64)
    bounds = _blocks(left_rows.shape[0], block_count)
    for block in nb.prange(block_count):
        table = np.empty(_table_size(longest), dtype=np.uint64)
        for pair in range(bounds[block], bounds[block + 1]):
            result[pair] = _set_jaccard(values, row_offsets, left_rows[pair], right_rows[pair], table)
    return result


@nb.njit(cache=True, parallel=True, nogil=True)
def pair_overlap_kernel(signatures, left_rows, right_rows):
    """Share of equal coordinates of the two signatures (rows of ``signatures``) of each pair."""
    result = np.zeros(left_rows.shape[0], dtype=np.float64)
    width = signatures.shape[1]
    for pair in nb.prange(left_rows.shape[0]):
        equal = 0
        for column in range(width):
            equal += signatures[left_rows[pair], column] == signatures[right_rows[pair], column]
        result[pair] = equal / width
    return result


@nb.njit(cache=True)
def _set_jaccard(values, row_offsets, small, large, table):
    if row_offsets[small + 1] - row_offsets[small] > row_offsets[large + 1] - row_offsets[large]:
        small, large = large, small
    small_count = row_offsets[small + 1] - row_offsets[small]
    large_count = row_offsets[large + 1] - row_offsets[large]
    if small_count + large_count == 0:
        return 0.0
    size = _table_size(small_count)
    mask = np.uint64(size - 1)
    table[:size] = 0
    for index in range(row_offsets[small], row_offsets[small + 1]):
        value = values[index]
        slot = (value * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32) & mask
        while table[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = value
    common = 0
    for index in range(row_offsets[large], row_offsets[large + 1]):
        value = values[index]
        slot = (value * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32) & mask
        while table[slot] != 0 and table[slot] != value:
            slot = (slot + np.uint64(1)) & mask
        if table[slot] == value:
            common += 1
    return common / (small_count + large_count - common)


def round_seeds(num_perm: int, minhash_seed: int) -> np.ndarray:
    """2k per-round seeds derived from ``minhash_seed``."""
    if num_perm > MAX_SKETCH_SIZE:
        raise ValueError(f"the fast scheme supports num_perm up to {MAX_SKETCH_SIZE}")
    return _seed_sequence(2 * num_perm, np.uint64(minhash_seed % (1 << 64)))


@nb.njit(cache=True)
def _seed_sequence(count, seed):
    # compiled and cached: calling mix64 from Python would compile it at every import
    seeds = np.empty(count, dtype=np.uint64)
    state = seed * np.uint64(0x9E3779B97F4A7C15)
    for index in range(count):
        state += np.uint64(0x9E3779B97F4A7C15)
        seeds[index] = mix64(state)
    return seeds


# The recall audit's kernels: which sampled documents' probes each document holds, and the keyed
# hash of doc_ids that picks the sample (``audit/probe.py`` says why).
@nb.njit(cache=True)
def probe_slots_kernel(probes):
    """The open-addressing table :func:`probe_at` looks ``probes`` (distinct, marked) up
    in, and the place in ``probes`` of the one in each slot."""
    slots = np.zeros(_table_size(probes.shape[0]), dtype=np.uint64)
    places = np.full(slots.shape[0], -1, dtype=np.int64)
    mask = np.uint64(slots.shape[0] - 1)
    for place in range(probes.shape[0]):
        slot = probe_slot(probes[place], mask)
        while slots[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        slots[slot] = probes[place]
        places[slot] = place
    return slots, places


@nb.njit(cache=True, nogil=True)
def _marked_owners(text, doc, shingle_size, scratch, probes, places, filter_bits, owner_offsets, owners, seen, touched):
    """Mark in ``seen`` (a bitmap of owners) every owner of a probe document ``doc`` holds; the
    number of bitmap words touched, listed in ``touched``."""
    shift = filter_shift(filter_bits)
    words = 0
    for index in range(_shingle_hashes(text, doc, shingle_size, scratch)[1]):
        slot = probe_at(scratch.shingles[index] | np.uint64(1), probes, filter_bits, shift)
        if slot < 0:
            continue
        at = places[slot]
        for slot in range(owner_offsets[at], owner_offsets[at + 1]):
            owner = owners[slot]
            word = owner >> 6
            if seen[word] == 0:
                touched[words] = word
                words += 1
            seen[word] |= np.uint64(1) << np.uint64(owner & 63)
    return words


@nb.njit(cache=True, parallel=True, nogil=True)
def probe_owners_kernel(text, shingle_size, probes, places, filter_bits, owner_offsets, owners, owner_count, block_count):
    """Per document of ``text``, the distinct owners (ascending) of the probes it holds, as CSR (offsets, owners). ``probes`` and ``places`` are
    :func:`probe_slots_kernel`'s table; ``owners[owner_offsets[i]:owner_offsets[i + 1]]`` own the
    i-th probe. One bitmap of owners per thread, of which only the words a document
    touched are read and cleared, so a document costs its hits, not the sample. Counted first,
    then filled, hashing again only the documents that have owners."""
    documents = text.offsets.shape[0] - 1
    words_count = (owner_count + 63) // 64
    counts = np.zeros(documents, dtype=np.int64)
    bounds = _blocks(documents, block_count)
    for block in nb.prange(block_count):
        scratch = _scratch(text, bounds[block], bounds[block + 1])
        seen = np.zeros(words_count, dtype=np.uint64)
        touched = np.empty(words_count, dtype=np.int64)
        for doc in range(bounds[block], bounds[block + 1]):
            words = _marked_owners(
                text, doc, shingle_size, scratch, probes, places, filter_bits, owner_offsets, owners, seen, touched
            )
            for word in touched[:words]:
                bits = seen[word]
                while bits:
                    bits &= bits - np.uint64(1)
                    counts[doc] += 1
                seen[word] = 0
    offsets = np.zeros(documents + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(counts)
    found = np.empty(offsets[-1], dtype=np.int64)
    for block in nb.prange(block_count):
        scratch = _scratch(text, bounds[block], bounds[block + 1])
        seen = np.zeros(words_count, dtype=np.uint64)
        touched = np.empty(words_count, dtype=np.int64)
        for doc in range(bounds[block], bounds[block + 1]):
            if counts[doc] == 0:
                continue
            words = _marked_owners(
                text, doc, shingle_size, scratch, probes, places, filter_bits, owner_offsets, owners, seen, touched
            )
            at = offsets[doc]
            for word in np.sort(touched[:words]):
                bits = seen[word]
                while bits:
                    low = bits & (~bits + np.uint64(1))  # the lowest set bit
                    found[at] = word * 64 + int(np.log2(np.float64(low)) + 0.5)
                    at += 1
                    bits ^= low
                seen[word] = 0
    return offsets, found


@nb.njit(cache=True)
def keyed_hash_kernel(data, offsets, key):
    """A 64-bit hash of each string (UTF-8 ``data`` at ``offsets``) keyed by ``key``: the same
    for the same bytes and key on every machine and engine, whatever the row order."""
    hashes = np.empty(offsets.shape[0] - 1, dtype=np.uint64)
    start = mix64(np.uint64(key) ^ np.uint64(0x9E3779B97F4A7C15))
    for row in range(hashes.shape[0]):
        value = start
        for position in range(offsets[row], offsets[row + 1]):
            value = mix64(value ^ np.uint64(data[position]))
        hashes[row] = mix64(value ^ np.uint64(offsets[row + 1] - offsets[row]))
    return hashes
