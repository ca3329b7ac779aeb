-- Copy groups: documents with shingles and one normalized text, two or more of them, each group
-- with its first copy (the smallest doc_id) and its number of documents. The key is the content
-- hash and the first band key, so that a 64-bit hash collision between different texts does not
-- fold them into one (their band keys differ); identical texts agree on both.
-- Small: one row per group, whatever the number of copies. No parameters.
select
  content_hash,
  lsh_bands[1] as first_band_key,
  min(doc_id) as first_copy_doc_id,
  count(*) as copies
from {fingerprinted}
where shingle_count > 0
group by content_hash, first_band_key
having count(*) > 1
