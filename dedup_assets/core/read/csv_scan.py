"""A strict, quote-aware scan of a CSV file's bytes (RFC 4180: ``,`` between fields, ``"`` around
a field that may hold commas, line ends and ``""`` for a quote; a quote inside an unquoted field
is text, as Arrow reads it). It finds each record's span, the largest record and the records
that cannot be rows: a quoted field never closed, text after a closing quote, a field count other
than the header's, or a record too large to parse.

Arrow's parser is lenient where this scan is strict: it reads an unclosed quote to the end of the
file and joins text after a closing quote to the field, so a stray quote silently swallows the
rows after it. The CSV reader therefore hands Arrow only the records this scan accepts, and
rejects the others with their line. A record whose quotes are wrong is skipped up to the next
physical line after its first one, and scanning resumes there, so the rows after a stray quote
are read; a record with the wrong number of fields is skipped whole.

Line numbers are counted only for malformed records, from the last one counted, so the scan of a
well-formed file only looks for quotes inside quoted fields, and for commas and line ends outside.
"""

from __future__ import annotations

import csv
import io
import shlex
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np

from ..util.kernel_cache import writable_cache
from ..util.shell import python_command, sql_literal
from .encoding import reencode_hint, refuse_wide_encoding
from .protocol import InputError

writable_cache(__file__)

_QUOTE, _COMMA, _LF, _CR = 34, 44, 10, 13
_ONES, _HIGHS = np.uint64(0x0101010101010101), np.uint64(0x8080808080808080)
_QUOTES, _COMMAS, _LFS, _CRS = (_ONES * np.uint64(byte) for byte in (_QUOTE, _COMMA, _LF, _CR))
_UTF8_BOM = b"\xef\xbb\xbf"
# Arrow parses a file in blocks that must hold a whole row, and a block's size is an int32; a
# row also takes several times its size while it is parsed. A larger row is rejected unparsed.
MAX_ROW_BYTES = 1 << 30

# What is wrong with a record (0: nothing).
UNCLOSED_QUOTE, TEXT_AFTER_QUOTE, FIELD_COUNT, TOO_LARGE = 1, 2, 3, 4
# The columns of a row of ``CsvScan.bad``.
BAD_RECORD, BAD_START, BAD_RESUME, BAD_LINE, BAD_PROBLEM, BAD_PROBLEM_LINE, BAD_FIELDS = range(7)
_BAD_CHUNK = 4096  # malformed records per kernel call; the kernel returns when they fill it
# A scan's ``state``, an int64 array the kernel updates in place so that it can stop when ``bad``
# is full and go on: where it is, a position whose line is known and that line, the records so
# far, the largest good record, and the last run of a record with a quote problem (``_record``):
# from its second line to where its problem showed, the problem, its place and that place's line.
_POSITION, _KNOWN, _KNOWN_LINE, _RECORDS, _LARGEST = range(5)
_RUN_FROM, _RUN_TO, _RUN_PROBLEM, _RUN_AT, _RUN_LINE = range(5, 10)


@nb.njit(cache=True)
def _lines_between(data, start, end):
    """Line ends in ``data[start:end]``: ``\\n``, ``\\r\\n`` (once) and a lone ``\\r``, as Arrow
    ends lines."""
    lines = 0
    for position in range(start, end):
        byte = data[position]
        lone_cr = byte == _CR and (position + 1 == data.shape[0] or data[position + 1] != _LF)
        if byte == _LF or lone_cr:
            lines += 1
    return lines


@nb.njit(cache=True)
def _next_line(data, position):
    """Where the physical line after the one at ``position`` starts (the end, if none does)."""
    size = data.shape[0]
    while position < size and data[position] != _LF and data[position] != _CR:
        position += 1
    if position + 1 < size and data[position] == _CR and data[position + 1] == _LF:
        position += 1
    return min(position + 1, size)


@nb.njit(inline="always")
def _has(word, byte_times_ones):
    """Whether one of the eight bytes of ``word`` is the byte (given times 0x0101010101010101)."""
    other = word ^ byte_times_ones
    return ((other - _ONES) & ~other & _HIGHS) != 0


@nb.njit(inline="always")
def _is_separator(byte):
    return byte == _COMMA or byte == _LF or byte == _CR


# Most of a file's bytes are inside fields, so the two searches below look at them eight at a
# time (``words`` is ``data`` as uint64) until a word holds a byte they look for.


@nb.njit(inline="always")
def _next_quote(data, words, position):
    """The first quote at or after ``position`` (the end, if none)."""
    size = data.shape[0]
    while position < size and (position & 7) != 0:
        if data[position] == _QUOTE:
            return position
        position += 1
    while (position >> 3) < words.shape[0] and not _has(words[position >> 3], _QUOTES):
        position += 8
    while position < size and data[position] != _QUOTE:
        position += 1
    return position


@nb.njit(inline="always")
def _next_separator(data, words, position):
    """The first comma or line end at or after ``position`` (the end, if none)."""
    size = data.shape[0]
    while position < size and (position & 7) != 0:
        if _is_separator(data[position]):
            return position
        position += 1
    while (position >> 3) < words.shape[0]:
        word = words[position >> 3]
        if _has(word, _COMMAS) or _has(word, _LFS) or _has(word, _CRS):
            break
        position += 8
    while position < size and not _is_separator(data[position]):
        position += 1
    return position


def _words(data: np.ndarray) -> np.ndarray:
    """``data`` as uint64 words, for the searches above (a tail of under eight bytes left out)."""
    return data[: data.shape[0] // 8 * 8].view(np.uint64)


@nb.njit(cache=True)
def _line_end(data, start, end):
    """The first line end in ``data[start:end]`` (``end``, if none)."""
    while start < end and data[start] != _LF and data[start] != _CR:
        start += 1
    return start


@nb.njit(cache=True)
def _record(data, words, position, state):
    """The record starting at ``position``: (where the next one starts, its fields, what is wrong
    with it, where). A problem's place is the quote left open or the text after a closing quote.

    A record with a quote problem crossed every line end after its first line inside a quoted
    field, up to where the problem showed; ``state`` keeps that run (``_RUN_FROM`` to ``_RUN_TO``).
    A later scan inside quotes at one of those line ends goes on exactly as that one did, so it
    meets the same problem (the quote left open is that one's if it opens after the line end)
    without scanning again. Otherwise a file whose every line closes the quote of the line before
    and opens another would be scanned from each line to the problem."""
    size = data.shape[0]
    fields = 1
    while True:
        if position < size and data[position] == _QUOTE:
            opened = position
            position += 1
            while True:
                quote = _next_quote(data, words, position)
                if state[_RUN_FROM] <= position < state[_RUN_TO]:
                    crossed = _line_end(data, position, min(quote, state[_RUN_TO]))
                    if crossed < min(quote, state[_RUN_TO]):
                        if state[_RUN_PROBLEM] == TEXT_AFTER_QUOTE:
                            return state[_RUN_AT], fields, TEXT_AFTER_QUOTE, state[_RUN_AT]
                        left_open = state[_RUN_AT] if state[_RUN_AT] > crossed else opened
                        return size, fields, UNCLOSED_QUOTE, left_open
                if quote == size:
                    return size, fields, UNCLOSED_QUOTE, opened
                position = quote
                if position + 1 < size and data[position + 1] == _QUOTE:
                    position += 2
                    continue
                position += 1
                break
            if position < size and not _is_separator(data[position]):
                return position, fields, TEXT_AFTER_QUOTE, position
        else:
            position = _next_separator(data, words, position)
        if position == size:
            return size, fields, 0, size
        if data[position] == _COMMA:
            fields += 1
            position += 1
            continue
        if data[position] == _CR and position + 1 < size and data[position + 1] == _LF:
            position += 1
        return position + 1, fields, 0, position


@nb.njit(cache=True)
def _scan(data, words, state, expected_fields, max_row_bytes, bad):
    """Scan data records from ``state`` on, until the end of ``data`` or until ``bad`` is full;
    fills ``bad`` (one row per malformed record) and returns how many rows it filled."""
    size = data.shape[0]
    position = state[_POSITION]
    filled = 0
    while position < size and filled < bad.shape[0]:
        if data[position] == _LF or data[position] == _CR:  # a blank line is no record, in Arrow too
            position = _next_line(data, position)
            continue
        end, fields, problem, at = _record(data, words, position, state)
        state[_RECORDS] += 1
        length = end - position
        if problem == 0 and fields != expected_fields:
            problem, at = FIELD_COUNT, end - 1
        elif problem == 0 and length > max_row_bytes:
            problem, at = TOO_LARGE, end - 1
        if problem == 0:
            state[_LARGEST] = max(state[_LARGEST], length)
            position = end
            continue
        state[_KNOWN_LINE] += _lines_between(data, state[_KNOWN], position)
        state[_KNOWN] = position
        line = state[_KNOWN_LINE]
        quotes_wrong = problem <= TEXT_AFTER_QUOTE
        if quotes_wrong and at == state[_RUN_AT] and state[_RUN_FROM] < state[_RUN_TO]:
            problem_line = state[_RUN_LINE]  # counted once: it may be far from here
        else:
            problem_line = line + _lines_between(data, position, at)
        # a record that is whole but wrong ends where it ends; one whose quotes are wrong may have
        # run over the rows after it, so the scan goes on at its second physical line
        resume = _next_line(data, position) if quotes_wrong else end
        if quotes_wrong and end > state[_RUN_TO]:  # a run that reaches further
            state[_RUN_FROM], state[_RUN_TO], state[_RUN_PROBLEM] = resume, end, problem
            state[_RUN_AT], state[_RUN_LINE] = at, problem_line
        bad[filled, BAD_RECORD] = state[_RECORDS]
        bad[filled, BAD_START] = position
        bad[filled, BAD_RESUME] = resume
        bad[filled, BAD_LINE] = line
        bad[filled, BAD_PROBLEM] = problem
        bad[filled, BAD_PROBLEM_LINE] = problem_line
        bad[filled, BAD_FIELDS] = fields
        filled += 1
        position = resume
    state[_POSITION] = position
    return filled


@dataclass(frozen=True)
class CsvScan:
    names: list[str]  # the header's columns
    data_start: int  # where the first data record may start: after the header
    records: int  # data records, good and malformed (blank lines are not records)
    largest: int  # bytes of the largest well-formed record
    bad: np.ndarray  # one row per malformed record, columns BAD_RECORD... BAD_FIELDS


def file_bytes(path: Path) -> np.ndarray:
    """The file's bytes, mapped rather than read, so a large file is paged in as it is scanned."""
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=np.uint8)
    return np.asarray(np.memmap(path, dtype=np.uint8, mode="r"))


def header(path: Path, data: np.ndarray) -> tuple[list[str], int]:
    """The header's column names and where the data records start; a header that is not UTF-8
    text, is malformed or repeats a name fails with what to do."""
    first = bytes(data[:4])
    refuse_wide_encoding(path, first)
    start = len(_UTF8_BOM) if first.startswith(_UTF8_BOM) else 0
    while start < data.shape[0] and data[start] in (_LF, _CR):
        start = _next_line(data, start)
    if start == data.shape[0]:
        return [], start
    if np.any(data[start : _next_line(data, start)] == 0):
        wide = "UTF-32" if b"\0\0\0" in bytes(data[start : start + 64]) else "UTF-16"
        raise InputError(
            f"{path}: the header has NUL bytes, so the file is probably {wide} encoded. Re-encode it "
            f"as UTF-8, e.g. {reencode_hint(path, wide)}"
        )
    end, _, problem, _ = _record(data, _words(data), start, np.zeros(_RUN_LINE + 1, dtype=np.int64))
    line = 1 + _lines_between(data, 0, start)
    if problem == UNCLOSED_QUOTE:
        raise InputError(
            f"{path}: line {line}: the header has a quoted column name that is never closed. Close it "
            'with ".'
        )
    if problem == TEXT_AFTER_QUOTE:
        raise InputError(
            f"{path}: line {line}: the header has text after a closing quote. Quote the whole column "
            'name, writing a quote inside it as "".'
        )
    text = bytes(data[start:end]).decode("utf-8", errors="replace")
    names = next(csv.reader(io.StringIO(text, newline="")))
    if len(names) == 1:
        _refuse_other_delimiter(path, names[0])
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        shown = ", ".join(name or "(empty)" for name in repeated)
        raise InputError(f"{path}: the header repeats column {shown}; rename one.")
    return names, end


# separators other than the comma that files named .csv often have, by the name a user knows
_OTHER_DELIMITERS = {";": "semicolon", "\t": "tab", "|": "pipe"}


def _refuse_other_delimiter(path: Path, header: str) -> None:
    """A header read as one column that another separator splits: the file is not comma-separated,
    which the scan requires, so say which separator it has and how to convert it (DuckDB's CSV
    reader takes any), rather than that its columns are missing."""
    found = max(_OTHER_DELIMITERS, key=header.count)
    if not header.count(found):
        return
    target = path.with_name(f"{path.stem}.comma.csv")
    delimiter = "\\t" if found == "\t" else found  # \t in the message, a tab to Python
    sql = (
        f"copy (select * from read_csv({sql_literal(str(path))}, delim='{delimiter}', header=true, all_varchar=true)) "
        f"to {sql_literal(str(target))} (header)"
    )
    name = _OTHER_DELIMITERS[found]
    raise InputError(
        f"{path}: the header is one column, {header!r}, which a {name} splits: the file is {name}-separated, "
        f"and CSV input must be comma-separated. Convert it, e.g. "
        f"{python_command(f'import duckdb; duckdb.sql({chr(34)}{sql}{chr(34)})')}, then give "
        f"{shlex.quote(str(target))} as the input."
    )


def scan(path: Path, data: np.ndarray, max_row_bytes: int | None = None) -> CsvScan:
    """The whole file's records, as the strict scan sees them; a record above ``max_row_bytes``
    (at most, and by default, ``MAX_ROW_BYTES``) is ``TOO_LARGE``."""
    limit = MAX_ROW_BYTES if max_row_bytes is None else min(max_row_bytes, MAX_ROW_BYTES)
    names, data_start = header(path, data)
    state = np.zeros(_RUN_LINE + 1, dtype=np.int64)
    state[_POSITION], state[_KNOWN_LINE] = data_start, 1
    chunks = []
    bad = np.empty((_BAD_CHUNK, 7), dtype=np.int64)
    words = _words(data)
    while True:
        filled = _scan(data, words, state, len(names), limit, bad)
        chunks.append(bad[:filled].copy())
        if filled < len(bad):
            break
    bad_records = np.concatenate(chunks)
    return CsvScan(names, data_start, int(state[_RECORDS]), int(state[_LARGEST]), bad_records)
