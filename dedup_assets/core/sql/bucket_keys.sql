-- The band keys of every distinct text, once, with the document that has it and
-- how many documents share it: the first copy of each copy group (copy_groups) and every
-- document that has no copies. No parameters.
select f.doc_id, f.lsh_bands, coalesce(g.copies, 1) as copies
from {fingerprinted} f
left join copy_groups g on g.content_hash = f.content_hash and g.first_band_key = f.lsh_bands[1]
where g.first_copy_doc_id is null or g.first_copy_doc_id = f.doc_id
