-- Candidate pairs of a new text and a reference text: the two share a band key (the same key in
-- the same band), as two documents of the one-shot join do; same_text where they are one text.
-- {new_keys} and {reference_keys} are sql/reference_keys.sql of each side, {buckets} the buckets
-- they share with how many texts each holds. sql/reference_matches.sql gives every copy of a new
-- text its text's match.
-- $1 = the texts above which a shared bucket is left out (hot_buckets skip); null: none is.
select distinct
  n.doc_id,
  n.content_hash,
  n.first_band,
  r.doc_id as reference_doc_id,
  n.content_hash = r.content_hash and n.first_band = r.first_band as same_text
from {new_keys} n
join {buckets} b on b.band = n.band and b.band_key = n.band_key
join {reference_keys} r on r.band = n.band and r.band_key = n.band_key
where $1 is null or b.texts <= $1
order by n.doc_id, reference_doc_id
