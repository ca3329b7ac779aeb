-- The distinct texts of the duplicate components (component_roots.text_doc_id), in doc_id order
-- (the text_index of sql/component_members.sql and sql/component_scores.sql), with their shingle
-- counts as fingerprinted. No parameters.
select t.text_doc_id, f.shingle_count
from (select distinct text_doc_id from component_roots) t
join {fingerprinted} f on f.doc_id = t.text_doc_id
order by t.text_doc_id
