-- Adds the band keys of the staged batch's new texts to band_index: each document whose text (content hash and first band key) no earlier document has, and that is its text's
-- first document in the batch. A copy shares every band key with its first copy, so it would add
-- nothing a new batch could not find through the first copy.
-- $1 = the batch's first position.
insert into {band_index}
with staged as (
  select $1 + rowid as position, content_hash, lsh_bands
  from {staged_fingerprints}
  qualify row_number() over (partition by content_hash, lsh_bands[1] order by rowid) = 1
),
earlier as (
  select content_hash, first_band_key
  from {fingerprints}
  where position < $1
),
first_copies as (
  select s.* from staged s
  anti join earlier e on e.content_hash = s.content_hash and e.first_band_key = s.lsh_bands[1]
)
select (generate_subscripts(lsh_bands, 1) - 1)::smallint, unnest(lsh_bands), position
from first_copies
