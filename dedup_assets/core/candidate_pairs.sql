-- Global LSH candidates: every pair of documents that shares at least one band key, across all
-- domains. left_doc_id < right_doc_id removes self pairs and mirrored duplicates.
select
  l.doc_id as left_doc_id,
  r.doc_id as right_doc_id,
  l.domain as left_domain,
  r.domain as right_domain,
  count(*)::integer as shared_bands
from band_memberships l
join band_memberships r
  on l.band_index = r.band_index
 and l.lsh_band = r.lsh_band
 and l.doc_id < r.doc_id
group by l.doc_id, r.doc_id, l.domain, r.domain
order by left_doc_id, right_doc_id
