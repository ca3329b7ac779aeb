-- The representatives with every input column, in input order. documents and clusters both
-- hold one row per document in input order, so a positional join pairs them without a hash
-- join or a sort; the doc_id test keeps a misaligned pair out (and the
-- representatives_account_for_input check would then fail).
select d.*, c.cluster_id, c.cluster_size
from {documents} d
positional join {clusters} c
where c.representative_rank = 1 and c.doc_id = d.doc_id
