-- Global LSH candidates: every pair of documents sharing at least one band key, across all
-- domains, with left_doc_id < right_doc_id (no self pairs, no mirrored duplicates).
-- Exact copies form copy groups (copy_groups: content hash and first band key, first copy =
-- the first in input order). Only first copies and documents without copies are paired by LSH
-- (found_by 'lsh'); every other copy is paired with its first copy (found_by 'content_hash') and
-- with each LSH partner of its first copy (found_by 'lsh_via_copy'). Identical texts have
-- identical band keys, so shared_bands is exact for every row. lsh_pairs (left_doc_id,
-- right_doc_id, shared_bands) holds every two first copies or documents without copies that share
-- a bucket, and in how many bands (lsh.SharedBuckets: the band keys sorted once, not joined).
-- No parameters.
with copies as (
  select f.doc_id, g.first_copy_doc_id, len(f.lsh_bands)::integer as bands
  from {fingerprinted} f
  join copy_groups g on g.content_hash = f.content_hash and g.first_band_key = f.lsh_bands[1]
  where f.doc_id <> g.first_copy_doc_id
),
joined as (
  select
    least(left_doc_id, right_doc_id) as left_doc_id,
    greatest(left_doc_id, right_doc_id) as right_doc_id,
    shared_bands
  from lsh_pairs
),
pairs as (
  select left_doc_id, right_doc_id, shared_bands, 'lsh' as found_by from joined
  union all
  select least(first_copy_doc_id, doc_id), greatest(first_copy_doc_id, doc_id), bands, 'content_hash'
  from copies
  union all
  select least(c.doc_id, j.right_doc_id), greatest(c.doc_id, j.right_doc_id), j.shared_bands, 'lsh_via_copy'
  from joined j
  join copies c on c.first_copy_doc_id = j.left_doc_id
  union all
  select least(j.left_doc_id, c.doc_id), greatest(j.left_doc_id, c.doc_id), j.shared_bands, 'lsh_via_copy'
  from joined j
  join copies c on c.first_copy_doc_id = j.right_doc_id
)
select
  p.left_doc_id,
  p.right_doc_id,
  ld.domain as left_domain,
  rd.domain as right_domain,
  p.shared_bands,
  p.found_by
from pairs p
join {documents} ld on ld.doc_id = p.left_doc_id
join {documents} rd on rd.doc_id = p.right_doc_id
order by p.left_doc_id, p.right_doc_id
