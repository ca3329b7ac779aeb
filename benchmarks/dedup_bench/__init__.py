"""dedup-assets benchmark: corpus, our runs, peer runs, recall and report (see ../README.md and
../../docs/performance.md)."""
