-- Bodies of the documents that appear in a candidate pair, each once; only these are shingled
-- again for exact verification, with their distinct shingle counts so the shingle sets can be
-- laid out before shingling, and the signature and content hash the pair scores compare.
-- Unordered: pairs find their rows by a join on doc_id, which costs less than sorting bodies.
select d.doc_id, d.body, f.shingle_count, f.signature, f.content_hash
from {documents} d
join {fingerprinted} f on f.doc_id = d.doc_id
semi join (
  select left_doc_id as doc_id from {candidate_pairs}
  union
  select right_doc_id from {candidate_pairs}
) c on c.doc_id = d.doc_id
