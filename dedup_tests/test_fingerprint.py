"""The sketch library: the published blake2b definition, the fast scheme and its kernels."""

import hashlib

import numpy as np
import pyarrow as pa
import pytest

from dedup_assets.core.lsh.scurve import lsh_probability
from dedup_assets.core.sketch.minhash import hash_int, lsh_band_keys, minhash_signature
from dedup_assets.core.settings.model import SettingsError
from dedup_assets.core.pipeline.step_params import SketchParams
from dedup_assets.core.sketch.fingerprints import fingerprint_batch
from dedup_assets.core.verify.jaccard import exact_jaccard
from dedup_assets.core.verify.pairs import signature_overlap
from dedup_assets.core.text.normalize import Shingling, document_shingles


def params(scheme: str, num_perm: int = 64) -> SketchParams:
    return SketchParams(hash_scheme=scheme, shingle_size=5, num_perm=num_perm, rows_per_band=8, minhash_seed=42)


def test_hash_is_little_endian_blake2b_of_seed_and_value():
    digest = hashlib.blake2b(b"43:hello world", digest_size=8).digest()
    assert hash_int("hello world", 43) == int.from_bytes(digest, "little")
    assert hash_int("hello world", 43) != int.from_bytes(digest, "big")


def test_signature_is_coordinatewise_minimum_and_uint64():
    shingles = {"a b c d e", "b c d e f", "x y z"}
    signature = minhash_signature(shingles, 8, 42)
    assert signature.dtype == np.uint64
    for index, value in enumerate(signature):
        assert int(value) == min(hash_int(s, 42 + index) for s in shingles)
    assert minhash_signature(set(), 8, 42).tolist() == [0] * 8


def test_band_keys_follow_published_format():
    signature = np.arange(16, dtype=np.uint64)
    keys = lsh_band_keys(signature, 8)
    payload = "1:" + ",".join(str(v) for v in range(8, 16))
    assert keys[1] == "001:" + hashlib.blake2b(payload.encode(), digest_size=8).hexdigest()
    with pytest.raises(ValueError, match="divisible"):
        lsh_band_keys(signature, 5)


def test_blake2b_batch_stores_the_published_signature_and_band_keys():
    body = "Near-duplicate pages are rarely byte for byte identical across mirrors"
    batch = fingerprint_batch(pa.array(["a"]), pa.array([body]), params("blake2b"))
    shingles = document_shingles(body, Shingling(5))
    expected = minhash_signature(shingles, 64, 42)
    assert batch.column("signature")[0].as_py() == [int(v) for v in expected]
    keys = lsh_band_keys(expected, 8)
    assert [f"{i:03d}:{v:016x}" for i, v in enumerate(batch.column("lsh_bands")[0].as_py())] == keys
    assert batch.column("shingle_count")[0].as_py() == len(shingles)


@pytest.mark.parametrize("scheme", ["fss", "blake2b"])
def test_counts_empty_bodies_and_exact_duplicates_agree_across_schemes(scheme):
    bodies = pa.array(["The quick, brown fox jumps over the lazy dog!", "the QUICK brown fox jumps over the lazy dog", "", None, "two words"])
    batch = fingerprint_batch(pa.array(list("abcde")), bodies, params(scheme))
    assert batch.column("token_count").to_pylist() == [9, 9, 0, 0, 2]
    assert batch.column("shingle_count").to_pylist() == [5, 5, 0, 0, 1]
    hashes = batch.column("content_hash").to_pylist()
    assert hashes[0] == hashes[1] and hashes[0] != hashes[4]
    assert batch.column("signature")[2].as_py() == [0] * 64


def test_fss_overlap_estimates_jaccard():
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(5000)]
    base = list(rng.choice(words, 400))
    edited = list(base)
    for position in rng.choice(len(edited), 12, replace=False):
        edited[position] = "changed"
    true_j = exact_jaccard(pa.array([" ".join(base)]), pa.array([" ".join(edited)]))[0]
    batch = fingerprint_batch(pa.array(["a", "b"]), pa.array([" ".join(base), " ".join(edited)]), params("fss", 512))
    left, right = (np.array(batch.column("signature")[i].as_py()) for i in (0, 1))
    assert abs(np.mean(left == right) - true_j) < 0.06
    assert len(set(left.tolist())) == 512  # every bin filled by a distinct value


def test_exact_jaccard_matches_string_sets_on_random_edits():
    rng = np.random.default_rng(3)
    vocabulary = "alpha beta gamma delta eps zeta eta theta iota kappa".split()
    left, right, expected = [], [], []
    for _ in range(200):
        tokens = list(rng.choice(vocabulary, rng.integers(0, 40)))
        other = list(tokens)
        for _ in range(rng.integers(0, 5)):
            if other:
                other[rng.integers(len(other))] = str(rng.choice(vocabulary))
        a, b = " ".join(tokens), ",".join(other).upper()
        sa, sb = document_shingles(a, Shingling(5)), document_shingles(b, Shingling(5))
        left.append(a), right.append(b)
        expected.append(len(sa & sb) / len(sa | sb) if sa | sb else 0.0)
    for scheme in ("fss", "blake2b"):
        got = exact_jaccard(pa.array(left), pa.array(right), Shingling(5), scheme)
        assert np.allclose(got, expected), scheme


def test_lsh_probability_at_threshold_for_8_by_8():
    assert round(lsh_probability(0.7, 8, 8), 4) == 0.3781


def test_settings_validation():
    with pytest.raises(SettingsError, match="multiple of rows_per_band"):
        SketchParams("fss", 5, 64, 7, 42)
    with pytest.raises(SettingsError, match="hash_scheme must be one of fss, blake2b"):
        SketchParams("md5", 5, 64, 8, 42)


def test_signature_overlap_is_the_share_of_equal_coordinates():
    signatures = pa.FixedSizeListArray.from_arrays(
        pa.array([1, 2, 3, 4, 1, 2, 0, 0, 9, 9, 9, 9], pa.uint64()), 4
    )
    overlap = signature_overlap(signatures, np.array([0, 0, 1]), np.array([1, 2, 0]))
    assert overlap.tolist() == [0.5, 0.0, 0.5]
    with pytest.raises(ValueError, match="different lengths"):
        signature_overlap(pa.array([[1, 2], [1]], pa.list_(pa.uint64())), np.array([0]), np.array([1]))
