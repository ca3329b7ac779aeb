"""The cases in the order they run, each run in a folder of its own, the table of their outcomes
and the totals that set the exit status (:func:`main`, behind ``python -m dedup_tests.faults``)."""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dedup_tests import faults

from .boilerplate_faults import hot_bucket_refused, hot_bucket_skipped
from .compressed_faults import jsonl_gz_flipped_byte, warc_corrupt_member, warc_cut_in_last_record
from .csv_faults import csv_huge_body, csv_short_row, csv_unclosed_quote
from .disk_faults import (
    cdx_targets_full_disk,
    database_full_before_batch,
    database_full_before_payload,
    dedup_run_full_database,
    killed_run_temporary_payload,
)
from .fault_runs import Cli, library_child
from .fetch_faults import (
    fetch_dot_segment_filename,
    fetch_redirect_other_port,
    fetch_trickled_headers,
    sigterm_stalled_fetch,
)
from .hostile_input import (
    cp1252_csv,
    csv_replaced_characters,
    csv_row_too_large,
    doc_id_control_characters,
    jsonl_gz_huge_line,
    jsonl_lone_surrogate,
    jsonl_number_text,
    padded_doc_ids,
    parquet_int_body,
)
from .input_faults import (
    bad_settings,
    crawled_at_values,
    formula_cells,
    glob_symlink_loop,
    missing_input,
    reserved_columns,
    utf16_csv,
)
from .outcome import Outcome, Work, describe_error
from .path_faults import (
    bracketed_file_name,
    bracketed_input_path,
    case_twin_batch_keys,
    output_inside_input,
    pattern_batch_keys,
    starred_file_name,
)
from .process_faults import (
    concurrent_runs,
    full_disk,
    held_lock,
    kill_at_a_step,
    kill_during_release,
    read_only_output,
    sigterm_during_release,
)
from .scale_faults import identical_documents

CASES: list[tuple[str, Callable[[Work], Outcome]]] = [
    ("kill_during_release", kill_during_release),
    ("kill_at_a_step", kill_at_a_step),
    ("sigterm_during_release", sigterm_during_release),
    ("concurrent_runs", concurrent_runs),
    ("held_lock", held_lock),
    ("full_disk", full_disk),
    ("read_only_output", read_only_output),
    ("csv_unclosed_quote", csv_unclosed_quote),
    ("csv_short_row", csv_short_row),
    ("csv_huge_body", csv_huge_body),
    ("jsonl_gz_flipped_byte", jsonl_gz_flipped_byte),
    ("warc_cut_in_last_record", warc_cut_in_last_record),
    ("warc_corrupt_member", warc_corrupt_member),
    ("glob_symlink_loop", glob_symlink_loop),
    ("reserved_columns", reserved_columns),
    ("crawled_at_values", crawled_at_values),
    ("utf16_csv", utf16_csv),
    ("missing_input", missing_input),
    ("formula_cells", formula_cells),
    ("bad_settings", bad_settings),
    ("jsonl_lone_surrogate", jsonl_lone_surrogate),
    ("jsonl_gz_huge_line", jsonl_gz_huge_line),
    ("csv_row_too_large", csv_row_too_large),
    ("cp1252_csv", cp1252_csv),
    ("csv_replaced_characters", csv_replaced_characters),
    ("parquet_int_body", parquet_int_body),
    ("jsonl_number_text", jsonl_number_text),
    ("doc_id_control_characters", doc_id_control_characters),
    ("padded_doc_ids", padded_doc_ids),
    ("bracketed_file_name", bracketed_file_name),
    ("starred_file_name", starred_file_name),
    ("bracketed_input_path", bracketed_input_path),
    ("pattern_batch_keys", pattern_batch_keys),
    ("case_twin_batch_keys", case_twin_batch_keys),
    ("output_inside_input", output_inside_input),
    ("fetch_trickled_headers", fetch_trickled_headers),
    ("fetch_dot_segment_filename", fetch_dot_segment_filename),
    ("fetch_redirect_other_port", fetch_redirect_other_port),
    ("sigterm_stalled_fetch", sigterm_stalled_fetch),
    ("hot_bucket_refused", hot_bucket_refused),
    ("hot_bucket_skipped", hot_bucket_skipped),
    ("identical_documents", identical_documents),
    ("database_full_before_batch", database_full_before_batch),
    ("database_full_before_payload", database_full_before_payload),
    ("dedup_run_full_database", dedup_run_full_database),
    ("killed_run_temporary_payload", killed_run_temporary_payload),
    ("cdx_targets_full_disk", cdx_targets_full_disk),
]


def run_case(name: str, case: Callable[[Work], Outcome], work: Work) -> Outcome:
    work.folder = work.root / name
    work.folder.mkdir()
    try:
        outcome = case(work)
    except Exception as error:  # an unexpected error is a row too
        outcome = Outcome("(see the case)", f"ERROR {describe_error(error)}")
        outcome.expect(False, "the case raised")
    else:
        outcome.expect("not verifiable" not in outcome.release, "verify_release raised")
    finally:
        for cli in list(Cli.running):  # a case that failed midway leaves no process behind
            cli.process.kill()
            cli.finish()
    return outcome


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def lost_cell(outcome: Outcome) -> str:
    if outcome.lost is None and not outcome.altered:
        return "—"
    parts = [f"{outcome.lost or 0:,}"]
    if outcome.altered:
        parts.append(f"{outcome.altered:,} altered")
    text = ", ".join(parts)
    return text + (f" ({outcome.note})" if outcome.note else "")


def print_table(rows: list[tuple[str, Outcome]]) -> None:
    print("| case | injected | observed | records lost | release | as expected |")
    print("|---|---|---|---|---|---|")
    for name, outcome in rows:
        verdict = "yes" if outcome.expected else "NO: " + "; ".join(outcome.failures)
        print(
            f"| {name} | {cell(outcome.injected)} | {cell(outcome.observed)} | "
            f"{cell(lost_cell(outcome))} | "
            f"{cell(outcome.release)} | {cell(verdict)} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=faults.__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="small corpora; 100k identical documents at most"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--only", help="comma-separated case names: " + ", ".join(name for name, _ in CASES)
    )
    parser.add_argument(
        "--seed", type=int, help="for the step a run is killed at (default: random, printed)"
    )
    parser.add_argument("--library-run", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.library_run:
        library_child(*args.library_run)
        return 0
    chosen = CASES
    if args.only:
        names = args.only.split(",")
        unknown = sorted(set(names) - {name for name, _ in CASES})
        if unknown:
            parser.error(f"no such case: {', '.join(unknown)}")
        chosen = [(name, case) for name, case in CASES if name in names]
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    root = Path(tempfile.mkdtemp(prefix="dedup-faults-"))
    print(f"work folder {root}, seed {seed}", file=sys.stderr)
    work = Work(root, args.quick, random.Random(seed))
    started = time.monotonic()
    rows = []
    try:
        for name, case in chosen:
            case_started = time.monotonic()
            print(f"{name} …", file=sys.stderr, flush=True)
            rows.append((name, run_case(name, case, work)))
            print(f"{name}: {time.monotonic() - case_started:.1f} s", file=sys.stderr, flush=True)
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print_table(rows)
    # more rows out than records in (a record counted twice) is as wrong as fewer
    lost = sum(abs(outcome.lost or 0) + outcome.altered for _, outcome in rows)
    mixed = sum(not outcome.release_whole for _, outcome in rows)
    unexpected = [name for name, outcome in rows if not outcome.expected]
    print()
    print(f"records lost or altered without a reject: {lost}")
    print(f"mixed or corrupt releases: {mixed}")
    print(
        f"cases not as expected: {len(unexpected)}"
        + (f" ({', '.join(unexpected)})" if unexpected else "")
    )
    print(
        f"({len(rows)} cases in {time.monotonic() - started:.0f} s, seed {seed}"
        f"{', --quick' if args.quick else ''})"
    )
    return 1 if lost or mixed or unexpected else 0

