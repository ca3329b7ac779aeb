-- Every exact copy that is not its group's first copy, with that first copy: each 'content_hash'
-- candidate pair is one copy and its first copy, the earlier of the two in input order (the
-- fingerprinted table's row order, which is the documents'). No parameters.
select
  if(l.rowid < r.rowid, p.right_doc_id, p.left_doc_id) as doc_id,
  if(l.rowid < r.rowid, p.left_doc_id, p.right_doc_id) as first_copy_doc_id
from {candidate_pairs} p
join {fingerprinted} l on l.doc_id = p.left_doc_id
join {fingerprinted} r on r.doc_id = p.right_doc_id
where p.found_by = 'content_hash'
