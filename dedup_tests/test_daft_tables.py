"""Our functions on Daft's workers (core/distributed/daft_tables.py): where numba's kernels cannot
run from two threads at once, a worker's calls take turns; a step's scratch folder starts empty
and goes. No Daft or Ray is started: the turn is a plain lock, held here by threads as Daft's
actor threads would."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("daft")  # the module imports Daft: the ray extra

from dedup_assets.core.distributed import daft_tables  # noqa: E402


def _inside_at_once(monkeypatch, shared: bool) -> int:
    """How many of 4 calls were inside their turn together: each waits there (up to 3 s) for
    all 4, which only calls not taking turns can reach."""
    monkeypatch.setattr(daft_tables, "threads_may_share_kernels", lambda: shared)
    together = threading.Barrier(4, timeout=3)
    inside, most = 0, 0
    guard = threading.Lock()

    def call() -> None:
        nonlocal inside, most
        with daft_tables._kernel_turn():
            with guard:
                inside += 1
                most = max(most, inside)
            try:
                together.wait()
            except threading.BrokenBarrierError:
                pass
            with guard:
                inside -= 1

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return most


def test_calls_take_turns_only_where_the_kernels_threads_cannot_be_shared(monkeypatch):
    assert _inside_at_once(monkeypatch, shared=False) == 1
    assert _inside_at_once(monkeypatch, shared=True) == 4


def test_a_scratch_folder_starts_empty_and_is_removed_whatever_happens(tmp_path):
    # what a killed run left behind is not read as this step's
    left = tmp_path / ".verify" / "bodies"
    left.mkdir(parents=True)
    (left / "part-0.parquet").write_bytes(b"stale")
    with daft_tables.scratch_folder(tmp_path, "verify") as folder:
        assert folder == tmp_path / ".verify"
        assert not folder.exists() or not any(folder.iterdir())
        (folder / "ends").mkdir(parents=True)
    assert not (tmp_path / ".verify").exists()
    with pytest.raises(RuntimeError, match="the step failed"):
        with daft_tables.scratch_folder(tmp_path, "verify") as folder:
            (folder / "ends").mkdir(parents=True)
            raise RuntimeError("the step failed")
    assert not (tmp_path / ".verify").exists()
