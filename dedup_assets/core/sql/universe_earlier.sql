-- The earlier documents one batch is deduplicated with: every earlier document whose text
-- shares a band key with one of the batch's documents (band_index holds the band keys of each
-- earlier text's first copy), and every copy of those texts. With the batch, they hold both
-- sides of every one-shot pair of the batch's documents and each copy group's first copy.
-- Narrow columns only, in position order; their signatures and bodies come from the payload files.
-- $1 = the batch's first position (earlier documents are below it).
with new_keys as (
  select distinct
    (generate_subscripts(lsh_bands, 1) - 1)::smallint as band_index,
    unnest(lsh_bands) as lsh_band
  from {staged_fingerprints}
),
touched as materialized (
  select b.position
  from {band_index} b
  semi join new_keys k on k.band_index = b.band_index and k.lsh_band = b.lsh_band
  where b.position < $1
),
texts as materialized (
  select distinct f.content_hash, f.first_band_key
  from {fingerprints} f
  semi join touched t on t.position = f.position
)
select f.position, f.doc_id, f.token_count, f.shingle_count, f.content_hash
from {fingerprints} f
semi join texts t on t.content_hash = f.content_hash and t.first_band_key = f.first_band_key
where f.position < $1
order by f.position
