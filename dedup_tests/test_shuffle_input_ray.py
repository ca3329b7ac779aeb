"""How much input a shuffle's map task gathers (Ray Data's ``shuffle_input_batch_bytes``): less in
the candidate step, whose band-row shuffles are the widest, and Ray's own setting everywhere else.
No cluster is needed: the setting is Ray Data's context on the driver."""

from __future__ import annotations

import pytest

from .conftest import require_ray

ray = require_ray()

from dedup_assets.core.distributed import steps  # noqa: E402
from dedup_assets.core.distributed.session import CANDIDATE_SHUFFLE_INPUT_BYTES, shuffle_input_bytes  # noqa: E402
from dedup_assets.core.settings import PairLimits  # noqa: E402


class Seen(Exception):
    """Stops the step at its first read, once the setting it runs under is known."""


def test_the_candidate_step_runs_under_the_smaller_limit_and_the_setting_is_restored_after(monkeypatch):
    context = ray.data.DataContext.get_current()
    before = context.shuffle_input_batch_bytes
    assert before != CANDIDATE_SHUFFLE_INPUT_BYTES
    seen = []

    def first_read(tables):
        seen.append(ray.data.DataContext.get_current().shuffle_input_batch_bytes)
        raise Seen

    monkeypatch.setattr(steps, "_texts", first_read)
    with pytest.raises(Seen):
        steps.candidate_pairs(steps.RayTables(root=None, partitions=2), PairLimits(max_pair_slots=1, max_bucket_size=1))
    assert seen == [CANDIDATE_SHUFFLE_INPUT_BYTES]
    assert ray.data.DataContext.get_current().shuffle_input_batch_bytes == before


def test_the_limit_holds_only_inside_the_block():
    context = ray.data.DataContext.get_current()
    before = context.shuffle_input_batch_bytes
    with shuffle_input_bytes(64 * 2**20):
        assert context.shuffle_input_batch_bytes == 64 * 2**20
    assert context.shuffle_input_batch_bytes == before
