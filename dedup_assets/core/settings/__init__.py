"""The settings: each one's type, default, step and description once (``model.py``), the words
each choice takes (``choices.py``), the input's group (``input.py``), which settings each table
depends on and where a value came from (``lineage.py``), and named presets (``presets.py``)."""
