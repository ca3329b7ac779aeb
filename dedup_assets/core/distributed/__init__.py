"""The pipeline's steps on a distributed engine (Ray Data)."""
