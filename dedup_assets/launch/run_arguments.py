"""``dedup run``'s options, parsed before the run's module loads Dagster and the definitions
(about 2 CPU seconds), so that its help and a mistyped option answer at once. The named jobs'
descriptions are here for the same reason: definitions.py gives them to the jobs it defines."""

from __future__ import annotations

import argparse
import json

from ..core.read.registry import NAMED_FORMATS

# ``dedup run --job`` picks one; the first is the default
JOB_DESCRIPTIONS = {
    "dedup_all": "Every asset of the deduplication graph, from the input to the release files.",
    "rescore": "Score the stored candidate pairs again and rebuild edges, clusters and the release.",
}


def run_arguments(argv: list[str]) -> tuple[argparse.Namespace, dict]:
    """The parsed options and the run config of ``--config-json``; exits as argparse does on a
    bad one."""
    parser = argparse.ArgumentParser(
        prog="dedup run",
        description="Run the deduplication graph in this process: one line per step, a problem said "
        "once at the end, and the counts of the release. The run and its full log are in the UI's "
        "run history (make dev) when DAGSTER_HOME is set, as make and env.sh set it.",
    )
    parser.add_argument(
        "--input", metavar="PATH", help=f"input file, folder or glob ({NAMED_FORMATS}); default: env DEDUP_INPUT, "
        "else data/documents.csv",
    )
    parser.add_argument(
        "--job", default="dedup_all", choices=list(JOB_DESCRIPTIONS),
        help=" ".join(f"{name}: {text}" for name, text in JOB_DESCRIPTIONS.items()) + " Default: dedup_all.",
    )
    parser.add_argument(
        "--config-json", default="{}",
        help='run config, as for dagster asset materialize: settings go in {"resources": {"dedup": '
        '{"config": {...}}}} (docs/settings.md)',
    )
    args = parser.parse_args(argv)
    try:
        config = json.loads(args.config_json)
    except json.JSONDecodeError as error:
        parser.error(f"--config-json is not JSON: {error}")
    if not isinstance(config, dict):
        parser.error('--config-json must be a JSON object, e.g. {"resources": {"dedup": {"config": {}}}}')
    return args, config
