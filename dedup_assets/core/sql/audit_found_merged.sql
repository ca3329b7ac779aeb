-- The probe's rows as found (audit_probe.FOUND_SCHEMA: per batch, one row per owner and text) with a
-- text's rows of several batches merged: a document not sampled stands for its text, once per
-- owner however many batches found it (the smallest doc_id; a row without a copy key is its own
-- text). {rows}: the rows, in memory or a file. Tens of millions with shared boilerplate: written to
-- a temporary table before sql/audit_true_pairs.sql orders them, as DuckDB could not spill this
-- grouping and that sort in one query. $1 = the file, where the rows are one. A row found twice
-- (the ray engine's workers' files, should a retried task cut its batches otherwise) counts once.
select owner, doc_id, min(jaccard) as jaccard, min(sample_place) as sample_place from {rows} where sample_place is not null
group by owner, doc_id
union all
select owner, min(doc_id), min(jaccard), null
from {rows}
where sample_place is null
group by owner, text_a, text_b, if(text_a is null, doc_id, null)
