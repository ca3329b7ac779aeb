-- The largest LSH buckets (band_index, lsh_band) that hold two documents or more, the largest
-- first, then by band and key. Documents are counted with their exact copies: the pipeline joins
-- one first copy per text (lsh/candidates.py), but member_count and potential_pairs are what joining every
-- document would meet. Only a document of a candidate pair can share a bucket with another (two
-- texts in one bucket are an 'lsh' pair, a copy is paired with its first copy), so only their
-- band rows are grouped: usually a small share, and never the buckets of the other documents.
-- $buckets_listed = buckets listed at most; $members_shown = member doc_ids listed per bucket
-- (the smallest); $domains_shown = domains listed per bucket (alphabetical).
with paired as (
  select left_doc_id as doc_id, left_domain as domain from {candidate_pairs}
  union
  select right_doc_id, right_domain from {candidate_pairs}
),
memberships as materialized (
  select m.band_index, m.lsh_band, m.doc_id
  from {band_memberships} m
  semi join paired p on p.doc_id = m.doc_id
),
largest as (
  select band_index, lsh_band, count(*) as member_count
  from memberships
  group by band_index, lsh_band
  having count(*) > 1
  order by member_count desc, band_index, lsh_band
  limit $buckets_listed
)
select
  l.band_index,
  l.lsh_band,
  printf('%03d:%016x', l.band_index, l.lsh_band) as bucket_key,
  l.member_count,
  l.member_count * (l.member_count - 1) // 2 as potential_pairs,
  count(distinct p.domain) as domain_count,
  least(count(distinct p.domain), $domains_shown) as domains_shown,
  array_to_string(list(distinct p.domain order by p.domain)[1:$domains_shown], ';') as domains,
  least(l.member_count, $members_shown) as members_shown,
  array_to_string(list(m.doc_id order by m.doc_id)[1:$members_shown], ';') as member_doc_ids
from largest l
join memberships m on m.band_index = l.band_index and m.lsh_band = l.lsh_band
join paired p on p.doc_id = m.doc_id
group by l.band_index, l.lsh_band, l.member_count
order by l.member_count desc, l.band_index, l.lsh_band
