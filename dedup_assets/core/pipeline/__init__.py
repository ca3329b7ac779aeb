"""The run: the one :class:`Run` every step gets (``run.py``), each one-shot step defined once
(``steps.py``) with the value objects it takes (``step_params.py``), the engines behind one
protocol and how they differ (``engines.py``, ``capabilities.py``), the asset that calls each
engine step (``step_assets.py``), the whole pipeline without Dagster (``library.py``) and the
parameter sweep (``sweep.py``, ``sweep_settings.py``)."""
