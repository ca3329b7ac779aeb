-- What the pair scores compare, besides the bodies, for the documents that appear in a pair LSH
-- found: the distinct shingle count (so the shingle sets can be laid out before shingling), the
-- signature and the content hash. In the order of candidate_documents (doc_id, position: the
-- order their bodies were read in, store.rows_with_ids), so the bodies never pass through a
-- join. The other pairs involve exact copies and take the scores of their first copies' pair.
-- No parameters.
select c.doc_id, f.shingle_count, f.signature, f.content_hash
from candidate_documents c
join {fingerprinted} f on f.doc_id = c.doc_id
order by c.position
