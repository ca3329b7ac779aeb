"""The library runner and the asset graph are one wiring: given the same input and settings,
``run_library`` writes the same release files, byte for byte, as the assets do."""

from __future__ import annotations

import pytest

from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings

from .conftest import FIXTURE, HARD_FIXTURE, sha256_of_files

from dedup_bench.corpus import generate

GENERATED_DOCUMENTS = 3_000


@pytest.mark.parametrize(
    "source, settings",
    [
        ("default", {}),
        ("hard", {}),
        # settings other than the defaults, so that every one of them has to reach both runs
        (
            "generated",
            {"num_perm": 128, "rows_per_band": 8, "jaccard_threshold": 0.6, "minhash_seed": 7, "cluster_mode": "star"},
        ),
    ],
)
def test_library_runner_writes_the_asset_graphs_release(runner, tmp_path, source, settings):
    labels = None
    if source == "generated":
        path = tmp_path / "corpus.parquet"
        generate(GENERATED_DOCUMENTS, path)
    else:
        path = {"default": FIXTURE, "hard": HARD_FIXTURE}[source]
    if source == "default":  # the evaluation's files too
        labels = tmp_path / "labels.csv"
        labels.write_text("doc_id,cluster_label\nbilling-canonical,a\nbilling-mirror,a\nbilling-revision,b\n")
    assert runner.run(path, **settings, labels_path=labels and str(labels)).success
    library_release = tmp_path / "library-release"
    result = run_library(
        str(path), str(tmp_path / "library.duckdb"), str(library_release), Settings(**settings),
        labels_path=labels and str(labels),
    )

    graph, library = sha256_of_files(runner.output_dir), sha256_of_files(library_release)
    assert set(library) == set(graph)
    # the audit's, the evaluation's, the diagnostics', the boilerplate's, the references' and the pictures included
    assert "manifest.json" in graph and len(graph) == 23
    different = [name for name in graph if graph[name] != library[name]]
    assert not different, different
    assert result["duplicates"] == runner.manifest()["counts"]["duplicate_pair_rows"] > 0
