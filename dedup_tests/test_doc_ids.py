"""FirstSeen: repeated doc_ids across batches and files, against a plain dict."""

import random

import numpy as np
import pyarrow as pa

from dedup_assets.core.read.doc_ids import FirstSeen


def _register(first_seen, source, ids, rows, eligible=None):
    eligible = np.ones(len(ids), dtype=bool) if eligible is None else np.asarray(eligible)
    return first_seen.register(source, pa.array(ids), np.asarray(rows, dtype=np.int64), eligible)


def test_the_first_occurrence_is_kept_and_named_across_batches_and_files():
    first_seen = FirstSeen()
    earlier = _register(first_seen, "a.csv", ["x", "y", "x"], [1, 2, 3])
    assert earlier.tolist() == [-1, -1, 0]  # a repeat within the batch
    earlier = _register(first_seen, "b.csv", ["y", "z"], [1, 2])
    assert earlier.tolist() == [1, -1]
    assert first_seen.place(1) == ("a.csv", 2)
    assert first_seen.place(2) == ("b.csv", 2)


def test_ineligible_rows_do_not_claim_their_id():
    first_seen = FirstSeen()
    earlier = _register(first_seen, "a.csv", ["x", "x", "x"], [1, 2, 3], eligible=[False, True, True])
    assert earlier.tolist() == [-1, -1, 0]  # ordinal 0 is the first id registered: row 2
    assert first_seen.place(earlier[2]) == ("a.csv", 2)


def test_matches_a_dict_through_growth_on_unicode_and_sliced_arrays():
    rng = random.Random(7)
    alphabet = "ab\u00e9\u4e2d\U0001f600"
    ids = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(30_000)]
    first_seen, reference = FirstSeen(), {}
    for start in range(0, len(ids), 7_000):
        batch = pa.array(["padding"] + ids[start : start + 7_000]).slice(1)  # a non-zero offset
        rows = np.arange(start, start + len(batch), dtype=np.int64)
        earlier = first_seen.register("f", batch, rows, np.ones(len(batch), dtype=bool))
        for doc_id, row, found in zip(batch.to_pylist(), rows.tolist(), earlier.tolist()):
            if doc_id in reference:
                assert first_seen.place(found) == ("f", reference[doc_id])
            else:
                assert found == -1
                reference[doc_id] = row
    assert first_seen.count == len(reference)
