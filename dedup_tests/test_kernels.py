"""The compiled kernels' hashes (tokens, token sequences) against plain-Python definitions."""

import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from dedup_assets.core.lsh import bucket_kernels
from dedup_assets.core.sketch import kernels
from dedup_assets.core.audit.probe import _probe_filter
from dedup_assets.core.verify.jaccard import shingle_sets
from dedup_assets.core.sketch.kernels import probe_owners_kernel, probe_slots_kernel
from dedup_assets.core.text.normalize import Shingling, kernel_text
from dedup_assets.core.text.tokenizers import TOKENIZERS

MASK = (1 << 64) - 1


def _mix64(value: int) -> int:
    value = ((value ^ (value >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    value = ((value ^ (value >> 27)) * 0x94D049BB133111EB) & MASK
    return value ^ (value >> 31)


def _token_hash(token: bytes) -> int:
    """Bytes packed eight at a time, first byte most significant; one multiply per full eight;
    the remaining bytes and the length go into the final mix."""
    value = int(kernels._TOKEN_SEED)
    full = len(token) // 8 * 8
    for start in range(0, full, 8):
        value = ((value ^ int.from_bytes(token[start : start + 8], "big")) * 0xFF51AFD7ED558CCD) & MASK
    rest = int.from_bytes(token[full:], "big") if full < len(token) else 0
    return _mix64(value ^ rest ^ ((len(token) << 56) & MASK))


def _kernel_token_hashes(text: bytes, per_character: bool = False) -> list[int]:
    data = np.frombuffer(text, dtype=np.uint8)
    capacity = len(text) + 1
    out = np.empty(capacity, dtype=np.uint64)
    lowered = np.empty(len(text) + 128, dtype=np.uint8)
    token_bounds = np.empty((2, capacity), dtype=np.uint64)
    tokenizer = TOKENIZERS["char" if per_character else "word"]
    count = kernels.token_hashes_of_bytes(data, 0, len(text), out, lowered, token_bounds, tokenizer)
    return out[:count].tolist()


@pytest.mark.parametrize("seed", range(4))
def test_token_hashes_match_their_definition_across_block_boundaries(seed):
    rng = np.random.default_rng(seed)
    letters = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    separators = b" .,-_!\n\t"
    for _ in range(300):
        pieces = []
        for _ in range(rng.integers(0, 30)):
            # lengths around the 8-byte packing and past one 64-byte block
            length = int(rng.choice([1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, int(rng.integers(1, 140))]))
            pieces.append(bytes(rng.choice(list(letters), length).tolist()))
            pieces.append(bytes(rng.choice(list(separators), int(rng.integers(1, 4))).tolist()))
        if pieces and rng.random() < 0.5:
            pieces.pop()  # end inside a token
        text = b"".join(pieces)
        expected = [
            _token_hash(token)
            for token in bytes(c if chr(c).isalnum() else 32 for c in text.lower()).split()
        ]
        assert _kernel_token_hashes(text) == expected, text


def test_a_token_filling_whole_blocks_to_the_end():
    for length in (8, 64, 128, 192):
        text = b"x" * length
        assert _kernel_token_hashes(text) == [_token_hash(text)]
        assert _kernel_token_hashes(b" " + text[1:]) == [_token_hash(text[1:])]


def test_no_tokens():
    for per_character in (False, True):
        assert _kernel_token_hashes(b"", per_character) == []
        assert _kernel_token_hashes(b" ,.-\n" * 30, per_character) == []


@pytest.mark.parametrize("seed", range(2))
def test_character_tokens_are_each_utf8_character_of_every_token(seed):
    rng = np.random.default_rng(seed)
    characters = list("abcXYZ09") + ["é", "中", "文", "ก", "\u0e38", "한"]
    for _ in range(200):
        words = [
            "".join(rng.choice(characters, int(rng.integers(1, 12))).tolist()) for _ in range(rng.integers(0, 20))
        ]
        text = " ".join(words).encode("utf-8")
        expected = [_token_hash(ch.lower().encode("utf-8")) for word in words for ch in word]
        assert _kernel_token_hashes(text, per_character=True) == expected, text


def test_byte_classes_of_every_byte():
    for byte in range(256):
        character = chr(byte)
        if character.isascii() and character.isalnum():
            expected = ord(character.lower())
        else:
            expected = byte if byte >= 128 else 0
        assert kernels._byte_class(np.uint8(byte)) == expected, byte


def test_sequence_hash_is_the_plain_polynomial_for_every_length_mod_four():
    # the kernel folds four tokens per step; the value must be the one-token-at-a-time polynomial
    rng = np.random.default_rng(5)
    for count in range(0, 14):
        tokens = rng.integers(0, 1 << 63, size=count + 3, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        sequence = count
        for token in tokens[:count].tolist():
            sequence = (sequence * 0x9E3779B97F4A7C15 + token) & MASK
        assert int(kernels._sequence_hash(tokens, count)) == _mix64(sequence), count


@pytest.mark.parametrize(("preset", "expected"), [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_openmp_threads_wait_passively_unless_the_user_chose(preset, expected):
    """Spinning OpenMP threads took CPU from DuckDB; the setting must be in the environment
    when OpenMP starts (the first parallel kernel), and a user's own choice must stand."""
    environment = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    if preset:
        environment["OMP_WAIT_POLICY"] = preset
    script = (
        "import os, pyarrow as pa\n"
        "from dedup_assets.core.pipeline.step_params import SketchParams\n"
        "from dedup_assets.core.sketch.fingerprints import fingerprint_batch\n"
        "fingerprint_batch(pa.array(['a']), pa.array(['one two three four five six']), "
        "SketchParams('fss', 5, 16, 8, 42))\n"
        "print(os.environ['OMP_WAIT_POLICY'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == expected


def _assert_shared(bands, band, shared, keys):
    """The band's shared texts are the rows with those keys, bucket after bucket by key, and
    their buckets hold the pairs counted."""
    members, member_counts, pairs = shared
    rows = members[band, : member_counts[band]]
    assert bands[rows, band].tolist() == sorted(bands[rows, band].tolist())
    assert sorted(rows.tolist()) == np.flatnonzero(np.isin(bands[:, band], keys)).tolist()
    assert pairs[band] == sum(int(n) * (int(n) - 1) // 2 for n in np.unique(bands[rows, band], return_counts=True)[1])


@pytest.mark.parametrize("seed", range(3))
def test_bucket_pressure_counts_the_rows_of_the_join_and_of_the_copies(seed):
    """Per bucket of k texts standing for c_1..c_k documents: every pair of texts, and each further
    copy with the other texts: the sum over text pairs of c_i + c_j - 1."""
    rng = np.random.default_rng(seed)
    bands = rng.integers(0, 6, size=(40, 3)).astype(np.uint64)
    copies = rng.integers(1, 5, size=40)
    copies[0] = 1_000_000  # however many copies a text has, alone in a bucket it takes no slots
    bands[0] = [100, 101, 102]
    slots, published, largest, largest_key, buckets, shared, hot = bucket_kernels.bucket_pressure_kernel(
        bands, copies, 40
    )
    for band in range(3):
        keys, sizes = np.unique(bands[:, band], return_counts=True)
        expected = every_two = 0
        for key in keys:
            members = copies[bands[:, band] == key]
            expected += sum(
                int(members[i] + members[j] - 1) for i in range(len(members)) for j in range(i + 1, len(members))
            )
            # the published figure: every two documents in the bucket, copies of one text included
            documents = int(members.sum())
            every_two += documents * (documents - 1) // 2
        assert slots[band] == expected
        assert published[band] == every_two
        assert (largest[band], largest_key[band]) == (sizes.max(), keys[np.argmax(sizes)])
        assert buckets[band] == len(keys)
        _assert_shared(bands, band, shared, keys[sizes > 1])
    assert hot[3].tolist() == [0, 0, 0]  # max_size of the row count: no bucket is hot
    ones = bucket_kernels.bucket_pressure_kernel(bands, np.ones(40, dtype=np.int64), 40)[0]
    assert ones.tolist() == [
        sum(n * (n - 1) // 2 for n in np.unique(bands[:, band], return_counts=True)[1]) for band in range(3)
    ]


@pytest.mark.parametrize("seed", range(3))
def test_buckets_over_max_size_are_listed_as_hot_and_count_in_no_other_figure(seed):
    rng = np.random.default_rng(seed)
    bands = rng.integers(0, 8, size=(60, 4)).astype(np.uint64)
    copies = rng.integers(1, 4, size=60)
    max_size = 8
    slots, _, largest, _, buckets, shared, hot = bucket_kernels.bucket_pressure_kernel(bands, copies, max_size)
    hot_keys, hot_sizes, hot_documents, hot_counts = hot
    for band in range(4):
        keys, sizes = np.unique(bands[:, band], return_counts=True)
        over = sizes > max_size
        assert hot_keys[band, : hot_counts[band]].tolist() == keys[over].tolist()
        assert hot_sizes[band, : hot_counts[band]].tolist() == sizes[over].tolist()
        assert hot_documents[band, : hot_counts[band]].tolist() == [
            int(copies[bands[:, band] == key].sum()) for key in keys[over]
        ]
        admitted = keys[~over]
        assert buckets[band] == len(admitted)
        assert largest[band] == (sizes[~over].max() if len(admitted) else 0)
        _assert_shared(bands, band, shared, keys[~over & (sizes > 1)])
        expected = 0
        for key in admitted:
            members = copies[bands[:, band] == key]
            expected += sum(int(members[i] + members[j] - 1) for i in range(len(members)) for j in range(i + 1, len(members)))
        assert slots[band] == expected


@pytest.mark.parametrize(
    ("texts", "bands", "values", "max_size"),
    [(60, 3, 8, 10), (3_000, 4, 400, 3_000), (2_000, 16, None, 2_000), (300, 2, 2, 200), (1, 1, 8, 1)],
)
def test_bucket_pairs_are_every_two_texts_of_an_admitted_bucket_with_their_shared_bands(texts, bands, values, max_size):
    """Against every two rows compared band by band: few values (crowded, hot), spread 64-bit
    keys (buckets only by chance), and keys in the top bits only."""
    rng = np.random.default_rng(texts)
    if values is None:
        keys = rng.integers(0, 2**63, size=(texts, bands), dtype=np.int64).astype(np.uint64) << np.uint64(1)
        keys[1::3] = keys[::3][: len(keys[1::3])]  # some rows share every band
    else:
        keys = rng.integers(0, values, size=(texts, bands)).astype(np.uint64) << np.uint64(60 if values == 2 else 0)
    _, _, _, _, _, shared, _ = bucket_kernels.bucket_pressure_kernel(keys, np.ones(texts, np.int64), max_size)
    left, right, shared_bands = bucket_kernels.bucket_pairs_kernel(keys, *shared)
    expected = {}
    for band in range(bands):
        column = keys[:, band]
        values_here, sizes = np.unique(column, return_counts=True)
        admitted = set(values_here[(sizes > 1) & (sizes <= max_size)].tolist())
        for i in range(texts):
            if column[i] in admitted:
                for j in np.flatnonzero(column[i + 1 :] == column[i]) + i + 1:
                    expected[(i, int(j))] = expected.get((i, int(j)), 0) + 1
    assert list(zip(left.tolist(), right.tolist())) == sorted(expected)
    assert shared_bands.tolist() == [expected[pair] for pair in sorted(expected)]


@pytest.mark.parametrize("seed", range(3))
def test_probe_owners_are_every_distinct_owner_of_the_probes_held_in_order(seed):
    rng = np.random.default_rng(seed)
    owner_count = int(rng.integers(1, 150))  # more than one 64-bit word of owners, or fewer
    words = [f"w{index}" for index in range(60)]
    bodies = [" ".join(rng.choice(words, int(rng.integers(0, 30)))) for _ in range(40)]
    text = kernel_text(pa.array(bodies))
    every = shingle_sets(pa.array(bodies), Shingling(2))[0]
    probes = np.unique(rng.choice(every, 25))
    sizes = rng.integers(0, 12, len(probes))
    owner_offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    owners = np.concatenate(
        [np.sort(rng.choice(owner_count, size, replace=True)) for size in sizes] or [np.zeros(0)]
    ).astype(np.int64)
    offsets, found = probe_owners_kernel(
        text, 2, *probe_slots_kernel(probes), _probe_filter(probes), owner_offsets, owners, owner_count, 3
    )
    for doc, body in enumerate(bodies):
        held = shingle_sets(pa.array([body]), Shingling(2))[0]
        expected = sorted(
            {
                int(owner)
                for at in np.flatnonzero(np.isin(probes, held))
                for owner in owners[owner_offsets[at] : owner_offsets[at + 1]]
            }
        )
        assert found[offsets[doc] : offsets[doc + 1]].tolist() == expected
    assert offsets[-1] > 0, "some document must hold a probe for this to compare anything"
