-- Exact Jaccard decides; signature overlap (share of equal sketch coordinates) is a diagnostic.
-- $1 = jaccard_threshold, $2 = signature_overlap_threshold.
with scored as (
  select
    c.left_doc_id,
    c.right_doc_id,
    c.left_domain,
    c.right_domain,
    c.shared_bands,
    j.jaccard,
    len(list_filter(list_zip(lf.signature, rf.signature), lambda pair: pair[1] = pair[2]))
      / len(lf.signature) as signature_overlap,
    lf.content_hash = rf.content_hash as is_exact
  from {candidate_pairs} c
  join pair_jaccard j on j.left_doc_id = c.left_doc_id and j.right_doc_id = c.right_doc_id
  join {fingerprinted} lf on lf.doc_id = c.left_doc_id
  join {fingerprinted} rf on rf.doc_id = c.right_doc_id
)
select
  *,
  jaccard >= $1 as is_duplicate,
  case
    when jaccard >= $1 and signature_overlap >= $2 then 'jaccard_and_minhash'
    when jaccard >= $1 then 'jaccard_match'
    when signature_overlap >= $2 then 'minhash_only_rejected'
    else 'below_jaccard_threshold'
  end as reason
from scored
order by left_doc_id, right_doc_id
