"""Hostile input: a record that cannot be read stops only itself, in time and memory bounded by
the limits, and nothing read is altered without being counted or refused by name."""

import gzip
import json
import logging
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dagster import DagsterInstance

from dedup_assets.core.read import InputError, InputPolicy, InputStats, count_input_records, document_batches

from .conftest import PROJECT_ROOT, document, write_csv

HEADER = "doc_id,source,domain,crawled_at,title,body\n"


def _read(path, batch_size=100, **policy):
    stats = InputStats()
    batches = list(document_batches(path, stats, batch_size, InputPolicy(**policy)))
    table = pa.Table.from_batches(batches) if batches else None
    return table, stats


def _line(doc_id, text, **extra) -> str:
    return json.dumps({"id": doc_id, "text": text, "timestamp": "2026-02-01", **extra})


def _reasons(stats) -> list[tuple[int, str]]:
    return [(reject["input_row"], reject["reason"]) for reject in stats.rejected]


def test_a_line_with_a_lone_surrogate_is_one_decode_error_and_the_others_are_read(tmp_path):
    path = tmp_path / "dump.jsonl"
    lines = [_line("a", "first"), _line("b", "bad \ud800 text"), _line("c", "a pair \U0001f600 is fine")]
    assert "\\ud800" in lines[1]  # json.dumps escapes it: the file itself is valid UTF-8
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    table, stats = _read(path)
    assert table.column("doc_id").to_pylist() == ["a", "c"]
    assert table.column("body").to_pylist()[1] == "a pair \U0001f600 is fine"
    assert _reasons(stats) == [(2, "decode_error")]
    assert stats.rejected[0]["detail"].startswith("line 2: ")
    assert "surrogate" in stats.rejected[0]["detail"]


# Reads a JSONL file in a process of its own, so its peak memory is the reading's alone: VmHWM,
# the peak of this process's own memory, since ru_maxrss starts at the parent's (a test worker that
# ran large tests before), over its memory once the imports are done.
_MEASURE = """
import json, re, sys
from pathlib import Path
from dedup_assets.core.read import InputStats, count_input_records, document_batches
def mib(figure):
    return int(re.search(figure + r":\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) / 1024
imported, path, stats = mib("VmRSS"), Path(sys.argv[1]), InputStats()
ids = [i for batch in document_batches(path, stats, 100) for i in batch.column("doc_id").to_pylist()]
print(json.dumps({
    "ids": ids,
    "rejected": [[r["input_row"], r["reason"], r["detail"]] for r in stats.rejected],
    "count": count_input_records(path),
    "reading_mib": mib("VmHWM") - imported,
}))
"""


def test_a_half_gigabyte_line_in_a_small_jsonl_gz_is_too_large_in_bounded_memory(tmp_path):
    """A line far above what a body within max_body_bytes needs is skipped to its newline, not
    gathered: the run's memory follows the limit, not the line (nor the compression ratio)."""
    path = tmp_path / "bomb.jsonl.gz"
    piece = "all work and no play " * 50_000  # ~1 MB
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as handle:
        handle.write(_line("before", "a normal line") + "\n")
        handle.write('{"id": "huge", "timestamp": "2026-02-01", "text": "')
        for _ in range(512):
            handle.write(piece)
        handle.write('"}\n' + _line("after", "another normal line") + "\n")
    assert path.stat().st_size < 20 << 20
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path)], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    # the reading holds some 90 MB beyond its imports, whatever the machine: far less than the
    # 537 MB line, which gathering it took several times over (and minutes: the subprocess's
    # timeout is only against a hang)
    assert found["reading_mib"] < 537 / 2, found
    assert found["ids"] == ["before", "after"]
    assert [reject[:2] for reject in found["rejected"]] == [[2, "too_large"]]
    assert found["rejected"][0][2].startswith("line 2 has 537,")
    assert found["count"] == 3


def test_a_plain_jsonl_line_above_the_limit_is_skipped_to_its_newline(tmp_path):
    path = tmp_path / "dump.jsonl"
    path.write_text(
        _line("a", "short") + "\n" + _line("big", "x" * 2_000_000) + "\n" + _line("c", "short too") + "\n",
        encoding="utf-8",
    )
    table, stats = _read(path, max_body_bytes=10_000)
    assert table.column("doc_id").to_pylist() == ["a", "c"]
    assert _reasons(stats) == [(2, "too_large")]
    assert stats.rejected[0]["detail"].startswith("line 2 has 2,000,0")  # skipped whole, not parsed
    assert "max_body_bytes=10,000" in stats.rejected[0]["detail"]


def test_a_csv_row_far_above_max_body_bytes_is_rejected_unparsed(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text(
        HEADER
        + "a,s,d,2026-01-01,t,short\n"
        + f"b,s,d,2026-01-01,t,{'y' * 3_000_000}\n"
        + "c,s,d,2026-01-01,t,ok\n",
        encoding="utf-8",
    )
    table, stats = _read(path, max_body_bytes=1_000)
    assert table.column("doc_id").to_pylist() == ["a", "c"]
    assert _reasons(stats) == [(2, "too_large")]
    assert stats.rejected[0]["detail"].startswith("line 3: the row has 3,000,0")
    assert "max_body_bytes=1,000" in stats.rejected[0]["detail"]


def _cp1252_csv(tmp_path):
    rows = [f"r{i},s,d,2026-01-01,Caf\xe9 {i},Cr\xe8me br\xfbl\xe9e \u201cquoted\u201d {i}\n" for i in range(40)]
    path = tmp_path / "legacy.csv"
    path.write_bytes((HEADER + "".join(rows)).encode("cp1252"))
    return path


def test_a_cp1252_csv_is_refused_with_how_to_re_encode_it(tmp_path):
    path = _cp1252_csv(tmp_path)
    with pytest.raises(InputError) as raised:
        _read(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: 40 of the first 40 rows have bytes that are not UTF-8")
    assert f"iconv -f CP1252 -t UTF-8 {path} > legacy.utf8.csv" in message


def test_a_cp1252_jsonl_is_refused_with_how_to_re_encode_it(tmp_path):
    path = tmp_path / "legacy.jsonl"
    lines = [json.dumps({"id": f"r{i}", "text": f"Caf\xe9 {i}"}, ensure_ascii=False) for i in range(40)]
    path.write_bytes("\n".join(lines).encode("cp1252"))
    with pytest.raises(InputError, match=r"40 of the first 40 rows .*iconv -f CP1252 -t UTF-8"):
        _read(path)


def test_a_few_replaced_characters_are_counted_in_the_manifest_and_the_log(runner, tmp_path):
    rows = [document(f"d{i}", f"plain text of document number {i} about topic {i}") for i in range(30)]
    path = write_csv(tmp_path / "mostly.csv", rows)
    data = path.read_bytes().replace(b"number 7 ", b"number \xff7 ").replace(b"number 9 ", b"n\xe9\xe9 9 ")
    path.write_bytes(data)
    with DagsterInstance.ephemeral() as instance:
        result = runner.run(path, instance=instance)
        logged = instance.all_logs(result.run_id)
        warned = [entry.user_message for entry in logged if entry.level == logging.WARNING]
    assert result.success
    counts = runner.manifest()["counts"]
    assert (counts["replaced_character_rows"], counts["replaced_characters"]) == (2, 3)
    replaced = [message for message in warned if "replaced by U+FFFD" in message]
    assert replaced and f"{path}: 2 rows, 3 characters" in replaced[0], warned
    events = result.get_asset_materialization_events()
    metadata = next(e.materialization.metadata for e in events if e.asset_key.path[-1] == "documents")
    assert f"| {path} | 2 | 3 |" in metadata["replaced_characters"].value


def test_a_parquet_body_of_integers_is_refused_by_name(tmp_path):
    path = tmp_path / "typed.parquet"
    columns = {name: ["x", "y", "z"] for name in ("doc_id", "source", "domain", "title")}
    pq.write_table(pa.table({**columns, "crawled_at": ["2026-01-01"] * 3, "body": [1, 2, 3]}), path)
    with pytest.raises(InputError) as raised:
        _read(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: column body is int64, not text")
    assert "CAST(body AS VARCHAR)" in message


def test_a_jsonl_body_that_is_not_a_string_is_rejected_by_name(tmp_path):
    path = tmp_path / "dump.jsonl"
    path.write_text("\n".join([_line("a", "text"), _line("b", 123), _line("c", {"nested": 1})]) + "\n")
    table, stats = _read(path)
    assert table.column("doc_id").to_pylist() == ["a"]
    assert _reasons(stats) == [(2, "invalid_field_type"), (3, "invalid_field_type")]
    assert stats.rejected[0]["detail"] == (
        'line 2: field "text" (body) is a number, not a string; write it as a JSON string, or map '
        "body to another field with the fields setting"
    )
    assert "is an object" in stats.rejected[1]["detail"]


@pytest.mark.parametrize("control", ["\x00", "\x1b", "\x7f", "\t"])
def test_a_doc_id_with_a_control_character_is_rejected(tmp_path, control):
    path = tmp_path / "dump.jsonl"
    path.write_text("\n".join([_line("a", "one"), _line(f"b{control}c", "two"), _line("d", "three")]) + "\n")
    table, stats = _read(path)
    assert table.column("doc_id").to_pylist() == ["a", "d"]
    assert _reasons(stats) == [(2, "invalid_doc_id")]
    assert f"U+{ord(control):04X}" in stats.rejected[0]["detail"]
    assert "\\x" in stats.rejected[0]["doc_id"] and control not in stats.rejected[0]["doc_id"]


def test_a_csv_doc_id_with_a_nul_is_rejected_and_never_reaches_the_release(runner, tmp_path):
    rows = [document(f"d{i}", f"plain text of document number {i}") for i in range(5)]
    path = write_csv(tmp_path / "nul.csv", rows)
    path.write_bytes(path.read_bytes().replace(b"d3,", b"d\x003,"))
    result = runner.run(path)
    assert result.success
    assert runner.manifest()["rejected_by_reason"] == {"invalid_doc_id": 1}
    for written in runner.output_dir.glob("*.csv"):
        assert b"\x00" not in written.read_bytes(), written


def test_ids_are_kept_byte_exact(tmp_path):
    path = write_csv(
        tmp_path / "in.csv", [document(" padded ", "one"), document("padded", "two"), document("padded ", "three")]
    )
    table, stats = _read(path)
    assert table.column("doc_id").to_pylist() == [" padded ", "padded", "padded "]
    assert stats.rejected == []
    jsonl = tmp_path / "dump.jsonl"
    jsonl.write_text(_line(" j ", "one") + "\n" + _line("j", "two") + "\n")
    table, _ = _read(jsonl)
    assert table.column("doc_id").to_pylist() == [" j ", "j"]
    assert count_input_records(jsonl) == 2
