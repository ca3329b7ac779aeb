"""The benchmark's Common Crawl fetch case (benchmarks/dedup_bench/warc_fetch.py) on a few records:
every record comes back through the loopback server, the local folder and the whole pipeline."""


from dedup_bench.warc_fetch import measure_warc_fetch


def test_the_fetch_case_reads_every_record_three_ways(tmp_path):
    record = measure_warc_fetch(tmp_path, 60, record_kb=2, concurrency=4)
    assert record["lines"][0].startswith("60 records of about 2 KB")
    assert "targets reader, loopback HTTP: 60 documents in" in record["lines"][1]
    assert "targets reader, local folder: 60 documents in" in record["lines"][2]
    assert record["lines"][3].startswith("whole pipeline (library) with fetching:")
    assert all(record[key] > 0 for key in ("loopback HTTP records_per_s", "local folder records_per_s", "pipeline documents_per_s"))
