-- The hot buckets (hot: band_index, lsh_band, texts, documents of every bucket over
-- max_bucket_size, which hot_buckets: skip leaves out of the self-join), each with its name as
-- messages give it and the first three of its doc_ids in byte order, band by band, key by key.
-- No parameters.
select
  h.band_index,
  h.lsh_band,
  printf('%03d:%016x', h.band_index, h.lsh_band) as bucket_key,
  h.texts,
  h.documents,
  list(m.doc_id order by m.doc_id)[1:3] as example_doc_ids
from hot h
join {band_memberships} m on m.band_index = h.band_index and m.lsh_band = h.lsh_band
group by h.band_index, h.lsh_band, h.texts, h.documents
order by h.band_index, h.lsh_band
