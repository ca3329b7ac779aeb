-- Bodies of the documents that appear in a pair LSH found, each once; only these are shingled
-- again for exact verification, with their distinct shingle counts so the shingle sets can be
-- laid out before shingling, and the signature and content hash the pair scores compare. The
-- other pairs involve exact copies and take the scores of their first copies' pair.
-- candidate_documents (doc_id, body) holds those documents' bodies (store.rows_with_ids).
-- Unordered: pairs find their rows by a join on doc_id, which costs less than sorting bodies.
-- No parameters.
select d.doc_id, d.body, f.shingle_count, f.signature, f.content_hash
from candidate_documents d
join {fingerprinted} f on f.doc_id = d.doc_id
