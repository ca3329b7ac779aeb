-- The figures of one batch in the index, as one row: its documents, rejected rows and sequence
-- number; its candidate and duplicate pairs within the batch and with earlier batches; its kept
-- and removed documents (and those removed in favour of an earlier batch's); its bridges.
-- $1 = the batch key.
with batch as (select * from {batches} where batch_key = $1),
new_docs as (select doc_id, position from {fingerprints} where batch_key = $1),
pairs as (
  select p.is_duplicate,
         (p.left_doc_id in (select doc_id from new_docs)
          and p.right_doc_id in (select doc_id from new_docs)) as within
  from {pairs} p where p.batch_key = $1
),
decisions as (select * from {clusters} where batch_key = $1)
select
  (select documents from batch), (select rejected from batch), (select seq from batch),
  (select count(*) filter (where within) from pairs),
  (select count(*) filter (where not within) from pairs),
  (select count(*) filter (where within and is_duplicate) from pairs),
  (select count(*) filter (where not within and is_duplicate) from pairs),
  (select count(*) filter (where decision like 'kept%') from decisions),
  (select count(*) filter (where decision like 'removed%') from decisions),
  (select count(*) filter (where decision like 'removed%' and representative_batch <> $1) from decisions),
  (select count(*) from {bridges} where batch_key = $1)
