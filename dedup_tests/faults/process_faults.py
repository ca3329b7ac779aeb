"""Release and process faults, on the real CLI in processes of its own: a run killed (-9) while
it writes a release or at a step, stopped by SIGTERM, raced by another run, locked out of its
output folder, or writing to a full or read-only file system. The old release must stay whole,
the next run must clean up after a dead one, and a refusal must say why."""

from __future__ import annotations

import fcntl
import json
import signal
import subprocess
import time
from pathlib import Path

from dedup_assets.core.release.files import MANIFEST_FILE

from .fault_runs import (
    Cli,
    folder_bytes,
    place_release,
    remains,
    run_cli,
    run_status,
    started_runs,
    tmpfs,
)
from .outcome import Outcome, Work, describe_release

STEP_LINES = (
    "documents (",
    "fingerprinted (",
    "band_memberships (",
    "candidate_pairs (",
    "scored_pairs (",
    "duplicate_pairs (",
    "clusters (",
)


def kill_during_release(work: Work) -> Outcome:
    out = work.folder / "out"
    before = place_release(work.release_a, out)
    labels = {work.corpus_small: "A", work.corpus_a: "B"}
    victim = Cli(work.folder, work.corpus_a)
    written = victim.wait_for_staging_file()
    victim.signal(signal.SIGKILL)
    victim.finish()
    outcome = Outcome(
        f"kill -9 of run B once `{written}` is in its staging folder, old release A in place"
    )
    outcome.expect(written is not None, "the run never wrote into a staging folder")
    after_kill, whole = describe_release(out, labels)
    intact = (out / MANIFEST_FILE).read_text() == before
    outcome.expect(intact and whole, "release A changed")
    left_started = started_runs(work.folder)
    returncode, again = run_cli(work.folder, work.corpus_a)
    marked = again.said(f"its process ({victim.process.pid}) is gone; marked failed")
    killed_run = left_started[0].dagster_run.run_id if left_started else None
    status = run_status(work.folder, killed_run) if killed_run else "not recorded"
    cleaned = again.said("removed what a killed run left beside")
    outcome.release, outcome.release_whole = describe_release(out, labels)
    outcome.release = f"after kill: {after_kill}; after rerun: {outcome.release}"
    outcome.release_whole &= whole
    outcome.expect(returncode == 0, f"rerun failed: {again.error}")
    outcome.expect(outcome.release.endswith("B, verifies"), "the rerun's release is not B")
    outcome.expect(marked and status == "FAILURE", f"the dead run is {status}")
    outcome.expect(cleaned and not remains(out), f"remains: {remains(out)}")
    outcome.observed = (
        f"release A {'intact' if intact else 'CHANGED'} after the kill ({len(left_started)} run "
        f"left started); rerun exit {returncode}, "
        f"{'cleaned the remains' if cleaned else 'did not report remains'}, "
        f"{'marked the dead run failed' if marked else 'did not mark the dead run'} "
        f"(now {status}); "
        f"remains now: {remains(out) or 'none'}"
    )
    return outcome


def kill_at_a_step(work: Work) -> Outcome:
    step = work.rng.choice(STEP_LINES)
    returncode, clean = run_cli(
        work.folder, work.corpus_a, database="clean.duckdb", output=work.folder / "clean"
    )
    victim = Cli(work.folder, work.corpus_a)
    reached = victim.wait_for_line(step)
    victim.signal(signal.SIGKILL)
    victim.finish()
    again_code, again = run_cli(work.folder, work.corpus_a)
    out = work.folder / "out"
    outcome = Outcome(
        f"kill -9 right after the `{step.strip(' (')}` step, then a rerun on the same database"
    )
    outcome.expect(returncode == 0, f"undisturbed run failed: {clean.error}")
    outcome.expect(reached, f"the run ended before the step: {victim.error}")
    outcome.expect(again_code == 0, f"rerun failed: {again.error}")
    identical, differing = [], []
    if again_code == 0 and returncode == 0:

        def hashes(folder: Path) -> dict:
            return {
                entry["file"]: entry["sha256"]
                for entry in json.loads((folder / MANIFEST_FILE).read_text())["outputs"]
            }

        ours, theirs = hashes(out), hashes(work.folder / "clean")
        identical = [name for name in theirs if ours.get(name) == theirs[name]]
        differing = sorted(set(theirs) - set(identical))
    outcome.expect(
        again_code == 0 and not differing, f"files differ from the undisturbed run: {differing}"
    )
    left = started_runs(work.folder)
    outcome.expect(not left, f"{len(left)} run(s) still started")
    outcome.release, outcome.release_whole = describe_release(out, {work.corpus_a: "B"})
    outcome.release += (
        f"; {len(identical)}/{len(identical) + len(differing)} files byte-identical to an "
        "undisturbed run"
    )
    marked = again.said("is gone; marked failed")
    outcome.observed = (
        f"rerun exit {again_code}{'' if again_code == 0 else ': ' + again.error}; "
        f"{'the dead run marked failed' if marked else 'no dead run reported'}; "
        f"started runs after the rerun: {len(left)}"
    )
    return outcome


def sigterm_during_release(work: Work) -> Outcome:
    out = work.folder / "out"
    before = place_release(work.release_a, out)
    labels = {work.corpus_small: "A", work.corpus_a: "B"}
    victim = Cli(work.folder, work.corpus_a)
    written = victim.wait_for_staging_file()
    returncode, exit_seconds = victim.terminate(timeout=60)
    status = [record.dagster_run.status.value for record in started_runs(work.folder)]
    intact = (out / MANIFEST_FILE).read_text() == before
    after_term, whole = describe_release(out, labels)
    left_beside = remains(out)
    again_code, again = run_cli(work.folder, work.corpus_a)
    still_started = started_runs(work.folder)
    outcome = Outcome(
        f"SIGTERM to run B once `{written}` is in its staging folder, old release A in place"
    )
    outcome.expect(written is not None, "the run never wrote into a staging folder")
    outcome.expect(exit_seconds < 60, "the run did not exit within 60 s of SIGTERM")
    outcome.expect(intact and whole, "release A changed")
    outcome.expect(
        not still_started, f"{len(still_started)} run(s) still started after the next run"
    )
    outcome.expect(again_code == 0, f"next run failed: {again.error}")
    outcome.release, next_whole = describe_release(out, labels)
    outcome.release = f"after SIGTERM: {after_term}; after the next run: {outcome.release}"
    outcome.release_whole = whole and next_whole
    outcome.observed = (
        f"exit {returncode} {exit_seconds:.1f} s after SIGTERM ({victim.error}); runs left "
        f"started: {len(status)}; staging left: {left_beside or 'none'}; next run exit "
        f"{again_code}, started runs then: {len(still_started)}"
    )
    return outcome


def concurrent_runs(work: Work) -> Outcome:
    out = work.folder / "out"
    runs = [
        Cli(work.folder, work.corpus_a, database="a.duckdb"),
        Cli(work.folder, work.corpus_b, database="b.duckdb"),
    ]
    codes = [run.finish() for run in runs]
    outcome = Outcome(
        "two runs (inputs B and C, two databases) started together on one output folder"
    )
    for code, run in zip(codes, runs):
        outcome.expect(
            code == 0 or run.said("Another run is writing a release to"),
            f"a run failed otherwise: {run.error}",
        )
    outcome.expect(0 in codes, "neither run wrote a release")
    outcome.release, outcome.release_whole = describe_release(
        out, {work.corpus_a: "B", work.corpus_b: "C"}
    )
    outcome.expect(not remains(out), f"remains: {remains(out)}")
    outcome.observed = (
        "; ".join(
            f"{name}: exit {code}" + ("" if code == 0 else f" ({run.error})")
            for name, code, run in zip("BC", codes, runs)
        )
        + f"; remains: {remains(out) or 'none'}"
    )
    return outcome


def held_lock(work: Work) -> Outcome:
    out = work.folder / "out"
    with open(work.folder / ".out.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write(
            json.dumps({"pid": 4242, "host": "crawler-7", "started": 0, "database": "x.duckdb"})
        )
        lock.flush()
        cli = Cli(work.folder, work.corpus_small)
        cli.wait_for_line("deduped_documents (")
        reached = time.monotonic()
        returncode = cli.finish()
    waited = time.monotonic() - reached
    outcome = Outcome("another process holds the output folder's lock (flock) for the whole run")
    named = cli.said(f"Another run is writing a release to {out} (process 4242 on crawler-7")
    outcome.expect(returncode == 1 and named, f"not refused naming the holder: {cli.error}")
    outcome.expect(waited < 10, f"waited {waited:.1f} s at the release step")
    outcome.expect("Traceback" not in "\n".join(cli.lines), "printed a traceback")
    outcome.release, outcome.release_whole = describe_release(out, {})
    outcome.observed = (
        f"exit {returncode} {waited:.1f} s after the last step (run {cli.seconds:.0f} s): "
        f"{cli.error}"
    )
    return outcome


def full_disk(work: Work) -> Outcome:
    disk = work.folder / "disk"
    out = disk / "out"
    # room for the old release and half of the new one's largest file
    size = folder_bytes(work.release_a) + work.corpus_a.stat().st_size // 2
    with tmpfs(disk, size) as mounted:
        if not mounted:
            return Outcome("output folder on a full tmpfs", "skipped: mounting not permitted")
        before = place_release(work.release_a, out)
        returncode, cli = run_cli(work.folder, work.corpus_a, output=out)
        outcome = Outcome(
            f"output folder on a {size / 2**20:.0f} MB tmpfs holding old release A; "
            "run B needs more"
        )
        outcome.expect(
            returncode == 1 and "no space" in cli.error.lower() and str(disk) in cli.error,
            f"not a clear no-space error naming the path: {cli.error}",
        )
        outcome.expect((out / MANIFEST_FILE).read_text() == before, "release A changed")
        outcome.expect(not remains(out), f"remains: {remains(out)}")
        outcome.release, outcome.release_whole = describe_release(
            out, {work.corpus_small: "A", work.corpus_a: "B"}
        )
        outcome.observed = f"exit {returncode}: {cli.error}; remains: {remains(out) or 'none'}"
    return outcome


def read_only_output(work: Work) -> Outcome:
    disk = work.folder / "disk"
    out = disk / "out"
    with tmpfs(disk, folder_bytes(work.release_a) + 2**20) as mounted:
        if not mounted:
            return Outcome(
                "output folder on a read-only file system", "skipped: mounting not permitted"
            )
        before = place_release(work.release_a, out)
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        returncode, cli = run_cli(work.folder, work.corpus_small, output=out)
        outcome = Outcome("output folder on a tmpfs remounted read-only, old release A in it")
        outcome.expect(
            returncode == 1 and "read-only" in cli.error,
            f"not a clear read-only error: {cli.error}",
        )
        outcome.expect((out / MANIFEST_FILE).read_text() == before, "release A changed")
        outcome.release, outcome.release_whole = describe_release(out, {work.corpus_small: "A"})
        outcome.observed = f"exit {returncode}: {cli.error}"
    return outcome

