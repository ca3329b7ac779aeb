"""Release files, streamed out of the DuckDB tables, byte-identical for identical runs, and
``manifest.json``: the settings, the input's identity, library versions, every file's rows and
sha256, and the run's counts.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from .audit import stored_audit_summary
from .diagnostics import CAPS, diagnostic_queries
from .evaluation import stored_evaluation_summary
from .lsh import BucketPressure
from .plots import CLUSTER_SIZES_FILE, JACCARD_FILE, SCURVE_FILE, cluster_sizes_png, jaccard_histogram_png, scurve_png
from .scurve import lsh_probability
from .readers import InputFile, file_sha256
from .settings import DEFAULT_BATCH_SIZE, RUN_PATHS, Settings
from .sinks import BackgroundFile
from .streams import prefetched
from .summary import reason_counts, rejected_by_reason, run_counts
from .tables import HOT_BUCKETS, Tables, beside, sql

# DuckDB hands over batches of DEFAULT_BATCH_SIZE rows, whose memory is reused from batch to
# batch; they are gathered without a copy into row groups of about ROW_GROUP_ROWS rows.
ROW_GROUP_ROWS = 49_152
SUMMARY_FILE = "candidate_summary.csv"
HOT_BUCKETS_FILE = "hot_buckets.csv"
MANIFEST_FILE = "manifest.json"
# files of figures that manifest.json also holds, under these keys
SUMMARY_FILES = {"recall_audit.json": "recall_audit", "evaluation.json": "evaluation"}
# folders inside the one-shot release folder that are not part of the one-shot release and are
# kept when that release is replaced: the incremental batches' releases, and the parameter sweep's
# files
BATCHES_FOLDER = "batches"
TUNING_FOLDER = "tuning"
KEPT_FOLDERS = (BATCHES_FOLDER, TUNING_FOLDER)
LARGE_FILES = ("deduped_documents.parquet", "fingerprinted.parquet")
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
        "cluster_inspection.csv": sql("cluster_inspection", tables),
        "deduped_documents.parquet": f"select * from {tables.deduped_documents}",
        "rejected_documents.csv": f"select * from {tables.rejected_documents}",
        "missed_pairs.csv": (
            f"select left_doc_id, right_doc_id, jaccard, jaccard_band, shared_bands from {tables.recall_audit} "
            "where not found order by jaccard desc, left_doc_id, right_doc_id"
        ),
        "evaluation_errors.csv": f"select * from {tables.evaluation}",
        **diagnostic_queries(tables),
    }


def hash_columns(schema: pa.Schema) -> set[str]:
    """The 64-bit hash columns (and lists of them): random bits, which no codec shrinks and
    whose min/max statistics prune nothing, so neither is spent on them."""

    def is_hash(kind: pa.DataType) -> bool:
        while pa.types.is_list(kind) or pa.types.is_fixed_size_list(kind):
            kind = kind.value_type
        return pa.types.is_uint64(kind)

    return {field.name for field in schema if is_hash(field.type)}


# page text, whose min/max statistics prune nothing either, and cost a comparison of every body
NO_STATISTICS_TEXT = frozenset({"body"})


def write_parquet(relation: duckdb.DuckDBPyRelation, sink: str | Path | io.RawIOBase) -> int:
    """Stream a query into a Parquet file (a path or a writable file); returns its row count.

    Written by Arrow without dictionary pages: for unique text such as bodies, DuckDB's writer
    spends much of its time building dictionaries it then discards. A worker thread reads the
    next row group while this one is encoded. Hash and body columns have no statistics.
    """
    reader = relation.to_arrow_reader(DEFAULT_BATCH_SIZE)
    rows = 0
    hashes = hash_columns(reader.schema)
    with pq.ParquetWriter(
        sink,
        reader.schema,
        compression={name: "none" if name in hashes else "snappy" for name in reader.schema.names},
        write_statistics=[name for name in reader.schema.names if name not in hashes | NO_STATISTICS_TEXT],
        use_dictionary=False,
    ) as writer:
        for row_group in prefetched(_row_groups(reader)):
            writer.write_table(row_group, row_group_size=row_group.num_rows)
            rows += row_group.num_rows
    return rows


def _row_groups(reader: pa.RecordBatchReader) -> Iterator[pa.Table]:
    """Tables of about ``ROW_GROUP_ROWS`` rows, each with the batches as chunks, not copied."""
    group: list[pa.RecordBatch] = []
    rows = 0
    for batch in reader:
        group.append(batch)
        rows += batch.num_rows
        if rows >= ROW_GROUP_ROWS:
            yield pa.Table.from_batches(group)
            group, rows = [], 0
    if group:
        yield pa.Table.from_batches(group)


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
        "lsh_probability_at_threshold": round(
            lsh_probability(settings.jaccard_threshold, params.bands, params.rows_per_band), 4
        ),
    }


def manifest_entries(
    cursor: duckdb.DuckDBPyConnection,
    tables: Tables,
    settings: Settings,
    input_file: InputFile,
    pressure: BucketPressure,
    signatures: bool,
    settings_sources: dict,
) -> dict:
    """Everything ``manifest.json`` says besides its list of files; ``signatures``: whether
    fingerprinted.parquet has them; ``settings_sources``: where each setting and each of
    ``RUN_PATHS`` came from (:func:`.settings.value_sources`)."""
    counts = run_counts(cursor, tables, pressure)
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
        },
        "input": {
            "path": input_file.path,
            "rows": counts["input_record_rows"],
            "byte_size": input_file.byte_size,
            "sha256": input_file.sha256,
        },
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
) -> dict:
    """Write every release file into ``output_dir`` (an empty folder: the staging folder that
    ``publish`` switches in), then ``manifest.json`` listing them with rows and sha256.
    Returns the manifest as written.

    The manifest's entries are computed while the files are written. Files are written two at a
    time, each on its own cursor, largest first: the deduped documents alone keep one core busy
    for most of the step."""
    with connection.cursor() as cursor:
        documents = cursor.execute(f"select count(*) from {tables.documents}").fetchall()[0][0]
    signatures = settings.signatures_released(documents)
    queries = release_queries(tables, signatures)
    if settings.hot_buckets == "skip":  # the buckets left out of the join, each with examples
        queries[HOT_BUCKETS_FILE] = (
            "select bucket_key, band_index, lsh_band, texts, documents, to_json(example_doc_ids) as example_doc_ids "
            f"from {beside(tables.candidate_pairs, HOT_BUCKETS)} order by band_index, lsh_band"
        )
    largest_first = sorted(
        (name for name in queries if name != SUMMARY_FILE), key=lambda name: name not in LARGE_FILES
    )
    with ThreadPoolExecutor(max_workers=2) as writers:
        files = {
            name: writers.submit(
                _write_file, connection.cursor(), queries[name], output_dir / name, {}, CAPS.get(name)
            )
            for name in largest_first
        }
        with connection.cursor() as cursor:
            manifest = manifest_entries(cursor, tables, settings, input_file, pressure, signatures, settings_sources)
        files[SUMMARY_FILE] = writers.submit(
            _write_file,
            connection.cursor(),
            queries[SUMMARY_FILE],
            output_dir / SUMMARY_FILE,
            {"candidate_summary": pa.Table.from_pylist([candidate_summary(manifest["counts"], pressure, settings)])},
        )
        outputs = [{"file": name, **files[name].result()} for name in queries]
    for name, key in SUMMARY_FILES.items():
        (output_dir / name).write_text(json.dumps(manifest[key], indent=2) + "\n", encoding="utf-8")
        outputs.append({"file": name, "rows": 1, "sha256": file_sha256(output_dir / name)})
    for name, png in release_images(connection, tables, settings).items():
        (output_dir / name).write_bytes(png)
        outputs.append({"file": name, "rows": 1, "sha256": file_sha256(output_dir / name)})
    unlisted = sorted({path.name for path in output_dir.iterdir()} - {output["file"] for output in outputs})
    if unlisted:  # a file the manifest would not vouch for must not reach a release
        raise RuntimeError(f"{output_dir}: files left beside the release files: {', '.join(unlisted)}")
    written = {**manifest, "outputs": outputs}
    (output_dir / MANIFEST_FILE).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return written


def release_images(connection: duckdb.DuckDBPyConnection, tables: Tables, settings: Settings) -> dict[str, bytes]:
    """The pictures the assets show, as release files."""
    params = settings.sketch_params()
    with connection.cursor() as cursor:
        return {
            SCURVE_FILE: scurve_png(settings.jaccard_threshold, params.bands, params.rows_per_band, settings.auto_bands),
            JACCARD_FILE: jaccard_histogram_png(cursor, tables, settings.jaccard_threshold),
            CLUSTER_SIZES_FILE: cluster_sizes_png(cursor, tables),
        }


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


def _release_entries(folder: Path) -> set[str]:
    """The names in a release folder, the kept folders aside."""
    return {path.name for path in folder.iterdir() if not (path.name in KEPT_FOLDERS and path.is_dir())}


def verify_release(folder: Path) -> list[str]:
    """Every way the folder differs from its ``manifest.json``: a file missing, unlisted, or
    with other rows or another sha256. Empty when the release is whole."""
    outputs = manifest_outputs(folder)
    if outputs is None:
        return [
            f"{folder}: no readable dedup-assets {MANIFEST_FILE} (missing, damaged, or not ours); "
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


def _write_file(
    cursor: duckdb.DuckDBPyConnection,
    query: str,
    path: Path,
    arrow_inputs: dict[str, pa.Table],
    params: list | dict | None = None,
) -> dict:
    """One release file from ``query`` (with ``params`` bound) on ``cursor`` (which it closes);
    its rows and sha256. Cursors are made by the calling thread: making them concurrently is not
    safe."""
    with cursor:
        for name, table in arrow_inputs.items():
            cursor.register(name, table)
        relation = cursor.sql(query, params=params)
        if path.suffix == ".parquet":
            sink = BackgroundFile(path)
            try:
                rows = write_parquet(relation, sink)
            finally:
                sha256 = sink.finish()
        else:
            spreadsheet_safe(relation).write_csv(str(path))
            rows = cursor.sql(f"select count(*) from ({query})", params=params).fetchall()[0][0]
            sha256 = file_sha256(path)
    return {"rows": int(rows), "sha256": sha256}


def write_files_and_manifest(
    connection: duckdb.DuckDBPyConnection, queries: dict[str, str], params: list, output_dir: Path, manifest: dict
) -> dict:
    """Write each file of ``queries`` (every query binding ``params``) into ``output_dir``, then
    ``manifest.json``: ``manifest`` with the files' rows and sha256. Returns the manifest."""
    outputs = [
        {"file": name, **_write_file(connection.cursor(), query, output_dir / name, {}, params)}
        for name, query in queries.items()
    ]
    written = {**manifest, "outputs": outputs}
    (output_dir / MANIFEST_FILE).write_text(json.dumps(written, indent=2) + "\n", encoding="utf-8")
    return written


def spreadsheet_safe(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """The relation with every text cell that a spreadsheet would run as a formula (one that
    starts with =, +, -, @, a tab or a carriage return) prefixed with a single quote, as OWASP
    advises for CSV files. A cell that starts with a quote gets one more, so that removing one
    leading quote gives back every value (and doc_ids still join across the CSV files). Parquet
    files keep the values as they are."""
    columns = []
    for name, kind in zip(relation.columns, relation.types):
        quoted = '"' + name.replace('"', '""') + '"'
        if str(kind) == "VARCHAR":
            columns.append(
                f"case when regexp_matches({quoted}, '^[-=+@\\t\\r'']') then '''' || {quoted} "
                f"else {quoted} end as {quoted}"
            )
        else:
            columns.append(quoted)
    return relation.project(", ".join(columns))
