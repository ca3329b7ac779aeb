-- Every removed document with its representative, for the removals check: whether the two are
-- one text (one content hash, Jaccard 1 as in scored_pairs), the two as scored_pairs orders a
-- pair (left_doc_id < right_doc_id), and verification's exact Jaccard of the pair where
-- scored_pairs holds it (null where the clusters measured it another way). By doc_id.
-- No parameters.
select
  c.doc_id,
  c.representative_doc_id,
  c.chained,
  l.content_hash = r.content_hash as same_text,
  least(c.doc_id, c.representative_doc_id) as left_doc_id,
  greatest(c.doc_id, c.representative_doc_id) as right_doc_id,
  s.jaccard as scored_jaccard
from {clusters} c
join {fingerprinted} l on l.doc_id = c.doc_id
join {fingerprinted} r on r.doc_id = c.representative_doc_id
left join {scored_pairs} s
  on s.left_doc_id = least(c.doc_id, c.representative_doc_id)
 and s.right_doc_id = greatest(c.doc_id, c.representative_doc_id)
where c.decision = 'removed_duplicate'
order by c.doc_id
