#!/usr/bin/env python3
"""Benchmark dedup-assets against peer MinHash/LSH engines, side by side, on one corpus.

    python benchmarks/benchmark.py (--docs N | --corpus PATH.parquet | --smoke) [--web] [--runs N]
        [--perm 128|64] [--scheme fss|blake2b] [--auto-bands W] [--peers rensa,fastsketch-pre,...]
        [--recall-seeds N] [--skip-dagster] [--skip-library] [--workdir DIR] [--json-out FILE]
        [--engine duckdb|ray [--compare-engines] | --both-engines [--compare-engines]]
        [--ray-nodes N [--ray-object-store-mb MB]]
    python benchmarks/benchmark.py --warc-fetch N [--workdir DIR] [--json-out FILE]
    python benchmarks/benchmark.py --docs N --copies-of-one C [--workdir DIR] [--json-out FILE]

The ``dedup_bench`` package beside this script does the work: ``corpus`` (``--web``:
``web_corpus``) generates the corpus, ``ours`` runs the Dagster CLI and the library core,
``theirs`` the peers, each in its own measured process (``child``), and ``report`` prints the
tables. ``--copies-of-one C`` runs ``giant_group`` instead: N documents of which C are copies of
one page through ``dedup run``, each step's peak memory and wall time; ``--warc-fetch N`` runs
``warc_fetch``: N WARC records fetched by byte range from a loopback server. The machine is
shared and noisy: compare the runs of one invocation, as ratios.

``--engine ray`` runs the Dagster graph on the ray engine and no library run; ``--both-engines``
runs it on duckdb and then on ray, side by side; ``--ray-nodes N`` runs ray on a local cluster of
N one-CPU nodes (``ray_cluster``). Every Dagster run's steps get their seconds and the peak memory
of the run's whole process tree (``memory``), and, on a cluster, of every node's.
"""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import fields
from pathlib import Path

from dedup_assets.core.settings.choices import ENGINES
from dedup_bench.common import REFERENCE, REPO_ROOT, THRESHOLD, BenchmarkError, append_json, is_reference
from dedup_bench.giant_group import measure_copies_of_one
from dedup_bench.measure import Options, measure
from dedup_bench.ours import warm_installation
from dedup_bench.peer_engines import ENGINES as PEER_ENGINES
from dedup_bench.report import precision_errors, print_report
from dedup_bench.warc_fetch import measure_warc_fetch

DEFAULT_WORKDIR = REPO_ROOT / "var" / "bench"
SMOKE_DOCS = 2000
DEFAULT_OBJECT_STORE_MB = Options.ray_object_store_mb  # one default, the run options'
SMOKE_RECALL_SEEDS = 2
SMOKE_WEB_DOCS = 1000  # --smoke --web: the Dagster run only, to keep CI's added time short
ENGINE_OPTIONS = "--engine ray, --both-engines, --compare-engines and --ray-nodes"


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark dedup-assets (Dagster end to end and library core) and peer engines "
        "side by side on one corpus."
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--docs", type=int, help="generate an N-document corpus (cached in --workdir)")
    source.add_argument("--corpus", type=Path, help="an existing corpus (.parquet; recall needs its .truth.parquet)")
    source.add_argument(
        "--warc-fetch", type=int, metavar="N", help="the fetch benchmark instead: N records of about 20 KB by "
        "byte range from a loopback server, as a local folder, and through the whole library pipeline",
    )
    source.add_argument(
        "--smoke", action="store_true", help=f"CI smoke run: --docs {SMOKE_DOCS}, both of our runs, no peers, "
        f"recall over {SMOKE_RECALL_SEEDS} seeds (with --web: {SMOKE_WEB_DOCS:,} web-length pages, the Dagster run only)",
    )
    parser.add_argument(
        "--copies-of-one", type=int, metavar="C", help="the giant copy group benchmark instead, with --docs N: "
        "N - C generated documents and C copies of one page through dedup run, each step's peak memory and time",
    )
    parser.add_argument(
        "--web", action="store_true", help="the web-length corpus (dedup_bench.web_corpus: log-normal page "
        "lengths, median about 3 KB, sites' boilerplate; the same planted copies), with --docs N or --smoke",
    )
    parser.add_argument(
        "--runs", type=int, default=1, metavar="N",
        help="run each of our runs and each peer N times and count the smallest wall (default 1)",
    )
    parser.add_argument("--perm", type=int, choices=[128, 64], default=128, help="MinHash permutations; bands of 8 rows")
    parser.add_argument("--scheme", choices=["fss", "blake2b"], default="fss", help="hash scheme (default fss)")
    parser.add_argument(
        "--auto-bands", type=float, metavar="WEIGHT", help="our runs choose their bands (auto_bands) with this "
        "false_negative_weight, e.g. 0.9; the peers keep perm / 8 bands of 8 rows",
    )
    parser.add_argument("--peers", default="", help=f"comma-separated peer engines, of {', '.join(PEER_ENGINES)}")
    parser.add_argument(
        "--recall-seeds", type=int, default=0, help="also the planted-pair recall of the sketch and banding alone "
        "over N seeds, ours and every installed peer's sketch of the same shingle hashes",
    )
    parser.add_argument("--skip-dagster", action="store_true", help="do not run the Dagster CLI")
    parser.add_argument("--skip-library", action="store_true", help="do not run the library core")
    parser.add_argument(
        "--engine", choices=ENGINES, default=REFERENCE, help="the Dagster run's engine (default duckdb); ray: "
        "on a local Ray started for the run, and no library run (it measures the reference engine, duckdb)",
    )
    parser.add_argument(
        "--compare-engines", action="store_true", help="ray runs only: let engine_matches_duckdb run DuckDB again "
        "and compare (else the benchmark sets compare_up_to_documents: 0, so the run measures the engine)",
    )
    parser.add_argument(
        "--both-engines", action="store_true", help="the Dagster graph on duckdb and then on ray over the same "
        "corpus, their steps side by side; the duckdb run is the other tables' reference",
    )
    parser.add_argument(
        "--ray-nodes", type=int, default=0, metavar="N", help="ray runs only: a local Ray cluster of N one-CPU "
        "nodes, joined through DEDUP_RAY_ADDRESS, with each node's peak memory per stage",
    )
    parser.add_argument(
        "--ray-object-store-mb", type=int, default=DEFAULT_OBJECT_STORE_MB, metavar="MB",
        help=f"with --ray-nodes: each node's object store (default {DEFAULT_OBJECT_STORE_MB})",
    )
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help=f"corpora and run folders (default {DEFAULT_WORKDIR})")
    parser.add_argument("--json-out", type=Path, help="append one JSON record of the whole run to this file")
    args = parser.parse_args(argv)
    check_engine(parser, args)
    if args.web and args.docs is None and not args.smoke:
        parser.error("--web generates the web-length corpus: give --docs N or --smoke")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    alone = args.web or args.peers or args.recall_seeds or args.auto_bands is not None
    if args.copies_of_one is not None:
        if args.docs is None or not 1 <= args.copies_of_one <= args.docs or alone:
            parser.error("--copies-of-one C takes --docs N with 1 ≤ C ≤ N, and none of --web, --peers, --recall-seeds, --auto-bands")
        return args
    if args.warc_fetch is not None:
        if args.warc_fetch < 1 or alone:
            parser.error("--warc-fetch N takes N ≥ 1 records and none of --web, --peers, --recall-seeds, --auto-bands")
        return args
    if args.smoke:
        if args.peers or args.skip_dagster or args.skip_library:
            parser.error("--smoke runs our runs and no peers; drop --peers/--skip-*")
        if args.web:
            args.docs, args.skip_library = SMOKE_WEB_DOCS, True
        else:
            args.docs = SMOKE_DOCS
            args.recall_seeds = args.recall_seeds or SMOKE_RECALL_SEEDS
    if args.recall_seeds < 0 or args.recall_seeds == 1:
        parser.error("--recall-seeds must be 0 (off) or at least 2")
    if args.docs is not None and args.docs < 2:
        parser.error("--docs must be at least 2")
    if args.auto_bands is not None and not 0.0 <= args.auto_bands <= 1.0:
        parser.error("--auto-bands takes a false_negative_weight between 0 and 1")
    return args


def check_engine(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The engine options belong to the engines benchmark's Dagster run, which they need."""
    if args.ray_object_store_mb != DEFAULT_OBJECT_STORE_MB and not args.ray_nodes:
        parser.error("--ray-object-store-mb sizes the nodes of --ray-nodes: add --ray-nodes N")
    compared = not is_reference(args.engine) or args.both_engines  # a run the reference's is compared with
    if not (compared or args.compare_engines or args.ray_nodes):
        return
    if args.warc_fetch is not None or args.copies_of_one is not None or args.smoke:
        parser.error(f"{ENGINE_OPTIONS} are for the engines benchmark: not with --warc-fetch, --copies-of-one "
                     "or --smoke (the CI smoke run stays on duckdb)")
    if args.skip_dagster:
        parser.error(f"{ENGINE_OPTIONS} need the Dagster run: drop --skip-dagster")
    if args.both_engines and not is_reference(args.engine):
        parser.error("--both-engines runs duckdb and then ray (duckdb's run is the reference): drop --engine")
    if args.compare_engines and not compared:
        parser.error("--compare-engines is for a ray run: add --engine ray or --both-engines")
    if args.ray_nodes < 0 or (args.ray_nodes and not compared):
        parser.error("--ray-nodes N takes N ≥ 1 nodes, for a ray run: add --engine ray or --both-engines")
    if args.ray_object_store_mb < 100:
        parser.error("--ray-object-store-mb must be at least 100")


def _terminated(signum, frame) -> None:
    # as an exception, so that the measured child and the benchmark's cluster are stopped on the
    # way out (timeout and kill send SIGTERM, which would end this process and leave them running)
    raise SystemExit(128 + signum)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    try:
        return run(args, argv)
    except BenchmarkError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """The mode ``args`` ask for: its report printed, its record appended to ``--json-out``, and its
    exit code."""
    warm_installation()  # every mode times the kernels
    if args.warc_fetch or args.copies_of_one:
        if args.warc_fetch:
            mode, record = "warc_fetch", measure_warc_fetch(args.workdir, args.warc_fetch)
        else:
            mode, record = "copies_of_one", measure_copies_of_one(args.workdir.resolve(), args.docs, args.copies_of_one)
        print("\n".join([f"## {record['title']}", "", *record["lines"]]))
        append_json(args.json_out, {"mode": mode, "argv": argv, **record})
        return 0 if record["ok"] else 1
    # the options of the same name, and three that the command line spells otherwise
    options = Options(**{
        **{field.name: getattr(args, field.name) for field in fields(Options) if hasattr(args, field.name)},
        "workdir": args.workdir.resolve(),
        "false_negative_weight": args.auto_bands,
        "peers": [engine.strip() for engine in args.peers.split(",") if engine.strip()],
    })
    record = measure(options, argv)
    print_report(record)
    append_json(args.json_out, record)
    errors = precision_errors(record)
    if errors:
        print(f"\nERROR: {errors} accepted edge(s) with exact Jaccard < {THRESHOLD}: not precise.")
        return 1
    if record["targets"].get("compiled_while_timed"):
        print("\nERROR: kernels were compiled while timed (above): the figures include the compiler's time.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
