-- Each new document's match in one reference: of the reference texts its text was scored with
-- (scored_texts: doc_id, content_hash, first_band, reference_doc_id, jaccard), the best at or
-- above the threshold, the smallest reference doc_id on a tie; every copy of the text takes it.
-- With the reference document's source file and row.
-- $1 = the reference's name, $2 = jaccard_threshold.
with best as (
  select content_hash, first_band, reference_doc_id, jaccard
  from scored_texts
  where jaccard >= $2
  qualify row_number() over (partition by content_hash, first_band order by jaccard desc, reference_doc_id) = 1
)
select
  f.doc_id,
  $1::varchar as reference,
  b.reference_doc_id,
  r.source_file as reference_source_file,
  r.input_row::bigint as reference_input_row,
  b.jaccard
from {fingerprinted} f
join best b on b.content_hash = f.content_hash and b.first_band = f.lsh_bands[1]
join {reference} r on r.doc_id = b.reference_doc_id
