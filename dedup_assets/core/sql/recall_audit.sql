-- The recall audit: the true pairs counted by text ({counted}: sql/recall_audit_counted.sql) with
-- the two first copies as left_doc_id < right_doc_id, how many LSH bands they share, and whether
-- the pipeline found their pairs (one text: always, as every copy is paired with its first copy
-- through its content hash; two texts: the pair of their first copies is an accepted edge, which
-- is how the pipeline finds every pair of two copy groups). No parameters.
select
  least(t.sampled_text, t.partner) as left_doc_id,
  greatest(t.sampled_text, t.partner) as right_doc_id,
  t.jaccard,
  t.jaccard_band,
  len(list_filter(list_zip(lf.lsh_bands, rf.lsh_bands), lambda keys: keys[1] = keys[2]))::integer as shared_bands,
  t.sampled_text = t.partner or e.left_doc_id is not null as found,
  t.sampled_text,
  t.pairs
from {counted} t
join {fingerprinted} lf on lf.doc_id = least(t.sampled_text, t.partner)
join {fingerprinted} rf on rf.doc_id = greatest(t.sampled_text, t.partner)
left join {duplicate_pairs} e
  on e.left_doc_id = least(t.sampled_text, t.partner)
 and e.right_doc_id = greatest(t.sampled_text, t.partner)
where t.pairs > 0
order by left_doc_id, right_doc_id, t.sampled_text
