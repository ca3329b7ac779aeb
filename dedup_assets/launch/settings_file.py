"""The settings file: ``dedup.yaml`` in the working directory, or the file ``DEDUP_SETTINGS``
names. Its keys are the ``dedup`` resource's fields; the resource reads it when a run sets it up
(``DedupSettings.create_resource``), never when the definitions load, and the run config wins over
it (docs/settings.md, "The settings file")."""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..core.util.errors import DedupError
from .environment import SETTINGS_FILE

FIX = "Fix or remove it there (docs/settings.md says what each setting takes); a value in the run config wins over the file's."


class SettingsFileError(DedupError, ValueError):
    """A settings file that cannot be read, or holds a key or value the dedup resource refuses."""


@dataclass(frozen=True)
class SettingsFile:
    path: Path  # absolute: where the values came from, as manifest.json's settings_sources says
    values: dict

    def invalid(self, error: ValidationError) -> SettingsFileError:
        """``error``, raised by the resource made with this file's values, in one sentence naming
        the file and the key."""
        first = error.errors()[0]
        cause = (first.get("ctx") or {}).get("error")
        # a field's own type or choice, or the library's check (whose message names the setting)
        problem = f"{first['loc'][0]}: {first['msg']}" if first["loc"] else str(cause or first["msg"])
        return SettingsFileError(f"{self.path}: {problem.rstrip('.')}. {FIX}")


def read_settings_file(keys: Collection[str]) -> SettingsFile | None:
    """The settings file's values, each key one of ``keys``; None when ``DEDUP_SETTINGS`` is unset
    and the working directory has no ``dedup.yaml``. The values are checked by the resource."""
    named = os.environ.get(SETTINGS_FILE.name)
    path = Path(named or SETTINGS_FILE.default).expanduser()
    if not path.exists():
        if named:
            raise SettingsFileError(
                f"{SETTINGS_FILE.name}={named}: no such file. Point it at your settings file, or unset it "
                f"to read {SETTINGS_FILE.default} in the working directory when there is one."
            )
        return None
    path = path.resolve()
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsFileError(f"{path}: cannot be read as a settings file ({error}).") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SettingsFileError(f"{path}: not valid YAML{where}: {problem}. Write one `setting: value` a line.") from None
    if values is None:  # empty, or only comments
        return SettingsFile(path, {})
    if not isinstance(values, dict):
        raise SettingsFileError(
            f"{path}: holds a {type(values).__name__}, not settings. Write one `setting: value` a line, "
            "e.g. `jaccard_threshold: 0.8`."
        )
    for key in values:
        if key not in keys:
            close = difflib.get_close_matches(str(key), list(keys), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise SettingsFileError(f"{path}: unknown key {key!r}{hint}: its keys are the dedup resource's settings. {FIX}")
    return SettingsFile(path, values)
