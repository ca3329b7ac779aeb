"""Launching runs: what a run reads as it starts (the ``DEDUP_*`` variables, ``environment``; the
settings file, ``settings_file``), the named jobs (``jobs``), the quiet one-shot run behind ``dedup
run`` (``run``), the kernels compiled before the first step (``warm``, and the definitions'
executor that calls it, ``executor``), runs whose process died (``run_health``), and how a problem
reaches the user as one paragraph (``user_messages``)."""
