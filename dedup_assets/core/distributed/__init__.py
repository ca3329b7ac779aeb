"""The pipeline's steps on a distributed engine (Daft on a Ray cluster)."""
