-- Every candidate pair with its measured scores, which sql/pair_decision.sql then decides on.
-- Exact Jaccard, signature overlap and whether the contents are identical come from pair_scores,
-- computed for the pairs LSH found (found_by 'lsh'). An 'lsh_via_copy' pair takes the scores of
-- its documents' first copies, which are the same texts; first_copies (sql/first_copies.sql)
-- names each copy's first copy. A 'content_hash' pair has none: the decision scores it.
with with_first_copies as (
  select
    c.*,
    coalesce(lc.first_copy_doc_id, c.left_doc_id) as left_first_copy,
    coalesce(rc.first_copy_doc_id, c.right_doc_id) as right_first_copy
  from {candidate_pairs} c
  left join first_copies lc on lc.doc_id = c.left_doc_id and c.found_by = 'lsh_via_copy'
  left join first_copies rc on rc.doc_id = c.right_doc_id and c.found_by = 'lsh_via_copy'
),
measured as (
  select
    c.left_doc_id,
    c.right_doc_id,
    c.left_domain,
    c.right_domain,
    c.shared_bands,
    c.found_by,
    s.jaccard,
    s.signature_overlap,
    s.is_exact
  from with_first_copies c
  left join pair_scores s
    on s.left_doc_id = least(c.left_first_copy, c.right_first_copy)
   and s.right_doc_id = greatest(c.left_first_copy, c.right_first_copy)
)
select * from measured
