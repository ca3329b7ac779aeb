"""Release files, streamed out of the DuckDB tables, byte-identical for identical runs, and
``manifest.json``: the settings, the input's identity, library versions, every file's rows and
sha256, and the run's counts.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..audit.recall import stored_audit_summary
from .diagnostics import CAPS, COLLISION_BUCKETS_FILE, diagnostic_queries
from ..audit.evaluation import stored_evaluation_summary
from ..lsh.candidates import BucketPressure
from .plots import (
    BOILERPLATE_FILE, CLUSTER_SIZES_FILE, JACCARD_FILE, SCURVE_FILE, boilerplate_png, cluster_sizes_png,
    jaccard_histogram_png, scurve_png,
)
from ..lsh.scurve import lsh_probability
from ..read import InputFile, file_sha256
from .engine_files import accepted_files
from .outputs import write_output
from ..settings.lineage import RUN_PATHS
from ..settings.choices import DEFAULT_COMPRESSION
from ..settings.model import Settings
from ..util.streams import Progress, ThroughputLog
from .summary import reason_counts, rejected_by_reason, run_counts
from ..text.passages import FOUND_PASSAGES
from ..storage.store import read_lineage
from ..storage.tables import HOT_BUCKETS, REFERENCES, Tables, beside, sql

if TYPE_CHECKING:  # the engines' layer runs steps whose release is written here
    from ..pipeline.engines import Engine

SUMMARY_FILE = "candidate_summary.csv"
HOT_BUCKETS_FILE = "hot_buckets.csv"
MANIFEST_FILE = "manifest.json"
# files of figures that manifest.json also holds, under these keys
SUMMARY_FILES = {"recall_audit.json": "recall_audit", "evaluation.json": "evaluation"}
# folders reached from the one-shot release folder that are not part of the one-shot release and
# are kept when that release is replaced: the incremental batches' releases, and the parameter
# sweep's files (links to folders beside the releases: pointer.py)
BATCHES_FOLDER = "batches"
TUNING_FOLDER = "tuning"
KEPT_FOLDERS = (BATCHES_FOLDER, TUNING_FOLDER)
# the kept documents: a folder of Parquet parts (parquet_files.py), listed part by part
DEDUPED_DOCUMENTS = "deduped_documents"
LARGE_FILES = (DEDUPED_DOCUMENTS, "fingerprinted.parquet")
LIBRARIES = (
    "dagster",
    "duckdb",
    "pandas",
    "pyarrow",
    "networkx",
    "numpy",
    "numba",
    "warcio",
    "resiliparse",
    "matplotlib",  # draws the release's pictures: their bytes follow its version
)


def library_versions() -> dict[str, str]:
    return {name: metadata.version(name) for name in ("dedup-assets", *LIBRARIES)}


def release_queries(tables: Tables, signatures: bool = True) -> dict[str, str]:
    """File name -> the query that fills it. Per-document files keep input order (the order the
    tables are stored in, so the corpus text is never sorted); pair files are sorted by pair; the
    diagnostic files (``diagnostics.py``) as their queries say. Without ``signatures``,
    fingerprinted.parquet leaves out the signature column."""
    return {
        "fingerprinted.parquet": f"select *{'' if signatures else ' exclude (signature)'} from {tables.fingerprinted}",
        SUMMARY_FILE: "select * from candidate_summary",
        "scored_pairs.parquet": f"select * from {tables.scored_pairs}",
        "duplicate_pairs.csv": f"select * from {tables.duplicate_pairs}",
        "clusters.csv": f"select * from {tables.clusters} order by cluster_id, representative_rank",
        "reference_matches.csv": f"select * from {tables.reference_matches}",
        "cluster_inspection.csv": sql("cluster_inspection", tables),
        "boilerplate.csv": f"select * from {tables.boilerplate} order by passage_rank",
        "template_clusters.csv": f"select * from {tables.template_clusters} order by cluster_size desc, cluster_id",
        DEDUPED_DOCUMENTS: f"select * from {tables.deduped_documents}",
        "rejected_documents.csv": f"select * from {tables.rejected_documents}",
        "missed_pairs.csv": (
            f"select left_doc_id, right_doc_id, jaccard, jaccard_band, shared_bands, sampled_text, pairs "
            f"from {tables.recall_audit} where not found order by jaccard desc, left_doc_id, right_doc_id, sampled_text"
        ),
        "evaluation_errors.csv": f"select * from {tables.evaluation}",
        **diagnostic_queries(tables),
    }


def candidate_summary(counts: dict, pressure: BucketPressure, settings: Settings) -> dict:
    """The one row of ``candidate_summary.csv``."""
    params = settings.sketch_params()
    return {
        "document_rows": counts["document_rows"],
        "possible_pair_rows": counts["possible_pair_rows"],
        "candidate_pair_rows": counts["candidate_pair_rows"],
        "candidate_reduction_ratio": counts["candidate_reduction_ratio"],
        "candidate_pair_slots": pressure.document_pair_slots,
        "grouped_candidate_pair_slots": pressure.pair_slots,
        "largest_bucket_size": pressure.largest_bucket_size,
        "bands": params.bands,
        "rows_per_band": params.rows_per_band,
        "lsh_probability_at_threshold": round(lsh_probability(settings.jaccard_threshold, params.bands, params.rows_per_band), 4),
    }


def manifest_entries(
    cursor: duckdb.DuckDBPyConnection,
    tables: Tables,
    settings: Settings,
    input_file: InputFile,
    pressure: BucketPressure,
    signatures: bool,
    settings_sources: dict,
    largest_bucket: int | None = None,
) -> dict:
    """Everything ``manifest.json`` says besides its list of files; ``signatures``: whether
    fingerprinted.parquet has them; ``settings_sources``: where each setting and each of
    ``RUN_PATHS`` came from (:func:`.settings.value_sources`); ``largest_bucket``: the
    documents in the largest LSH bucket where the caller has it (None: counted here)."""
    counts = run_counts(cursor, tables, pressure, largest_bucket)
    if settings.hot_buckets == "skip":
        counts["hot_buckets_skipped"], counts["largest_hot_bucket_texts"] = cursor.execute(
            f"select count(*), coalesce(max(texts), 0) from {beside(tables.candidate_pairs, HOT_BUCKETS)}"
        ).fetchone()
    return {
        "product": "dedup-assets",
        "settings": settings.as_dict(),
        "settings_sources": {name: settings_sources[name] for name in (*settings.as_dict(), *RUN_PATHS)},
        # what an unset setting came to in this run
        "derived_settings": {
            **settings.derived(),
            "max_pair_slots": settings.pair_limits().max_pair_slots,
            "release_signatures": signatures,
            "preset_settings": settings.preset_settings(),
            **({FOUND_PASSAGES: found} if (found := read_lineage(cursor, tables.fingerprinted).get(FOUND_PASSAGES)) else {}),
        },
        "input": {
            "path": input_file.path,
            "rows": counts["input_record_rows"],
            "byte_size": input_file.byte_size,
            "sha256": input_file.sha256,
            # an input folder's files that no reader reads, not read
            "skipped_files": list(input_file.skipped),
        },
        # each reference deduplicated against: its documents and its input's sha256
        "references": [{k: v for k, v in e.items() if k != "index"} for e in read_lineage(cursor, tables.reference_matches).get(REFERENCES, [])],
        "versions": library_versions(),
        "counts": counts,
        "pair_reasons": reason_counts(cursor, tables.scored_pairs),
        "rejected_by_reason": rejected_by_reason(cursor, tables.rejected_documents),
        # how much the diagnostic files list at most, per file
        "diagnostic_caps": CAPS,
        "recall_audit": stored_audit_summary(cursor, tables.recall_audit),
        "evaluation": stored_evaluation_summary(cursor, tables.evaluation),
    }


def write_release(
    connection: duckdb.DuckDBPyConnection,
    tables: Tables,
    output_dir: Path,
    settings: Settings,
    input_file: InputFile,
    pressure: BucketPressure,
    settings_sources: dict,
    log: Progress,
    engine: Engine | None = None,
) -> dict:
    """Write every release file into ``output_dir`` (an empty folder: the staging folder that
    ``publish`` switches in), then ``manifest.json`` listing them with rows and sha256.
    Returns the manifest as written.

    The manifest's entries are computed while the files are written. Files are written two at a
    time, each on its own cursor, largest first; the deduped documents' parts are encoded by
    threads of their own (:func:`.parquet_files.write_parquet_parts`), and the pictures are
    drawn meanwhile. The two files a row per document (:data:`LARGE_FILES`), which take most of
    the time, are written where ``engine`` writes them (:meth:`Engine.release_files`): by its
    cluster's workers, meanwhile, or here (None: here; and those the cluster could not write,
    ``engine_files.py``). Progress goes to ``log``, in the rows of the large files written here,
    and a line for each one written on the cluster."""
    with connection.cursor() as cursor:
        documents = cursor.execute(f"select count(*) from {tables.documents}").fetchall()[0][0]
    signatures = settings.signatures_released(documents)
    queries = release_queries(tables, signatures)
    if settings.hot_buckets == "skip":  # the buckets left out of the join, each with examples
        queries[HOT_BUCKETS_FILE] = (
            "select bucket_key, band_index, lsh_band, texts, documents, to_json(example_doc_ids) as example_doc_ids "
            f"from {beside(tables.candidate_pairs, HOT_BUCKETS)} order by band_index, lsh_band"
        )
    large = {name: queries[name] for name in LARGE_FILES}
    on_cluster = engine.release_files(connection, large, output_dir, settings.release_compression, log) if engine else None
    progress = None  # counts the large files' rows written here
    if not on_cluster:
        with connection.cursor() as cursor:
            kept = cursor.execute(f"select count(*) from {tables.clusters} where representative_rank = 1").fetchall()[0][0]
        progress = ThroughputLog(log, "manifest", documents + kept, f"rows of {' and '.join(LARGE_FILES)} written")
    largest_first = sorted(
        (name for name in queries if name not in (SUMMARY_FILE, COLLISION_BUCKETS_FILE) and not (on_cluster and name in large)),
        key=lambda name: name not in LARGE_FILES,
    )
    with connection.cursor() as cursor:  # its file and the manifest's largest bucket, from one query
        collisions = cursor.sql(queries[COLLISION_BUCKETS_FILE], params=CAPS[COLLISION_BUCKETS_FILE]).to_arrow_table()
    largest_bucket = max(collisions.column("member_count").to_pylist(), default=0)
    # the cluster's writes wait in a thread of their own: two still write here
    with ThreadPoolExecutor(max_workers=3 if on_cluster else 2) as writers:
        if on_cluster:
            log(f"manifest: writing {' and '.join(large)} on the cluster's workers")
            cluster = writers.submit(on_cluster)
        files = {
            name: writers.submit(
                write_output, connection.cursor(), queries[name], output_dir, name, {}, CAPS.get(name),
                settings.release_compression, progress.advance if progress and name in LARGE_FILES else None,
            )
            for name in largest_first
        }
        files[COLLISION_BUCKETS_FILE] = writers.submit(
            write_output, connection.cursor(),
            "select * from collisions order by member_count desc, band_index, lsh_band", output_dir, COLLISION_BUCKETS_FILE,
            {"collisions": collisions},
        )
        images = writers.submit(_write_images, connection.cursor(), output_dir, tables, settings)
        with connection.cursor() as cursor:
            manifest = manifest_entries(
                cursor, tables, settings, input_file, pressure, signatures, settings_sources, largest_bucket
            )
        files[SUMMARY_FILE] = writers.submit(
            write_output,
            connection.cursor(),
            queries[SUMMARY_FILE],
            output_dir,
            SUMMARY_FILE,
            {"candidate_summary": pa.Table.from_pylist([candidate_summary(manifest["counts"], pressure, settings)])},
        )
        done = accepted_files(cluster, list(large), output_dir, log) if on_cluster else {}
        for name in large.keys() - done.keys() if on_cluster else ():  # what the cluster did not write
            done[name] = write_output(connection.cursor(), large[name], output_dir, name, {}, None, settings.release_compression)
        outputs = [output for name in queries for output in (done[name] if name in done else files[name].result())]
        for name, key in SUMMARY_FILES.items():
            (output_dir / name).write_text(json.dumps(manifest[key], indent=2) + "\n", encoding="utf-8")
            outputs.append({"file": name, "rows": 1, "sha256": file_sha256(output_dir / name)})
        outputs += images.result()
    unlisted = sorted(_release_entries(output_dir) - {output["file"] for output in outputs})
    if unlisted:  # a file the manifest would not vouch for must not reach a release
        raise RuntimeError(f"{output_dir}: files left beside the release files: {', '.join(unlisted)}")
    written = {**manifest, "outputs": outputs}
    (output_dir / MANIFEST_FILE).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return written


def _write_images(cursor: duckdb.DuckDBPyConnection, output_dir: Path, tables: Tables, settings: Settings) -> list[dict]:
    """The pictures the assets show, as release files, drawn with ``cursor`` (which it closes)."""
    params = settings.sketch_params()
    with cursor:
        images = {
            SCURVE_FILE: scurve_png(settings.jaccard_threshold, params.bands, params.rows_per_band, settings.auto_bands),
            JACCARD_FILE: jaccard_histogram_png(cursor, tables, settings.jaccard_threshold),
            CLUSTER_SIZES_FILE: cluster_sizes_png(cursor, tables),
            BOILERPLATE_FILE: boilerplate_png(
                cursor.execute(f"select passage, share from {tables.boilerplate} order by passage_rank limit 10").fetchall()
            ),
        }
    for name, png in images.items():
        (output_dir / name).write_bytes(png)
    return [{"file": name, "rows": 1, "sha256": file_sha256(output_dir / name)} for name in images]


def manifest_outputs(folder: Path) -> list[dict] | None:
    """The files a release folder's manifest lists (each with ``file``, ``rows`` and
    ``sha256``); None when the folder holds no readable dedup-assets manifest."""
    try:
        manifest = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("product") != "dedup-assets":
        return None
    outputs = manifest.get("outputs")
    shape = {"file": str, "rows": int, "sha256": str}
    if not isinstance(outputs, list) or not all(
        isinstance(output, dict) and all(isinstance(output.get(key), kind) for key, kind in shape.items())
        for output in outputs
    ):
        return None
    return outputs


def is_release(folder: Path) -> bool:
    """Whether a folder may be replaced by a release: empty, or exactly what its manifest lists."""
    present = _release_entries(folder)
    outputs = manifest_outputs(folder)
    return not present or (outputs is not None and present <= {MANIFEST_FILE, *(o["file"] for o in outputs)})


def _release_entries(folder: Path, kept: tuple[str, ...] = KEPT_FOLDERS) -> set[str]:
    """The files in a release folder as the manifest names them (a part as
    ``deduped_documents/part-00000.parquet``), and its empty folders; the kept folders (or the
    links to them) aside."""
    entries = set()
    for path in folder.iterdir():
        if path.name in kept:
            continue
        if not path.is_dir() or path.is_symlink():
            entries.add(path.name)
        else:
            entries |= {f"{path.name}/{name}" for name in _release_entries(path, ())} or {f"{path.name}/"}
    return entries


def verify_release(folder: Path) -> list[str]:
    """Every way the folder differs from its ``manifest.json``: a file missing, unlisted, or
    with other rows or another sha256. Empty when the release is whole. The folder's links are
    resolved once, first: the output folder, a link to the current release, may be linked to a
    newer one meanwhile, and the release it named is read whole."""
    named, folder = folder, folder.resolve()
    outputs = manifest_outputs(folder)
    if outputs is None:
        return [
            f"{named}: no readable dedup-assets {MANIFEST_FILE} (missing, damaged, or not ours); "
            "this is not a whole release."
        ]
    problems = []
    for output in outputs:
        path = folder / output["file"]
        if not path.is_file():
            problems.append(f"{output['file']}: missing")
            continue
        sha256 = file_sha256(path)
        if sha256 != output["sha256"]:
            problems.append(f"{output['file']}: sha256 is {sha256}, the manifest says {output['sha256']}")
            continue
        rows = _file_rows(path)
        if rows != output["rows"]:
            problems.append(f"{output['file']}: {rows:,} rows, the manifest says {output['rows']:,}")
    listed = {MANIFEST_FILE, *(output["file"] for output in outputs)}
    present = _release_entries(folder)
    problems += [f"{name}: not listed in {MANIFEST_FILE}" for name in sorted(present - listed)]
    return problems


def _file_rows(path: Path) -> int:
    if path.suffix == ".parquet":
        return pq.ParquetFile(path).metadata.num_rows
    if path.suffix == ".json":  # one object
        json.loads(path.read_text(encoding="utf-8"))
        return 1
    if path.suffix == ".png":  # one picture
        return 1
    with duckdb.connect() as connection, path.open("rb") as handle:
        # a cell may be as long as the file (cluster_inspection lists a cluster's members in one);
        # the open file, as DuckDB would read a glob mark in an output folder's path as a pattern
        return connection.read_csv(
            handle, header=True, all_varchar=True, max_line_size=max(path.stat().st_size, 1 << 21)
        ).aggregate("count(*)").fetchall()[0][0]


def write_files_and_manifest(
    connection: duckdb.DuckDBPyConnection,
    queries: dict[str, str],
    params: dict,
    output_dir: Path,
    manifest: dict,
    compression: str = DEFAULT_COMPRESSION,
) -> dict:
    """Write each file of ``queries`` (every query binding ``params``) into ``output_dir`` as
    :func:`write_release` does (Parquet compressed with ``compression``), then ``manifest.json``:
    ``manifest`` with the files' rows and sha256. Returns the manifest."""
    outputs = [
        output
        for name, query in queries.items()
        for output in write_output(connection.cursor(), query, output_dir, name, {}, params, compression)
    ]
    written = {**manifest, "outputs": outputs}
    (output_dir / MANIFEST_FILE).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return written
