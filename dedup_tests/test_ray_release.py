"""engine: ray writes the release's large files on the cluster's workers (issue 51): the Dagster
process writes only the small ones and the manifest, and a worker that does not see the staging
folder says what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.release import files
from dedup_assets.core.release.files import LARGE_FILES, MANIFEST_FILE, verify_release
from dedup_assets.core.release.outputs import write_output
from dedup_assets.core.settings.model import Settings

from .conftest import HARD_FIXTURE, require_ray

pytestmark = pytest.mark.ray


def test_a_worker_writes_only_into_a_release_folder_it_sees_with_the_dagster_nodes_versions(tmp_path):
    require_ray()
    import duckdb
    import pyarrow as pa

    from dedup_assets.core.distributed.ray_release import WorkerCannotWrite, check_release_folder

    versions = {"duckdb": duckdb.__version__, "pyarrow": pa.__version__}
    check_release_folder(tmp_path, "node-a", versions)  # there, alike: nothing to say
    missing = tmp_path / ".out.staging-12"
    with pytest.raises(WorkerCannotWrite) as raised:
        check_release_folder(missing, "node-b (pid 7)", versions)
    message = str(raised.value)
    assert message.startswith(f"{missing}: node node-b (pid 7) of the Ray cluster does not see this folder")
    assert "set output_dir (DEDUP_OUTPUT_DIR) to a path every node sees" in message
    assert "dataset_root (DEDUP_DATASETS)" in message
    with pytest.raises(WorkerCannotWrite) as raised:
        check_release_folder(tmp_path, "node-c", {**versions, "pyarrow": "16.1.0"})
    assert str(raised.value).startswith(f"node node-c of the Ray cluster has {versions} where the Dagster node has ")
    assert str(raised.value).endswith("Install the same versions on every node.")


def test_the_large_release_files_are_written_by_the_clusters_workers(ray_cluster, tmp_path, monkeypatch):
    """The Dagster process's own ``write_output`` refuses the large files (the workers, processes
    of their own, import theirs unpatched): the release is still whole, the log says where each
    large file was written, and the manifest lists their rows and sha256 as the files hold them."""

    def small_files_only(cursor, query, output_dir, name, *args, **kwargs):
        if name in LARGE_FILES:
            raise AssertionError(f"{name} was written by the Dagster process")
        return write_output(cursor, query, output_dir, name, *args, **kwargs)

    monkeypatch.setattr(files, "write_output", small_files_only)
    lines: list[str] = []
    out = tmp_path / "out"
    run_library(str(HARD_FIXTURE), str(tmp_path / "run.duckdb"), str(out), Settings(engine="ray"), log=lines.append)
    assert verify_release(out) == []
    outputs = json.loads((out / MANIFEST_FILE).read_text(encoding="utf-8"))["outputs"]
    parts = [o for o in outputs if o["file"].startswith("deduped_documents/")]
    (fingerprints,) = [o for o in outputs if o["file"] == "fingerprinted.parquet"]
    assert "manifest: writing deduped_documents and fingerprinted.parquet on the cluster's workers" in lines
    assert (
        f"manifest: deduped_documents written on the cluster, {sum(p['rows'] for p in parts):,} rows in "
        f"{len(parts)} part{'s' if len(parts) > 1 else ''}"
    ) in lines
    assert f"manifest: fingerprinted.parquet written on the cluster, {fingerprints['rows']:,} rows" in lines
    assert fingerprints["rows"] > 0 and parts and all(Path(out, p["file"]).is_file() for p in parts)
