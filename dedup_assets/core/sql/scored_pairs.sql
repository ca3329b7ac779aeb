-- Exact Jaccard decides; signature overlap (share of equal sketch coordinates) is a diagnostic.
-- Both, and whether the contents are identical, come from pair_scores, computed for the pairs
-- LSH found (found_by 'lsh'). A 'content_hash' pair is two copies of one text: Jaccard and
-- overlap 1. An 'lsh_via_copy' pair takes the scores of its documents' first copies, which are
-- the same texts; first_copies (sql/first_copies.sql) names each copy's first copy.
-- $1 = jaccard_threshold, $2 = signature_overlap_threshold.
with with_first_copies as (
  select
    c.*,
    coalesce(lc.first_copy_doc_id, c.left_doc_id) as left_first_copy,
    coalesce(rc.first_copy_doc_id, c.right_doc_id) as right_first_copy
  from {candidate_pairs} c
  left join first_copies lc on lc.doc_id = c.left_doc_id and c.found_by = 'lsh_via_copy'
  left join first_copies rc on rc.doc_id = c.right_doc_id and c.found_by = 'lsh_via_copy'
),
scored as (
  select
    c.left_doc_id,
    c.right_doc_id,
    c.left_domain,
    c.right_domain,
    c.shared_bands,
    c.found_by,
    if(c.found_by = 'content_hash', 1.0::double, s.jaccard) as jaccard,
    if(c.found_by = 'content_hash', 1.0::double, s.signature_overlap) as signature_overlap,
    c.found_by = 'content_hash' or s.is_exact as is_exact
  from with_first_copies c
  left join pair_scores s
    on s.left_doc_id = least(c.left_first_copy, c.right_first_copy)
   and s.right_doc_id = greatest(c.left_first_copy, c.right_first_copy)
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
