-- Candidate pairs of a new text and a reference text: the two share a band key (the same key in
-- the same band), as two documents of the one-shot join do. A text stands for its copies (one
-- content hash and first band key, named by its smallest doc_id), on both sides, so a copy group
-- is scored once; sql/reference_matches.sql gives every copy its text's match.
-- No parameters.
with new_texts as (
  select min(doc_id) as doc_id, content_hash, lsh_bands[1] as first_band, any_value(lsh_bands) as lsh_bands
  from {fingerprinted}
  group by content_hash, lsh_bands[1]
),
reference_texts as (
  select min(doc_id) as doc_id, any_value(lsh_bands) as lsh_bands
  from {reference}
  group by content_hash, lsh_bands[1]
),
new_keys as (
  select doc_id, content_hash, first_band, generate_subscripts(lsh_bands, 1) as band, unnest(lsh_bands) as band_key
  from new_texts
),
reference_keys as (
  select doc_id, generate_subscripts(lsh_bands, 1) as band, unnest(lsh_bands) as band_key
  from reference_texts
)
select distinct n.doc_id, n.content_hash, n.first_band, r.doc_id as reference_doc_id
from new_keys n
join reference_keys r on r.band = n.band and r.band_key = n.band_key
order by n.doc_id, reference_doc_id
