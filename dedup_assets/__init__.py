"""dedup-assets: near-duplicate web-text deduplication as a Dagster asset graph on DuckDB."""
