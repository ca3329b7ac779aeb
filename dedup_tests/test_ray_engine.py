"""engine: ray on a real two-node Ray cluster: the whole graph on the fixtures and on a generated
corpus, the library run without Dagster, the consistency check in both outcomes, and Daft's
workers killed while they fingerprint, pair and verify."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from dagster import AssetCheckKey, AssetKey

from dedup_assets.checks import rules
from dedup_assets.core.pipeline import engines
from dedup_assets.core.distributed.datasets import in_position_order
from dedup_assets.core.distributed.plan import ClusterOptions
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.storage.tables import PIPELINE_TABLES
from dedup_assets.engine_resource import EngineResource
from dedup_bench.corpus import generate

from .processes import child_processes
from .conftest import (
    FIXTURE, HARD_FIXTURE, PROJECT_ROOT, GraphRunner, boilerplate_pages, chinese_pages, document, mirror_pages,
    require_ray, scored_pages, sha256_of_files, write_csv,
)

# the ray_cluster fixture requires Ray (and fails under DEDUP_REQUIRE_RAY without it)
pytestmark = pytest.mark.ray

CONSISTENCY = AssetCheckKey(AssetKey("deduped_documents"), "engine_matches_duckdb")
CLUSTER_CASES = PROJECT_ROOT / "data" / "cluster_cases.csv"


def check_result(result, key: AssetCheckKey):
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.asset_check_key == key]
    return evaluation


def run_both(
    tmp_path: Path, input_path: Path, ray_options: dict | None = None, **settings
) -> tuple[GraphRunner, GraphRunner, object]:
    duckdb_runner, ray_runner = GraphRunner(tmp_path / "duckdb"), GraphRunner(tmp_path / "ray")
    duckdb_runner.run(input_path, **settings)
    result = ray_runner.run(input_path, engine="ray", engine_resource=EngineResource(**(ray_options or {})), **settings)
    return duckdb_runner, ray_runner, result


# components on the Dagster node (the default budget), and on the cluster (a budget of 0 edges)
ON_DRIVER, ON_CLUSTER = {}, {"components_on_driver_up_to_edges": 0}


@pytest.mark.parametrize(
    "fixture, ray_options",
    [(FIXTURE, ON_DRIVER), (HARD_FIXTURE, ON_DRIVER), (CLUSTER_CASES, ON_DRIVER), (CLUSTER_CASES, ON_CLUSTER)],
    ids=["documents", "hard_cases", "cluster_cases", "cluster_cases-components_on_cluster"],
)
def test_ray_gives_the_duckdb_release(ray_cluster, tmp_path, fixture, ray_options):
    _assert_same_release(*run_both(tmp_path, fixture, ray_options))


def test_a_disk_shuffle_into_chosen_partitions_gives_the_duckdb_release(ray_cluster, tmp_path):
    import daft

    _assert_same_release(*run_both(tmp_path, CLUSTER_CASES, {"shuffle": "disk", "shuffle_partitions": 3}))
    # the settings reached Daft's queries: its flight shuffle, through files on the nodes' disks
    config = daft.context.get_context().daft_execution_config
    assert (config.shuffle_algorithm, config.shuffle_aggregation_default_partitions) == ("flight_shuffle", 3)


def test_ray_gives_the_duckdb_release_on_pages_without_spaces_in_both_units(ray_cluster, tmp_path):
    write_csv(tmp_path / "zh.csv", chinese_pages(60))
    _assert_same_release(*run_both(tmp_path / "word", tmp_path / "zh.csv"))
    _assert_same_release(*run_both(tmp_path / "char", tmp_path / "zh.csv", shingle_unit="char", shingle_size=3))


def test_ray_gives_the_duckdb_release_keeping_the_best_quality_copy(ray_cluster, tmp_path):
    write_csv(tmp_path / "pages.csv", scored_pages())
    # input_row: a column the engine reads for itself too
    runners = run_both(tmp_path, tmp_path / "pages.csv", keep=["quality desc", "newest", "input_row asc"], rows_per_band=4)
    _assert_same_release(*runners)
    clusters = runners[1].table("clusters").set_index("doc_id")
    assert clusters.loc["a-low", "keep_reason"] == "quality 0.91 > 0.42"
    assert set(clusters.index[clusters["decision"] == "kept_representative"]) == {"a-best", "b-new", "alone"}


def test_ray_gives_the_duckdb_release_keeping_the_original_with_prefer_domains(ray_cluster, tmp_path):
    write_csv(tmp_path / "pages.csv", mirror_pages())
    runners = run_both(tmp_path, tmp_path / "pages.csv", prefer_domains=["original.com"], rows_per_band=4)
    _assert_same_release(*runners)
    kept = runners[1].table("clusters").set_index("doc_id")["decision"].to_dict()
    assert kept == {"original": "kept_representative", "mirror": "removed_duplicate", "other": "kept_representative"}


@pytest.mark.parametrize(
    "pages, max_bucket_size, every_bucket_hot",
    [(None, 2, False), (boilerplate_pages, 3, False), (lambda: boilerplate_pages()[:10], 3, True)],
    ids=["hard_cases", "boilerplate", "every_bucket_hot"],  # the footer pages alone: an empty join
)
def test_ray_leaves_out_and_lists_the_hot_buckets_duckdb_does(
    ray_cluster, tmp_path, pages, max_bucket_size, every_bucket_hot
):
    # the hard cases copied away from their contract, which is written for every bucket joined
    corpus = Path(shutil.copy(HARD_FIXTURE, tmp_path)) if pages is None else write_csv(tmp_path / "pages.csv", pages())
    runners = run_both(tmp_path, corpus, hot_buckets="skip", max_bucket_size=max_bucket_size)
    _assert_same_release(*runners)  # hot_buckets.csv among the files
    duckdb_hot, ray_hot = (runner.table("hot_buckets") for runner in runners[:2])
    assert len(duckdb_hot) and (duckdb_hot["texts"] > max_bucket_size).all()
    listed = [hot.assign(example_doc_ids=hot["example_doc_ids"].map(list)).to_dict("records") for hot in (duckdb_hot, ray_hot)]
    assert listed[1] == listed[0]  # the same rows in the same order
    joined = [len(runner.table("candidate_pairs")) for runner in runners[:2]]
    assert joined[1] == joined[0] and (joined[0] == 0) == every_bucket_hot


@pytest.mark.parametrize(
    "fixture, ray_options",
    [(FIXTURE, ON_DRIVER), (HARD_FIXTURE, ON_DRIVER), (CLUSTER_CASES, ON_CLUSTER)],
    ids=["documents", "hard_cases", "cluster_cases-components_on_cluster"],
)
def test_ray_gives_the_duckdb_release_in_star_mode(ray_cluster, tmp_path, fixture, ray_options):
    runners = run_both(tmp_path, fixture, ray_options, cluster_mode="star")
    _assert_same_release(*runners)
    if fixture == CLUSTER_CASES:  # the chain's two ends are kept, as star mode keeps them on duckdb
        clusters = runners[1].table("clusters").set_index("doc_id")
        assert clusters.loc[["chain-a", "chain-b", "chain-c"], "decision"].tolist() == [
            "kept_representative", "removed_duplicate", "kept_representative"
        ]
        assert not clusters["chained"].any()


def _words(first: int, count: int = 100) -> str:
    return " ".join(f"w{n}" for n in range(first, first + count))


@pytest.mark.parametrize("ray_options", [ON_DRIVER, ON_CLUSTER], ids=["components_on_driver", "components_on_cluster"])
@pytest.mark.parametrize("twins", [True, False], ids=["with_twins", "every_edge_matched"])
def test_ray_gives_the_duckdb_release_against_a_reference_corpus(ray_cluster, tmp_path, ray_options, twins):
    """A page that matches the reference (and its copy) is removed for it and joins no
    component: its near duplicates that the reference does not match (shingle Jaccard about 0.73
    with it, 0.59 with the reference) cluster with each other only; without the twins, every
    accepted edge has a matched end, and no component is left."""
    reference = write_csv(tmp_path / "reference.csv", [document("ref", _words(0)), document("ref-other", _words(500))])
    pages = [
        document("matched", _words(10)), document("matched-copy", _words(10)),
        document("neighbour", _words(25)), document("alone", _words(700)),
    ]
    if twins:
        pages += [document("neighbour-2", _words(25) + " w999"), document("twin-1", _words(300)), document("twin-2", _words(300) + " again")]
    new = write_csv(tmp_path / "new.csv", pages)
    runners = run_both(tmp_path, new, ray_options, reference=[str(reference)], rows_per_band=4)
    _assert_same_release(*runners)
    clusters = runners[1].table("clusters").set_index("doc_id")
    assert clusters.loc[["matched", "matched-copy"], "cluster_id"].tolist() == [f"reference:{reference}:ref"] * 2
    assert (clusters.loc[["matched", "matched-copy"], "decision"] == "matched_reference").all()
    assert clusters.loc[["matched", "matched-copy"], "cluster_size"].tolist() == [2, 2]
    assert clusters.loc["neighbour", "cluster_size"] == (2 if twins else 1)
    assert clusters.loc["alone", "cluster_size"] == 1
    assert len(runners[1].table("duplicate_pairs")) >= (4 if twins else 2)  # the matched pages' edges were there


def _assert_same_release(duckdb_runner: GraphRunner, ray_runner: GraphRunner, result) -> None:
    evaluation = check_result(result, CONSISTENCY)
    assert evaluation.passed and evaluation.metadata["compared"].value is True, evaluation.description
    files = sha256_of_files(duckdb_runner.output_dir)
    files.pop("manifest.json")  # it names the engine and the paths
    assert files == {name: sha256 for name, sha256 in sha256_of_files(ray_runner.output_dir).items() if name != "manifest.json"}
    for table in ("documents", "fingerprinted", "clusters", "deduped_documents"):  # in input order, as DuckDB's
        assert ray_runner.table(table).doc_id.tolist() == duckdb_runner.table(table).doc_id.tolist(), table
    manifests = duckdb_runner.manifest(), ray_runner.manifest()
    assert manifests[0]["counts"] == manifests[1]["counts"]
    assert [m["settings"]["engine"] for m in manifests] == ["duckdb", "ray"]
    # the big tables are Parquet folders that the DuckDB file views; the wide per-document ones
    # are read in input order as they lie, not sorted on every read
    folder = Path(f"{ray_runner.database}.datasets")
    for table in ("documents", "fingerprinted"):
        assert in_position_order(folder / table), table
    # deduped_documents is a view of documents and clusters, as on engine duckdb: no copy of the kept bodies
    assert sorted(path.name for path in folder.iterdir() if not path.name.startswith(".")) == [
        "candidate_pairs", "clusters", "documents", "duplicate_pairs", "fingerprinted", "first_copies", "scored_pairs",
    ]
    assert not (folder / ".components").exists()  # the cluster's components' scratch goes with the step


@pytest.mark.parametrize("slice_bytes", [None, 4096], ids=["one_slice", "four_slices"])
def test_the_library_run_on_ray_writes_the_duckdb_engines_tables_and_release(ray_cluster, tmp_path, monkeypatch, slice_bytes):
    """``run_library`` opens the engine the settings name, as the assets do: on ray, every table
    holds the DuckDB engine's rows in its order, and the release files are its bytes; also when
    verification goes in slices (the hard cases' 9 LSH pairs carry 13,304 bytes of bodies)."""
    if slice_bytes:
        monkeypatch.setattr("dedup_assets.core.distributed.ray_verify.SLICE_BYTES", slice_bytes)
    runs = {}
    for engine in ("duckdb", "ray"):
        folder = tmp_path / engine
        database = folder / "run.duckdb"
        result = run_library(str(HARD_FIXTURE), str(database), str(folder / "out"), Settings(engine=engine))
        with duckdb.connect(str(database), read_only=True) as connection:
            stored = {
                name for (name,) in connection.execute(
                    "select table_name from duckdb_tables() where schema_name = 'dedup' "
                    "union all select view_name from duckdb_views() where schema_name = 'dedup'"
                ).fetchall()
            }
            tables = {
                name: connection.execute(f"select * from dedup.{name}").fetchall()
                for name in PIPELINE_TABLES if name in stored
            }
        files = sha256_of_files(folder / "out")
        files.pop("manifest.json")  # it names the engine and the paths
        runs[engine] = result["counts"], tables, files
    assert Path(tmp_path / "ray" / "run.duckdb.datasets", "clusters").is_dir()  # the ray engine wrote them
    duckdb_run, ray_run = runs["duckdb"], runs["ray"]
    assert {"documents", "fingerprinted", "candidate_pairs", "clusters", "deduped_documents"} <= set(duckdb_run[1])
    assert ray_run[1].keys() == duckdb_run[1].keys()
    for name, rows in duckdb_run[1].items():
        assert ray_run[1][name] == rows, name
    assert ray_run[2] == duckdb_run[2]
    assert ray_run[0] == duckdb_run[0]


def test_the_engines_table_folder_is_the_setting_then_the_environment_then_beside_the_database(
    ray_cluster, tmp_path, monkeypatch
):
    database = str(tmp_path / "run.duckdb")

    def root(cluster: ClusterOptions = ClusterOptions()) -> Path:
        with ExitStack() as session:
            return engines.for_settings(Settings(engine="ray"), database, session, cluster).tables.root

    monkeypatch.delenv("DEDUP_DATASETS", raising=False)
    assert root() == tmp_path / "run.duckdb.datasets"
    monkeypatch.setenv("DEDUP_DATASETS", str(tmp_path / "from-env"))
    assert root() == tmp_path / "from-env"
    assert root(ClusterOptions(dataset_root=str(tmp_path / "set"))) == tmp_path / "set"


def test_an_unreachable_cluster_in_the_environment_is_refused_with_where_to_set_it(tmp_path):
    """DEDUP_RAY_ADDRESS names the cluster when no address is set; in a process of its own, since
    this one's Ray session (the tests' cluster) would be used as it is."""
    require_ray()
    script = (
        "from contextlib import ExitStack\n"
        "from dedup_assets.core.pipeline.engines import for_settings\n"
        "from dedup_assets.core.util.errors import DedupError\n"
        "from dedup_assets.core.settings.model import Settings\n"
        "try:\n"
        "    with ExitStack() as session:\n"
        f"        for_settings(Settings(engine='ray'), {str(tmp_path / 'run.duckdb')!r}, session)\n"
        "except DedupError as error:\n"
        "    print(error)\n"
    )
    environment = {**os.environ, "DEDUP_RAY_ADDRESS": "ray://127.0.0.1:9"}  # the discard port: no server
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment, check=True)
    assert result.stdout.startswith("Could not reach the Ray cluster at ray://127.0.0.1:9: "), result.stdout
    assert "engine resource's" in result.stdout and "DEDUP_RAY_ADDRESS" in result.stdout


def test_two_library_runs_in_one_process_each_on_its_own_local_ray_verify_alike(tmp_path):
    """Daft sets its runner once per process and keeps its scheduler from its first query; a second
    run's own local Ray (the first one's stopped) verifies on Daft too. In a process of its own,
    as this one's Ray session would be used as it is."""
    require_ray()
    script = (
        "from dedup_assets.core.pipeline.library import run_library\n"
        "from dedup_assets.core.settings.model import Settings\n"
        "for run in ('first', 'second'):\n"
        f"    counts = run_library({str(HARD_FIXTURE)!r}, f'{tmp_path}/{{run}}.duckdb', None, Settings(engine='ray'))['counts']\n"
        "    print(counts['duplicate_pair_rows'])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "DEDUP_RAY_ADDRESS": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = result.stdout.split()
    assert first == second and int(first) > 0


def test_ray_on_a_generated_corpus_passes_the_consistency_check(ray_cluster, tmp_path):
    corpus = tmp_path / "corpus.parquet"
    generate(int(os.environ.get("DEDUP_RAY_TEST_DOCUMENTS", "100000")), corpus)
    runner = GraphRunner(tmp_path)
    result = runner.run(
        corpus, engine="ray", engine_resource=EngineResource(**ON_CLUSTER),
        num_perm=128, rows_per_band=8, batch_size=1_000,
    )
    evaluation = check_result(result, CONSISTENCY)
    assert evaluation.passed and evaluation.metadata["compared"].value is True, evaluation.description
    # the per-document tables are in input order, as the DuckDB engine stores them (the check
    # compares sets): many fingerprinting tasks and sorted partitions must come back in order
    order = runner.table("documents").doc_id.tolist()
    assert order == [str(doc_id) for doc_id in pq.read_table(corpus, columns=["doc_id"]).column(0).to_pylist()]
    for table in ("fingerprinted", "clusters"):
        assert runner.table(table).doc_id.tolist() == order, table
    kept = runner.table("deduped_documents").doc_id.tolist()
    chosen = set(kept)
    assert kept == [doc_id for doc_id in order if doc_id in chosen]
    # and the wide one is read in that order as it lies, not sorted on every read
    folder = Path(f"{runner.database}.datasets") / "documents"
    assert any(folder.glob("*.parquet")) and in_position_order(folder)
    found_by = set(runner.table("candidate_pairs").found_by)
    assert found_by == {"lsh", "content_hash", "lsh_via_copy"}, found_by


def test_bad_input_fails_on_ray_with_the_duckdb_engines_message(ray_cluster, tmp_path):
    bad = tmp_path / "in.csv"
    bad.write_text("doc_id,source,domain,crawled_at,title,body,document_position\na,s,d,2026-01-01,t,b,1\n")
    messages = []
    for engine in ("duckdb", "ray"):
        result = GraphRunner(tmp_path / engine).run(bad, selection=["documents", "rejected_documents"], engine=engine, raise_on_error=False)
        (failure,) = result.get_step_failure_events()
        messages.append(failure.event_specific_data.error.message)
    assert "document_position" in messages[0] and "fields" in messages[0]
    assert messages[1] == messages[0]


def test_ray_tables_under_a_path_with_pattern_marks_are_the_duckdb_engines(ray_cluster, tmp_path):
    """The datasets folder (beside the database) and the input files have * and [ in their
    paths: DuckDB's views over the folders and Ray's reads take each as itself."""
    folder = tmp_path / "in"
    folder.mkdir()
    source = pd.read_csv(FIXTURE, dtype=str, keep_default_na=False)
    for number, name in enumerate(("a1", "a[1]", "b*")):
        part = source.iloc[number * 8 : (number + 1) * 8]
        pq.write_table(pa.Table.from_pandas(part, preserve_index=False), folder / f"{name}.parquet")
    duckdb_runner, ray_runner, result = run_both(tmp_path / "runs[1]*", folder)
    evaluation = check_result(result, CONSISTENCY)
    assert evaluation.passed and evaluation.metadata["compared"].value is True, evaluation.description
    assert sorted(ray_runner.table("documents").doc_id) == sorted(source.doc_id)


def test_a_difference_fails_the_check_and_a_large_corpus_is_not_compared():
    failed = rules.engine_matches_duckdb("ray", {"clusters": (2, 1), "duplicate_pairs": (0, 0)}, 24, 100)
    assert not failed.passed
    assert failed.description.startswith("clusters: 2 rows only on engine ray, 1 only on duckdb; re-run with engine: duckdb")
    passed = rules.engine_matches_duckdb("ray", {"clusters": (0, 0)}, 24, 100)
    assert passed.passed and passed.description == "clusters: the same rows on engine ray and on duckdb, both ways"
    skipped = rules.engine_matches_duckdb("ray", None, 1_000, 100)
    assert not skipped.passed and skipped.severity.value == "WARN"
    assert "1,000 documents is above compare_up_to_documents=100" in skipped.description
    reference = rules.engine_matches_duckdb("duckdb", None, 24, 100)
    assert reference.passed and reference.metadata["compared"].value is False
    assert reference.description == "engine duckdb: these tables are the reference others are compared with"


def test_a_changed_ray_table_fails_the_check(ray_cluster, tmp_path):
    runner = GraphRunner(tmp_path)
    runner.run(FIXTURE, engine="ray")
    clusters = Path(f"{runner.database}.datasets") / "clusters"
    for part in clusters.glob("*.parquet"):  # every removed document said to be kept
        table = pq.read_table(part)
        removed = pc.equal(table["decision"], "removed_duplicate")
        decision = pc.if_else(removed, "kept_representative", table["decision"])
        pq.write_table(table.set_column(table.schema.get_field_index("decision"), "decision", decision), part)
    result = runner.run(FIXTURE, engine="ray", selection="deduped_documents", raise_on_error=False)
    evaluation = check_result(result, CONSISTENCY)
    assert not evaluation.passed
    assert evaluation.description.startswith("clusters: 12 rows only on engine ray, 12 only on duckdb")


def _kill_in_turn(cluster, names: list[str], killed: list[str], stop: threading.Event) -> None:
    """SIGKILL, for each of ``names`` in turn, the first of ``cluster``'s workers whose title names
    it: Ray titles a worker by the task it runs, and Daft's per-node actor by its task's plan.
    Only the children of the cluster's raylets: the machine may run other Rays."""
    raylets = {node.all_processes["raylet"][0].process.pid for node in cluster.list_all_nodes()}
    while not stop.is_set() and len(killed) < len(names):
        for pid, _, title in child_processes(raylets):
            if title.startswith("ray::") and names[len(killed)] in title:
                os.kill(pid, signal.SIGKILL)
                killed.append(title)
                break
        time.sleep(0.01)


def _assert_a_killed_run_changes_nothing(
    cluster, tmp_path, upstream, selection: str, names: list[str], **settings
) -> None:
    """Run ``upstream``, then ``selection`` killing the workers ``names`` name as they run; the
    consistency check compares every table with DuckDB's."""
    corpus = tmp_path / "corpus.parquet"
    generate(20_000, corpus)
    killed: list[str] = []
    stop = threading.Event()
    watcher = threading.Thread(
        target=_kill_in_turn, args=(cluster, names, killed, stop), daemon=True
    )
    runner = GraphRunner(tmp_path)
    runner.run(corpus, engine="ray", selection=upstream)
    watcher.start()
    try:
        result = runner.run(corpus, engine="ray", selection=selection, **settings)
    finally:
        stop.set()
        watcher.join()
    assert len(killed) == len(names), f"no worker running {names[len(killed)]} found to kill"
    evaluation = check_result(result, CONSISTENCY)
    assert evaluation.passed and evaluation.metadata["compared"].value is True, evaluation.description


def test_a_daft_worker_killed_while_fingerprinting_changes_nothing(ray_cluster, tmp_path):
    # Daft's plan of fingerprinted as its actor's title: the documents read, the sketch (our
    # batch function) and each batch written as a file (another), their rows summed. Daft
    # reruns the dead actor's tasks, which write the same files again
    sketch = "ray::PhysicalScan->Project->UDFProject->Project->UDFProject->UnGroupedAggregate"
    upstream = ["documents", "rejected_documents"]
    _assert_a_killed_run_changes_nothing(ray_cluster, tmp_path, upstream, "fingerprinted*", [sketch], batch_size=500)


def test_daft_workers_killed_while_pairing_and_verifying_change_nothing(ray_cluster, tmp_path):
    # Daft's plans as its actors' titles: the band rows (our band-index function, then explode)
    # in candidate_pairs, then the signature overlap (our batch function after the join) in
    # scored_pairs. Daft reruns a dead actor's tasks (on a new actor or the other node's)
    steps = ["UDFProject->Explode", "HashJoin->Project->UDFProject->Project->Filter"]
    _assert_a_killed_run_changes_nothing(
        ray_cluster, tmp_path, "*band_memberships", "candidate_pairs*", steps
    )


def test_the_parameter_sweep_reads_the_ray_engines_documents_as_duckdbs(ray_cluster, tmp_path):
    import csv
    import io

    from dagster import materialize

    from dedup_assets.assets.tuning import parameter_sweep
    from dedup_assets.settings_resource import DedupSettings
    from dedup_assets.stored_tables.warehouse import DuckDBWarehouse

    combinations = {
        "sweep_combinations": [{"num_perm": 32, "rows_per_band": 4}, {"num_perm": 64, "auto_bands": True}],
        "sweep_sample_size": 0,
    }
    sweeps = []
    for runner in run_both(tmp_path, FIXTURE)[:2]:
        engine = "ray" if runner.database.parent.parent.name == "ray" else "duckdb"
        result = materialize(
            [parameter_sweep],
            resources={
                "warehouse": DuckDBWarehouse(database=str(runner.database), memory_limit="1GB"),
                "dedup": DedupSettings(input_path=str(FIXTURE), output_dir=str(runner.output_dir), engine=engine, **combinations),
            },
        )
        assert result.success
        rows = csv.DictReader(io.StringIO((runner.output_dir / "tuning" / "sweep.csv").read_text(encoding="utf-8")))
        sweeps.append([{name: value for name, value in row.items() if name != "seconds"} for row in rows])
    assert len(sweeps[0]) == 2 and sweeps[1] == sweeps[0]
    assert all(int(row["true_pairs"]) > 0 for row in sweeps[0])
