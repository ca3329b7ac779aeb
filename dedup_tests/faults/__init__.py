"""The fault matrix: faults injected into real runs, each with what was injected, what was
observed, how many records were lost and what became of the release.

    .venv/bin/python -m dedup_tests.faults            # every case, 1M identical documents at the end
    .venv/bin/python -m dedup_tests.faults --quick    # small corpora, at most 100k identical docs
    .venv/bin/python -m dedup_tests.faults --only csv_unclosed_quote,missing_input --keep

Run it from the project's root: the tests are not installed, and ``-m`` finds them there. It
tests the pipeline rather than measuring it, so it lives in the test tree; pytest collects none of
its modules (none is named ``test_*``), and ``test_faults_script.py`` (marker ``faults``) runs a
few of its cases. What it shares with the benchmark (the corpus generator, the fetch benchmark's
Range server) it imports from ``dedup_bench``.

Release and process faults run the real CLI (``python -m dedup_assets.cli run``) in processes
of their own and kill, stop, race or starve them; input faults run the library
(``run_library``) on small files written here with a known content. "Records lost" is counted
from that known content, never from the pipeline's own counts: input records that are neither a
document nor a reject; a document whose text differs from its source counts as altered. Where
bytes were corrupted, how many records a reader finds in the garbage cannot be known: the records
there count as accounted for when the reader rejected damaged data, and the table says how many
rejects they became.

It needs nothing outside this repository: every input is generated in a temporary folder, deleted
at the end unless ``--keep``. The full-disk and read-only cases mount a tmpfs, so they need root
(otherwise they are reported as skipped). Prints a Markdown table and the totals; exits 1 when a
record was lost or altered without a reject, a release was mixed or corrupt, or a case did not
behave as expected.

The cases come in families, a module each: ``process_faults`` (the CLI killed, stopped, raced,
locked out, starved of disk), ``csv_faults``, ``compressed_faults`` (damaged .jsonl.gz and
.warc.gz), ``input_faults`` (awkward inputs and bad settings), ``hostile_input`` (records made to
break a reader: a lone surrogate, a decompression bomb, another encoding, wrong types, control
characters in ids), ``path_faults`` (file names and batch keys with ``*`` ``?`` ``[``, batch keys
one file system takes for one, an output folder inside the input), ``fetch_faults`` (a targets
file against a loopback server that trickles, redirects elsewhere or is asked for a dot segment,
and a CLI run stopped in a fetch; the server is ``dedup_tests.loopback_warcs``), ``boilerplate_faults``
(a shared footer filling buckets past max_bucket_size, refused and skipped), ``disk_faults``
(a full disk under the database and its payload files, under ``dedup run``, and under a targets
file), ``scale_faults``
(identical documents). ``outcome`` holds a row of the table and the accounting, ``fault_runs``
the runs in processes of their own, ``writers`` the inputs written, ``matrix`` the list of cases
and :func:`~dedup_tests.faults.matrix.main`.
"""
