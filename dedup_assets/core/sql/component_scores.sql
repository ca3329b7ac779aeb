-- Verification's exact Jaccard of every scored pair of two distinct texts of the duplicate
-- components (component_roots.text_doc_id), by text_index (the order of sql/component_texts.sql),
-- left_index < right_index. No parameters.
with texts as (
  select text_doc_id, dense_rank() over (order by text_doc_id) - 1 as text_index
  from (select distinct text_doc_id from component_roots)
)
select
  least(l.text_index, r.text_index) as left_index,
  greatest(l.text_index, r.text_index) as right_index,
  s.jaccard
from {scored_pairs} s
join texts l on l.text_doc_id = s.left_doc_id
join texts r on r.text_doc_id = s.right_doc_id
where l.text_index <> r.text_index
