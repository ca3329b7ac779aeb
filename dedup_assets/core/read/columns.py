"""The columns of an input file as ours: renamed by the ``fields`` setting, checked against the
names the pipeline adds and against each other, and typed as the documents need them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ..settings.input import InputPolicy
from .input_contract import BASE_COLUMNS, REQUIRED_COLUMNS, TEXT_COLUMNS
from .protocol import RESERVED_COLUMNS, InputError, Reader
from .files import is_release_part
from .registry import reader_for

# DuckDB, which stores the documents, tells column names apart without case
_RESERVED = {name.lower() for name in RESERVED_COLUMNS}


def own_columns(reader: Reader, names: list[str]) -> list[str]:
    """The file's own columns among the names of ``reader.schema``."""
    appended = list(reader.appended_columns)
    kept = len(names) - len(appended)
    return names[:kept] if names[kept:] == appended else names


def _renamed(path: Path, names: list[str], fields: dict[str, str]) -> dict[str, str]:
    """The file's column -> ours, for the columns ``fields`` maps (ours -> the file's)."""
    reserved = sorted(ours for ours in fields if ours.lower() in _RESERVED)
    if reserved:
        raise InputError(
            f"fields maps {', '.join(reserved)}, which the pipeline fills itself; map only the input's "
            "own columns (doc_id, source, domain, crawled_at, title, body or extra ones)."
        )
    targets = list(fields.values())
    repeated = sorted({theirs for theirs in targets if targets.count(theirs) > 1})
    if repeated:
        raise InputError(
            f"fields maps more than one of our columns to {', '.join(repeated)}; each input column "
            "can fill one of ours."
        )
    renames = {theirs: ours for ours, theirs in fields.items() if theirs in names and theirs != ours}
    clashes = [ours for ours in renames.values() if ours in names and ours not in renames]
    if clashes:
        raise InputError(
            f"{path}: fields maps {', '.join(f'{ours} to {fields[ours]}' for ours in clashes)}, but the "
            f"file also has a {clashes[0]} column. Map it to one column only, or rename one of them."
        )
    return renames


def _refuse_clashing_names(
    path: Path, names: list[str], renames: dict[str, str], fields: dict[str, str]
) -> None:
    """Refuse a file column (as ``fields`` renames it) named like a column the pipeline adds, or
    like another column of the file: one would be taken for the other, or hide it."""
    taken = [name for name in names if name.lower() in _RESERVED]
    if taken:
        renamed = {**fields, **{f"input_{name}": name for name in taken}}
        raise InputError(
            f"{path}: the input has column(s) {', '.join(taken)}, named like the columns the pipeline "
            f"adds to every document ({', '.join(RESERVED_COLUMNS)}): the input's would be taken for "
            "the pipeline's, or hide them. Drop them from the input, or rename them with the fields "
            "setting (our name -> the input's).",
            fix={"fields": renamed},
        )
    lowered = [name.lower() for name in names]
    repeated = sorted({name for name in names if lowered.count(name.lower()) > 1})
    if repeated:
        original = {ours: theirs for theirs, ours in renames.items()}
        shown = [
            f"{name} (fields renames {original[name]} to it)" if name in original else name for name in repeated
        ]
        raise InputError(
            f"{path}: more than one column is named {', '.join(shown)} (names are compared without "
            "case). Give each column its own name, in the file or with the fields setting."
        )


def mapped_schema(path: Path, reader: Reader, fields: dict[str, str]) -> tuple[pa.Schema, list[str]]:
    """The columns of a file as ours, and the names (in order) that make a batch so."""
    schema = reader.schema(path)
    if not reader.columns_from_file:
        return schema, schema.names
    own = own_columns(reader, schema.names)
    if is_release_part(path):  # a release read again: its clusters become the input's own columns
        fields = {**{f"input_{name}": name for name in own if name.lower() in _RESERVED}, **fields}
    renames = _renamed(path, own, fields)
    mapped = [renames.get(name, name) for name in own]
    _refuse_clashing_names(path, mapped, renames, fields)
    # by position: an appended column may share a name with one that fields renames away
    names = mapped + schema.names[len(own):]
    _refuse_non_text(path, schema, names)
    return pa.schema([field_.with_name(name) for field_, name in zip(schema, names)]), names


def _is_text(data_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(data_type):
        data_type = data_type.value_type
    return pa.types.is_null(data_type) or pa.types.is_string(data_type) or pa.types.is_large_string(data_type)


def _refuse_non_text(path: Path, schema: pa.Schema, names: list[str]) -> None:
    """Refuse a text column (``names``: ours, in the order of ``schema``) of another type: read as
    text, a number or a byte string would be a different text, unseen. A whole-number doc_id
    is taken, as its digits."""
    for field_, ours in zip(schema, names):
        if ours not in TEXT_COLUMNS or _is_text(field_.type):
            continue
        if ours == "doc_id" and pa.types.is_integer(field_.type):
            continue
        theirs = field_.name
        named = theirs if theirs == ours else f"{theirs} (our {ours})"
        raise InputError(
            f"{path}: column {named} is {field_.type}, not text; {ours} must be a string column. Store it as "
            f"text, e.g. with DuckDB: COPY (SELECT * REPLACE (CAST({theirs} AS VARCHAR) AS {theirs}) FROM "
            f"'{path.name}') TO 'text.parquet', or map {ours} to a text column with the fields setting."
        )


# the names a dump's own columns often have, for a required column it lacks
_LIKELY = {"doc_id": ("id", "docid", "key", "uuid", "url"), "body": ("text", "content", "raw_content", "html")}


def _likely_columns(missing: list[str], found: list[str]) -> dict[str, str]:
    """Ours -> the file's column for each ``missing`` column: the first of ``found`` named as such
    a column often is, else the most common such name (the message lists the file's columns)."""
    lowered = {name.lower(): name for name in found}
    return {
        ours: next((lowered[name] for name in _LIKELY[ours] if name in lowered), _LIKELY[ours][0])
        for ours in missing
    }


def extra_columns(paths: list[Path], policy: InputPolicy) -> dict[str, pa.DataType]:
    """Columns beyond the six, across all files; a column typed differently by two files is text.
    A file without a required column is refused (:mod:`.input_contract`)."""
    extra: dict[str, pa.DataType] = {}
    for path in paths:
        reader = reader_for(path, policy.source_format, policy.fields)
        schema, _ = mapped_schema(path, reader, policy.fields)
        missing = [column for column in REQUIRED_COLUMNS if column not in schema.names]
        if missing:
            found = own_columns(reader, reader.schema(path).names)
            raise InputError(
                f"{path}: missing required column(s) {', '.join(missing)}. Found: "
                f"{', '.join(found) or '(none)'}. Every input needs "
                + " and ".join(REQUIRED_COLUMNS)
                + " (source, domain, crawled_at, title and url are optional); map yours with the fields "
                "setting (our name -> the input's).",
                fix={"fields": {**policy.fields, **_likely_columns(missing, found)}},
            )
        for field_ in schema:
            if field_.name in BASE_COLUMNS or field_.name == "input_row":
                continue
            known = extra.setdefault(field_.name, field_.type)
            if known != field_.type:
                extra[field_.name] = pa.large_string()
    return extra
