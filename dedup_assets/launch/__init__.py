"""Launching runs, the ground floor: what a run reads as it starts (the ``DEDUP_*`` variables,
``environment``; the settings file, ``settings_file``), the kernels compiled before the first step
(``warm``, and the definitions' executor that calls it, ``executor``), runs whose process died
(``run_health``), and how a problem reaches the user as one paragraph (``entry_point``,
``user_messages``). It imports nothing of ours but the library (``core``), so the resources, the
assets and the definitions all can; the runs themselves start on the top floor, ``cli.py`` and
``run.py`` (the quiet ``dedup run``), which import the definitions. ``test_import_graph`` holds
the floors."""
