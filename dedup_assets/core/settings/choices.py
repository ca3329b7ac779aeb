"""The words and numbers the settings take: each choice's words (a ``Literal`` for the Dagster
resource and the tuple the check reads) and the defaults and limits other modules share, apart
from :class:`.settings.Settings` so that a module needing a default does not load every setting."""

from __future__ import annotations

from typing import Literal, get_args

from ..pipeline.capabilities import CAPABILITIES
from .presets import PRESETS

ClusterMode = Literal["components", "star"]
Preset = Literal[tuple(PRESETS)]
Engine = Literal[tuple(CAPABILITIES)]
# in_place: a Parquet input's bodies are read from its files, not copied into the database. Not a
# stage setting: either way documents holds the same rows, so no table is built again for it.
ParquetBodies = Literal["in_place", "copy"]
# refuse: a bucket over max_bucket_size stops the run (the published method); skip: such buckets
# are left out of the self-join and listed, and the recall audit measures what that cost
HotBuckets = Literal["refuse", "skip"]
# the codec of the release's Parquet columns (hash columns, random bits, are never compressed)
ReleaseCompression = Literal["zstd", "snappy", "none"]
CLUSTER_MODES: tuple[str, ...] = get_args(ClusterMode)
ENGINES: tuple[str, ...] = get_args(Engine)
PARQUET_BODIES: tuple[str, ...] = get_args(ParquetBodies)
HOT_BUCKETS: tuple[str, ...] = get_args(HotBuckets)
RELEASE_COMPRESSIONS: tuple[str, ...] = get_args(ReleaseCompression)
# the settings of Settings that take one of a few words, checked here (the sketch's and the
# input's words are checked with their steps, in pipeline/step_params.py and input.py)
CHOICES = {
    "cluster_mode": CLUSTER_MODES,
    "parquet_bodies": PARQUET_BODIES,
    "engine": ENGINES,
    "hot_buckets": HOT_BUCKETS,
    "release_compression": RELEASE_COMPRESSIONS,
}

# auto_bands weighs every (bands, rows) pair that fits; past this the choice alone takes seconds
MAX_AUTO_BANDS_PERM = 1 << 10
DEFAULT_DUCKDB_MEMORY = "2GB"

# Rows per streamed batch. At web-page sizes a batch's text stays under glibc's largest mmap
# threshold (32 MB), so a freed batch's memory is reused by the next one instead of being mapped
# and faulted in again.
DEFAULT_BATCH_SIZE = 4_096
# A CSV read block holds a batch at up to 2 KiB a row, and Arrow's block size is a 32-bit int.
MAX_BATCH_SIZE = 1_000_000

# Up to this many documents the release's fingerprinted.parquet carries the signatures unless
# release_signatures says otherwise: above it they are most of the file, and most users never
# read them (they stay in the database).
SIGNATURES_RELEASED_UP_TO = 100_000

# Releases kept beside the output folder, the current one among them: a reader that resolved the
# output folder's link may read its release while this many less one newer ones are published.
RELEASES_KEPT = 3
# the release's codec unless release_compression says otherwise (issue 52: 1.2 GB of kept parts
# at 1M where snappy wrote 1.8 GB, in about the same time)
DEFAULT_COMPRESSION = "zstd"

# Peak memory of the candidate step per pair slot (self-join, grouping per pair, sorted output)
# when DuckDB need not spill, measured with doc_ids of up to 46 characters (WARC record ids); it
# grows with doc_id length. Without max_pair_slots, the budget is what memory_budget_mb holds.
PAIR_SLOT_BYTES = 640
