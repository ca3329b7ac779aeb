-- Copy groups: documents of one normalized text (or, without tokens, one trimmed body), two or more of them, each group
-- with its first copy (the first in input order: the table's row order) and its number of
-- documents. Input order, not the smallest doc_id, so that documents read later never change an
-- earlier copy group's first copy: an incremental batch adds pairs and never replaces one. The key is the content
-- hash and the first band key, so that a 64-bit hash collision between different texts does not
-- fold them into one (their band keys differ); identical texts agree on both.
-- Small: one row per group, whatever the number of copies. No parameters.
select
  content_hash,
  lsh_bands[1] as first_band_key,
  arg_min(doc_id, rowid) as first_copy_doc_id,
  count(*) as copies
from {fingerprinted}
group by content_hash, first_band_key
having count(*) > 1
