"""The ray engine's candidate step (``ray_candidates.py``, on Daft) over band keys above 2**63, on
a real two-node Ray cluster: keys kept exact and ordered as unsigned, as the DuckDB engine's."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dedup_assets.core.distributed.datasets import read_table, write_batches
from dedup_assets.core.pipeline.step_params import PairLimits

# Ray and Daft are imported by the tests, once the ray_cluster fixture has them
pytestmark = pytest.mark.ray

TOP = 2**64 - 1  # -1 as a signed 64-bit integer: the smallest key, were it read as signed
HOT = 2**64 - 3  # a float64 would round it to 2**64


def _fingerprinted(root) -> None:
    # doc_id, content hash, band keys; a2 is a copy of a, and e, f, g share a bucket of 3 texts
    rows = [
        ("a", 1, [TOP, 2**63 + 1]),
        ("b", 2, [TOP, 2**63 + 2]),
        ("c", 3, [5, 2**63 + 3]),
        ("d", 4, [5, 2**63 + 4]),
        ("e", 5, [HOT, 2**63 + 5]),
        ("f", 6, [HOT, 2**63 + 6]),
        ("g", 7, [HOT, 2**63 + 7]),
        ("a2", 1, [TOP, 2**63 + 1]),
    ]
    fingerprints = pa.record_batch(
        {
            "doc_id": [row[0] for row in rows],
            "content_hash": pa.array([row[1] for row in rows], pa.uint64()),
            "lsh_bands": pa.array([row[2] for row in rows], pa.list_(pa.uint64(), 2)),
        }
    )
    write_batches(root, "fingerprinted", [fingerprints], rows_per_file=3)
    documents = pa.record_batch({"doc_id": [row[0] for row in rows], "domain": [f"{row[0]}.org" for row in rows]})
    write_batches(root, "documents", [documents], rows_per_file=3)


def test_band_keys_above_2_63_stay_exact_and_order_as_unsigned(ray_cluster, tmp_path):
    from dedup_assets.core.distributed.ray_candidates import candidate_pairs
    from dedup_assets.core.distributed.ray_tables import RayTables
    from dedup_assets.core.distributed.session import ray_session

    _fingerprinted(tmp_path)
    with ray_session(None):  # the cluster's session, with Daft on it
        _, pressure, hot = candidate_pairs(RayTables(tmp_path, partitions=3), PairLimits(100, 2, skip_hot_buckets=True))

    # of the two largest buckets (2 texts each), the smaller key as unsigned: 5, not 2**64 - 1
    assert pressure.largest_bucket_key == "000:0000000000000005"
    assert (pressure.largest_bucket_size, pressure.bucket_count) == (2, 9)
    # the join's slots: a's copy counts in a's bucket (2) and c, d's (1); every two documents: 3 + 1 + 1
    assert (pressure.pair_slots, pressure.document_pair_slots) == (3, 5)
    assert hot.to_pylist() == [{"band_index": 0, "lsh_band": HOT, "texts": 3, "documents": 3}]
    pairs = read_table(tmp_path, "candidate_pairs").sort_by([("left_doc_id", "ascending"), ("right_doc_id", "ascending")])
    assert pairs.select(["left_doc_id", "right_doc_id", "left_domain", "shared_bands", "found_by"]).to_pylist() == [
        {"left_doc_id": "a", "right_doc_id": "a2", "left_domain": "a.org", "shared_bands": 2, "found_by": "content_hash"},
        {"left_doc_id": "a", "right_doc_id": "b", "left_domain": "a.org", "shared_bands": 1, "found_by": "lsh"},
        {"left_doc_id": "a2", "right_doc_id": "b", "left_domain": "a2.org", "shared_bands": 1, "found_by": "lsh_via_copy"},
        {"left_doc_id": "c", "right_doc_id": "d", "left_domain": "c.org", "shared_bands": 1, "found_by": "lsh"},
    ]
    assert read_table(tmp_path, "first_copies").to_pylist() == [{"doc_id": "a2", "first_copy_doc_id": "a"}]


def test_a_hot_bucket_is_refused_with_its_key_before_any_table_is_written(ray_cluster, tmp_path):
    from dedup_assets.core.distributed.datasets import table_folder
    from dedup_assets.core.distributed.ray_candidates import candidate_pairs
    from dedup_assets.core.distributed.ray_tables import RayTables
    from dedup_assets.core.distributed.session import ray_session
    from dedup_assets.core.lsh.candidates import PairBudgetExceeded

    _fingerprinted(tmp_path)
    with ray_session(None), pytest.raises(PairBudgetExceeded) as refused:
        candidate_pairs(RayTables(tmp_path, partitions=3), PairLimits(100, 2))

    assert f"LSH bucket 000:{HOT:016x} holds 3 different texts, above max_bucket_size=2" in str(refused.value)
    # the refusal leaves the tables as they were: no first_copies beside an older candidate_pairs
    assert not table_folder(tmp_path, "first_copies").exists()
    assert not table_folder(tmp_path, "candidate_pairs").exists()
