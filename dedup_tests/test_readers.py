"""Every format's reader keeps the Reader protocol, and its own count agrees with what it reads."""

import gzip
import inspect

import pandas as pd
import pytest

from dedup_assets.core.read import READERS, InputError, InputPolicy, Reader, reader_for
from dedup_assets.core.read.registry import SUPPORTED_NAMES, format_stem
from dedup_assets.core.settings.input import SOURCE_FORMATS, FetchSettings

from .conftest import document, write_csv
from .test_sources import _jsonl_lines
from .test_warc_ranges import TARGET_COLUMNS, target_rows
from .warc_fixtures import write_crawl


def test_each_source_format_has_one_reader_that_keeps_the_protocol(tmp_path):
    assert tuple(READERS) == SOURCE_FORMATS  # the Literal cannot be made from READERS: input_settings says why
    for name, reader in READERS.items():
        assert isinstance(reader, Reader) and reader.name == name
        for method in ("matches", "schema", "batches", "count"):
            expected = list(inspect.signature(getattr(Reader, method)).parameters)[1:]  # without self
            assert list(inspect.signature(getattr(reader, method)).parameters) == expected, (name, method)
    with pytest.raises(InputError, match="source_format must be one of csv, parquet, jsonl, warc"):
        reader_for(tmp_path / "in.csv", "xml")



def test_the_lists_of_file_names_are_made_from_the_readers_suffixes():
    assert SUPPORTED_NAMES == ".csv, .parquet, .jsonl, .jsonl.gz, .json.gz, .warc or .warc.gz"
    stems = {"2026-11-29.WARC.gz": "2026-11-29", "a.jsonl.warc": "a.jsonl", "b.json.gz": "b", "c.gz": "c.gz"}
    assert {name: format_stem(name) for name in stems} == stems

def _sample(tmp_path, source_format):
    """A small file of the format; the JSONL, WARC and targets ones have records their readers
    reject."""
    rows = [document(f"d{i}", 'multi\nline "quoted"') for i in range(7)]
    if source_format == "csv":
        return write_csv(tmp_path / "in.csv", rows)
    if source_format == "parquet":
        pd.DataFrame(rows).to_parquet(tmp_path / "in.parquet", index=False)
        return tmp_path / "in.parquet"
    if source_format == "jsonl":
        with gzip.open(tmp_path / "dump.jsonl.gz", "wt", encoding="utf-8") as handle:
            handle.write("\n".join(_jsonl_lines()) + "\n")
        return tmp_path / "dump.jsonl.gz"
    if source_format == "warc_ranges":
        rows = target_rows(write_crawl(tmp_path / "crawl.warc.gz", truncate_last=False), "crawl.warc.gz")
        return write_csv(tmp_path / "targets.csv", rows, TARGET_COLUMNS)
    return write_crawl(tmp_path / "crawl.warc.gz")


@pytest.mark.parametrize("source_format", SOURCE_FORMATS)
def test_count_agrees_with_the_rows_and_rejects_of_batches(tmp_path, source_format):
    path = _sample(tmp_path, source_format)
    reader = reader_for(path)
    assert reader is READERS[source_format]
    assert reader.matches(path) == (source_format != "warc_ranges")  # a targets file: by its columns
    rejects = []
    policy = InputPolicy(fetch=FetchSettings(base_url=str(tmp_path)))
    batches = list(reader.batches(path, 3, policy, lambda *reject: rejects.append(reject)))
    assert all(batch.schema.names == reader.schema(path).names for batch in batches)
    rows = sum(batch.num_rows for batch in batches)
    assert rows + len(rejects) == reader.count(path)
    assert bool(rejects) == (source_format in ("jsonl", "warc", "warc_ranges"))
