-- The accepted edges whose two documents came from one WARC file, for a documents table that
-- names each document's WARC file (warc_filename: WARC input, or a table made from WARC files);
-- a document with an empty one counts its input file (source_file). No parameters.
with document_files as (
  select doc_id, coalesce(nullif(warc_filename::varchar, ''), source_file) as warc_file from {documents}
)
select count(*)
from {duplicate_pairs} p
join document_files l on l.doc_id = p.left_doc_id
join document_files r on r.doc_id = p.right_doc_id
where l.warc_file = r.warc_file
