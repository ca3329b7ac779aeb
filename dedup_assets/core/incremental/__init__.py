"""Incremental batches: each batch is deduplicated against every document of the earlier batches,
kept or removed, with decisions that are never taken back.

The index (schema ``incremental``) holds what every earlier batch added: its documents (without
bodies), fingerprints with their position in the order batches were added, the band keys of each
distinct text (``band_index``: what a new batch joins against), the scored pairs, each document's
decision, its current cluster, and the bridges. Bodies, signatures and band keys, which verifying a
pair with an earlier document needs, are in per-batch payload files (``incremental/payloads.py``), so
verification never re-reads old input files.

A batch is staged first (``staged_*`` tables, one step each) and added to the index in one
transaction at the end, so a batch that fails half way adds nothing. Staging reads the index as
it was before the batch (positions below the batch's first position), so the latest batch can be
staged again while it is in the index: adding it replaces it.

Pairs: the one-shot candidate and scoring queries run on the batch's *universe*
(``sql/universe_earlier.sql``) and the pairs with a document of the batch are kept. A copy
group's first copy is the first document in input order, which a later batch never changes, so
the union of every batch's pairs is the pair set of one run over all batches.

Clusters: a new document joins the clusters of the earlier documents it has edges with. A document
kept earlier stays kept; a new document in a cluster with a kept document is removed in its
favour; a cluster of new documents only keeps one by the one-shot keep rule (``keep/rule.py``).
A batch that joins two clusters that each have a kept document records a bridge and keeps both.
"""
