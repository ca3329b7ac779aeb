-- The audit's true pairs (true_pairs: left_doc_id < right_doc_id, jaccard, jaccard_band, and
-- sampled_doc_id; exact copies among them), each with how many LSH bands its two documents share,
-- whether the pipeline found it (the two are one text, or the pair of their first copies, from
-- first_copies, is an accepted edge, which is how the pipeline finds every pair of two copy
-- groups), and sampled_text, the first copy of its sampled document: the interval's unit. No
-- parameters.
with first as (
  select
    p.*,
    coalesce(l.first_copy_doc_id, p.left_doc_id) as left_first,
    coalesce(r.first_copy_doc_id, p.right_doc_id) as right_first,
    coalesce(s.first_copy_doc_id, p.sampled_doc_id) as sampled_text
  from true_pairs p
  left join first_copies l on l.doc_id = p.left_doc_id
  left join first_copies r on r.doc_id = p.right_doc_id
  left join first_copies s on s.doc_id = p.sampled_doc_id
)
select
  t.left_doc_id,
  t.right_doc_id,
  t.jaccard,
  t.jaccard_band,
  (select count(*)::integer from range(len(lf.lsh_bands)) b(i) where lf.lsh_bands[i + 1] = rf.lsh_bands[i + 1])
    as shared_bands,
  t.left_first = t.right_first or e.left_doc_id is not null as found,
  t.sampled_text
from first t
join {fingerprinted} lf on lf.doc_id = t.left_doc_id
join {fingerprinted} rf on rf.doc_id = t.right_doc_id
left join {duplicate_pairs} e
  on e.left_doc_id = least(t.left_first, t.right_first)
 and e.right_doc_id = greatest(t.left_first, t.right_first)
order by t.left_doc_id, t.right_doc_id
