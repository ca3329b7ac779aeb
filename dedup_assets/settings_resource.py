"""The ``dedup`` resource: every algorithm setting of a run, typed and checked at launch, and
where the input and the release files are.

Its algorithm fields are made from :class:`core.settings.model.Settings`, where each setting's type,
default, step and description are written once (a choice among names becomes an enum, as Dagster
config takes), and a sweep combination's from :class:`core.pipeline.sweep_settings.SweepCombination`; the
sweep's other fields and the paths' are its own. Every field is set in the launchpad
or with ``--config-json '{"resources": {"dedup": {"config": {...}}}}'``, or in the settings file
(``launch/settings_file.py``), which the run config wins over.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, Field as DataclassField, asdict, fields
from enum import Enum
from pathlib import Path
from types import NoneType, UnionType
from typing import Literal, Union, get_args, get_origin, get_type_hints

from dagster import Config, ConfigurableResource, InitResourceContext
from pydantic import Field, PrivateAttr, ValidationError, create_model, model_validator

from .core.release.publish import check_output_folder
from .core.read.registry import NAMED_FORMATS
from .core.release.pointer import pointer_path
from .core.settings.model import Settings
from .core.settings.lineage import value_sources
from .core.pipeline.sweep_settings import SweepCombination, SweepSettings
from .core.storage.tables import TABLE_LAYOUT
from .launch.environment import CACHE, INPUT, LABELS, OUTPUT_DIR
from .launch.settings_file import SettingsFile, read_settings_file

SWEEP_DEFAULTS = SweepSettings()
RESOURCE_KEY = "dedup"  # the resource's key in the definitions and in the run config
# fields whose variable, when set (as `dedup run --input` sets DEDUP_INPUT), wins over the settings file
FIELD_VARIABLES = {"input_path": INPUT, "output_dir": OUTPUT_DIR, "labels_path": LABELS, "fetch_cache": CACHE}


def _config_field(setting: DataclassField, hint) -> tuple:
    """A field of :class:`Settings` (or :class:`SweepCombination`) as a config field: its type,
    default and description. A choice among names (``Literal``) becomes an enum named after the setting
    (hash_scheme: ``HashScheme``), optional where the setting is, as Dagster config takes it."""
    optional = get_origin(hint) in (Union, UnionType) and NoneType in get_args(hint)
    inner = next(arg for arg in get_args(hint) if arg is not NoneType) if optional else hint
    default = setting.default
    if get_origin(inner) is Literal:
        choices = Enum("".join(part.title() for part in setting.name.split("_")), {v: v for v in get_args(inner)}, type=str)
        hint = choices | None if optional else choices
        default = None if default is None else choices(default)
    description = setting.metadata["doc"]
    if setting.default_factory is not MISSING:
        return hint, Field(default_factory=setting.default_factory, description=description)
    return hint, Field(default=default, description=description)


def _config_fields(library_class: type) -> dict[str, tuple]:
    """The fields of a library dataclass (each with its ``doc`` metadata) as Dagster config fields."""
    hints = get_type_hints(library_class)
    return {setting.name: _config_field(setting, hints[setting.name]) for setting in fields(library_class)}


SweepCombinationConfig = create_model(
    "SweepCombinationConfig",
    __base__=Config,
    __module__=__name__,
    __doc__="One combination of the parameter sweep; a field left out takes the library's default.",
    **_config_fields(SweepCombination),
)


class _DedupResource(ConfigurableResource):
    """Algorithm settings and file locations for one run (resource key ``dedup``): the fields
    below, and those :data:`DedupSettings` makes from :class:`Settings`."""

    sweep_combinations: list[SweepCombinationConfig] = Field(
        default_factory=lambda: [SweepCombinationConfig(**asdict(c)) for c in SWEEP_DEFAULTS.combinations],
        description="parameter_sweep (group tuning): the combinations of num_perm, rows_per_band or "
        "auto_bands (with false_negative_weight), jaccard_threshold and shingle_size it runs on its "
        "sample, each with this run's other settings.",
    )
    sweep_sample_size: int = Field(
        default=SWEEP_DEFAULTS.sample_size,
        description="Documents the parameter sweep samples (seeded by minhash_seed); 0: every document.",
    )
    input_path: str | None = Field(
        default=None,
        description=f"Input file, folder or glob ({NAMED_FORMATS}). Unset: env "
        f"{INPUT.name}, else {INPUT.default}.",
    )
    labels_path: str | None = Field(
        default=None,
        description="Labels to evaluate the clusters against: a CSV with the header "
        "left_doc_id,right_doc_id,label (1: duplicates, 0: not) or doc_id,cluster_label, or a folder "
        "of such files. Unset: env DEDUP_LABELS, else no evaluation.",
    )
    output_dir: str | None = Field(
        default=None,
        description=f"Folder for release files. Unset: env {OUTPUT_DIR.name}, else {OUTPUT_DIR.default}.",
    )

    # where each field's value came from (value_sources), once the run has set the resource up
    _sources: dict = PrivateAttr(default_factory=dict)

    def create_resource(self, context: InitResourceContext) -> _DedupResource:
        """The resource a run's assets get: this one, with the settings file's values for the fields
        the run config does not set. The run config is the run's own, as given (the launchpad's, or
        ``--config-json``): Dagster drops a value equal to its default from the fields it sets, and
        always sets enums, so only the given config tells a value set from one left at its default."""
        run = context.dagster_run
        given = (((run.run_config if run else None) or {}).get("resources") or {}).get(RESOURCE_KEY) or {}
        in_environment = {name for name, variable in FIELD_VARIABLES.items() if os.environ.get(variable.name)}
        file = read_settings_file(type(self).model_fields)
        resolved = self.with_settings_file(set(given.get("config") or {}), file, in_environment)
        check_output_folder(resolved.output_folder())  # before any step, not after all of them
        return resolved

    def with_settings_file(
        self, in_run_config: set[str], file: SettingsFile | None, in_environment: set[str] = frozenset()
    ) -> _DedupResource:
        """This resource with ``file``'s values for the fields neither ``in_run_config``, code (a value
        other than its default) nor a variable set (``in_environment``) sets, checked as a whole; its
        sources recorded (a variable's value is the field's ``default``, as it is without a file)."""
        values = self._values()
        in_file = set(file.values) - in_environment if file else ()
        sources = value_sources(values, self._defaults(), in_run_config, str(file.path) if file else None, in_file)
        from_file = {name: file.values[name] for name, source in sources.items() if file and source == str(file.path)}
        try:
            resolved = type(self)(**{**values, **from_file})
        except ValidationError as error:
            raise file.invalid(error) from None  # only the file's values were not checked yet
        resolved._sources = sources
        return resolved

    def settings_sources(self) -> dict[str, str]:
        """Where each field's value came from: ``run config``, ``code``, the settings file's path or
        ``default`` (recorded in manifest.json)."""
        return dict(self._sources) if self._sources else value_sources(self._values(), self._defaults())

    def _values(self) -> dict:
        return {name: getattr(self, name) for name in type(self).model_fields}

    @classmethod
    def _defaults(cls) -> dict:
        return {name: field.get_default(call_default_factory=True) for name, field in cls.model_fields.items()}

    @model_validator(mode="after")
    def _checked(self) -> _DedupResource:
        # the library checks every value and combination; asking it here refuses a bad setting
        # when the run is launched, before any asset runs
        self.sweep().settings(self.settings())
        return self

    def settings(self) -> Settings:
        """The run's algorithm settings as the library takes them (raises SettingsError)."""
        values = {field.name: getattr(self, field.name) for field in fields(Settings)}
        values["fetch_cache"] = self.fetch_cache or CACHE.value() or None
        return Settings(**{name: getattr(value, "value", value) for name, value in values.items()})

    def sweep(self) -> SweepSettings:
        """The parameter sweep's settings as the library takes them (raises SettingsError)."""
        return SweepSettings(
            tuple(SweepCombination(**combination.model_dump()) for combination in self.sweep_combinations),
            self.sweep_sample_size,
        )

    # a path from the settings file or the launchpad may start with ~, as a shell would expand it
    def input_file(self) -> Path:
        return Path(self.input_path).expanduser() if self.input_path else INPUT.path()

    def labels(self) -> Path | None:
        if self.labels_path:
            return Path(self.labels_path).expanduser()
        return LABELS.path() if LABELS.value() else None

    def output_folder(self) -> Path:
        # the link to the current release, not the release it resolves to
        return Path(self.output_dir).expanduser() if self.output_dir else pointer_path(OUTPUT_DIR.path())

    def current_values(self) -> dict:
        """Every setting that can appear in a table's lineage."""
        return {
            **self.settings().as_dict(),
            **self.settings().derived(),
            **self.sweep().as_dict(),
            "input_path": str(self.input_file()),
            "labels_path": str(self.labels()) if self.labels() else None,
            "table_layout": TABLE_LAYOUT,
        }


DedupSettings = create_model(
    "DedupSettings",
    __base__=_DedupResource,
    __module__=__name__,
    __doc__=_DedupResource.__doc__,
    **_config_fields(Settings),
)
