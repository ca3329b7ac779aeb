"""Pure deduplication algorithms: no Dagster, no I/O beyond what a function's name says.

The stages follow the specification (``../shared/spec/web-text-deduplication.md``):
normalize -> shingle -> sketch -> LSH band keys -> candidate join -> verify -> cluster -> select.
"""
