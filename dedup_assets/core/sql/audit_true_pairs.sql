-- The recall audit's true pairs (audit_probe.AUDIT_PAIRS_SCHEMA) from the probe's rows as found
-- (audit_probe.FOUND_SCHEMA: per batch, one row per owner and text): a document not sampled stands
-- for its text, once per owner however many batches found it (the smallest doc_id; a row without
-- a copy key is its own text), and the owner is named by its first sampled document. {rows}: the
-- rows, in memory or a file; owners: each owner's number and sampled_doc_id. The rows can be
-- tens of millions (shared boilerplate): DuckDB merges and orders them, spilling as it needs.
with merged as (
  select owner, doc_id, jaccard, sample_place from {rows} where sample_place is not null
  union all
  select owner, min(doc_id), min(jaccard), null
  from {rows}
  where sample_place is null
  group by owner, text_a, text_b, if(text_a is null, doc_id, null)
)
select o.sampled_doc_id, m.doc_id, m.jaccard, m.sample_place::integer as sample_place
from merged m
join owners o on o.owner = m.owner
order by o.sampled_doc_id, m.doc_id
