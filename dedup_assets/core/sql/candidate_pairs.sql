-- Global LSH candidates: every pair of documents sharing at least one band key, across all
-- domains. left_doc_id < right_doc_id removes self pairs and mirrored duplicates.
-- shared_buckets (band_index, lsh_band of every bucket with two documents or more) keeps the
-- self-join to the band rows that can pair at all.
with shared as (
  select m.doc_id, m.band_index, m.lsh_band
  from {band_memberships} m
  semi join shared_buckets s on s.band_index = m.band_index and s.lsh_band = m.lsh_band
),
pairs as (
  select l.doc_id as left_doc_id, r.doc_id as right_doc_id, count(*)::integer as shared_bands
  from shared l
  join shared r
    on l.band_index = r.band_index
   and l.lsh_band = r.lsh_band
   and l.doc_id < r.doc_id
  group by l.doc_id, r.doc_id
)
select
  p.left_doc_id,
  p.right_doc_id,
  ld.domain as left_domain,
  rd.domain as right_domain,
  p.shared_bands
from pairs p
join {documents} ld on ld.doc_id = p.left_doc_id
join {documents} rd on rd.doc_id = p.right_doc_id
order by p.left_doc_id, p.right_doc_id
