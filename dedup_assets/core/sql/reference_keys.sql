-- The band keys of every text of {fingerprinted}, each in its band: a text is one content hash
-- and first band key, named by its smallest doc_id (its copies have its keys), so that a copy
-- group is scored once against a reference. No parameters.
with texts as (
  select min(doc_id) as doc_id, content_hash, lsh_bands[1] as first_band, any_value(lsh_bands) as lsh_bands
  from {fingerprinted}
  group by content_hash, lsh_bands[1]
)
select doc_id, content_hash, first_band, generate_subscripts(lsh_bands, 1) as band, unnest(lsh_bands) as band_key
from texts
