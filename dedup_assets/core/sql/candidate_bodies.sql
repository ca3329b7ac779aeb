-- Bodies of the documents that appear in a candidate pair, each once; only these are shingled
-- again for exact verification.
select d.doc_id, d.body
from {documents} d
semi join (
  select left_doc_id as doc_id from {candidate_pairs}
  union
  select right_doc_id from {candidate_pairs}
) c on c.doc_id = d.doc_id
order by d.doc_id
