"""The Dagster UI in a real browser: a `dagster dev` started by the test materializes the fixture,
then headless Chromium (driven by Playwright) opens the UI and checks what a person would see: the
asset graph, the pictures in the metadata (loaded images, not just their Markdown) and the
candidate reduction; and, for two batches the sensor ran, each batch's checks under that batch.
Screenshots go to var/ui-screenshots/ (gitignored) for a look after a run.

Needs Chromium (Debian's `chromium`, /usr/bin/chromium; `.ci/run` installs it) and the `playwright`
package (the `dev` extra). Only a missing browser skips the test, and not under
`DEDUP_REQUIRE_BROWSER` (which `.ci/run` sets); `DEDUP_CHROMIUM` points it at another Chromium or
Chrome binary."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager

import pytest

from .conftest import PROJECT_ROOT
from .test_dagster_dev import RUNS, SENSOR_SECONDS, _graphql, dagster_dev, materialize_through_ui  # noqa: F401 (fixture)
from .test_incremental_assets import KEYS, write_batches

pytestmark = pytest.mark.browser

SCREENSHOTS = PROJECT_ROOT / "var" / "ui-screenshots"
# this machine's closed network makes Chromium hang on Google hosts without these
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",  # containers often give /dev/shm too little room for it
]
UI_TIMEOUT_MS = 30_000
GRAPH_ASSETS = [
    "documents", "rejected_documents", "fingerprinted", "band_memberships", "candidate_pairs", "scored_pairs",
    "duplicate_pairs", "reference_matches", "clusters", "deduped_documents", "manifest", "recall_audit", "evaluation",
    "boilerplate", "template_clusters",
]
# asset -> its metadata entries that are Markdown pictures (embedded PNG)
PICTURES = {"scored_pairs": "jaccard_histogram", "candidate_pairs": "scurve", "clusters": "cluster_sizes"}
MARKDOWN = """
{ assetNodes { assetKey { path }
    assetMaterializations(limit: 1) { metadataEntries {
      label ... on MarkdownMetadataEntry { mdStr } ... on TextMetadataEntry { text } } } } }
"""


def _chromium() -> str | None:
    candidates = [os.environ.get("DEDUP_CHROMIUM"), "/usr/bin/chromium"]
    candidates += [shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")]
    return next((c for c in candidates if c and os.access(c, os.X_OK)), None)


@pytest.fixture
def chromium():
    # requested before dagster_dev: no server is started for a test that is skipped
    executable = _chromium()
    if executable is None:
        reason = "no Chromium found (apt-get install chromium, or set DEDUP_CHROMIUM to a Chromium binary)"
        if os.environ.get("DEDUP_REQUIRE_BROWSER"):  # CI installed it: a missing browser is a failure there
            pytest.fail(reason)
        pytest.skip(reason)
    return executable


def _loaded_picture(page, entry: str) -> dict:
    """Opens the metadata entry's "[Show Markdown]" on the asset's overview page and waits until
    the picture in the dialog has loaded; returns the image's src prefix and size."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout, expect

    row = page.locator("tr").filter(has=page.get_by_text(entry, exact=True))
    expect(row).to_have_count(1, timeout=UI_TIMEOUT_MS)
    row.get_by_text("[Show Markdown]").click()
    dialog = page.get_by_role("dialog").filter(has_text=entry)
    image = dialog.locator("img")
    expect(image).to_have_count(1, timeout=UI_TIMEOUT_MS)
    expect(image).to_be_visible(timeout=UI_TIMEOUT_MS)
    try:
        page.wait_for_function(
            "img => img.complete && img.naturalWidth > 0", arg=image.element_handle(), timeout=UI_TIMEOUT_MS
        )
    except PlaywrightTimeout:  # the caller's assertion says what was loaded instead
        pass
    return image.evaluate(
        "img => ({src: img.src.slice(0, 22), complete: img.complete,"
        " naturalWidth: img.naturalWidth, naturalHeight: img.naturalHeight})"
    )


def _close_dialog(page) -> None:
    from playwright.sync_api import expect

    page.get_by_role("dialog").get_by_role("button", name="Close").click()
    expect(page.get_by_role("dialog")).to_have_count(0, timeout=UI_TIMEOUT_MS)


def test_the_ui_shows_the_graph_the_pictures_and_the_reduction(chromium, dagster_dev):
    from playwright.sync_api import expect

    port, tmp_path = dagster_dev
    materialize_through_ui(port, tmp_path, "dedup_assets", GRAPH_ASSETS)

    # what the UI will render: the pictures are Markdown with an embedded PNG
    nodes = {n["assetKey"]["path"][-1]: n for n in _graphql(port, MARKDOWN)["assetNodes"]}
    for asset, entry in PICTURES.items():
        entries = {e["label"]: e for e in nodes[asset]["assetMaterializations"][0]["metadataEntries"]}
        assert entry in entries, (asset, sorted(entries))
        assert "](data:image/png;base64," in (entries[entry].get("mdStr") or ""), (asset, entry)
    # the community sign-up dialog the UI opens on 127.0.0.1 would cover the page
    assert _graphql(port, "mutation { setNuxSeen }")["setNuxSeen"] is True

    base = f"http://127.0.0.1:{port}"
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    with _page(chromium) as page:
        # the deduplication group's asset graph: one node per asset
        page.goto(f"{base}/locations/dedup_assets/asset-groups/deduplication")
        graph = page.locator("svg foreignObject")
        for asset in GRAPH_ASSETS:
            expect(graph.get_by_text(asset, exact=True)).to_be_visible(timeout=UI_TIMEOUT_MS)
        page.screenshot(path=SCREENSHOTS / "asset_graph.png")

        # candidate_pairs: the reduction, as rendered in its metadata table, and its S-curve
        page.goto(f"{base}/assets/candidate_pairs")
        reduction = page.locator("tr").filter(has=page.get_by_text("pair_reduction", exact=True))
        expect(reduction).to_contain_text("276 → 18, 93.48% fewer", timeout=UI_TIMEOUT_MS)
        page.screenshot(path=SCREENSHOTS / "candidate_pairs.png")

        for asset, entry in PICTURES.items():
            page.goto(f"{base}/assets/{asset}")
            picture = _loaded_picture(page, entry)
            # the dialog fades in: a screenshot taken as is may catch it half transparent
            page.screenshot(path=SCREENSHOTS / f"{asset}_{entry}.png", animations="disabled")
            assert picture["src"] == "data:image/png;base64,", (asset, entry, picture)
            assert picture["complete"] and picture["naturalWidth"] > 0 and picture["naturalHeight"] > 0, (
                asset, entry, picture,
            )
            _close_dialog(page)


@contextmanager
def _page(chromium: str):
    """A page of headless Chromium with a fresh profile; a failure leaves failure.png."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        context = playwright.chromium.launch_persistent_context(
            profile,  # a fresh user-data-dir
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1400, "height": 1000},
        )
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        try:
            yield page
        except Exception:
            page.screenshot(path=SCREENSHOTS / "failure.png", full_page=True)
            raise
        finally:
            context.close()


CHECK = "batch_removals_name_kept_documents"
CHECK_EXECUTIONS = """
query Executions($partition: String!) {
  assetCheckExecutions(assetKey: {path: ["batch_clusters"]}, checkName: "%s", partition: $partition, limit: 1) {
    partition status evaluation { description } } }
""" % CHECK


def _batch_runs_finish(port: int, keys: list[str]) -> dict[str, str]:
    """Waits until the sensor's run of each of ``keys`` has finished; partition -> its status."""
    deadline = time.monotonic() + SENSOR_SECONDS
    while True:
        statuses = {}
        for run in _graphql(port, RUNS)["runsOrError"]["results"]:  # newest first
            partition = {tag["key"]: tag["value"] for tag in run["tags"]}.get("dagster/partition")
            statuses.setdefault(partition, run["status"])
        if all(statuses.get(key) in ("SUCCESS", "FAILURE", "CANCELED") for key in keys):
            return {key: statuses[key] for key in keys}
        assert time.monotonic() < deadline, statuses
        time.sleep(2)


def test_the_ui_shows_each_batch_s_checks_under_that_batch(chromium, dagster_dev):
    from playwright.sync_api import expect

    port, tmp_path = dagster_dev
    keys = KEYS[:2]
    write_batches(tmp_path / "batches", keys)  # the sensor adds them as partitions and runs them in key order
    assert _batch_runs_finish(port, keys) == {key: "SUCCESS" for key in keys}

    # what the UI will render: one result per batch through the GraphQL API; batch 2 removes a
    # document for one batch 1 kept, batch 1 for none of an earlier batch
    described = {}
    for key in keys:
        [execution] = _graphql(port, CHECK_EXECUTIONS, {"partition": key})["assetCheckExecutions"]
        assert (execution["partition"], execution["status"]) == (key, "SUCCEEDED"), execution
        described[key] = execution["evaluation"]["description"]
    assert described[keys[0]].endswith("(0 in earlier batches)"), described
    assert described[keys[1]].endswith("(1 in earlier batches)"), described
    assert _graphql(port, "mutation { setNuxSeen }")["setNuxSeen"] is True

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with _page(chromium) as page:
        page.goto(f"http://127.0.0.1:{port}/assets/batch_clusters?view=checks&checkDetail={CHECK}")
        # the check's own tabs (the asset's have a Partitions tab too)
        check_tabs = page.get_by_role("tablist").filter(has=page.get_by_role("tab", name="Execution history"))
        check_tabs.get_by_role("tab", name="Partitions").click()
        for key in reversed(keys):
            # the key in the partition list, below the partition range selector's tag of it
            page.locator(f'[data-tooltip="{key}"]').last.click()
            # the partition's detail: its key over its status, latest execution, description and
            # metadata (the innermost element holding them all comes last in document order)
            detail = page.locator("div").filter(has_text="Latest execution").filter(has_text="Description").last
            expect(detail).to_contain_text(key, timeout=UI_TIMEOUT_MS)
            expect(detail).to_contain_text("Passed")
            expect(detail).to_contain_text(described[key], timeout=UI_TIMEOUT_MS)
            for other in keys:
                if other != key:
                    expect(detail).not_to_contain_text(described[other])
            page.screenshot(path=SCREENSHOTS / f"batch_clusters_checks_{key}.png")
