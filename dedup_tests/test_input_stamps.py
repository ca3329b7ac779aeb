"""Issue 52, hash the input once: documents takes each input file's stamp (size, modification
time, inode, change time) and sha256 as it reads it; at release a file is hashed again only when
its stamp differs, a touch is published and said, and an edit stops the release naming the file,
what changed and the command that reads it again."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from dagster import DagsterInstance

from dedup_assets.core.read.ingest import confirmed_input
from dedup_assets.core.read import InputError, InputFile, describe_input, file_sha256
from dedup_assets.launch.user_messages import user_message

from .conftest import FIXTURE, GraphRunner, sha256_of_files
from .test_cli import DEDUP, cli_env, run_command  # noqa: F401 (cli_env: a fixture)

EDIT = (b"support", b"helpdesk")  # a word of the fixture (in its second half), and one of another length
SAME_LENGTH = (b"billing", b"BILLING")


def _logged(runner: GraphRunner, path, selection="*"):
    """The run's result, and its steps' own log lines (not Dagster's events)."""
    with DagsterInstance.ephemeral() as instance:
        result = runner.run(path, selection=selection, raise_on_error=False, instance=instance)
        return result, [entry.user_message for entry in instance.all_logs(result.run_id) if entry.dagster_event is None]


def _refusal(result) -> str:
    assert not result.success
    return user_message(result.get_step_failure_events()[0].step_failure_data.error)


def _input(tmp_path):
    path = tmp_path / "in.csv"
    path.write_bytes(FIXTURE.read_bytes())
    return path


def test_an_unchanged_input_is_not_hashed_again_at_release(tmp_path):
    runner, path = GraphRunner(tmp_path), _input(tmp_path)
    result, logged = _logged(runner, path)
    assert result.success
    said = "the input's 1 file is as documents read it (same size, modification time, inode and change time), so not hashed again"
    assert said in logged
    assert not [line for line in logged if "hashed again:" in line]
    assert runner.manifest()["input"]["sha256"] == file_sha256(path)


def test_a_touched_input_is_hashed_again_and_published_saying_so(tmp_path):
    runner, path = GraphRunner(tmp_path), _input(tmp_path)
    assert runner.run(path).success
    published = runner.manifest()["input"]
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))  # the same bytes
    result, logged = _logged(runner, path, selection="manifest")
    assert result.success
    assert (
        f"{path}: its modification time and change time changed since documents read it, but not its bytes "
        "(hashed again: the same sha256), so the release is published"
    ) in logged
    assert runner.manifest()["input"] == published


def test_an_edit_that_keeps_the_size_and_puts_the_modification_time_back_is_caught_by_the_change_time(tmp_path):
    """On Linux (and macOS, and the BSDs) every write and every utime sets the change time, which
    no call can set back. Where a file system keeps no change time (Windows, whose st_ctime is the
    creation time), such an edit is not caught: docs/assets-and-release.md says so."""
    runner, path = GraphRunner(tmp_path), _input(tmp_path)
    assert runner.run(path).success
    published = sha256_of_files(runner.output_dir)
    before = path.stat()
    path.write_bytes(FIXTURE.read_bytes().replace(*SAME_LENGTH))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    result, _ = _logged(runner, path, selection="manifest")
    message = _refusal(result)
    assert message.startswith(
        f"{path}: changed since documents read it: its change time differs, and its bytes too (hashed again). "
        "The release was not written: the release folder holds the last whole one."
    ), message
    assert sha256_of_files(runner.output_dir) == published


def test_a_folder_with_one_file_touched_and_one_edited_names_the_edited_one(tmp_path):
    folder = tmp_path / "pages"
    folder.mkdir()
    rows = FIXTURE.read_bytes().splitlines(keepends=True)
    (folder / "a.csv").write_bytes(b"".join(rows[:13]))
    (folder / "b.csv").write_bytes(rows[0] + b"".join(rows[13:]))
    runner = GraphRunner(tmp_path)
    assert runner.run(folder).success
    os.utime(folder / "a.csv", ns=(0, 10**18))
    (folder / "b.csv").write_bytes((folder / "b.csv").read_bytes().replace(*EDIT))
    message = _refusal(runner.run(folder, selection="manifest", raise_on_error=False))
    assert message.startswith(
        f"{folder / 'b.csv'}: changed since documents read it: its size, modification time and change time "
        "differ, and its bytes too (hashed again)."
    ), message
    assert "a.csv" not in message


@pytest.mark.slow  # three dedup run CLI processes: 35 s with the machine to itself, 110 s on a busy one
def test_an_edited_input_stops_dedup_run_with_the_command_that_reads_it_again(cli_env, tmp_path):
    """`dedup run --job rescore` rebuilds the release from the stored documents: an input edited
    since is refused, naming it, and the `dedup run` command the refusal prints (the whole graph)
    reads it again and publishes."""
    path = _input(tmp_path)
    env = {name: value for name, value in cli_env.items() if name != "DEDUP_INPUT"}
    assert run_command([DEDUP, "run", "--input", str(path)], env, cwd=tmp_path).returncode == 0
    released = tmp_path / "out"
    published = sha256_of_files(released)
    path.write_bytes(FIXTURE.read_bytes().replace(*EDIT))
    refused = run_command([DEDUP, "run", "--input", str(path), "--job", "rescore"], env, cwd=tmp_path)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert (
        f"{path}: changed since documents read it: its size, modification time and change time differ, "
        "and its bytes too (hashed again). The release was not written"
    ) in output, output[-3000:]
    assert "Traceback" not in output
    assert sha256_of_files(released) == published
    command = re.search(r"^Run: (.+)$", output, flags=re.M).group(1)
    assert f" run --input {path}" in command and "--job" not in command
    again = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert (released / "manifest.json").exists()
    assert sha256_of_files(released) != published
    assert file_sha256(path) in (released / "manifest.json").read_text()


def test_tables_of_an_older_version_have_the_whole_input_hashed_again(tmp_path):
    """Stamps without their file's sha256 (as d9f18ad wrote them), or none: the release's check
    hashes the whole input again and compares it with the input's sha256."""
    path = _input(tmp_path)
    found = describe_input(path)
    older = InputFile(found.path, found.byte_size, found.sha256, stamps=tuple(stamp[:5] for stamp in found.stamps))
    lines: list[str] = []
    assert confirmed_input(older, None, "the release", lines.append) == "the release"
    assert lines == [f"{path}: hashed again, as tables of an older version keep no hash per file: the same sha256"]
    path.write_bytes(FIXTURE.read_bytes().replace(*EDIT))
    with pytest.raises(InputError) as raised:
        confirmed_input(older, None, "the release", lines.append)
    assert str(raised.value).startswith(f"{path}: changed since documents read it: the input's sha256 differs (hashed again).")
    assert raised.value.select == "group:deduplication"
