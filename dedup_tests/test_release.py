"""The release folder: a link to the current release, switched in whole under a lock, checked
against its manifest, safe to open in a spreadsheet, and errors about the place written to that
name it."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.release import pointer as release_pointer
from dedup_assets.core.release.parquet_files import hash_columns, write_parquet
from dedup_assets.core.pipeline.library import run_library
from dedup_assets.core.storage.places import place_error
from dedup_assets.core.release.publish import ReleaseError, ReleaseLocked, check_output_folder, publish, release_lock, remains
from dedup_assets.core.read import file_sha256
from dedup_assets.core.release.pointer import release_ids
from dedup_assets.core.release.files import KEPT_FOLDERS, MANIFEST_FILE, is_release, verify_release
from dedup_assets.core.release.outputs import spreadsheet_safe
from dedup_assets.core.util.errors import SettingsError
from dedup_assets.core.settings.model import Settings

from .conftest import FIXTURE, PROJECT_ROOT, sha256_of_files
from .test_cli import run_command


def _fake_release(folder: Path, files: dict[str, str]) -> None:
    """A folder whose manifest lists ``files`` (the shape publish and verify look at)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    outputs = [{"file": name, "rows": 0, "sha256": file_sha256(folder / name)} for name in files]
    (folder / MANIFEST_FILE).write_text(json.dumps({"product": "dedup-assets", "outputs": outputs}))


def _writer(files: dict[str, str]):
    def write(folder: Path) -> str:
        _fake_release(folder, files)
        return "written"

    return write


def _releases(out: Path) -> list[str]:
    return sorted(path.name for path in out.with_name(f".{out.name}.releases").iterdir())


def test_publish_switches_a_new_release_in_whole_and_leaves_nothing_beside_it(tmp_path):
    out = tmp_path / "out"
    publish(out, _writer({"old.csv": "old"}), "db.duckdb", print)
    old = Path(os.path.realpath(out))
    messages = []
    assert publish(out, _writer({"new.csv": "new"}), "db.duckdb", messages.append) == "written"
    assert sorted(path.name for path in out.iterdir()) == [MANIFEST_FILE, "new.csv"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [".out.lock", ".out.releases", "out"]
    assert messages == []
    # out is a link to the new release's own folder; the old release is kept, unchanged
    new = os.readlink(out)
    assert new.startswith(".out.releases/") and _releases(out) == sorted([old.name, Path(new).name])
    assert (old / "old.csv").read_text() == "old" and verify_release(old) == [] and not (old / "new.csv").exists()


def test_a_failed_write_leaves_the_old_release_as_it_was(tmp_path):
    out = tmp_path / "out"
    _fake_release(out, {"old.csv": "old"})

    def failing(folder: Path) -> None:
        (folder / "half.parquet").write_text("half")
        raise RuntimeError("stopped half way")

    with pytest.raises(RuntimeError, match="half way"):
        publish(out, failing, "db.duckdb", print)
    assert (out / "old.csv").read_text() == "old"
    assert not (out / "half.parquet").exists()
    assert remains(out) == []


def test_the_remains_of_a_killed_run_are_removed_and_reported(tmp_path):
    out = tmp_path / "out"
    publish(out, _writer({"old.csv": "old"}), "db.duckdb", print)
    (tmp_path / ".out.staging-4242").mkdir()
    (tmp_path / ".out.staging-4242" / "deduped_documents.parquet").write_text("partial")
    (tmp_path / ".out.previous-4243").mkdir()
    messages = []
    publish(out, _writer({"new.csv": "new"}), "db.duckdb", messages.append)
    assert remains(out) == []
    assert messages == [f"removed what a killed run left beside {out}: .out.previous-4243, .out.staging-4242"]


def test_a_release_moved_aside_by_a_killed_switch_is_put_back_first(tmp_path):
    """Where the file system cannot exchange folders, a kill between the two renames leaves no
    output folder and the old release aside; the next run restores it before anything else."""
    out = tmp_path / "out"
    _fake_release(tmp_path / ".out.previous-77", {"old.csv": "old"})
    messages = []

    def looks(folder: Path) -> str:
        return (out / "old.csv").read_text()  # the old release is back while the new one is written

    assert publish(out, looks, "db.duckdb", messages.append) == "old"
    assert messages[0] == "put back the release .out.previous-77 that a killed run had moved aside"


@pytest.mark.parametrize("kept", KEPT_FOLDERS)  # the batch releases, the parameter sweep's files
def test_a_kept_folder_inside_a_release_survives_its_replacement_and_a_failed_switch(tmp_path, monkeypatch, kept):
    out = tmp_path / "out"
    _fake_release(out, {"old.csv": "old"})
    _fake_release(out / kept / "2026-11-01", {"clusters.csv": "batch"})
    publish(out, _writer({"new.csv": "new"}), "db.duckdb", print)
    assert (out / "new.csv").exists() and (out / kept / "2026-11-01" / "clusters.csv").read_text() == "batch"
    assert is_release(out) and verify_release(out) == []  # the kept folder is not part of the one-shot release

    def failed_link(output_dir: Path, release_id: str) -> None:
        # the new release is in the releases folder, linked to the kept folder; linking it fails
        assert (output_dir.with_name(".out.releases") / release_id / kept / "2026-11-01").is_dir()
        raise OSError(errno.EIO, os.strerror(errno.EIO), str(output_dir))

    monkeypatch.setattr(release_pointer, "point", failed_link)
    with pytest.raises(OSError):
        publish(out, _writer({"newer.csv": "newer"}), "db.duckdb", print)
    assert (out / "new.csv").exists() and not (out / "newer.csv").exists()
    assert (out / kept / "2026-11-01" / "clusters.csv").read_text() == "batch"
    assert remains(out) == []


def test_a_folder_that_is_not_a_release_is_never_replaced(tmp_path):
    out = tmp_path / "home"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(ReleaseError) as raised:
        publish(out, _writer({"new.csv": "new"}), "db.duckdb", print)
    assert str(raised.value) == (
        f"{out} exists and is not a dedup-assets release (its files are not exactly those its "
        "manifest.json lists). A release replaces the whole folder: move those files away, or set "
        "DEDUP_OUTPUT_DIR (output_dir) to a new or empty folder."
    )
    assert (out / "thesis.tex").read_text() == "years of work"


def test_a_second_writer_fails_at_once_naming_the_holder(tmp_path):
    out = tmp_path / "out"
    holder = {"pid": 31337, "host": "crawler-7", "started": 0, "database": "a.duckdb"}
    with release_lock(out, holder):
        with pytest.raises(ReleaseLocked) as raised:
            publish(out, _writer({"new.csv": "new"}), "b.duckdb", print)
    assert str(raised.value) == (
        f"Another run is writing a release to {out} (process 31337 on crawler-7, since "
        "1970-01-01 00:00:00 UTC, database a.duckdb). Wait for it to finish, or set DEDUP_OUTPUT_DIR "
        "(output_dir) to another folder."
    )
    assert not out.exists()
    publish(out, _writer({"new.csv": "new"}), "b.duckdb", print)  # free again once released


def test_errors_about_the_place_name_it_and_say_what_to_do():
    full = place_error(duckdb.IOException("Could not write file: No space left on device"), "/data/out")
    assert str(full) == (
        "Cannot write /data/out: no space is left on the device. Free space or fix the folder's "
        "permissions, or set DEDUP_OUTPUT_DIR (output_dir) to a writable folder, then run again."
    )
    read_only = place_error(OSError(errno.EROFS, "Read-only file system", "/mnt/ro/x.csv"), "/mnt/ro")
    assert str(read_only).startswith("Cannot write /mnt/ro/x.csv: the file system is read-only.")
    assert place_error(ValueError("not a place problem"), "/data/out") is None


def test_csv_cells_a_spreadsheet_would_run_are_quoted_and_others_kept():
    with duckdb.connect() as connection:
        relation = connection.sql(
            "select * from (values ('=cmd|'' /C calc''!A0', 1), ('+1', -2), ('-x', 3), ('@SUM(A1)', 4), "
            "(chr(9) || 'tab', 5), (chr(13) || 'cr', 6), ('plain = text', 7), (null, 8), "
            "('''already quoted', 9)) t(cell, n)"
        )
        rows = spreadsheet_safe(relation).fetchall()
    assert rows == [
        ("'=cmd|' /C calc'!A0", 1),
        ("'+1", -2),
        ("'-x", 3),
        ("'@SUM(A1)", 4),
        ("'\ttab", 5),
        ("'\rcr", 6),
        ("plain = text", 7),
        (None, 8),
        ("''already quoted", 9),  # so that stripping one leading quote always gives the value back
    ]


def _formula_corpus(folder: Path) -> Path:
    source = FIXTURE.read_text(encoding="utf-8").splitlines()
    header, first, *rest = source
    doc_id = first.split(",", 1)[0]
    path = folder / "formulas.csv"
    path.write_text("\n".join([header, first.replace(doc_id, "=HYPERLINK(1)", 1), *rest]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("release")
    run_library(str(_formula_corpus(folder)), str(folder / "db.duckdb"), str(folder / "out"))
    return folder / "out"


def test_a_release_lists_and_verifies_every_file_and_its_csvs_are_spreadsheet_safe(release):
    manifest = json.loads((release / MANIFEST_FILE).read_text())
    assert sorted(o["file"] for o in manifest["outputs"]) == sorted(set(sha256_of_files(release)) - {MANIFEST_FILE})
    assert verify_release(release) == []
    clusters = (release / "clusters.csv").read_text()
    assert "'=HYPERLINK(1)" in clusters and ",=HYPERLINK(1)" not in clusters
    deduped = pq.read_table(release / "deduped_documents").column("doc_id").to_pylist()
    assert "=HYPERLINK(1)" in deduped  # Parquet keeps the raw value


def _cli(*args: str, cwd: Path = PROJECT_ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dedup_assets.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_verify_release_passes_a_whole_release_and_names_every_difference(release, tmp_path):
    passed = _cli("verify-release", str(release))
    assert (passed.returncode, passed.stdout) == (0, f"{release}: every file matches manifest.json.\n")
    damaged = tmp_path / "damaged"
    subprocess.run(["cp", "-r", os.path.realpath(release), str(damaged)], check=True)  # the release, not the link
    manifest = json.loads((damaged / MANIFEST_FILE).read_text())
    clusters = next(o for o in manifest["outputs"] if o["file"] == "clusters.csv")
    with open(damaged / "clusters.csv", "a") as handle:
        handle.write("x\n")
    (damaged / "duplicate_pairs.csv").unlink()
    (damaged / "notes.txt").write_text("mine")
    failed = _cli("verify-release", str(damaged))
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines[0] == f"{damaged}: the release does not match its manifest.json:"
    # in the manifest's order, then the unlisted files
    assert lines[1] == "  duplicate_pairs.csv: missing"
    assert lines[2].startswith("  clusters.csv: sha256 is ") and lines[2].endswith(f"the manifest says {clusters['sha256']}")
    assert lines[3] == "  notes.txt: not listed in manifest.json"
    assert lines[4:] == [
        "A release is checked whole: write the release again (the same input and settings give the same files) "
        "or copy the whole folder again, and move away what its manifest.json does not list."
    ]
    missing = _cli("verify-release", str(tmp_path / "nowhere"))
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        f"Error: {tmp_path / 'nowhere'}: no such folder. Give the release folder (DEDUP_OUTPUT_DIR).",
    )


def _mounted_tmpfs(folder: Path, options: str) -> bool:
    folder.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True).returncode == 0


@pytest.mark.parametrize(
    "options, says",
    [("size=24k", "no space is left on the device"), ("size=1m,ro", "the file system is read-only")],
)
def test_a_full_or_read_only_output_disk_is_one_clear_error_and_leaves_no_partial_release(tmp_path, options, says):
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _mounted_tmpfs(disk, options):
        pytest.skip("mounting a tmpfs needs root and a system that permits it")
    try:
        with pytest.raises(ReleaseError) as raised:
            run_library(str(FIXTURE), str(tmp_path / "db.duckdb"), str(disk / "out"))
        assert str(raised.value).startswith(f"Cannot write {disk}") and says in str(raised.value)
        assert "DEDUP_OUTPUT_DIR" in str(raised.value)
        assert not any(path.name.startswith(".out.staging") for path in disk.iterdir())
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_lock_is_released_when_its_holder_dies(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys,time; from pathlib import Path; from dedup_assets.core.release.publish import release_lock\n"
         f"with release_lock(Path({str(out)!r}), {{'pid': 1}}):\n print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True, cwd=PROJECT_ROOT,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with open(tmp_path / ".out.lock") as handle, pytest.raises(BlockingIOError):
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        holder.kill()
        holder.wait()
    publish(out, _writer({"new.csv": "new"}), "db.duckdb", print)
    assert (out / "new.csv").exists()


def test_the_remains_of_another_folder_are_left_alone(tmp_path):
    """Folder names are matched literally: ``out[1]`` is not a pattern matching ``out1``."""
    (tmp_path / ".out1.staging-77").mkdir()
    (tmp_path / ".out[1].staging-78").mkdir()
    assert remains(tmp_path / "out[1]") == [tmp_path / ".out[1].staging-78"]
    publish(tmp_path / "out[1]", _writer({"new.csv": "new"}), "db.duckdb", print)
    assert (tmp_path / ".out1.staging-77").is_dir()


def test_an_output_folder_given_as_a_link_is_replaced_where_it_points(tmp_path):
    real = tmp_path / "releases" / "current"
    _fake_release(real, {"old.csv": "old"})
    link = tmp_path / "out"
    link.symlink_to(real)
    publish(link, _writer({"new.csv": "new"}), "db.duckdb", print)
    assert link.is_symlink() and sorted(p.name for p in link.iterdir()) == [MANIFEST_FILE, "new.csv"]
    assert remains(real) == [] and not list(tmp_path.glob(".out.*"))
    with release_lock(real, {"pid": 1}), pytest.raises(ReleaseLocked):
        publish(link, _writer({"new.csv": "new"}), "db.duckdb", print)  # one folder, one lock


def test_a_release_of_ours_given_as_the_output_folder_stands_for_the_link_to_it(tmp_path):
    """A caller that resolved the output folder's path (the environment's paths are resolved)
    names its current release: the next release is linked as the output folder, not nested."""
    out = tmp_path / "out"
    publish(out, _writer({"old.csv": "old"}), "db.duckdb", print)
    publish(Path(os.path.realpath(out)), _writer({"new.csv": "new"}), "db.duckdb", print)
    assert (out / "new.csv").exists() and verify_release(out) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == [".out.lock", ".out.releases", "out"]
    assert _releases(out) == release_ids(out) and len(release_ids(out)) == 2


def test_an_output_that_is_a_file_is_one_clear_error(tmp_path):
    out = tmp_path / "out"
    out.write_text("not a folder")
    with pytest.raises(ReleaseError, match=f"^{out} is a file, not a folder. Set DEDUP_OUTPUT_DIR"):
        publish(out, _writer({"new.csv": "new"}), "db.duckdb", print)


def test_an_output_folder_that_is_a_mount_point_is_refused_with_a_subfolder_to_use(tmp_path):
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _mounted_tmpfs(disk, "size=1m"):
        pytest.skip("mounting a tmpfs needs root and a system that permits it")
    try:
        with pytest.raises(ReleaseError) as raised:
            publish(disk, _writer({"new.csv": "new"}), "db.duckdb", print)
        assert str(raised.value) == (
            f"{disk} is a mount point, which cannot be swapped with the new release written beside it. "
            f"Set DEDUP_OUTPUT_DIR (output_dir) to a folder inside it, e.g. {disk / 'release'}."
        )
        publish(disk / "release", _writer({"new.csv": "new"}), "db.duckdb", print)
    finally:
        subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.parametrize(
    "manifest",
    [
        "{not json",
        '{"product": "dedup-assets", "outputs": "x"}',
        '{"product": "dedup-assets", "outputs": [{"file": "a.csv"}]}',
    ],
)
def test_a_damaged_manifest_is_reported_not_a_traceback(tmp_path, manifest):
    (tmp_path / MANIFEST_FILE).write_text(manifest)
    assert verify_release(tmp_path) == [
        f"{tmp_path}: no readable dedup-assets manifest.json (missing, damaged, or not ours); "
        "this is not a whole release."
    ]
    with pytest.raises(ReleaseError, match="is not a dedup-assets release"):
        publish(tmp_path, _writer({"new.csv": "new"}), "db.duckdb", print)


def test_a_csv_cell_over_duckdbs_line_limit_is_counted(tmp_path):
    """cluster_inspection lists a cluster's members in one cell: megabytes for a large cluster."""
    (tmp_path / "wide.csv").write_text('a,b\n1,"' + "member " * 500_000 + '"\n2,z\n')
    outputs = [{"file": "wide.csv", "rows": 2, "sha256": file_sha256(tmp_path / "wide.csv")}]
    (tmp_path / MANIFEST_FILE).write_text(json.dumps({"product": "dedup-assets", "outputs": outputs}))
    assert verify_release(tmp_path) == []


@pytest.mark.parametrize(
    "release_signatures, documents_up_to, released",
    [(None, 100_000, True), (None, 24, True), (None, 23, False), (False, 100_000, False), (True, 23, True)],
)
def test_the_signatures_leave_the_release_when_asked_or_above_the_document_limit(
    tmp_path, monkeypatch, release_signatures, documents_up_to, released
):
    # the fixture's 24 documents against the automatic limit, moved below them to stand for a large corpus
    monkeypatch.setattr("dedup_assets.core.settings.model.SIGNATURES_RELEASED_UP_TO", documents_up_to)
    settings = Settings(num_perm=64, release_signatures=release_signatures)
    run_library(str(FIXTURE), str(tmp_path / "db.duckdb"), str(tmp_path / "out"), settings)
    columns = pq.read_schema(tmp_path / "out" / "fingerprinted.parquet").names
    assert ("signature" in columns) == released
    assert {"doc_id", "content_hash", "lsh_bands"} <= set(columns)  # the rest of the table stays
    manifest = json.loads((tmp_path / "out" / MANIFEST_FILE).read_text())
    assert manifest["derived_settings"]["release_signatures"] is released
    assert manifest["settings"]["release_signatures"] == release_signatures
    assert verify_release(tmp_path / "out") == []
    with duckdb.connect(str(tmp_path / "db.duckdb"), read_only=True) as connection:
        assert connection.execute("select count(signature) from dedup.fingerprinted").fetchall() == [(24,)]


def _codecs(path: Path) -> dict[str, set[str]]:
    """Each top-level column's codecs over a Parquet file's row groups."""
    metadata = pq.ParquetFile(path).metadata
    codecs: dict[str, set[str]] = {}
    for group in range(metadata.num_row_groups):
        for index in range(metadata.num_columns):
            chunk = metadata.row_group(group).column(index)
            codecs.setdefault(chunk.path_in_schema.split(".")[0], set()).add(chunk.compression)
    return codecs


def test_release_compression_is_the_codec_of_every_parquet_file_and_changes_no_row(tmp_path):
    released = {}
    for compression, codec in (("snappy", "SNAPPY"), ("zstd", "ZSTD"), ("none", "UNCOMPRESSED")):
        out = tmp_path / compression
        run_library(str(FIXTURE), str(tmp_path / f"{compression}.duckdb"), str(out), Settings(release_compression=compression))
        assert verify_release(out) == []
        assert json.loads((out / MANIFEST_FILE).read_text())["settings"]["release_compression"] == compression
        files = sorted(out.rglob("*.parquet"))
        assert {path.name for path in files} >= {"fingerprinted.parquet", "scored_pairs.parquet", "part-00000.parquet"}
        for path in files:
            # the hash columns are random bits, left uncompressed whatever the setting
            hashes = hash_columns(pq.read_schema(path))
            expected = {name: {"UNCOMPRESSED" if name in hashes else codec} for name in pq.read_schema(path).names}
            assert _codecs(path) == expected, path
        released[compression] = {path.relative_to(out): pq.read_table(path) for path in files}
    assert released["zstd"] == released["snappy"] == released["none"]


@pytest.mark.parametrize("compression, codec", [("zstd", "ZSTD"), ("none", "UNCOMPRESSED")])
def test_nested_columns_take_the_codec_and_hash_lists_none(tmp_path, compression, codec):
    """An input's extra column may be a list: each of its leaves takes the release's codec, and
    only the hash columns (lists of them too) stay uncompressed."""
    rows = pa.table(
        {
            "doc_id": ["a", "b"],
            "tags": pa.array([["x", "y"], ["z"]]),
            "lsh_bands": pa.FixedSizeListArray.from_arrays(pa.array([1, 2, 3, 4], pa.uint64()), 2),
        }
    )
    with duckdb.connect() as connection:
        write_parquet(connection.sql("select * from rows"), tmp_path / "nested.parquet", compression)
    assert _codecs(tmp_path / "nested.parquet") == {"doc_id": {codec}, "tags": {codec}, "lsh_bands": {"UNCOMPRESSED"}}
    assert pq.read_table(tmp_path / "nested.parquet").equals(rows)


def test_an_unknown_release_compression_is_refused_naming_the_choices():
    with pytest.raises(SettingsError, match="release_compression must be one of zstd, snappy, none, got 'lz4'"):
        Settings(release_compression="lz4")


def test_an_output_folder_a_release_cannot_replace_is_refused_naming_why(tmp_path):
    """The root, a system folder, the home folder, a file, or a folder of other files."""
    other = tmp_path / "thesis"
    other.mkdir()
    (other / "thesis.tex").write_text("years of work")
    (tmp_path / "notes.txt").write_text("notes")
    home = Path.home().resolve()
    fix = f"Set DEDUP_OUTPUT_DIR (output_dir) to a folder of the release's own, e.g. {home / 'dedup-release'}."
    cases = {
        Path("/"): f"/ is the root folder, and a release replaces its whole folder. {fix}",
        Path("/usr"): f"/usr is a system folder, and a release replaces its whole folder. {fix}",
        home: f"{home} is your home folder, and a release replaces its whole folder. {fix}",
        tmp_path / "notes.txt": f"{tmp_path / 'notes.txt'} is a file, not a folder. Set DEDUP_OUTPUT_DIR (output_dir) to a folder.",
        other: f"{other} exists and is not a dedup-assets release",
    }
    for output, message in cases.items():
        with pytest.raises(ReleaseError) as raised:
            check_output_folder(output)
        assert str(raised.value).startswith(message)
    check_output_folder(tmp_path / "new" / "release")  # a folder to be made: nothing to refuse
    assert (other / "thesis.tex").read_text() == "years of work"


def test_an_unusable_output_folder_is_refused_when_the_run_starts_before_any_step(tmp_path):
    """Through dedup run: said before any step runs (no database is made), not after every step."""
    database = tmp_path / "never.duckdb"
    env = {**os.environ, "DAGSTER_HOME": "", "DEDUP_INPUT": str(FIXTURE), "DEDUP_DATABASE": str(database), "DEDUP_OUTPUT_DIR": "/"}
    result = run_command([str(Path(sys.executable).with_name("dedup")), "run"], env)
    assert result.returncode == 1, result.stderr[-2000:]
    assert result.stderr.splitlines()[-1].startswith("Error: / is the root folder, and a release replaces its whole folder.")
    assert "documents (" not in result.stderr and not database.exists()


def test_the_newest_releases_are_kept_and_older_ones_removed_as_the_setting_says(tmp_path):
    out = tmp_path / "out"
    published = []
    for index in range(5):
        publish(out, _writer({f"{index}.csv": str(index)}), "db.duckdb", print)
        published.append(Path(os.readlink(out)).name)
    # by default the newest three, the current one among them; IDs sort in the order published
    assert sorted(published) == published and release_ids(out) == published[-3:]
    assert all(verify_release(tmp_path / ".out.releases" / name) == [] for name in published[-3:])
    publish(out, _writer({"5.csv": "5"}), "db.duckdb", print, keep=5)
    assert len(release_ids(out)) == 4 and remains(out) == []
    # the setting, through a real run: only the release it links to is left
    run_library(str(FIXTURE), str(tmp_path / "db.duckdb"), str(out), Settings(releases_kept=1))
    assert release_ids(out) == [Path(os.readlink(out)).name] and verify_release(out) == []
    assert Settings().releases_kept == 3
    with pytest.raises(SettingsError, match="releases_kept must be at least 1, got 0"):
        Settings(releases_kept=0)


def test_what_a_killed_run_left_among_the_releases_is_removed_and_reported(tmp_path):
    out = tmp_path / "out"
    publish(out, _writer({"old.csv": "old"}), "db.duckdb", print)
    current = os.readlink(out)
    releases = tmp_path / ".out.releases"
    _fake_release(releases / "000009-20261206T000000Z", {"never.csv": "linked"})  # written, never linked
    _fake_release(releases / ".removing-000000-20261205T000000Z", {"half.csv": "removed"})
    (releases / "000005-20261206T000000Z").symlink_to("elsewhere")  # a conversion's link, never exchanged
    (tmp_path / ".out.pointer-4242").symlink_to(current)  # a new link, never renamed into place
    (tmp_path / ".out.staging-4243").mkdir()
    messages = []
    publish(out, _writer({"new.csv": "new"}), "db.duckdb", messages.append)
    assert messages == [
        f"removed what a killed run left beside {out}: .out.pointer-4242, "
        ".out.releases/.removing-000000-20261205T000000Z, .out.releases/000005-20261206T000000Z, "
        ".out.releases/000009-20261206T000000Z, .out.staging-4243"
    ]
    assert remains(out) == [] and release_ids(out) == [Path(current).name, Path(os.readlink(out)).name]
    assert verify_release(out) == [] and (out / "new.csv").exists()


def test_a_release_left_without_its_link_is_linked_again_first(tmp_path):
    """Where the file system cannot exchange, a conversion is two renames; a kill between them
    leaves the release in the releases folder and no link."""
    out = tmp_path / "out"
    publish(out, _writer({"old.csv": "old"}), "db.duckdb", print)
    current = os.readlink(out)
    out.unlink()
    messages = []

    def looks(folder: Path) -> str:
        return (out / "old.csv").read_text()  # the release is linked again while the new one is written

    assert publish(out, looks, "db.duckdb", messages.append) == "old"
    assert messages == [f"linked {out} to the newest release, {current}, as a killed run had left no link"]


def test_an_older_versions_release_folder_becomes_the_first_release_with_no_reader_missing_it(tmp_path):
    """A folder holding the release, its batches and its sweep, as an older version left it, is
    moved into the releases folder by one exchange with the link, and its kept folders become
    the shared ones the same way: a reader of out and of out/batches finds them throughout."""
    stop, problems, reads = threading.Event(), [], []

    def read(out: Path) -> None:
        while not stop.is_set():
            try:
                problems.extend(verify_release(out))
                if (out / "batches" / "k" / "clusters.csv").read_text() != "batch":
                    problems.append("another batch")
                reads.append(out)
            except OSError as error:
                problems.append(str(error))

    def _writer_of_link(out: Path):
        def write(folder: Path) -> str:
            # a read of the old folder by its path, begun before it became a link, ends first: it
            # could not have resolved the release it reads
            done = len(reads)
            while len(reads) < done + 2:
                time.sleep(0)
            _fake_release(folder, {"new.csv": "new"})
            return os.readlink(out)  # the link the older version's folder became

        return write

    for attempt in range(5):
        out = tmp_path / str(attempt) / "out"
        _fake_release(out, {"old.csv": "old"})
        _fake_release(out / "batches" / "k", {"clusters.csv": "batch"})
        _fake_release(out / "tuning", {"sweep.csv": "a,b"})
        stop.clear()
        reader = threading.Thread(target=read, args=(out,))
        reader.start()
        messages = []
        try:
            while not reads or reads[-1] != out:  # the reader is reading this folder
                pass
            first = publish(out, _writer_of_link(out), "db.duckdb", messages.append)
        finally:
            stop.set()
            reader.join()
        assert problems == []
        releases = out.with_name(".out.releases")
        assert messages == [f"moved the release in {out} to {first}, which out now links to: each release has a folder of its own there"]
        assert (releases / Path(first).name / "old.csv").read_text() == "old"  # the old release, kept
        assert os.readlink(releases / Path(first).name / "batches") == "../batches"
        assert (out / "batches" / "k" / "clusters.csv").read_text() == "batch" and (out / "tuning" / "sweep.csv").is_file()
        assert sorted(path.name for path in releases.iterdir()) == sorted(["batches", "tuning", *release_ids(out)])
        assert verify_release(out) == [] and remains(out) == []


def _cluster_that(monkeypatch, write) -> None:
    """Every run's DuckDB engine given a cluster whose call to write the large files is ``write``
    (output folder, queries -> outputs by name), as an engine that writes them elsewhere has."""
    from dedup_assets.core.pipeline.engines import DuckDBEngine

    monkeypatch.setattr(
        DuckDBEngine, "release_files", lambda self, connection, queries, output_dir, compression, log: lambda: write(output_dir, queries)
    )


@pytest.mark.parametrize("cluster", ["failed", "wrote_elsewhere"])
def test_large_files_the_cluster_did_not_write_here_are_written_here(tmp_path, monkeypatch, cluster):
    """A cluster that fails, or whose workers wrote into another folder at the output's path (and
    left half a file in this one), costs the release time, not the release: the Dagster node
    writes those files, the bytes a run without a cluster writes, and the log says why."""
    run_library(str(FIXTURE), str(tmp_path / "plain.duckdb"), str(tmp_path / "plain"))

    def write(output_dir: Path, queries: dict[str, str]) -> dict:
        if cluster == "failed":
            raise RuntimeError("node 10.0.0.7 was lost")
        (output_dir / "fingerprinted.parquet").write_bytes(b"half a file")
        return {name: [{"file": f"{name}/part-00000.parquet", "rows": 1, "sha256": "0" * 64}] for name in queries}

    _cluster_that(monkeypatch, write)
    lines: list[str] = []
    run_library(str(FIXTURE), str(tmp_path / "run.duckdb"), str(tmp_path / "out"), log=lines.append)
    assert verify_release(tmp_path / "out") == []
    assert sha256_of_files(tmp_path / "out") == sha256_of_files(tmp_path / "plain")
    if cluster == "failed":
        assert (
            "manifest: the cluster's workers failed to write deduped_documents, fingerprinted.parquet "
            "(node 10.0.0.7 was lost); writing them on this node."
        ) in lines
    else:
        said = [line for line in lines if "this node does not find" in line]
        assert len(said) == 2 and "set output_dir (DEDUP_OUTPUT_DIR) to a path every node sees" in said[0], lines
