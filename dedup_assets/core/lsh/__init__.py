"""Locality-sensitive hashing: band memberships, the band self-join into candidate pairs under the
bucket limits, hot buckets (``candidates.py``, with its kernels in ``bucket_kernels.py``), and the
S-curve that chooses bands for a threshold (``scurve.py``)."""
