-- Exact Jaccard decides; signature overlap (share of equal sketch coordinates) is a diagnostic.
-- Both, and whether the contents are identical, come from pair_scores (computed per pair).
-- $1 = jaccard_threshold, $2 = signature_overlap_threshold.
with scored as (
  select
    c.left_doc_id,
    c.right_doc_id,
    c.left_domain,
    c.right_domain,
    c.shared_bands,
    s.jaccard,
    s.signature_overlap,
    s.is_exact
  from {candidate_pairs} c
  join pair_scores s on s.left_doc_id = c.left_doc_id and s.right_doc_id = c.right_doc_id
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
