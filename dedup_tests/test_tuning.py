"""Tuning you can see: bands chosen from the threshold (against an independent integration), the web
preset and what to set for more recall, the chosen bands in every place the settings
appear, and the pictures in metadata and in the release."""

import base64
import io
import logging

import numpy as np
import pyarrow as pa
import pytest
from dagster import DagsterInstance
from PIL import Image

from dedup_assets.checks import rules
from dedup_assets.core.lsh.scurve import choose_bands, lsh_probability
from dedup_assets.core.settings.model import Settings, SettingsError
from dedup_assets.core.pipeline.step_params import SketchParams
from dedup_assets.core.pipeline.sweep_settings import SweepCombination
from dedup_assets.core.sketch import kernels
from dedup_assets.core.sketch.minhash import lsh_band_keys
from dedup_assets.core.sketch.fingerprints import fingerprint_batch
from dedup_assets.core.text.normalize import kernel_text

from .conftest import FIXTURE, HARD_FIXTURE


# Gauss-Legendre with 128 nodes is exact for polynomials up to degree 255, and the S-curve
# 1 - (1 - s^r)^b has degree r * b <= num_perm <= 128: an exact integration, independent of the grid
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(128)


def _integral(function, low: float, high: float) -> float:
    half = (high - low) / 2.0
    return float(half * np.sum(_WEIGHTS * function(low + half * (_NODES + 1.0))))


def _weighted_error(threshold: float, bands: int, rows: int, weight: float) -> float:
    false_positive = _integral(lambda s: lsh_probability(s, bands, rows), 0.0, threshold)
    false_negative = _integral(lambda s: 1.0 - lsh_probability(s, bands, rows), threshold, 1.0)
    return (1.0 - weight) * false_positive + weight * false_negative


@pytest.mark.parametrize("threshold, num_perm, weight", [(0.7, 128, 0.9), (0.7, 64, 0.5), (0.5, 128, 0.5), (0.85, 32, 0.7)])
def test_chosen_bands_minimize_the_weighted_error_areas(threshold, num_perm, weight):
    bands, rows = choose_bands(threshold, num_perm, weight)
    assert bands * rows <= num_perm
    every = [(b, r) for b in range(1, num_perm + 1) for r in range(1, num_perm // b + 1)]
    best = min(_weighted_error(threshold, b, r, weight) for b, r in every)
    assert _weighted_error(threshold, bands, rows, weight) == pytest.approx(best, rel=1e-4, abs=1e-7)


def test_a_heavier_false_negative_weight_makes_more_of_the_threshold_pairs_candidates():
    chances = [lsh_probability(0.7, *choose_bands(0.7, 128, weight)) for weight in (0.3, 0.5, 0.9)]
    assert chances == sorted(chances) and chances[-1] > 0.9


def test_auto_bands_replaces_rows_per_band_and_may_use_fewer_values_than_num_perm():
    params = Settings(num_perm=128, auto_bands=True, false_negative_weight=0.9).sketch_params()
    assert (params.bands, params.rows_per_band) == choose_bands(0.7, 128, 0.9)
    derived = Settings(num_perm=128, auto_bands=True, false_negative_weight=0.9).derived()
    assert (derived["bands"], derived["rows_in_use"]) == (params.bands, params.rows_per_band)
    with pytest.raises(SettingsError, match="false_negative_weight must be between 0 and 1"):
        Settings(auto_bands=True, false_negative_weight=1.5)
    with pytest.raises(SettingsError, match="need more than num_perm"):
        SketchParams("fss", 5, 64, 8, 42, band_count=9)
    with pytest.raises(SettingsError, match="with auto_bands, num_perm must be between 1 and 512, got 0"):
        Settings(num_perm=0, auto_bands=True)


@pytest.mark.parametrize("scheme", ["fss", "blake2b"])
def test_chosen_bands_are_the_first_bands_of_the_signature(scheme):
    bodies = pa.array(["the quick brown fox jumps over the lazy dog " * 3, "a b c d e f g h i j k"])
    chosen = fingerprint_batch(pa.array(["x", "y"]), bodies, SketchParams(scheme, 5, 128, 6, 42, band_count=20))
    assert chosen.column("lsh_bands").type.list_size == 20
    signatures = np.array(chosen.column("signature").to_pylist(), dtype=np.uint64)
    if scheme == "blake2b":  # the published band keys of the signature's first 20 x 6 values
        first = [[int(key[4:], 16) for key in lsh_band_keys(row[:120], 6)] for row in signatures]
    else:  # the kernel's 21 bands of 6 rows of the same signatures
        first = kernels.fingerprint_kernel(
            kernel_text(bodies), 5, kernels.round_seeds(128, 42), 6, 1, kernels.NO_PROBES, kernels.NO_PROBE_FILTER
        )[4][:, :20]
    assert (np.array(chosen.column("lsh_bands").to_pylist(), dtype=np.uint64) == np.array(first, dtype=np.uint64)).all()


def test_the_web_preset_fills_the_settings_left_at_their_defaults_and_says_what_it_set():
    web = Settings(preset="web")
    assert (web.num_perm, web.auto_bands, web.false_negative_weight) == (128, True, 0.9)
    assert (web.sketch_params().bands, web.sketch_params().rows_per_band) == (20, 6)
    assert web.preset_settings() == {"num_perm": 128, "auto_bands": True, "false_negative_weight": 0.9}
    # a setting given another value keeps it; the preset says it set only the rest
    own = Settings(preset="web", num_perm=256)
    assert own.num_perm == 256 and own.preset_settings() == {"auto_bands": True, "false_negative_weight": 0.9}
    assert Settings().preset_settings() == {}
    with pytest.raises(SettingsError, match="preset must be one of web"):
        Settings(preset="news")
    # a sweep combination sets its settings itself, whatever the run's preset
    assert SweepCombination().applied_to(web).num_perm == 64


def test_more_recall_is_the_preset_then_bands_for_recall_then_none():
    changes, web = Settings().more_recall()
    assert changes == {"preset": "web"} and web.lsh_recall() > Settings().lsh_recall()
    changes, heavier = Settings(preset="web").more_recall()
    assert changes == {"auto_bands": True, "false_negative_weight": 0.98}
    assert (heavier.sketch_params().bands, heavier.sketch_params().rows_per_band) == (23, 5)
    assert heavier.more_recall() is None  # at 0.98 neither 128 nor 256 values make recall any higher


def _checks(result) -> dict:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def _metadata(result, asset: str) -> dict:
    return next(
        e.materialization.metadata for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == asset
    )


def _image(markdown: str) -> Image.Image:
    encoded = markdown.split("data:image/png;base64,", 1)[1].rstrip(")")
    return Image.open(io.BytesIO(base64.b64decode(encoded)))


def test_rescoring_at_a_lower_threshold_warns_once_measured_with_the_settings_that_find_more(runner):
    runner.run(HARD_FIXTURE, audit_sample_size=0)
    with DagsterInstance.ephemeral() as instance:
        # the README's re-scoring example, at 0.3: the stored candidates were banded for 0.7, and
        # the audit finds 9 of the 10 pairs at 0.3 or above
        result = runner.run(
            HARD_FIXTURE, selection="scored_pairs*", instance=instance, jaccard_threshold=0.3, audit_sample_size=0,
            min_recall=0.95,
        )
        logged = [entry for entry in instance.all_logs(result.run_id) if entry.level >= logging.WARNING]
    assert not logged  # nothing is said before the audit has measured
    check = _checks(result)["recall_reaches_min_recall"]
    assert not check.passed and "the pairs at J = 0.3 candidates" in check.description
    # run from Python: the preset for the run config, and the dedup.yaml line that keeps it
    assert check.description.endswith(
        'it finds more. Add to the run config (it lasts that run): {"resources": {"dedup": {"config": {"preset": "web"}}}}\n'
        "To keep it for every run, add to dedup.yaml in the folder you run from:\n  preset: web"
    )


def test_auto_bands_are_recorded_in_lineage_manifest_and_metadata_and_a_new_threshold_refingerprints(runner):
    result = runner.run(FIXTURE, num_perm=128, auto_bands=True, false_negative_weight=0.9)
    bands, rows = choose_bands(0.7, 128, 0.9)
    assert (runner.lineage("fingerprinted")["bands"], runner.lineage("fingerprinted")["rows_in_use"]) == (bands, rows)
    manifest = runner.manifest()
    assert (manifest["derived_settings"]["bands"], manifest["derived_settings"]["rows_in_use"]) == (bands, rows)
    assert _metadata(result, "candidate_pairs")["lsh_bands_in_use"].value == f"{bands} bands x {rows} rows (chosen by auto_bands)"
    assert _checks(result)["recall_reaches_min_recall"].passed
    # the bands follow the threshold, so a new one needs new fingerprints, and says so
    rescored = runner.run(
        FIXTURE, selection="scored_pairs*", raise_on_error=False,
        num_perm=128, auto_bands=True, false_negative_weight=0.9, jaccard_threshold=0.8,
    )
    assert not rescored.success
    failure = next(e for e in rescored.all_events if e.event_type_value == "STEP_FAILURE")
    assert "Re-materialize fingerprinted and everything downstream" in failure.step_failure_data.error.message


def test_the_three_pictures_are_in_metadata_and_in_the_release(runner):
    result = runner.run(FIXTURE)
    pictures = {
        "scurve.png": _metadata(result, "candidate_pairs")["scurve"].value,
        "jaccard_histogram.png": _metadata(result, "scored_pairs")["jaccard_histogram"].value,
        "cluster_sizes.png": _metadata(result, "clusters")["cluster_sizes"].value,
    }
    outputs = {o["file"]: o for o in runner.manifest()["outputs"]}
    for name, markdown in pictures.items():
        shown = _image(markdown)
        assert shown.size[0] > 100 and shown.format == "PNG"
        released = (runner.output_dir / name).read_bytes()
        assert base64.b64encode(released).decode() in markdown, name  # the same picture
        assert outputs[name]["rows"] == 1
