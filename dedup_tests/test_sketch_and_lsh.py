import hashlib

import numpy as np
import pandas as pd
import pytest

from dedup_assets.core.fingerprint import (
    SettingsError,
    SketchParams,
    band_memberships,
    fingerprint_documents,
    lsh_probability,
)
from dedup_assets.core.lsh import (
    PairBudgetExceeded,
    bucket_pressure,
    candidate_pairs,
    ensure_within_budget,
)
from dedup_assets.core.sketch import hash_int, lsh_band_keys, minhash_signature

PARAMS = SketchParams(shingle_size=5, num_perm=64, rows_per_band=8, minhash_seed=42)


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
    assert [k[:4] for k in keys] == ["000:", "001:"]
    with pytest.raises(ValueError, match="divisible"):
        lsh_band_keys(signature, 5)


def test_lsh_probability_at_threshold_for_8_by_8():
    assert round(lsh_probability(0.7, 8, 8), 4) == 0.3781


def test_settings_validation():
    with pytest.raises(SettingsError, match="multiple of rows_per_band"):
        SketchParams(shingle_size=5, num_perm=64, rows_per_band=7, minhash_seed=42)


def _docs(bodies: dict[str, tuple[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(doc_id, domain, body) for doc_id, (domain, body) in bodies.items()],
        columns=["doc_id", "domain", "body"],
    )


def test_empty_body_never_enters_a_bucket():
    fingerprints = fingerprint_documents(_docs({"a": ("x", ""), "b": ("y", "")}), PARAMS)
    assert fingerprints["shingle_count"].tolist() == [0, 0]
    assert band_memberships(fingerprints, 8).empty


def test_candidates_are_global_ordered_and_count_shared_bands():
    text = "the same paragraph of text appears on two different sites today"
    fingerprints = fingerprint_documents(
        _docs({"b": ("site-b.org", text), "a": ("site-a.com", text), "c": ("site-a.com", "unrelated words here entirely different")}),
        PARAMS,
    )
    pairs = candidate_pairs(band_memberships(fingerprints, 8))
    assert pairs[["left_doc_id", "right_doc_id", "shared_bands"]].values.tolist() == [["a", "b", 8]]
    assert pairs.loc[0, "left_domain"] != pairs.loc[0, "right_domain"]


def test_pair_budget_names_the_worst_bucket():
    memberships = pd.DataFrame(
        {
            "doc_id": [f"d{i}" for i in range(5)] + ["x", "y"],
            "domain": ["example.com"] * 7,
            "band_index": [0] * 7,
            "lsh_band": ["000:hot"] * 5 + ["000:cool"] * 2,
        }
    )
    pressure = bucket_pressure(memberships)
    assert (pressure.pair_slots, pressure.largest_bucket_size, pressure.largest_bucket_key) == (11, 5, "000:hot")
    ensure_within_budget(pressure, 11)
    with pytest.raises(PairBudgetExceeded, match="000:hot.*5 documents"):
        ensure_within_budget(pressure, 10)
