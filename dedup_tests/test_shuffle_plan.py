"""How the ray engine shuffles (core/distributed/plan.py): through the object store while the
documents fit in it, through disk beyond, and partitions that grow with the documents. No Ray is
needed: the plan is arithmetic on the corpus's and the cluster's sizes."""

import pytest

from dedup_assets.core.distributed.plan import PARTITION_BYTES, ShufflePlan, shuffle_plan

GB = 2**30


def test_auto_shuffles_through_disk_only_when_the_documents_outgrow_the_object_store():
    assert shuffle_plan("auto", 0, 1 * GB, 2, 7 * GB).disk is False
    assert shuffle_plan("auto", 0, 7 * GB, 2, 7 * GB).disk is False
    assert shuffle_plan("auto", 0, 7 * GB + 1, 2, 7 * GB).disk is True


def test_a_chosen_shuffle_holds_whatever_the_sizes():
    assert shuffle_plan("disk", 0, 1, 2, 7 * GB).disk is True
    assert shuffle_plan("object_store", 0, 70 * GB, 2, 7 * GB).disk is False


def test_automatic_partitions_are_two_per_cpu_or_one_per_partition_bytes():
    assert shuffle_plan("auto", 0, 0, 2, GB) == ShufflePlan(False, 4)  # before documents exist
    assert shuffle_plan("auto", 0, 3 * PARTITION_BYTES, 2, GB).partitions == 4
    assert shuffle_plan("auto", 0, 40 * PARTITION_BYTES + 1, 2, 100 * GB).partitions == 41
    assert shuffle_plan("auto", 0, 40 * PARTITION_BYTES, 64, 100 * GB).partitions == 128
    assert shuffle_plan("auto", 7, 40 * PARTITION_BYTES, 2, 100 * GB).partitions == 7  # as configured


def test_an_unknown_shuffle_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="shuffle must be one of auto, object_store, disk, not 'memory'"):
        shuffle_plan("memory", 0, 0, 2, GB)
