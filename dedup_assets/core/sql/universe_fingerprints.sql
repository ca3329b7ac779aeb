-- The fingerprints one batch is deduplicated with: its own documents, and every earlier document
-- whose text shares a band key with one of them (the earlier texts' first copies are in
-- band_index) together with every copy of those texts. Within this set the one-shot candidate
-- query gives exactly the one-shot pairs of the batch's documents, because it holds both sides of
-- every such pair and each copy group's first copy. In position order, so that the first copy of a
-- copy group is the first in input order, as in a one-shot run over all batches.
-- $1 = the batch's first position (earlier documents are below it).
with new_keys as (
  select distinct
    (generate_subscripts(lsh_bands, 1) - 1)::smallint as band_index,
    unnest(lsh_bands) as lsh_band
  from {staged_fingerprints}
  where shingle_count > 0
),
touched as (
  select b.position
  from {band_index} b
  semi join new_keys k on k.band_index = b.band_index and k.lsh_band = b.lsh_band
  where b.position < $1
),
texts as (
  select distinct f.content_hash, f.lsh_bands[1] as first_band_key
  from {fingerprints} f
  semi join touched t on t.position = f.position
)
select f.position, false as is_new, f.doc_id, f.token_count, f.shingle_count, f.content_hash, f.signature, f.lsh_bands
from {fingerprints} f
semi join texts t on t.content_hash = f.content_hash and t.first_band_key = f.lsh_bands[1]
where f.position < $1 and f.shingle_count > 0
union all
select $1 + rowid, true, doc_id, token_count, shingle_count, content_hash, signature, lsh_bands
from {staged_fingerprints}
order by position
