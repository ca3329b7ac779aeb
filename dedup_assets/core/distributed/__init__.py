"""The pipeline's steps on a distributed engine (Daft and Ray Data on a Ray cluster)."""
