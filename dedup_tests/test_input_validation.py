"""Inputs that looked fine but were read wrong: symlink loops, columns named like the pipeline's,
crawled_at values that parsed differently by batch, and paths that cannot be read."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.read import (
    InputError,
    InputPolicy,
    InputStats,
    READERS,
    document_batches,
    read_documents,
)
from dedup_assets.core.read.files import input_files

from .conftest import PROJECT_ROOT, document, write_csv


def _error_for(path: Path, **policy) -> str:
    with pytest.raises(InputError) as raised:
        read_documents(path, policy=InputPolicy(**policy))
    return str(raised.value)


def _read(source: Path, batch_size: int = 100, **policy) -> tuple[pa.Table, InputStats]:
    stats = InputStats()
    batches = list(document_batches(source, stats, batch_size, InputPolicy(**policy)))
    return pa.Table.from_batches(batches), stats


# --- files reached more than once -------------------------------------------------------------


def _looped_folder(tmp_path: Path) -> Path:
    """data/ with a.csv and sub/b.csv, and a link from sub/ back up to data/."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    write_csv(data / "a.csv", [document("a1", "alpha"), document("a2", "beta")])
    write_csv(data / "sub" / "b.csv", [document("b1", "gamma")])
    (data / "sub" / "up").symlink_to("..")
    return data


@pytest.mark.parametrize("source", ["data", "data/**/*.csv", "data/**"])
def test_a_symlink_loop_reads_each_file_once(tmp_path, source):
    data = _looped_folder(tmp_path)
    table, stats = _read(tmp_path / source)
    assert table.column("doc_id").to_pylist() == ["a1", "a2", "b1"]
    assert stats.rejected == []
    files = sorted(set(table.column("source_file").to_pylist()))
    assert files == [str(data / "a.csv"), str(data / "sub" / "b.csv")]


def test_two_symlink_loops_end_quickly(tmp_path):
    """Python's glob follows loops until the path is too long: hours for a few links (so this
    runs in a process of its own that a timeout can kill)."""
    data = _looped_folder(tmp_path)
    (data / "self").symlink_to(".")
    (data / "sub" / "top").symlink_to("..")
    script = (
        "import sys; from pathlib import Path; from dedup_assets.core.read.files import input_files; "
        "print('\\n'.join(map(str, input_files(Path(sys.argv[1])))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", script, str(data / "**" / "*.csv")],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    assert found.stdout.split() == [str(data / "a.csv"), str(data / "sub" / "b.csv")]


def test_a_file_reached_by_two_paths_is_read_once_under_the_first(tmp_path):
    data = tmp_path / "data"
    (data / "keep").mkdir(parents=True)
    write_csv(data / "keep" / "k.csv", [document("k1", "kappa")])
    (data / "alias").symlink_to("keep")  # sorts first, so it names the file
    (data / "z.csv").symlink_to(data / "keep" / "k.csv")
    os.link(data / "keep" / "k.csv", data / "hard.csv")
    assert input_files(data) == [data / "alias" / "k.csv"]
    table, stats = _read(data)
    assert table.column("source_file").to_pylist() == [str(data / "alias" / "k.csv")] and stats.rejected == []
    # a folder reached under another name still matches a pattern by the name it asks for
    assert input_files(data / "**" / "keep" / "*.csv") == [data / "keep" / "k.csv"]


# --- columns named like the pipeline's ------------------------------------------------------------


def _write(path: Path, rows: list[dict]) -> Path:
    frame = pd.DataFrame(rows)
    frame.to_csv(path, index=False) if path.suffix == ".csv" else frame.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_input_columns_named_like_the_pipelines_are_refused_before_reading(tmp_path, suffix):
    rows = [document("a", "x", source_file="theirs.csv", cluster_id="c-9", cluster_size=7)]
    path = _write(tmp_path / f"in{suffix}", rows)
    stats = InputStats()
    with pytest.raises(InputError) as raised:
        next(document_batches(path, stats, 100, InputPolicy()))
    message = str(raised.value)
    assert message.startswith(f"{path}: the input has column(s) source_file, cluster_id, cluster_size, ")
    fields = {"input_source_file": "source_file", "input_cluster_id": "cluster_id", "input_cluster_size": "cluster_size"}
    assert raised.value.fix == {"fields": fields}
    assert stats.rows == 0
    # renamed as the fix says, they are kept as the input's own, beside ours
    table = read_documents(path, policy=InputPolicy(fields=fields))
    assert table.column("input_cluster_id").to_pylist() == ["c-9"]
    assert table.column("input_source_file").to_pylist() == ["theirs.csv"]
    assert table.column("source_file").to_pylist() == [str(path)]


def test_the_pipelines_own_release_fed_back_is_refused_with_the_mapping_to_use(tmp_path):
    # a part of deduped_documents/: the input's columns, then the ones the pipeline added
    release = tmp_path / "deduped_documents.parquet"
    added = dict(replaced_characters=0, source_file="in.csv", input_row=42, cluster_id="cluster-a", cluster_size=3)
    _write(release, [document("a", "x", **added)])
    with pytest.raises(InputError) as raised:
        read_documents(release, policy=InputPolicy())
    assert "has column(s) replaced_characters, source_file, input_row, cluster_id, cluster_size" in str(raised.value)
    suggested = raised.value.fix["fields"]
    assert suggested == {
        "input_replaced_characters": "replaced_characters",
        "input_source_file": "source_file",
        "input_input_row": "input_row",
        "input_cluster_id": "cluster_id",
        "input_cluster_size": "cluster_size",
    }
    table = read_documents(release, policy=InputPolicy(fields=suggested))
    assert table.column("input_row").to_pylist() == [1] and table.column("input_input_row").to_pylist() == [42]
    assert table.column("input_cluster_size").to_pylist() == [3]
    assert "cluster_size" not in table.column_names


def test_reserved_names_are_compared_without_case_and_cannot_be_mapped_onto(tmp_path):
    path = _write(tmp_path / "in.parquet", [document("a", "x", Cluster_Size=2, lang="en")])
    assert "has column(s) Cluster_Size, named like the columns the pipeline adds" in _error_for(path)
    assert "fields maps cluster_id, which the pipeline fills itself" in _error_for(path, fields={"cluster_id": "lang"})


def test_a_column_name_the_file_repeats_is_refused(tmp_path):
    table = pa.table(
        [pa.array([value]) for value in [*document("a", "x").values(), "y"]], names=[*document("a", "x"), "Body"]
    )
    repeated = tmp_path / "repeated.parquet"
    pq.write_table(table, repeated)
    message = _error_for(repeated)
    assert f"{repeated}: more than one column is named Body, body (names are compared without case)" in message
    # or once fields renames one
    lower = _write(tmp_path / "lower.csv", [{**document("a", "x"), "LANG": "en", "language": "en"}])
    message = _error_for(lower, fields={"lang": "language"})
    assert "more than one column is named LANG, lang (fields renames language to it)" in message


def test_the_columns_a_reader_appends_are_the_ones_documents_expects(tmp_path):
    """documents.py tells a file's own columns from those its reader appends by this list."""
    csv_path = write_csv(tmp_path / "in.csv", [document("a", "x", lang="en")])
    parquet_path = _write(tmp_path / "in.parquet", [document("a", "x", lang="en")])
    own = list(document("a", "x", lang="en"))
    for reader, path in ((READERS["csv"], csv_path), (READERS["parquet"], parquet_path)):
        assert reader.columns_from_file
        assert reader.schema(path).names == own + list(reader.appended_columns)


# --- crawled_at ---------------------------------------------------------------------------------------

_STAMPS = {
    "plain": ("2026-01-31", "2026-01-31 00:00:00"),
    "micro": ("2026-01-31T12:00:00.123456", "2026-01-31 12:00:00.123456"),
    "offset": ("2026-01-31T12:00:00.123456+02:00", "2026-01-31 10:00:00.123456"),
    "zulu": ("2026-01-31T23:59:59.5Z", "2026-01-31 23:59:59.500000"),
    "nanos": ("2026-01-31T12:00:00.123456789-01:30", "2026-01-31 13:30:00.123456"),
    "space": ("2026-01-31 08:15:00", "2026-01-31 08:15:00"),
    "leap": ("2024-02-29T06:00:00Z", "2024-02-29 06:00:00"),
}
_IMPOSSIBLE = {
    "feb30": "2026-02-30", "month13": "2026-13-01", "hour25": "2026-01-01T25:00:00", "feb29": "2026-02-29T00:00:00Z"
}


def _stamp_rows() -> list[dict]:
    values = [(name, value) for name, (value, _) in _STAMPS.items()] + list(_IMPOSSIBLE.items())
    return [document(f"{name}-{copy}", "x", crawled_at=value) for copy in range(3) for name, value in values]


def test_impossible_dates_are_rejected_and_good_ones_keep_their_microseconds(tmp_path):
    table, stats = _read(write_csv(tmp_path / "in.csv", _stamp_rows()))
    parsed = dict(zip(table.column("doc_id").to_pylist(), map(str, table.column("crawled_at").to_pylist())))
    for name, (_, expected) in _STAMPS.items():
        assert parsed[f"{name}-0"] == expected, name
    assert sorted(r["doc_id"] for r in stats.rejected if r["reason"] == "invalid_crawled_at") == sorted(
        f"{name}-{copy}" for name in _IMPOSSIBLE for copy in range(3)
    )


@pytest.mark.parametrize("name", ["in.parquet", "in.jsonl"])
def test_crawled_at_does_not_depend_on_the_batch_size(tmp_path, name):
    path = tmp_path / name
    if name.endswith(".parquet"):
        _write(path, _stamp_rows())
    else:
        path.write_text("".join(
            json.dumps({"id": row["doc_id"], "text": row["body"], "timestamp": row["crawled_at"]}) + "\n"
            for row in _stamp_rows()
        ))
    one, one_stats = _read(path, batch_size=1)
    whole, whole_stats = _read(path, batch_size=4096)
    assert one.column("crawled_at").to_pylist() == whole.column("crawled_at").to_pylist()
    assert one.column("doc_id").to_pylist() == whole.column("doc_id").to_pylist()
    assert one_stats.rejected == whole_stats.rejected


def test_parquet_nanosecond_timestamps_are_cut_to_microseconds(tmp_path):
    path = tmp_path / "ns.parquet"
    columns = {name: [value] for name, value in document("a", "x").items()}
    # 2026-01-31 12:00 UTC and 123456789 nanoseconds
    columns["crawled_at"] = pa.array([1_769_860_800_123_456_789], pa.timestamp("ns", tz="UTC"))
    pq.write_table(pa.table(columns), path)
    assert str(read_documents(path).column("crawled_at")[0]) == "2026-01-31 12:00:00.123456"


# --- paths that do not exist, are not UTF-8, or cannot be read --------------------------------------


def test_a_missing_folder_says_it_does_not_exist(tmp_path):
    for missing in (tmp_path / "nowhere" / "dir", tmp_path / "export"):
        message = _error_for(missing)
        assert message == f"{missing}: no such file or folder. Set input_path (in dedup.yaml or the launchpad), dedup run --input, or DEDUP_INPUT to an input file, folder or glob."


@pytest.mark.parametrize(
    "name, bom, codec, encoding",
    [
        ("in.csv", b"\xff\xfe", "utf-16-le", "UTF-16"),
        ("in.csv", b"\xfe\xff", "utf-16-be", "UTF-16"),
        ("dump.jsonl", b"\xff\xfe", "utf-16-le", "UTF-16"),
        ("dump.jsonl", b"\xff\xfe\x00\x00", "utf-32-le", "UTF-32"),
        ("dump.jsonl", b"\x00\x00\xfe\xff", "utf-32-be", "UTF-32"),
    ],
)
def test_a_utf16_or_utf32_text_file_is_refused_with_how_to_re_encode(tmp_path, name, bom, codec, encoding):
    path = tmp_path / name
    text = "doc_id,source,domain,crawled_at,title,body\na,s,d,2026-01-01,t,x\n"
    path.write_bytes(bom + text.encode(codec))
    stem, suffix = name.split(".")
    assert _error_for(path) == (
        f"{path}: the file is {encoding} encoded (it starts with a {encoding} byte-order mark). "
        f"Re-encode it as UTF-8, e.g. iconv -f {encoding} -t UTF-8 {path} > {stem}.utf8.{suffix}"
    )


def test_the_unreadable_message_names_the_path_and_what_to_do(tmp_path):
    from dedup_assets.core.read.files import unreadable

    message = str(unreadable(tmp_path / "my input.csv"))
    assert message == (
        f"{tmp_path / 'my input.csv'}: permission denied: cannot be opened for reading. Give the user "
        "that runs the pipeline read access to it and the folders it is in, e.g. chmod -R a+rX "
        f"'{tmp_path / 'my input.csv'}', or leave it out of the input."
    )


def test_a_file_or_folder_that_cannot_be_opened_says_permission_denied(tmp_path, monkeypatch):
    """Runs as root too: the refusal is simulated where the file and folder are opened."""
    path = write_csv(tmp_path / "in.csv", [document("a", "x")])
    opened = Path.open

    def refuse(self, *args, **kwargs):
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return opened(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refuse)
    assert _error_for(path).startswith(f"{path}: permission denied: cannot be opened for reading")
    monkeypatch.undo()
    scandir = os.scandir

    def refuse_folder(folder):
        if Path(folder) == tmp_path:
            raise PermissionError(13, "Permission denied", str(folder))
        return scandir(folder)

    monkeypatch.setattr(os, "scandir", refuse_folder)
    assert _error_for(tmp_path).startswith(f"{tmp_path}: permission denied: cannot be opened for reading")


_PERMISSION_SCENARIO = """
import sys
from pathlib import Path
from dedup_assets.core.read import InputError, read_documents

def error_for(path):
    try:
        read_documents(path)
    except InputError as error:
        return str(error)
    return "no error"

data = Path(sys.argv[1])
path = data / "in.csv"
path.chmod(0)
print(error_for(path))
print(error_for(data))
path.chmod(0o644)
data.chmod(0)
print(error_for(data))
print(error_for(path))
data.chmod(0o755)
"""


def test_chmod_000_file_and_folder_say_permission_denied(tmp_path):
    """Run where permissions bind: root reads past file modes, so as root the scenario runs
    without the capabilities that let it (see _permission_scenario)."""
    (tmp_path / "data").mkdir()
    path = write_csv(tmp_path / "data" / "in.csv", [document("a", "x")])
    result = _permission_scenario(tmp_path / "data")
    assert result.returncode == 0, result.stderr
    file_denied, folder_file_denied, folder_denied, under_folder_denied = result.stdout.splitlines()
    assert file_denied.startswith(f"{path}: permission denied")
    assert folder_file_denied.startswith(f"{path}: permission denied")
    assert folder_denied.startswith(f"{path.parent}: permission denied")
    assert under_folder_denied.startswith(f"{path}: permission denied")


def _permission_scenario(data: Path) -> subprocess.CompletedProcess:
    """As root, without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: taken from the inheritable and
    bounding sets, which an exec'ed root process gets its capabilities from. It stays the user
    that owns the checkout and pytest's folders, so it imports the code wherever the checkout
    lives (another user, such as nobody, cannot reach one under a 0700 folder), and a mode of 000
    denies it as it denies any user."""
    command = [sys.executable, "-c", _PERMISSION_SCENARIO, str(data)]
    if os.geteuid() == 0:
        dropped = "-dac_override,-dac_read_search"
        command = ["setpriv", f"--inh-caps={dropped}", f"--bounding-set={dropped}", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=data.parent)

