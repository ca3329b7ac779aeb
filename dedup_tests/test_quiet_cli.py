"""`dedup run` as a newcomer meets it: its help, its --input, and the one line that says when the
audit measured too little recall, with a command that, run as given, finds more."""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PROJECT_ROOT, write_csv
from .test_cli import cli_env, run_command  # noqa: F401 (a fixture)

DEDUP = str(Path(sys.executable).with_name("dedup"))


def test_dedup_run_help_is_whole_and_names_every_option():
    result = run_command([DEDUP, "run", "--help"], {})
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "Run the deduplication graph in this process" in text and text.rstrip().endswith("(docs/settings.md)")
    assert "--input PATH input file, folder or glob" in text and "default: env DEDUP_INPUT" in text
    assert "dedup_all: Every asset of the deduplication graph" in text and "rescore: Score the stored" in text


def test_dedup_run_help_and_a_bad_option_answer_before_dagster_loads():
    script = (
        "import sys\nfrom dedup_assets.cli import main\n"
        "for argv in (['run', '--help'], ['run', '--config-json', '[]']):\n"
        "    try:\n        main(argv)\n    except SystemExit as end:\n        print('exit', end.code)\n"
        "print(sorted({'dagster', 'dedup_assets.definitions'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-3:] == ["exit 0", "exit 2", "[]"]
    assert "--config-json must be a JSON object" in result.stderr


def test_the_quiet_run_starts_without_what_only_some_steps_or_inputs_need():
    """Start-up is paid by every run: the HTTP client (WARC targets only), pictures and graphs
    (the steps that draw or cluster) load where they are used, not with the definitions."""
    unused = ("httpx", "idna", "matplotlib", "networkx")
    script = f"import sys, dedup_assets.run\nprint(sorted(set({unused!r}) & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_input_sets_the_input_over_dedup_input(cli_env, tmp_path):
    # the environment names the fixture; --input, a file that is not there, wins
    result = run_command([DEDUP, "run", "--input", str(tmp_path / "nowhere.csv")], cli_env)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        f"Error: {tmp_path / 'nowhere.csv'}: no such file. Set input_path (in dedup.yaml or the launchpad), dedup run --input, or DEDUP_INPUT to an input file, folder or glob."
    )


def light_edit_pages(path: Path, pages: int = 300, words: int = 300, seed: int = 7) -> Path:
    """``pages`` pages of random words, each with a copy in which 4 to 9 words are replaced: pairs
    of Jaccard about 0.73 to 0.87, where the published 8 x 8 bands find about four in five."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9))) for _ in range(5_000)]
    rows = []
    for page in range(pages):
        text = rng.choices(vocabulary, k=words)
        edited = list(text)
        for at in rng.sample(range(words), rng.randint(4, 9)):
            edited[at] = rng.choice(vocabulary)
        rows += [{"doc_id": f"page-{page:04d}", "body": " ".join(text)},
                 {"doc_id": f"page-{page:04d}-edited", "body": " ".join(edited)}]
    return write_csv(path, rows)


def _warnings(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if "warning:" in line or "Warning" in line]


def _audited_recall(env: dict) -> float:
    return json.loads((Path(env["DEDUP_OUTPUT_DIR"]) / "manifest.json").read_text())["recall_audit"]["recall"]


@pytest.mark.slow
def test_light_edits_get_one_warning_whose_command_raises_the_audited_recall(cli_env, tmp_path):
    pages = light_edit_pages(tmp_path / "pages.csv")
    # the input from --input, the user's own settings on the command line
    user_config = '{"resources": {"dedup": {"config": {"cluster_mode": "star"}}}}'
    first = run_command([DEDUP, "run", "--input", str(pages), "--config-json", user_config], cli_env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert _audited_recall(cli_env) < 0.9
    warnings = _warnings(first)
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("  warning: check recall_reaches_min_recall on recall_audit: recall 0.")
    # the user's own command again, their run config kept and the preset added
    command = warnings[0].split("it finds more. For this run only: ", 1)[1]
    arguments = shlex.split(command)
    assert arguments[1:4] == ["run", "--input", str(pages)]
    config = json.loads(arguments[arguments.index("--config-json") + 1])["resources"]["dedup"]["config"]
    assert config == {"cluster_mode": "star", "preset": "web"}
    # run as a user pastes it, from the project folder
    fixed = subprocess.run(
        ["bash", "-c", command], cwd=PROJECT_ROOT, env=cli_env, capture_output=True, text=True, timeout=300
    )
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert _audited_recall(cli_env) > 0.95 and not _warnings(fixed), fixed.stderr[-3000:]
    manifest = json.loads((Path(cli_env["DEDUP_OUTPUT_DIR"]) / "manifest.json").read_text())
    assert manifest["settings"]["cluster_mode"] == "star" and manifest["settings"]["preset"] == "web"
    assert manifest["derived_settings"]["preset_settings"] == {"num_perm": 128, "auto_bands": True, "false_negative_weight": 0.9}


def test_a_misspelled_setting_is_one_line_without_the_list_of_every_field(cli_env):
    config = '{"resources": {"dedup": {"config": {"jacard_threshold": 0.5}}}}'
    result = run_command([DEDUP, "run", "--config-json", config], cli_env)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "Running dedup_all …",
        "",
        'Error: the settings are not valid: Received unexpected config entry "jacard_threshold" at path '
        "root:resources:dedup:config. Every setting is in docs/settings.md.",
    ]


def test_a_refusal_is_said_alone_with_or_without_dagster_home(cli_env, tmp_path):
    """A refusal says what to do and nothing about where the run went, kept or not."""
    for env in (cli_env, {name: value for name, value in cli_env.items() if name != "DAGSTER_HOME"}):
        result = run_command([DEDUP, "run", "--input", str(tmp_path / "nowhere.csv")], env)
        assert result.returncode == 1
        assert result.stderr.splitlines()[-2:] == ["", f"Error: {tmp_path / 'nowhere.csv'}: no such file. " + (
            "Set input_path (in dedup.yaml or the launchpad), dedup run --input, or DEDUP_INPUT to an input file, "
            "folder or glob."
        )]
        assert "Run " not in result.stderr and "DAGSTER_HOME" not in result.stderr


@pytest.mark.slow
def test_a_run_in_a_project_folder_writes_only_ignored_files_and_says_no_warning(tmp_path):
    """As make run does it: from the project folder (its settings' defaults are in the code), with a
    DAGSTER_HOME inside it;
    afterwards git sees nothing new, and the output holds no warning of Dagster's or of ours."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    for name in (".gitignore", "data/documents.csv", "data/documents.expected.json"):
        (project / name).write_bytes((PROJECT_ROOT / name).read_bytes())
    home = project / ".dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(project)]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "project"]):
        subprocess.run([*git, *command], check=True, capture_output=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith(("DEDUP_", "DAGSTER_"))}
    result = run_command([DEDUP, "run"], {**env, "DAGSTER_HOME": str(home)}, cwd=project)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (project / "output" / "manifest.json").is_file() and (project / ".output.lock").is_file()
    status = subprocess.run([*git, "status", "--porcelain", "--untracked-files=all"], capture_output=True, text=True)
    assert status.stdout == ""
    output = result.stdout + result.stderr
    for noise in ("Warning", "warning:", "did not yield", "Not executing", "Traceback"):
        assert noise not in output, noise


def test_the_summary_ends_with_the_release_and_commands_that_open_and_check_it(cli_env, tmp_path):
    """Where the release went and how to open it, as the summary's last lines; each command runs
    as pasted, from where the run was started, into a release folder whose name has a space."""
    env = {**cli_env, "DEDUP_OUTPUT_DIR": str(tmp_path / "my release")}
    result = run_command([DEDUP, "run"], env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    release, opens, why = result.stdout.splitlines()[-3:]
    # below the working directory, the release is named as the user would type it
    assert release.startswith("Release files in my release/ (manifest.json lists them; ")
    check = release.split("lists them; ", 1)[1].removesuffix(" checks them).")
    checked = subprocess.run(["bash", "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and "every file matches manifest.json" in checked.stdout, checked.stderr
    assert opens.startswith("  kept documents: my release/deduped_documents/, e.g. ")
    shown = subprocess.run(
        ["bash", "-c", opens.split(", e.g. ", 1)[1]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr
    assert "billing-canonical" in shown.stdout and "cluster_size" in shown.stdout
    assert why == "  why each page was kept or removed: my release/clusters.csv"


@pytest.mark.slow
def test_the_recall_hint_names_what_falls_short_and_its_dedup_yaml_line_raises_it(cli_env, tmp_path):
    """Light edits: the summary's recall hint names the figures below min_recall and the setting
    that finds more, as a dedup.yaml line; written there, the next plain run finds more."""
    pages = light_edit_pages(tmp_path / "pages.csv")
    project = tmp_path / "project"
    project.mkdir()
    env = {key: value for key, value in cli_env.items() if key != "DEDUP_SETTINGS"}  # dedup.yaml of the cwd
    first = run_command([DEDUP, "run", "--input", str(pages)], env, cwd=project)
    assert first.returncode == 0, first.stderr[-3000:]
    hint = next(line for line in first.stdout.splitlines() if line.startswith("  recall hint"))
    # every true pair is a near copy here, so the near-copy figure is the total's, named once
    assert hint.startswith("  recall hint            recall 0.") and "near-copy" not in hint, hint
    assert "recall in Jaccard band [0.7, 0.8) 0." in hint and "below min_recall 0.9" in hint, hint
    line = hint.split("add to dedup.yaml to find more: ", 1)[1]
    assert line == 'preset: "web"'
    (project / "dedup.yaml").write_text(line + "\n")
    again = run_command([DEDUP, "run", "--input", str(pages)], env, cwd=project)
    assert again.returncode == 0, again.stderr[-3000:]
    assert _audited_recall(env) > 0.95 and "recall hint" not in again.stdout, again.stdout
