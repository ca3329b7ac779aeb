"""What each column of the stored tables holds, as the UI shows it beside the column's type.

One description per column name, shared by every table that has the column (``doc_id`` means the
same everywhere); a name that means something else in one table has an entry under that table.
"""

from __future__ import annotations

COLUMNS: dict[str, str] = {
    # documents and the input
    "doc_id": "The document's id, from the input (byte for byte)",
    "source": "Where the document came from: the input's source column, else the input file's name",
    "domain": "The page's domain: the input's domain column, else its url's host (empty if neither)",
    "crawled_at": "When the page was crawled (null if the input has no date); the keep rule prefers the newest",
    "title": "The page's title (empty if the input has none)",
    "body": "The page's text, as read",
    "replaced_characters": "Characters of the body that were not UTF-8 and were replaced by U+FFFD",
    "source_file": "The input file the row was read from",
    "input_row": "The row's place in its input file (1-based, header not counted)",
    "detail": "What was wrong with the row, naming the field and what to do",
    # fingerprints and LSH
    "token_count": "Tokens of the normalized text (a Han, Hiragana or Katakana character is one)",
    "shingle_count": "Distinct shingles of the document (0: no token; it is compared by its characters, with its exact copies only)",
    "content_hash": "Hash of the normalized token sequence (without tokens: of the trimmed body): equal for exact copies",
    "signature": "The MinHash (or fast similarity) sketch: num_perm 64-bit values",
    "lsh_bands": "One 64-bit key per LSH band, made from rows_per_band signature values",
    "band_index": "The LSH band",
    "lsh_band": "The band's bucket key",
    "bucket_key": "The bucket as messages and files name it: band, then key in hex",
    "texts": "Different texts in the bucket (exact copies count once)",
    "documents": "Documents in the bucket, exact copies included",
    "example_doc_ids": "The first documents in the bucket, by input order",
    "first_band_key": "The document's key in band 0",
    "position": "The document's place in input order (across batches in the incremental index)",
    "is_new": "Whether the document belongs to the batch being added",
    # pairs
    "left_doc_id": "The pair's document with the smaller doc_id",
    "right_doc_id": "The pair's document with the larger doc_id",
    "left_domain": "The left document's domain",
    "right_domain": "The right document's domain",
    "shared_bands": "LSH bands in which the two documents share a bucket",
    "found_by": "lsh (shared a bucket), content_hash (exact copies) or lsh_via_copy (a copy of a pair LSH found)",
    "jaccard": "Exact Jaccard of the two documents' shingle sets",
    "signature_overlap": "Share of equal signature values (a diagnostic; it never accepts a pair)",
    "is_exact": "Whether the two normalized texts are identical",
    "is_duplicate": "Whether the pair is an edge: jaccard at or above jaccard_threshold",
    "reason": "Why the pair was accepted or not: jaccard_and_minhash, jaccard_match, minhash_only_rejected or below_jaccard_threshold",
    # clusters
    "cluster_id": "The cluster: cluster- and the smallest doc_id of its first copies' component; reference:, the reference and its document for one that matches it",
    "cluster_size": "Documents in the cluster",
    "representative_rank": "The document's place by the keep rule (1: kept)",
    "representative_doc_id": "The document kept for the cluster (for matched_reference: the reference document)",
    "decision": "kept_representative, removed_duplicate, or matched_reference (removed: it matches a reference document)",
    "jaccard_to_representative": "Exact Jaccard with the kept document (1 for the kept one)",
    "chained": "In the cluster through others, below jaccard_threshold with the kept document",
    # reference_matches
    "reference": "The reference corpus, as the reference setting names it",
    "reference_doc_id": "The reference document matched: the best exact Jaccard, the smallest doc_id on a tie",
    "reference_source_file": "The file of the reference that holds it",
    "reference_input_row": "Its row in that file",
    # boilerplate and template_clusters
    "passage_rank": "The passage's place, the most shared first",
    "passage": "Tokens that boilerplate shingles cover in a row, normalized and joined",
    "tokens": "Tokens in the passage",
    "sample_documents": "Sampled documents that have the passage",
    "sampled": "Documents in the seeded sample",
    "share": "sample_documents / sampled",
    "estimated_documents": "share of every document: how many the corpus likely has with it",
    "example_doc_ids": "Up to five sampled documents with the passage, ;-separated",
    "member_doc_id": "The cluster's first removed member, compared with its representative",
    "shared_shingles": "Shingles the representative and that member share",
    "boilerplate_shingles": "Of those, shingles in boilerplate's passages",
    "jaccard_without_boilerplate": "Exact Jaccard of the two with boilerplate's shingles left out",
    "keep_reason": "Why the kept document was kept and not this one: the keep rule that decided and both values, e.g. quality 0.91 > 0.42",
    "representative_batch": "The batch whose document was kept for the cluster",
    "previous_cluster_id": "The cluster the document was in before the batch joined it to another",
    "batch_key": "The batch: its file's name without the format's extension",
    # the recall audit and evaluation
    "jaccard_band": "The Jaccard range the pair falls in, from the threshold up (1.0: identical shingle sets)",
    "found": "Whether the pipeline made the true pair an edge",
    "sampled_text": "The first copy of the sampled document the pair was found for: the audit's interval "
    "counts one text's pairs as one unit, since LSH finds or misses them together",
    "pairs": "How many document pairs the row counts: the two texts' copies, counted from their copy groups' sizes "
    "(left_doc_id = right_doc_id: the pairs among one text's copies)",
    "labels": "Which labels the error comes from: pair (a labelled pair) or cluster (two labelled documents)",
    "error": "false_positive (clustered together against the labels) or false_negative (apart against them)",
    "left_cluster_id": "The left document's cluster",
    "right_cluster_id": "The right document's cluster",
    # the manifest's figures and the parameter sweep
    "metric": "A count or figure of the run, as manifest.json's counts name it",
    "value": "Its value",
    "combination": "The combination's place in sweep_combinations",
    "label": "The combination as the picture names it",
    "num_perm": "Signature values",
    "rows_per_band": "Rows per band set",
    "auto_bands": "Whether the bands were chosen for the threshold",
    "false_negative_weight": "With auto_bands: the weight of missed duplicates",
    "jaccard_threshold": "The Jaccard of a duplicate",
    "shingle_size": "Tokens (or characters) per shingle",
    "bands": "Bands in use",
    "rows": "Rows per band in use",
    "pair_slots": "Band-level pair slots of the join, exact copies grouped",
    "candidates": "Candidate pairs",
    "edges": "Duplicate edges",
    "lsh_edges": "Edges between different texts: precision's denominator",
    "true_pairs": "Pairs of the sample at or above the threshold, by exact search",
    "found_pairs": "True pairs the combination made edges",
    "recall": "found_pairs / true_pairs",
    "precision": "Edges between different texts that are true pairs, of all of them",
    "refused": "Why the pair limits refused the combination (empty when it ran)",
    "seconds": "How long the combination took",
}
# (table, column): where a name means something else in one table
TABLE_COLUMNS: dict[tuple[str, str], str] = {
    ("rejected_documents", "reason"): "Why the row is not a document (missing_field, too_large, duplicate_doc_id, ...)",
    ("staged_rejected", "reason"): "Why the row is not a document (missing_field, too_large, duplicate_doc_id, ...)",
    ("rejected_documents", "doc_id"): "The row's doc_id as read (empty when it had none)",
    ("evaluation", "jaccard"): "Exact Jaccard of the pair (null when a document has no text)",
}


def describe(table: str, column: str) -> str:
    """The column's description in ``table`` (a qualified name: its last part counts)."""
    name = table.rsplit(".", 1)[-1].strip('"')
    return TABLE_COLUMNS.get((name, column)) or COLUMNS.get(column, "")
