#!/usr/bin/env python3
"""Benchmark dedup-assets against peer MinHash/LSH engines, side by side, on one corpus.

    python benchmarks/benchmark.py (--docs N | --corpus PATH.parquet | --smoke) [--web] [--runs N]
        [--perm 128|64] [--scheme fss|blake2b] [--peers rensa,fastsketch-pre,...]
        [--recall-seeds N] [--skip-dagster] [--skip-library] [--workdir DIR] [--json-out FILE]
        [--engine duckdb|ray [--compare-engines] | --both-engines [--compare-engines]]
        [--ray-nodes N [--ray-object-store-mb MB]]
    python benchmarks/benchmark.py (--docs N | --smoke) --incremental K
        [--perm 128|64] [--scheme fss|blake2b] [--workdir DIR] [--json-out FILE]
    python benchmarks/benchmark.py --warc-fetch N [--workdir DIR] [--json-out FILE]
    python benchmarks/benchmark.py --docs N --copies-of-one C [--workdir DIR] [--json-out FILE]

The work is done by the ``dedup_bench`` package beside this script: ``corpus`` generates the
corpus (``--web``: the web-length one of ``web_corpus``, pages of log-normal length with their
sites' boilerplate), ``ours`` runs the Dagster CLI and the library core, ``peers`` runs one peer engine, each
in its own process, and ``report`` prints the tables. ``--incremental K`` runs ``incremental``
instead: the one-shot Dagster run, the same documents as K batches, and one small batch after
them. ``--docs N --copies-of-one C`` runs ``giant_group``: N documents of which C are copies of one
page, through ``dedup run``, with each step's peak memory and wall time. ``--warc-fetch N`` runs ``warc_fetch``: N WARC records fetched by byte range from a loopback
server. The machine is shared and noisy, so compare the runs of one invocation as ratios.

``--engine ray`` runs the Dagster graph on the ray engine (a local Ray started for the run) and no
library run; ``--both-engines`` runs it on duckdb and then on ray and prints the steps side by
side; ``--ray-nodes N`` runs the ray engine on a local cluster of N one-CPU nodes instead
(``ray_cluster``). Every Dagster run's steps get their seconds and the peak memory of the run's
whole process tree (``memory``), and, on a cluster, of every node's.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

from dedup_bench.common import REFERENCE, REPO_ROOT, THRESHOLD, BenchmarkError, append_json, is_reference
from dedup_bench.incremental_runs import measure_incremental
from dedup_bench.giant_group import measure_copies_of_one, print_copies_report
from dedup_bench.warc_fetch import measure_warc_fetch
from dedup_bench.measure import Options, measure
from dedup_bench.ours import warm_installation
from dedup_assets.core.settings.choices import ENGINES
from dedup_bench.peer_engines import ENGINES as PEER_ENGINES
from dedup_bench.incremental_report import print_incremental_report
from dedup_bench.report import precision_errors, print_report

DEFAULT_WORKDIR = REPO_ROOT / "var" / "bench"
SMOKE_DOCS = 2000
DEFAULT_OBJECT_STORE_MB = Options.ray_object_store_mb  # one default, the run options'
SMOKE_RECALL_SEEDS = 2
SMOKE_WEB_DOCS = 1000  # --smoke --web: the Dagster run only, to keep CI's added time short


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark dedup-assets (Dagster end to end and library core) and peer engines "
        "side by side on one corpus."
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--docs", type=int, help="generate an N-document corpus (cached in --workdir)"
    )
    source.add_argument(
        "--corpus", type=Path, help="an existing corpus (.parquet; recall needs its .truth.parquet)"
    )
    source.add_argument(
        "--warc-fetch",
        type=int,
        metavar="N",
        help="the Common Crawl fetch benchmark instead: N records of about 20 KB by byte range from "
        "a loopback server, as a local folder, and through the whole library pipeline",
    )
    source.add_argument(
        "--smoke",
        action="store_true",
        help=f"CI smoke run: --docs {SMOKE_DOCS}, both of our runs, no peers, recall over "
        f"{SMOKE_RECALL_SEEDS} seeds (with --incremental: that benchmark on {SMOKE_DOCS} docs; with "
        f"--web: {SMOKE_WEB_DOCS:,} web-length pages, the Dagster run only)",
    )
    parser.add_argument(
        "--copies-of-one",
        type=int,
        metavar="C",
        help="the giant copy group benchmark instead, with --docs N: the generated corpus of N - C "
        "documents and C copies of one page, through dedup run at the defaults, with each step's "
        "peak memory and wall time, and the copies' cluster",
    )
    parser.add_argument(
        "--web",
        action="store_true",
        help="generate the web-length corpus (dedup_bench.web_corpus: log-normal page lengths, "
        "median about 3 KB, a tail past 100 KB, sites' boilerplate, some pages mostly boilerplate; "
        "the same planted copies), with --docs N or --smoke",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        metavar="N",
        help="run each of our runs and each peer N times and count the smallest wall (default 1; "
        "the issues' figures take the smallest of 3)",
    )
    parser.add_argument(
        "--perm",
        type=int,
        choices=[128, 64],
        default=128,
        help="MinHash permutations; bands = perm / 8 of 8 rows (default 128)",
    )
    parser.add_argument(
        "--scheme", choices=["fss", "blake2b"], default="fss", help="hash scheme (default fss)"
    )
    parser.add_argument(
        "--auto-bands",
        type=float,
        metavar="WEIGHT",
        help="our runs choose their bands for the threshold (auto_bands) with this "
        "false_negative_weight, e.g. 0.9; the peers keep perm / 8 bands of 8 rows",
    )
    parser.add_argument(
        "--peers",
        default="",
        help=f"comma-separated peer engines, of {', '.join(PEER_ENGINES)}; e.g. rensa,fastsketch-pre",
    )
    parser.add_argument(
        "--recall-seeds",
        type=int,
        default=0,
        help="also measure planted-pair recall of the sketch and banding alone over N seeds, ours "
        "and every installed peer's sketch on the same shingle hashes (one run's recall is one "
        "draw)",
    )
    parser.add_argument(
        "--incremental",
        type=int,
        metavar="K",
        default=0,
        help="the incremental benchmark instead: the one-shot Dagster run over the --docs N "
        "documents, the same N as K batches through the Dagster CLI, then one batch of N/100 "
        "more, and whether the K batches' edges and clusters are the one-shot run's",
    )
    parser.add_argument("--skip-dagster", action="store_true", help="do not run the Dagster CLI")
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default=REFERENCE,
        help="the Dagster run's engine (the dedup resource's engine setting; default duckdb). ray: "
        "the steps on Ray Data on a local Ray started for the run (needs the ray extra), and no "
        "library run, which measures the reference engine, duckdb. Either way the report gives each step's seconds and "
        "the peak memory of the run's whole process tree",
    )
    parser.add_argument(
        "--compare-engines",
        action="store_true",
        help="ray runs only: let the engine_matches_duckdb check run the DuckDB engine again over "
        "corpora of up to the engine resource's compare_up_to_documents (200,000) documents and compare. "
        "Without it the benchmark sets compare_up_to_documents: 0 (the check warns that it did "
        "not compare), so the ray run measures the engine and not the check's second DuckDB run",
    )
    parser.add_argument(
        "--both-engines",
        action="store_true",
        help="run the Dagster graph on duckdb and then on ray over the same corpus, and print "
        "their steps side by side (seconds, peak memory, ray ÷ duckdb); the duckdb run is the "
        "reference of the other tables, and the library still runs",
    )
    parser.add_argument(
        "--ray-nodes",
        type=int,
        default=0,
        metavar="N",
        help="ray runs only: start a local Ray cluster of N nodes of one CPU each (head included; "
        "ray.cluster_utils), join it through DEDUP_RAY_ADDRESS as a run joins a ray up cluster, "
        "and report each node's peak memory per stage (default 0: a local Ray under the CLI)",
    )
    parser.add_argument(
        "--ray-object-store-mb",
        type=int,
        default=DEFAULT_OBJECT_STORE_MB,
        metavar="MB",
        help=f"with --ray-nodes: each node's object store (default {DEFAULT_OBJECT_STORE_MB}); Ray "
        "spills to disk beyond it",
    )
    parser.add_argument("--skip-library", action="store_true", help="do not run the library core")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help=f"corpora and run folders (default {DEFAULT_WORKDIR})",
    )
    parser.add_argument(
        "--json-out", type=Path, help="append one JSON record of the whole run to this file"
    )
    args = parser.parse_args(argv)
    check_engine(parser, args)
    if args.web and (args.docs is None and not args.smoke or args.incremental):
        parser.error("--web generates the web-length corpus: give --docs N or --smoke, without --incremental")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.copies_of_one is not None:
        if args.docs is None or not 1 <= args.copies_of_one <= args.docs or args.web or args.peers or args.incremental or args.recall_seeds:
            parser.error("--copies-of-one C takes --docs N with 1 ≤ C ≤ N, and none of --web, --peers, --incremental, --recall-seeds")
        return args
    for option, least, unit in (("warc_fetch", 1, "records"),):
        count = getattr(args, option)
        if count is not None:
            if count < least or args.peers or args.incremental or args.recall_seeds or args.auto_bands is not None:
                parser.error(f"--{option.replace('_', '-')} N takes N ≥ {least} {unit} and none of --peers, --incremental, --recall-seeds, --auto-bands")
            return args
    if args.incremental:
        check_incremental(parser, args)
    elif args.smoke:
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
    chosen = compared or args.compare_engines or args.ray_nodes
    if not chosen:
        return
    if args.warc_fetch is not None or args.incremental or args.smoke:
        parser.error(
            "--engine ray, --both-engines, --compare-engines and --ray-nodes are for the engines "
            "benchmark: not with --warc-fetch, --incremental or --smoke (the CI smoke run stays on duckdb)"
        )
    if args.skip_dagster:
        parser.error(
            "--engine ray, --both-engines, --compare-engines and --ray-nodes need the Dagster run: drop --skip-dagster"
        )
    if args.both_engines and not is_reference(args.engine):
        parser.error("--both-engines runs duckdb and then ray (duckdb's run is the reference): drop --engine")
    if args.compare_engines and not compared:
        parser.error("--compare-engines is for a ray run: add --engine ray or --both-engines")
    if args.ray_nodes and (args.ray_nodes < 2 or not compared):
        parser.error("--ray-nodes N takes N ≥ 2 nodes, for a ray run: add --engine ray or --both-engines")
    if args.ray_object_store_mb < 100:
        parser.error("--ray-object-store-mb must be at least 100")


def check_incremental(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The incremental benchmark generates its corpus and runs only our Dagster CLI, so it takes
    none of the engine options."""
    if args.corpus or args.peers or args.recall_seeds or args.skip_dagster or args.skip_library:
        parser.error(
            "--incremental generates its corpus and runs the Dagster CLI only: use --docs N or "
            "--smoke, without --corpus, --peers, --recall-seeds or --skip-*"
        )
    if args.smoke:
        args.docs = SMOKE_DOCS
    if not 1 <= args.incremental <= args.docs:
        parser.error("--incremental K needs 1 ≤ K ≤ the --docs N documents")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        return run(args, argv)
    except BenchmarkError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 1


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """The mode ``args`` ask for: its record printed, appended to ``--json-out``, and its exit code."""
    warm_installation()  # every mode times the kernels
    if args.copies_of_one:
        record = measure_copies_of_one(args.workdir.resolve(), args.docs, args.copies_of_one)
        print_copies_report(record)
        append_json(args.json_out, {"mode": "copies_of_one", "argv": argv, **record})
        return 0 if (record["copies_cluster_size"], record["copies_kept"]) == (args.copies_of_one, 1) else 1
    if args.warc_fetch:
        record = measure_warc_fetch(args.workdir, args.warc_fetch)
        print("\n".join(["## dedup-assets benchmark: WARC records by byte range", "", *record["lines"]]))
        append_json(args.json_out, {"mode": "warc_fetch", "argv": argv, **record})
        return 0
    # the options of the same name, and three that the command line spells otherwise
    options = Options(**{
        **{field.name: getattr(args, field.name) for field in fields(Options) if hasattr(args, field.name)},
        "workdir": args.workdir.resolve(),
        "false_negative_weight": args.auto_bands,
        "peers": [engine.strip() for engine in args.peers.split(",") if engine.strip()],
    })
    record = (measure_incremental if options.incremental else measure)(options, argv)
    (print_incremental_report if options.incremental else print_report)(record)
    append_json(args.json_out, record)
    if options.incremental:
        if not record["targets"]["equivalent"]:
            print("\nERROR: the batches' edges or clusters are not the one-shot run's (above).")
            return 1
        return 0
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
